//! ggml's SVE elementwise and attention float kernels (`vec.h`, `vec.cpp`,
//! `simd-mappings.h` under `__ARM_FEATURE_SVE`), natively in SVE assembly: the
//! [`ElemFlavour::Sve128`] and [`ElemFlavour::Sve256`] implementations of [`ElemOps`].
//! Portable twin: `tiercheck_core::elem::portable(ElemFlavour::Sve128)` / `Sve256` (the float
//! order in words is in `tiercheck_core::elem`'s module doc).
//!
//! Reproduced instruction for instruction:
//!
//! - `ggml_v_expf(svbool_t, svfloat32_t)`: `z = r + x*log2e` (`fmla`), `n = z - r`,
//!   `b = (x - n*ln2_hi) - n*ln2_lo` (two `fmls`), `e = z << 23`, `k = e + bits(1.0)`,
//!   `c = |n| > 126` (`facgt`), `u = b*b`, `j = c1*b + ((c2 + c3*b) + (c4 + c5*b)*u)*u`
//!   (`fmul`, three `fmla`), `d = n <= 0 ? 0x82000000 : 0`, `s1 = d + 0x7f000000`,
//!   `s2 = e - d`, and the `sel` of `s1*s1` (`|n| > 192`), `(s2 + s2*j)*s1` (`c`) and
//!   `k + k*j`. `ggml_v_silu`: `x / (1 + expf(0 - x))` (`fdiv`).
//! - `ggml_vec_soft_max_f32`: vectors of the CPU's length to the end, the last one
//!   predicated by `whilelt` (no scalar tail); each vector's `faddv` over its active
//!   lanes widened to f64 and added to the sum.
//! - `ggml_vec_swiglu_f32`: `silu(x) * g` in predicated vectors to the end.
//! - `ggml_vec_dot_f32`: eight accumulators of one vector each over steps of eight
//!   vectors, then whole vectors into the first, then the predicated remainder merged
//!   into the first (`svmla_f32_m`: inactive lanes keep their value); the reduction
//!   `((a0+a1) + (a2+a3)) + ((a4+a5) + (a6+a7))` then `faddv`.
//! - `ggml_vec_dot_f16`: four pairs of accumulators, the even halves of each F16 vector
//!   into one and the odd halves into the other (`fmlalb` / `fmlalt`: widening fused
//!   multiply-adds, exact widening). The values arrive widened to f32, so `ld2w`
//!   de-interleaves them into the same even and odd lanes; vector k of a step goes to
//!   pair `k % 4`; whole vectors after the steps into pair 0; the remainder zero-padded
//!   (the twin's zeros, added in every lane) into pair 0; then
//!   `faddv((lo0+lo1) + (lo2+lo3)) + faddv((hi0+hi1) + (hi2+hi3))`.
//!
//! Every load and store is governed by a predicate no longer than the slice (fixed
//! element counts `vl4` / `vl8`, or `whilelt` against the length); the kernels are only
//! handed out on a CPU with the flavour's vector length. `sgemm_dot` is never called for
//! these flavours (the SVE variants are built without llamafile), so it is the twin's.

use core::arch::asm;

use tiercheck_core::elem::{
    self, ElemFlavour, ElemOps, Loops, EXP_C1, EXP_C2, EXP_C3, EXP_C4, EXP_C5, EXP_LN2_HI,
    EXP_LN2_LO, EXP_LOG2E, EXP_SHIFT,
};

/// The constants of `ggml_v_expf` and `ggml_v_silu`, read by `ld1rw` at byte offsets
/// 4 * index.
static EXP_TABLE: [u32; 16] = [
    EXP_SHIFT.to_bits(),  // 0: 0x1.8p23
    EXP_LOG2E.to_bits(),  // 4
    EXP_LN2_HI.to_bits(), // 8
    EXP_LN2_LO.to_bits(), // 12
    EXP_C1.to_bits(),     // 16
    EXP_C2.to_bits(),     // 20
    EXP_C3.to_bits(),     // 24
    EXP_C4.to_bits(),     // 28
    EXP_C5.to_bits(),     // 32
    0x42FC_0000,          // 36: 126.0
    0x4340_0000,          // 40: 192.0
    0x8200_0000,          // 44
    0x7F00_0000,          // 48
    0x3F80_0000,          // 52: 1.0
    0,
    0,
];

