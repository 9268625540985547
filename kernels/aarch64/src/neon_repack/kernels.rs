//! ggml's NEON dotprod repacked kernels (`ggml-cpu/arch/arm/repack.cpp`: q4_K 8x4,
//! q5_K 8x4, q6_K 8x4, q4_0 4x4, q8_0 4x4, iq4_nl 4x4), natively, and the integer core of the i8mm build's
//! q6_K 8x8 kernels. Twin: `tiercheck_core::arch::aarch64::neon_repack::kernels` (same
//! names; its docs give the float order). `sdot` by lane is `sdot` against the lane
//! broadcast; `vfmaq_f32` where ggml fuses, `vmulq_f32` + `vaddq_f32`/`vsubq_f32` where
//! it uses `vmlaq_f32`/`vmlsq_f32` (GCC keeps those unfused).

use core::arch::aarch64::*;

use crate::simd::{ld, ld_dup4, ld_dup8, ldf, ldi, st};

use tiercheck_core::blocks::iq4_nl::KVALUES_IQ4NL;
use tiercheck_core::blocks::{BlockQ8K, BlockQ8_0};
use tiercheck_core::fp16::f16_bits_to_f32;
use tiercheck_core::repack::{
    BlockIq4Nlx4, BlockQ4Kx8, BlockQ4_0x4, BlockQ5Kx8, BlockQ6Kx8, BlockQ8_0x4,
};

use crate::neon::vec_dot::sdot_asm;

#[inline]
fn f16(b: [u8; 2]) -> f32 {
    f16_bits_to_f32(u16::from_le_bytes(b))
}

/// `vdotq_laneq_s32(acc, a, b, L)`: `sdot` of `a` against the 4 bytes of lane L of `b`.
#[inline]
#[target_feature(enable = "neon,dotprod")]
unsafe fn sdot_lane<const L: i32>(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
    let bl = vreinterpretq_s8_s32(vdupq_laneq_s32::<L>(vreinterpretq_s32_s8(b)));
    // SAFETY: the caller guarantees dotprod.
    unsafe { sdot_asm(acc, a, bl) }
}

/// Four `sdot`s of `a[0..4]` against lanes 0..3 of `b`.
#[inline]
#[target_feature(enable = "neon,dotprod")]
unsafe fn sdot4(acc: int32x4_t, a: [int8x16_t; 4], b: int8x16_t) -> int32x4_t {
    // SAFETY: the caller guarantees dotprod.
    unsafe {
        let acc = sdot_lane::<0>(acc, a[0], b);
        let acc = sdot_lane::<1>(acc, a[1], b);
        let acc = sdot_lane::<2>(acc, a[2], b);
        sdot_lane::<3>(acc, a[3], b)
    }
}

