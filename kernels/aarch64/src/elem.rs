//! ggml's aarch64 (NEON, fused multiply-adds) elementwise and attention float kernels,
//! natively: the [`ElemFlavour::Neon`] implementation of [`ElemOps`]. Portable twin:
//! `tiercheck_core::elem::portable(ElemFlavour::Neon)` (its module doc gives the float order in words).
//!
//! Reproduced, intrinsic for intrinsic (`ggml/src/ggml-cpu`, GCC build without SVE):
//!
//! - `ggml_v_expf(float32x4_t)` and `ggml_v_silu(float32x4_t)` (`vec.h`, the
//!   `__ARM_NEON && __aarch64__` branch): `z = vfmaq(0x1.8p23, x, log2e)`,
//!   `n = z - 0x1.8p23`, `b = vfmsq(vfmsq(x, n, ln2_hi), n, ln2_lo)`, `e = z << 23`,
//!   `k = e + bits(1.0)`, `c = |n| > 126` (`vcagtq`), `u = b*b`,
//!   `j = vfmaq(c1*b, vfmaq(vfmaq(c2, c3, b), vfmaq(c4, c5, b), u), u)`; when no lane has
//!   `c` (`vpaddd_u64`) the result is `vfmaq(k, j, k)`, else `vbslq` of `s1*s1`
//!   (`|n| > 192`), `vfmaq(s2, s2, j)*s1` (`c`) and `vfmaq(k, k, j)`, with
//!   `d = vclezq(n) & 0x82000000`, `s1 = d + 0x7f000000`, `s2 = e - d`; silu is
//!   `x / (1 + expf(0 - x))` (`vdivq_f32`).
//! - `ggml_vec_soft_max_f32` (`vec.cpp`): four floats at a time, `expf(x - max)`, each
//!   vector summed by `vaddvq_f32` (`(v0+v1)+(v2+v3)`) and added to the f64 sum; the tail
//!   with the C library's `expf` (Rust's `f32::exp`).
//! - `ggml_vec_swiglu_f32` (`vec.cpp`): `vmulq(silu(x), g)` four at a time, the tail with
//!   the scalar `ggml_silu_f32` ([`elem::silu_scalar`]).
//! - `ggml_vec_dot_f32` (`vec.cpp`, `GGML_SIMD` with `GGML_F32_STEP` 16 and
//!   `GGML_F32_EPR` 4, `simd-mappings.h`): four accumulators
//!   `sum[j] = vfmaq_f32(sum[j], x, y)`, `GGML_F32x4_REDUCE` (`sum0 += sum2`,
//!   `sum1 += sum3`, `sum0 += sum1`, `vaddvq_f32`), then the leftovers
//!   `sumf += x[i]*y[i]` one fused product at a time (GCC contracts that line).
//! - llamafile's tinyBLAS `<4, float32x4_t>` (`llamafile/sgemm.cpp`): one output is one
//!   accumulator `madd(a, b, c) = vfmaq_f32(c, b, a)` over the row, then
//!   `hsum = vaddvq_f32`.
//!
//! Rust never contracts `a*b + c`, so each rounding here is the intrinsic's. Only
//! [`kernels()`] hands out a [`NeonElem`], after checking for NEON (every aarch64 CPU
//! Rust targets has it, and with it the vector FMA).

use core::arch::aarch64::*;

use tiercheck_core::elem::{
    self, ElemFlavour, ElemOps, EXP_C1, EXP_C2, EXP_C3, EXP_C4, EXP_C5, EXP_LN2_HI, EXP_LN2_LO,
    EXP_LOG2E, EXP_SHIFT,
};

/// The native aarch64 elementwise kernels. Only [`kernels()`] hands one out, and only
/// where the CPU has NEON, so holding one proves the instructions legal.
/// The same loops serve [`ElemFlavour::Neon`] and [`ElemFlavour::NeonNoLlamafile`]
/// (which differ only in whether the decoder calls the tinyBLAS dot).
#[derive(Debug)]
pub struct NeonElem {
    flavour: ElemFlavour,
}

static KERNELS: NeonElem = NeonElem { flavour: ElemFlavour::Neon };
static NATIVE_NO_LLAMAFILE: NeonElem = NeonElem { flavour: ElemFlavour::NeonNoLlamafile };

/// The native [`ElemFlavour::Neon`] kernels, or the CPU features this CPU lacks.
pub fn kernels() -> Result<&'static dyn ElemOps, tiercheck_core::lane::Unavailable> {
    crate::neon::FEATURES.check()?;
    Ok(&KERNELS)
}

