//! ggml's AVX-512 elementwise and attention float kernels (the zen4 variant's
//! `__AVX512F__ && __AVX512DQ__` branches), natively: the [`ElemFlavour::Avx512`]
//! implementation of [`ElemOps`]. Portable twin:
//! `tiercheck_core::elem::portable(ElemFlavour::Avx512)` (its module doc gives the float order in words).
//!
//! Reproduced, intrinsic for intrinsic (`ggml/src/ggml-cpu`):
//!
//! - `ggml_v_expf(__m512)` (`vec.h`): `z = fmadd(x, log2e, 0x1.8p23)`, `n = z - 0x1.8p23`,
//!   `b = fnmadd(n, ln2_lo, fnmadd(n, ln2_hi, x))`, `d = |n| > 192`, `u = b*b`,
//!   `j = fmadd(fmadd(fmadd(c5, b, c4), u, fmadd(c3, b, c2)), u, fmadd(c1, b, 1))`,
//!   `scalef(j, n)`, and where `d`: `0` for `n <= 0`, else `inf`; `ggml_v_silu(__m512)`
//!   is `x / (1 + expf(0 - x))`.
//! - `ggml_vec_soft_max_f32` (`vec.cpp`): sixteen floats at a time, the vector summed by
//!   GCC's `_mm512_reduce_add_ps` (`avx512fintrin.h`: high 256 + low 256, high 128 + low
//!   128, lanes `(0+2)` and `(1+3)`, then those two) and added to the f64 sum; the tail
//!   with the C library's `expf`.
//! - `ggml_vec_swiglu_f32`: `silu(x) * g` sixteen at a time, the scalar tail.
//! - `ggml_vec_dot_f32` (`GGML_F32_STEP` 64, `GGML_F32_EPR` 16): four accumulators
//!   `sum[j] = fmadd(x, y, sum[j])`, `GGML_F32x16_REDUCE` (`sum0 += sum2`, `sum1 += sum3`,
//!   `sum0 += sum1`, the reduction above), then the leftovers one fused product at a time.
//! - llamafile's tinyBLAS `<16, __m512>`: one accumulator `fmadd(a, b, c)` per output,
//!   then `hsum(__m512)`, which is `_mm512_reduce_add_ps`.
//!
//! The horizontal sum is written out lane by lane as GCC's header does it (Rust's own
//! `_mm512_reduce_add_ps` promises no order). The kernels are
//! `#[target_feature(enable = "avx512f,avx512dq")]`; only [`kernels()`] hands out an
//! [`Avx512Elem`], and only where the CPU has both.

use core::arch::x86_64::*;

use tiercheck_core::elem::{
    self, ElemFlavour, ElemOps, EXP_C1, EXP_C2, EXP_C3, EXP_C4, EXP_C5, EXP_LN2_HI, EXP_LN2_LO,
    EXP_LOG2E, EXP_SHIFT,
};

use tiercheck_core::detect::FeatureSet;
use tiercheck_core::lane::Unavailable;

/// AVX-512 F and DQ, detected once.
static FEATURES: FeatureSet = FeatureSet::new(&["avx512f", "avx512dq"]);

/// The native AVX-512 elementwise kernels. Only [`kernels()`] hands one out, and only
/// where the CPU has AVX-512 F and DQ, so holding one proves the instructions legal.
#[derive(Debug)]
pub struct Avx512Elem {
    _proof: (),
}

static KERNELS: Avx512Elem = Avx512Elem { _proof: () };

/// The native [`ElemFlavour::Avx512`] kernels, or the CPU features this CPU lacks.
pub fn kernels() -> Result<&'static dyn ElemOps, Unavailable> {
    FEATURES.check()?;
    Ok(&KERNELS)
}

impl ElemOps for Avx512Elem {
    fn flavour(&self) -> ElemFlavour {
        ElemFlavour::Avx512
    }

    fn soft_max(&self, y: &mut [f32], x: &[f32], max: f32) -> f64 {
        assert_eq!(y.len(), x.len(), "soft_max: lengths differ");
        // SAFETY: an `Avx512Elem` exists only where the CPU has AVX-512 F and DQ.
        unsafe { soft_max(y, x, max) }
    }

    fn swiglu(&self, y: &mut [f32], x: &[f32], g: &[f32]) {
        assert!(y.len() == x.len() && x.len() == g.len(), "swiglu: lengths differ");
        // SAFETY: as above.
        unsafe { swiglu(y, x, g) }
    }

    fn dot_f32(&self, x: &[f32], y: &[f32]) -> f32 {
        assert_eq!(x.len(), y.len(), "dot_f32: lengths differ");
        // SAFETY: as above.
        unsafe { dot_f32(x, y) }
    }

    fn sgemm_dot(&self, a: &[f32], b: &[f32]) -> f32 {
        assert_eq!(a.len(), b.len(), "sgemm_dot: lengths differ");
        assert!(a.len().is_multiple_of(16), "sgemm_dot: length not a multiple of 16");
        // SAFETY: as above.
        unsafe { sgemm_dot(a, b) }
    }
}

