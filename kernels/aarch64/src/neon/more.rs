//! ggml's NEON vec_dot kernels (`nrc == 1`) of Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS, Q2_K,
//! Q3_K and Q5_K (`ggml_vec_dot_q4_1_q8_1`, `..._q5_0_q8_0`, `..._q5_1_q8_1`,
//! `..._iq4_nl_q8_0`, `..._iq4_xs_q8_K`, `..._q2_K_q8_K`, `..._q3_K_q8_K`,
//! `..._q5_K_q8_K` in `ggml-cpu/arch/arm/quants.c`, `__ARM_NEON` branches), natively.
//! Twin: `tiercheck_core::arch::aarch64::neon::vec_dot` (same names; its docs give the
//! float order).
//!
//! Integer stages as ggml computes them: codes widened in 16-byte vectors (nibbles by
//! `vandq_u8`/`vshrq_n_u8`, a fifth bit or a K-quant high bit moved into place by a
//! byte test, IQ4 codes looked up by `vqtbl1q_s8`), dotted by `sdot` (or its plain NEON
//! sums without dotprod), reduced by `vaddvq_s32` and scaled in i32 (wrapping, as the
//! twin). Float steps: `vmulq_n_f32` then `vaddq_f32` where ggml uses `vmlaq_n_f32`
//! (GCC keeps it unfused), `f32::mul_add` (fmadd/fmsub) exactly where GCC contracts a C
//! expression, `vaddvq_f32` for the pairwise lane sums.

use core::arch::aarch64::*;

use super::vec_dot::sdot;
use crate::simd::{ld, lds};

use tiercheck_core::blocks::iq4_nl::KVALUES_IQ4NL;
use tiercheck_core::blocks::q4_k::scale_min_k4;
use tiercheck_core::blocks::{
    BlockIq4Nl, BlockIq4Xs, BlockQ2K, BlockQ3K, BlockQ4_1, BlockQ5K, BlockQ5_0, BlockQ5_1,
    BlockQ8K, BlockQ8_0, BlockQ8_1,
};

/// Bit `j % 8` of every byte lane j: the masks that test one bit of a replicated byte.
const BIT_OF_LANE: [u8; 16] = [1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128];

/// The four bytes of `qh` spread over 32 lanes: lane j of the pair holds byte `j / 8`
/// (`vqtbl1q_u8` of the replicated word).
#[inline]
#[target_feature(enable = "neon")]
fn spread(qh: [u8; 4]) -> (uint8x16_t, uint8x16_t) {
    const LO: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1];
    const HI: [u8; 16] = [2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3];
    let word = vreinterpretq_u8_u32(vdupq_n_u32(u32::from_le_bytes(qh)));
    (vqtbl1q_u8(word, ld(&LO)), vqtbl1q_u8(word, ld(&HI)))
}

/// The fifth bits of a Q5_0/Q5_1 block as `0x10` (set) or 0 per value: lanes 0..16 of
/// the first vector are values 0..16 (bits 0..16 of `qh`), of the second values 16..32.
/// ggml looks the same bytes up in `table_b2b_0`.
#[inline]
#[target_feature(enable = "neon")]
fn fifth_bits(qh: [u8; 4]) -> (uint8x16_t, uint8x16_t) {
    let (lo, hi) = spread(qh);
    let (bits, ten) = (ld(&BIT_OF_LANE), vdupq_n_u8(0x10));
    (vandq_u8(vtstq_u8(lo, bits), ten), vandq_u8(vtstq_u8(hi, bits), ten))
}

/// The low and high nibbles of 16 bytes.
#[inline]
#[target_feature(enable = "neon")]
fn nibbles(v: uint8x16_t) -> (uint8x16_t, uint8x16_t) {
    (vandq_u8(v, vdupq_n_u8(0x0F)), vshrq_n_u8::<4>(v))
}

