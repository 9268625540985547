//! The aarch64 ggml oracle: ggml cross-built for aarch64 (flavours dotprod and i8mm) and run
//! under qemu-user through `ArmDriver`, checked against the facts docs/ORACLE.md and docs/NUMERICS.md
//! state about it.
//!
//! Without the aarch64 oracle each trial is reported ignored with the reason, unless
//! `TIERCHECK_REQUIRE_ORACLE=1`, when it fails with that reason.
//!
//! Trials (`<tier>` is `dotprod` or `i8mm`):
//! - `<tier>/info_and_traits`: the build's features (dotprod; i8mm only in the i8mm
//!   flavour; llamafile compiled out of the i8mm flavour) and `vec_dot` rows per call (2
//!   for Q4_0/Q8_0/Q4_K/Q6_K on i8mm, else 1); prints the cost of one qemu start;
//! - `<tier>/quantize_vs_ref`: `ggml_quantize_chunk` as compiled for aarch64 equals the
//!   reference quantizers (`weights::quantize`, the x86-64 compilation) for Q8_0 and Q4_0
//!   on ordinary rows (every finite row family, N(0,1) rows). GCC contracts multiply-adds
//!   in ggml-base on aarch64, so Q4_K and Q6_K weights differ in some rows, and Q4_0 ones
//!   in rows built so that `x * id` rounds onto a tie: those counts are printed, not
//!   judged;
//! - `<tier>/from_float_q8_K`: the q8_K activation quantizer equals
//!   `ActRule::Q8KFusedNearest` (GCC fuses `nearest_int(iscale*x)` into one fmla), not
//!   `ActRule::Q8KRef`, which rows built to sit on rounding ties tell apart;
//! - `<tier>/from_float_q8_0`: the NEON q8_0 quantizer equals `ActRule::Q8_0Neon` on
//!   every row family (non-finite rows included); it rounds to nearest even where
//!   `ActRule::Q8_0Ref` rounds halves away from zero, so the tie rows must differ from the
//!   latter (differing rows are counted per family);
//! - `<tier>/repack_layouts`: the layout ggml picks per type (dotprod q4_0_4x4, q4_K_8x4,
//!   q6_K_8x4, q8_0_4x4; i8mm q4_0_4x8, q4_K_8x8, q6_K_8x8, q8_0_4x8), 1 vs 2 threads
//!   identical, n = 12 has no K-quant layout; all in one batch run of the driver;
//! - `dotprod/plain_mulmat_vs_vec_dot`: K-quant plain matmul equals `vec_dot` for every m;
//!   Q4_0/Q8_0 equal it at m = 1 (at m >= 2 llamafile's tinyBLAS runs: counted);
//! - `i8mm/plain_mulmat_uses_the_2x2_tile`: at m = 4 the plain matmul equals the nrc = 2
//!   `vec_dot` tiles (which pins down the documented 2x2 output layout), at m = 1 and 5 the
//!   nrc = 1 `vec_dot`;
//! - `<tier>/sigill_on_a_cpu_without_its_extensions`: the dotprod driver on cortex-a53 and
//!   the i8mm driver on neoverse-n1 die of SIGILL, reported as an error naming the signal;
//! - `driver/rejects_bad_requests`: unsupported requests are errors, and a batch with a
//!   failing job in the middle answers each job as single runs would.

use std::time::Instant;

use libtest_mimic::{Completion, Failed, Trial};
use tiercheck_core::quant::{weights, ActRule};
use tiercheck_core::GgmlType;
use tiercheck_model::kernel_inputs::{Rng, RowKind};
use tiercheck_oracle::{
    ArmDriver, ArmTier, MulmatJob, MulmatMode, MulmatResult, OracleConfig, OracleError,
};
use tiercheck_testkit::suites::{trial_name, Selection};

use MulmatMode::{Plain, Repack};

/// The weight types every lane multiplies.
const TYPES: [GgmlType; 4] = [GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K];

type Check = Box<dyn FnOnce(&ArmDriver) -> Result<(), String> + Send>;

/// This suite's name, the first part of its trials' names.
pub const SUITE: &str = "oracle_arm";

