//! The `ref` lane against the real thing: ggml 0.25.3's x64 tier (generic C kernels
//! compiled without FMA) and llama.cpp's Python codecs (gguf-py).
//!
//! Every trial needs the oracle stage (`ci/oracle`). Without it a trial is ignored at
//! run time with the reason; with `TIERCHECK_REQUIRE_ORACLE=1` (as CI sets) that is a
//! failure instead.
//!
//! Trials (each runs a few hundred cases and fails on the first bit that differs,
//! listing up to five differing cases):
//! - `oracle/x64/from_float/{q8_K,q8_0,q8_1}`: activation quantizer bytes, NaN and
//!   infinite inputs included (our declared behaviour for them is ggml's bytes);
//! - `oracle/x64/quantize/{q4_0,q8_0,q4_K,q6_K}`: weight quantizer bytes
//!   (`ggml_quantize_chunk`, no importance matrix);
//! - `oracle/x64/vec_dot/{q4_0,q8_0,q4_K,q6_K}`: dot product bits, on activations
//!   quantized by ggml itself and weights both quantized by ggml and random;
//! - `oracle/x64/dequant/...`: our dequantizers against ggml's `to_float`;
//! - `oracle/gguf-py/dequant`: our dequantizers against gguf-py's numpy codecs, on a
//!   GGUF written by our writer and read by gguf-py.

use libtest_mimic::{Completion, Failed, Trial};
use tiercheck_core::blocks::dequantize;
use tiercheck_core::quant::{weights, ActRule};
use tiercheck_core::{lane, GgmlType};
use tiercheck_gguf::GgufWriter;
use tiercheck_model::kernel_inputs::{edge_blocks, random_blocks, Rng, RowKind};
use tiercheck_oracle::{load_tier, GgmlLib, OracleConfig, Tier};
use tiercheck_testkit::suites::{trial_name, Selection};

/// This suite's name, the first part of its trials' names.
pub const SUITE: &str = "oracle_ref";

/// The suite's trials, in the order they run.
pub fn trials(selection: &Selection) -> Vec<Trial> {
    let mut trials = Vec::new();
    for (ty, rule) in [
        (GgmlType::Q8_K, ActRule::Q8KRef),
        (GgmlType::Q8_0, ActRule::Q8_0Ref),
        (GgmlType::Q8_1, ActRule::Q8_1Ref),
    ] {
        trials.push(x64_trial(format!("oracle/x64/from_float/{}", ty.name()), move |lib| {
            check_from_float(lib, ty, rule)
        }));
    }
    // The ref lane multiplies every quantizable type.
    for &ty in weights::QUANTIZABLE {
        trials.push(x64_trial(format!("oracle/x64/quantize/{}", ty.name()), move |lib| {
            check_quantize(lib, ty)
        }));
        trials.push(x64_trial(format!("oracle/x64/vec_dot/{}", ty.name()), move |lib| {
            check_vec_dot(lib, ty)
        }));
    }
    for &ty in weights::QUANTIZABLE.iter().chain(&[GgmlType::F16, GgmlType::BF16]) {
        // (ggml registers no to_float for q8_K; its d*q dequantizer is unit-tested in core.)
        trials.push(x64_trial(format!("oracle/x64/dequant/{}", ty.name()), move |lib| {
            check_dequant_ggml(lib, ty)
        }));
    }
    trials.push(python_trial("oracle/gguf-py/dequant", check_dequant_gguf_py));
    // x86_64-avx2 (portable twin) against the haswell tier.
    let avx2 = lane("x86_64-avx2").expect("lane");
    for (ty, rule) in [
        (GgmlType::Q8_K, avx2.recipe.act_k),
        (GgmlType::Q8_0, avx2.recipe.act_legacy),
        (GgmlType::Q8_1, ActRule::Q8_1X86),
    ] {
        trials.push(tier_trial(
            Tier::Haswell,
            format!("oracle/haswell/from_float/{}/x86_64-avx2", ty.name()),
            move |lib| check_from_float(lib, ty, rule),
        ));
    }
    for &ty in weights::QUANTIZABLE {
        trials.push(tier_trial(
            Tier::Haswell,
            format!("oracle/haswell/vec_dot/{}/x86_64-avx2", ty.name()),
            move |lib| check_vec_dot_lane(lib, ty, "x86_64-avx2"),
        ));
    }
    trials.sort_by(|a, b| a.name().cmp(b.name()));
    let claims = tiercheck_testkit::claims::claim_trials(SUITE, selection, &trials);
    trials.extend(claims);
    trials
}