/// `ggml_gemv_q4_K_8x4_q8_K` (and, per row, the gemm) for one group of 8 columns.
///
/// # Safety
/// The CPU must support NEON and dotprod.
#[target_feature(enable = "neon,dotprod")]
pub unsafe fn gemv_q4_k_8x4(blocks: &[BlockQ4Kx8], y: &[BlockQ8K]) -> [f32; 8] {
    let m4b = vdupq_n_u8(0x0F);
    let mut acc = [vdupq_n_f32(0.0); 2];
    for (x, yb) in blocks.iter().zip(y) {
        let q8d = vdupq_n_f32(yb.d());
        let mut bias = [[0i32; 4]; 2];
        let s: [i32; 8] =
            core::array::from_fn(|sb| yb.bsum(2 * sb).wrapping_add(yb.bsum(2 * sb + 1)) as i32);
        for sb in 0..4 {
            let q8: [int8x16_t; 4] =
                core::array::from_fn(|i| vreinterpretq_s8_u8(ld(&yb.qs[sb * 64 + 16 * i..])));
            for c in 0..2 {
                let cols: [uint8x16_t; 8] =
                    core::array::from_fn(|i| ld(&x.qs[sb * 256 + i * 32 + 16 * c..]));
                let lo: [int8x16_t; 8] =
                    core::array::from_fn(|i| vreinterpretq_s8_u8(vandq_u8(cols[i], m4b)));
                let hi: [int8x16_t; 8] =
                    core::array::from_fn(|i| vreinterpretq_s8_u8(vshrq_n_u8::<4>(cols[i])));
                // SAFETY: dotprod is guaranteed by the caller.
                let (acc_lo, acc_hi) = unsafe {
                    let l = sdot4(vdupq_n_s32(0), [lo[0], lo[1], lo[2], lo[3]], q8[0]);
                    let l = sdot4(l, [lo[4], lo[5], lo[6], lo[7]], q8[1]);
                    let h = sdot4(vdupq_n_s32(0), [hi[0], hi[1], hi[2], hi[3]], q8[2]);
                    (l, sdot4(h, [hi[4], hi[5], hi[6], hi[7]], q8[3]))
                };
                let sc_lo = ldi(core::array::from_fn(|t| x.scale_min(4 * c + t, 2 * sb).0 as i32));
                let sc_hi =
                    ldi(core::array::from_fn(|t| x.scale_min(4 * c + t, 2 * sb + 1).0 as i32));
                let sumf =
                    vcvtq_f32_s32(vaddq_s32(vmulq_s32(sc_lo, acc_lo), vmulq_s32(sc_hi, acc_hi)));
                let scale = vmulq_f32(ldf(core::array::from_fn(|t| f16(x.d[4 * c + t]))), q8d);
                acc[c] = vfmaq_f32(acc[c], scale, sumf);
                for (t, b) in bias[c].iter_mut().enumerate() {
                    let (_, m0) = x.scale_min(4 * c + t, 2 * sb);
                    let (_, m1) = x.scale_min(4 * c + t, 2 * sb + 1);
                    *b += m0 as i32 * s[2 * sb] + m1 as i32 * s[2 * sb + 1];
                }
            }
        }
        for c in 0..2 {
            let min = vmulq_f32(ldf(core::array::from_fn(|t| f16(x.dmin[4 * c + t]))), q8d);
            acc[c] = vsubq_f32(acc[c], vmulq_f32(vcvtq_f32_s32(ldi(bias[c])), min));
        }
    }
    let (a, b) = (st(acc[0]), st(acc[1]));
    core::array::from_fn(|j| if j < 4 { a[j] } else { b[j - 4] })
}

