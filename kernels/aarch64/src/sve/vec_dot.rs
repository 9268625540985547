//! ggml's SVE `nrc == 1` vec_dot kernels for Q4_0, Q8_0 and Q2_K
//! (`ggml_vec_dot_q4_0_q8_0`, `ggml_vec_dot_q8_0_q8_0` in `ggml-cpu/arch/arm/quants.c`,
//! the `case 128` and `case 256` branches under `__ARM_FEATURE_SVE`, and
//! `ggml_vec_dot_q2_K_q8_K`'s SVE branch), natively in SVE assembly. Twin (float
//! order in words): `tiercheck_core::arch::aarch64::sve::vec_dot`, same names.
//!
//! Why assembly: Rust stable has no SVE intrinsics and no SVE register class, so each
//! kernel is one `asm!` block inside a `#[target_feature(enable = "sve")]` function that
//! holds its whole loop. Every vector register it writes is declared clobbered through
//! its NEON name (`v0`..`v31` share their register units with `z0`..`z31`, so the
//! compiler keeps nothing in any part of them across the block) and every predicate
//! register through its own name (`p0`..`p3`). Every load is governed by a predicate
//! with a fixed element count (`ptrue ..., vl16` / `vl32` / `vl4` / `vl8`), so no load
//! reads past a block whatever the CPU's vector length; the kernels are only handed out
//! where the length is the one they model (`super::kernels128` / `super::kernels256`),
//! because on a shorter vector those predicates are empty and on a longer one FADDV's
//! tree would be another.
//!
//! Per block: the integer lanes by `sdot` into zeroed accumulators (exact), `scvtf`,
//! then `fmla acc, lanes, d` with `d = f16(x.d) * f16(y.d)` (`fcvt`, `fmul`) broadcast:
//! the even block of each pair into `z16`, the odd one into `z17`. After the pairs:
//! `fadd z16, z16, z17` and one `faddv` over the 4 (128-bit) or 8 (256-bit) lanes. An odd
//! last block is ggml's scalar tail, in Rust (the twin's).
//!
//! Q2_K: the float side in SVE assembly (4 or 8 float lanes: per superblock two
//! `fmla`, the mins term then the scale term, and one `faddv` at the end), the exact
//! integer lanes it consumes formed with NEON `sdot` and widening multiplies (which lane
//! sums which values is the twin's doc; any exact form gives the same integers).

use core::arch::asm;

use tiercheck_core::arch::aarch64::sve::vec_dot::{q4_0_tail, q8_0_tail};
use tiercheck_core::blocks::{BlockQ2K, BlockQ4_0, BlockQ8K, BlockQ8_0};

use crate::neon::vec_dot::sdot_asm;
use crate::simd::{ld, lds, sti};

/// The pair loop of one kernel: `$block` is the assembly of one block (x at `x9`, y at
/// `x10`) accumulated into `$acc` (`z16` or `z17`); the loop runs `np` pairs from `x`,
/// `y` (blocks of `$xs` and `$ys` bytes) and returns the FADDV of `z16 + z17` governed by
/// `p1`.
macro_rules! pair_loop {
    ($np:expr, $x:expr, $y:expr, $xs:literal, $ys:literal, $ptrue:literal, $block:ident) => {{
        let r: f32;
        // SAFETY: the caller guarantees SVE (and dotprod's SVE form, which is base SVE);
        // the loop reads `np` pairs of blocks from `x` and `y`, which the caller checked
        // are in bounds; every register written is declared below.
        unsafe {
            asm!(
                $ptrue,
                "mov z16.s, #0",
                "mov z17.s, #0",
                "cbz {np}, 2f",
                "1:",
                "mov x9, {x}",
                "mov x10, {y}",
                $block!(z16),
                concat!("add {x}, {x}, #", $xs),
                concat!("add {y}, {y}, #", $ys),
                "mov x9, {x}",
                "mov x10, {y}",
                $block!(z17),
                concat!("add {x}, {x}, #", $xs),
                concat!("add {y}, {y}, #", $ys),
                "subs {np}, {np}, #1",
                "b.ne 1b",
                "2:",
                "fadd z16.s, z16.s, z17.s",
                "faddv {r:s}, p1, z16.s",
                np = inout(reg) $np => _,
                x = inout(reg) $x => _,
                y = inout(reg) $y => _,
                r = out(vreg) r,
                out("x9") _, out("x10") _, out("x11") _,
                out("v0") _, out("v1") _, out("v2") _, out("v3") _, out("v4") _,
                out("v5") _, out("v6") _, out("v16") _, out("v17") _, out("v20") _,
                out("v21") _,
                out("p0") _, out("p1") _, out("p2") _,
                options(readonly, nostack),
            );
        }
        r
    }};
}