/// The suite's trials, in the order they run.
pub fn trials(_selection: &Selection) -> Vec<Trial> {
    let mut tests: Vec<(String, ArmTier, Check)> = Vec::new();
    for tier in ArmTier::ALL {
        let short = short(tier);
        tests.push((format!("{short}/info_and_traits"), tier, Box::new(info_and_traits)));
        tests.push((format!("{short}/quantize_vs_ref"), tier, Box::new(quantize_vs_ref)));
        tests.push((format!("{short}/from_float_q8_K"), tier, Box::new(from_float_q8_k)));
        tests.push((format!("{short}/from_float_q8_0"), tier, Box::new(from_float_q8_0)));
        tests.push((format!("{short}/repack_layouts"), tier, Box::new(repack_layouts)));
        tests.push((
            format!("{short}/sigill_on_a_cpu_without_its_extensions"),
            tier,
            Box::new(sigill_without_extensions),
        ));
    }
    tests.push((
        "dotprod/plain_mulmat_vs_vec_dot".into(),
        ArmTier::Dotprod,
        Box::new(dotprod_plain_mulmat_vs_vec_dot),
    ));
    tests.push((
        "i8mm/plain_mulmat_uses_the_2x2_tile".into(),
        ArmTier::I8mm,
        Box::new(i8mm_plain_mulmat_uses_the_2x2_tile),
    ));
    tests.push((
        "driver/cache_recomputes_bitwise".into(),
        ArmTier::I8mm,
        Box::new(driver_cache_recomputes_bitwise),
    ));
    tests.push((
        "driver/rejects_bad_requests".into(),
        ArmTier::I8mm,
        Box::new(rejects_bad_requests),
    ));

    let trials = tests
        .into_iter()
        .map(|(name, tier, check)| {
            Trial::ignorable_test(trial_name(SUITE, format!("oracle/arm/{name}")), move || {
                let driver = match ArmDriver::for_tier(&OracleConfig::from_env(), tier) {
                    Ok(d) => d,
                    Err(OracleError::Unavailable(why)) => return unavailable(why),
                    Err(e) => return Err(format!("{tier}: {e}").into()),
                };
                match check(&driver) {
                    Ok(()) => Ok(Completion::Completed),
                    Err(e) => match e.strip_prefix(NOT_HERE) {
                        Some(why) => Ok(Completion::ignored_with(why)),
                        None => Err(e.into()),
                    },
                }
            })
        })
        .collect();
    trials
}

/// A check's error that means "cannot be checked on this host" (the rest is the reason):
/// the trial is ignored with it.
const NOT_HERE: &str = "not checkable here: ";

fn short(tier: ArmTier) -> &'static str {
    match tier {
        ArmTier::Dotprod => "dotprod",
        ArmTier::I8mm => "i8mm",
        ArmTier::Sve128 => "sve128",
        ArmTier::Sve256 => "sve256",
    }
}

fn unavailable(why: String) -> Result<Completion, Failed> {
    if std::env::var("TIERCHECK_REQUIRE_ORACLE").as_deref() == Ok("1") {
        Err(format!("TIERCHECK_REQUIRE_ORACLE=1 but the aarch64 oracle is unavailable: {why}")
            .into())
    } else {
        Ok(Completion::ignored_with(format!("aarch64 oracle unavailable ({why})")))
    }
}

fn err(e: OracleError) -> String {
    e.to_string()
}

/// Rows of `k` values, one per entry of `kinds`, cycling through them.
fn rows(rng: &mut Rng, kinds: &[RowKind], count: usize, k: usize) -> Vec<f32> {
    (0..count).flat_map(|i| kinds[i % kinds.len()].row(rng, k)).collect()
}

/// A row whose q8_K products `x * iscale` round, in f32, to exactly j + 0.5 while the exact
/// product is not a tie: the fused and the unfused `nearest_int(iscale * x)` disagree on
/// about half of such values. Each 256-block starts with its (signed) maximum `mx`, so
/// iscale = -127 / mx, as `quantize_row_q8_K_ref` computes it.
fn near_tie_q8_k_row(rng: &mut Rng, k: usize) -> Vec<f32> {
    let mut x = vec![0f32; k];
    for b in x.chunks_mut(256) {
        let sign = if rng.below(2) == 0 { 1.0 } else { -1.0 };
        let mx = sign * rng.range(40.0, 126.0);
        let iscale = -127.0f32 / mx;
        b[0] = mx;
        for v in b.iter_mut().skip(1) {
            let t = (rng.below(240) as f32 - 120.0) + 0.5;
            let x0 = t / iscale;
            let near =
                (-3i32..=3).map(|d| f32::from_bits((x0.to_bits() as i32 + d) as u32)).find(|&c| {
                    c * iscale == t
                        && f64::from(c) * f64::from(iscale) != f64::from(t)
                        && c.abs() < mx.abs()
                });
            *v = near.unwrap_or(x0.clamp(-mx.abs() * 0.99, mx.abs() * 0.99));
        }
    }
    x
}

