//! ggml's SVE `nrc == 1` vec_dot kernels for Q4_0 and Q8_0 (`ggml_vec_dot_q4_0_q8_0`,
//! `ggml_vec_dot_q8_0_q8_0` in `ggml-cpu/arch/arm/quants.c`, the `case 128` and
//! `case 256` branches under `__ARM_FEATURE_SVE`), natively in SVE assembly. Twin (float
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

use core::arch::asm;

use tiercheck_core::arch::aarch64::sve::vec_dot::{q4_0_tail, q8_0_tail};
use tiercheck_core::blocks::{BlockQ4_0, BlockQ8_0};

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