/// The native [`ElemFlavour::NeonNoLlamafile`] kernels (the NEON loops), or the CPU
/// features this CPU lacks.
pub fn kernels_no_llamafile() -> Result<&'static dyn ElemOps, tiercheck_core::lane::Unavailable> {
    crate::neon::FEATURES.check()?;
    Ok(&NATIVE_NO_LLAMAFILE)
}

impl ElemOps for NeonElem {
    fn flavour(&self) -> ElemFlavour {
        self.flavour
    }

    fn soft_max(&self, y: &mut [f32], x: &[f32], max: f32) -> f64 {
        // SAFETY: a `NeonElem` exists only when NEON was detected.
        unsafe { soft_max(y, x, max) }
    }

    fn swiglu(&self, y: &mut [f32], x: &[f32], g: &[f32]) {
        // SAFETY: a `NeonElem` exists only when NEON was detected.
        unsafe { swiglu(y, x, g) }
    }

    fn dot_f32(&self, x: &[f32], y: &[f32]) -> f32 {
        // SAFETY: a `NeonElem` exists only when NEON was detected.
        unsafe { dot_f32(x, y) }
    }

    fn sgemm_dot(&self, a: &[f32], b: &[f32]) -> f32 {
        // SAFETY: a `NeonElem` exists only when NEON was detected.
        unsafe { sgemm_dot(a, b) }
    }
}

/// Load four floats from a chunk of exactly four.
#[inline]
#[target_feature(enable = "neon")]
fn load4(p: &[f32]) -> float32x4_t {
    assert_eq!(p.len(), 4);
    // SAFETY: four readable floats (asserted); `vld1q_f32` needs no alignment.
    unsafe { vld1q_f32(p.as_ptr()) }
}

/// Store four floats into a chunk of exactly four.
#[inline]
#[target_feature(enable = "neon")]
fn store4(p: &mut [f32], v: float32x4_t) {
    assert_eq!(p.len(), 4);
    // SAFETY: four writable floats (asserted); `vst1q_f32` needs no alignment.
    unsafe { vst1q_f32(p.as_mut_ptr(), v) }
}

/// `ggml_v_expf(float32x4_t)`, the `__ARM_NEON && __aarch64__` branch of `vec.h`.
///
/// # Safety
/// Safe to call from code compiled with the same target features; from anywhere else
/// (an `unsafe` call) the CPU must support NEON.
#[inline]
#[target_feature(enable = "neon")]
pub fn v_expf(x: float32x4_t) -> float32x4_t {
    let r = vdupq_n_f32(EXP_SHIFT);
    let z = vfmaq_f32(r, x, vdupq_n_f32(EXP_LOG2E));
    let n = vsubq_f32(z, r);
    let b = vfmsq_f32(vfmsq_f32(x, n, vdupq_n_f32(EXP_LN2_HI)), n, vdupq_n_f32(EXP_LN2_LO));
    let e = vshlq_n_u32::<23>(vreinterpretq_u32_f32(z));
    let k = vreinterpretq_f32_u32(vaddq_u32(e, vreinterpretq_u32_f32(vdupq_n_f32(1.0))));
    let c = vcagtq_f32(n, vdupq_n_f32(126.0));
    let u = vmulq_f32(b, b);
    let j = vfmaq_f32(
        vmulq_f32(vdupq_n_f32(EXP_C1), b),
        vfmaq_f32(
            vfmaq_f32(vdupq_n_f32(EXP_C2), vdupq_n_f32(EXP_C3), b),
            vfmaq_f32(vdupq_n_f32(EXP_C4), vdupq_n_f32(EXP_C5), b),
            u,
        ),
        u,
    );
    if vpaddd_u64(vreinterpretq_u64_u32(c)) == 0 {
        return vfmaq_f32(k, j, k);
    }
    let d = vandq_u32(vclezq_f32(n), vdupq_n_u32(0x8200_0000));
    let s1 = vreinterpretq_f32_u32(vaddq_u32(d, vdupq_n_u32(0x7f00_0000)));
    let s2 = vreinterpretq_f32_u32(vsubq_u32(e, d));
    vbslq_f32(
        vcagtq_f32(n, vdupq_n_f32(192.0)),
        vmulq_f32(s1, s1),
        vbslq_f32(c, vmulq_f32(vfmaq_f32(s2, s2, j), s1), vfmaq_f32(k, k, j)),
    )
}

/// `ggml_v_silu(float32x4_t)`: `x / (1 + ggml_v_expf(0 - x))`.
///
/// # Safety
/// Safe to call from code compiled with the same target features; from anywhere else
/// (an `unsafe` call) the CPU must support NEON.
#[inline]
#[target_feature(enable = "neon")]
pub fn v_silu(x: float32x4_t) -> float32x4_t {
    let one = vdupq_n_f32(1.0);
    let zero = vdupq_n_f32(0.0);
    let neg_x = vsubq_f32(zero, x);
    let exp_neg_x = v_expf(neg_x);
    let one_plus_exp_neg_x = vaddq_f32(one, exp_neg_x);
    vdivq_f32(x, one_plus_exp_neg_x)
}