fn info_and_traits(d: &ArmDriver) -> Result<(), String> {
    let f = d.info().map_err(err)?;
    let i8mm = d.tier() != ArmTier::Dotprod;
    // The SVE variants have FP16 vector arithmetic and see the qemu model's vector length.
    let (sve, sve_bytes) = match d.tier() {
        ArmTier::Sve128 => (true, 16),
        ArmTier::Sve256 => (true, 32),
        _ => (false, 0),
    };
    if !(f.neon && f.dotprod && f.fma && f.sve == sve && f.i8mm == i8mm)
        || f.sve_bytes != sve_bytes
        || f.fp16_va != sve
    {
        return Err(format!("{}: features {f:?}", d.tier()));
    }
    // ggml compiles llamafile's sgemm out of i8mm builds (docs/ORACLE.md).
    if f.llamafile == i8mm {
        return Err(format!("{}: llamafile = {}", d.tier(), f.llamafile));
    }
    for ty in TYPES {
        let t = d.traits(ty.id()).map_err(err)?;
        let vdt = if ty.name().ends_with("_K") { GgmlType::Q8_K } else { GgmlType::Q8_0 };
        let want_rows = if i8mm { 2 } else { 1 };
        if t.vec_dot_type != vdt.id() || t.nrows != want_rows || !t.vec_dot || !t.quantize {
            return Err(format!("{} {}: traits {t:?}", d.tier(), ty.name()));
        }
    }
    for act in [GgmlType::Q8_0, GgmlType::Q8_1, GgmlType::Q8_K] {
        if !d.traits(act.id()).map_err(err)?.from_float {
            return Err(format!("{}: no from_float for {}", d.tier(), act.name()));
        }
    }
    // What one qemu start costs (a request that does almost nothing).
    let runs = 10;
    let t0 = Instant::now();
    for _ in 0..runs {
        d.info().map_err(err)?;
    }
    let per = t0.elapsed().as_secs_f64() / f64::from(runs);
    eprintln!(
        "{} (QEMU_CPU={}): features {f:?}; one driver run costs {:.1} ms",
        d.tier(),
        d.qemu_cpu().unwrap_or("native"),
        per * 1e3
    );
    Ok(())
}

/// A row whose Q4_0 products `x * id` round, in f32, to exactly j + 0.5 while the exact
/// product is not a tie, so that `x * id + 8.5` comes out differently when the multiply and
/// add are fused (truncated to an integer right after). Each 32-block starts with its signed
/// maximum `mx`: d = mx / -8, id = 1 / d, as `quantize_row_q4_0_ref` computes them.
fn near_tie_q4_0_row(rng: &mut Rng, k: usize) -> Vec<f32> {
    let mut x = vec![0f32; k];
    for b in x.chunks_mut(32) {
        let sign = if rng.below(2) == 0 { 1.0 } else { -1.0 };
        let mx = sign * rng.range(1.0, 100.0);
        let d = mx / -8.0;
        let id = 1.0 / d;
        b[0] = mx;
        for v in b.iter_mut().skip(1) {
            let t = (rng.below(15) as f32 - 7.0) - 0.5;
            let x0 = t / id;
            let near =
                (-3i32..=3).map(|o| f32::from_bits((x0.to_bits() as i32 + o) as u32)).find(|&c| {
                    c * id == t
                        && f64::from(c) * f64::from(id) != f64::from(t)
                        && c.abs() < mx.abs()
                });
            *v = near.unwrap_or(x0.clamp(-mx.abs() * 0.99, mx.abs() * 0.99));
        }
    }
    x
}

/// Rows (of `nrows` rows of `k`) where the tier's `ggml_quantize_chunk` and the reference
/// quantizer give different bytes.
fn rows_differing_from_ref(
    d: &ArmDriver,
    ty: GgmlType,
    nrows: usize,
    k: usize,
    src: &[f32],
) -> Result<Vec<usize>, String> {
    let got = d.quantize(ty.id(), nrows, k, src).map_err(err)?;
    let want = weights::quantize(ty, src, nrows, k).map_err(|e| e.to_string())?;
    let row = ty.row_bytes(k).unwrap();
    Ok((0..nrows).filter(|&r| got[r * row..][..row] != want[r * row..][..row]).collect())
}

