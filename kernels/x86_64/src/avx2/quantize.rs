//! ggml's AVX2 `quantize_row_q8_0` (`ggml-cpu/arch/x86/quants.c`), natively. Twin:
//! `tiercheck_core::quant::ActRule::Q8_0X86`.

use core::arch::x86_64::*;

use tiercheck_core::blocks::{BlockQ8_0, QK};

/// `quantize_row_q8_0`, AVX2 path: maxps tree for amax, d = f16(amax/127) by F16C,
/// id = 127/amax, round to nearest even, convert, pack with saturation.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn quantize_row_q8_0(x: &[f32], y: &mut [BlockQ8_0]) {
    for (xb, yb) in x.chunks_exact(QK).zip(y.iter_mut()) {
        // SAFETY: `xb` has 32 readable f32 (chunks_exact); loads are unaligned.
        let (mut v0, mut v1, mut v2, mut v3) = unsafe {
            let p = xb.as_ptr();
            (
                _mm256_loadu_ps(p),
                _mm256_loadu_ps(p.add(8)),
                _mm256_loadu_ps(p.add(16)),
                _mm256_loadu_ps(p.add(24)),
            )
        };
        let sign_bit = _mm256_set1_ps(-0.0);
        let mut max_abs = _mm256_andnot_ps(sign_bit, v0);
        max_abs = _mm256_max_ps(max_abs, _mm256_andnot_ps(sign_bit, v1));
        max_abs = _mm256_max_ps(max_abs, _mm256_andnot_ps(sign_bit, v2));
        max_abs = _mm256_max_ps(max_abs, _mm256_andnot_ps(sign_bit, v3));
        let mut max4 =
            _mm_max_ps(_mm256_extractf128_ps::<1>(max_abs), _mm256_castps256_ps128(max_abs));
        max4 = _mm_max_ps(max4, _mm_movehl_ps(max4, max4));
        max4 = _mm_max_ss(max4, _mm_movehdup_ps(max4));
        let max_scalar = _mm_cvtss_f32(max4);

        let d = max_scalar / 127.0;
        let h = _mm_extract_epi16::<0>(_mm_cvtps_ph::<0>(_mm_set_ss(d))) as u16;
        yb.d = h.to_le_bytes();
        let id = if max_scalar != 0.0 { 127.0 / max_scalar } else { 0.0 };
        let mul = _mm256_set1_ps(id);
        v0 = _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT }>(_mm256_mul_ps(v0, mul));
        v1 = _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT }>(_mm256_mul_ps(v1, mul));
        v2 = _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT }>(_mm256_mul_ps(v2, mul));
        v3 = _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT }>(_mm256_mul_ps(v3, mul));
        let i0 = _mm256_cvtps_epi32(v0);
        let i1 = _mm256_cvtps_epi32(v1);
        let i2 = _mm256_cvtps_epi32(v2);
        let i3 = _mm256_cvtps_epi32(v3);
        let i0 = _mm256_packs_epi32(i0, i1);
        let i2 = _mm256_packs_epi32(i2, i3);
        let i0 = _mm256_packs_epi16(i0, i2);
        let perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
        let i0 = _mm256_permutevar8x32_epi32(i0, perm);
        // SAFETY: `yb.qs` is 32 writable bytes; the store is unaligned.
        unsafe { _mm256_storeu_si256(yb.qs.as_mut_ptr().cast(), i0) };
    }
}
