//! ggml's aarch64 i8mm repacked kernels (`ggml-cpu/arch/arm/repack.cpp`: q4_K 8x8,
//! q5_K 8x8, q4_0 4x8, q8_0 4x8), natively. Twin: `tiercheck_core::arch::aarch64::i8mm_repack::kernels` (same names;
//! its docs give the float order). The gemm kernels' integer sums go through `smmla`
//! 2x2 tiles (one activation row duplicated into both tile rows), the q4_K gemv through
//! `sdot` as in ggml; `vfmaq_f32` where ggml fuses, `vmulq_f32` + `vaddq_f32`/`vsubq_f32`
//! where it uses `vmlaq_f32`/`vmlsq_f32` (GCC keeps those unfused).

use core::arch::aarch64::*;

use crate::simd::{ld, ld_dup8, ldf, ldi, st, sti};

use tiercheck_core::blocks::{BlockQ8K, BlockQ8_0};
use tiercheck_core::fp16::f16_bits_to_f32;
use tiercheck_core::repack::{BlockQ4Kx8, BlockQ4_0x4, BlockQ5Kx8, BlockQ8_0x4};

use crate::i8mm::vec_dot2::smmla;
use crate::neon::vec_dot::sdot_asm;

#[inline]
fn f16(b: [u8; 2]) -> f32 {
    f16_bits_to_f32(u16::from_le_bytes(b))
}

fn q4_k_bias(x: &BlockQ4Kx8, yb: &BlockQ8K) -> [i32; 8] {
    let s: [i32; 8] =
        core::array::from_fn(|sb| yb.bsum(2 * sb).wrapping_add(yb.bsum(2 * sb + 1)) as i32);
    core::array::from_fn(|j| (0..8).map(|t| x.scale_min(j, t).1 as i32 * s[t]).sum())
}

/// The eight f16 scales of a row group widened and multiplied by `q8d` (`vmulq_f32`):
/// columns 0..4, then 4..8.
#[inline]
#[target_feature(enable = "neon")]
fn times_d(d: &[[u8; 2]; 8], q8d: float32x4_t) -> [float32x4_t; 2] {
    core::array::from_fn(|h| vmulq_f32(ldf(core::array::from_fn(|t| f16(d[4 * h + t]))), q8d))
}

/// `ggml_gemv_q4_K_8x8_q8_K` for one group of 8 columns (dotprod, as ggml on i8mm CPUs).
///
/// # Safety
/// The CPU must support NEON and dotprod.
#[target_feature(enable = "neon,dotprod")]
pub unsafe fn gemv_q4_k_8x8(blocks: &[BlockQ4Kx8], y: &[BlockQ8K]) -> [f32; 8] {
    let m4b = vdupq_n_u8(0x0F);
    let mut acc = [vdupq_n_f32(0.0); 2];
    for (x, yb) in blocks.iter().zip(y) {
        let q8d = vdupq_n_f32(yb.d());
        let (scale, min) = (times_d(&x.d, q8d), times_d(&x.dmin, q8d));
        for sb in 0..4 {
            let q8: [int8x16_t; 8] = core::array::from_fn(|i| ld_dup8(&yb.qs[sb * 64 + 8 * i..]));
            let base = &x.qs[sb * 256..];
            // lo[cp] / hi[cp]: columns 2cp, 2cp+1 (two lanes each).
            let mut lo = [vdupq_n_s32(0); 4];
            let mut hi = [vdupq_n_s32(0); 4];
            for cp in 0..4 {
                for i in 0..4 {
                    let q = ld(&base[16 * cp + 64 * i..]);
                    let l = vreinterpretq_s8_u8(vandq_u8(q, m4b));
                    let h = vreinterpretq_s8_u8(vshrq_n_u8::<4>(q));
                    // SAFETY: dotprod is guaranteed by the caller.
                    unsafe {
                        lo[cp] = sdot_asm(lo[cp], l, q8[i]);
                        hi[cp] = sdot_asm(hi[cp], h, q8[4 + i]);
                    }
                }
            }
            for (h, a) in acc.iter_mut().enumerate() {
                let p = 2 * h;
                let sc_lo = ldi(core::array::from_fn(|t| x.scale_min(4 * h + t, 2 * sb).0 as i32));
                let sc_hi =
                    ldi(core::array::from_fn(|t| x.scale_min(4 * h + t, 2 * sb + 1).0 as i32));
                let s0 = vcvtq_f32_s32(vmulq_s32(sc_lo, vpaddq_s32(lo[p], lo[p + 1])));
                *a = vfmaq_f32(*a, scale[h], s0);
                let s1 = vcvtq_f32_s32(vmulq_s32(sc_hi, vpaddq_s32(hi[p], hi[p + 1])));
                *a = vfmaq_f32(*a, scale[h], s1);
            }
        }
        let bias = q4_k_bias(x, yb);
        for (h, a) in acc.iter_mut().enumerate() {
            let b = vcvtq_f32_s32(ldi(core::array::from_fn(|t| bias[4 * h + t])));
            *a = vsubq_f32(*a, vmulq_f32(b, min[h]));
        }
    }
    let (a, b) = (st(acc[0]), st(acc[1]));
    core::array::from_fn(|j| if j < 4 { a[j] } else { b[j - 4] })
}

