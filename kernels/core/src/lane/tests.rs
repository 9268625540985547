//! The defaults of [`Kernels`] every lane without an override inherits: the plain-only
//! `matmul_prepared`, the thread-pool forms that ignore the pool, the quantize-then-
//! multiply `matmul` and `vec_dot_rows`' output order. Checked on the `ref` lane (which
//! overrides none of them) against a float64 product of the dequantized operands, so a
//! default that returns zeros, another row's dot or an empty vector fails here and not
//! only in a whole-model golden.

use super::*;
use crate::arch::generic::RefTwin;
use crate::repack::{Prepared, RepackLayout, RepackedMatrix};

const N: usize = 4;
const K: usize = 256;
const M: usize = 3;

fn weights(ty: GgmlType) -> Vec<u8> {
    let x: Vec<f32> = (0..N * K).map(|i| ((i * 7919 % 1013) as f32 - 506.0) * 0.004).collect();
    crate::quant::weights::quantize(ty, &x, N, K).unwrap()
}

fn activations() -> Vec<f32> {
    (0..M * K).map(|i| ((i * 3571 % 601) as f32 - 300.0) * 0.01).collect()
}

/// `out[i*N + j]` as float64 sums of the dequantized weight row `j` times the lane's
/// quantized activation row `i`, dequantized.
fn reference(ty: GgmlType, w: &[u8], x: &[f32]) -> Vec<f64> {
    let mut wf = vec![0.0f32; N * K];
    crate::blocks::dequantize(ty, w, &mut wf).unwrap();
    let rule = RefTwin.act_rule(ty).unwrap();
    let mut out = vec![0.0f64; M * N];
    for (i, xi) in x.chunks_exact(K).enumerate() {
        let q = rule.quantize(xi).unwrap();
        let mut af = vec![0.0f32; K];
        crate::blocks::dequantize(rule.format(), &q, &mut af).unwrap();
        for j in 0..N {
            let row = &wf[j * K..(j + 1) * K];
            out[i * N + j] = row.iter().zip(&af).map(|(&a, &b)| a as f64 * b as f64).sum();
        }
    }
    out
}

fn assert_close(got: &[f32], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let scale = want.iter().fold(0.0f64, |s, v| s.max(v.abs()));
    assert!(scale > 1.0, "{what}: the sample products are not small");
    for (idx, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g as f64 - w).abs() <= 1e-4 * scale,
            "{what}: out[{idx}] = {g}, float64 reference {w}"
        );
    }
}

#[test]
fn matmul_and_vec_dot_rows_follow_the_float64_product_row_by_row() {
    for ty in [GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K] {
        let bytes = weights(ty);
        let w = WeightMatrix::new(ty, N, K, &bytes).unwrap();
        let x = activations();
        let want = reference(ty, &bytes, &x);
        let got = RefTwin.matmul(&w, &x, M).unwrap();
        assert_close(&got, &want, ty.name());
        let mut act = Vec::new();
        for xi in x.chunks_exact(K) {
            act.extend(RefTwin.quantize_act(ty, xi).unwrap());
        }
        assert_eq!(vec_dot_rows(&RefTwin, &w, &act, M).unwrap(), got, "{}", ty.name());
        // one activation row short: refused, not read past
        let short = &act[..act.len() - act.len() / M];
        assert!(vec_dot_rows(&RefTwin, &w, short, M).is_err());
    }
}

#[test]
fn prepared_and_tier_defaults_are_the_plain_matmul() {
    let ty = GgmlType::Q4_0;
    let bytes = weights(ty);
    let w = WeightMatrix::new(ty, N, K, &bytes).unwrap();
    let x = activations();
    let want = reference(ty, &bytes, &x);
    let plain = RefTwin.matmul(&w, &x, M).unwrap();
    assert_close(&plain, &want, "matmul");
    let target = crate::repack::Target::Cpu;
    let prepared = RefTwin.prepare(w, target).unwrap();
    assert!(matches!(prepared, Prepared::Plain(_)), "the default keeps plain blocks");
    assert_eq!(RefTwin.matmul_prepared(&prepared, &x, M).unwrap(), plain);
    let mut act = Vec::new();
    for xi in x.chunks_exact(K) {
        act.extend(RefTwin.quantize_act(ty, xi).unwrap());
    }
    for threads in [1, 2, 3, 8] {
        for numa in [false, true] {
            let tier = TierPool { threads, numa };
            assert_eq!(RefTwin.matmul_quantized_tier(&w, &act, M, tier).unwrap(), plain);
            assert_eq!(RefTwin.matmul_prepared_tier(&prepared, &x, M, tier).unwrap(), plain);
        }
    }
    // a lane that cannot read an interleaved layout refuses it, in both forms
    let w8 = weights_rows(ty, 8);
    let w8m = WeightMatrix::new(ty, 8, K, &w8).unwrap();
    let repacked =
        Prepared::Repacked(RepackedMatrix::from_plain(&w8m, RepackLayout::Q4_0_8x8).unwrap());
    let err = RefTwin.matmul_prepared(&repacked, &x, M).unwrap_err();
    assert!(matches!(err, KernelError::Unsupported { .. }), "{err:?}");
    let err = RefTwin.matmul_prepared_tier(&repacked, &x, M, TierPool::threads(2)).unwrap_err();
    assert!(matches!(err, KernelError::Unsupported { .. }), "{err:?}");
}

fn weights_rows(ty: GgmlType, n: usize) -> Vec<u8> {
    let x: Vec<f32> = (0..n * K).map(|i| ((i * 131 % 97) as f32 - 48.0) * 0.02).collect();
    crate::quant::weights::quantize(ty, &x, n, K).unwrap()
}

#[test]
fn the_plain_defaults_describe_a_per_row_kernel() {
    assert_eq!(RefTwin.plain_path(GgmlType::Q4_K, 1), "vec_dot");
    assert_eq!(RefTwin.plain_path(GgmlType::Q4_K, 7), "vec_dot");
    assert_eq!(RefTwin.plain_split(GgmlType::Q6_K, 32, 3), Some(1));
    assert_eq!(RefTwin.planted_fault(), None);
}
