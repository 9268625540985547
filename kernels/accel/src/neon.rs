//! NEON integer stages for the x86 lanes' twins on aarch64 hosts: the lanes of ggml's
//! AVX2 kernels (each 256-bit register's eight i32 lanes, lane `t` summing bytes
//! `4t..4t+4`), formed exactly from widening byte products (`smull`) and pairwise
//! additions. Every sum is of integer products inside i32 (bounds per function), so the
//! grouping does not matter; the AVX2 instructions' saturation cannot occur on these
//! operands (see [`x86`]), so the exact sums are theirs.

use core::arch::aarch64::*;

/// The four sums of 4-byte groups of the byte products of `a` and `b` (16 signed
/// bytes each): `[a0 b0 + .. + a3 b3, .., a12 b12 + .. + a15 b15]`.
#[inline(always)]
pub(crate) fn group4(a: int8x16_t, b: int8x16_t) -> int32x4_t {
    // SAFETY: NEON is part of every aarch64 CPU.
    unsafe {
        let lo = vpaddlq_s16(vmull_s8(vget_low_s8(a), vget_low_s8(b)));
        let hi = vpaddlq_s16(vmull_high_s8(a, b));
        vpaddq_s32(lo, hi)
    }
}

#[inline(always)]
pub(crate) fn load16(b: &[u8], at: usize) -> int8x16_t {
    assert!(at + 16 <= b.len());
    // SAFETY: 16 readable bytes at `at` (checked above); the load is unaligned.
    unsafe { vld1q_s8(b.as_ptr().add(at).cast()) }
}

#[inline(always)]
fn lanes(a: int32x4_t, b: int32x4_t) -> [i32; 8] {
    let mut out = [0i32; 8];
    // SAFETY: two stores of four i32 into `out`.
    unsafe {
        vst1q_s32(out.as_mut_ptr(), a);
        vst1q_s32(out.as_mut_ptr().add(4), b);
    }
    out
}

/// The eight lanes of [`x86::q4k_lanes`](super::x86): lane `t` sums bytes `4t..4t+4`
/// of every 32-byte run `c` of `qs`, low nibbles against `y[64c..]` times `sc[2c]`,
/// high nibbles against `y[64c + 32..]` times `sc[2c + 1]`. Bounds: a product at
/// most 15 * 128, a scaled 4-byte group at most 4 * 1920 * 63, eight per lane.
#[inline]
pub(crate) fn q4k_lanes(qs: &[u8; 128], y: &[u8; 256], sc: &[u8; 8]) -> [i32; 8] {
    // SAFETY: NEON is part of every aarch64 CPU.
    unsafe {
        let m4 = vdupq_n_s8(0x0F);
        let (mut a0, mut a1) = (vdupq_n_s32(0), vdupq_n_s32(0));
        for c in 0..4 {
            let (q0, q1) = (load16(qs, 32 * c), load16(qs, 32 * c + 16));
            let lo = |q: int8x16_t| vandq_s8(q, m4);
            let hi = |q: int8x16_t| vreinterpretq_s8_u8(vshrq_n_u8::<4>(vreinterpretq_u8_s8(q)));
            let (sl, sh) = (sc[2 * c] as i32, sc[2 * c + 1] as i32);
            a0 = vmlaq_n_s32(a0, group4(lo(q0), load16(y, 64 * c)), sl);
            a1 = vmlaq_n_s32(a1, group4(lo(q1), load16(y, 64 * c + 16)), sl);
            a0 = vmlaq_n_s32(a0, group4(hi(q0), load16(y, 64 * c + 32)), sh);
            a1 = vmlaq_n_s32(a1, group4(hi(q1), load16(y, 64 * c + 48)), sh);
        }
        lanes(a0, a1)
    }
}