/// The scale `f16(x.d) * f16(y.d)` of the block at `x9` / `x10`, broadcast into `z20`.
macro_rules! scale {
    () => {
        concat!(
            "ldr h20, [x9]\n",
            "ldr h21, [x10]\n",
            "fcvt s20, h20\n",
            "fcvt s21, h21\n",
            "fmul s20, s20, s21\n",
            "mov z20.s, s20\n",
        )
    };
}

/// One Q4_0 block at 128 bits (p0: 16 bytes, p1: 4 floats): low nibbles minus 8 against
/// y[0..16], high nibbles minus 8 against y[16..32], the two `sdot`s added lane by lane.
macro_rules! q4_0_block_128 {
    ($acc:ident) => {
        concat!(
            "add x11, x9, #2\n",
            "ld1rqb {{z0.b}}, p0/z, [x11]\n",
            "mov z1.d, z0.d\n",
            "and z1.b, z1.b, #0xf\n",
            "lsr z2.b, z0.b, #4\n",
            "sub z1.b, z1.b, #8\n",
            "sub z2.b, z2.b, #8\n",
            "add x11, x10, #2\n",
            "ld1b {{z3.b}}, p0/z, [x11]\n",
            "add x11, x10, #18\n",
            "ld1b {{z4.b}}, p0/z, [x11]\n",
            "mov z5.s, #0\n",
            "sdot z5.s, z2.b, z4.b\n",
            "mov z6.s, #0\n",
            "sdot z6.s, z1.b, z3.b\n",
            "add z5.s, z5.s, z6.s\n",
            "scvtf z5.s, p1/m, z5.s\n",
            scale!(),
            "fmla ",
            stringify!($acc),
            ".s, p1/m, z5.s, z20.s\n",
        )
    };
}

/// One Q4_0 block at 256 bits (p0: 32 bytes, p1: 8 floats, p2: the low 16 bytes): the
/// 16 packed bytes in both halves, low nibbles in the low half and high nibbles in the
/// high one (ggml's predicated `and` then `lsr`), minus 8, one `sdot` against y[0..32].
macro_rules! q4_0_block_256 {
    ($acc:ident) => {
        concat!(
            "add x11, x9, #2\n",
            "ld1rqb {{z0.b}}, p0/z, [x11]\n",
            "mov z1.d, z0.d\n",
            "and z1.b, z1.b, #0xf\n",
            "lsr z2.b, z0.b, #4\n",
            "sel z1.b, p2, z1.b, z2.b\n",
            "sub z1.b, z1.b, #8\n",
            "add x11, x10, #2\n",
            "ld1b {{z3.b}}, p0/z, [x11]\n",
            "mov z5.s, #0\n",
            "sdot z5.s, z1.b, z3.b\n",
            "scvtf z5.s, p1/m, z5.s\n",
            scale!(),
            "fmla ",
            stringify!($acc),
            ".s, p1/m, z5.s, z20.s\n",
        )
    };
}

/// One Q8_0 block at 128 bits: x[0..16]·y[0..16] and x[16..32]·y[16..32] by `sdot`,
/// added lane by lane.
macro_rules! q8_0_block_128 {
    ($acc:ident) => {
        concat!(
            "add x11, x9, #2\n",
            "ld1b {{z0.b}}, p0/z, [x11]\n",
            "add x11, x9, #18\n",
            "ld1b {{z1.b}}, p0/z, [x11]\n",
            "add x11, x10, #2\n",
            "ld1b {{z2.b}}, p0/z, [x11]\n",
            "add x11, x10, #18\n",
            "ld1b {{z3.b}}, p0/z, [x11]\n",
            "mov z5.s, #0\n",
            "sdot z5.s, z0.b, z2.b\n",
            "mov z6.s, #0\n",
            "sdot z6.s, z1.b, z3.b\n",
            "add z5.s, z5.s, z6.s\n",
            "scvtf z5.s, p1/m, z5.s\n",
            scale!(),
            "fmla ",
            stringify!($acc),
            ".s, p1/m, z5.s, z20.s\n",
        )
    };
}

/// One Q8_0 block at 256 bits: one `sdot` of the 32 values.
macro_rules! q8_0_block_256 {
    ($acc:ident) => {
        concat!(
            "add x11, x9, #2\n",
            "ld1b {{z0.b}}, p0/z, [x11]\n",
            "add x11, x10, #2\n",
            "ld1b {{z2.b}}, p0/z, [x11]\n",
            "mov z5.s, #0\n",
            "sdot z5.s, z0.b, z2.b\n",
            "scvtf z5.s, p1/m, z5.s\n",
            scale!(),
            "fmla ",
            stringify!($acc),
            ".s, p1/m, z5.s, z20.s\n",
        )
    };
}

