//! ggml's whole-matrix matmul paths (`ggml_mul_mat` on the CPU backend, plain and
//! repacked) through the per-tier `mulmat` driver that `ci/oracle` builds.
//!
//! Without the oracle each trial is reported ignored with the reason, unless
//! `TIERCHECK_REQUIRE_ORACLE=1`, when it fails with that reason.
//!
//! Trials:
//! - `x64/plain_equals_ref/<type>`: the x64 tier's plain matmul is the generic `vec_dot`
//!   per (activation row, weight row) pair, so it equals the `ref` lane's matmul bit for
//!   bit, at m = 1, 4, 5 (below the x86 "tiled" K-quant path's m >= 8 threshold) and, as
//!   the x64 build compiles that path out, at m = 8 and 9 too;
//! - `x64/repack_has_no_layout`: without AVX2 no type is repacked;
//! - `haswell/repack/<type>`: Q4_0 and Q4_K are repacked (8x8) at n = 8 and 16, and the
//!   result is close to the plain matmul; n = 12 has no layout;
//! - `haswell/no_repack_layout/<type>`: Q6_K and Q8_0 have no AVX2 repack layout;
//! - `haswell/threads_1_vs_2`: 1 and 2 threads give identical bytes, plain and repacked;
//! - `haswell/q4_K_plain_vs_repack_differ`: the repacked kernels round differently;
//! - `haswell/plain_equals_avx2_vec_dot`: below m = 8 the haswell plain matmul equals the
//!   tier's own `vec_dot` (called in process through `GgmlLib`) per row pair;
//! - `haswell/tiled_path_from_m8`: from m = 8 on, K-quant weights take ggml's x86 "tiled"
//!   path, which rounds differently from `vec_dot` (close, not equal);
//!   `GGML_CPU_TILED_MM=0` restores equality; Q4_0/Q8_0 (llamafile's tinyBLAS) stay equal;
//! - `driver/rejects_bad_inputs`: the driver's exit codes for malformed requests.

use std::process::Command;

use libtest_mimic::{Completion, Failed, Trial};
use tiercheck_core::quant::weights;
use tiercheck_core::weight_matrix::WeightMatrix;
use tiercheck_core::{lane, GgmlType};
use tiercheck_model::kernel_inputs::{Rng, RowKind};
use tiercheck_oracle::{
    load_tier, GgmlLib, MulmatDriver, MulmatMode, MulmatResult, OracleConfig, OracleError, Tier,
};
use tiercheck_testkit::suites::{trial_name, Selection};

use MulmatMode::{Plain, Repack};

/// The weight types every lane multiplies.
const TYPES: [GgmlType; 4] = [GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K];
/// (k, n, m) shapes below the tiled path's m >= 8.
const SHAPES: [(usize, usize, usize); 3] = [(256, 8, 1), (512, 16, 4), (512, 16, 5)];

type Check = Box<dyn FnOnce(&Drivers) -> Result<(), String> + Send>;

/// This suite's name, the first part of its trials' names.
pub const SUITE: &str = "oracle_mulmat";

/// The suite's trials, in the order they run.
pub fn trials(selection: &Selection) -> Vec<Trial> {
    let mut tests: Vec<(String, Check)> = Vec::new();
    for ty in TYPES {
        tests.push((
            format!("x64/plain_equals_ref/{}", ty.name()),
            Box::new(move |d: &Drivers| x64_plain_equals_ref(d, ty)),
        ));
    }
    tests.push(("x64/repack_has_no_layout".into(), Box::new(x64_repack_has_no_layout)));
    for (ty, layout) in [(GgmlType::Q4_0, "q4_0_8x8"), (GgmlType::Q4_K, "q4_K_8x8")] {
        tests.push((
            format!("haswell/repack/{}", ty.name()),
            Box::new(move |d: &Drivers| haswell_repacks(d, ty, layout)),
        ));
    }
    for ty in [GgmlType::Q6_K, GgmlType::Q8_0] {
        tests.push((
            format!("haswell/no_repack_layout/{}", ty.name()),
            Box::new(move |d: &Drivers| haswell_has_no_repack_layout(d, ty)),
        ));
    }
    tests.push(("haswell/threads_1_vs_2".into(), Box::new(haswell_threads_1_vs_2)));
    tests.push((
        "haswell/q4_K_plain_vs_repack_differ".into(),
        Box::new(haswell_q4_k_plain_vs_repack_differ),
    ));
    tests.push((
        "haswell/plain_equals_avx2_vec_dot".into(),
        Box::new(haswell_plain_equals_avx2_vec_dot),
    ));
    tests.push(("haswell/tiled_path_from_m8".into(), Box::new(haswell_tiled_path_from_m8)));
    tests.push(("driver/rejects_bad_inputs".into(), Box::new(driver_rejects_bad_inputs)));

    let mut trials: Vec<Trial> = tests
        .into_iter()
        .map(|(name, check)| {
            tiercheck_testkit::claims::tracked(
                trial_name(SUITE, format!("oracle/mulmat/{name}")),
                move || {
                    let drivers = match Drivers::from_env() {
                        Ok(d) => d,
                        Err(why) => return unavailable(why),
                    };
                    check(&drivers)?;
                    Ok(Completion::Completed)
                },
            )
        })
        .collect();
    let claims = tiercheck_testkit::claims::claim_trials(SUITE, selection, &trials);
    trials.extend(claims);
    trials
}