/// `ggml_v_expf` of `z0` into `z12`, over all lanes (`p0`), constants at `x12`. Writes
/// z1-z15 and p2, p3.
macro_rules! expf {
    () => {
        concat!(
            "ld1rw {{z2.s}}, p0/z, [x12]\n",
            "ld1rw {{z3.s}}, p0/z, [x12, #4]\n",
            "mov z4.d, z2.d\n",
            "fmla z4.s, p0/m, z0.s, z3.s\n",
            "fsub z5.s, z4.s, z2.s\n",
            "ld1rw {{z6.s}}, p0/z, [x12, #8]\n",
            "ld1rw {{z7.s}}, p0/z, [x12, #12]\n",
            "mov z8.d, z0.d\n",
            "fmls z8.s, p0/m, z5.s, z6.s\n",
            "fmls z8.s, p0/m, z5.s, z7.s\n",
            "lsl z9.s, z4.s, #23\n",
            "ld1rw {{z10.s}}, p0/z, [x12, #52]\n",
            "add z10.s, z9.s, z10.s\n",
            "ld1rw {{z11.s}}, p0/z, [x12, #36]\n",
            "facgt p2.s, p0/z, z5.s, z11.s\n",
            "fmul z11.s, z8.s, z8.s\n",
            "ld1rw {{z13.s}}, p0/z, [x12, #16]\n",
            "fmul z13.s, z8.s, z13.s\n",
            "ld1rw {{z14.s}}, p0/z, [x12, #20]\n",
            "ld1rw {{z15.s}}, p0/z, [x12, #24]\n",
            "fmla z14.s, p0/m, z15.s, z8.s\n",
            "ld1rw {{z15.s}}, p0/z, [x12, #28]\n",
            "ld1rw {{z1.s}}, p0/z, [x12, #32]\n",
            "fmla z15.s, p0/m, z1.s, z8.s\n",
            "fmla z14.s, p0/m, z15.s, z11.s\n",
            "fmla z13.s, p0/m, z14.s, z11.s\n",
            "fcmle p3.s, p0/z, z5.s, #0.0\n",
            "mov z14.s, #0\n",
            "ld1rw {{z15.s}}, p0/z, [x12, #44]\n",
            "sel z14.s, p3, z15.s, z14.s\n",
            "ld1rw {{z15.s}}, p0/z, [x12, #48]\n",
            "add z15.s, z14.s, z15.s\n",
            "sub z14.s, z9.s, z14.s\n",
            "fmul z1.s, z15.s, z15.s\n",
            "mov z8.d, z14.d\n",
            "fmla z8.s, p0/m, z14.s, z13.s\n",
            "fmul z8.s, z8.s, z15.s\n",
            "mov z12.d, z10.d\n",
            "fmla z12.s, p0/m, z10.s, z13.s\n",
            "sel z12.s, p2, z8.s, z12.s\n",
            "ld1rw {{z9.s}}, p0/z, [x12, #40]\n",
            "facgt p3.s, p0/z, z5.s, z9.s\n",
            "sel z12.s, p3, z1.s, z12.s\n",
        )
    };
}

/// `ggml_vec_soft_max_f32` (module doc).
///
/// # Safety
/// The CPU must support SVE.
#[target_feature(enable = "sve")]
unsafe fn soft_max(y: &mut [f32], x: &[f32], max: f32) -> f64 {
    assert_eq!(y.len(), x.len(), "soft_max: lengths differ");
    let mut sum = 0.0f64;
    // SAFETY: SVE is guaranteed by the caller; loads and stores are governed by
    // `whilelt` against the length, so they stay inside `x` and `y`.
    unsafe {
        asm!(
            "ptrue p0.s",
            "mov x13, #0",
            "mov z17.s, {m:s}",
            "1:",
            "cmp x13, {n}",
            "b.ge 2f",
            "whilelt p1.s, x13, {n}",
            "ld1w {{z0.s}}, p1/z, [{x}, x13, lsl #2]",
            "fsub z0.s, z0.s, z17.s",
            expf!(),
            "st1w {{z12.s}}, p1, [{y}, x13, lsl #2]",
            "faddv s16, p1, z12.s",
            "fcvt d16, s16",
            "fadd {sum:d}, {sum:d}, d16",
            "incw x13",
            "b 1b",
            "2:",
            x = in(reg) x.as_ptr(),
            y = in(reg) y.as_mut_ptr(),
            n = in(reg) x.len(),
            m = in(vreg) max,
            sum = inout(vreg) sum,
            in("x12") EXP_TABLE.as_ptr(),
            out("x13") _,
            out("v0") _, out("v1") _, out("v2") _, out("v3") _, out("v4") _, out("v5") _,
            out("v6") _, out("v7") _, out("v8") _, out("v9") _, out("v10") _, out("v11") _,
            out("v12") _, out("v13") _, out("v14") _, out("v15") _, out("v16") _,
            out("v17") _,
            out("p0") _, out("p1") _, out("p2") _, out("p3") _,
            options(nostack),
        );
    }
    sum
}