/// The exact sub-block dots of the eight rows of one `block_q5_Kx8` (8-byte interleave)
/// with one Q8_K block, as ggml's q5_K 8x8 gemv forms them: per sub-block pair and row
/// pair, `sdot` of 16 interleaved bytes (8 of each row, the fifth bit from the
/// interleaved `qh`, bit 2 sb of the low nibbles and 2 sb + 1 of the high ones) against
/// 8 activation bytes twice, `vpaddq_s32` to one lane per row. `[s][h]`: sub-block s,
/// rows 4h..4h + 4. (ggml's gemm forms the same integers by `smmla`.)
///
/// # Safety
/// The CPU must support NEON and dotprod.
#[inline]
#[target_feature(enable = "neon,dotprod")]
unsafe fn q5_k_8x8_dots(x: &BlockQ5Kx8, yb: &BlockQ8K) -> [[int32x4_t; 2]; 8] {
    let (m4b, ten) = (vdupq_n_u8(0x0F), vdupq_n_u8(0x10));
    let mut dots = [[vdupq_n_s32(0); 2]; 8];
    for sb in 0..4 {
        let q8: [int8x16_t; 8] = core::array::from_fn(|i| ld_dup8(&yb.qs[sb * 64 + 8 * i..]));
        let base = &x.qs[sb * 256..];
        let mut lo = [vdupq_n_s32(0); 4];
        let mut hi = [vdupq_n_s32(0); 4];
        for cp in 0..4 {
            for i in 0..4 {
                let q = ld(&base[16 * cp + 64 * i..]);
                let h = ld(&x.qh[64 * i + 16 * cp..]);
                let h_lo = vandq_u8(vtstq_u8(h, vdupq_n_u8(1 << (2 * sb))), ten);
                let h_hi = vandq_u8(vtstq_u8(h, vdupq_n_u8(2 << (2 * sb))), ten);
                let l = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(q, m4b), h_lo));
                let u = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8::<4>(q), h_hi));
                // SAFETY: dotprod is guaranteed by the caller.
                unsafe {
                    lo[cp] = sdot_asm(lo[cp], l, q8[i]);
                    hi[cp] = sdot_asm(hi[cp], u, q8[4 + i]);
                }
            }
        }
        for h in 0..2 {
            dots[2 * sb][h] = vpaddq_s32(lo[2 * h], lo[2 * h + 1]);
            dots[2 * sb + 1][h] = vpaddq_s32(hi[2 * h], hi[2 * h + 1]);
        }
    }
    dots
}