/// `ggml_gemv_q5_K_8x4_q8_K` (and, per row, `ggml_gemm_q5_K_8x4_q8_K`) for one group
/// of 8 columns: [`gemv_q4_k_8x4`]'s steps with the fifth bits of the interleaved `qh`
/// (bit 2 sb of the low nibbles, bit 2 sb + 1 of the high ones, `qh` shifted by two per
/// sub-block pair), and the `bsums` pairs summed by `vpaddq_s16` (wrapping in i16).
///
/// # Safety
/// The CPU must support NEON and dotprod.
#[target_feature(enable = "neon,dotprod")]
pub unsafe fn gemv_q5_k_8x4(blocks: &[BlockQ5Kx8], y: &[BlockQ8K]) -> [f32; 8] {
    let (m4b, mone, mtwo) = (vdupq_n_u8(0x0F), vdupq_n_u8(1), vdupq_n_u8(2));
    let mut acc = [vdupq_n_f32(0.0); 2];
    for (x, yb) in blocks.iter().zip(y) {
        let q8d = vdupq_n_f32(yb.d());
        let mut bias = [vdupq_n_s32(0); 2];
        let bs = vpaddq_s16(
            vreinterpretq_s16_u8(ld(&yb.bsums)),
            vreinterpretq_s16_u8(ld(&yb.bsums[16..])),
        );
        let mut bsums = [0i16; 8];
        // SAFETY: eight writable i16.
        unsafe { vst1q_s16(bsums.as_mut_ptr(), bs) };
        let mut qh: [[uint8x16_t; 8]; 2] =
            core::array::from_fn(|c| core::array::from_fn(|i| ld(&x.qh[i * 32 + 16 * c..])));
        for sb in 0..4 {
            let q8: [int8x16_t; 4] =
                core::array::from_fn(|i| vreinterpretq_s8_u8(ld(&yb.qs[sb * 64 + 16 * i..])));
            for c in 0..2 {
                let mut lo = [vdupq_n_s8(0); 8];
                let mut hi = [vdupq_n_s8(0); 8];
                for i in 0..8 {
                    let q = ld(&x.qs[sb * 256 + i * 32 + 16 * c..]);
                    let h_lo = vandq_u8(qh[c][i], mone);
                    let h_hi = vshlq_n_u8::<3>(vandq_u8(qh[c][i], mtwo));
                    qh[c][i] = vshrq_n_u8::<2>(qh[c][i]);
                    lo[i] = vreinterpretq_s8_u8(vsliq_n_u8::<4>(vandq_u8(q, m4b), h_lo));
                    hi[i] = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8::<4>(q), h_hi));
                }
                // SAFETY: dotprod is guaranteed by the caller.
                let (acc_lo, acc_hi) = unsafe {
                    let l = sdot4(vdupq_n_s32(0), [lo[0], lo[1], lo[2], lo[3]], q8[0]);
                    let l = sdot4(l, [lo[4], lo[5], lo[6], lo[7]], q8[1]);
                    let h = sdot4(vdupq_n_s32(0), [hi[0], hi[1], hi[2], hi[3]], q8[2]);
                    (l, sdot4(h, [hi[4], hi[5], hi[6], hi[7]], q8[3]))
                };
                let sm = |s: usize| -> [(u8, u8); 4] {
                    core::array::from_fn(|t| x.scale_min(4 * c + t, s))
                };
                let (lo_sm, hi_sm) = (sm(2 * sb), sm(2 * sb + 1));
                let sc_lo = ldi(lo_sm.map(|p| p.0 as i32));
                let sc_hi = ldi(hi_sm.map(|p| p.0 as i32));
                let sumf =
                    vcvtq_f32_s32(vaddq_s32(vmulq_s32(sc_lo, acc_lo), vmulq_s32(sc_hi, acc_hi)));
                let scale = vmulq_f32(ldf(core::array::from_fn(|t| f16(x.d[4 * c + t]))), q8d);
                acc[c] = vfmaq_f32(acc[c], scale, sumf);
                let m_lo = vmovn_s32(ldi(lo_sm.map(|p| p.1 as i32)));
                let m_hi = vmovn_s32(ldi(hi_sm.map(|p| p.1 as i32)));
                bias[c] = vmlal_s16(bias[c], vdup_n_s16(bsums[2 * sb]), m_lo);
                bias[c] = vmlal_s16(bias[c], vdup_n_s16(bsums[2 * sb + 1]), m_hi);
            }
        }
        for c in 0..2 {
            let min = vmulq_f32(ldf(core::array::from_fn(|t| f16(x.dmin[4 * c + t]))), q8d);
            acc[c] = vsubq_f32(acc[c], vmulq_f32(vcvtq_f32_s32(bias[c]), min));
        }
    }
    let (a, b) = (st(acc[0]), st(acc[1]));
    core::array::from_fn(|j| if j < 4 { a[j] } else { b[j - 4] })
}

