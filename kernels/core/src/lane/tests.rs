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

/// Empty shapes on every lane's twin: no weight rows gives no outputs, no values per
/// row gives zeros (an empty sum), never a panic and never a vector of another length.
#[test]
fn every_twin_takes_empty_shapes() {
    let x = activations();
    for lane in crate::LANES {
        for ty in WEIGHT_TYPES.iter().copied() {
            let k = lane.portable;
            if k.act_rule(ty).is_err() {
                continue;
            }
            let none = WeightMatrix::new(ty, 0, K, &[]).unwrap();
            let got = k.matmul(&none, &x, M).unwrap_or_else(|e| panic!("{}: {e}", lane.name));
            assert!(
                got.is_empty(),
                "{} {}: n = 0 gave {} outputs",
                lane.name,
                ty.name(),
                got.len()
            );
            let flat = WeightMatrix::new(ty, 5, 0, &[]).unwrap();
            let got = k.matmul(&flat, &[], M).unwrap_or_else(|e| panic!("{}: {e}", lane.name));
            assert_eq!(got, vec![0.0; M * 5], "{} {}: k = 0", lane.name, ty.name());
        }
    }
}

fn weights_nk(ty: GgmlType, n: usize, seed: usize) -> Vec<u8> {
    let x: Vec<f32> =
        (0..n * K).map(|i| (((i + seed) * 7919 % 1013) as f32 - 506.0) * 0.004).collect();
    crate::quant::weights::quantize(ty, &x, n, K).unwrap()
}

fn quantized(lane: &dyn Kernels, ty: GgmlType, x: &[f32]) -> Vec<u8> {
    x.chunks_exact(K).flat_map(|xi| lane.quantize_act(ty, xi).unwrap()).collect()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|f| f.to_bits()).collect()
}

/// Every lane's five ways to multiply weights that stay plain (6 rows: no interleaved
/// layout takes them) are one computation: `matmul`, `matmul_quantized`, its form on a
/// one-thread pool, and `matmul_prepared` with its pool form, bitwise; and the result is
/// the product within a float64 bound. An override that returns another vector, or
/// hands plain weights to another kernel than the tier's, fails here.
#[test]
fn every_lane_multiplies_plain_weights_one_way() {
    let (n, m) = (6, 4);
    let x: Vec<f32> = (0..m * K).map(|i| ((i * 3571 % 601) as f32 - 300.0) * 0.01).collect();
    for lane in crate::LANES {
        let k = lane.portable;
        for ty in [GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q4_1] {
            if k.act_rule(ty).is_err() {
                continue;
            }
            let what = format!("{} {}", lane.name, ty.name());
            let bytes = weights_nk(ty, n, 1);
            let w = WeightMatrix::new(ty, n, K, &bytes).unwrap();
            let prepared = k.prepare(w, crate::repack::Target::Cpu).unwrap();
            assert!(matches!(prepared, Prepared::Plain(_)), "{what}: 6 rows stay plain");
            let act = quantized(k, ty, &x);
            let one = TierPool::threads(1);
            let a = k.matmul(&w, &x, m).unwrap();
            assert_eq!(a.len(), m * n, "{what}");
            for (form, got) in [
                ("matmul_quantized", k.matmul_quantized(&w, &act, m).unwrap()),
                ("matmul_quantized_tier", k.matmul_quantized_tier(&w, &act, m, one).unwrap()),
                ("matmul_prepared", k.matmul_prepared(&prepared, &x, m).unwrap()),
                ("matmul_prepared_tier", k.matmul_prepared_tier(&prepared, &x, m, one).unwrap()),
            ] {
                assert_eq!(bits(&got), bits(&a), "{what}: {form} differs from matmul");
            }
            // the product, from the dequantized weights and the lane's own activation codes
            let mut wf = vec![0.0f32; n * K];
            crate::blocks::dequantize(ty, &bytes, &mut wf).unwrap();
            let atype = k.act_rule(ty).unwrap().format();
            let arow = act.len() / m;
            let mut scale = 0.0f64;
            let mut want = vec![0.0f64; m * n];
            for i in 0..m {
                let mut af = vec![0.0f32; K];
                crate::blocks::dequantize(atype, &act[i * arow..(i + 1) * arow], &mut af).unwrap();
                let a8: Option<&[crate::blocks::BlockQ8_1]> = (atype == GgmlType::Q8_1)
                    .then(|| bytemuck::cast_slice(&act[i * arow..(i + 1) * arow]));
                for j in 0..n {
                    let row = &wf[j * K..(j + 1) * K];
                    want[i * n + j] = row.iter().zip(&af).map(|(&p, &q)| p as f64 * q as f64).sum();
                    // Q4_1's offset multiplies the q8_1 block's stored sum `s` (ggml's
                    // `m * s` on every tier), not the sum of its dequantized codes: on
                    // the GPU lanes `s` is the sum of the unquantized values.
                    if let (GgmlType::Q4_1, Some(a8)) = (ty, a8) {
                        let blocks: &[crate::blocks::BlockQ4_1] =
                            bytemuck::cast_slice(&bytes[j * ty.row_bytes(K).unwrap()..]);
                        for (b, y) in a8.iter().enumerate() {
                            let codes: f64 =
                                af[32 * b..32 * b + 32].iter().map(|&v| v as f64).sum();
                            want[i * n + j] += blocks[b].m() as f64 * (y.s() as f64 - codes);
                        }
                    }
                    scale = scale.max(want[i * n + j].abs());
                }
            }
            for (idx, (&g, &e)) in a.iter().zip(&want).enumerate() {
                assert!(
                    (g as f64 - e).abs() <= 1e-3 * scale,
                    "{what}: out[{idx}] = {g}, product {e}"
                );
            }
        }
    }
}

