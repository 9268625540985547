//! ggml's two-rows-at-a-time vec_dot of the aarch64 i8mm build (`nrc == 2`:
//! `ggml_vec_dot_q4_0_q8_0`, `q4_1_q8_1`, `q8_0_q8_0`, `q4_K_q8_K`, `q6_K_q8_K` in
//! `ggml-cpu/arch/arm/quants.c`), natively: the two weight rows' and the two activation
//! rows' 8-byte halves zipped (`vzip1q_s64` / `vzip2q_s64`) into `smmla` operands, so one
//! `smmla` accumulates the 2x2 tile `[x0·y0, x0·y1, x1·y0, x1·y1]`; sub-block scales by
//! `vmlaq_s32`; the float steps as `vmulq_f32` then `vaddq_f32` / `vsubq_f32` (GCC keeps
//! ggml's `vmlaq_f32` / `vmlsq_f32` unfused). Twin (float order in words):
//! `tiercheck_core::arch::aarch64::i8mm::vec_dot2`, same names.

use core::arch::aarch64::*;

use crate::simd::{ld, ldf, ldi, lds, st};

use tiercheck_core::arch::aarch64::i8mm::Tile;
use tiercheck_core::blocks::q4_k::scale_min_k4;
use tiercheck_core::blocks::{
    BlockQ4K, BlockQ4_0, BlockQ4_1, BlockQ6K, BlockQ8K, BlockQ8_0, BlockQ8_1,
};

/// `smmla` through inline assembly: acc (2x2, row-major) += a (2x8) * b (2x8)^T.
#[inline]
#[target_feature(enable = "neon,i8mm")]
pub(crate) unsafe fn smmla(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
    let mut acc = acc;
    // SAFETY: the caller guarantees i8mm; the instruction only reads/writes registers.
    unsafe {
        core::arch::asm!(
            "smmla {0:v}.4s, {1:v}.16b, {2:v}.16b",
            inout(vreg) acc,
            in(vreg) a,
            in(vreg) b,
            options(pure, nomem, nostack)
        );
    }
    acc
}

/// The tile `[x0y0, x0y1, x1y0, x1y1]` as ggml stores it: `[[x0y0, x1y0], [x0y1, x1y1]]`.
#[inline]
#[target_feature(enable = "neon")]
fn tile_of(v: float32x4_t) -> Tile {
    let mut o = [0.0f32; 4];
    // SAFETY: 4 writable floats.
    unsafe { vst1q_f32(o.as_mut_ptr(), v) };
    [[o[0], o[2]], [o[1], o[3]]]
}

/// `smmla` of 16 values of each of two weight rows (`a0`, `a1`) against 16 values of
/// each of two activation rows (`b0`, `b1`), accumulated into `acc`.
///
/// # Safety
/// The CPU must support NEON and i8mm.
#[inline]
#[target_feature(enable = "neon,i8mm")]
unsafe fn mmla16(
    acc: int32x4_t,
    a0: int8x16_t,
    a1: int8x16_t,
    b0: int8x16_t,
    b1: int8x16_t,
) -> int32x4_t {
    let (a0, a1) = (vreinterpretq_s64_s8(a0), vreinterpretq_s64_s8(a1));
    let (b0, b1) = (vreinterpretq_s64_s8(b0), vreinterpretq_s64_s8(b1));
    let lo = (vreinterpretq_s8_s64(vzip1q_s64(a0, a1)), vreinterpretq_s8_s64(vzip1q_s64(b0, b1)));
    let hi = (vreinterpretq_s8_s64(vzip2q_s64(a0, a1)), vreinterpretq_s8_s64(vzip2q_s64(b0, b1)));
    // SAFETY: i8mm is guaranteed by the caller.
    unsafe { smmla(smmla(acc, lo.0, lo.1), hi.0, hi.1) }
}

/// The four scale products `[d_x0 d_y0, d_x0 d_y1, d_x1 d_y0, d_x1 d_y1]`.
fn scales(dx: [f32; 2], dy: [f32; 2]) -> [f32; 4] {
    [dx[0] * dy[0], dx[0] * dy[1], dx[1] * dy[0], dx[1] * dy[1]]
}

