//! Smoke test of the ggml oracle bindings (`tiercheck_oracle`) against the builds of
//! `ci/oracle` and gguf-py's numpy codecs.
//!
//! Without the oracle each trial is reported ignored with the reason, unless
//! `TIERCHECK_REQUIRE_ORACLE=1`, when it fails with that reason.

use std::path::Path;
use std::process::Command;

use libtest_mimic::{Completion, Trial};
use tiercheck_testkit::suites::{trial_name, Selection};

use tiercheck_core::GgmlType;
use tiercheck_oracle::{GgmlLib, OracleConfig, OracleError, Tier};

const Q8_0: u32 = GgmlType::Q8_0 as u32;

/// This suite's name, the first part of its trials' names.
pub const SUITE: &str = "oracle_smoke";

/// The suite's trials, in the order they run.
pub fn trials(_selection: &Selection) -> Vec<Trial> {
    type Check = fn(&OracleConfig);
    let tests: [(&str, Check); 4] = [
        ("q8_0_quantize_chunk_matches_gguf_py", q8_0_quantize_chunk_matches_gguf_py),
        ("q4_k_vec_dot_of_both_tiers_is_close_to_f64", q4_k_vec_dot_of_both_tiers_is_close_to_f64),
        (
            "both_tiers_load_in_one_process_with_their_own_kernels",
            both_tiers_load_in_one_process_with_their_own_kernels,
        ),
        ("wrong_inputs_are_errors_not_crashes", wrong_inputs_are_errors_not_crashes),
    ];
    let trials = tests
        .into_iter()
        .map(|(name, f)| {
            Trial::ignorable_test(trial_name(SUITE, format!("oracle/smoke/{name}")), move || {
                let cfg = OracleConfig::from_env();
                match cfg.missing_reason() {
                    None => {
                        f(&cfg);
                        Ok(Completion::Completed)
                    }
                    Some(reason)
                        if std::env::var("TIERCHECK_REQUIRE_ORACLE").as_deref() == Ok("1") =>
                    {
                        Err(format!("TIERCHECK_REQUIRE_ORACLE=1 but {reason}").into())
                    }
                    Some(reason) => Ok(Completion::ignored_with(reason)),
                }
            })
        })
        .collect();
    trials
}

fn load(cfg: &OracleConfig, tier: Tier) -> GgmlLib {
    GgmlLib::load(cfg.require_tier(tier).unwrap()).unwrap()
}

/// Test data from the project's seeded generator.
struct Rng(tiercheck_core::rng::Rng);

impl Rng {
    /// Uniform in [-1, 1).
    fn uniform(&mut self) -> f32 {
        self.0.sym()
    }

    fn vec(&mut self, n: usize, offset: f32, scale: f32) -> Vec<f32> {
        (0..n).map(|_| offset + scale * self.uniform()).collect()
    }
}