/// `ggml_gemv_iq4_nl_4x4_q8_0` (and, per row, `ggml_gemm_iq4_nl_4x4_q8_0`) for one group
/// of 4 columns: the table values by `vqtbl1q_s8`, `sdot` by lane, then
/// `acc = acc + round(round(d_y * d_c) * float(isum_c))` (`vmlaq_f32`, unfused).
///
/// # Safety
/// The CPU must support NEON and dotprod.
#[target_feature(enable = "neon,dotprod")]
pub unsafe fn gemv_iq4_nl_4x4(blocks: &[BlockIq4Nlx4], y: &[BlockQ8_0]) -> [f32; 4] {
    let kvalues = vreinterpretq_s8_u8(ld(&KVALUES_IQ4NL.map(|v| v as u8)));
    let m4b = vdupq_n_u8(0x0F);
    let mut acc = vdupq_n_f32(0.0);
    for (x, yb) in blocks.iter().zip(y) {
        let b: [uint8x16_t; 4] = core::array::from_fn(|i| ld(&x.qs[16 * i..]));
        let lo: [int8x16_t; 4] = core::array::from_fn(|i| vqtbl1q_s8(kvalues, vandq_u8(b[i], m4b)));
        let hi: [int8x16_t; 4] =
            core::array::from_fn(|i| vqtbl1q_s8(kvalues, vshrq_n_u8::<4>(b[i])));
        let a0 = vreinterpretq_s8_u8(ld(&yb.qs[..]));
        let a1 = vreinterpretq_s8_u8(ld(&yb.qs[16..]));
        // SAFETY: dotprod is guaranteed by the caller.
        let sumi = unsafe { sdot4(sdot4(vdupq_n_s32(0), lo, a0), hi, a1) };
        let d = vmulq_f32(vdupq_n_f32(yb.d()), ldf(core::array::from_fn(|j| f16(x.d[j]))));
        acc = vaddq_f32(acc, vmulq_f32(d, vcvtq_f32_s32(sumi)));
    }
    st(acc)
}

/// `ggml_gemv_q4_0_4x4_q8_0` (and, per row, the gemm) for one group of 4 columns.
///
/// # Safety
/// The CPU must support NEON and dotprod.
#[target_feature(enable = "neon,dotprod")]
pub unsafe fn gemv_q4_0_4x4(blocks: &[BlockQ4_0x4], y: &[BlockQ8_0]) -> [f32; 4] {
    let mhi = vdupq_n_s8(0xF0u8 as i8);
    let mut acc = vdupq_n_f32(0.0);
    for (x, yb) in blocks.iter().zip(y) {
        let b: [int8x16_t; 4] = core::array::from_fn(|i| vreinterpretq_s8_u8(ld(&x.qs[16 * i..])));
        let a0 = vreinterpretq_s8_u8(ld(&yb.qs[..]));
        let a1 = vreinterpretq_s8_u8(ld(&yb.qs[16..]));
        let lo: [int8x16_t; 4] = core::array::from_fn(|i| vshlq_n_s8::<4>(b[i]));
        let hi: [int8x16_t; 4] = core::array::from_fn(|i| vandq_s8(b[i], mhi));
        // SAFETY: dotprod is guaranteed by the caller.
        let ret = unsafe { sdot4(sdot4(vdupq_n_s32(0), lo, a0), hi, a1) };
        let d = vmulq_f32(vdupq_n_f32(yb.d()), ldf(core::array::from_fn(|j| f16(x.d[j]))));
        acc = vfmaq_f32(acc, vcvtq_n_f32_s32::<4>(ret), d);
    }
    st(acc)
}

#[inline]
#[target_feature(enable = "neon,dotprod")]
unsafe fn q8_0x4_isum(x: &BlockQ8_0x4, yb: &BlockQ8_0) -> int32x4_t {
    let b: [int8x16_t; 8] = core::array::from_fn(|i| vreinterpretq_s8_u8(ld(&x.qs[16 * i..])));
    let a0 = vreinterpretq_s8_u8(ld(&yb.qs[..]));
    let a1 = vreinterpretq_s8_u8(ld(&yb.qs[16..]));
    // SAFETY: dotprod is guaranteed by the caller.
    unsafe {
        let r = sdot4(vdupq_n_s32(0), [b[0], b[1], b[2], b[3]], a0);
        sdot4(r, [b[4], b[5], b[6], b[7]], a1)
    }
}

