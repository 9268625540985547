//! ggml's haswell-tier (AVX2 + FMA) elementwise and attention float kernels, natively:
//! the [`ElemFlavour::Avx2`] implementation of [`ElemOps`]. Portable twin:
//! `tiercheck_core::elem::portable(ElemFlavour::Avx2)` (its module doc gives the float order in words).
//!
//! Reproduced, intrinsic for intrinsic (`ggml/src/ggml-cpu`):
//!
//! - `ggml_v_expf(__m256)` and `ggml_v_silu(__m256)` (`vec.h`, the `__AVX2__ && __FMA__`
//!   branch): `z = fmadd(x, log2e, 0x1.8p23)`, `n = z - 0x1.8p23`,
//!   `b = fnmadd(n, ln2_lo, fnmadd(n, ln2_hi, x))`, `e = z << 23`, `k = e + bits(1.0)`,
//!   `u = b*b`, `j = fmadd(fmadd(fmadd(c5, b, c4), u, fmadd(c3, b, c2)), u, c1*b)`; when
//!   no lane has `|n| > 126` the result is `fmadd(j, k, k)`, else the blend of
//!   `s1*s1` (`|n| > 192`), `fmadd(s2, j, s2)*s1` (`|n| > 126`) and `fmadd(k, j, k)`;
//!   silu is `x / (1 + expf(0 - x))`.
//! - `ggml_vec_soft_max_f32` (`vec.cpp`): eight floats at a time, `expf(x - max)`, the
//!   vector summed as `hi128 + lo128`, `movehl`, `movehdup` (`add_ss`), i.e.
//!   `((v0+v4)+(v2+v6))+((v1+v5)+(v3+v7))`, then added to the f64 sum; the tail with the
//!   C library's `expf` (Rust's `f32::exp`), each value added to the f64 sum.
//! - `ggml_vec_swiglu_f32` (`vec.cpp`): `silu(x) * g` eight at a time, the tail with the
//!   scalar `ggml_silu_f32` ([`elem::silu_scalar`]).
//! - `ggml_vec_dot_f32` (`vec.cpp`, `GGML_SIMD` with `GGML_F32_STEP` 32 and
//!   `GGML_F32_EPR` 8, `simd-mappings.h`): four accumulators
//!   `sum[j] = fmadd(x, y, sum[j])`, reduced as `GGML_F32x8_REDUCE` does
//!   (`sum0 += sum2`, `sum1 += sum3`, `sum0 += sum1`, low + high 128-bit halves, two
//!   `_mm_hadd_ps`), then the leftovers `sumf += x[i]*y[i]` one fused product at a time
//!   (GCC contracts that line on this tier).
//! - llamafile's tinyBLAS `<8, __m256>` (`llamafile/sgemm.cpp`): one output is one
//!   accumulator `madd(a, b, c) = _mm256_fmadd_ps(a, b, c)` over the row, then
//!   `hsum(__m256)` (the same horizontal sum as the softmax).
//!
//! Rust never contracts `a*b + c`, so each rounding here is the intrinsic's. The kernels
//! are `#[target_feature(enable = "avx2,fma")]`; only [`kernels()`] hands out an
//! [`Avx2Elem`], and only where the CPU has AVX2 and FMA, so safe code can reach them
//! only through a CPU check.

use core::arch::x86_64::*;

use tiercheck_core::elem::{
    self, ElemFlavour, ElemOps, EXP_C1, EXP_C2, EXP_C3, EXP_C4, EXP_C5, EXP_LN2_HI, EXP_LN2_LO,
    EXP_LOG2E, EXP_SHIFT,
};

use tiercheck_core::detect::FeatureSet;
use tiercheck_core::lane::Unavailable;

/// AVX2 and FMA, detected once.
static FEATURES: FeatureSet = FeatureSet::new(&["avx2", "fma"]);

/// Whether this CPU has AVX2 and FMA (detected once).
pub fn is_available() -> bool {
    FEATURES.available()
}

/// The native haswell-tier elementwise kernels. Only [`kernels()`] hands one out, and
/// only where the CPU has AVX2 and FMA, so holding one proves the instructions legal.
#[derive(Debug)]
pub struct Avx2Elem {
    _proof: (),
}

static KERNELS: Avx2Elem = Avx2Elem { _proof: () };

/// The native [`ElemFlavour::Avx2`] kernels, or the CPU features this CPU lacks.
pub fn kernels() -> Result<&'static dyn ElemOps, Unavailable> {
    FEATURES.check()?;
    Ok(&KERNELS)
}

impl ElemOps for Avx2Elem {
    fn flavour(&self) -> ElemFlavour {
        ElemFlavour::Avx2
    }

    fn soft_max(&self, y: &mut [f32], x: &[f32], max: f32) -> f64 {
        // SAFETY: an `Avx2Elem` exists only when `is_available()` held.
        unsafe { soft_max(y, x, max) }
    }