/// The `sdot` lanes of a 32-value block: `lo` against values 0..16 of `y`, `hi` against
/// 16..32, in one accumulator (ggml's `vdotq(vdotq(0, lo, y0), hi, y1)`).
#[inline]
#[target_feature(enable = "neon")]
fn block_lanes(lo: int8x16_t, hi: int8x16_t, y: &[u8], dot: bool) -> int32x4_t {
    sdot(sdot(vdupq_n_s32(0), lo, lds(y), dot), hi, lds(&y[16..]), dot)
}

/// The same block as two dots summed (`vaddq_s32(vdotq(0, lo, y0), vdotq(0, hi, y1))`,
/// ggml's Q5_0/Q5_1 form; the same integers).
#[inline]
#[target_feature(enable = "neon")]
fn block_lanes_split(lo: int8x16_t, hi: int8x16_t, y: &[u8], dot: bool) -> int32x4_t {
    let z = vdupq_n_s32(0);
    vaddq_s32(sdot(z, lo, lds(y), dot), sdot(z, hi, lds(&y[16..]), dot))
}

/// `sumv = sumv + round(float(p) * d)`: `vmlaq_n_f32` as GCC builds it.
#[inline]
#[target_feature(enable = "neon")]
fn mla_n(sumv: float32x4_t, p: int32x4_t, d: f32) -> float32x4_t {
    vaddq_f32(sumv, vmulq_n_f32(vcvtq_f32_s32(p), d))
}

/// The scalar dot of a block's 32 codes (`code(j)` of value j) with 32 activation bytes.
#[inline]
fn tail_dot(code: impl Fn(usize) -> i32, y: &[u8; 32]) -> i32 {
    (0..32).map(|j| code(j) * y[j] as i8 as i32).sum()
}

/// The 5-bit codes 0..31 of value j of a Q5_0/Q5_1 block (the scalar tail's reading).
#[inline]
fn code5(qs: &[u8; 16], qh: [u8; 4], j: usize) -> i32 {
    let qh = u32::from_le_bytes(qh);
    let nib = if j < 16 { qs[j] & 0xF } else { qs[j - 16] >> 4 };
    (nib as u32 | (((qh >> j) & 1) << 4)) as i32
}

/// `ggml_vec_dot_q4_1_q8_1`, NEON, nrc = 1.
///
/// # Safety
/// The CPU must support NEON, and dotprod when `dot` is true.
#[target_feature(enable = "neon")]
pub unsafe fn vec_dot_q4_1_q8_1(x: &[BlockQ4_1], y: &[BlockQ8_1], dot: bool) -> f32 {
    let nb = x.len().min(y.len());
    let (mut sumv0, mut sumv1) = (vdupq_n_f32(0.0), vdupq_n_f32(0.0));
    let mut summs = 0.0f32;
    let p = |b: usize| {
        let (l, h) = nibbles(ld(&x[b].qs));
        block_lanes(vreinterpretq_s8_u8(l), vreinterpretq_s8_u8(h), &y[b].qs, dot)
    };
    let mut ib = 0;
    while ib + 1 < nb {
        // Each product of two f16 values is exact in f32.
        summs += x[ib].m() * y[ib].s() + x[ib + 1].m() * y[ib + 1].s();
        sumv0 = mla_n(sumv0, p(ib), x[ib].d() * y[ib].d());
        sumv1 = mla_n(sumv1, p(ib + 1), x[ib + 1].d() * y[ib + 1].d());
        ib += 2;
    }
    let mut sumf = vaddvq_f32(sumv0) + vaddvq_f32(sumv1) + summs;
    for b in ib..nb {
        let qs = &x[b].qs;
        let sumi =
            tail_dot(|j| if j < 16 { qs[j] & 0xF } else { qs[j - 16] >> 4 } as i32, &y[b].qs);
        sumf += (x[b].d() * y[b].d()).mul_add(sumi as f32, x[b].m() * y[b].s());
    }
    sumf
}

