//! The Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q5_K, IQ4_NL and IQ4_XS codecs on blocks written by
//! hand from ggml's layouts
//! (`ggml-common.h`) and inputs whose quantization is known exactly. The bitwise proof
//! against ggml's own reference quantizers and dequantizers is the oracle suite
//! (`oracle_ref::oracle/x64/{quantize,dequant}/<type>`); these pin the layouts where the
//! oracle is not built.

use tiercheck_core::blocks::iq4_nl::KVALUES_IQ4NL;
use tiercheck_core::blocks::{
    self, BlockIq4Nl, BlockIq4Xs, BlockQ2K, BlockQ3K, BlockQ4_1, BlockQ5K, BlockQ5_0, BlockQ5_1,
};
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
fn q2_k_reads_crumbs_of_32_byte_halves_with_nibble_scales_and_mins() {
    // Sub-block s: scale code s % 16 (low nibble), min code 1; d = 1, dmin = 0.5.
    let mut scales = [0u8; 16];
    for (s, b) in scales.iter_mut().enumerate() {
        *b = (s as u8 & 15) | (1 << 4);
    }
    let mut qs = [0u8; 64];
    // Value 128h + 32j + l is bits 2j of qs[32h + l]: give it (j + h) % 4.
    for h in 0..2 {
        for l in 0..32 {
            qs[32 * h + l] = (0..4).map(|j| (((j + h) % 4) as u8) << (2 * j)).sum();
        }
    }
    let b = BlockQ2K { scales, qs, d: ONE, dmin: HALF };
    let y = dequant(GgmlType::Q2_K, bytemuck::bytes_of(&b));
    assert_eq!(y.len(), 256);
    for (i, &v) in y.iter().enumerate() {
        let (h, j) = (i / 128, (i % 128) / 32);
        let s = i / 16;
        assert_eq!(v, s as f32 * ((j + h) % 4) as f32 - 0.5, "value {i}");
    }
}

#[test]
fn q3_k_subtracts_four_where_the_hmask_bit_is_clear() {
    // Codes: sub-block s has 6-bit code 33 + s (scale s + 1): low nibble of code in
    // scales[s] (s < 8) or the high nibble of scales[s - 8], top bits in scales[8 + s%4].
    let mut scales = [0u8; 12];
    for s in 0..16 {
        let code = 33 + s as u8;
        if s < 8 {
            scales[s] |= code & 0xF;
        } else {
            scales[s - 8] |= (code & 0xF) << 4;
        }
        scales[8 + s % 4] |= (code >> 4) << (2 * (s / 4));
    }
    // Every crumb 3; the hmask bit of value i set only for i % 3 == 0.
    let mut hmask = [0u8; 32];
    for i in (0..256).step_by(3) {
        hmask[i % 32] |= 1 << (i / 32);
    }
    let b = BlockQ3K { hmask, qs: [0xFF; 64], scales, d: ONE };
    for s in 0..16 {
        assert_eq!(b.scale(s), 33 + s as u8);
    }
    let y = dequant(GgmlType::Q3_K, bytemuck::bytes_of(&b));
    assert_eq!(y.len(), 256);
    for (i, &v) in y.iter().enumerate() {
        let q = if i % 3 == 0 { 3.0 } else { -1.0 };
        assert_eq!(v, (i / 16 + 1) as f32 * q, "value {i}");
    }
}

#[test]
fn iq4_indices_select_the_non_linear_levels() {
    let mut qs = [0u8; 16];
    for (j, q) in qs.iter_mut().enumerate() {
        *q = (j as u8) | ((15 - j as u8) << 4);
    }
    let b = BlockIq4Nl { d: HALF, qs };
    let y = dequant(GgmlType::IQ4_NL, bytemuck::bytes_of(&b));
    for j in 0..16 {
        assert_eq!(y[j], KVALUES_IQ4NL[j] as f32 * 0.5);
        assert_eq!(y[j + 16], KVALUES_IQ4NL[15 - j] as f32 * 0.5);
    }
    // IQ4_XS: sub-block s has code 32 + s - 4 (scale s - 4): nibbles in scales_l, pairs of
    // top bits in scales_h.
    let mut scales_l = [0u8; 4];
    let mut scales_h = 0u16;
    for s in 0..8 {
        let code = (28 + s) as u8;
        scales_l[s / 2] |= (code & 0xF) << (4 * (s % 2));
        scales_h |= ((code >> 4) as u16) << (2 * s);
    }
    let mut qs = [0u8; 128];
    qs.iter_mut().enumerate().for_each(|(i, q)| *q = (i % 16) as u8 * 0x11);
    let b = BlockIq4Xs { d: ONE, scales_h: scales_h.to_le_bytes(), scales_l, qs };
    let y = dequant(GgmlType::IQ4_XS, bytemuck::bytes_of(&b));
    assert_eq!(y.len(), 256);
    for (i, &v) in y.iter().enumerate() {
        let (s, j) = (i / 32, i % 16);
        assert_eq!(v, (s as f32 - 4.0) * KVALUES_IQ4NL[j] as f32, "value {i}");
    }
}

#[test]
fn zero_rows_quantize_to_their_documented_bytes() {
    let z = vec![0.0f32; 256];
    // IQ4_NL: d = 0 and every index 8 (the level nearest 0 from above).
    let q = weights::quantize(GgmlType::IQ4_NL, &z[..32], 1, 32).unwrap();
    assert_eq!(&q[..2], &[0, 0]);
    assert!(q[2..].iter().all(|&b| b == 0x88));
    // IQ4_XS: d = f16(-0.0), codes 32, indices 8.
    let q = weights::quantize(GgmlType::IQ4_XS, &z, 1, 256).unwrap();
    let b: BlockIq4Xs = *bytemuck::from_bytes(&q);
    assert_eq!(b.d, 0x8000u16.to_le_bytes());
    assert!((0..8).all(|s| b.scale(s) == 32));
    assert!(b.qs.iter().all(|&q| q == 0x88));
    for ty in [GgmlType::Q2_K, GgmlType::Q3_K] {
        let q = weights::quantize(ty, &z, 1, 256).unwrap();
        assert!(dequant(ty, &q).iter().all(|&v| v == 0.0), "{ty}");
    }
}

#[test]
fn bad_lengths_are_errors() {
    for ty in [
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q5_1,
        GgmlType::Q5_K,
        GgmlType::Q2_K,
        GgmlType::Q3_K,
        GgmlType::IQ4_NL,
        GgmlType::IQ4_XS,
    ] {
        assert!(weights::quantize(ty, &[0.0; 48], 1, 48).is_err(), "{ty}");
        let mut out = vec![0.0; ty.block_size()];
        assert!(blocks::dequantize(ty, &[0u8; 3], &mut out).is_err(), "{ty}");
    }
}