/// `ggml_gemv_q8_0_4x4_q8_0` for one group of 4 columns.
///
/// # Safety
/// The CPU must support NEON and dotprod.
#[target_feature(enable = "neon,dotprod")]
pub unsafe fn gemv_q8_0_4x4(blocks: &[BlockQ8_0x4], y: &[BlockQ8_0]) -> [f32; 4] {
    let mut acc = vdupq_n_f32(0.0);
    for (x, yb) in blocks.iter().zip(y) {
        // SAFETY: dotprod is guaranteed by the caller.
        let ret = unsafe { q8_0x4_isum(x, yb) };
        let d = vmulq_f32(vdupq_n_f32(yb.d()), ldf(core::array::from_fn(|j| f16(x.d[j]))));
        acc = vfmaq_f32(acc, vcvtq_f32_s32(ret), d);
    }
    st(acc)
}

/// `ggml_gemm_q8_0_4x4_q8_0` for one group of 4 columns and one activation row.
///
/// # Safety
/// The CPU must support NEON and dotprod.
#[target_feature(enable = "neon,dotprod")]
pub unsafe fn gemm_q8_0_4x4(blocks: &[BlockQ8_0x4], y: &[BlockQ8_0]) -> [f32; 4] {
    let mut acc = vdupq_n_f32(0.0);
    for (x, yb) in blocks.iter().zip(y) {
        // SAFETY: dotprod is guaranteed by the caller.
        let ret = unsafe { q8_0x4_isum(x, yb) };
        let d = vmulq_f32(ldf(core::array::from_fn(|j| f16(x.d[j]))), vdupq_n_f32(yb.d()));
        acc = vaddq_f32(acc, vmulq_f32(d, vcvtq_f32_s32(ret)));
    }
    st(acc)
}

/// The unsigned 6-bit values of 16 interleaved bytes: (low, high) = ((ql & 15) | (qh & 3)
/// << 4, (ql >> 4) | (qh & 0x30)), `qh` already shifted for the sub-block.
#[inline]
#[target_feature(enable = "neon")]
fn q6_unpack(ql: uint8x16_t, qh: uint8x16_t) -> (int8x16_t, int8x16_t) {
    let lo = vsliq_n_u8::<4>(vandq_u8(ql, vdupq_n_u8(0x0F)), vandq_u8(qh, vdupq_n_u8(0x03)));
    let hi = vorrq_u8(vshrq_n_u8::<4>(ql), vandq_u8(qh, vdupq_n_u8(0x30)));
    (vreinterpretq_s8_u8(lo), vreinterpretq_s8_u8(hi))
}

/// `32 * sum_j sc_j[col] * bsum_j` per column (the -32 of every weight, through bsums).
#[inline]
#[target_feature(enable = "neon")]
fn q6_bias(sc: &[[i32; 8]; 16], yb: &BlockQ8K) -> [int32x4_t; 2] {
    let mut bias = [vdupq_n_s32(0); 2];
    for (j, row) in sc.iter().enumerate() {
        let b = vdupq_n_s32(yb.bsum(j) as i32);
        bias[0] = vmlaq_s32(bias[0], ldi(row[..4].try_into().expect("4")), b);
        bias[1] = vmlaq_s32(bias[1], ldi(row[4..].try_into().expect("4")), b);
    }
    [vshlq_n_s32::<5>(bias[0]), vshlq_n_s32::<5>(bias[1])]
}

/// The 16 x 8 sub-block scales of a `block_q6_Kx8`, widened.
fn q6_scales(x: &BlockQ6Kx8) -> [[i32; 8]; 16] {
    core::array::from_fn(|j| core::array::from_fn(|c| x.scales[8 * j + c] as i8 as i32))
}