fn unavailable(why: String) -> Result<Completion, Failed> {
    if std::env::var("TIERCHECK_REQUIRE_ORACLE").as_deref() == Ok("1") {
        Err(format!("TIERCHECK_REQUIRE_ORACLE=1 but the oracle is unavailable: {why}").into())
    } else {
        Ok(Completion::ignored_with(format!("oracle unavailable ({why})")))
    }
}

/// Both tiers' drivers.
struct Drivers {
    cfg: OracleConfig,
    x64: MulmatDriver,
    haswell: MulmatDriver,
}

impl Drivers {
    fn from_env() -> Result<Drivers, String> {
        let cfg = OracleConfig::from_env();
        let x64 = MulmatDriver::for_tier(&cfg, Tier::X64).map_err(|e| e.to_string())?;
        let haswell = MulmatDriver::for_tier(&cfg, Tier::Haswell).map_err(|e| e.to_string())?;
        Ok(Drivers { cfg, x64, haswell })
    }
}

/// One matmul input: quantized weights (`n` rows of `k`) and `m` activation rows.
struct Case {
    ty: GgmlType,
    k: usize,
    n: usize,
    m: usize,
    seed: u64,
    w: Vec<u8>,
    x: Vec<f32>,
}

impl Case {
    /// Weights: normal values quantized with the reference quantizer. Activations:
    /// normal rows, or (`mixed`) one adversarial row family per row.
    fn new(ty: GgmlType, (k, n, m): (usize, usize, usize), seed: u64, mixed: bool) -> Case {
        let mut rng = Rng::new(seed ^ (u64::from(ty.id()) << 32) ^ ((k * 131 + n * 7 + m) as u64));
        let src = rng.normals(n * k, 1.0);
        let w = weights::quantize(ty, &src, n, k).expect("quantize");
        let x = (0..m)
            .flat_map(|i| {
                let kind = if mixed {
                    RowKind::FINITE[(seed as usize + i) % RowKind::FINITE.len()]
                } else {
                    RowKind::Normal
                };
                kind.row(&mut rng, k)
            })
            .collect();
        Case { ty, k, n, m, seed, w, x }
    }

    fn label(&self) -> String {
        format!("{} k={} n={} m={} seed {}", self.ty.name(), self.k, self.n, self.m, self.seed)
    }

    fn run(
        &self,
        d: &MulmatDriver,
        mode: MulmatMode,
        threads: usize,
    ) -> Result<MulmatResult, OracleError> {
        d.run(mode, self.ty.id(), self.k, self.n, self.m, threads, &self.w, &self.x)
    }

    fn must_run(
        &self,
        d: &MulmatDriver,
        mode: MulmatMode,
        threads: usize,
    ) -> Result<MulmatResult, String> {
        self.run(d, mode, threads).map_err(|e| format!("{} ({}): {e}", self.label(), mode.name()))
    }
}

/// None when `got` and `want` are the same bits; otherwise how many values differ and
/// where the first one is.
fn bit_diff(got: &[f32], want: &[f32], n: usize) -> Option<String> {
    if got.len() != want.len() {
        return Some(format!("length {} vs {}", got.len(), want.len()));
    }
    let bad: Vec<usize> =
        (0..got.len()).filter(|&i| got[i].to_bits() != want[i].to_bits()).collect();
    let &first = bad.first()?;
    Some(format!(
        "{} of {} values differ; first at row {} col {}: {:e} ({:#010x}) vs {:e} ({:#010x})",
        bad.len(),
        got.len(),
        first / n,
        first % n,
        got[first],
        got[first].to_bits(),
        want[first],
        want[first].to_bits()
    ))
}

