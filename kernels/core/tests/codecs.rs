//! The Q4_1, Q5_0, Q5_1 and Q5_K codecs on blocks written by hand from ggml's layouts
//! (`ggml-common.h`) and inputs whose quantization is known exactly. The bitwise proof
//! against ggml's own reference quantizers and dequantizers is the oracle suite
//! (`oracle_ref::oracle/x64/{quantize,dequant}/<type>`); these pin the layouts where the
//! oracle is not built.

use tiercheck_core::blocks::{self, BlockQ4_1, BlockQ5K, BlockQ5_0, BlockQ5_1};
use tiercheck_core::quant::weights;
use tiercheck_core::GgmlType;

const ONE: [u8; 2] = 0x3C00u16.to_le_bytes();
const HALF: [u8; 2] = 0x3800u16.to_le_bytes();
const MINUS_TWO: [u8; 2] = 0xC000u16.to_le_bytes();

fn dequant(ty: GgmlType, bytes: &[u8]) -> Vec<f32> {
    let mut out = vec![0.0; bytes.len() / ty.type_size() * ty.block_size()];
    blocks::dequantize(ty, bytes, &mut out).unwrap();
    out
}

#[test]
fn q4_1_is_q_times_d_plus_m_with_nibbles_split_in_halves() {
    let mut qs = [0u8; 16];
    for (j, q) in qs.iter_mut().enumerate() {
        *q = (j as u8) | ((15 - j as u8) << 4);
    }
    let b = BlockQ4_1 { d: HALF, m: MINUS_TWO, qs };
    let y = dequant(GgmlType::Q4_1, bytemuck::bytes_of(&b));
    for j in 0..16 {
        assert_eq!(y[j], j as f32 * 0.5 - 2.0, "{j}");
        assert_eq!(y[j + 16], (15 - j) as f32 * 0.5 - 2.0, "{j}");
    }
}

#[test]
fn q5_0_takes_the_fifth_bit_of_element_j_from_bit_j_of_qh() {
    // Element j has quant j (0..32): low nibble j & 15, fifth bit j >> 4.
    let mut qs = [0u8; 16];
    for (j, q) in qs.iter_mut().enumerate() {
        *q = (j as u8) | (((j + 16) as u8 & 15) << 4);
    }
    let qh = 0xFFFF_0000u32.to_le_bytes();
    let b = BlockQ5_0 { d: ONE, qh, qs };
    let y = dequant(GgmlType::Q5_0, bytemuck::bytes_of(&b));
    let want: Vec<f32> = (0..32).map(|j| (j - 16) as f32).collect();
    assert_eq!(y, want);
    // Swapping the halves of qh moves the fifth bits with it.
    let b = BlockQ5_0 { qh: 0x0000_FFFFu32.to_le_bytes(), ..b };
    let y = dequant(GgmlType::Q5_0, bytemuck::bytes_of(&b));
    assert_eq!(y[0], 0.0);
    assert_eq!(y[31], -1.0);
}

#[test]
fn q5_1_is_unsigned_q_times_d_plus_m() {
    let b = BlockQ5_1 { d: HALF, m: ONE, qh: 0x8000_0001u32.to_le_bytes(), qs: [0x21; 16] };
    let y = dequant(GgmlType::Q5_1, bytemuck::bytes_of(&b));
    assert_eq!(y[0], (1 + 16) as f32 * 0.5 + 1.0);
    assert_eq!(y[1], 1.0 * 0.5 + 1.0);
    assert_eq!(y[16], 2.0 * 0.5 + 1.0);
    assert_eq!(y[31], (2 + 16) as f32 * 0.5 + 1.0);
}

#[test]
fn q5_k_reads_chunk_nibbles_and_bit_pairs_of_qh() {
    // Scales 1 and mins 0 for every sub-block (get_scale_min_k4's packing for j < 4 and
    // j >= 4), d = 1, dmin = 1: every value is its quant.
    let mut scales = [0u8; 12];
    scales[..4].fill(1);
    scales[8..].fill(0x01);
    let mut b = BlockQ5K { d: ONE, dmin: ONE, scales, qh: [0; 32], qs: [0; 128] };
    for c in 0..4 {
        for l in 0..32 {
            b.qs[32 * c + l] = (l as u8 & 15) | (((l as u8 + c as u8) & 15) << 4);
        }
    }
    // The fifth bit of value 64c + 32 + l for c = 3, l = 5: bit 7 of qh[5].
    b.qh[5] = 0x80;
    let y = dequant(GgmlType::Q5_K, bytemuck::bytes_of(&b));
    for c in 0..4 {
        for l in 0..32 {
            assert_eq!(y[64 * c + l], (l & 15) as f32, "c {c} l {l}");
            let hi = ((l + c) & 15) + if c == 3 && l == 5 { 16 } else { 0 };
            assert_eq!(y[64 * c + 32 + l], hi as f32, "c {c} l {l}");
            assert_eq!(b.quant(64 * c + 32 + l) as usize, hi);
        }
    }
}

#[test]
fn reference_quantizers_reproduce_exactly_representable_rows() {
    // q5_0: the largest magnitude is -16, so d = 1 and every integer in -16..=15 is exact.
    let x: Vec<f32> = (0..64).map(|i| (i % 32) as f32 - 16.0).collect();
    let q = weights::quantize(GgmlType::Q5_0, &x, 2, 32).unwrap();
    assert_eq!(dequant(GgmlType::Q5_0, &q), x);
    // q4_1 and q5_1: min 0 and max 15 (31) give d = 1, m = 0.
    let x: Vec<f32> = (0..32).map(|i| (i % 16) as f32).collect();
    assert_eq!(dequant(GgmlType::Q4_1, &weights::quantize(GgmlType::Q4_1, &x, 1, 32).unwrap()), x);
    let x: Vec<f32> = (0..32).map(|i| (31 - i) as f32).collect();
    assert_eq!(dequant(GgmlType::Q5_1, &weights::quantize(GgmlType::Q5_1, &x, 1, 32).unwrap()), x);
    // A constant block: q4_1 and q5_1 store d = 0 and m = the value.
    let x = vec![0.75f32; 32];
    for ty in [GgmlType::Q4_1, GgmlType::Q5_1] {
        assert_eq!(dequant(ty, &weights::quantize(ty, &x, 1, 32).unwrap()), x, "{ty}");
    }
    // q5_K: all zeros stay zeros (d = dmin = 0).
    let z = vec![0.0f32; 256];
    let q = weights::quantize(GgmlType::Q5_K, &z, 1, 256).unwrap();
    assert!(q.iter().all(|&b| b == 0));
    // q5_K of a row that is already 32 levels apart in every sub-block comes back within
    // half a step.
    let x: Vec<f32> = (0..256).map(|i| (i % 32) as f32 * 0.25).collect();
    let y = dequant(GgmlType::Q5_K, &weights::quantize(GgmlType::Q5_K, &x, 1, 256).unwrap());
    for (a, b) in x.iter().zip(&y) {
        assert!((a - b).abs() <= 0.125 + 1e-3, "{a} vs {b}");
    }
}

#[test]
fn bad_lengths_are_errors() {
    for ty in [GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q5_K] {
        assert!(weights::quantize(ty, &[0.0; 48], 1, 48).is_err(), "{ty}");
        let mut out = vec![0.0; ty.block_size()];
        assert!(blocks::dequantize(ty, &[0u8; 3], &mut out).is_err(), "{ty}");
    }
}