/// `ggml_vec_dot_q4_0_q8_0` with `nrc == 2`.
///
/// # Safety
/// The CPU must support NEON and i8mm.
#[target_feature(enable = "neon,i8mm")]
pub unsafe fn vec_dot2_q4_0_q8_0(x: [&[BlockQ4_0]; 2], y: [&[BlockQ8_0]; 2]) -> Tile {
    let (m4b, s8b) = (vdupq_n_u8(0x0F), vdupq_n_s8(8));
    let mut sum = vdupq_n_f32(0.0);
    for b in 0..x[0].len() {
        let (x0, x1, y0, y1) = (&x[0][b], &x[1][b], &y[0][b], &y[1][b]);
        let split = |q: uint8x16_t| {
            (
                vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, m4b)), s8b),
                vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8::<4>(q)), s8b),
            )
        };
        let ((x0l, x0h), (x1l, x1h)) = (split(ld(&x0.qs)), split(ld(&x1.qs)));
        let qy = |blk: &BlockQ8_0, o: usize| lds(&blk.qs[o..]);
        // SAFETY: i8mm is guaranteed by the caller.
        let isum = unsafe {
            let r = mmla16(vdupq_n_s32(0), x0l, x1l, qy(y0, 0), qy(y1, 0));
            mmla16(r, x0h, x1h, qy(y0, 16), qy(y1, 16))
        };
        let d = ldf(scales([x0.d(), x1.d()], [y0.d(), y1.d()]));
        sum = vaddq_f32(sum, vmulq_f32(vcvtq_f32_s32(isum), d));
    }
    tile_of(sum)
}

/// `ggml_vec_dot_q8_0_q8_0` with `nrc == 2`.
///
/// # Safety
/// The CPU must support NEON and i8mm.
#[target_feature(enable = "neon,i8mm")]
pub unsafe fn vec_dot2_q8_0_q8_0(x: [&[BlockQ8_0]; 2], y: [&[BlockQ8_0]; 2]) -> Tile {
    let mut sum = vdupq_n_f32(0.0);
    for b in 0..x[0].len() {
        let (x0, x1, y0, y1) = (&x[0][b], &x[1][b], &y[0][b], &y[1][b]);
        let q = |blk: &BlockQ8_0, o: usize| lds(&blk.qs[o..]);
        // SAFETY: i8mm is guaranteed by the caller.
        let isum = unsafe {
            let r = mmla16(vdupq_n_s32(0), q(x0, 0), q(x1, 0), q(y0, 0), q(y1, 0));
            mmla16(r, q(x0, 16), q(x1, 16), q(y0, 16), q(y1, 16))
        };
        let d = ldf(scales([x0.d(), x1.d()], [y0.d(), y1.d()]));
        sum = vaddq_f32(sum, vmulq_f32(vcvtq_f32_s32(isum), d));
    }
    tile_of(sum)
}

/// `ggml_vec_dot_q4_1_q8_1` with `nrc == 2`: the unsigned nibbles through `smmla`, the
/// scale term as Q4_0's, and the exact products `m_x * s_y` summed apart in ggml's lane
/// order (`summs0`, lanes x0y0, x1y0, x0y1, x1y1); the tile is reordered to that order
/// (`vextq_f32` + `vzip1q_f32`) and the two sums added once at the end.
///
/// # Safety
/// The CPU must support NEON and i8mm.
#[target_feature(enable = "neon,i8mm")]
pub unsafe fn vec_dot2_q4_1_q8_1(x: [&[BlockQ4_1]; 2], y: [&[BlockQ8_1]; 2]) -> Tile {
    let m4b = vdupq_n_u8(0x0F);
    let (mut sum, mut summs) = (vdupq_n_f32(0.0), vdupq_n_f32(0.0));
    for b in 0..x[0].len() {
        let (x0, x1, y0, y1) = (&x[0][b], &x[1][b], &y[0][b], &y[1][b]);
        let m = ldf([x0.m() * y0.s(), x1.m() * y0.s(), x0.m() * y1.s(), x1.m() * y1.s()]);
        summs = vaddq_f32(summs, m);
        let split = |q: uint8x16_t| {
            (vreinterpretq_s8_u8(vandq_u8(q, m4b)), vreinterpretq_s8_u8(vshrq_n_u8::<4>(q)))
        };
        let ((x0l, x0h), (x1l, x1h)) = (split(ld(&x0.qs)), split(ld(&x1.qs)));
        let qy = |blk: &BlockQ8_1, o: usize| lds(&blk.qs[o..]);
        // SAFETY: i8mm is guaranteed by the caller.
        let isum = unsafe {
            let r = mmla16(vdupq_n_s32(0), x0l, x1l, qy(y0, 0), qy(y1, 0));
            mmla16(r, x0h, x1h, qy(y0, 16), qy(y1, 16))
        };
        let d = ldf(scales([x0.d(), x1.d()], [y0.d(), y1.d()]));
        sum = vaddq_f32(sum, vmulq_f32(vcvtq_f32_s32(isum), d));
    }
    let o = st(vaddq_f32(vzip1q_f32(sum, vextq_f32::<2>(sum, sum)), summs));
    [[o[0], o[1]], [o[2], o[3]]]
}