    fn swiglu(&self, y: &mut [f32], x: &[f32], g: &[f32]) {
        // SAFETY: an `Avx2Elem` exists only when `is_available()` held.
        unsafe { swiglu(y, x, g) }
    }

    fn dot_f32(&self, x: &[f32], y: &[f32]) -> f32 {
        // SAFETY: an `Avx2Elem` exists only when `is_available()` held.
        unsafe { dot_f32(x, y) }
    }

    fn sgemm_dot(&self, a: &[f32], b: &[f32]) -> f32 {
        // SAFETY: an `Avx2Elem` exists only when `is_available()` held.
        unsafe { sgemm_dot(a, b) }
    }
}

/// Load eight floats from a chunk of exactly eight.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn load8(p: &[f32]) -> __m256 {
    assert_eq!(p.len(), 8);
    // SAFETY: eight readable floats (asserted); the load is unaligned.
    unsafe { _mm256_loadu_ps(p.as_ptr()) }
}

/// Store eight floats into a chunk of exactly eight.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn store8(p: &mut [f32], v: __m256) {
    assert_eq!(p.len(), 8);
    // SAFETY: eight writable floats (asserted); the store is unaligned.
    unsafe { _mm256_storeu_ps(p.as_mut_ptr(), v) }
}

/// `ggml_v_expf(__m256)`, the `__AVX2__ && __FMA__` branch of `vec.h`.
///
/// # Safety
/// Safe to call from code compiled with the same target features; from anywhere else
/// (an `unsafe` call) the CPU must support AVX2 and FMA.
#[inline]
#[target_feature(enable = "avx2,fma")]
pub fn v_expf(x: __m256) -> __m256 {
    let r = _mm256_set1_ps(EXP_SHIFT);
    let z = _mm256_fmadd_ps(x, _mm256_set1_ps(EXP_LOG2E), r);
    let n = _mm256_sub_ps(z, r);
    let b = _mm256_fnmadd_ps(
        n,
        _mm256_set1_ps(EXP_LN2_LO),
        _mm256_fnmadd_ps(n, _mm256_set1_ps(EXP_LN2_HI), x),
    );
    let e = _mm256_slli_epi32::<23>(_mm256_castps_si256(z));
    let k = _mm256_castsi256_ps(_mm256_add_epi32(e, _mm256_castps_si256(_mm256_set1_ps(1.0))));
    let c = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_GT_OQ>(
        _mm256_andnot_ps(_mm256_set1_ps(-0.0), n),
        _mm256_set1_ps(126.0),
    ));
    let u = _mm256_mul_ps(b, b);
    let j = _mm256_fmadd_ps(
        _mm256_fmadd_ps(
            _mm256_fmadd_ps(_mm256_set1_ps(EXP_C5), b, _mm256_set1_ps(EXP_C4)),
            u,
            _mm256_fmadd_ps(_mm256_set1_ps(EXP_C3), b, _mm256_set1_ps(EXP_C2)),
        ),
        u,
        _mm256_mul_ps(_mm256_set1_ps(EXP_C1), b),
    );
    if _mm256_movemask_ps(_mm256_castsi256_ps(c)) == 0 {
        return _mm256_fmadd_ps(j, k, k);
    }
    let g = _mm256_and_si256(
        _mm256_castps_si256(_mm256_cmp_ps::<_CMP_LE_OQ>(n, _mm256_setzero_ps())),
        _mm256_set1_epi32(0x8200_0000u32 as i32),
    );
    let s1 = _mm256_castsi256_ps(_mm256_add_epi32(g, _mm256_set1_epi32(0x7f00_0000)));
    let s2 = _mm256_castsi256_ps(_mm256_sub_epi32(e, g));
    let d = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_GT_OQ>(
        _mm256_andnot_ps(_mm256_set1_ps(-0.0), n),
        _mm256_set1_ps(192.0),
    ));
    _mm256_or_ps(
        _mm256_and_ps(_mm256_castsi256_ps(d), _mm256_mul_ps(s1, s1)),
        _mm256_andnot_ps(
            _mm256_castsi256_ps(d),
            _mm256_or_ps(
                _mm256_and_ps(
                    _mm256_castsi256_ps(c),
                    _mm256_mul_ps(_mm256_fmadd_ps(s2, j, s2), s1),
                ),
                _mm256_andnot_ps(_mm256_castsi256_ps(c), _mm256_fmadd_ps(k, j, k)),
            ),
        ),
    )
}

/// `ggml_v_silu(__m256)`: `x / (1 + ggml_v_expf(0 - x))`.
///
/// # Safety
/// Safe to call from code compiled with the same target features; from anywhere else
/// (an `unsafe` call) the CPU must support AVX2 and FMA.
#[inline]
#[target_feature(enable = "avx2,fma")]
pub fn v_silu(x: __m256) -> __m256 {
    let one = _mm256_set1_ps(1.0);
    let zero = _mm256_setzero_ps();
    let neg_x = _mm256_sub_ps(zero, x);
    let exp_neg_x = v_expf(neg_x);
    let one_plus_exp_neg_x = _mm256_add_ps(one, exp_neg_x);
    _mm256_div_ps(x, one_plus_exp_neg_x)
}