/// `ggml_vec_dot_q5_0_q8_0`, NEON, nrc = 1. `i8mm_tail`: the scalar tail of an odd last
/// block as the i8mm and SVE builds compile it, each code `q - 16` read as its unsigned
/// byte (the twin's `vec_dot_q5_0_q8_0_i8mm` says why); else as the dotprod build.
///
/// # Safety
/// The CPU must support NEON, and dotprod when `dot` is true.
#[target_feature(enable = "neon")]
pub unsafe fn vec_dot_q5_0_q8_0(
    x: &[BlockQ5_0],
    y: &[BlockQ8_0],
    dot: bool,
    i8mm_tail: bool,
) -> f32 {
    let nb = x.len().min(y.len());
    let (mut sumv0, mut sumv1) = (vdupq_n_f32(0.0), vdupq_n_f32(0.0));
    let p = |b: usize| {
        // code = nibble - ((!bit) << 4): ggml's `table_b2b_1` subtracted.
        let (hl, hh) = fifth_bits(x[b].qh);
        let ten = vdupq_n_u8(0x10);
        let (l, h) = nibbles(ld(&x[b].qs));
        let lo = vsubq_s8(vreinterpretq_s8_u8(l), vreinterpretq_s8_u8(veorq_u8(hl, ten)));
        let hi = vsubq_s8(vreinterpretq_s8_u8(h), vreinterpretq_s8_u8(veorq_u8(hh, ten)));
        block_lanes_split(lo, hi, &y[b].qs, dot)
    };
    let mut ib = 0;
    while ib + 1 < nb {
        sumv0 = mla_n(sumv0, p(ib), x[ib].d() * y[ib].d());
        sumv1 = mla_n(sumv1, p(ib + 1), x[ib + 1].d() * y[ib + 1].d());
        ib += 2;
    }
    let mut sumf = vaddvq_f32(sumv0) + vaddvq_f32(sumv1);
    for b in ib..nb {
        let code = |j: usize| {
            let c = code5(&x[b].qs, x[b].qh, j) - 16;
            if i8mm_tail {
                c & 0xFF
            } else {
                c
            }
        };
        sumf = (x[b].d() * y[b].d()).mul_add(tail_dot(code, &y[b].qs) as f32, sumf);
    }
    sumf
}

/// `ggml_vec_dot_q5_1_q8_1`, NEON, nrc = 1.
///
/// # Safety
/// The CPU must support NEON, and dotprod when `dot` is true.
#[target_feature(enable = "neon")]
pub unsafe fn vec_dot_q5_1_q8_1(x: &[BlockQ5_1], y: &[BlockQ8_1], dot: bool) -> f32 {
    let nb = x.len().min(y.len());
    let (mut sumv0, mut sumv1) = (vdupq_n_f32(0.0), vdupq_n_f32(0.0));
    let (mut summs0, mut summs1) = (0.0f32, 0.0f32);
    let p = |b: usize| {
        // code = nibble | (bit << 4): ggml's `table_b2b_0` or-ed in.
        let (hl, hh) = fifth_bits(x[b].qh);
        let (l, h) = nibbles(ld(&x[b].qs));
        let (lo, hi) = (vorrq_u8(l, hl), vorrq_u8(h, hh));
        block_lanes_split(vreinterpretq_s8_u8(lo), vreinterpretq_s8_u8(hi), &y[b].qs, dot)
    };
    let mut ib = 0;
    while ib + 1 < nb {
        summs0 += x[ib].m() * y[ib].s();
        summs1 += x[ib + 1].m() * y[ib + 1].s();
        sumv0 = mla_n(sumv0, p(ib), x[ib].d() * y[ib].d());
        sumv1 = mla_n(sumv1, p(ib + 1), x[ib + 1].d() * y[ib + 1].d());
        ib += 2;
    }
    let mut sumf = vaddvq_f32(sumv0) + vaddvq_f32(sumv1) + summs0 + summs1;
    for b in ib..nb {
        let sumi = tail_dot(|j| code5(&x[b].qs, x[b].qh, j), &y[b].qs);
        sumf += (x[b].d() * y[b].d()).mul_add(sumi as f32, x[b].m() * y[b].s());
    }
    sumf
}