fn quantize_vs_ref(d: &ArmDriver) -> Result<(), String> {
    let k = 512;
    let mut rng = Rng::new(0xa11ce);
    let mixed = rows(&mut rng, &RowKind::FINITE, 64, k);
    let normal = rng.normals(1024 * k, 1.0);
    let mut k_quants = Vec::new();
    for (what, src) in [("rows of every finite family", &mixed), ("N(0,1) rows", &normal)] {
        let nrows = src.len() / k;
        for ty in TYPES {
            let differ = rows_differing_from_ref(d, ty, nrows, k, src)?;
            if matches!(ty, GgmlType::Q4_K | GgmlType::Q6_K) {
                k_quants.push(format!("{} {} of {nrows} {what}", ty.name(), differ.len()));
            } else if !differ.is_empty() {
                return Err(format!(
                    "{}: {} weights differ from the ref quantizer in {} of {nrows} {what} \
                     (first: row {})",
                    d.tier(),
                    ty.name(),
                    differ.len(),
                    differ[0]
                ));
            }
        }
    }
    eprintln!(
        "{}: Q8_0 and Q4_0 weights equal the ref quantizer; rows that differ (k = {k}): {}",
        d.tier(),
        k_quants.join(", ")
    );
    // Q4_0's x * id + 8.5 is contracted too, which only rows built to sit on ties can show.
    let near: Vec<f32> = (0..64).flat_map(|_| near_tie_q4_0_row(&mut rng, k)).collect();
    let differ = rows_differing_from_ref(d, GgmlType::Q4_0, 64, k, &near)?;
    eprintln!(
        "{}: Q4_0 weights of near-tie rows differ from the ref quantizer in {} of 64 rows",
        d.tier(),
        differ.len()
    );
    Ok(())
}

fn from_float_q8_k(d: &ArmDriver) -> Result<(), String> {
    let k = 1024;
    let mut rng = Rng::new(0x0b8c);
    // 120 near-tie rows, then 120 rows of every finite family.
    let mut x: Vec<f32> = (0..120).flat_map(|_| near_tie_q8_k_row(&mut rng, k)).collect();
    x.extend(rows(&mut rng, &RowKind::FINITE, 120, k));
    let nrows = x.len() / k;
    let got = d.from_float(GgmlType::Q8_K.id(), k, &x).map_err(err)?;
    let row = GgmlType::Q8_K.row_bytes(k).unwrap();
    let mut counts = Vec::new();
    for rule in [ActRule::Q8KRef, ActRule::Q8KFusedNearest] {
        let (mut near, mut other) = (0, 0);
        for r in 0..nrows {
            let want = rule.quantize(&x[r * k..][..k]).map_err(|e| e.to_string())?;
            if got[r * row..][..row] != want[..] {
                if r < 120 {
                    near += 1;
                } else {
                    other += 1;
                }
            }
        }
        eprintln!(
            "{}: from_float q8_K vs {}: {near} of 120 near-tie rows and {other} of {} other rows \
             differ",
            d.tier(),
            rule.name(),
            nrows - 120
        );
        counts.push((rule, near, other));
    }
    let (_, ref_near, _) = counts[0];
    let (_, fused_near, fused_other) = counts[1];
    if fused_near + fused_other != 0 {
        return Err(format!(
            "{}: q8_K activations differ from the fused rule in {} rows",
            d.tier(),
            fused_near + fused_other
        ));
    }
    if ref_near == 0 {
        return Err("the near-tie rows never told the fused and unfused rules apart".into());
    }
    Ok(())
}

