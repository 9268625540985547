//! The decoder's dense matmul for F32 weights (and for every weight under
//! [`Arith::DequantF32`], the float reference forward): each output a float64 sum of one
//! weight row times one activation row, rounded to f32 once, at `out[i * n + j]`.
//! Checked on hand-worked products, independent of the code.

use super::*;
use crate::shaped::{build_shaped, ShapeOptions};

/// A decoder over a one-layer shaped model (the dense path does not read the model).
fn with_decoder(f: impl FnOnce(&Decoder<'_>)) {
    let tmp = tempfile::tempdir().unwrap();
    let opts = ShapeOptions {
        shape: "0.6b".into(),
        layers: Some(1),
        vocab: Some(512),
        out: Some(tmp.path().join("m.gguf")),
        ..Default::default()
    };
    let built = build_shaped(&opts, &mut |_, _| {}).unwrap();
    let model = Model::open(&built.path).unwrap();
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