/// `ggml_vec_swiglu_f32` (module doc).
///
/// # Safety
/// The CPU must support SVE.
#[target_feature(enable = "sve")]
unsafe fn swiglu(y: &mut [f32], x: &[f32], g: &[f32]) {
    assert!(y.len() == x.len() && x.len() == g.len(), "swiglu: lengths differ");
    // SAFETY: as in `soft_max`.
    unsafe {
        asm!(
            "ptrue p0.s",
            "mov x13, #0",
            "1:",
            "cmp x13, {n}",
            "b.ge 2f",
            "whilelt p1.s, x13, {n}",
            "ld1w {{z22.s}}, p1/z, [{x}, x13, lsl #2]",
            "ld1w {{z20.s}}, p1/z, [{g}, x13, lsl #2]",
            "mov z21.s, #0",
            "fsub z0.s, z21.s, z22.s",
            expf!(),
            "ld1rw {{z21.s}}, p0/z, [x12, #52]",
            "fadd z12.s, z21.s, z12.s",
            "mov z23.d, z22.d",
            "fdiv z23.s, p0/m, z23.s, z12.s",
            "fmul z23.s, z23.s, z20.s",
            "st1w {{z23.s}}, p1, [{y}, x13, lsl #2]",
            "incw x13",
            "b 1b",
            "2:",
            x = in(reg) x.as_ptr(),
            g = in(reg) g.as_ptr(),
            y = in(reg) y.as_mut_ptr(),
            n = in(reg) x.len(),
            in("x12") EXP_TABLE.as_ptr(),
            out("x13") _,
            out("v0") _, out("v1") _, out("v2") _, out("v3") _, out("v4") _, out("v5") _,
            out("v6") _, out("v7") _, out("v8") _, out("v9") _, out("v10") _, out("v11") _,
            out("v12") _, out("v13") _, out("v14") _, out("v15") _, out("v20") _,
            out("v21") _, out("v22") _, out("v23") _,
            out("p0") _, out("p1") _, out("p2") _, out("p3") _,
            options(nostack),
        );
    }
}