/// The IQ4 values of 16 code bytes: low nibbles looked up, then high nibbles
/// (`ggml_vqtbl1q_s8(values, ...)`).
#[inline]
#[target_feature(enable = "neon")]
fn iq4_values(values: int8x16_t, q: &[u8]) -> (int8x16_t, int8x16_t) {
    let (l, h) = nibbles(ld(q));
    (vqtbl1q_s8(values, l), vqtbl1q_s8(values, h))
}

/// `kvalues_iq4nl` in a vector.
#[inline]
#[target_feature(enable = "neon")]
fn iq4_table() -> int8x16_t {
    lds(&KVALUES_IQ4NL.map(|v| v as u8))
}

/// `ggml_vec_dot_iq4_nl_q8_0`, NEON, nrc = 1.
///
/// # Safety
/// The CPU must support NEON, and dotprod when `dot` is true.
#[target_feature(enable = "neon")]
pub unsafe fn vec_dot_iq4_nl_q8_0(x: &[BlockIq4Nl], y: &[BlockQ8_0], dot: bool) -> f32 {
    let nb = x.len().min(y.len());
    let values = iq4_table();
    let p = |b: usize| {
        let (lo, hi) = iq4_values(values, &x[b].qs);
        vaddvq_s32(block_lanes(lo, hi, &y[b].qs, dot)) as f32
    };
    let mut sumf = 0.0f32;
    let mut ib = 0;
    while ib + 1 < nb {
        let second = (x[ib + 1].d() * y[ib + 1].d()) * p(ib + 1);
        sumf += (x[ib].d() * y[ib].d()).mul_add(p(ib), second);
        ib += 2;
    }
    for b in ib..nb {
        let qs = &x[b].qs;
        let code = |j: usize| {
            KVALUES_IQ4NL[if j < 16 { qs[j] & 0xF } else { qs[j - 16] >> 4 } as usize] as i32
        };
        sumf = (y[b].d() * x[b].d()).mul_add(tail_dot(code, &y[b].qs) as f32, sumf);
    }
    sumf
}

/// `ggml_vec_dot_iq4_xs_q8_K`, NEON.
///
/// # Safety
/// The CPU must support NEON, and dotprod when `dot` is true.
#[target_feature(enable = "neon")]
pub unsafe fn vec_dot_iq4_xs_q8_k(x: &[BlockIq4Xs], y: &[BlockQ8K], dot: bool) -> f32 {
    let values = iq4_table();
    let mut sumf = 0.0f32;
    for (xb, yb) in x.iter().zip(y) {
        let mut h = u16::from_le_bytes(xb.scales_h) as i32;
        let (mut sumi1, mut sumi2) = (0i32, 0i32);
        for ib in 0..4 {
            let (q4, q8) = (&xb.qs[32 * ib..], &yb.qs[64 * ib..]);
            let (l0, h0) = iq4_values(values, q4);
            let (l1, h1) = iq4_values(values, &q4[16..]);
            let prod_1 = vaddvq_s32(block_lanes(l0, h0, q8, dot));
            let prod_2 = vaddvq_s32(block_lanes(l1, h1, &q8[32..], dot));
            let ls1 = ((xb.scales_l[ib] & 0xF) as i32 | ((h << 4) & 0x30)) - 32;
            let ls2 = ((xb.scales_l[ib] >> 4) as i32 | ((h << 2) & 0x30)) - 32;
            h >>= 4;
            sumi1 = sumi1.wrapping_add(prod_1.wrapping_mul(ls1));
            sumi2 = sumi2.wrapping_add(prod_2.wrapping_mul(ls2));
        }
        sumf = (xb.d() * yb.d()).mul_add(sumi1.wrapping_add(sumi2) as f32, sumf);
    }
    sumf
}

