//! Twins of the AMD device library's `powf`, `sinf` and `cosf` as HIP inlines them into
//! ggml's GPU RoPE (`ggml-cuda/rope.cu` `rope_neox`), and that RoPE's angles, cosines,
//! sines and rotation ([`rope_pair_hip`], [`rope_cache_hip`]).
//!
//! The device library is ocml from ROCm Device-Libs 5.2.3 (the `rocm-device-libs`
//! package Debian ships with its HIP 5.2.3), linked with ggml's HIP build settings:
//! no unsafe math, no finite-only math, subnormals kept (`daz_opt = 0`), and an ISA of
//! gfx9 or later, where every `fmuladd` of the library and every split product is one
//! fused multiply-add. Each function below is written from the library's float
//! sequence (the IR of `__ocml_pow_f32`, `__ocml_sin_f32`, `__ocml_cos_f32` and their
//! private helpers `epln`, `expep`, `trigred`, `trigredsmall`, `trigredlarge`,
//! `sincosred`); docs/GPU.md ("RoPE on HIP") states it in words.
//! Three hardware instructions are models, as everywhere in the GPU twins: `v_rcp_f32`
//! (inside `epln`) is the correctly rounded reciprocal, `v_exp_f32` (inside `expf`) the
//! correctly rounded `2^a` ([`super::elem::rcp`], [`super::elem::exp2`]).
//!
//! The test `ggml <target> rope executes` in `kernels/hip` runs ggml's own `rope_neox`
//! code object for gfx1030 and gfx90a through an interpreter of the instructions, with
//! positions, frequency bases and scales that drive both of `sinf`'s reductions, and
//! requires every stored output to equal [`rope_pair_hip`] bit for bit.

use super::elem::{expf, rcp, GpuMath};

const NAN: f32 = f32::from_bits(0x7FC0_0000);

/// `v_frexp_mant_f32`: the significand in `[0.5, 1)` with `x`'s sign (subnormals
/// normalized); zero, infinities and NaN are returned as they are.
fn frexp_mant(x: f32) -> f32 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    (x as f64 / 2f64.powi(frexp_exp(x))) as f32
}

/// `v_frexp_exp_i32_f32`: `e` with `x = m * 2^e`, `m` in `[0.5, 1)`; 0 for zero,
/// infinities and NaN.
fn frexp_exp(x: f32) -> i32 {
    if x == 0.0 || !x.is_finite() {
        return 0;
    }
    let bits = (x as f64).to_bits();
    ((bits >> 52) & 0x7FF) as i32 - 1022
}

/// `v_ldexp_f32`: `x * 2^n`, one rounding (subnormal results rounded to nearest).
fn ldexp(x: f32, n: i32) -> f32 {
    let n = n.clamp(-400, 400);
    // Two exact f64 steps (each factor is a power of two within f64's range).
    (x as f64 * 2f64.powi(n / 2) * 2f64.powi(n - n / 2)) as f32
}

/// `v_fract_f32`: `x - floor(x)`, at most the largest f32 below 1.
fn fract(x: f32) -> f32 {
    if !x.is_finite() {
        return NAN;
    }
    (x - x.floor()).min(f32::from_bits(0x3F7F_FFFF))
}

/// `a + b` and its rounding error as the library forms it: `(s, b - (s - a))`.
#[inline]
fn fast_two_sum(a: f32, b: f32) -> (f32, f32) {
    let s = a + b;
    (s, b - (s - a))
}

