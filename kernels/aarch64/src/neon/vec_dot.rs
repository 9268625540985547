//! ggml's NEON vec_dot kernels (`ggml-cpu/arch/arm/quants.c`, `nrc == 1`), natively.
//! Twin: `tiercheck_core::arch::aarch64::neon::vec_dot` (same names; its docs give the float order).
//! Float operations: `vmulq_f32` + `vaddq_f32` where ggml uses `vmlaq_n_f32` (GCC keeps
//! it unfused), `f32::mul_add` (fmadd/fmsub) where GCC contracts a C expression.

use core::arch::aarch64::*;
use core::arch::asm;

use tiercheck_core::blocks::q4_k::scale_min_k4;
use tiercheck_core::blocks::{BlockQ4K, BlockQ4_0, BlockQ6K, BlockQ8K, BlockQ8_0};

/// `sdot` (dotprod) through inline assembly: acc[t] += sum of a[4t..4t+4] * b[4t..4t+4].
#[inline]
#[target_feature(enable = "neon,dotprod")]
pub(crate) unsafe fn sdot_asm(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
    let mut acc = acc;
    // SAFETY: the caller guarantees dotprod; the instruction only reads/writes registers.
    unsafe {
        asm!("sdot {0:v}.4s, {1:v}.16b, {2:v}.16b", inout(vreg) acc, in(vreg) a, in(vreg) b,
             options(pure, nomem, nostack));
    }
    acc
}

/// The same sums with plain NEON: widening multiplies and pairwise adds.
#[inline]
#[target_feature(enable = "neon")]
fn sdot_neon(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
    let lo = vmull_s8(vget_low_s8(a), vget_low_s8(b));
    let hi = vmull_s8(vget_high_s8(a), vget_high_s8(b));
    // pairwise: lanes (0,1),(2,3) of lo and hi -> 4 lanes of 4 products each
    let lo = vpaddlq_s16(lo); // 4 x i32: products (0+1),(2+3),(4+5),(6+7)
    let hi = vpaddlq_s16(hi);
    vaddq_s32(acc, vpaddq_s32(lo, hi))
}

#[inline]
#[target_feature(enable = "neon")]
pub(crate) fn sdot(acc: int32x4_t, a: int8x16_t, b: int8x16_t, dot: bool) -> int32x4_t {
    if dot {
        // SAFETY: `dot` is true only when the CPU has dotprod.
        unsafe { sdot_asm(acc, a, b) }
    } else {
        sdot_neon(acc, a, b)
    }
}

#[inline]
#[target_feature(enable = "neon")]
fn load16(p: &[u8]) -> int8x16_t {
    assert!(p.len() >= 16);
    // SAFETY: 16 readable bytes (asserted).
    unsafe { vld1q_s8(p.as_ptr().cast()) }
}

/// `vaddvq_f32`: (v0 + v1) + (v2 + v3).
#[inline]
#[target_feature(enable = "neon")]
fn addv(v: float32x4_t) -> f32 {
    vaddvq_f32(v)
}

/// `ggml_vec_dot_q4_0_q8_0`, NEON, nrc = 1.
///
/// # Safety
/// The CPU must support NEON, and dotprod when `dot` is true.
#[target_feature(enable = "neon")]
pub unsafe fn vec_dot_q4_0_q8_0(x: &[BlockQ4_0], y: &[BlockQ8_0], dot: bool) -> f32 {
    let nb = x.len().min(y.len());
    let m4b = vdupq_n_u8(0x0F);
    let s8b = vdupq_n_s8(8);
    let (mut sumv0, mut sumv1) = (vdupq_n_f32(0.0), vdupq_n_f32(0.0));
    let mut ib = 0;
    let mut sumf = 0.0f32;
    if nb >= 2 {
        while ib + 1 < nb {
            let p = |b: usize| {
                // SAFETY: `qs` is 16 bytes.
                let v = unsafe { vld1q_u8(x[b].qs.as_ptr()) };
                let l = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(v, m4b)), s8b);
                let h = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8::<4>(v)), s8b);
                sdot(sdot(vdupq_n_s32(0), l, load16(&y[b].qs), dot), h, load16(&y[b].qs[16..]), dot)
            };
            let (p0, p1) = (p(ib), p(ib + 1));
            let d0 = x[ib].d() * y[ib].d();
            let d1 = x[ib + 1].d() * y[ib + 1].d();
            sumv0 = vaddq_f32(sumv0, vmulq_n_f32(vcvtq_f32_s32(p0), d0));
            sumv1 = vaddq_f32(sumv1, vmulq_n_f32(vcvtq_f32_s32(p1), d1));
            ib += 2;
        }
        sumf = addv(sumv0) + addv(sumv1);
    }
    for b in ib..nb {
        let mut sumi = 0i32;
        for j in 0..16 {
            sumi += ((x[b].qs[j] & 0xF) as i32 - 8) * y[b].q(j) as i32;
            sumi += ((x[b].qs[j] >> 4) as i32 - 8) * y[b].q(j + 16) as i32;
        }
        sumf = (sumi as f32 * x[b].d()).mul_add(y[b].d(), sumf);
    }
    sumf
}