/// `ggml_vec_soft_max_f32`, NEON path: `y[i] = expf(x[i] - max)`, returning the f64 sum.
///
/// # Safety
/// The CPU must support NEON.
#[target_feature(enable = "neon")]
pub unsafe fn soft_max(y: &mut [f32], x: &[f32], max: f32) -> f64 {
    assert_eq!(y.len(), x.len(), "soft_max: lengths differ");
    let vmax = vdupq_n_f32(max);
    let mut sum = 0.0f64;
    let mut yc = y.chunks_exact_mut(4);
    let mut xc = x.chunks_exact(4);
    for (yv, xv) in (&mut yc).zip(&mut xc) {
        let val = v_expf(vsubq_f32(load4(xv), vmax));
        store4(yv, val);
        sum += vaddvq_f32(val) as f64;
    }
    for (yi, &xi) in yc.into_remainder().iter_mut().zip(xc.remainder()) {
        let val = (xi - max).exp();
        sum += val as f64;
        *yi = val;
    }
    sum
}

/// `ggml_vec_swiglu_f32`, NEON path: `y[i] = silu(x[i]) * g[i]`.
///
/// # Safety
/// The CPU must support NEON.
#[target_feature(enable = "neon")]
pub unsafe fn swiglu(y: &mut [f32], x: &[f32], g: &[f32]) {
    assert!(y.len() == x.len() && x.len() == g.len(), "swiglu: lengths differ");
    let mut yc = y.chunks_exact_mut(4);
    let mut xc = x.chunks_exact(4);
    let mut gc = g.chunks_exact(4);
    for ((yv, xv), gv) in (&mut yc).zip(&mut xc).zip(&mut gc) {
        store4(yv, vmulq_f32(v_silu(load4(xv)), load4(gv)));
    }
    for ((yi, &xi), &gi) in yc.into_remainder().iter_mut().zip(xc.remainder()).zip(gc.remainder()) {
        *yi = elem::silu_scalar(xi) * gi;
    }
}

/// `ggml_vec_dot_f32` on aarch64 (`GGML_F32_STEP` 16, `GGML_F32_EPR` 4, four
/// accumulators, `GGML_F32x4_REDUCE`, fused leftovers).
///
/// # Safety
/// The CPU must support NEON.
#[target_feature(enable = "neon")]
pub unsafe fn dot_f32(x: &[f32], y: &[f32]) -> f32 {
    assert_eq!(x.len(), y.len(), "dot_f32: lengths differ");
    let mut sum = [vdupq_n_f32(0.0); 4];
    let mut xs = x.chunks_exact(16);
    let mut ys = y.chunks_exact(16);
    for (xv, yv) in (&mut xs).zip(&mut ys) {
        for j in 0..4 {
            let ax = load4(&xv[j * 4..j * 4 + 4]);
            let ay = load4(&yv[j * 4..j * 4 + 4]);
            // GGML_F32x4_FMA(a, b, c) = vfmaq_f32(a, b, c)
            sum[j] = vfmaq_f32(sum[j], ax, ay);
        }
    }
    // GGML_F32x4_REDUCE with GGML_F32_ARR = 4.
    sum[0] = vaddq_f32(sum[0], sum[2]);
    sum[1] = vaddq_f32(sum[1], sum[3]);
    sum[0] = vaddq_f32(sum[0], sum[1]);
    let mut sumf = vaddvq_f32(sum[0]);
    // Leftovers: `sumf += x[i]*y[i]`, contracted by GCC.
    for (&a, &b) in xs.remainder().iter().zip(ys.remainder()) {
        sumf = a.mul_add(b, sumf);
    }
    sumf
}

/// One output of llamafile's tinyBLAS `<4, float32x4_t>` f32 tile:
/// `Cv = vfmaq_f32(Cv, Bv, Av)` over the row, then `vaddvq_f32`. The length must be a
/// multiple of 4.
///
/// # Safety
/// The CPU must support NEON.
#[target_feature(enable = "neon")]
pub unsafe fn sgemm_dot(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "sgemm_dot: lengths differ");
    assert!(a.len().is_multiple_of(4), "sgemm_dot: length not a multiple of 4");
    let mut acc = vdupq_n_f32(0.0);
    for (av, bv) in a.chunks_exact(4).zip(b.chunks_exact(4)) {
        acc = vfmaq_f32(acc, load4(bv), load4(av));
    }
    vaddvq_f32(acc)
}