/// `epln(x)`: `ln x` as a sum `hi + lo` of two floats, for `x >= 0`.
///
/// `x = m 2^e` with `m` in `[2/3, 4/3)`; `u = (m-1)/(m+1)` in double-float (a hardware
/// reciprocal and two fused corrections); `ln m = 2u + u^3 P(u^2)` with
/// `P(v) = 2/3 + v(0.40000865 + v(0.28507054 + v 0.24098541))`, the products and sums
/// carried in double-float; `e ln 2` with `ln 2` split into two floats; the pieces added
/// in the library's order. Returns `(lo, hi)`.
pub fn epln(x: f32) -> (f32, f32) {
    let m0 = frexp_mant(x);
    let c = i32::from(m0 < f32::from_bits(0x3F2A_AAAB));
    let m = ldexp(m0, c);
    let e = frexp_exp(x) - c;
    let mm1 = m - 1.0;
    let mp1 = m + 1.0;
    let mp1_lo = m - (mp1 - 1.0);
    let r = rcp(mp1);
    let q = mm1 * r;
    let p = mp1 * q;
    let pe = q.mul_add(mp1, -p);
    let pe = q.mul_add(mp1_lo, pe);
    let (s, se) = fast_two_sum(p, pe);
    let d = mm1 - s;
    let dd = ((mm1 - d) - s) - se;
    let corr = r * (d + dd);
    let (u, ul) = fast_two_sum(q, corr);

    // v = u^2 in double-float.
    let u2 = u * u;
    let u2e = u.mul_add(u, -u2);
    let u2e = u.mul_add(ul * 2.0, u2e);
    let (v, ve) = fast_two_sum(u2, u2e);

    let poly = v.mul_add(f32::from_bits(0x3E76_C4E1), f32::from_bits(0x3E91_F4C4));
    let poly = v.mul_add(poly, f32::from_bits(0x3ECC_CDEF));

    // e ln 2 in double-float.
    let ef = e as f32;
    let ln2h = ef * f32::from_bits(0x3F31_7218);
    let ln2e = ef.mul_add(f32::from_bits(0x3F31_7218), -ln2h);
    let ln2e = ef.mul_add(f32::from_bits(0xB102_E308), ln2e);

    // w = u^3 = v * u.
    let w = v * u;
    let we = v.mul_add(u, -w);
    let we = v.mul_add(ul, we);
    let we = ve.mul_add(u, we);
    let (w3, w3e) = fast_two_sum(w, we);

    // c1 = 2/3 + v * poly, with 2/3 as 0x3F2AAAAA + 0x31739010.
    let pp = v * poly;
    let ppe = v.mul_add(poly, -pp);
    let ppe = ve.mul_add(poly, ppe);
    let (s2, s2e) = fast_two_sum(pp, ppe);
    let t1 = s2 + f32::from_bits(0x3F2A_AAAA);
    let t3 = s2 - (t1 + f32::from_bits(0xBF2A_AAAA));
    let t5 = (s2e + f32::from_bits(0x3173_9010)) + t3;
    let (c1, c1e) = fast_two_sum(t1, t5);

    // g = u^3 * c1.
    let g = w3 * c1;
    let ge = w3.mul_add(c1, -g);
    let ge = w3.mul_add(c1e, ge);
    let ge = w3e.mul_add(c1, ge);

    let ul2 = ldexp(ul, 1);
    let u2x = ldexp(u, 1);
    let (a, ae) = fast_two_sum(ln2h, ln2e);
    let (b, be) = fast_two_sum(g, ge);
    let cc = u2x + b;
    let cce = b - (cc - u2x);
    let dsum = (ul2 + be) + cce;
    let (ee, eee) = fast_two_sum(cc, dsum);
    // Two-sum (not fast) of a + ee and of ae + eee.
    let f = a + ee;
    let fv = f - a;
    let gsum = (ee - fv) + (a - (f - fv));
    let h = ae + eee;
    let hv = h - ae;
    let isum = (eee - hv) + (ae - (h - hv));
    let j = h + gsum;
    let (k, ke) = fast_two_sum(f, j);
    let l = isum + ke;
    let (hi, lo) = fast_two_sum(k, l);
    (lo, hi)
}

/// `expep(lo, hi)`: `e^(hi + lo)` as `fma(e, lo, e)` with `e = expf(hi)` (the device
/// library's `expf`, [`super::elem::expf`]); `hi` exactly at the overflow threshold
/// 88.72284 moves `2^-17` into `lo`; an infinite `e` is returned as it is.
pub fn expep(lo: f32, hi: f32) -> f32 {
    let c = if hi == f32::from_bits(0x42B1_7218) { f32::from_bits(0x3700_0000) } else { 0.0 };
    let e = expf(GpuMath::Hip, hi - c);
    if e.abs() == f32::INFINITY {
        e
    } else {
        e.mul_add(lo + c, e)
    }
}