fn required() -> bool {
    std::env::var("TIERCHECK_REQUIRE_ORACLE").is_ok_and(|v| v == "1")
}

fn unavailable(why: String) -> Result<Completion, Failed> {
    if required() {
        Err(format!("TIERCHECK_REQUIRE_ORACLE=1 but the oracle is unavailable: {why}").into())
    } else {
        Ok(Completion::ignored_with(format!("oracle unavailable ({why}); run ci/oracle")))
    }
}

/// A trial that runs `check` against the x64 tier; `check` returns the case count.
fn x64_trial(
    name: String,
    check: impl FnOnce(&GgmlLib) -> Result<usize, String> + Send + 'static,
) -> Trial {
    tier_trial(Tier::X64, name, check)
}

/// A trial that runs `check` against `tier`'s library.
fn tier_trial(
    tier: Tier,
    name: String,
    check: impl FnOnce(&GgmlLib) -> Result<usize, String> + Send + 'static,
) -> Trial {
    tiercheck_testkit::claims::tracked(trial_name(SUITE, name), move || {
        let cfg = OracleConfig::from_env();
        if tier == Tier::Haswell && !tiercheck_lanes::host::x86_has("avx2") {
            let why = "cpu lacks avx2: the haswell tier cannot run here";
            if required() {
                return Err(format!("TIERCHECK_REQUIRE_ORACLE=1 but {why}").into());
            }
            return Ok(Completion::ignored_with(why));
        }
        let lib = match load_tier(&cfg, tier) {
            Ok(lib) => lib,
            Err(e) => return unavailable(e.to_string()),
        };
        let n = check(&lib)?;
        if n < 200 {
            return Err(format!("only {n} cases ran; at least 200 are required").into());
        }
        Ok(Completion::Completed)
    })
}

fn python_trial(
    name: &str,
    check: impl FnOnce(&std::path::Path) -> Result<usize, String> + Send + 'static,
) -> Trial {
    tiercheck_testkit::claims::tracked(trial_name(SUITE, name), move || {
        let cfg = OracleConfig::from_env();
        let py = match cfg.require_python() {
            Ok(p) => p.to_owned(),
            Err(e) => return unavailable(e.to_string()),
        };
        check(&py)?;
        Ok(Completion::Completed)
    })
}

/// Collects differing cases and turns them into one failure message.
#[derive(Default)]
struct Mismatches {
    cases: usize,
    bad: Vec<String>,
}

impl Mismatches {
    fn check(
        &mut self,
        case: impl FnOnce() -> String,
        equal: bool,
        detail: impl FnOnce() -> String,
    ) {
        self.cases += 1;
        if !equal {
            self.bad.push(format!("{}: {}", case(), detail()));
        }
    }

    fn finish(self, what: &str) -> Result<usize, String> {
        if self.bad.is_empty() {
            return Ok(self.cases);
        }
        let mut msg =
            format!("{what}: {} of {} cases differ from the oracle:\n", self.bad.len(), self.cases);
        for b in self.bad.iter().take(5) {
            msg.push_str(&format!("  {b}\n"));
        }
        if self.bad.len() > 5 {
            msg.push_str(&format!("  ... and {} more\n", self.bad.len() - 5));
        }
        Err(msg)
    }
}

/// First differing byte, as "byte i (block b): got x, want y".
fn first_byte_diff(got: &[u8], want: &[u8], block: usize) -> String {
    if got.len() != want.len() {
        return format!("length {} vs {}", got.len(), want.len());
    }
    match got.iter().zip(want).position(|(a, b)| a != b) {
        Some(i) => {
            format!("byte {i} (block {}): got {:#04x}, want {:#04x}", i / block, got[i], want[i])
        }
        None => "equal".into(),
    }
}

fn check_from_float(lib: &GgmlLib, ty: GgmlType, rule: ActRule) -> Result<usize, String> {
    let mut m = Mismatches::default();
    let mut rng = Rng::new(0xF00D + ty.id() as u64);
    for k in [256usize, 512, 4096] {
        for kind in RowKind::ALL {
            for seed in 0..10 {
                let x = kind.row(&mut rng, k);
                let ours = rule.quantize(&x).map_err(|e| e.to_string())?;
                let theirs = lib.from_float(ty.id(), &x).map_err(|e| e.to_string())?;
                m.check(
                    || format!("k={k} {} seed {seed}", kind.name()),
                    ours == theirs,
                    || first_byte_diff(&ours, &theirs, ty.type_size()),
                );
            }
        }
    }
    m.finish(&format!("from_float {}", ty.name()))
}