fn from_float_q8_0(d: &ArmDriver) -> Result<(), String> {
    let k = 512;
    let per_kind = 24;
    let kinds = RowKind::ALL;
    let mut rng = Rng::new(0x0b80);
    let x = rows(&mut rng, &kinds, per_kind * kinds.len(), k);
    let nrows = x.len() / k;
    let got = d.from_float(GgmlType::Q8_0.id(), k, &x).map_err(err)?;
    let row = GgmlType::Q8_0.row_bytes(k).unwrap();
    let mut report = Vec::new();
    for rule in [ActRule::Q8_0Ref, ActRule::Q8_0Neon] {
        let mut by_kind = vec![0usize; kinds.len()];
        for r in 0..nrows {
            let want = rule.quantize(&x[r * k..][..k]).map_err(|e| e.to_string())?;
            if got[r * row..][..row] != want[..] {
                by_kind[r % kinds.len()] += 1;
            }
        }
        let total: usize = by_kind.iter().sum();
        let detail: Vec<String> = kinds
            .iter()
            .zip(&by_kind)
            .filter(|(_, &n)| n > 0)
            .map(|(kind, n)| format!("{} {n}/{per_kind}", kind.name()))
            .collect();
        eprintln!(
            "{}: from_float q8_0 vs {}: {total} of {nrows} rows differ ({})",
            d.tier(),
            rule.name(),
            if detail.is_empty() { "none".to_string() } else { detail.join(", ") }
        );
        report.push(by_kind);
    }
    let ties = kinds.iter().position(|&k| k == RowKind::Ties).unwrap();
    if report[0][ties] != per_kind {
        return Err(format!(
            "{}: only {} of {per_kind} tie rows differ from the round-away rule",
            d.tier(),
            report[0][ties]
        ));
    }
    let neon: usize = report[1].iter().sum();
    if neon != 0 {
        return Err(format!("{}: {neon} rows differ from {}", d.tier(), ActRule::Q8_0Neon.name()));
    }
    Ok(())
}

/// Quantized weights (reference quantizer) and activations for a matmul.
struct Case {
    ty: GgmlType,
    k: usize,
    n: usize,
    m: usize,
    w: Vec<u8>,
    x: Vec<f32>,
}

impl Case {
    fn new(ty: GgmlType, k: usize, n: usize, m: usize, seed: u64) -> Case {
        let mut rng = Rng::new(seed ^ (u64::from(ty.id()) << 40) ^ ((k * 131 + n * 7 + m) as u64));
        let w = weights::quantize(ty, &rng.normals(n * k, 1.0), n, k).expect("quantize");
        let x = rng.normals(m * k, 1.0);
        Case { ty, k, n, m, w, x }
    }

    fn job(&self, mode: MulmatMode, threads: usize) -> MulmatJob<'_> {
        MulmatJob {
            mode,
            ty: self.ty.id(),
            k: self.k,
            n: self.n,
            m: self.m,
            threads,
            weights: &self.w,
            acts: &self.x,
        }
    }

    fn label(&self) -> String {
        format!("{} k={} n={} m={}", self.ty.name(), self.k, self.n, self.m)
    }
}

fn expected_layout(tier: ArmTier, ty: GgmlType) -> &'static str {
    match (tier, ty) {
        (ArmTier::Dotprod, GgmlType::Q4_0) => "q4_0_4x4",
        (ArmTier::Dotprod, GgmlType::Q4_K) => "q4_K_8x4",
        (ArmTier::Dotprod, GgmlType::Q6_K) => "q6_K_8x4",
        (ArmTier::Dotprod, _) => "q8_0_4x4",
        // 256-bit SVE with i8mm: ggml's q4_0_8x8 (ggml_cpu_get_sve_cnt() == QK8_0).
        (ArmTier::Sve256, GgmlType::Q4_0) => "q4_0_8x8",
        (_, GgmlType::Q4_0) => "q4_0_4x8",
        (_, GgmlType::Q4_K) => "q4_K_8x8",
        (_, GgmlType::Q6_K) => "q6_K_8x8",
        (_, _) => "q8_0_4x8",
    }
}