/// The device library's `powf(x, y)` (`__ocml_pow_f32`, not unsafe math): `expep(y *
/// epln(|x|))` with the product carried in double-float, then the sign of an odd
/// integer power of a negative base and the C standard's special cases.
pub fn powf(x: f32, y: f32) -> f32 {
    let ax = x.abs();
    let (lo, hi) = epln(ax);
    let ylnh = hi * y;
    let e = y.mul_add(hi, -ylnh);
    let e = y.mul_add(lo, e);
    let s = ylnh + e;
    let se = e - (s - ylnh);
    let s = if ylnh.abs() == f32::INFINITY { ylnh } else { s };
    let se = if s.abs() == f32::INFINITY { 0.0 } else { se };
    let r = expep(se, s);

    let ay = y.abs();
    let ty = ay.trunc();
    let yint = ay == ty;
    let half = ty * 0.5;
    let fr = if half.is_infinite() { 0.0 } else { fract(half) };
    let kind = u32::from(yint && fr == 0.0) + u32::from(yint);
    let odd = kind == 1;
    let negative = x < 0.0 && odd;
    let mut res = r.copysign(if negative { -0.0 } else { 0.0 });
    // `x >= 0` unordered (a NaN base passes) or an integer power.
    if !(x >= 0.0 || x.is_nan() || kind != 0) {
        res = NAN;
    }
    if ay == f32::INFINITY {
        res = if ax == 1.0 {
            1.0
        } else if ((ax - 1.0).to_bits() ^ y.to_bits()) as i32 > -1 {
            f32::INFINITY
        } else {
            0.0
        };
    }
    if x == 0.0 || ax == f32::INFINITY {
        let mag = if (x == 0.0) != (y < 0.0) { 0.0 } else { f32::INFINITY };
        res = mag.copysign(if odd { x } else { 0.0 });
    }
    if x.is_nan() || y.is_nan() {
        res = NAN;
    }
    if x == 1.0 || y == 0.0 {
        res = 1.0;
    }
    res
}

/// `fshr(a, b, s)`: the low word of `(a:b) >> (s mod 32)`.
#[inline]
fn fshr(a: u32, b: u32, s: u32) -> u32 {
    ((((a as u64) << 32) | b as u64) >> (s & 31)) as u32
}

/// `fshl(a, b, s)`: the high word of `(a:b) << (s mod 32)`.
#[inline]
fn fshl(a: u32, b: u32, s: u32) -> u32 {
    (((((a as u64) << 32) | b as u64) << (s & 31)) >> 32) as u32
}

/// `trigred(x)` for `x >= 0`: `x - k pi/2` and `k mod 4`. Below `2^17` the small
/// reduction: `k = rint(RN(x * 2/pi))`, then three fused steps with `pi/2` split into
/// three floats. From `2^17` the large one: Payne-Hanek with 224 bits of `2/pi`
/// ([`trigred_large`]).
pub fn trigred(x: f32) -> (f32, u32) {
    if x < 131072.0 {
        let k = (x * f32::from_bits(0x3F22_F983)).round_ties_even();
        let r = k.mul_add(f32::from_bits(0xBFC9_0FDA), x);
        let r = k.mul_add(f32::from_bits(0xB3A2_2168), r);
        let r = k.mul_add(f32::from_bits(0xA7C2_34C4), r);
        // `v_cvt_i32_f32`, then the low two bits.
        ((r), (k as i32 as u32) & 3)
    } else {
        trigred_large(x)
    }
}