fn check_quantize(lib: &GgmlLib, ty: GgmlType) -> Result<usize, String> {
    let mut m = Mismatches::default();
    let mut rng = Rng::new(0xBEEF + ty.id() as u64);
    let row_bytes = |k: usize| ty.row_bytes(k).expect("whole blocks");
    for (k, nrows) in [(256usize, 10usize), (512, 10), (4096, 5)] {
        for kind in RowKind::FINITE {
            let x: Vec<f32> = (0..nrows).flat_map(|_| kind.row(&mut rng, k)).collect();
            let ours = weights::quantize(ty, &x, nrows, k).map_err(|e| e.to_string())?;
            let theirs = lib.quantize_chunk(ty.id(), &x, nrows, k).map_err(|e| e.to_string())?;
            for r in 0..nrows {
                let (a, b) = (
                    &ours[r * row_bytes(k)..][..row_bytes(k)],
                    &theirs[r * row_bytes(k)..][..row_bytes(k)],
                );
                m.check(
                    || format!("k={k} {} row {r}", kind.name()),
                    a == b,
                    || first_byte_diff(a, b, ty.type_size()),
                );
            }
        }
    }
    m.finish(&format!("quantize {}", ty.name()))
}

fn check_vec_dot(lib: &GgmlLib, ty: GgmlType) -> Result<usize, String> {
    check_vec_dot_lane(lib, ty, "ref")
}

/// `lane`'s portable vec_dot against the tier's, on activations quantized by the tier.
fn check_vec_dot_lane(lib: &GgmlLib, ty: GgmlType, lane_name: &str) -> Result<usize, String> {
    let reflane = lane(lane_name).expect("lane");
    let act_ty = reflane.portable.act_rule(ty).map_err(|e| e.to_string())?.format();
    let ggml_act = lib.vec_dot_type(ty.id()).map_err(|e| e.to_string())?;
    if ggml_act != act_ty.id() {
        return Err(format!(
            "ggml pairs {} with type id {ggml_act}, ref with {}",
            ty.name(),
            act_ty.name()
        ));
    }
    let mut m = Mismatches::default();
    let mut rng = Rng::new(0xD07 + ty.id() as u64);
    let sizes: &[usize] =
        if ty.block_size() == 256 { &[256, 512, 1024, 4096] } else { &[32, 96, 512, 4096] };
    for &k in sizes {
        let nb = k / ty.block_size();
        for kind in RowKind::FINITE {
            let x = kind.row(&mut rng, k.max(32));
            let act = lib.from_float(act_ty.id(), &x[..k]).map_err(|e| e.to_string())?;
            for variant in 0..7 {
                let (label, w) = match variant {
                    0 | 1 => {
                        let wk = RowKind::FINITE[(variant * 3 + kind as usize) % 9];
                        let wx = wk.row(&mut rng, k);
                        (
                            "quantized",
                            lib.quantize_chunk(ty.id(), &wx, 1, k).map_err(|e| e.to_string())?,
                        )
                    }
                    2 | 3 => ("random", random_blocks(&mut rng, ty, nb)),
                    v => ("edge", edge_blocks(&mut rng, ty, nb, v)),
                };
                let ours = reflane.portable.vec_dot(ty, &w, &act).map_err(|e| e.to_string())?;
                let theirs = lib.vec_dot(ty.id(), k, &w, &act).map_err(|e| e.to_string())?;
                m.check(
                    || format!("k={k} act={} weights={label}#{variant}", kind.name()),
                    ours.to_bits() == theirs.to_bits(),
                    || {
                        format!(
                            "got {ours:e} ({:#010x}), want {theirs:e} ({:#010x})",
                            ours.to_bits(),
                            theirs.to_bits()
                        )
                    },
                );
            }
        }
    }
    m.finish(&format!("vec_dot {}", ty.name()))
}

