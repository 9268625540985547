//! The repack decision takes the target device into account, and a lane that cannot
//! read a repacked layout refuses repacked bytes with an error.

use tiercheck_core::quant::weights;
use tiercheck_core::repack::{Prepared, Target};
use tiercheck_core::{lane, GgmlType, KernelError, WeightMatrix, LANES};

fn q4k(n: usize, k: usize) -> Vec<u8> {
    let x: Vec<f32> = (0..n * k).map(|i| ((i * 31 % 97) as f32 - 48.0) * 0.02).collect();
    weights::quantize(GgmlType::Q4_K, &x, n, k).unwrap()
}

#[test]
fn cpu_repack_lanes_repack_for_the_cpu_and_stage_plain_blocks_for_a_gpu() {
    let bytes = q4k(16, 512);
    let w = WeightMatrix::new(GgmlType::Q4_K, 16, 512, &bytes).unwrap();
    let mut repacking = 0;
    for l in LANES {
        let cpu = l.portable.prepare(w, Target::Cpu).unwrap();
        let gpu = l.portable.prepare(w, Target::Gpu).unwrap();
        assert!(matches!(gpu, Prepared::Plain(_)), "{}: GPU-bound weights must stay plain", l.name);
        if let Prepared::Repacked(r) = cpu {
            repacking += 1;
            assert_eq!(r.to_plain(), bytes, "{}: repack must be invertible", l.name);
        }
    }
    assert!(repacking >= 1, "at least one CPU lane repacks q4_K");
}

#[test]
fn lanes_that_do_not_read_a_layout_refuse_repacked_bytes() {
    let bytes = q4k(8, 256);
    let w = WeightMatrix::new(GgmlType::Q4_K, 8, 256, &bytes).unwrap();
    let repack = lane("x86_64-avx2-repack").unwrap();
    let repacked = repack.portable.prepare(w, Target::Cpu).unwrap();
    assert!(matches!(repacked, Prepared::Repacked(_)));
    let x = vec![0.5f32; 256];
    for name in ["ref", "x86_64-avx2", "aarch64-neon"] {
        let l = lane(name).unwrap();
        match l.portable.matmul_prepared(&repacked, &x, 1) {
            Err(KernelError::Unsupported { .. }) => {}
            other => panic!("{name} accepted repacked bytes: {other:?}"),
        }
    }
    // The lane that made them reads them, with the same result as on plain weights.
    let a = repack.portable.matmul_prepared(&repacked, &x, 1).unwrap();
    let b = repack.portable.matmul(&w, &x, 1).unwrap();
    assert_eq!(a, b);
}