/// `sum_s m_s * bsum_s` over 16 mins (`mins`, one per byte lane) as ggml's `vmull_s16`
/// pairs and `vaddvq_s32`.
#[inline]
#[target_feature(enable = "neon")]
fn mins_dot16(mins: uint8x16_t, bsums: &[u8; 32]) -> i32 {
    let q8sums = (vreinterpretq_s16_u8(ld(bsums)), vreinterpretq_s16_u8(ld(&bsums[16..])));
    let m0 = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(mins)));
    let m1 = vreinterpretq_s16_u16(vmovl_u8(vget_high_u8(mins)));
    let s0 = vaddq_s32(
        vmull_s16(vget_low_s16(m0), vget_low_s16(q8sums.0)),
        vmull_s16(vget_high_s16(m0), vget_high_s16(q8sums.0)),
    );
    let s1 = vaddq_s32(
        vmull_s16(vget_low_s16(m1), vget_low_s16(q8sums.1)),
        vmull_s16(vget_high_s16(m1), vget_high_s16(q8sums.1)),
    );
    vaddvq_s32(vaddq_s32(s0, s1))
}

/// `v >> n` per byte for a run-time `n` (`vshlq_u8` by `-n`).
#[inline]
#[target_feature(enable = "neon")]
fn shr(v: uint8x16_t, n: usize) -> uint8x16_t {
    vshlq_u8(v, vdupq_n_s8(-(n as i8)))
}

/// `vaddvq_s32` of one `sdot` of 16 codes with 16 activation bytes.
#[inline]
#[target_feature(enable = "neon")]
fn dot16(q: uint8x16_t, y: &[u8], dot: bool) -> i32 {
    vaddvq_s32(sdot(vdupq_n_s32(0), vreinterpretq_s8_u8(q), lds(y), dot))
}

/// `ggml_vec_dot_q2_K_q8_K`, NEON.
///
/// # Safety
/// The CPU must support NEON, and dotprod when `dot` is true.
#[target_feature(enable = "neon")]
pub unsafe fn vec_dot_q2_k_q8_k(x: &[BlockQ2K], y: &[BlockQ8K], dot: bool) -> f32 {
    let m3 = vdupq_n_u8(3);
    let mut sum = 0.0f32;
    for (xb, yb) in x.iter().zip(y) {
        let d = yb.d() * xb.d();
        let dmin = -yb.d() * xb.dmin();
        let mins_and_scales = ld(&xb.scales);
        let mins = mins_dot16(vshrq_n_u8::<4>(mins_and_scales), &yb.bsums);
        sum = dmin.mul_add(mins as f32, sum);
        let aux = xb.scales.map(|s| (s & 0xF) as i32);
        let mut isum = 0i32;
        for j in 0..2 {
            let q2 = (ld(&xb.qs[32 * j..]), ld(&xb.qs[32 * j + 16..]));
            for k in 0..4 {
                let q8 = &yb.qs[128 * j + 32 * k..];
                let is = 8 * j + 2 * k;
                let a = dot16(vandq_u8(shr(q2.0, 2 * k), m3), q8, dot);
                let b = dot16(vandq_u8(shr(q2.1, 2 * k), m3), &q8[16..], dot);
                isum = isum.wrapping_add(a.wrapping_mul(aux[is]));
                isum = isum.wrapping_add(b.wrapping_mul(aux[is + 1]));
            }
        }
        sum = d.mul_add(isum as f32, sum);
    }
    sum
}

/// `ggml_vec_dot_q3_K_q8_K`, NEON.
///
/// # Safety
/// The CPU must support NEON, and dotprod when `dot` is true.
#[target_feature(enable = "neon")]
pub unsafe fn vec_dot_q3_k_q8_k(x: &[BlockQ3K], y: &[BlockQ8K], dot: bool) -> f32 {
    let (m3, four) = (vdupq_n_u8(3), vdupq_n_u8(4));
    let mut sum = 0.0f32;
    for (xb, yb) in x.iter().zip(y) {
        let d = yb.d() * xb.d();
        let scale: [i32; 16] = core::array::from_fn(|s| xb.scale(s) as i32 - 32);
        let qh = (ld(&xb.hmask), ld(&xb.hmask[16..]));
        let mut isum = 0i32;
        for g in 0..8 {
            let (j, k) = (g / 4, g % 4);
            let q3 = (ld(&xb.qs[32 * j..]), ld(&xb.qs[32 * j + 16..]));
            // code = crumb - 4 where the high bit g is clear (ggml's `vbicq_u8`).
            let bit = vdupq_n_u8(1 << g);
            let sub = |q: uint8x16_t, h: uint8x16_t| {
                vsubq_u8(vandq_u8(shr(q, 2 * k), m3), vbicq_u8(four, vtstq_u8(h, bit)))
            };
            let q8 = &yb.qs[32 * g..];
            let a = dot16(sub(q3.0, qh.0), q8, dot);
            let b = dot16(sub(q3.1, qh.1), &q8[16..], dot);
            isum = isum.wrapping_add(a.wrapping_mul(scale[2 * g]));
            isum = isum.wrapping_add(b.wrapping_mul(scale[2 * g + 1]));
        }
        sum = d.mul_add(isum as f32, sum);
    }
    sum
}