/// `m_s * S_s` per row of one `block_q5_Kx8` for the sub-blocks `subs`, S the wrapping
/// i16 pair sums of `bsums`: `[h]` rows 4h..4h + 4.
fn q5_k_bias(x: &BlockQ5Kx8, yb: &BlockQ8K, subs: core::ops::Range<usize>) -> [[i32; 4]; 2] {
    let s: [i32; 8] =
        core::array::from_fn(|sb| yb.bsum(2 * sb).wrapping_add(yb.bsum(2 * sb + 1)) as i32);
    core::array::from_fn(|h| {
        core::array::from_fn(|t| {
            subs.clone().map(|u| x.scale_min(4 * h + t, u).1 as i32 * s[u]).sum()
        })
    })
}

/// `ggml_gemv_q5_K_8x8_q8_K` for one group of 8 columns (dotprod): per sub-block pair
/// two `vfmaq_f32` steps, then the pair's bias by `vmulq_f32` + `vsubq_f32`.
///
/// # Safety
/// The CPU must support NEON and dotprod.
#[target_feature(enable = "neon,dotprod")]
pub unsafe fn gemv_q5_k_8x8(blocks: &[BlockQ5Kx8], y: &[BlockQ8K]) -> [f32; 8] {
    let mut acc = [vdupq_n_f32(0.0); 2];
    for (x, yb) in blocks.iter().zip(y) {
        let q8d = vdupq_n_f32(yb.d());
        let (scale, min) = (times_d(&x.d, q8d), times_d(&x.dmin, q8d));
        // SAFETY: dotprod is guaranteed by the caller.
        let dots = unsafe { q5_k_8x8_dots(x, yb) };
        for p in 0..4 {
            let bias = q5_k_bias(x, yb, 2 * p..2 * p + 2);
            for (h, a) in acc.iter_mut().enumerate() {
                for s in [2 * p, 2 * p + 1] {
                    let sc = ldi(core::array::from_fn(|t| x.scale_min(4 * h + t, s).0 as i32));
                    *a = vfmaq_f32(*a, scale[h], vcvtq_f32_s32(vmulq_s32(sc, dots[s][h])));
                }
                *a = vsubq_f32(*a, vmulq_f32(min[h], vcvtq_f32_s32(ldi(bias[h]))));
            }
        }
    }
    let (a, b) = (st(acc[0]), st(acc[1]));
    core::array::from_fn(|j| if j < 4 { a[j] } else { b[j - 4] })
}

/// `ggml_gemm_q5_K_8x8_q8_K` for one group of 8 columns and one activation row: per
/// superblock `acc - round(float(bias) * min)`, then `+ round(float(isum) * scale)`
/// (`vmulq_f32` with `vsubq_f32` / `vaddq_f32`), the integer sums as the gemv's (ggml
/// forms them by `smmla`: the same integers).
///
/// # Safety
/// The CPU must support NEON and dotprod.
#[target_feature(enable = "neon,dotprod")]
pub unsafe fn gemm_q5_k_8x8(blocks: &[BlockQ5Kx8], y: &[BlockQ8K]) -> [f32; 8] {
    let mut acc = [vdupq_n_f32(0.0); 2];
    for (x, yb) in blocks.iter().zip(y) {
        let q8d = vdupq_n_f32(yb.d());
        // SAFETY: dotprod is guaranteed by the caller.
        let dots = unsafe { q5_k_8x8_dots(x, yb) };
        let bias = q5_k_bias(x, yb, 0..8);
        for (h, a) in acc.iter_mut().enumerate() {
            let mut isum = vdupq_n_s32(0);
            for (s, d) in dots.iter().enumerate() {
                let sc = ldi(core::array::from_fn(|t| x.scale_min(4 * h + t, s).0 as i32));
                isum = vmlaq_s32(isum, sc, d[h]);
            }
            let min = vmulq_f32(ldf(core::array::from_fn(|t| f16(x.dmin[4 * h + t]))), q8d);
            let scale = vmulq_f32(ldf(core::array::from_fn(|t| f16(x.d[4 * h + t]))), q8d);
            *a = vsubq_f32(*a, vmulq_f32(vcvtq_f32_s32(ldi(bias[h])), min));
            *a = vaddq_f32(*a, vmulq_f32(vcvtq_f32_s32(isum), scale));
        }
    }
    let (a, b) = (st(acc[0]), st(acc[1]));
    core::array::from_fn(|j| if j < 4 { a[j] } else { b[j - 4] })
}

