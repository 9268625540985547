//! Rounding primitives, each a named rule.

/// ggml's `nearest_int`: add 1.5 * 2^23, reinterpret the bits, subtract the bias.
///
/// For |x| <= 4194303 this is round-half-to-even of x. The addition is one f32
/// rounding in the current mode (nearest even), which is what decides ties. Outside
/// that range (or for NaN) the result is whatever the bit trick yields; we compute it
/// the same way, so out-of-range inputs give ggml's value too.
#[inline]
pub fn nearest_int(x: f32) -> i32 {
    let val = x + 12582912.0;
    (val.to_bits() & 0x007f_ffff) as i32 - 0x0040_0000
}

/// The same trick with the scale multiplication fused into the addition, as GCC
/// compiles `nearest_int(iscale * x)` on aarch64 (`fmla`): one rounding instead of two.
#[inline]
pub fn nearest_int_fused(iscale: f32, x: f32) -> i32 {
    let val = iscale.mul_add(x, 12582912.0);
    (val.to_bits() & 0x007f_ffff) as i32 - 0x0040_0000
}

/// C's `roundf`: half away from zero. (`f32::round` is exactly that.)
#[inline]
pub fn round_half_away(x: f32) -> f32 {
    x.round()
}

/// Conversion of a float to `int8_t` as C does it on the targets we reproduce: the
/// value is truncated toward zero to an int32 (`cvttss2si` / `fcvtzs`), then the low 8
/// bits are kept. Values outside the int32 range saturate (Rust) where C is undefined;
/// no reference path produces them from finite inputs.
#[inline]
pub fn f32_to_i8_c(x: f32) -> i8 {
    (x as i32) as i8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_int_is_half_to_even() {
        for (x, want) in [
            (0.5f32, 0),
            (1.5, 2),
            (2.5, 2),
            (-0.5, 0),
            (-1.5, -2),
            (-2.5, -2),
            (126.5, 126),
            (-126.5, -126),
            (127.49999, 127),
            (3.0, 3),
            (-127.0, -127),
            (4194303.0, 4194303),
            (-4194303.0, -4194303),
        ] {
            assert_eq!(nearest_int(x), want, "x = {x}");
        }
    }

    #[test]
    fn nearest_int_matches_round_ties_even_over_a_sweep() {
        let mut x = -300.0f32;
        while x < 300.0 {
            assert_eq!(nearest_int(x), x.round_ties_even() as i32, "x = {x}");
            x += 0.0625 / 3.0;
        }
    }

    #[test]
    fn fused_differs_from_unfused_only_by_the_skipped_rounding() {
        // iscale * x = 2.5 exactly representable: both agree (ties to even).
        assert_eq!(nearest_int_fused(0.5, 5.0), 2);
        // Exact product 2.5 + eps/2 - 2 eps^2 rounds to the tie 2.5 in f32 (-> 2), but
        // the fused form sees that it lies above the tie (-> 3).
        let iscale = 1.0f32 + f32::EPSILON;
        let x = 2.5f32 - 2.0 * f32::EPSILON;
        assert_eq!(iscale * x, 2.5);
        assert_eq!(nearest_int(iscale * x), 2);
        assert_eq!(nearest_int_fused(iscale, x), 3);
    }

    #[test]
    fn c_conversion_truncates_then_wraps() {
        assert_eq!(f32_to_i8_c(16.9), 16);
        assert_eq!(f32_to_i8_c(-0.9), 0);
        assert_eq!(f32_to_i8_c(200.0), -56);
        assert_eq!(round_half_away(2.5), 3.0);
        assert_eq!(round_half_away(-2.5), -3.0);
    }
}