/// `ggml_vec_dot_q5_K_q8_K`, NEON.
///
/// # Safety
/// The CPU must support NEON, and dotprod when `dot` is true.
#[target_feature(enable = "neon")]
pub unsafe fn vec_dot_q5_k_q8_k(x: &[BlockQ5K], y: &[BlockQ8K], dot: bool) -> f32 {
    let ten = vdupq_n_u8(0x10);
    let mut sumf = 0.0f32;
    for (xb, yb) in x.iter().zip(y) {
        let d = yb.d() * xb.d();
        let dmin = yb.d() * xb.dmin();
        // Pairs of bsums, wrapping in i16 (`vpaddq_s16`), times the eight mins.
        let bs = (vreinterpretq_s16_u8(ld(&yb.bsums)), vreinterpretq_s16_u8(ld(&yb.bsums[16..])));
        let q8sums = vpaddq_s16(bs.0, bs.1);
        let mins: [i16; 8] = core::array::from_fn(|s| scale_min_k4(s, &xb.scales).1 as i16);
        // SAFETY: eight readable i16.
        let mins = unsafe { vld1q_s16(mins.as_ptr()) };
        let prod = vaddq_s32(
            vmull_s16(vget_low_s16(q8sums), vget_low_s16(mins)),
            vmull_s16(vget_high_s16(q8sums), vget_high_s16(mins)),
        );
        let sumi_mins = vaddvq_s32(prod);
        let qh = (ld(&xb.qh), ld(&xb.qh[16..]));
        let mut sumi = 0i32;
        for j in 0..4 {
            let q5 = (ld(&xb.qs[32 * j..]), ld(&xb.qs[32 * j + 16..]));
            let q8 = &yb.qs[64 * j..];
            // The fifth bit of the low nibbles is bit 2j of qh, of the high ones 2j + 1.
            let high = |h: uint8x16_t, bit: usize| vandq_u8(vtstq_u8(h, vdupq_n_u8(1 << bit)), ten);
            let (l0, h0) = nibbles(q5.0);
            let (l1, h1) = nibbles(q5.1);
            let c0 = vorrq_u8(l0, high(qh.0, 2 * j));
            let c1 = vorrq_u8(l1, high(qh.1, 2 * j));
            let c2 = vorrq_u8(h0, high(qh.0, 2 * j + 1));
            let c3 = vorrq_u8(h1, high(qh.1, 2 * j + 1));
            let s = |a: uint8x16_t, b: uint8x16_t, y: &[u8]| {
                vaddvq_s32(block_lanes(vreinterpretq_s8_u8(a), vreinterpretq_s8_u8(b), y, dot))
            };
            let (sc0, sc1) =
                (scale_min_k4(2 * j, &xb.scales).0, scale_min_k4(2 * j + 1, &xb.scales).0);
            sumi = sumi.wrapping_add(s(c0, c1, q8).wrapping_mul(sc0 as i32));
            sumi = sumi.wrapping_add(s(c2, c3, &q8[32..]).wrapping_mul(sc1 as i32));
        }
        sumf += d.mul_add(sumi as f32, -(dmin * sumi_mins as f32));
    }
    sumf
}
