//! Half-precision conversions exactly as ggml performs them.
//!
//! ggml's portable `ggml_compute_fp32_to_fp16` rounds to nearest, ties to even, for
//! every finite value (subnormals included), maps overflow to infinity and maps every
//! NaN to the quiet NaN `0x7E00` with the input's sign. The hardware paths (F16C
//! `vcvtps2ph` with rounding mode 0, NEON `vcvt_f16_f32`) agree on all non-NaN inputs.
//! `ggml_compute_fp16_to_fp32` is exact for every non-NaN half.
//!
//! bf16 follows `ggml_compute_fp32_to_bf16`: round to nearest even on the upper 16 bits,
//! and NaN becomes a quiet NaN (`(bits >> 16) | 64`).

use half::f16;

/// f32 -> IEEE binary16 bits, as `GGML_FP32_TO_FP16`.
#[inline]
pub fn f32_to_f16_bits(x: f32) -> u16 {
    if x.is_nan() {
        let sign = ((x.to_bits() >> 16) & 0x8000) as u16;
        sign | 0x7E00
    } else {
        f16::from_f32(x).to_bits()
    }
}

/// f32 -> binary16 bits as the hardware converts (F16C `vcvtps2ph` with rounding mode
/// 0, NEON `fcvt`): round to nearest even, and a NaN keeps its sign and the top bits of
/// its payload, with the quiet bit set. This is ggml's `GGML_CPU_FP32_TO_FP16` on
/// builds with F16C or NEON; it differs from [`f32_to_f16_bits`] only for NaN payloads.
#[inline]
pub fn f32_to_f16_bits_hw(x: f32) -> u16 {
    if x.is_nan() {
        let b = x.to_bits();
        (((b >> 16) & 0x8000) | 0x7E00 | ((b >> 13) & 0x03FF)) as u16
    } else {
        f16::from_f32(x).to_bits()
    }
}

/// IEEE binary16 bits -> f32, as `GGML_FP16_TO_FP32`: exact for every non-NaN half
/// (a normal one rebiased, 15 -> 127; a subnormal `man * 2^-24`, exact in f32); a NaN
/// keeps its sign and payload with the quiet bit set, as F16C's `vcvtph2ps` and NEON's
/// `fcvt` widen it. Plain bit operations, the same on every host (no feature detection
/// per call: the twins convert two to four headers per block).
#[inline]
pub fn f16_bits_to_f32(h: u16) -> f32 {
    let sign = ((h & 0x8000) as u32) << 16;
    let exp = ((h >> 10) & 0x1F) as u32;
    let man = (h & 0x03FF) as u32;
    let bits = if exp != 0 && exp != 0x1F {
        sign | ((exp + 112) << 23) | (man << 13)
    } else if exp == 0 {
        sign | (man as f32 * (1.0 / 16_777_216.0)).to_bits()
    } else if man == 0 {
        sign | 0x7F80_0000
    } else {
        sign | 0x7FC0_0000 | (man << 13)
    };
    f32::from_bits(bits)
}

/// Round an f32 through f16 and back.
#[inline]
pub fn round_to_f16(x: f32) -> f32 {
    f16_bits_to_f32(f32_to_f16_bits(x))
}

/// An f64 rounded to F16 once (round to nearest even), for FP16 fused multiply-adds
/// computed in f64: rounded to f32 by round-to-odd first (24 bits keep every F16
/// rounding decision of a 53-bit value), then to F16. The f64 `fma(x, v, y)` of F16
/// operands is itself exact wherever it lies close to an F16 rounding boundary (the
/// operands' bits then span fewer than 53), so the chain rounds the exact value once.
pub fn round_f64_to_f16(d: f64) -> f32 {
    let t = d as f32;
    let t = if t as f64 == d || !t.is_finite() || t.to_bits() & 1 == 1 {
        t
    } else if (t as f64).abs() > d.abs() {
        f32::from_bits(t.to_bits() - 1)
    } else {
        f32::from_bits(t.to_bits() + 1)
    };
    f16_bits_to_f32(f32_to_f16_bits_hw(t))
}