fn bits_equal(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

fn first_value_diff(a: &[f32], b: &[f32]) -> String {
    if a.len() != b.len() {
        return format!("length {} vs {}", a.len(), b.len());
    }
    match a.iter().zip(b).position(|(x, y)| x.to_bits() != y.to_bits()) {
        Some(i) => format!("value {i}: got {:e}, want {:e}", a[i], b[i]),
        None => "equal".into(),
    }
}

fn check_dequant_ggml(lib: &GgmlLib, ty: GgmlType) -> Result<usize, String> {
    let mut m = Mismatches::default();
    let mut rng = Rng::new(0xDE0 + ty.id() as u64);
    for case in 0..200 {
        let nb = 1 + case % 4;
        let bytes = match ty {
            GgmlType::F16 | GgmlType::BF16 => {
                let mut b = vec![0u8; nb * 64];
                rng.fill_bytes(&mut b);
                b
            }
            GgmlType::Q8_K => {
                let x = RowKind::FINITE[case % 9].row(&mut rng, nb * 256);
                ActRule::Q8KRef.quantize(&x).map_err(|e| e.to_string())?
            }
            _ if case % 3 == 0 => edge_blocks(&mut rng, ty, nb, case),
            _ => random_blocks(&mut rng, ty, nb),
        };
        let n = bytes.len() / ty.type_size() * ty.block_size();
        let mut ours = vec![0.0f32; n];
        dequantize(ty, &bytes, &mut ours).map_err(|e| e.to_string())?;
        let theirs = lib.dequantize(ty.id(), &bytes).map_err(|e| e.to_string())?;
        // NaN payloads (random f16/bf16 bits) must match too: compare bits.
        m.check(
            || format!("case {case}"),
            bits_equal(&ours, &theirs),
            || first_value_diff(&ours, &theirs),
        );
    }
    m.finish(&format!("dequant {}", ty.name()))
}

fn check_dequant_gguf_py(py: &std::path::Path) -> Result<usize, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let file = dir.path().join("cases.gguf");
    let mut rng = Rng::new(0x6617);
    let mut w = GgufWriter::new();
    let mut expected: Vec<(String, GgmlType, Vec<u8>)> = Vec::new();
    for ty in [
        GgmlType::Q4_0,
        GgmlType::Q8_0,
        GgmlType::Q4_K,
        GgmlType::Q6_K,
        GgmlType::F16,
        GgmlType::BF16,
        GgmlType::F32,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q5_1,
        GgmlType::Q5_K,
        GgmlType::Q2_K,
        GgmlType::Q3_K,
        GgmlType::IQ4_NL,
        GgmlType::IQ4_XS,
    ] {
        for case in 0..8 {
            let k = 512usize;
            let rows = 4usize;
            let bytes = match ty {
                GgmlType::F16 | GgmlType::BF16 | GgmlType::F32 => {
                    let mut b = vec![0u8; k * rows * ty.type_size()];
                    rng.fill_bytes(&mut b);
                    if ty == GgmlType::F32 {
                        // keep f32 NaN payloads out: numpy views preserve them, but the
                        // point here is the codecs
                        for c in b.chunks_mut(4) {
                            if c[3] & 0x7F == 0x7F && c[2] & 0x80 != 0 {
                                c[3] &= 0xBF;
                            }
                        }
                    }
                    b
                }
                _ => {
                    let nb = k * rows / ty.block_size();
                    match case % 4 {
                        0 => edge_blocks(&mut rng, ty, nb, case),
                        1 => {
                            // all-zero blocks
                            vec![0u8; nb * ty.type_size()]
                        }
                        2 => {
                            let x: Vec<f32> = (0..rows)
                                .flat_map(|_| RowKind::FINITE[case % 9].row(&mut rng, k))
                                .collect();
                            weights::quantize(ty, &x, rows, k).map_err(|e| e.to_string())?
                        }
                        _ => random_blocks(&mut rng, ty, nb),
                    }
                }
            };
            let name = format!("{}.{case}", ty.name());
            w.add_tensor(name.clone(), &[k as u64, rows as u64], ty, bytes.clone())
                .map_err(|e| e.to_string())?;
            expected.push((name, ty, bytes));
        }
    }
    w.write_file(&file).map_err(|e| e.to_string())?;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../ci/py/gguf_dequant.py");
    let out = std::process::Command::new(py)
        .arg(script)
        .arg(&file)
        .arg(dir.path())
        .output()
        .map_err(|e| format!("running {}: {e}", py.display()))?;
    if !out.status.success() {
        return Err(format!("gguf_dequant.py failed: {}", String::from_utf8_lossy(&out.stderr)));
    }
    let mut m = Mismatches::default();
    for (i, (name, ty, bytes)) in expected.iter().enumerate() {
        let raw = std::fs::read(dir.path().join(format!("{i}.f32"))).map_err(|e| e.to_string())?;
        let theirs: Vec<f32> =
            raw.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        let n = bytes.len() / ty.type_size() * ty.block_size();
        let mut ours = vec![0.0f32; n];
        dequantize(*ty, bytes, &mut ours).map_err(|e| e.to_string())?;
        // gguf-py converts f16 NaNs through numpy; compare NaN as NaN, all else by bits.
        let same = ours.len() == theirs.len()
            && ours
                .iter()
                .zip(&theirs)
                .all(|(a, b)| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()));
        m.check(|| name.clone(), same, || first_value_diff(&ours, &theirs));
    }
    m.finish("gguf-py dequant")
}