/// `ggml_vec_dot_q8_0_q8_0`, NEON, nrc = 1.
///
/// # Safety
/// The CPU must support NEON, and dotprod when `dot` is true.
#[target_feature(enable = "neon")]
pub unsafe fn vec_dot_q8_0_q8_0(x: &[BlockQ8_0], y: &[BlockQ8_0], dot: bool) -> f32 {
    let nb = x.len().min(y.len());
    let (mut sumv0, mut sumv1) = (vdupq_n_f32(0.0), vdupq_n_f32(0.0));
    let mut ib = 0;
    let mut sumf = 0.0f32;
    if nb >= 2 {
        while ib + 1 < nb {
            let p = |b: usize| {
                let a = sdot(vdupq_n_s32(0), load16(&x[b].qs), load16(&y[b].qs), dot);
                let c = sdot(vdupq_n_s32(0), load16(&x[b].qs[16..]), load16(&y[b].qs[16..]), dot);
                vaddq_s32(a, c)
            };
            let (p0, p1) = (p(ib), p(ib + 1));
            let d0 = x[ib].d() * y[ib].d();
            let d1 = x[ib + 1].d() * y[ib + 1].d();
            sumv0 = vaddq_f32(sumv0, vmulq_n_f32(vcvtq_f32_s32(p0), d0));
            sumv1 = vaddq_f32(sumv1, vmulq_n_f32(vcvtq_f32_s32(p1), d1));
            ib += 2;
        }
        sumf = addv(sumv0) + addv(sumv1);
    }
    for b in ib..nb {
        let sumi: i32 = (0..32).map(|j| x[b].q(j) as i32 * y[b].q(j) as i32).sum();
        sumf = (sumi as f32).mul_add(x[b].d() * y[b].d(), sumf);
    }
    sumf
}

/// `ggml_vec_dot_q4_K_q8_K`, NEON, nrc = 1.
///
/// # Safety
/// The CPU must support NEON, and dotprod when `dot` is true.
#[target_feature(enable = "neon")]
pub unsafe fn vec_dot_q4_k_q8_k(x: &[BlockQ4K], y: &[BlockQ8K], dot: bool) -> f32 {
    let m4b = vdupq_n_u8(0xF);
    let mut sumf = 0.0f32;
    for (xb, yb) in x.iter().zip(y) {
        let d = yb.d() * xb.d();
        let dmin = yb.d() * xb.dmin();
        let mut minsum = 0i32;
        for s in 0..8 {
            let (_, m) = scale_min_k4(s, &xb.scales);
            minsum += (yb.bsum(2 * s) as i32 + yb.bsum(2 * s + 1) as i32) * m as i32;
        }
        sumf = (-dmin).mul_add(minsum as f32, sumf);
        let (mut sumi1, mut sumi2) = (0i32, 0i32);
        for c in 0..4 {
            // SAFETY: 32 bytes at 32c lie inside the 128-byte `qs`.
            let (q0, q1) = unsafe {
                (vld1q_u8(xb.qs.as_ptr().add(32 * c)), vld1q_u8(xb.qs.as_ptr().add(32 * c + 16)))
            };
            let y0 = &yb.qs[64 * c..];
            let lo = sdot(
                sdot(vdupq_n_s32(0), vreinterpretq_s8_u8(vandq_u8(q0, m4b)), load16(y0), dot),
                vreinterpretq_s8_u8(vandq_u8(q1, m4b)),
                load16(&y0[16..]),
                dot,
            );
            let hi = sdot(
                sdot(
                    vdupq_n_s32(0),
                    vreinterpretq_s8_u8(vshrq_n_u8::<4>(q0)),
                    load16(&y0[32..]),
                    dot,
                ),
                vreinterpretq_s8_u8(vshrq_n_u8::<4>(q1)),
                load16(&y0[48..]),
                dot,
            );
            sumi1 += vaddvq_s32(lo) * scale_min_k4(2 * c, &xb.scales).0 as i32;
            sumi2 += vaddvq_s32(hi) * scale_min_k4(2 * c + 1, &xb.scales).0 as i32;
        }
        sumf = d.mul_add((sumi1 + sumi2) as f32, sumf);
    }
    sumf
}

/// `ggml_vec_dot_q6_K_q8_K`, NEON, nrc = 1.
///
/// # Safety
/// The CPU must support NEON, and dotprod when `dot` is true.
#[target_feature(enable = "neon")]
pub unsafe fn vec_dot_q6_k_q8_k(x: &[BlockQ6K], y: &[BlockQ8K], dot: bool) -> f32 {
    let mut sum = 0.0f32;
    for (xb, yb) in x.iter().zip(y) {
        let d_all = xb.d();
        let isum_mins: i32 = (0..16).map(|g| yb.bsum(g) as i32 * xb.scale(g) as i32).sum();
        let q = xb.quants();
        let mut isum = 0i32;
        for g in 0..16 {
            let u: [u8; 16] = core::array::from_fn(|i| (q[16 * g + i] as i32 + 32) as u8);
            let p = sdot(vdupq_n_s32(0), load16(&u), load16(&yb.qs[16 * g..]), dot);
            isum += vaddvq_s32(p) * xb.scale(g) as i32;
        }
        sum = (d_all * yb.d()).mul_add((isum - 32 * isum_mins) as f32, sum);
    }
    sum
}