/// `ggml_gemm_q4_K_8x8_q8_K` for one group of 8 columns and one activation row (i8mm).
///
/// # Safety
/// The CPU must support NEON and i8mm.
#[target_feature(enable = "neon,i8mm")]
pub unsafe fn gemm_q4_k_8x8<const FUSED: bool>(blocks: &[BlockQ4Kx8], y: &[BlockQ8K]) -> [f32; 8] {
    let m4b = vdupq_n_u8(0x0F);
    let mut acc = [vdupq_n_f32(0.0); 2];
    for (x, yb) in blocks.iter().zip(y) {
        // isum[cp]: lanes (c0, c1, c0, c1) of columns 2cp, 2cp+1 (both tile rows equal).
        let mut isum = [vdupq_n_s32(0); 4];
        for sb in 0..4 {
            let q8: [int8x16_t; 8] = core::array::from_fn(|i| ld_dup8(&yb.qs[sb * 64 + 8 * i..]));
            let base = &x.qs[sb * 256..];
            for (cp, is) in isum.iter_mut().enumerate() {
                let (mut lo, mut hi) = (vdupq_n_s32(0), vdupq_n_s32(0));
                for i in 0..4 {
                    let q = ld(&base[16 * cp + 64 * i..]);
                    let l = vreinterpretq_s8_u8(vandq_u8(q, m4b));
                    let h = vreinterpretq_s8_u8(vshrq_n_u8::<4>(q));
                    // SAFETY: i8mm is guaranteed by the caller.
                    unsafe {
                        lo = smmla(lo, q8[i], l);
                        hi = smmla(hi, q8[4 + i], h);
                    }
                }
                let sc = |s: usize| {
                    let (a, b) =
                        (x.scale_min(2 * cp, s).0 as i32, x.scale_min(2 * cp + 1, s).0 as i32);
                    ldi([a, b, a, b])
                };
                *is = vmlaq_s32(*is, lo, sc(2 * sb));
                *is = vmlaq_s32(*is, hi, sc(2 * sb + 1));
            }
        }
        let sums: [[i32; 4]; 4] = core::array::from_fn(|cp| sti(isum[cp]));
        let bias = q4_k_bias(x, yb);
        let q8d = vdupq_n_f32(yb.d());
        for (h, a) in acc.iter_mut().enumerate() {
            let dmins = vmulq_f32(ldf(core::array::from_fn(|t| f16(x.dmin[4 * h + t]))), q8d);
            let scale = vmulq_f32(ldf(core::array::from_fn(|t| f16(x.d[4 * h + t]))), q8d);
            let b = vcvtq_f32_s32(ldi(core::array::from_fn(|t| bias[4 * h + t])));
            let s = vcvtq_f32_s32(ldi(core::array::from_fn(|t| {
                let j = 4 * h + t;
                sums[j / 2][j % 2]
            })));
            if FUSED {
                // The SVE build (256 bits): `svmls` then `svmla`, both fused.
                *a = vfmaq_f32(*a, vnegq_f32(b), dmins);
                *a = vfmaq_f32(*a, s, scale);
            } else {
                *a = vsubq_f32(*a, vmulq_f32(b, dmins));
                *a = vaddq_f32(*a, vmulq_f32(s, scale));
            }
        }
    }
    let (a, b) = (st(acc[0]), st(acc[1]));
    core::array::from_fn(|j| if j < 4 { a[j] } else { b[j - 4] })
}