/// `ggml_v_expf(__m512)`.
#[target_feature(enable = "avx512f,avx512dq")]
fn v_expf(x: __m512) -> __m512 {
    let r = _mm512_set1_ps(EXP_SHIFT);
    let z = _mm512_fmadd_ps(x, _mm512_set1_ps(EXP_LOG2E), r);
    let n = _mm512_sub_ps(z, r);
    let b = _mm512_fnmadd_ps(
        n,
        _mm512_set1_ps(EXP_LN2_LO),
        _mm512_fnmadd_ps(n, _mm512_set1_ps(EXP_LN2_HI), x),
    );
    let d = _mm512_cmp_ps_mask::<_CMP_GT_OQ>(_mm512_abs_ps(n), _mm512_set1_ps(192.0));
    let u = _mm512_mul_ps(b, b);
    let j = _mm512_fmadd_ps(
        _mm512_fmadd_ps(
            _mm512_fmadd_ps(_mm512_set1_ps(EXP_C5), b, _mm512_set1_ps(EXP_C4)),
            u,
            _mm512_fmadd_ps(_mm512_set1_ps(EXP_C3), b, _mm512_set1_ps(EXP_C2)),
        ),
        u,
        _mm512_fmadd_ps(_mm512_set1_ps(EXP_C1), b, _mm512_set1_ps(1.0)),
    );
    let res = _mm512_scalef_ps(j, n);
    if d == 0 {
        return res;
    }
    let zero = _mm512_setzero_ps();
    let alt = _mm512_mask_blend_ps(
        _mm512_cmp_ps_mask::<_CMP_LE_OQ>(n, zero),
        _mm512_set1_ps(f32::INFINITY),
        zero,
    );
    _mm512_mask_blend_ps(d, res, alt)
}

/// `ggml_v_silu(__m512)`.
#[target_feature(enable = "avx512f,avx512dq")]
fn v_silu(x: __m512) -> __m512 {
    let one = _mm512_set1_ps(1.0);
    let neg_x = _mm512_sub_ps(_mm512_setzero_ps(), x);
    _mm512_div_ps(x, _mm512_add_ps(one, v_expf(neg_x)))
}

/// GCC's `_mm512_reduce_add_ps`: `t = hi256 + lo256`, `t = hi128 + lo128`,
/// `t = t + shuffle(t, [2, 3, 0, 1])`, `t0 + t1`.
#[target_feature(enable = "avx512f,avx512dq")]
fn hsum(v: __m512) -> f32 {
    let hi = _mm512_extractf32x8_ps::<1>(v);
    let lo = _mm512_castps512_ps256(v);
    let t3 = _mm256_add_ps(hi, lo);
    let t6 = _mm_add_ps(_mm256_extractf128_ps::<1>(t3), _mm256_castps256_ps128(t3));
    let t8 = _mm_add_ps(t6, _mm_shuffle_ps::<0b01_00_11_10>(t6, t6));
    _mm_cvtss_f32(t8) + _mm_cvtss_f32(_mm_shuffle_ps::<0b01>(t8, t8))
}

#[target_feature(enable = "avx512f,avx512dq")]
fn soft_max(y: &mut [f32], x: &[f32], max: f32) -> f64 {
    let n = x.len();
    let mut sum = 0.0f64;
    let mut i = 0;
    let vmax = _mm512_set1_ps(max);
    while i + 16 <= n {
        // SAFETY: `i + 16 <= n` and both slices hold `n` floats.
        let val = unsafe { v_expf(_mm512_sub_ps(_mm512_loadu_ps(x.as_ptr().add(i)), vmax)) };
        // SAFETY: as above.
        unsafe { _mm512_storeu_ps(y.as_mut_ptr().add(i), val) };
        sum += hsum(val) as f64;
        i += 16;
    }
    while i < n {
        let val = (x[i] - max).exp();
        sum += val as f64;
        y[i] = val;
        i += 1;
    }
    sum
}

#[target_feature(enable = "avx512f,avx512dq")]
fn swiglu(y: &mut [f32], x: &[f32], g: &[f32]) {
    let n = x.len();
    let mut i = 0;
    while i + 16 <= n {
        // SAFETY: `i + 16 <= n` and the three slices hold `n` floats.
        unsafe {
            let v = _mm512_mul_ps(
                v_silu(_mm512_loadu_ps(x.as_ptr().add(i))),
                _mm512_loadu_ps(g.as_ptr().add(i)),
            );
            _mm512_storeu_ps(y.as_mut_ptr().add(i), v);
        }
        i += 16;
    }
    for j in i..n {
        y[j] = elem::silu_scalar(x[j]) * g[j];
    }
}

#[target_feature(enable = "avx512f,avx512dq")]
fn dot_f32(x: &[f32], y: &[f32]) -> f32 {
    let n = x.len();
    let np = n - n % 64;
    let mut sum = [_mm512_setzero_ps(); 4];
    let mut i = 0;
    while i < np {
        for (j, s) in sum.iter_mut().enumerate() {
            // SAFETY: `i + 64 <= np <= n` and both slices hold `n` floats.
            let (a, b) = unsafe {
                (
                    _mm512_loadu_ps(x.as_ptr().add(i + 16 * j)),
                    _mm512_loadu_ps(y.as_ptr().add(i + 16 * j)),
                )
            };
            *s = _mm512_fmadd_ps(a, b, *s);
        }
        i += 64;
    }
    let s02 = _mm512_add_ps(sum[0], sum[2]);
    let s13 = _mm512_add_ps(sum[1], sum[3]);
    let mut s = hsum(_mm512_add_ps(s02, s13));
    for o in np..n {
        s = x[o].mul_add(y[o], s);
    }
    s
}

#[target_feature(enable = "avx512f,avx512dq")]
fn sgemm_dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = _mm512_setzero_ps();
    for (ca, cb) in a.chunks_exact(16).zip(b.chunks_exact(16)) {
        // SAFETY: each chunk holds 16 floats.
        let (va, vb) = unsafe { (_mm512_loadu_ps(ca.as_ptr()), _mm512_loadu_ps(cb.as_ptr())) };
        acc = _mm512_fmadd_ps(va, vb, acc);
    }
    hsum(acc)
}