fn bits_equal(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

fn repack_layouts(d: &ArmDriver) -> Result<(), String> {
    let cases: Vec<Case> = TYPES.iter().map(|&ty| Case::new(ty, 512, 16, 4, 5)).collect();
    let no_layout = Case::new(GgmlType::Q4_K, 256, 12, 2, 6);
    let mut jobs = Vec::new();
    for c in &cases {
        jobs.extend([c.job(Repack, 1), c.job(Repack, 2), c.job(Plain, 1)]);
    }
    jobs.push(no_layout.job(Repack, 1));
    let t0 = Instant::now();
    let results = d.mulmat_batch(&jobs).map_err(err)?;
    let elapsed = t0.elapsed();
    let mut seen = Vec::new();
    for (c, r) in cases.iter().zip(results.chunks(3)) {
        let [one, two, plain] = r else { unreachable!() };
        let one = one.as_ref().map_err(|e| format!("{}: {e}", c.label()))?;
        let two = two.as_ref().map_err(|e| format!("{}: {e}", c.label()))?;
        let plain = plain.as_ref().map_err(|e| format!("{}: {e}", c.label()))?;
        let want = expected_layout(d.tier(), c.ty);
        if !one.repacked || one.buft != "CPU_REPACK" || one.layout.as_deref() != Some(want) {
            return Err(format!("{} {}: expected layout {want}, got {one:?}", d.tier(), c.label()));
        }
        if !bits_equal(&one.out, &two.out) || two.layout != one.layout {
            return Err(format!("{} {}: 1 and 2 threads differ", d.tier(), c.label()));
        }
        if plain.repacked || plain.buft != "CPU" {
            return Err(format!("{} {}: plain run reports {plain:?}", d.tier(), c.label()));
        }
        let scale = plain.out.iter().fold(0f32, |s, v| s.max(v.abs()));
        let diff = one.out.iter().zip(&plain.out).fold(0f32, |s, (a, b)| s.max((a - b).abs()));
        if diff > 1e-4 * scale {
            return Err(format!(
                "{} {}: repacked differs from plain by {diff:e} (scale {scale:e})",
                d.tier(),
                c.label()
            ));
        }
        seen.push(format!("{}={want}", c.ty.name()));
    }
    match &results[12] {
        Err(OracleError::NoRepackLayout { n: 12, .. }) => {}
        other => return Err(format!("{}: expected no layout, got {other:?}", no_layout.label())),
    }
    eprintln!(
        "{}: repack layouts {} (13 matmuls in one driver run, {:.0} ms)",
        d.tier(),
        seen.join(" "),
        elapsed.as_secs_f64() * 1e3
    );
    Ok(())
}

/// `vec_dot` of every (activation row, weight row) pair of `c`, with the activations
/// quantized by the tier's own from_float, laid out as a matmul output (`m` rows of `n`).
fn vec_dot_all(d: &ArmDriver, c: &Case) -> Result<Vec<f32>, String> {
    let vdt = d.traits(c.ty.id()).map_err(err)?.vec_dot_type;
    let y = d.from_float(vdt, c.k, &c.x).map_err(err)?;
    let (bx, by) = (c.w.len() / c.n, y.len() / c.m);
    let (mut xs, mut ys) = (Vec::new(), Vec::new());
    for i in 0..c.m {
        for j in 0..c.n {
            xs.extend_from_slice(&c.w[j * bx..][..bx]);
            ys.extend_from_slice(&y[i * by..][..by]);
        }
    }
    d.vec_dot(c.ty.id(), c.k, 1, &xs, &ys).map_err(err)
}

fn run_plain(d: &ArmDriver, c: &Case) -> Result<MulmatResult, String> {
    d.mulmat(Plain, c.ty.id(), c.k, c.n, c.m, 1, &c.w, &c.x)
        .map_err(|e| format!("{}: {e}", c.label()))
}

/// The driver run cache's premise (`ArmDriver` keeps successful runs under qemu, keyed
/// by everything they read): a repacked and a plain matmul and a vec_dot, each asked
/// twice (the second answer is the kept run, where the cache is on), equal the same run
/// made now with the cache bypassed (`without_cache`), bit for bit and in every report
/// field.
fn driver_cache_recomputes_bitwise(d: &ArmDriver) -> Result<(), String> {
    let fresh = d.clone().without_cache();
    for (mode, ty) in [(MulmatMode::Repack, GgmlType::Q4_K), (Plain, GgmlType::Q6_K)] {
        let c = Case::new(ty, 512, 16, 3, 21);
        let ask = |d: &ArmDriver| {
            d.mulmat(mode, c.ty.id(), c.k, c.n, c.m, 1, &c.w, &c.x)
                .map_err(|e| format!("{}: {e}", c.label()))
        };
        let _ = ask(d)?;
        let (kept, now) = (ask(d)?, ask(&fresh)?);
        if !bits_equal(&kept.out, &now.out)
            || (kept.repacked, &kept.buft, &kept.layout) != (now.repacked, &now.buft, &now.layout)
        {
            return Err(format!("{} {mode:?}: the kept run differs from a fresh one", c.label()));
        }
    }
    let c = Case::new(GgmlType::Q8_0, 256, 4, 1, 22);
    let (kept, now) = (vec_dot_all(d, &c)?, vec_dot_all(&fresh, &c)?);
    if !bits_equal(&kept, &now) {
        return Err(format!("{}: the kept vec_dot differs from a fresh one", c.label()));
    }
    Ok(())
}

fn dotprod_plain_mulmat_vs_vec_dot(d: &ArmDriver) -> Result<(), String> {
    let mut tiny_blas = Vec::new();
    for ty in TYPES {
        for m in [1, 4, 5] {
            let c = Case::new(ty, 512, 16, m, 9);
            let plain = run_plain(d, &c)?;
            let dots = vec_dot_all(d, &c)?;
            let equal = bits_equal(&plain.out, &dots);
            let k_quant = ty.name().ends_with("_K");
            if (k_quant || m == 1) && !equal {
                return Err(format!("{}: plain matmul differs from vec_dot", c.label()));
            }
            if !k_quant && m > 1 {
                tiny_blas.push(format!(
                    "{} m={m}: {}",
                    ty.name(),
                    if equal { "equal" } else { "differs" }
                ));
            }
        }
    }
    eprintln!("dotprod: Q4_0/Q8_0 plain (tinyBLAS) vs vec_dot: {}", tiny_blas.join(", "));
    Ok(())
}

fn i8mm_plain_mulmat_uses_the_2x2_tile(d: &ArmDriver) -> Result<(), String> {
    for ty in TYPES {
        for m in [1, 4, 5] {
            let c = Case::new(ty, 512, 16, m, 10);
            let plain = run_plain(d, &c)?;
            let want = if m == 4 {
                // Tiles of weight rows (2a, 2a+1) x activation rows (2b, 2b+1).
                let vdt = d.traits(ty.id()).map_err(err)?.vec_dot_type;
                let y = d.from_float(vdt, c.k, &c.x).map_err(err)?;
                let (bx, by) = (c.w.len() / c.n, y.len() / c.m);
                let (mut xs, mut ys) = (Vec::new(), Vec::new());
                for b in 0..c.m / 2 {
                    for a in 0..c.n / 2 {
                        xs.extend_from_slice(&c.w[2 * a * bx..][..2 * bx]);
                        ys.extend_from_slice(&y[2 * b * by..][..2 * by]);
                    }
                }
                let tiles = d.vec_dot(ty.id(), c.k, 2, &xs, &ys).map_err(err)?;
                let mut out = vec![0f32; c.m * c.n];
                for b in 0..c.m / 2 {
                    for a in 0..c.n / 2 {
                        let s = &tiles[(b * (c.n / 2) + a) * 4..][..4];
                        for (jj, ii) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
                            // s[2 * j + i] = weight row i . activation row j
                            out[(2 * b + jj) * c.n + 2 * a + ii] = s[2 * jj + ii];
                        }
                    }
                }
                out
            } else {
                vec_dot_all(d, &c)?
            };
            if !bits_equal(&plain.out, &want) {
                return Err(format!(
                    "{}: plain matmul differs from the nrc = {} vec_dot",
                    c.label(),
                    if m == 4 { 2 } else { 1 }
                ));
            }
        }
    }
    Ok(())
}