/// Joins failures into one message (the first eight).
fn report(what: &str, cases: usize, bad: Vec<String>) -> Result<(), String> {
    if bad.is_empty() {
        return Ok(());
    }
    let mut msg = format!("{what}: {} of {cases} cases failed:\n", bad.len());
    for b in bad.iter().take(8) {
        msg.push_str(&format!("  {b}\n"));
    }
    if bad.len() > 8 {
        msg.push_str(&format!("  ... and {} more\n", bad.len() - 8));
    }
    Err(msg)
}

fn x64_plain_equals_ref(d: &Drivers, ty: GgmlType) -> Result<(), String> {
    let reflane = lane("ref").ok_or("no ref lane")?;
    let shapes = SHAPES.iter().copied().chain([(256, 8, 8), (512, 16, 9)]);
    let (mut cases, mut bad) = (0, Vec::new());
    for shape in shapes {
        for seed in 0..3 {
            let c = Case::new(ty, shape, seed, seed > 0);
            let got = c.must_run(&d.x64, Plain, 1)?;
            if got.repacked || got.buft != "CPU" {
                return Err(format!("{}: plain run reports {got:?}", c.label()));
            }
            let wm = WeightMatrix::new(ty, c.n, c.k, &c.w).map_err(|e| e.to_string())?;
            let want = reflane.portable.matmul(&wm, &c.x, c.m).map_err(|e| e.to_string())?;
            cases += 1;
            if let Some(diff) = bit_diff(&got.out, &want, c.n) {
                bad.push(format!("{}: {diff}", c.label()));
            }
        }
    }
    report(&format!("x64 plain matmul vs ref, {}", ty.name()), cases, bad)
}

fn x64_repack_has_no_layout(d: &Drivers) -> Result<(), String> {
    for ty in TYPES {
        let c = Case::new(ty, (256, 16, 2), 1, false);
        match c.run(&d.x64, Repack, 1) {
            Err(OracleError::NoRepackLayout { .. }) => {}
            other => return Err(format!("{}: x64 repack gave {other:?}", c.label())),
        }
    }
    Ok(())
}

/// Largest |a - b| relative to the largest |b|.
fn rel_max_diff(a: &[f32], b: &[f32]) -> f64 {
    let scale = b.iter().fold(0f64, |s, &v| s.max(f64::from(v).abs())).max(f64::MIN_POSITIVE);
    a.iter().zip(b).fold(0f64, |s, (&x, &y)| s.max((f64::from(x) - f64::from(y)).abs())) / scale
}

fn haswell_repacks(d: &Drivers, ty: GgmlType, layout: &str) -> Result<(), String> {
    let mut worst = 0f64;
    for shape in [(256, 8, 1), (256, 8, 4), (512, 16, 1), (512, 16, 4), (512, 16, 5), (512, 16, 9)]
    {
        let c = Case::new(ty, shape, 7, false);
        let r = c.must_run(&d.haswell, Repack, 1)?;
        if !r.repacked || r.buft != "CPU_REPACK" || r.layout.as_deref() != Some(layout) {
            return Err(format!(
                "{}: expected repacked=1 buft=CPU_REPACK layout={layout}, got repacked={} \
                 buft={} layout={:?}",
                c.label(),
                r.repacked,
                r.buft,
                r.layout
            ));
        }
        let plain = c.must_run(&d.haswell, Plain, 1)?;
        let rel = rel_max_diff(&r.out, &plain.out);
        worst = worst.max(rel);
        if rel > 1e-5 {
            return Err(format!("{}: repacked result is {rel:e} (relative) from plain", c.label()));
        }
    }
    eprintln!("{}: repacked vs plain, worst relative max difference {worst:e}", ty.name());
    // Rows not a multiple of 8: no layout, so ggml keeps such a weight out of CPU_REPACK.
    let c = Case::new(ty, (256, 12, 2), 1, false);
    match c.run(&d.haswell, Repack, 1) {
        Err(OracleError::NoRepackLayout { n: 12, .. }) => Ok(()),
        other => Err(format!("{}: expected no repack layout, got {other:?}", c.label())),
    }
}

