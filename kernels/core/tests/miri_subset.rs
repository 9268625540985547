//! A small, fast cross-section of the crate for Miri (`ci/miri`: `cargo +nightly miri
//! test -p tiercheck-core --test miri_subset`), which checks every memory access,
//! every `bytemuck` cast of block bytes and every integer operation for undefined
//! behaviour. It also runs as an ordinary test.
//!
//! Covered, on one or two blocks each (Miri interprets, so sizes stay tiny): the
//! dequantizers of every block format; the reference weight quantizers; every
//! activation rule; and every lane's portable twin (vec_dot, matmul, and the repacked
//! gemv/gemm where the lane repacks), each checked against the exact dot product of
//! the dequantized operands within a generous bound (the point is UB, not rounding).

use tiercheck_core::blocks::dequantize;
use tiercheck_core::quant::weights;
use tiercheck_core::repack::Target;
use tiercheck_core::{GgmlType, WeightMatrix, LANES};

/// Deterministic values in about [-1, 1], with a wider block now and then.
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed | 1;
    (0..n)
        .map(|i| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let u = ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0;
            if (i / 32) % 3 == 2 {
                u * 4.0
            } else {
                u
            }
        })
        .collect()
}

const TYPES: &[GgmlType] = weights::QUANTIZABLE;

/// The lanes of this process: every lane, or with `TIERCHECK_MIRI_SHARD=i/n` those at
/// indices `i, i + n, ...` of [`LANES`] (Miri interprets on one thread, so `ci/miri` runs
/// two shards side by side; together they cover every lane).
fn shard_lanes() -> Vec<&'static tiercheck_core::Lane> {
    let Ok(spec) = std::env::var("TIERCHECK_MIRI_SHARD") else { return LANES.to_vec() };
    let parsed = spec.split_once('/').and_then(|(i, n)| Some((i.parse().ok()?, n.parse().ok()?)));
    let (i, n): (usize, usize) = match parsed {
        Some((i, n)) if n > 0 && i < n => (i, n),
        _ => panic!("TIERCHECK_MIRI_SHARD={spec}: expected i/n with 0 <= i < n"),
    };
    LANES.iter().copied().skip(i).step_by(n).collect()
}

#[test]
fn weight_quantizers_and_dequantizers() {
    for &ty in TYPES {
        let k = 256;
        let x = values(k, 7);
        let q = weights::quantize(ty, &x, 1, k).unwrap();
        assert_eq!(q.len(), ty.row_bytes(k).unwrap());
        let mut y = vec![0.0f32; k];
        dequantize(ty, &q, &mut y).unwrap();
        let err: f32 = x.iter().zip(&y).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
        // Generous (the point is UB): the 2- and 3-bit types round wide blocks coarsely.
        let bound = if matches!(ty, GgmlType::Q2_K | GgmlType::Q3_K) { 1.5 } else { 0.5 };
        assert!(err < bound, "{}: max round-trip error {err}", ty.name());
    }
}

#[test]
fn activation_rules_round_trip() {
    let x = values(256, 11);
    for l in shard_lanes() {
        for &ty in TYPES {
            let Ok(rule) = l.portable.act_rule(ty) else { continue };
            let bytes = l.portable.quantize_act(ty, &x).unwrap();
            let fmt = rule.format();
            let mut y = vec![0.0f32; 256];
            dequantize(fmt, &bytes, &mut y).unwrap();
            let err: f32 = x.iter().zip(&y).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
            assert!(err < 0.05, "{} {}: activation error {err}", l.name, ty.name());
        }
    }
}

#[test]
fn every_twin_multiplies_correctly() {
    let (n, k) = (8, 256);
    let wf = values(n * k, 3);
    let x = values(k, 5);
    for &ty in TYPES {
        let w = weights::quantize(ty, &wf, n, k).unwrap();
        let mut wd = vec![0.0f32; n * k];
        dequantize(ty, &w, &mut wd).unwrap();
        let exact: Vec<f32> =
            (0..n).map(|j| (0..k).map(|i| wd[j * k + i] * x[i]).sum::<f32>()).collect();
        let scale: f32 = x.iter().map(|v| v.abs()).sum::<f32>();
        let wm = WeightMatrix::new(ty, n, k, &w).unwrap();
        for l in shard_lanes() {
            if l.portable.act_rule(ty).is_err() {
                continue; // the lane has no kernel for this type
            }
            let act = l.portable.quantize_act(ty, &x).unwrap();
            let one = l.portable.vec_dot(ty, wm.row(0), &act).unwrap();
            let prepared = l.portable.prepare(wm, Target::Cpu).unwrap();
            let all = l.portable.matmul_prepared(&prepared, &x, 1).unwrap();
            assert_eq!(all.len(), n);
            for (j, (&got, &want)) in all.iter().zip(&exact).enumerate() {
                assert!(
                    (got - want).abs() <= 0.05 * scale,
                    "{} {} row {j}: {got} vs exact {want}",
                    l.name,
                    ty.name()
                );
            }
            assert!((one - exact[0]).abs() <= 0.05 * scale, "{} {} vec_dot", l.name, ty.name());
        }
    }
}