fn sigill_without_extensions(d: &ArmDriver) -> Result<(), String> {
    let lacking = match d.tier() {
        ArmTier::Dotprod => "cortex-a53",
        ArmTier::I8mm | ArmTier::Sve128 | ArmTier::Sve256 => "neoverse-n1",
    };
    let q4_k = GgmlType::Q4_K.id();
    // Sizes are checked (and the traits asked) on the right CPU model first.
    let nrc = d.traits(q4_k).map_err(err)?.nrows;
    let k = 256;
    let x = vec![0x11u8; nrc * 144];
    let y = d.from_float(GgmlType::Q8_K.id(), k, &vec![0.5f32; nrc * k]).map_err(err)?;
    d.vec_dot(q4_k, k, nrc, &x, &y).map_err(err)?;
    let Some(wrong) = d.clone().with_qemu_cpu(lacking) else {
        return Err(format!(
            "{NOT_HERE}{}: the driver runs natively on this aarch64 host, with no qemu CPU model to take its extensions away",
            d.tier()
        ));
    };
    // What ggml was compiled for is not checked at run time: on the NEON flavours info
    // still answers and the vec_dot dies; the SVE flavours die already in `info` (ggml's
    // start-up code, which GCC vectorised with SVE).
    let sve = matches!(d.tier(), ArmTier::Sve128 | ArmTier::Sve256);
    let t0 = Instant::now();
    let attempt = if sve {
        wrong.info().map(|_| ())
    } else {
        wrong.info().map_err(err)?;
        wrong.vec_dot(q4_k, k, nrc, &x, &y).map(|_| ())
    };
    match attempt {
        Err(OracleError::Driver { driver, status, stderr }) => {
            if !status.contains("signal 4") || !status.contains(lacking) {
                return Err(format!("{}: on {lacking}: status {status:?}", d.tier()));
            }
            eprintln!(
                "{} on QEMU_CPU={lacking}: {} failed ({status}) after {:.0} ms; stderr {stderr:?}",
                d.tier(),
                driver.display(),
                t0.elapsed().as_secs_f64() * 1e3
            );
            Ok(())
        }
        other => Err(format!("{}: on {lacking} expected SIGILL, got {other:?}", d.tier())),
    }
}