/// `ggml_vec_dot_q4_K_q8_K` with `nrc == 2`: with `FUSED` false the i8mm build's (min
/// term, then scale term, each `vmulq_f32` + `vsubq_f32`/`vaddq_f32`); with `FUSED` true
/// the SVE + i8mm build's (scale term `vfmaq_f32`, then the min term `vfmaq_f32` with the
/// negated scale product, as ggml's two nested `svmla_f32_x`).
///
/// # Safety
/// The CPU must support NEON and i8mm.
#[target_feature(enable = "neon,i8mm")]
pub unsafe fn vec_dot2_q4_k_q8_k<const FUSED: bool>(
    x: [&[BlockQ4K]; 2],
    y: [&[BlockQ8K]; 2],
) -> Tile {
    let m4b = vdupq_n_u8(0x0F);
    let mut sum = vdupq_n_f32(0.0);
    for b in 0..x[0].len() {
        let (x0, x1, y0, y1) = (&x[0][b], &x[1][b], &y[0][b], &y[1][b]);
        let sm0: [(u8, u8); 8] = core::array::from_fn(|s| scale_min_k4(s, &x0.scales));
        let sm1: [(u8, u8); 8] = core::array::from_fn(|s| scale_min_k4(s, &x1.scales));
        let mut visum = vdupq_n_s32(0);
        for j in 0..4 {
            let nib = |q: &[u8]| {
                let (a, c) = (ld(&q[32 * j..]), ld(&q[32 * j + 16..]));
                [
                    vreinterpretq_s8_u8(vandq_u8(a, m4b)),
                    vreinterpretq_s8_u8(vandq_u8(c, m4b)),
                    vreinterpretq_s8_u8(vshrq_n_u8::<4>(a)),
                    vreinterpretq_s8_u8(vshrq_n_u8::<4>(c)),
                ]
            };
            let (v0, v1) = (nib(&x0.qs), nib(&x1.qs));
            for k in 0..2 {
                let blk = 2 * j + k;
                let sc = ldi([
                    sm0[blk].0 as i32,
                    sm0[blk].0 as i32,
                    sm1[blk].0 as i32,
                    sm1[blk].0 as i32,
                ]);
                let mut vr = vdupq_n_s32(0);
                for l in 0..2 {
                    let idx = 2 * k + l;
                    let o = 64 * j + 16 * idx;
                    // SAFETY: i8mm is guaranteed by the caller.
                    vr =
                        unsafe { mmla16(vr, v0[idx], v1[idx], lds(&y0.qs[o..]), lds(&y1.qs[o..])) };
                }
                visum = vmlaq_s32(visum, vr, sc);
            }
        }
        let bias = |sm: &[(u8, u8); 8], yb: &BlockQ8K| -> i32 {
            (0..8)
                .map(|s| sm[s].1 as i32 * (yb.bsum(2 * s) as i32 + yb.bsum(2 * s + 1) as i32))
                .sum()
        };
        let vbias = ldi([bias(&sm0, y0), bias(&sm0, y1), bias(&sm1, y0), bias(&sm1, y1)]);
        let dmins = ldf(scales([x0.dmin(), x1.dmin()], [y0.d(), y1.d()]));
        let d = ldf(scales([x0.d(), x1.d()], [y0.d(), y1.d()]));
        if FUSED {
            sum = vfmaq_f32(sum, vcvtq_f32_s32(visum), d);
            sum = vfmaq_f32(sum, vcvtq_f32_s32(vbias), vnegq_f32(dmins));
        } else {
            sum = vsubq_f32(sum, vmulq_f32(vcvtq_f32_s32(vbias), dmins));
            sum = vaddq_f32(sum, vmulq_f32(vcvtq_f32_s32(visum), d));
        }
    }
    tile_of(sum)
}