/// The eight lanes of [`x86::q6k_lanes`](super::x86): lane `t` sums bytes `4t..4t+4`
/// of every 32-value chunk (the unsigned 6-bit values, chunk `c` of half `j` at
/// `128j + 32c`) times its group's signed scale (`sc[8j + 2c]` for bytes 0..16,
/// `sc[8j + 2c + 1]` for 16..32). Bounds: a product at most 63 * 128, a scaled group
/// 4 * 8064 * 128, eight per lane.
#[inline]
pub(crate) fn q6k_lanes(ql: &[u8; 128], qh: &[u8; 64], y: &[u8; 256], sc: &[u8; 16]) -> [i32; 8] {
    // SAFETY: NEON is part of every aarch64 CPU.
    unsafe {
        let m4 = vdupq_n_u8(0x0F);
        let mut acc = [vdupq_n_s32(0), vdupq_n_s32(0)];
        for j in 0..2 {
            for (h, a) in acc.iter_mut().enumerate() {
                let u = |v: int8x16_t| vreinterpretq_u8_s8(v);
                let l0 = u(load16(ql, 64 * j + 16 * h));
                let l1 = u(load16(ql, 64 * j + 32 + 16 * h));
                let hb = u(load16(qh, 32 * j + 16 * h));
                let q = [
                    vorrq_u8(vandq_u8(l0, m4), vshlq_n_u8::<4>(vandq_u8(hb, vdupq_n_u8(0x03)))),
                    vorrq_u8(vandq_u8(l1, m4), vshlq_n_u8::<2>(vandq_u8(hb, vdupq_n_u8(0x0C)))),
                    vorrq_u8(vshrq_n_u8::<4>(l0), vandq_u8(hb, vdupq_n_u8(0x30))),
                    vorrq_u8(vshrq_n_u8::<4>(l1), vshrq_n_u8::<2>(vandq_u8(hb, vdupq_n_u8(0xC0)))),
                ];
                for (c, qc) in q.into_iter().enumerate() {
                    let g = group4(vreinterpretq_s8_u8(qc), load16(y, 128 * j + 32 * c + 16 * h));
                    *a = vmlaq_n_s32(*a, g, sc[8 * j + 2 * c + h] as i8 as i32);
                }
            }
        }
        lanes(acc[0], acc[1])
    }
}

/// The eight lanes of [`x86::bsums_lanes`](super::x86): lane `t` is `bsum[2t] *
/// sc[2t] + bsum[2t + 1] * sc[2t + 1]` over a Q8_K block's sixteen i16 group sums
/// and sixteen signed scales (`|bsum| <= 16 * 128`, `|sc| <= 128`).
#[inline]
pub(crate) fn bsums_lanes(bsums: &[u8; 32], sc: &[u8; 16]) -> [i32; 8] {
    // SAFETY: NEON is part of every aarch64 CPU; 32 bytes of `bsums` and 16 of `sc`.
    unsafe {
        let b0 = vld1q_s16(bsums.as_ptr().cast());
        let b1 = vld1q_s16(bsums.as_ptr().add(16).cast());
        let s = vld1q_s8(sc.as_ptr().cast());
        let (s0, s1) = (vmovl_s8(vget_low_s8(s)), vmovl_high_s8(s));
        let half = |b: int16x8_t, s: int16x8_t| {
            vpaddq_s32(vmull_s16(vget_low_s16(b), vget_low_s16(s)), vmull_high_s16(b, s))
        };
        lanes(half(b0, s0), half(b1, s1))
    }
}

/// The eight lanes of [`x86::mul_sum_i8_lanes`](super::x86) on 32 signed bytes:
/// lane `t` sums bytes `4t..4t+4` of `|x| * sign(y, x)` as the AVX2 instructions
/// form them (`|-128|` is 128 as an unsigned byte; `sign(-128, x < 0)` wraps to
/// -128), widened to i16 before multiplying (each product at most 128 * 128).
#[inline]
pub(crate) fn mul_sum_i8_lanes(x: &[u8; 32], y: &[u8; 32]) -> [i32; 8] {
    // SAFETY: NEON is part of every aarch64 CPU.
    unsafe {
        let mut out = [vdupq_n_s32(0), vdupq_n_s32(0)];
        for (h, o) in out.iter_mut().enumerate() {
            let (xv, yv) = (load16(x, 16 * h), load16(y, 16 * h));
            let ax = vreinterpretq_u8_s8(vabsq_s8(xv));
            let sy = vbslq_s8(vcltzq_s8(xv), vnegq_s8(yv), yv);
            let a16 = |u: uint8x8_t| vreinterpretq_s16_u16(vmovl_u8(u));
            let p_lo = vmulq_s16(a16(vget_low_u8(ax)), vmovl_s8(vget_low_s8(sy)));
            let p_hi = vmulq_s16(a16(vget_high_u8(ax)), vmovl_high_s8(sy));
            *o = vpaddq_s32(vpaddlq_s16(p_lo), vpaddlq_s16(p_hi));
        }
        lanes(out[0], out[1])
    }
}