/// The large reduction of `trigred` (`trigredlarge`): the significand times the 224
/// bits of `2/pi` as seven 32-bit words, a window of 96 bits of the product chosen by
/// the exponent, the quadrant from its top bits (negated when its fraction is at least
/// a half), the fraction normalized into two floats and multiplied by `pi/2` in
/// double-float.
pub fn trigred_large(x: f32) -> (f32, u32) {
    const TWO_OVER_PI: [u64; 7] =
        [0xFE51_63AB, 0x3C43_9041, 0xDB62_9599, 0xF534_DDC0, 0xFC27_57D1, 0x4E44_1529, 0xA2F9_836E];
    let bits = x.to_bits();
    let ex = bits >> 23;
    let m = ((bits & 0x7F_FFFF) | 0x80_0000) as u64;
    // a[0..7]: the product's words, low to high; a[7] the final carry.
    let mut a = [0u32; 8];
    let mut carry = 0u64;
    for (i, &w) in TWO_OVER_PI.iter().enumerate() {
        let p = m * w + carry;
        a[i] = p as u32;
        carry = p >> 32;
    }
    a[7] = carry as u32;
    // The window: four consecutive words from the top, moved down by two words when
    // the exponent is past 64 bits of shift and by one for each further 32.
    let sh = ex.wrapping_sub(120);
    let big = sh > 63;
    let sh = if big { sh.wrapping_sub(64) } else { sh };
    let b1 = sh > 31;
    let sh = if b1 { sh.wrapping_sub(32) } else { sh };
    let b2 = sh > 31;
    let sh = if b2 { sh.wrapping_sub(32) } else { sh };
    let k = 7 - 2 * usize::from(big) - usize::from(b1) - usize::from(b2);
    let (w54, w55, w56, w57) = (a[k], a[k - 1], a[k - 2], a[k - 3]);
    let s = 32u32.wrapping_sub(sh);
    let (w65, w66, w67) = if sh == 0 {
        (w54, w55, w56)
    } else {
        (fshr(w54, w55, s), fshr(w55, w56, s), fshr(w56, w57, s))
    };
    let top = w65 >> 29;
    let w69 = fshl(w65, w66, 2);
    let w70 = fshl(w66, w67, 2);
    let w71 = fshl(w67, w57, 2);
    let odd = top & 1;
    let mask = 0u32.wrapping_sub(odd);
    let sign = top << 31;
    let w75 = w69 ^ mask;
    let w76 = w70 ^ mask;
    let w77 = w71 ^ mask;
    let z1 = w75.leading_zeros();
    let w80 = fshr(w75, w76, 31u32.wrapping_sub(z1));
    let w81 = fshr(w76, w77, 31u32.wrapping_sub(z1));
    let hi_bits = (z1.wrapping_mul(0xFF80_0000).wrapping_add(0x3F00_0000) | sign) | (w80 >> 9);
    let hi = f32::from_bits(hi_bits);
    let w88 = fshl(w80, w81, 23);
    let z2 = w88.leading_zeros();
    let w91 = fshr(w88, w81, 31u32.wrapping_sub(z2));
    let lo_bits = ((z2.wrapping_add(z1)).wrapping_mul(0xFF80_0000).wrapping_add(0x3300_0000)
        | sign)
        | (w91 >> 9);
    let lo = f32::from_bits(lo_bits);
    // (hi + lo) * pi/2 in double-float.
    let pio2 = f32::from_bits(0x3FC9_0FDA);
    let ph = hi * pio2;
    let pe = hi.mul_add(pio2, -ph);
    let pe = hi.mul_add(f32::from_bits(0x33A2_2168), pe);
    let pe = lo.mul_add(pio2, pe);
    let r = pe + ph;
    let q = (odd + (w65 >> 30)) & 3;
    (r, q)
}

/// `sincosred(r)`: `(sin r, cos r)` of a reduced `r` in `[-pi/4, pi/4]` by the
/// library's minimax polynomials in `r^2`, every step fused: `sin = fma(r, r^2 S(r^2),
/// r)`, `cos = C(r^2)` ending in `+ 1`.
pub fn sincosred(r: f32) -> (f32, f32) {
    let x2 = r * r;
    let s = x2.mul_add(f32::from_bits(0xB94C_1982), f32::from_bits(0x3C08_81C4));
    let s = x2.mul_add(s, f32::from_bits(0xBE2A_AA9D));
    let s = r.mul_add(x2 * s, r);
    let c = x2.mul_add(f32::from_bits(0x37D7_5334), f32::from_bits(0xBAB6_4F3B));
    let c = x2.mul_add(c, f32::from_bits(0x3D2A_ABF7));
    let c = x2.mul_add(c, f32::from_bits(0xBF00_0004));
    let c = x2.mul_add(c, 1.0);
    (s, c)
}