/// `ggml_vec_dot_q6_K_q8_K` with `nrc == 2`: the float step unfused (`FUSED` false, the
/// i8mm build) or one `vfmaq_f32` (`FUSED` true, the SVE + i8mm build's `svmla_f32_x`).
///
/// # Safety
/// The CPU must support NEON and i8mm.
#[target_feature(enable = "neon,i8mm")]
pub unsafe fn vec_dot2_q6_k_q8_k<const FUSED: bool>(
    x: [&[BlockQ6K]; 2],
    y: [&[BlockQ8K]; 2],
) -> Tile {
    let (mone, m4b) = (vdupq_n_u8(0x30), vdupq_n_u8(0x0F));
    let mut sum = vdupq_n_f32(0.0);
    for b in 0..x[0].len() {
        let (x0, x1, y0, y1) = (&x[0][b], &x[1][b], &y[0][b], &y[1][b]);
        let mut visum = vdupq_n_s32(0);
        for j in 0..2 {
            // The unsigned 6-bit values 128j + 16k .. + 16 of one row, k = 0..8.
            let vals = |w: &BlockQ6K| -> [int8x16_t; 8] {
                let (h0, h1) = (ld(&w.qh[32 * j..]), ld(&w.qh[32 * j + 16..]));
                let l: [uint8x16_t; 4] = core::array::from_fn(|i| ld(&w.ql[64 * j + 16 * i..]));
                let hs = [
                    vandq_u8(mone, vshlq_n_u8::<4>(h0)),
                    vandq_u8(mone, vshlq_n_u8::<4>(h1)),
                    vandq_u8(mone, vshlq_n_u8::<2>(h0)),
                    vandq_u8(mone, vshlq_n_u8::<2>(h1)),
                    vandq_u8(mone, h0),
                    vandq_u8(mone, h1),
                    vandq_u8(mone, vshrq_n_u8::<2>(h0)),
                    vandq_u8(mone, vshrq_n_u8::<2>(h1)),
                ];
                core::array::from_fn(|k| {
                    let lo = if k < 4 { vandq_u8(l[k], m4b) } else { vshrq_n_u8::<4>(l[k - 4]) };
                    vreinterpretq_s8_u8(vorrq_u8(lo, hs[k]))
                })
            };
            let (v0, v1) = (vals(x0), vals(x1));
            for k in 0..8 {
                let blk = 8 * j + k;
                let o = 16 * blk;
                let (s0, s1) = (x0.scale(blk) as i32, x1.scale(blk) as i32);
                // SAFETY: i8mm is guaranteed by the caller.
                let vr = unsafe {
                    mmla16(vdupq_n_s32(0), v0[k], v1[k], lds(&y0.qs[o..]), lds(&y1.qs[o..]))
                };
                visum = vmlaq_s32(visum, vr, ldi([s0, s0, s1, s1]));
            }
        }
        let bias = |w: &BlockQ6K, yb: &BlockQ8K| -> i32 {
            (0..16).map(|g| yb.bsum(g) as i32 * w.scale(g) as i32).sum()
        };
        let vbias = ldi([bias(x0, y0), bias(x0, y1), bias(x1, y0), bias(x1, y1)]);
        visum = vsubq_s32(visum, vmulq_n_s32(vbias, 32));
        let d = ldf(scales([x0.d(), x1.d()], [y0.d(), y1.d()]));
        sum = if FUSED {
            vfmaq_f32(sum, vcvtq_f32_s32(visum), d)
        } else {
            vaddq_f32(sum, vmulq_f32(vcvtq_f32_s32(visum), d))
        };
    }
    tile_of(sum)
}