/// `matmul_parallel` splits the output columns between 1 to 5 threads, on plain weights
/// (6 and 42 rows) and on interleaved ones (40 rows: five groups of 8 where a lane
/// repacks; 128 rows: 16 groups, 8 a thread at 2 threads), with the tier's pool at 3
/// threads: every split is bitwise the unsplit
/// `matmul_prepared_tier`. At 42 rows by 2 activation rows the i8mm build tiles every
/// pair (chunks of 14 rows on 3 tier threads), and 21-row halves would tile none: a
/// split that ignores `plain_split` fails there.
#[test]
fn matmul_parallel_is_the_unsplit_matmul() {
    let tier = TierPool::threads(3);
    for lane in crate::LANES {
        let k = lane.portable;
        for ty in [GgmlType::Q4_K, GgmlType::Q4_0, GgmlType::Q4_1] {
            if k.act_rule(ty).is_err() {
                continue;
            }
            for (n, m) in [(42usize, 2usize), (40, 5), (40, 2), (6, 3), (128, 2)] {
                let what = format!("{} {} n={n} m={m}", lane.name, ty.name());
                let bytes = weights_nk(ty, n, n + m);
                let x: Vec<f32> =
                    (0..m * K).map(|i| ((i * 3571 % 601) as f32 - 300.0) * 0.01).collect();
                let w = WeightMatrix::new(ty, n, K, &bytes).unwrap();
                let prepared = k.prepare(w, crate::repack::Target::Cpu).unwrap();
                let whole = k.matmul_prepared_tier(&prepared, &x, m, tier).unwrap();
                assert_eq!(whole.len(), m * n, "{what}");
                for threads in 1..=5 {
                    let got = parallel::matmul_parallel(k, &prepared, &x, m, threads, tier)
                        .unwrap_or_else(|e| panic!("{what}: {e}"));
                    assert_eq!(bits(&got), bits(&whole), "{what}: {threads} threads");
                }
            }
        }
    }
}

/// Every lane's recipe names the activation rules its twin applies to the four types
/// every lane multiplies (`act_k` for Q4_K and Q6_K, `act_legacy` for Q4_0 and Q8_0),
/// and a GPU lane's recipe the device compiler's fusions its twin's MMVQ schedule uses
/// (HIP's clang on wave32 RDNA2 or wave64 gfx90a, nvcc): the recipe `tiercheck lanes`
/// prints and `attribute` composes from is the arithmetic the twin runs.
#[test]
fn every_recipe_names_its_twins_rules() {
    use crate::gpu::Contraction as Fusions;
    for lane in crate::LANES {
        for ty in WEIGHT_TYPES.iter().copied() {
            let Ok(twin) = lane.portable.act_rule(ty) else { continue };
            let recipe = lane.recipe.act_rule(ty, "recipe").unwrap();
            assert_eq!(
                recipe,
                twin,
                "{} {}: the recipe's rule is not the twin's",
                lane.name,
                ty.name()
            );
        }
    }
    for (lane, twin, fusions) in [
        (&crate::arch::hip::HIP_WAVE32, &crate::arch::hip::HIP_WAVE32_TWIN, Fusions::HIP_CLANG),
        (
            &crate::arch::hip::HIP_WAVE64,
            &crate::arch::hip::HIP_WAVE64_TWIN,
            Fusions::HIP_CLANG_GFX90A,
        ),
        (&crate::arch::hip::CUDA_SM90, &crate::arch::hip::CUDA_SM90_TWIN, Fusions::NVCC),
    ] {
        assert_eq!(twin.0.contraction, fusions, "{}: the twin's fusions", lane.name);
        let named = match lane.recipe.contraction {
            Contraction::Nvcc => Fusions::NVCC,
            Contraction::HipClang if twin.0.warp_size == 32 => Fusions::HIP_CLANG,
            Contraction::HipClang => Fusions::HIP_CLANG_GFX90A,
            other => panic!("{}: a GPU recipe with contraction {}", lane.name, other.name()),
        };
        assert_eq!(named, fusions, "{}: the recipe names other fusions than the twin's", lane.name);
    }
}