/// The exact per-column integer sums of one `q6_K_8x4` block against one Q8_K block, as
/// ggml's `ggml_gemv_q6_K_8x4_q8_K` forms them (`sdot` by 4-byte chunks, scales by
/// `vmlaq_s32`, the -32 through bsums): columns 0..4 and 4..8.
///
/// # Safety
/// The CPU must support NEON and dotprod.
#[target_feature(enable = "neon,dotprod")]
pub unsafe fn q6_k_8x4_isums(x: &BlockQ6Kx8, yb: &BlockQ8K) -> [int32x4_t; 2] {
    let sc = q6_scales(x);
    let mut acc = [vdupq_n_s32(0); 2];
    for half in 0..2 {
        for sb in 0..4 {
            let a_lo = half * 128 + sb * 16;
            let q8_l: [int8x16_t; 4] = core::array::from_fn(|i| ld_dup4(&yb.qs[a_lo + 4 * i..]));
            let q8_h: [int8x16_t; 4] =
                core::array::from_fn(|i| ld_dup4(&yb.qs[a_lo + 64 + 4 * i..]));
            let ql_off = half * 512 + sb * 128;
            let qh_off = half * 256 + (sb % 2) * 128;
            for (g, a) in acc.iter_mut().enumerate() {
                let (mut sl, mut sh) = (vdupq_n_s32(0), vdupq_n_s32(0));
                for (chunk, (ql8, qh8)) in q8_l.iter().zip(&q8_h).enumerate() {
                    let v = 16 * (2 * chunk + g);
                    let mut qh = ld(&x.qh[qh_off + v..]);
                    if sb > 1 {
                        qh = vshrq_n_u8::<2>(qh);
                    }
                    let (lo, hi) = q6_unpack(ld(&x.ql[ql_off + v..]), qh);
                    // SAFETY: dotprod is guaranteed by the caller.
                    unsafe {
                        sl = sdot_asm(sl, lo, *ql8);
                        sh = sdot_asm(sh, hi, *qh8);
                    }
                }
                let s_l = ldi(sc[half * 8 + sb][4 * g..4 * g + 4].try_into().expect("4"));
                let s_h = ldi(sc[half * 8 + sb + 4][4 * g..4 * g + 4].try_into().expect("4"));
                *a = vmlaq_s32(vmlaq_s32(*a, sl, s_l), sh, s_h);
            }
        }
    }
    let bias = q6_bias(&sc, yb);
    [vsubq_s32(acc[0], bias[0]), vsubq_s32(acc[1], bias[1])]
}

/// The same sums for one `q6_K_8x8` block, as the i8mm build's
/// `ggml_gemv_q6_K_8x8_q8_K` forms them (`sdot` by 8-byte chunks, pairwise adds per
/// column pair). Its gemm forms them with `smmla`; both are exact, so the sums agree.
///
/// # Safety
/// The CPU must support NEON and dotprod.
#[target_feature(enable = "neon,dotprod")]
pub unsafe fn q6_k_8x8_isums(x: &BlockQ6Kx8, yb: &BlockQ8K) -> [int32x4_t; 2] {
    let sc = q6_scales(x);
    let mut pairs = [[0i32; 2]; 4];
    for half in 0..2 {
        for sb in 0..4 {
            let a_lo = half * 128 + sb * 16;
            let q8_l = [ld_dup8(&yb.qs[a_lo..]), ld_dup8(&yb.qs[a_lo + 8..])];
            let q8_h = [ld_dup8(&yb.qs[a_lo + 64..]), ld_dup8(&yb.qs[a_lo + 72..])];
            let ql_off = half * 512 + sb * 128;
            let qh_off = half * 256 + (sb % 2) * 128;
            for (cp, pair) in pairs.iter_mut().enumerate() {
                let (mut sl, mut sh) = (vdupq_n_s32(0), vdupq_n_s32(0));
                for i in 0..2 {
                    let v = 16 * (4 * i + cp);
                    let mut qh = ld(&x.qh[qh_off + v..]);
                    if sb > 1 {
                        qh = vshrq_n_u8::<2>(qh);
                    }
                    let (lo, hi) = q6_unpack(ld(&x.ql[ql_off + v..]), qh);
                    // SAFETY: dotprod is guaranteed by the caller.
                    unsafe {
                        sl = sdot_asm(sl, lo, q8_l[i]);
                        sh = sdot_asm(sh, hi, q8_h[i]);
                    }
                }
                let l = vpadd_s32(vget_low_s32(sl), vget_high_s32(sl));
                let h = vpadd_s32(vget_low_s32(sh), vget_high_s32(sh));
                let (l, h) = (
                    [vget_lane_s32::<0>(l), vget_lane_s32::<1>(l)],
                    [vget_lane_s32::<0>(h), vget_lane_s32::<1>(h)],
                );
                for (t, p) in pair.iter_mut().enumerate() {
                    let c = 2 * cp + t;
                    *p += l[t] * sc[half * 8 + sb][c] + h[t] * sc[half * 8 + sb + 4][c];
                }
            }
        }
    }
    let bias = q6_bias(&sc, yb);
    let flat: [i32; 8] = core::array::from_fn(|c| pairs[c / 2][c % 2]);
    [
        vsubq_s32(ldi(flat[..4].try_into().expect("4")), bias[0]),
        vsubq_s32(ldi(flat[4..].try_into().expect("4")), bias[1]),
    ]
}