/// `ggml_vec_dot_f32` with `W`-float vectors (`$pt` the `ptrue` of W lanes).
macro_rules! dot_f32_asm {
    ($x:expr, $y:expr, $n:expr, $np:expr, $np2:expr, $pt:literal, $w:literal) => {{
        let r: f32;
        // SAFETY: the caller guarantees SVE; whole vectors end at `np2 <= n` and hold W
        // lanes (`$pt`), the remainder is governed by `whilelt` against `n`.
        unsafe {
            asm!(
                $pt,
                "mov z16.s, #0", "mov z17.s, #0", "mov z18.s, #0", "mov z19.s, #0",
                "mov z20.s, #0", "mov z21.s, #0", "mov z22.s, #0", "mov z23.s, #0",
                "mov x13, #0",
                "1:",
                "cmp x13, {np}",
                "b.ge 3f",
                "ld1w {{z0.s}}, p0/z, [{x}, x13, lsl #2]",
                "ld1w {{z1.s}}, p0/z, [{y}, x13, lsl #2]",
                "fmla z16.s, p0/m, z0.s, z1.s",
                concat!("add x13, x13, #", $w),
                "ld1w {{z0.s}}, p0/z, [{x}, x13, lsl #2]",
                "ld1w {{z1.s}}, p0/z, [{y}, x13, lsl #2]",
                "fmla z17.s, p0/m, z0.s, z1.s",
                concat!("add x13, x13, #", $w),
                "ld1w {{z0.s}}, p0/z, [{x}, x13, lsl #2]",
                "ld1w {{z1.s}}, p0/z, [{y}, x13, lsl #2]",
                "fmla z18.s, p0/m, z0.s, z1.s",
                concat!("add x13, x13, #", $w),
                "ld1w {{z0.s}}, p0/z, [{x}, x13, lsl #2]",
                "ld1w {{z1.s}}, p0/z, [{y}, x13, lsl #2]",
                "fmla z19.s, p0/m, z0.s, z1.s",
                concat!("add x13, x13, #", $w),
                "ld1w {{z0.s}}, p0/z, [{x}, x13, lsl #2]",
                "ld1w {{z1.s}}, p0/z, [{y}, x13, lsl #2]",
                "fmla z20.s, p0/m, z0.s, z1.s",
                concat!("add x13, x13, #", $w),
                "ld1w {{z0.s}}, p0/z, [{x}, x13, lsl #2]",
                "ld1w {{z1.s}}, p0/z, [{y}, x13, lsl #2]",
                "fmla z21.s, p0/m, z0.s, z1.s",
                concat!("add x13, x13, #", $w),
                "ld1w {{z0.s}}, p0/z, [{x}, x13, lsl #2]",
                "ld1w {{z1.s}}, p0/z, [{y}, x13, lsl #2]",
                "fmla z22.s, p0/m, z0.s, z1.s",
                concat!("add x13, x13, #", $w),
                "ld1w {{z0.s}}, p0/z, [{x}, x13, lsl #2]",
                "ld1w {{z1.s}}, p0/z, [{y}, x13, lsl #2]",
                "fmla z23.s, p0/m, z0.s, z1.s",
                concat!("add x13, x13, #", $w),
                "b 1b",
                "3:",
                "cmp x13, {np2}",
                "b.ge 4f",
                "ld1w {{z0.s}}, p0/z, [{x}, x13, lsl #2]",
                "ld1w {{z1.s}}, p0/z, [{y}, x13, lsl #2]",
                "fmla z16.s, p0/m, z0.s, z1.s",
                concat!("add x13, x13, #", $w),
                "b 3b",
                "4:",
                "cmp x13, {n}",
                "b.ge 5f",
                "whilelt p1.s, x13, {n}",
                "ld1w {{z0.s}}, p1/z, [{x}, x13, lsl #2]",
                "ld1w {{z1.s}}, p1/z, [{y}, x13, lsl #2]",
                "fmla z16.s, p1/m, z0.s, z1.s",
                "5:",
                "fadd z16.s, z16.s, z17.s",
                "fadd z18.s, z18.s, z19.s",
                "fadd z20.s, z20.s, z21.s",
                "fadd z22.s, z22.s, z23.s",
                "fadd z16.s, z16.s, z18.s",
                "fadd z20.s, z20.s, z22.s",
                "fadd z16.s, z16.s, z20.s",
                "faddv {r:s}, p0, z16.s",
                x = in(reg) $x,
                y = in(reg) $y,
                n = in(reg) $n,
                np = in(reg) $np,
                np2 = in(reg) $np2,
                r = lateout(vreg) r,
                out("x13") _,
                out("v0") _, out("v1") _, out("v16") _, out("v17") _, out("v18") _,
                out("v19") _, out("v20") _, out("v21") _, out("v22") _, out("v23") _,
                out("p0") _, out("p1") _,
                options(readonly, nostack),
            );
        }
        r
    }};
}

/// `ggml_vec_dot_f32` with `W` floats per vector (module doc).
///
/// # Safety
/// The CPU must support SVE.
#[target_feature(enable = "sve")]
unsafe fn dot_f32<const W: usize>(x: &[f32], y: &[f32]) -> f32 {
    assert_eq!(x.len(), y.len(), "dot_f32: lengths differ");
    let n = x.len();
    let (np, np2) = (n - n % (8 * W), n - n % W);
    let (xp, yp) = (x.as_ptr(), y.as_ptr());
    if W == 4 {
        dot_f32_asm!(xp, yp, n, np, np2, "ptrue p0.s, vl4", "4")
    } else {
        assert_eq!(W, 8, "SVE vectors of 4 or 8 floats");
        dot_f32_asm!(xp, yp, n, np, np2, "ptrue p0.s, vl8", "8")
    }
}

