//! The decoder's dense matmul for F32 weights (and for every weight under
//! [`Arith::DequantF32`], the float reference forward): each output a float64 sum of one
//! weight row times one activation row, rounded to f32 once, at `out[i * n + j]`.
//! Checked on hand-worked products, independent of the code. And the kernel path each
//! matmul records for a trace's provenance, per row count.

use super::*;
use crate::shaped::{build_shaped, ShapeOptions};

/// A one-layer shaped model in `dir` (the paths tested here do not read its weights).
fn small_model(dir: &std::path::Path) -> Model {
    let opts = ShapeOptions {
        shape: "0.6b".into(),
        layers: Some(1),
        vocab: Some(512),
        out: Some(dir.join("m.gguf")),
        ..Default::default()
    };
    Model::open(&build_shaped(&opts, &mut |_, _| {}).unwrap().path).unwrap()
}

/// A decoder of the float reference forward over [`small_model`].
fn with_decoder(f: impl FnOnce(&Decoder<'_>)) {
    let tmp = tempfile::tempdir().unwrap();
    let model = small_model(tmp.path());
    let dec = Decoder::new(&model, Arith::DequantF32, Residual::F32, 256, Attention::LLAMA_DEFAULT)
        .unwrap();
    f(&dec);
}

#[test]
fn the_dense_product_is_a_float64_sum_per_row_rounded_once() {
    with_decoder(|dec| {
        // 3 weight rows of 4 values, 2 activation rows: small integers, exact sums
        let w: Vec<f32> = vec![1., 2., 3., 4., -1., 0., 2., 5., 0.5, 0.25, -2., 1.];
        let x: Vec<f32> = vec![1., 1., 1., 1., 2., -3., 0., 4.];
        let got = dec.matmul(&Linear::F32 { n: 3, k: 4, w }, &x, 2, "dense").unwrap();
        // row i = 0: 10, 6, -0.25; row i = 1: 2-6+16 = 12, -2+20 = 18, 1-0.75+4 = 4.25
        assert_eq!(got, vec![10.0, 6.0, -0.25, 12.0, 18.0, 4.25]);
        // 1 + 2^-24 + 2^-24: f32 steps lose both halves (ties to even), the float64 sum
        // keeps them and rounds once to 1 + 2^-23
        let h = f32::EPSILON / 2.0;
        let got = dec.matmul(&Linear::F32 { n: 1, k: 3, w: vec![1.0; 3] }, &[1.0, h, h], 1, "d");
        assert_eq!(got.unwrap(), vec![1.0 + f32::EPSILON]);
        assert!(
            dec.matmul_paths().iter().any(|p| p.contains("f64-dot")),
            "{:?}",
            dec.matmul_paths()
        );
    });
}

/// The kernel path a matmul records (a trace's `matmul_paths`): ggml's repacked
/// matmul runs the gemm on the rows in whole fours and the gemv on the rest, so 1 or 3
/// rows are `gemv`, 4 and 8 `gemm`, 5 `gemm+gemv`; plain weights name the lane's kernel.
#[test]
fn matmul_paths_name_the_kernel_each_row_count_takes() {
    let tmp = tempfile::tempdir().unwrap();
    let model = small_model(tmp.path());
    let repack = tiercheck_lanes::all().iter().find(|l| l.name == "x86_64-avx2-repack").unwrap();
    let chosen = tiercheck_lanes::choose(repack, tiercheck_lanes::Impl::Portable).unwrap();
    let lane = chosen.kernels;
    let dec = Decoder::new(
        &model,
        Arith::from_chosen(&chosen, 1),
        Residual::F32,
        256,
        Attention::LLAMA_DEFAULT,
    )
    .unwrap();
    let (n, k) = (8usize, 256usize);
    let w: Vec<f32> = (0..n * k).map(|i| ((i * 7919 % 1013) as f32 - 506.0) * 0.004).collect();
    let bytes = tiercheck_core::quant::weights::quantize(GgmlType::Q4_K, &w, n, k).unwrap();
    let wm = tiercheck_core::WeightMatrix::new(GgmlType::Q4_K, n, k, &bytes).unwrap();
    let repacked = lane.prepare(wm, tiercheck_core::repack::Target::Cpu).unwrap();
    assert!(matches!(repacked, Prepared::Repacked(_)));
    let plain = Linear::Lane(Prepared::Plain(wm));
    let repacked = Linear::Lane(repacked);
    for m in [1usize, 3, 4, 5, 8] {
        let x = vec![0.5f32; m * k];
        dec.matmul(&repacked, &x, m, "t").unwrap();
    }
    dec.matmul(&plain, &[0.5f32; 256], 1, "t").unwrap();
    let paths = dec.matmul_paths();
    for want in [
        "q4_K q4_K_8x8 m=1 gemv",
        "q4_K q4_K_8x8 m=3 gemv",
        "q4_K q4_K_8x8 m=4 gemm",
        "q4_K q4_K_8x8 m=5 gemm+gemv",
        "q4_K q4_K_8x8 m=8 gemm",
        "q4_K plain m=1 vec_dot",
    ] {
        assert!(paths.iter().any(|p| p == want), "no `{want}` in {paths:?}");
    }
}