/// The 8-float horizontal sum of `ggml_vec_soft_max_f32` and of tinyBLAS's
/// `hsum(__m256)`: high + low halves, then `movehl`, then `movehdup` with `add_ss`.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn hsum8(v: __m256) -> f32 {
    let mut x = _mm_add_ps(_mm256_extractf128_ps::<1>(v), _mm256_castps256_ps128(v));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    _mm_cvtss_f32(x)
}

/// `ggml_vec_soft_max_f32`, AVX2 path: `y[i] = expf(x[i] - max)`, returning the f64 sum.
///
/// # Safety
/// The CPU must support AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub unsafe fn soft_max(y: &mut [f32], x: &[f32], max: f32) -> f64 {
    assert_eq!(y.len(), x.len(), "soft_max: lengths differ");
    let vmax = _mm256_set1_ps(max);
    let mut sum = 0.0f64;
    let mut yc = y.chunks_exact_mut(8);
    let mut xc = x.chunks_exact(8);
    for (yv, xv) in (&mut yc).zip(&mut xc) {
        let val = v_expf(_mm256_sub_ps(load8(xv), vmax));
        store8(yv, val);
        sum += hsum8(val) as f64;
    }
    for (yi, &xi) in yc.into_remainder().iter_mut().zip(xc.remainder()) {
        let val = (xi - max).exp();
        sum += val as f64;
        *yi = val;
    }
    sum
}

/// `ggml_vec_swiglu_f32`, AVX2 path: `y[i] = silu(x[i]) * g[i]`.
///
/// # Safety
/// The CPU must support AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub unsafe fn swiglu(y: &mut [f32], x: &[f32], g: &[f32]) {
    assert!(y.len() == x.len() && x.len() == g.len(), "swiglu: lengths differ");
    let mut yc = y.chunks_exact_mut(8);
    let mut xc = x.chunks_exact(8);
    let mut gc = g.chunks_exact(8);
    for ((yv, xv), gv) in (&mut yc).zip(&mut xc).zip(&mut gc) {
        store8(yv, _mm256_mul_ps(v_silu(load8(xv)), load8(gv)));
    }
    for ((yi, &xi), &gi) in yc.into_remainder().iter_mut().zip(xc.remainder()).zip(gc.remainder()) {
        *yi = elem::silu_scalar(xi) * gi;
    }
}

/// `ggml_vec_dot_f32` on the haswell tier (`GGML_F32_STEP` 32, `GGML_F32_EPR` 8, four
/// accumulators, `GGML_F32x8_REDUCE`, fused leftovers).
///
/// # Safety
/// The CPU must support AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub unsafe fn dot_f32(x: &[f32], y: &[f32]) -> f32 {
    assert_eq!(x.len(), y.len(), "dot_f32: lengths differ");
    let mut sum = [_mm256_setzero_ps(); 4];
    let mut xs = x.chunks_exact(32);
    let mut ys = y.chunks_exact(32);
    for (xv, yv) in (&mut xs).zip(&mut ys) {
        for j in 0..4 {
            let ax = load8(&xv[j * 8..j * 8 + 8]);
            let ay = load8(&yv[j * 8..j * 8 + 8]);
            // GGML_F32x8_FMA(a, b, c) = _mm256_fmadd_ps(b, c, a)
            sum[j] = _mm256_fmadd_ps(ax, ay, sum[j]);
        }
    }
    // GGML_F32x8_REDUCE with GGML_F32_ARR = 4.
    sum[0] = _mm256_add_ps(sum[0], sum[2]);
    sum[1] = _mm256_add_ps(sum[1], sum[3]);
    sum[0] = _mm256_add_ps(sum[0], sum[1]);
    let t0 = _mm_add_ps(_mm256_castps256_ps128(sum[0]), _mm256_extractf128_ps::<1>(sum[0]));
    let t1 = _mm_hadd_ps(t0, t0);
    let mut sumf = _mm_cvtss_f32(_mm_hadd_ps(t1, t1));
    // Leftovers: `sumf += x[i]*y[i]`, contracted by GCC.
    for (&a, &b) in xs.remainder().iter().zip(ys.remainder()) {
        sumf = a.mul_add(b, sumf);
    }
    sumf
}

/// One output of llamafile's tinyBLAS `<8, __m256>` f32 tile: `Cv = madd(Av, Bv, Cv)`
/// over the row, then `hsum(Cv)`. The length must be a multiple of 8.
///
/// # Safety
/// The CPU must support AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub unsafe fn sgemm_dot(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "sgemm_dot: lengths differ");
    assert!(a.len().is_multiple_of(8), "sgemm_dot: length not a multiple of 8");
    let mut acc = _mm256_setzero_ps();
    for (av, bv) in a.chunks_exact(8).zip(b.chunks_exact(8)) {
        acc = _mm256_fmadd_ps(load8(av), load8(bv), acc);
    }
    hsum8(acc)
}