/// `ggml_gemv_q4_0_4x8_q8_0` / `ggml_gemm_q4_0_4x8_q8_0` for one group of 4 columns and
/// one activation row (`smmla` tiles).
///
/// # Safety
/// The CPU must support NEON and i8mm.
#[target_feature(enable = "neon,i8mm")]
pub unsafe fn gemv_q4_0_4x8(blocks: &[BlockQ4_0x4], y: &[BlockQ8_0]) -> [f32; 4] {
    let mhi = vdupq_n_s8(0xF0u8 as i8);
    let mut acc = vdupq_n_f32(0.0);
    for (x, yb) in blocks.iter().zip(y) {
        let b: [int8x16_t; 4] = core::array::from_fn(|i| vreinterpretq_s8_u8(ld(&x.qs[16 * i..])));
        let a: [int8x16_t; 4] = core::array::from_fn(|i| ld_dup8(&yb.qs[8 * i..]));
        // t01: columns 0,1; t23: columns 2,3 (b[0]/b[2]: bytes 0..8/8..16 of rows 0,1).
        let (mut t01, mut t23) = (vdupq_n_s32(0), vdupq_n_s32(0));
        // SAFETY: i8mm is guaranteed by the caller.
        unsafe {
            t01 = smmla(t01, a[0], vshlq_n_s8::<4>(b[0]));
            t23 = smmla(t23, a[0], vshlq_n_s8::<4>(b[1]));
            t01 = smmla(t01, a[1], vshlq_n_s8::<4>(b[2]));
            t23 = smmla(t23, a[1], vshlq_n_s8::<4>(b[3]));
            t01 = smmla(t01, a[2], vandq_s8(b[0], mhi));
            t23 = smmla(t23, a[2], vandq_s8(b[1], mhi));
            t01 = smmla(t01, a[3], vandq_s8(b[2], mhi));
            t23 = smmla(t23, a[3], vandq_s8(b[3], mhi));
        }
        let ret = vcombine_s32(vget_low_s32(t01), vget_low_s32(t23));
        let d = vmulq_f32(vdupq_n_f32(yb.d()), ldf(core::array::from_fn(|j| f16(x.d[j]))));
        acc = vfmaq_f32(acc, vcvtq_n_f32_s32::<4>(ret), d);
    }
    st(acc)
}

/// `ggml_gemv_q8_0_4x8_q8_0` / `ggml_gemm_q8_0_4x8_q8_0` for one group of 4 columns and
/// one activation row (`smmla` tiles).
///
/// # Safety
/// The CPU must support NEON and i8mm.
#[target_feature(enable = "neon,i8mm")]
pub unsafe fn gemv_q8_0_4x8(blocks: &[BlockQ8_0x4], y: &[BlockQ8_0]) -> [f32; 4] {
    let mut acc = vdupq_n_f32(0.0);
    for (x, yb) in blocks.iter().zip(y) {
        let (mut t01, mut t23) = (vdupq_n_s32(0), vdupq_n_s32(0));
        for chunk in 0..4 {
            let a = ld_dup8(&yb.qs[8 * chunk..]);
            let b01 = vreinterpretq_s8_u8(ld(&x.qs[32 * chunk..]));
            let b23 = vreinterpretq_s8_u8(ld(&x.qs[32 * chunk + 16..]));
            // SAFETY: i8mm is guaranteed by the caller.
            unsafe {
                t01 = smmla(t01, a, b01);
                t23 = smmla(t23, a, b23);
            }
        }
        let ret = vcombine_s32(vget_low_s32(t01), vget_low_s32(t23));
        let d = vmulq_f32(vdupq_n_f32(yb.d()), ldf(core::array::from_fn(|j| f16(x.d[j]))));
        acc = vfmaq_f32(acc, vcvtq_f32_s32(ret), d);
    }
    st(acc)
}