/// One FP16 fused multiply-add of F16 values (given widened to f32): `RN16(a*b + c)`,
/// rounded once, F16 subnormals kept (`HFMA2`, `v_pk_fma_f16`, SVE's `svmla` on
/// `svfloat16_t`).
#[inline]
pub fn fma_f16(a: f32, b: f32, c: f32) -> f32 {
    round_f64_to_f16((a as f64).mul_add(b as f64, c as f64))
}

/// f32 -> bf16 bits, as `ggml_compute_fp32_to_bf16`.
#[inline]
pub fn f32_to_bf16_bits(x: f32) -> u16 {
    let u = x.to_bits();
    if (u & 0x7fff_ffff) > 0x7f80_0000 {
        return ((u >> 16) | 64) as u16;
    }
    ((u.wrapping_add(0x7fff + ((u >> 16) & 1))) >> 16) as u16
}

/// bf16 bits -> f32 (exact).
#[inline]
pub fn bf16_bits_to_f32(h: u16) -> f32 {
    f32::from_bits((h as u32) << 16)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every one of the 65536 halves widens to the bits of the `half` crate's two
    /// conversions (the host's instruction where it has one, and its portable one).
    #[test]
    fn f16_widening_equals_the_half_crate_for_every_half() {
        for h in 0..=u16::MAX {
            let ours = f16_bits_to_f32(h).to_bits();
            assert_eq!(ours, f16::from_bits(h).to_f32().to_bits(), "{h:#06x}");
            assert_eq!(ours, f16::from_bits(h).to_f32_const().to_bits(), "{h:#06x}");
        }
    }

    #[test]
    fn f16_round_trip_of_every_non_nan_half_is_exact() {
        for h in 0..=u16::MAX {
            let x = f16_bits_to_f32(h);
            if x.is_nan() {
                assert_eq!(f32_to_f16_bits(x) & 0x7fff, 0x7E00);
            } else {
                assert_eq!(f32_to_f16_bits(x), h, "half {h:#06x}");
            }
        }
    }

    #[test]
    fn f16_rounds_ties_to_even_and_overflows_to_inf() {
        // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even -> 1.
        assert_eq!(f32_to_f16_bits(1.0 + f32::powi(2.0, -11)), 0x3C00);
        // 1 + 3*2^-11 is halfway between 1+2^-10 and 1+2^-9: ties to even -> 1+2^-9.
        assert_eq!(f32_to_f16_bits(1.0 + 3.0 * f32::powi(2.0, -11)), 0x3C02);
        assert_eq!(f32_to_f16_bits(65520.0), 0x7C00);
        assert_eq!(f32_to_f16_bits(-1e9), 0xFC00);
        // smallest subnormal half and half of it (tie to even -> 0)
        assert_eq!(f32_to_f16_bits(f32::powi(2.0, -24)), 0x0001);
        assert_eq!(f32_to_f16_bits(f32::powi(2.0, -25)), 0x0000);
        assert_eq!(f32_to_f16_bits(-f32::NAN), 0xFE00);
    }

    #[test]
    fn bf16_rounds_to_nearest_even() {
        assert_eq!(f32_to_bf16_bits(1.0), 0x3F80);
        assert_eq!(f32_to_bf16_bits(f32::from_bits(0x3F80_8000)), 0x3F80); // tie -> even
        assert_eq!(f32_to_bf16_bits(f32::from_bits(0x3F81_8000)), 0x3F82); // tie -> even
        assert_eq!(f32_to_bf16_bits(f32::from_bits(0x3F80_8001)), 0x3F81);
        assert_eq!(f32_to_bf16_bits(f32::NAN) & 0x7FC0, 0x7FC0);
        assert_eq!(bf16_bits_to_f32(0x3F80), 1.0);
    }
}