/// `ggml_vec_dot_f16` on F16 values widened to f32, `W` f32 lanes per vector.
macro_rules! dot_f16_asm {
    ($x:expr, $y:expr, $np:expr, $np2:expr, $tx:expr, $ty:expr, $tail:expr,
     $pt:literal, $w2:literal) => {{
        let (lo, hi): (f32, f32);
        // SAFETY: the caller guarantees SVE; every `ld2w` reads 2W floats (`$pt` has W
        // structures) of `x`/`y` below `np2 <= n`, or of the 16-float tail buffers.
        unsafe {
            asm!(
                $pt,
                "mov z16.s, #0", "mov z17.s, #0", "mov z18.s, #0", "mov z19.s, #0",
                "mov z20.s, #0", "mov z21.s, #0", "mov z22.s, #0", "mov z23.s, #0",
                "mov x13, #0",
                "1:",
                "cmp x13, {np}",
                "b.ge 3f",
                "ld2w {{z0.s, z1.s}}, p0/z, [{x}, x13, lsl #2]",
                "ld2w {{z2.s, z3.s}}, p0/z, [{y}, x13, lsl #2]",
                "fmla z16.s, p0/m, z0.s, z2.s", "fmla z17.s, p0/m, z1.s, z3.s",
                concat!("add x13, x13, #", $w2),
                "ld2w {{z0.s, z1.s}}, p0/z, [{x}, x13, lsl #2]",
                "ld2w {{z2.s, z3.s}}, p0/z, [{y}, x13, lsl #2]",
                "fmla z18.s, p0/m, z0.s, z2.s", "fmla z19.s, p0/m, z1.s, z3.s",
                concat!("add x13, x13, #", $w2),
                "ld2w {{z0.s, z1.s}}, p0/z, [{x}, x13, lsl #2]",
                "ld2w {{z2.s, z3.s}}, p0/z, [{y}, x13, lsl #2]",
                "fmla z20.s, p0/m, z0.s, z2.s", "fmla z21.s, p0/m, z1.s, z3.s",
                concat!("add x13, x13, #", $w2),
                "ld2w {{z0.s, z1.s}}, p0/z, [{x}, x13, lsl #2]",
                "ld2w {{z2.s, z3.s}}, p0/z, [{y}, x13, lsl #2]",
                "fmla z22.s, p0/m, z0.s, z2.s", "fmla z23.s, p0/m, z1.s, z3.s",
                concat!("add x13, x13, #", $w2),
                "ld2w {{z0.s, z1.s}}, p0/z, [{x}, x13, lsl #2]",
                "ld2w {{z2.s, z3.s}}, p0/z, [{y}, x13, lsl #2]",
                "fmla z16.s, p0/m, z0.s, z2.s", "fmla z17.s, p0/m, z1.s, z3.s",
                concat!("add x13, x13, #", $w2),
                "ld2w {{z0.s, z1.s}}, p0/z, [{x}, x13, lsl #2]",
                "ld2w {{z2.s, z3.s}}, p0/z, [{y}, x13, lsl #2]",
                "fmla z18.s, p0/m, z0.s, z2.s", "fmla z19.s, p0/m, z1.s, z3.s",
                concat!("add x13, x13, #", $w2),
                "ld2w {{z0.s, z1.s}}, p0/z, [{x}, x13, lsl #2]",
                "ld2w {{z2.s, z3.s}}, p0/z, [{y}, x13, lsl #2]",
                "fmla z20.s, p0/m, z0.s, z2.s", "fmla z21.s, p0/m, z1.s, z3.s",
                concat!("add x13, x13, #", $w2),
                "ld2w {{z0.s, z1.s}}, p0/z, [{x}, x13, lsl #2]",
                "ld2w {{z2.s, z3.s}}, p0/z, [{y}, x13, lsl #2]",
                "fmla z22.s, p0/m, z0.s, z2.s", "fmla z23.s, p0/m, z1.s, z3.s",
                concat!("add x13, x13, #", $w2),
                "b 1b",
                "3:",
                "cmp x13, {np2}",
                "b.ge 4f",
                "ld2w {{z0.s, z1.s}}, p0/z, [{x}, x13, lsl #2]",
                "ld2w {{z2.s, z3.s}}, p0/z, [{y}, x13, lsl #2]",
                "fmla z16.s, p0/m, z0.s, z2.s", "fmla z17.s, p0/m, z1.s, z3.s",
                concat!("add x13, x13, #", $w2),
                "b 3b",
                "4:",
                "cbz {tail}, 5f",
                "ld2w {{z0.s, z1.s}}, p0/z, [{tx}]",
                "ld2w {{z2.s, z3.s}}, p0/z, [{ty}]",
                "fmla z16.s, p0/m, z0.s, z2.s", "fmla z17.s, p0/m, z1.s, z3.s",
                "5:",
                "fadd z16.s, z16.s, z18.s",
                "fadd z20.s, z20.s, z22.s",
                "fadd z16.s, z16.s, z20.s",
                "fadd z17.s, z17.s, z19.s",
                "fadd z21.s, z21.s, z23.s",
                "fadd z17.s, z17.s, z21.s",
                "faddv {lo:s}, p0, z16.s",
                "faddv {hi:s}, p0, z17.s",
                x = in(reg) $x,
                y = in(reg) $y,
                np = in(reg) $np,
                np2 = in(reg) $np2,
                tx = in(reg) $tx,
                ty = in(reg) $ty,
                tail = in(reg) $tail,
                lo = lateout(vreg) lo,
                hi = lateout(vreg) hi,
                out("x13") _,
                out("v0") _, out("v1") _, out("v2") _, out("v3") _, out("v16") _,
                out("v17") _, out("v18") _, out("v19") _, out("v20") _, out("v21") _,
                out("v22") _, out("v23") _,
                out("p0") _,
                options(readonly, nostack),
            );
        }
        lo + hi
    }};
}