/// `sinf(x)` and `cosf(x)` of the device library (`__ocml_sin_f32`, `__ocml_cos_f32`,
/// which share their reduction): reduce `|x|`, pick the polynomial and sign by the
/// quadrant, restore `x`'s sign for the sine; NaN for infinite or NaN `x`.
pub fn sincosf(x: f32) -> (f32, f32) {
    let ax = x.abs();
    let (r, q) = trigred(ax);
    let (s, c) = sincosred(r);
    let flip = if (q as i32) > 1 { 0x8000_0000u32 } else { 0 };
    let sin_bits = if q & 1 == 0 { s.to_bits() } else { c.to_bits() };
    let sin = f32::from_bits((ax.to_bits() ^ x.to_bits()) ^ flip ^ sin_bits);
    let cos_bits = if q & 1 == 0 { c.to_bits() } else { (-s).to_bits() };
    let cos = f32::from_bits(cos_bits ^ flip);
    if ax.is_finite() {
        (sin, cos)
    } else {
        (NAN, NAN)
    }
}

/// How HIP forms ggml's RoPE rotation `x0*cos - x1*sin` and `x0*sin + x1*cos`: the
/// `cos` products fused, the `sin` products rounded first, `fma(x0, cos, -RN(x1 sin))`
/// and `fma(x1, cos, RN(x0 sin))` (read from the code objects for gfx1030 and gfx90a by
/// executing them). The CPU's FMA tiers and CUDA fuse the `x0` product of both.
#[inline]
pub fn rotate_hip(x0: f32, x1: f32, cos: f32, sin: f32) -> (f32, f32) {
    (x0.mul_add(cos, -(x1 * sin)), x1.mul_add(cos, x0 * sin))
}

/// One thread of ggml's HIP `rope_neox<forward, no frequency factors, float, float>`
/// with `ext_factor = 0` (no YaRN ramp), for the pair at rotation index `iw` (even):
/// `theta = freq_scale * RN(pos * powf(theta_scale, iw/2))` ([`powf`]), `cos =
/// RN(cosf(theta) * attn_factor)`, `sin = RN(sinf(theta) * attn_factor)`
/// ([`sincosf`]), and the rotation [`rotate_hip`]. Returns the two outputs.
#[allow(clippy::too_many_arguments)]
pub fn rope_pair_hip(
    x0: f32,
    x1: f32,
    pos: i32,
    theta_scale: f32,
    iw: i32,
    freq_scale: f32,
    attn_factor: f32,
) -> (f32, f32) {
    let theta_base = pos as f32 * powf(theta_scale, iw as f32 * 0.5);
    let theta = freq_scale * theta_base;
    let (s, c) = sincosf(theta);
    rotate_hip(x0, x1, c * attn_factor, s * attn_factor)
}

/// ggml's HIP RoPE cache for one position (`freq_scale = attn_factor = 1`, no
/// frequency factors, no YaRN): `[cos, sin]` per pair `p`, with `theta_scale =
/// powf(freq_base, -2/n_dims)` on the host (the C library's, as on the CPU) and the
/// angle `pos * powf(theta_scale, p)` computed afresh per pair on the device.
pub fn rope_cache_hip(pos: i32, n_dims: usize, freq_base: f32) -> Vec<[f32; 2]> {
    let theta_scale = freq_base.powf(-2.0f32 / n_dims as f32);
    (0..n_dims / 2)
        .map(|p| {
            let theta = pos as f32 * powf(theta_scale, (2 * p) as f32 * 0.5);
            let (s, c) = sincosf(theta);
            [c, s]
        })
        .collect()
}