fn haswell_has_no_repack_layout(d: &Drivers, ty: GgmlType) -> Result<(), String> {
    for shape in [(256, 8, 1), (512, 16, 4)] {
        let c = Case::new(ty, shape, 3, false);
        match c.run(&d.haswell, Repack, 1) {
            Err(OracleError::NoRepackLayout { ty: name, n, detail }) => {
                if name != ty.name() || n != c.n || detail.is_empty() {
                    return Err(format!("{}: error names {name}, n = {n}: {detail:?}", c.label()));
                }
            }
            other => {
                return Err(format!("{}: expected no repack layout, got {other:?}", c.label()))
            }
        }
        // The plain path is there for it.
        c.must_run(&d.haswell, Plain, 1)?;
    }
    Ok(())
}

fn haswell_threads_1_vs_2(d: &Drivers) -> Result<(), String> {
    let (mut cases, mut bad) = (0, Vec::new());
    for ty in TYPES {
        for shape in [(256, 8, 1), (512, 16, 5), (512, 64, 9)] {
            let c = Case::new(ty, shape, 11, true);
            for mode in [Plain, Repack] {
                let one = match c.run(&d.haswell, mode, 1) {
                    Err(OracleError::NoRepackLayout { .. }) if mode == Repack => continue,
                    r => r.map_err(|e| format!("{}: {e}", c.label()))?,
                };
                let two = c.must_run(&d.haswell, mode, 2)?;
                cases += 1;
                if let Some(diff) = bit_diff(&two.out, &one.out, c.n) {
                    bad.push(format!("{} {}: 2 vs 1 threads: {diff}", c.label(), mode.name()));
                }
            }
        }
    }
    if cases < 18 {
        return Err(format!("only {cases} cases ran"));
    }
    report("haswell 1 vs 2 threads", cases, bad)
}

fn haswell_q4_k_plain_vs_repack_differ(d: &Drivers) -> Result<(), String> {
    let (mut cases, mut differ) = (0, Vec::new());
    for shape in [(256, 8, 1), (256, 8, 4), (256, 16, 5), (512, 16, 1), (512, 16, 4), (512, 16, 5)]
    {
        for seed in 0..4 {
            let c = Case::new(GgmlType::Q4_K, shape, 100 + seed, false);
            let plain = c.must_run(&d.haswell, Plain, 1)?;
            let repack = c.must_run(&d.haswell, Repack, 1)?;
            cases += 1;
            if bit_diff(&repack.out, &plain.out, c.n).is_some() {
                differ.push(c.label());
            }
        }
    }
    eprintln!("q4_K plain vs repack: {} of {cases} cases differ bitwise", differ.len());
    if differ.len() * 2 < cases {
        return Err(format!(
            "plain and repacked q4_K differ in only {} of {cases} cases ({differ:?})",
            differ.len()
        ));
    }
    Ok(())
}

/// The haswell tier's own `vec_dot`, per (activation row, weight row) pair, in process.
fn haswell_vec_dot_matmul(lib: &GgmlLib, c: &Case) -> Result<Vec<f32>, String> {
    let vdt = lib.vec_dot_type(c.ty.id()).map_err(|e| e.to_string())?;
    let rb = c.ty.row_bytes(c.k).ok_or("row size")?;
    let mut want = vec![0f32; c.m * c.n];
    for (i, xi) in c.x.chunks_exact(c.k).enumerate() {
        let act = lib.from_float(vdt, xi).map_err(|e| e.to_string())?;
        for j in 0..c.n {
            want[i * c.n + j] = lib
                .vec_dot(c.ty.id(), c.k, &c.w[j * rb..(j + 1) * rb], &act)
                .map_err(|e| e.to_string())?;
        }
    }
    Ok(want)
}

fn haswell_plain_equals_avx2_vec_dot(d: &Drivers) -> Result<(), String> {
    let lib = load_tier(&d.cfg, Tier::Haswell).map_err(|e| e.to_string())?;
    let (mut cases, mut bad) = (0, Vec::new());
    for ty in TYPES {
        for shape in SHAPES {
            let c = Case::new(ty, shape, 21, true);
            let got = c.must_run(&d.haswell, Plain, 1)?;
            let want = haswell_vec_dot_matmul(&lib, &c)?;
            cases += 1;
            if let Some(diff) = bit_diff(&got.out, &want, c.n) {
                bad.push(format!("{}: {diff}", c.label()));
            }
        }
    }
    report("haswell plain matmul vs its vec_dot", cases, bad)
}