/// `ggml_vec_dot_f16` with `W` f32 lanes per vector (module doc).
///
/// # Safety
/// The CPU must support SVE.
#[target_feature(enable = "sve")]
unsafe fn dot_f16<const W: usize>(x: &[f32], y: &[f32]) -> f32 {
    assert_eq!(x.len(), y.len(), "dot_f16: lengths differ");
    let n = x.len();
    let (np, np2) = (n - n % (16 * W), n - n % (2 * W));
    let (mut tx, mut ty) = ([0.0f32; 16], [0.0f32; 16]);
    tx[..n - np2].copy_from_slice(&x[np2..]);
    ty[..n - np2].copy_from_slice(&y[np2..]);
    let tail = usize::from(np2 < n);
    let (xp, yp, txp, typ) = (x.as_ptr(), y.as_ptr(), tx.as_ptr(), ty.as_ptr());
    if W == 4 {
        dot_f16_asm!(xp, yp, np, np2, txp, typ, tail, "ptrue p0.s, vl4", "8")
    } else {
        assert_eq!(W, 8, "SVE vectors of 4 or 8 floats");
        dot_f16_asm!(xp, yp, np, np2, txp, typ, tail, "ptrue p0.s, vl8", "16")
    }
}

/// The native SVE elementwise kernels of one vector length. Only [`kernels128()`] /
/// [`kernels256()`] hand one out, on a CPU with SVE at that length.
#[derive(Debug)]
pub struct SveElem {
    flavour: ElemFlavour,
}

static KERNELS128: SveElem = SveElem { flavour: ElemFlavour::Sve128 };
static KERNELS256: SveElem = SveElem { flavour: ElemFlavour::Sve256 };

/// The native [`ElemFlavour::Sve128`] kernels, or why this CPU cannot run them.
pub fn kernels128() -> Result<&'static dyn ElemOps, tiercheck_core::lane::Unavailable> {
    super::check("aarch64-sve128", 128)?;
    Ok(&KERNELS128)
}

/// The native [`ElemFlavour::Sve256`] kernels, or why this CPU cannot run them.
pub fn kernels256() -> Result<&'static dyn ElemOps, tiercheck_core::lane::Unavailable> {
    super::check("aarch64-sve256", 256)?;
    Ok(&KERNELS256)
}

impl ElemOps for SveElem {
    fn flavour(&self) -> ElemFlavour {
        self.flavour
    }

    fn soft_max(&self, y: &mut [f32], x: &[f32], max: f32) -> f64 {
        // SAFETY: an `SveElem` exists only where SVE at its length was detected.
        unsafe { soft_max(y, x, max) }
    }

    fn swiglu(&self, y: &mut [f32], x: &[f32], g: &[f32]) {
        // SAFETY: as above.
        unsafe { swiglu(y, x, g) }
    }

    fn dot_f32(&self, x: &[f32], y: &[f32]) -> f32 {
        // SAFETY: as above.
        unsafe {
            match self.flavour.loops() {
                Loops::Sve128 => dot_f32::<4>(x, y),
                _ => dot_f32::<8>(x, y),
            }
        }
    }

    fn sgemm_dot(&self, a: &[f32], b: &[f32]) -> f32 {
        // Never called for the SVE flavours (no llamafile): the twin's.
        elem::portable(self.flavour).sgemm_dot(a, b)
    }

    fn dot_f16(&self, x: &[f32], y: &[f32]) -> f32 {
        // SAFETY: as above.
        unsafe {
            match self.flavour.loops() {
                Loops::Sve128 => dot_f16::<4>(x, y),
                _ => dot_f16::<8>(x, y),
            }
        }
    }
}