/// The block count of a (weight, activation) pair (the shorter row's, as the twin).
fn blocks<X, Y>(x: &[X], y: &[Y]) -> usize {
    x.len().min(y.len())
}

/// One `nrc == 1` kernel: the pair loop of `$block` over whole pairs, then ggml's scalar
/// tail (`$tail`) for an odd last block.
macro_rules! kernel {
    ($(#[$doc:meta])* $name:ident, $x:ty, $bits:literal, $xs:literal, $ptrue:literal,
     $block:ident, $tail:ident) => {
        $(#[$doc])*
        ///
        /// # Safety
        #[doc = concat!("The CPU must support SVE with ", $bits, "-bit vectors.")]
        #[target_feature(enable = "sve")]
        pub unsafe fn $name(x: &[$x], y: &[BlockQ8_0]) -> f32 {
            let nb = blocks(x, y);
            let (np, xp, yp) = (nb / 2, x.as_ptr(), y.as_ptr());
            let mut sumf = pair_loop!(np, xp, yp, $xs, "34", $ptrue, $block);
            if nb % 2 == 1 {
                sumf = $tail(&x[nb - 1], &y[nb - 1], sumf);
            }
            sumf
        }
    };
}

kernel!(
    /// `ggml_vec_dot_q4_0_q8_0`, SVE at 128 bits, nrc = 1.
    vec_dot_q4_0_q8_0_sve128, BlockQ4_0, "128", "18",
    "ptrue p0.b, vl16\nptrue p1.s, vl4", q4_0_block_128, q4_0_tail
);
kernel!(
    /// `ggml_vec_dot_q4_0_q8_0`, SVE at 256 bits, nrc = 1.
    vec_dot_q4_0_q8_0_sve256, BlockQ4_0, "256", "18",
    "ptrue p0.b, vl32\nptrue p1.s, vl8\nptrue p2.b, vl16", q4_0_block_256, q4_0_tail
);
kernel!(
    /// `ggml_vec_dot_q8_0_q8_0`, SVE at 128 bits, nrc = 1.
    vec_dot_q8_0_q8_0_sve128, BlockQ8_0, "128", "34",
    "ptrue p0.b, vl16\nptrue p1.s, vl4", q8_0_block_128, q8_0_tail
);
kernel!(
    /// `ggml_vec_dot_q8_0_q8_0`, SVE at 256 bits, nrc = 1.
    vec_dot_q8_0_q8_0_sve256, BlockQ8_0, "256", "34",
    "ptrue p0.b, vl32\nptrue p1.s, vl8", q8_0_block_256, q8_0_tail
);

/// The integer lanes of one Q2_K superblock at `W` float lanes (4 or 8), by NEON:
/// `(mins, sumi)`, lane t of `mins` the sum of `m_s * bsums[s]` over s = t, t + W, ...,
/// lane t of `sumi` the sum of `sc * q * a` over the values i with `(i mod 4W) / 4 == t`
/// (`sdot` of 16-value sub-blocks, each scaled by its 4-bit scale). Exact.
///
/// # Safety
/// The CPU must support NEON and dotprod.
#[target_feature(enable = "neon,dotprod")]
unsafe fn q2_k_lanes<const W: usize>(xb: &BlockQ2K, yb: &BlockQ8K) -> ([i32; 8], [i32; 8]) {
    use core::arch::aarch64::*;
    let sc = ld(&xb.scales);
    let mins = vshrq_n_u8::<4>(sc);
    let m16 = [vmovl_u8(vget_low_u8(mins)), vmovl_u8(vget_high_u8(mins))];
    let b16 = [vreinterpretq_s16_u8(ld(&yb.bsums)), vreinterpretq_s16_u8(ld(&yb.bsums[16..]))];
    // Products of sub-blocks 4v..4v + 4, v = 0..4.
    let prod: [int32x4_t; 4] = core::array::from_fn(|v| {
        let (m, b) = (vreinterpretq_s16_u16(m16[v / 2]), b16[v / 2]);
        if v % 2 == 0 {
            vmull_s16(vget_low_s16(m), vget_low_s16(b))
        } else {
            vmull_s16(vget_high_s16(m), vget_high_s16(b))
        }
    });
    let scales = xb.scales.map(|s| (s & 0xF) as i32);
    let m3 = vdupq_n_u8(3);
    let mut sumi = [vdupq_n_s32(0); 2];
    for (c, &scale) in scales.iter().enumerate() {
        let (j, k, half) = (c / 8, (c % 8) / 2, c % 2);
        let q = vshlq_u8(ld(&xb.qs[32 * j + 16 * half..]), vdupq_n_s8(-2 * k as i8));
        let codes = vreinterpretq_s8_u8(vandq_u8(q, m3));
        // SAFETY: dotprod is guaranteed by the caller.
        let lanes = unsafe { sdot_asm(vdupq_n_s32(0), codes, lds(&yb.qs[16 * c..])) };
        let v = if W == 4 { 0 } else { c % 2 };
        sumi[v] = vmlaq_n_s32(sumi[v], lanes, scale);
    }
    let (mut m_out, mut s_out) = ([0i32; 8], [0i32; 8]);
    let mins4 = if W == 4 {
        [vaddq_s32(vaddq_s32(prod[0], prod[1]), vaddq_s32(prod[2], prod[3])), vdupq_n_s32(0)]
    } else {
        [vaddq_s32(prod[0], prod[2]), vaddq_s32(prod[1], prod[3])]
    };
    for h in 0..2 {
        m_out[4 * h..4 * h + 4].copy_from_slice(&sti(mins4[h]));
        s_out[4 * h..4 * h + 4].copy_from_slice(&sti(sumi[h]));
    }
    (m_out, s_out)
}

/// `acc[t] = fma(float(mins[t]), dmin, acc[t])`, then `acc[t] = fma(float(sumi[t]), d,
/// acc[t])` over the lanes governed by `$ptrue` (SVE `fmla`).
macro_rules! q2_k_step {
    ($ptrue:literal, $acc:expr, $mins:expr, $sumi:expr, $dmin:expr, $d:expr) => {
        // SAFETY: the caller guarantees SVE; the loads and the store cover the first 4 or
        // 8 floats/ints of 8-element arrays; every register written is declared.
        unsafe {
            asm!(
                $ptrue,
                "ld1w {{z16.s}}, p1/z, [{acc}]",
                "ld1w {{z0.s}}, p1/z, [{mins}]",
                "scvtf z0.s, p1/m, z0.s",
                "mov z1.s, {dmin:s}",
                "fmla z16.s, p1/m, z0.s, z1.s",
                "ld1w {{z2.s}}, p1/z, [{sumi}]",
                "scvtf z2.s, p1/m, z2.s",
                "mov z3.s, {d:s}",
                "fmla z16.s, p1/m, z2.s, z3.s",
                "st1w {{z16.s}}, p1, [{acc}]",
                acc = in(reg) $acc.as_mut_ptr(),
                mins = in(reg) $mins.as_ptr(),
                sumi = in(reg) $sumi.as_ptr(),
                dmin = in(vreg) $dmin,
                d = in(vreg) $d,
                out("v0") _, out("v1") _, out("v2") _, out("v3") _, out("v16") _,
                out("p1") _,
                options(nostack),
            );
        }
    };
}

/// FADDV of the lanes of `acc` governed by `$ptrue`.
macro_rules! q2_k_faddv {
    ($ptrue:literal, $acc:expr) => {{
        let r: f32;
        // SAFETY: the caller guarantees SVE; the load covers the first 4 or 8 floats of
        // an 8-float array; every register written is declared.
        unsafe {
            asm!(
                $ptrue,
                "ld1w {{z16.s}}, p1/z, [{acc}]",
                "faddv {r:s}, p1, z16.s",
                acc = in(reg) $acc.as_ptr(),
                r = out(vreg) r,
                out("v16") _,
                out("p1") _,
                options(readonly, nostack),
            );
        }
        r
    }};
}

/// One Q2_K kernel: [`q2_k_lanes`] per superblock (NEON), the fused accumulation and the
/// FADDV in SVE.
macro_rules! q2_k_kernel {
    ($(#[$doc:meta])* $name:ident, $w:literal, $bits:literal, $ptrue:literal) => {
        $(#[$doc])*
        ///
        /// # Safety
        #[doc = concat!("The CPU must support NEON, dotprod and SVE with ", $bits, "-bit vectors.")]
        #[target_feature(enable = "sve,neon,dotprod")]
        pub unsafe fn $name(x: &[BlockQ2K], y: &[BlockQ8K]) -> f32 {
            let mut acc = [0.0f32; 8];
            for (xb, yb) in x.iter().zip(y) {
                let d = yb.d() * xb.d();
                let dmin = -yb.d() * xb.dmin();
                // SAFETY: NEON and dotprod are guaranteed by the caller.
                let (mins, sumi) = unsafe { q2_k_lanes::<$w>(xb, yb) };
                q2_k_step!($ptrue, acc, mins, sumi, dmin, d);
            }
            q2_k_faddv!($ptrue, acc)
        }
    };
}

q2_k_kernel!(
    /// `ggml_vec_dot_q2_K_q8_K`, SVE at 128 bits: four float lanes.
    vec_dot_q2_k_q8_k_sve128, 4, "128", "ptrue p1.s, vl4"
);
q2_k_kernel!(
    /// `ggml_vec_dot_q2_K_q8_K`, SVE at 256 bits: eight float lanes.
    vec_dot_q2_k_q8_k_sve256, 8, "256", "ptrue p1.s, vl8"
);