fn haswell_tiled_path_from_m8(d: &Drivers) -> Result<(), String> {
    let lib = load_tier(&d.cfg, Tier::Haswell).map_err(|e| e.to_string())?;
    let untiled = d.haswell.clone().with_env("GGML_CPU_TILED_MM", "0");
    let (mut cases, mut bad) = (0, Vec::new());
    for ty in TYPES {
        let k_quant = ty.block_size() == 256;
        let mut tiled_differs = 0;
        for shape in [(256, 8, 7), (256, 8, 8), (512, 16, 9), (512, 16, 16), (1024, 32, 33)] {
            for seed in 0..2 {
                let c = Case::new(ty, shape, 31 + seed, seed == 1);
                let want = haswell_vec_dot_matmul(&lib, &c)?;
                let default = c.must_run(&d.haswell, Plain, 1)?;
                let off = c.must_run(&untiled, Plain, 1)?;
                cases += 1;
                if let Some(diff) = bit_diff(&off.out, &want, c.n) {
                    bad.push(format!("{} GGML_CPU_TILED_MM=0: {diff}", c.label()));
                }
                let differs = bit_diff(&default.out, &want, c.n);
                if c.m >= 8 && k_quant {
                    tiled_differs += usize::from(differs.is_some());
                    if rel_max_diff(&default.out, &want) > 1e-5 {
                        bad.push(format!("{}: tiled result not close to vec_dot", c.label()));
                    }
                } else if let Some(diff) = differs {
                    bad.push(format!("{}: {diff}", c.label()));
                }
            }
        }
        if k_quant && tiled_differs == 0 {
            bad.push(format!("{}: the tiled path (m >= 8) never differed from vec_dot", ty.name()));
        }
    }
    report("haswell plain matmul at m >= 8", cases, bad)
}

fn driver_rejects_bad_inputs(d: &Drivers) -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let p = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let q4k = GgmlType::Q4_K.id().to_string();
    std::fs::write(p("w"), vec![0u8; 144 * 8]).unwrap();
    std::fs::write(p("x"), vec![0u8; 256 * 4]).unwrap();
    let run = |args: &[&str]| -> Result<(i32, String), String> {
        let out = Command::new(d.haswell.path())
            .args(args)
            .output()
            .map_err(|e| format!("running the driver: {e}"))?;
        let code = out.status.code().ok_or_else(|| format!("{args:?}: killed: {}", out.status))?;
        Ok((code, String::from_utf8_lossy(&out.stderr).into_owned()))
    };
    let (w, x, o, bad_out) = (p("w"), p("x"), p("out"), p("no/such/dir/out"));
    let cases: Vec<(Vec<&str>, i32, &str)> = vec![
        (vec![], 2, "expected 9 arguments"),
        (vec!["fast", &q4k, "256", "8", "1", "1", &w, &x, &o], 2, "mode must be"),
        (vec!["plain", "4", "256", "8", "1", "1", &w, &x, &o], 2, "not in use"),
        (vec!["plain", "99", "256", "8", "1", "1", &w, &x, &o], 2, "not a ggml type"),
        (vec!["plain", &q4k, "128", "8", "1", "1", &w, &x, &o], 2, "block size"),
        (vec!["plain", &q4k, "256", "8", "2", "1", &w, &x, &o], 2, "activations file"),
        (vec!["plain", &q4k, "256", "16", "1", "1", &w, &x, &o], 2, "weights file"),
        (vec!["plain", &q4k, "256", "8", "1", "0", &w, &x, &o], 2, "threads"),
        (vec!["plain", &q4k, "256", "8", "x", "1", &w, &x, &o], 2, "k, n and m"),
        (vec!["plain", "15", "256", "1", "1", "1", &x, &x, &o], 2, "no matmul"),
        (vec!["repack", "14", "256", "8", "1", "1", &w, &x, &o], 2, "weights file"),
        (vec!["plain", &q4k, "256", "8", "1", "1", &w, &x, &bad_out], 2, "cannot create"),
    ];
    for (args, code, msg) in cases {
        let (got, stderr) = run(&args)?;
        if got != code || !stderr.contains(msg) {
            return Err(format!(
                "{args:?}: exit {got} with {stderr:?}, expected exit {code} mentioning {msg:?}"
            ));
        }
    }
    Ok(())
}