fn rejects_bad_requests(d: &ArmDriver) -> Result<(), String> {
    let (q4_k, q8_k) = (GgmlType::Q4_K.id(), GgmlType::Q8_K.id());
    let unsupported = |r: Result<Vec<u8>, OracleError>, what: &str| match r {
        Err(OracleError::Unsupported { .. }) => Ok(()),
        other => Err(format!("{what}: expected Unsupported, got {other:?}")),
    };
    unsupported(d.quantize(q8_k, 1, 256, &[0.0; 256]), "quantize to q8_K")?;
    unsupported(d.quantize(GgmlType::IQ2_XXS.id(), 1, 256, &[0.0; 256]), "quantize to iq2_xxs")?;
    match d.vec_dot(q8_k, 256, 1, &[0; 292], &[0; 292]) {
        Err(OracleError::Unsupported { .. }) => {}
        other => return Err(format!("vec_dot of q8_K: expected Unsupported, got {other:?}")),
    }
    // Q5_0's kernel does one row per call in every build.
    match d.vec_dot(GgmlType::Q5_0.id(), 32, 2, &[0; 44], &[0; 68]) {
        Err(OracleError::Unsupported { .. }) => {}
        other => return Err(format!("q5_0 with nrc 2: expected Unsupported, got {other:?}")),
    }
    match d.vec_dot(q4_k, 256, 1, &[0; 144], &[0; 291]) {
        Err(OracleError::InvalidInput(_)) => {}
        other => return Err(format!("short activations: expected InvalidInput, got {other:?}")),
    }
    // Empty batches are fine.
    if !d.from_float(q8_k, 256, &[]).map_err(err)?.is_empty() {
        return Err("from_float of no rows gave bytes".into());
    }
    if !d.vec_dot(q4_k, 256, 1, &[], &[]).map_err(err)?.is_empty() {
        return Err("vec_dot of no cases gave values".into());
    }
    // A batch answers every job as a single run would, failures included.
    let a = Case::new(GgmlType::Q6_K, 256, 16, 3, 1);
    let b = Case::new(GgmlType::Q4_K, 256, 12, 1, 2);
    let bad_w = [0u8; 10];
    let mut bad = a.job(Plain, 1);
    bad.weights = &bad_w;
    let jobs = [a.job(Plain, 1), bad, b.job(Repack, 1), b.job(Plain, 2), a.job(Repack, 1)];
    let batch = d.mulmat_batch(&jobs).map_err(err)?;
    for (i, (job, got)) in jobs.iter().zip(&batch).enumerate() {
        let single =
            d.mulmat(job.mode, job.ty, job.k, job.n, job.m, job.threads, job.weights, job.acts);
        match (got, &single) {
            (Ok(x), Ok(y))
                if x.repacked == y.repacked
                    && x.layout == y.layout
                    && bits_equal(&x.out, &y.out) => {}
            (Err(OracleError::InvalidInput(_)), Err(OracleError::InvalidInput(_))) => {}
            (Err(OracleError::NoRepackLayout { .. }), Err(OracleError::NoRepackLayout { .. })) => {}
            _ => return Err(format!("job {i}: batch {got:?} vs single {single:?}")),
        }
    }
    if !matches!(batch[2], Err(OracleError::NoRepackLayout { n: 12, .. })) || batch[1].is_ok() {
        return Err(format!("unexpected batch answers: {batch:?}"));
    }
    Ok(())
}