/// Runs gguf-py (`gguf.quants.quantize` or `dequantize`) on `input` through the venv
/// Python; data goes through temporary files.
fn gguf_py(python: &Path, mode: &str, ty: &str, rows: usize, input: &[u8]) -> Vec<u8> {
    const SCRIPT: &str = r#"
import sys
import numpy as np
import gguf
mode, ty, rows, src, dst = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
qtype = gguf.GGMLQuantizationType[ty]
if mode == "quantize":
    a = np.fromfile(src, dtype="<f4").reshape(rows, -1)
    np.ascontiguousarray(gguf.quants.quantize(a, qtype), dtype=np.uint8).tofile(dst)
else:
    raw = np.fromfile(src, dtype=np.uint8).reshape(rows, -1)
    np.ascontiguousarray(gguf.quants.dequantize(raw, qtype), dtype="<f4").tofile(dst)
"#;
    let dir = tempfile::tempdir().unwrap();
    let (src, dst) = (dir.path().join("in.bin"), dir.path().join("out.bin"));
    std::fs::write(&src, input).unwrap();
    let out = Command::new(python)
        .args(["-c", SCRIPT, mode, ty, &rows.to_string()])
        .arg(&src)
        .arg(&dst)
        .output()
        .unwrap();
    assert!(out.status.success(), "gguf-py failed: {}", String::from_utf8_lossy(&out.stderr));
    std::fs::read(&dst).unwrap()
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn bytes_f32(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

/// Decodes Q8_K blocks (f32 d, i8 qs[256], i16 bsums[16]) to d * q, in f64.
fn decode_q8_k(bytes: &[u8]) -> Vec<f64> {
    assert_eq!(bytes.len() % 292, 0);
    bytes
        .chunks_exact(292)
        .flat_map(|b| {
            let d = f32::from_le_bytes(b[..4].try_into().unwrap()) as f64;
            b[4..260].iter().map(move |&q| d * (q as i8) as f64)
        })
        .collect()
}

fn q8_0_quantize_chunk_matches_gguf_py(cfg: &OracleConfig) {
    let python = cfg.require_python().unwrap();
    let (rows, n_per_row) = (5, 512);
    let mut rng = Rng(tiercheck_core::rng::Rng::new(1));
    let mut src = rng.vec(rows * n_per_row, 0.0, 1.0);
    // A row of zeros, one of large values and one with an outlier per block.
    src[..n_per_row].fill(0.0);
    src[n_per_row..2 * n_per_row].iter_mut().for_each(|v| *v *= 3.0e4);
    for b in 0..n_per_row / 32 {
        src[2 * n_per_row + 32 * b + b % 32] = 7.5;
    }
    let expected = gguf_py(python, "quantize", "Q8_0", rows, &f32_bytes(&src));
    assert_eq!(expected.len(), rows * n_per_row / 32 * 34);
    for tier in Tier::ALL {
        let lib = load(cfg, tier);
        let got = lib.quantize_chunk(Q8_0, &src, rows, n_per_row).unwrap();
        assert!(got == expected, "{tier}: ggml_quantize_chunk(Q8_0) differs from gguf-py");
        // ggml's and gguf-py's dequantizers agree on those bytes too.
        let deq = lib.dequantize(Q8_0, &got).unwrap();
        let py = bytes_f32(&gguf_py(python, "dequantize", "Q8_0", rows, &got));
        assert!(deq == py, "{tier}: Q8_0 dequantize differs from gguf-py");
    }
}

fn q4_k_vec_dot_of_both_tiers_is_close_to_f64(cfg: &OracleConfig) {
    let python = cfg.require_python().unwrap();
    let (x64, haswell) = (load(cfg, Tier::X64), load(cfg, Tier::Haswell));
    let (q4_k, q8_k) = (GgmlType::Q4_K.id(), GgmlType::Q8_K.id());
    assert_eq!(x64.vec_dot_type(q4_k).unwrap(), q8_k);
    assert_eq!(haswell.vec_dot_type(q4_k).unwrap(), q8_k);
    assert_eq!(x64.nrows(q4_k).unwrap(), 1);

    let n = 1024;
    for seed in 0..4 {
        let mut rng = Rng(tiercheck_core::rng::Rng::new(100 + seed));
        // Offsets keep the exact dot far from zero, so a relative bound means something.
        let w = rng.vec(n, 0.5, 1.0);
        let a = rng.vec(n, 0.3, 2.0);
        let x = x64.quantize_chunk(q4_k, &w, 1, n).unwrap();
        assert_eq!(x, haswell.quantize_chunk(q4_k, &w, 1, n).unwrap(), "Q4_K weights differ");
        let y = x64.from_float(q8_k, &a).unwrap();
        assert_eq!(y, haswell.from_float(q8_k, &a).unwrap(), "Q8_K activations differ");

        let wd = bytes_f32(&gguf_py(python, "dequantize", "Q4_K", 1, &x));
        let yd = decode_q8_k(&y);
        let exact: f64 = wd.iter().zip(&yd).map(|(&w, &y)| w as f64 * y).sum();
        assert!(exact.abs() > 10.0, "test data too close to zero: {exact}");
        for (tier, lib) in [(Tier::X64, &x64), (Tier::Haswell, &haswell)] {
            let s = lib.vec_dot(q4_k, n, &x, &y).unwrap() as f64;
            let rel = (s - exact).abs() / exact.abs();
            assert!(rel <= 1e-3, "{tier} seed {seed}: vec_dot {s} vs f64 {exact} (rel {rel:e})");
        }
    }
}

fn both_tiers_load_in_one_process_with_their_own_kernels(cfg: &OracleConfig) {
    let (x64, haswell) = (load(cfg, Tier::X64), load(cfg, Tier::Haswell));
    assert_ne!(x64.lib_dir(), haswell.lib_dir());
    let (fx, fh) = (x64.cpu_features(), haswell.cpu_features());
    assert!(!fx.avx && !fx.avx2 && !fx.fma && !fx.f16c && !fx.avx512, "x64: {fx:?}");
    assert!(fh.avx2 && fh.fma && fh.f16c && fh.bmi2 && !fh.avx512, "haswell: {fh:?}");
    assert!(fx.llamafile && fh.llamafile);
    // Loading a tier again gives the instance already loaded.
    assert_eq!(load(cfg, Tier::X64).lib_dir(), x64.lib_dir());

    let (q4_k, q8_k) = (GgmlType::Q4_K.id(), GgmlType::Q8_K.id());
    assert_eq!(x64.vec_dot_generic_symbol(q4_k).unwrap(), "ggml_vec_dot_q4_K_q8_K_generic");
    let n = 512;
    let (mut generic_differs, mut simd_differs) = (0, 0);
    for seed in 0..32 {
        let mut rng = Rng(tiercheck_core::rng::Rng::new(1000 + seed));
        let x = x64.quantize_chunk(q4_k, &rng.vec(n, 0.0, 1.0), 1, n).unwrap();
        let y = x64.from_float(q8_k, &rng.vec(n, 0.0, 1.0)).unwrap();
        let gx = x64.vec_dot_generic(q4_k, n, &x, &y).unwrap();
        let gh = haswell.vec_dot_generic(q4_k, n, &x, &y).unwrap();
        // Without SIMD, the x64 tier's vec_dot is the generic kernel itself.
        assert_eq!(x64.vec_dot(q4_k, n, &x, &y).unwrap().to_bits(), gx.to_bits());
        generic_differs += usize::from(gx.to_bits() != gh.to_bits());
        let vh = haswell.vec_dot(q4_k, n, &x, &y).unwrap();
        simd_differs += usize::from(vh.to_bits() != gx.to_bits());
        assert!((gx - gh).abs() <= 1e-5 * gx.abs().max(1.0) && (gx - vh).abs() <= 1e-3);
    }
    eprintln!("of 32 q4_K dots: generic x64 != haswell in {generic_differs}, AVX2 != x64 in {simd_differs}");
    // The same symbol name in both tiers resolves to each tier's own code: the haswell
    // build's generic kernel is compiled with FMA contraction, the x64 build's is not.
    assert!(generic_differs > 0, "x64 and haswell generic q4_K kernels never differed");
    assert!(simd_differs > 0, "haswell AVX2 vec_dot never differed from the x64 kernel");
}

fn wrong_inputs_are_errors_not_crashes(cfg: &OracleConfig) {
    let lib = load(cfg, Tier::X64);
    let (q4_k, q8_k) = (GgmlType::Q4_K.id(), GgmlType::Q8_K.id());
    let x = lib.quantize_chunk(q4_k, &[0.25; 256], 1, 256).unwrap();
    let y = lib.from_float(q8_k, &[0.5; 256]).unwrap();
    assert_eq!((x.len(), y.len()), (144, 292));

    let bad = |r: Result<f32, OracleError>| matches!(r, Err(OracleError::InvalidInput(_)));
    assert!(bad(lib.vec_dot(q4_k, 256, &x[1..], &y)));
    assert!(bad(lib.vec_dot(q4_k, 256, &x, &y[..291])));
    assert!(bad(lib.vec_dot(q4_k, 512, &x, &y)));
    assert!(bad(lib.vec_dot(q4_k, 128, &x[..72], &y[..146])));
    assert!(bad(lib.vec_dot(q4_k, 0, &[], &[])));
    assert!(matches!(lib.vec_dot(4, 256, &x, &y), Err(OracleError::UnknownType(4))));
    assert!(matches!(lib.vec_dot(43, 256, &x, &y), Err(OracleError::UnknownType(43))));
    assert!(matches!(lib.vec_dot(q8_k, 256, &y, &y), Err(OracleError::Unsupported { .. })));
    assert!(matches!(
        lib.vec_dot_generic(GgmlType::F32.id(), 4, &[0; 16], &[0; 16]),
        Err(OracleError::MissingSymbol { .. })
    ));

    assert!(matches!(
        lib.quantize_chunk(q4_k, &[0.0; 256], 2, 128),
        Err(OracleError::InvalidInput(_))
    ));
    assert!(matches!(
        lib.quantize_chunk(q4_k, &[0.0; 255], 1, 256),
        Err(OracleError::InvalidInput(_))
    ));
    for unsupported in [q8_k, GgmlType::Q8_1.id(), GgmlType::IQ2_XXS.id(), GgmlType::I8.id()] {
        assert!(matches!(
            lib.quantize_chunk(unsupported, &[0.0; 256], 1, 256),
            Err(OracleError::Unsupported { .. })
        ));
    }
    assert!(matches!(
        lib.quantize_chunk(GgmlType::IQ4_XS.id(), &[f32::NAN; 256], 1, 256),
        Err(OracleError::InvalidInput(_))
    ));
    assert!(matches!(
        lib.from_float(GgmlType::IQ2_XXS.id(), &[0.0; 256]),
        Err(OracleError::Unsupported { .. })
    ));
    assert!(matches!(lib.from_float(q8_k, &[0.0; 100]), Err(OracleError::InvalidInput(_))));
    assert!(matches!(lib.dequantize(q4_k, &x[..100]), Err(OracleError::InvalidInput(_))));
    assert!(matches!(lib.dequantize(q8_k, &y), Err(OracleError::Unsupported { .. })));
    assert!(lib.has_symbol("ggml_vec_dot_q4_K_q8_K_generic"));
    assert!(!lib.has_symbol("no_such_symbol"));

    // The generic Q8_K activation quantizer is exported and matches from_float here.
    assert_eq!(lib.from_float_generic(q8_k, &[0.5; 256]).unwrap(), y);
    // Empty inputs are fine.
    assert!(lib.quantize_chunk(q4_k, &[], 0, 256).unwrap().is_empty());
    assert!(lib.from_float(q8_k, &[]).unwrap().is_empty());
}