/// `ggml_gemv_q6_K_8x4_q8_K` for one group of 8 columns: acc = fma(float(isum),
/// f16(d) * d_y, acc) per superblock (GCC's `fmla`).
///
/// # Safety
/// The CPU must support NEON and dotprod.
#[target_feature(enable = "neon,dotprod")]
pub unsafe fn gemv_q6_k_8x4(blocks: &[BlockQ6Kx8], y: &[BlockQ8K]) -> [f32; 8] {
    let mut acc = [vdupq_n_f32(0.0); 2];
    for (x, yb) in blocks.iter().zip(y) {
        // SAFETY: dotprod is guaranteed by the caller.
        let isum = unsafe { q6_k_8x4_isums(x, yb) };
        let q8d = vdupq_n_f32(yb.d());
        for (c, a) in acc.iter_mut().enumerate() {
            let d = vmulq_f32(ldf(core::array::from_fn(|t| f16(x.d[4 * c + t]))), q8d);
            *a = vfmaq_f32(*a, vcvtq_f32_s32(isum[c]), d);
        }
    }
    let (a, b) = (st(acc[0]), st(acc[1]));
    core::array::from_fn(|j| if j < 4 { a[j] } else { b[j - 4] })
}

/// The unfused finish of the q6_K gemm kernels (`vmlaq_f32`): acc = acc +
/// round(float(isum) * round(f16(d) * d_y)) per superblock, over the integer sums of
/// the `IL`-byte interleave (4: `q6_K_8x4`, 8: `q6_K_8x8`).
///
/// # Safety
/// The CPU must support NEON and dotprod.
#[inline]
#[target_feature(enable = "neon,dotprod")]
pub unsafe fn q6_k_unfused<const IL: usize>(blocks: &[BlockQ6Kx8], y: &[BlockQ8K]) -> [f32; 8] {
    let mut acc = [vdupq_n_f32(0.0); 2];
    for (x, yb) in blocks.iter().zip(y) {
        // SAFETY: dotprod is guaranteed by the caller.
        let isum = unsafe {
            if IL == 4 {
                q6_k_8x4_isums(x, yb)
            } else {
                q6_k_8x8_isums(x, yb)
            }
        };
        let q8d = vdupq_n_f32(yb.d());
        for (c, a) in acc.iter_mut().enumerate() {
            let d = vmulq_f32(ldf(core::array::from_fn(|t| f16(x.d[4 * c + t]))), q8d);
            *a = vaddq_f32(*a, vmulq_f32(vcvtq_f32_s32(isum[c]), d));
        }
    }
    let (a, b) = (st(acc[0]), st(acc[1]));
    core::array::from_fn(|j| if j < 4 { a[j] } else { b[j - 4] })
}

/// `ggml_gemm_q6_K_8x4_q8_K` for one group of 8 columns and one activation row.
///
/// # Safety
/// The CPU must support NEON and dotprod.
#[target_feature(enable = "neon,dotprod")]
pub unsafe fn gemm_q6_k_8x4(blocks: &[BlockQ6Kx8], y: &[BlockQ8K]) -> [f32; 8] {
    // SAFETY: dotprod is guaranteed by the caller.
    unsafe { q6_k_unfused::<4>(blocks, y) }
}
