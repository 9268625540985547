//! One thread's share of an MMVQ dot product (`ggml-cuda/vecdotq.cuh`): the integer
//! parts exactly as the `dp4a` instructions compute them, the float parts in the
//! device's order, with the multiply-adds the compiler fuses chosen by [`Contraction`].
//! See the parent module for the order in words.

use crate::blocks::iq4_nl::KVALUES_IQ4NL;
use crate::blocks::{
    BlockIq4Nl, BlockIq4Xs, BlockQ2K, BlockQ3K, BlockQ4K, BlockQ4_1, BlockQ5K, BlockQ5_0,
    BlockQ5_1, BlockQ6K, BlockQ8_0, BlockQ8_1,
};
use crate::fp16::round_to_f16;

/// Which multiply-adds of the MMVQ path the device compiler fused into one rounding.
///
/// Unfused, every product and sum below is its own binary32 rounding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Contraction {
    /// `sumf += d8_i * (float)int_i` inside `vec_dot_q4_K_q8_1` (both `sumf_d` and
    /// `sumf_m`) and `vec_dot_q6_K_q8_1` as `fma(d8_i, int_i, sumf)`.
    pub vec_dot_sums: bool,
    /// How the two products that close a `vec_dot` are combined: q4_K's, q5_K's and
    /// q2_K's `dm.x * sumf_d - dm.y * sumf_m`, q4_1's and q5_1's `sumi * d4d8 + m4s8 / 2`
    /// (the division by 2 a product by 0.5), q5_0's `sumi * d8 - 8 * s8`.
    pub combine: Combine,
    /// The kernel's `tmp += vec_dot(...)` as one fma when the inlined `vec_dot` ends in
    /// a multiply: q6_K `fma(d, sumf, tmp)`, q8_0 `fma(d_x * d_y, (float)sumi, tmp)`.
    pub accumulate: bool,
}

/// The evaluation of the closing `a * b ± c * d` of a `vec_dot` (q4_K's
/// `dm.x * sumf_d - dm.y * sumf_m`, see [`Contraction::combine`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Combine {
    /// Two products and a sum, three roundings.
    Unfused,
    /// `fma(a, b, ±(c * d))` (q4_K: `fma(dm.x, sumf_d, -(dm.y * sumf_m))`): the first
    /// product fused (LLVM's DAG combiner's choice when both products have one use).
    FuseFirst,
    /// `fma(±c, d, a * b)`: the second product fused.
    FuseSecond,
}

impl Combine {
    /// `a * b + sign * (c * d)` evaluated this way (`sign` is 1 or -1, exact).
    #[inline(always)]
    pub fn eval(self, a: f32, b: f32, sign: f32, c: f32, d: f32) -> f32 {
        match self {
            Combine::Unfused => a * b + sign * (c * d),
            Combine::FuseFirst => a.mul_add(b, sign * (c * d)),
            Combine::FuseSecond => (sign * c).mul_add(d, a * b),
        }
    }
}

impl Contraction {
    /// Nothing fused (`-ffp-contract=off`).
    pub const OFF: Contraction =
        Contraction { vec_dot_sums: false, combine: Combine::Unfused, accumulate: false };
    /// HIP clang's default, `-ffp-contract=fast-honor-pragmas`, on an AMD GPU without
    /// packed f32 arithmetic (RDNA2, gfx1030): every multiply that feeds an add fused,
    /// q4_K's combine as `fma(dm.x, sumf_d, -(dm.y * sumf_m))`. Read from the
    /// disassembly of `kernels/hip`'s gfx1030 code object (see the parent module).
    pub const HIP_CLANG: Contraction =
        Contraction { vec_dot_sums: true, combine: Combine::FuseFirst, accumulate: true };

    /// HIP clang's default on CDNA2 (gfx90a), which has packed f32 instructions: as
    /// [`Contraction::HIP_CLANG`] except that the SLP vectorizer pairs q4_K's two
    /// products `dm.x * sumf_d` and `dm.y * sumf_m` into one `v_pk_mul_f32` before the
    /// subtraction, so that combine is **unfused** (and `sumf_d`/`sumf_m` are built by
    /// `v_pk_fma_f32`, fused as before). Read from the disassembly of `kernels/hip`'s
    /// gfx90a code object.
    pub const HIP_CLANG_GFX90A: Contraction =
        Contraction { vec_dot_sums: true, combine: Combine::Unfused, accumulate: true };

    /// nvcc's default (`--fmad=true`, implied by ggml's `-use_fast_math`) for ggml's
    /// MMVQ on sm_80 and sm_90: the same fusions as [`Contraction::HIP_CLANG`] (ptxas
    /// contracts `dm.x * sumf_d - dm.y * sumf_m` into `fma(dm.x, sumf_d, -(dm.y *
    /// sumf_m))`). Read from the SASS of ggml's own `mmvq.cu`.
    pub const NVCC: Contraction =
        Contraction { vec_dot_sums: true, combine: Combine::FuseFirst, accumulate: true };

    /// `acc + a * b`, fused when `fuse`.
    #[inline(always)]
    pub(super) fn mad(fuse: bool, a: f32, b: f32, acc: f32) -> f32 {
        if fuse {
            a.mul_add(b, acc)
        } else {
            acc + a * b
        }
    }
}

/// `ggml_cuda_dp4a(a, b, c)`: `c` plus the four products of the signed bytes of `a`
/// and `b` (byte k with byte k), wrapping in 32 bits (`v_dot4_i32_i8` / `sdot4` without
/// clamp, `sudot4` with both operands signed, `__dp4a`).
#[inline(always)]
pub fn dp4a(a: i32, b: i32, c: i32) -> i32 {
    let a = a.to_le_bytes();
    let b = b.to_le_bytes();
    let mut s = c;
    for k in 0..4 {
        s = s.wrapping_add(a[k] as i8 as i32 * b[k] as i8 as i32);
    }
    s
}

/// `__vsub4` as ggml's HIP header defines it: bytewise wrapping subtraction.
#[inline(always)]
fn vsub4(a: i32, b: i32) -> i32 {
    let a = a.to_le_bytes();
    let b = b.to_le_bytes();
    i32::from_le_bytes(core::array::from_fn(|k| a[k].wrapping_sub(b[k])))
}

/// The 32-bit little-endian integer at int index `i` of `bytes` (`get_int_b1`,
/// `get_int_b2`, `get_int_b4`: the same bytes, read with different alignments).
#[inline(always)]
fn int_at(bytes: &[u8], i: usize) -> i32 {
    i32::from_le_bytes([bytes[4 * i], bytes[4 * i + 1], bytes[4 * i + 2], bytes[4 * i + 3]])
}

/// The last operation of a `vec_dot`, kept apart so the caller can fuse a final
/// product into its accumulator as the inlined device code does.
#[derive(Clone, Copy, Debug)]
pub(super) enum Tail {
    /// A finished value (q4_K: its last operation is a subtraction or an fma).
    Value(f32),
    /// `a * b`, not yet rounded.
    Product(f32, f32),
}

impl Tail {
    /// The value `vec_dot` returns on its own.
    #[inline(always)]
    pub(super) fn value(self) -> f32 {
        match self {
            Tail::Value(v) => v,
            Tail::Product(a, b) => a * b,
        }
    }

    /// `tmp += vec_dot(...)` in `mul_mat_vec_q`.
    #[inline(always)]
    pub(super) fn accumulate(self, tmp: f32, c: Contraction) -> f32 {
        match self {
            Tail::Value(v) => tmp + v,
            Tail::Product(a, b) => Contraction::mad(c.accumulate, a, b, tmp),
        }
    }
}

/// The branchless scale/min decode of `vec_dot_q4_K_q8_1` for chunk `j` (0..4): the
/// 6-bit scales and mins of sub-blocks 2j and 2j+1, as `(sc[0..2], m[0..2])`.
#[inline(always)]
pub fn q4_k_scales_for_chunk(scales: &[u8; 12], j: usize) -> ([u8; 2], [u8; 2]) {
    let jm = j & 1;
    let s16 = |k: usize| u16::from_le_bytes([scales[2 * k], scales[2 * k + 1]]) as u32;
    let s0 = s16(jm);
    let s2 = s16(jm + 2);
    let s4 = s16(jm + 4);
    let hi = if j >= 2 { u32::MAX } else { 0 };
    let aux0 = ((s0 & 0x3f3f) & !hi) | (((s4 & 0x0f0f) | ((s0 & 0xc0c0) >> 2)) & hi);
    let aux1 = ((s2 & 0x3f3f) & !hi) | ((((s4 >> 4) & 0x0f0f) | ((s2 & 0xc0c0) >> 2)) & hi);
    ((aux0 as u16).to_le_bytes(), (aux1 as u16).to_le_bytes())
}

#[inline(always)]
pub(super) fn q4_k_tail(x: &BlockQ4K, y: &[BlockQ8_1], iqs: usize, c: Contraction) -> Tail {
    assert!(iqs < 32 && iqs.is_multiple_of(2), "q4_K iqs {iqs}");
    // bq8_offset = QR4_K * ((iqs/2) / (QI8_1/2)): the first of two q8_1 blocks.
    let bq8_offset = 2 * ((iqs / 2) / 4);
    let r = (iqs / 2) % 4;
    // v[0], v[1]: ints r and r+4 of the 32 quant bytes of chunk bq8_offset/2.
    let q4 = &x.qs[16 * bq8_offset..];
    let v = [int_at(q4, r), int_at(q4, r + 4)];
    let (sc, m) = q4_k_scales_for_chunk(&x.scales, bq8_offset / 2);

    let mut sumf_d = 0.0f32;
    let mut sumf_m = 0.0f32;
    for i in 0..2 {
        let b8 = &y[bq8_offset + i];
        let d8 = b8.d();
        let u0 = int_at(&b8.qs, r);
        let u1 = int_at(&b8.qs, r + 4);
        let v0i = (v[0] >> (4 * i)) & 0x0F0F_0F0F;
        let v1i = (v[1] >> (4 * i)) & 0x0F0F_0F0F;
        let dot1 = dp4a(v1i, u1, dp4a(v0i, u0, 0));
        let dot2 = dp4a(0x0101_0101, u1, dp4a(0x0101_0101, u0, 0));
        sumf_d = Contraction::mad(c.vec_dot_sums, d8, (dot1 * sc[i] as i32) as f32, sumf_d);
        sumf_m = Contraction::mad(c.vec_dot_sums, d8, (dot2 * m[i] as i32) as f32, sumf_m);
    }
    Tail::Value(c.combine.eval(x.d(), sumf_d, -1.0, x.dmin(), sumf_m))
}

#[inline(always)]
pub(super) fn q6_k_tail(x: &BlockQ6K, y: &[BlockQ8_1], iqs: usize, c: Contraction) -> Tail {
    assert!(iqs < 32, "q6_K iqs {iqs}");
    // QI6_K = 32: QI6_K/2 = 16, QI6_K/4 = 8, QI6_K/8 = 4.
    let bq8_offset = 4 * (iqs / 16) + (iqs % 16) / 8;
    let scale_offset = 8 * (iqs / 16) + (iqs % 16) / 4;
    let vh_shift = 2 * ((iqs % 16) / 8);
    let vl = int_at(&x.ql, iqs);
    let vh = int_at(&x.qh, 8 * (iqs / 16) + iqs % 8) >> vh_shift;

    let mut sumf = 0.0f32;
    for i in 0..2 {
        let b8 = &y[bq8_offset + 2 * i];
        let u = int_at(&b8.qs, iqs % 8);
        let d8 = b8.d();
        let sc = x.scale(scale_offset + 4 * i) as i32;
        let vil = (vl >> (4 * i)) & 0x0F0F_0F0F;
        let vih = ((vh >> (4 * i)) << 4) & 0x3030_3030;
        let vi = vsub4(vil | vih, 0x2020_2020);
        sumf = Contraction::mad(c.vec_dot_sums, d8, (dp4a(vi, u, 0) * sc) as f32, sumf);
    }
    Tail::Product(x.d(), sumf)
}

#[inline(always)]
pub(super) fn q8_0_tail(x: &BlockQ8_0, y: &BlockQ8_1, iqs: usize) -> Tail {
    assert!(iqs < 8 && iqs.is_multiple_of(2), "q8_0 iqs {iqs}");
    let mut sumi = 0i32;
    for i in 0..2 {
        sumi = dp4a(int_at(&x.qs, iqs + i), int_at(&y.qs, iqs + i), sumi);
    }
    Tail::Product(x.d() * y.d(), sumi as f32)
}

/// The low 5-bit quants of a 5-bit block half: `vl` (low nibbles already selected)
/// with bit k of `vh` (k = 0..3, one per byte) as bit 4 of byte k.
#[inline(always)]
fn with_fifth_bits(vl: i32, vh: u32) -> i32 {
    let mut v = vl;
    for k in 0..4 {
        v |= (((vh >> k) & 1) << (8 * k + 4)) as i32;
    }
    v
}

/// `sumi` of the legacy 32-value types (q4_1, q5_0, q5_1): for i = 0, 1, the low and
/// then the high quants of int `iqs + i` against q8 ints `iqs + i` and `iqs + i + 4`.
#[inline(always)]
fn legacy_sumi(lo: [i32; 2], hi: [i32; 2], y: &BlockQ8_1, iqs: usize) -> i32 {
    let mut sumi = 0;
    for i in 0..2 {
        sumi = dp4a(lo[i], int_at(&y.qs, iqs + i), sumi);
        sumi = dp4a(hi[i], int_at(&y.qs, iqs + i + 4), sumi);
    }
    sumi
}

/// The close of `vec_dot_q4_1_q8_1_impl` and `vec_dot_q5_1_q8_1_impl` (vdr 2) with
/// FAST_FP16_AVAILABLE (every GPU the lanes model): `__hmul2(dm, ds8)` rounds both
/// products to f16 (the product of two f16 values is exact in f32, so one rounding of
/// it is the f16 product), then `sumi * d_d8 + m_s8 / 2` with the lane's combine.
#[inline(always)]
fn min_close(d: f32, m: f32, y: &BlockQ8_1, sumi: i32, c: Contraction) -> Tail {
    let dd8 = round_to_f16(d * y.d());
    let ms8 = round_to_f16(m * y.s());
    Tail::Value(c.combine.eval(sumi as f32, dd8, 1.0, ms8, 0.5))
}

#[inline(always)]
pub(super) fn q4_1_tail(x: &BlockQ4_1, y: &BlockQ8_1, iqs: usize, c: Contraction) -> Tail {
    assert!(iqs < 4 && iqs.is_multiple_of(2), "q4_1 iqs {iqs}");
    let v = [int_at(&x.qs, iqs), int_at(&x.qs, iqs + 1)];
    let sumi = legacy_sumi(v.map(|v| v & 0x0F0F_0F0F), v.map(|v| (v >> 4) & 0x0F0F_0F0F), y, iqs);
    min_close(x.d(), x.m(), y, sumi, c)
}

/// The fifth bits of the 5-bit legacy types for ints `iqs` and `iqs + 1`: `qh >> 4 *
/// (iqs + i)` (only bits 0..3 and 16..19 of each are read, far from where an
/// arithmetic shift would differ).
#[inline(always)]
fn q5_quants(qs: &[u8; 16], qh: &[u8; 4], iqs: usize) -> ([i32; 2], [i32; 2]) {
    let qh = u32::from_le_bytes(*qh);
    let mut lo = [0; 2];
    let mut hi = [0; 2];
    for i in 0..2 {
        let vl = int_at(qs, iqs + i);
        let vh = qh >> (4 * (iqs + i));
        lo[i] = with_fifth_bits(vl & 0x0F0F_0F0F, vh);
        hi[i] = with_fifth_bits((vl >> 4) & 0x0F0F_0F0F, vh >> 16);
    }
    (lo, hi)
}

#[inline(always)]
pub(super) fn q5_0_tail(x: &BlockQ5_0, y: &BlockQ8_1, iqs: usize, c: Contraction) -> Tail {
    assert!(iqs < 4 && iqs.is_multiple_of(2), "q5_0 iqs {iqs}");
    let (lo, hi) = q5_quants(&x.qs, &x.qh, iqs);
    let sumi = legacy_sumi(lo, hi, y, iqs);
    // `d5 * (sumi * ds8.x - (16 * vdr / QI5_0) * ds8.y)`, 16 * 2 / 4 = 8.
    let inner = c.combine.eval(sumi as f32, y.d(), -1.0, 8.0, y.s());
    Tail::Product(x.d(), inner)
}

#[inline(always)]
pub(super) fn q5_1_tail(x: &BlockQ5_1, y: &BlockQ8_1, iqs: usize, c: Contraction) -> Tail {
    assert!(iqs < 4 && iqs.is_multiple_of(2), "q5_1 iqs {iqs}");
    let (lo, hi) = q5_quants(&x.qs, &x.qh, iqs);
    let sumi = legacy_sumi(lo, hi, y, iqs);
    min_close(x.d(), x.m(), y, sumi, c)
}

#[inline(always)]
pub(super) fn q2_k_tail(x: &BlockQ2K, y: &[BlockQ8_1], iqs: usize, c: Contraction) -> Tail {
    assert!(iqs < 16, "q2_K iqs {iqs}");
    // QR2_K = 4, QI8_1 = 8.
    let bq8_offset = 4 * (iqs / 8);
    let scale_offset = iqs - iqs % 8 + (iqs % 8) / 4;
    let v = int_at(&x.qs, iqs);
    let mut sumf_d = 0.0f32;
    let mut sumf_m = 0.0f32;
    for i in 0..4 {
        let b8 = &y[bq8_offset + i];
        let u = int_at(&b8.qs, iqs % 8);
        let d8 = b8.d();
        let sc = x.scales[scale_offset + 2 * i] as i32;
        let vi = (v >> (2 * i)) & 0x0303_0303;
        let dot = dp4a(vi, u, 0) * (sc & 0xF);
        sumf_d = Contraction::mad(c.vec_dot_sums, d8, dot as f32, sumf_d);
        let m = (sc >> 4) * 0x0101_0101;
        sumf_m = Contraction::mad(c.vec_dot_sums, d8, dp4a(m, u, 0) as f32, sumf_m);
    }
    Tail::Value(c.combine.eval(x.d(), sumf_d, -1.0, x.dmin(), sumf_m))
}

#[inline(always)]
pub(super) fn q3_k_tail(x: &BlockQ3K, y: &[BlockQ8_1], iqs: usize, c: Contraction) -> Tail {
    assert!(iqs < 16, "q3_K iqs {iqs}");
    // QR3_K = 4, QI3_K / 2 = 8, QI8_1 = 8.
    let bq8_offset = 4 * (iqs / 8);
    let scale_offset = iqs - iqs % 8 + (iqs % 8) / 4;
    let vl = int_at(&x.qs, iqs);
    // The inverted mask, so that a clear bit subtracts 4 (only bits below 32 -
    // bq8_offset are read: logical and arithmetic shifts agree on them).
    let vh = !(int_at(&x.hmask, iqs % 8) as u32) >> bq8_offset;
    let mut sumf = 0.0f32;
    for i in 0..4 {
        let isc = scale_offset + 2 * i;
        let sc_low = (x.scales[isc % 8] >> (4 * (isc / 8))) & 0xF;
        let sc_high = ((x.scales[8 + isc % 4] >> (2 * (isc / 4))) & 3) << 4;
        let sc = (sc_low | sc_high) as i32 - 32;
        let vil = (vl >> (2 * i)) & 0x0303_0303;
        let vih = (((vh >> i) << 2) & 0x0404_0404) as i32;
        let vi = vsub4(vil, vih);
        let b8 = &y[bq8_offset + i];
        let dot = dp4a(vi, int_at(&b8.qs, iqs % 8), 0) * sc;
        sumf = Contraction::mad(c.vec_dot_sums, b8.d(), dot as f32, sumf);
    }
    Tail::Product(x.d(), sumf)
}

#[inline(always)]
pub(super) fn q5_k_tail(x: &BlockQ5K, y: &[BlockQ8_1], iqs: usize, c: Contraction) -> Tail {
    assert!(iqs < 32 && iqs.is_multiple_of(2), "q5_K iqs {iqs}");
    let bq8_offset = 2 * ((iqs / 2) / 4);
    let r = (iqs / 2) % 4;
    let ql = &x.qs[16 * bq8_offset..];
    let vl = [int_at(ql, r), int_at(ql, r + 4)];
    let vh = [int_at(&x.qh, r) as u32 >> bq8_offset, int_at(&x.qh, r + 4) as u32 >> bq8_offset];
    let (sc, m) = q4_k_scales_for_chunk(&x.scales, bq8_offset / 2);
    let mut sumf_d = 0.0f32;
    let mut sumf_m = 0.0f32;
    for i in 0..2 {
        let b8 = &y[bq8_offset + i];
        let d8 = b8.d();
        let u0 = int_at(&b8.qs, r);
        let u1 = int_at(&b8.qs, r + 4);
        let v0i = ((vl[0] >> (4 * i)) & 0x0F0F_0F0F) | (((vh[0] >> i) << 4) & 0x1010_1010) as i32;
        let v1i = ((vl[1] >> (4 * i)) & 0x0F0F_0F0F) | (((vh[1] >> i) << 4) & 0x1010_1010) as i32;
        let dot1 = dp4a(v0i, u0, dp4a(v1i, u1, 0));
        let dot2 = dp4a(0x0101_0101, u0, dp4a(0x0101_0101, u1, 0));
        sumf_d = Contraction::mad(c.vec_dot_sums, d8, (dot1 * sc[i] as i32) as f32, sumf_d);
        sumf_m = Contraction::mad(c.vec_dot_sums, d8, (dot2 * m[i] as i32) as f32, sumf_m);
    }
    Tail::Value(c.combine.eval(x.d(), sumf_d, -1.0, x.dmin(), sumf_m))
}

/// `get_int_from_table_16`: the table values of the eight nibbles of `q4`, the low
/// nibbles' (bytes in order) and then the high nibbles'.
#[inline(always)]
fn iq4_pair(q4: i32) -> (i32, i32) {
    let b = q4.to_le_bytes();
    let lo = i32::from_le_bytes(b.map(|v| KVALUES_IQ4NL[(v & 0xF) as usize] as u8));
    let hi = i32::from_le_bytes(b.map(|v| KVALUES_IQ4NL[(v >> 4) as usize] as u8));
    (lo, hi)
}

#[inline(always)]
pub(super) fn iq4_nl_tail(x: &BlockIq4Nl, y: &BlockQ8_1, iqs: usize) -> Tail {
    assert!(iqs < 4 && iqs.is_multiple_of(2), "iq4_nl iqs {iqs}");
    let mut sumi = 0i32;
    for l in 0..2 {
        let (lo, hi) = iq4_pair(int_at(&x.qs, iqs + l));
        sumi = dp4a(lo, int_at(&y.qs, iqs + l), sumi);
        sumi = dp4a(hi, int_at(&y.qs, iqs + l + 4), sumi);
    }
    Tail::Product(x.d() * y.d(), sumi as f32)
}

#[inline(always)]
pub(super) fn iq4_xs_tail(x: &BlockIq4Xs, y: &[BlockQ8_1], iqs: usize) -> Tail {
    assert!(iqs < 32 && iqs.is_multiple_of(4), "iq4_xs iqs {iqs}");
    let b8 = &y[iqs / 4];
    let mut sumi = 0i32;
    for j in 0..4 {
        let (lo, hi) = iq4_pair(int_at(&x.qs, iqs + j));
        sumi = dp4a(lo, int_at(&b8.qs, j), sumi);
        sumi = dp4a(hi, int_at(&b8.qs, j + 4), sumi);
    }
    let scales_h = u16::from_le_bytes(x.scales_h) as i32;
    let ls =
        ((x.scales_l[iqs / 8] as i32 >> (iqs & 4)) & 0xF) | (((scales_h >> (iqs / 2)) & 3) << 4);
    sumi *= ls - 32;
    Tail::Product(x.d() * b8.d(), sumi as f32)
}

/// Twin of `vec_dot_q4_K_q8_1` (with `vec_dot_q4_K_q8_1_impl_vmmq`): one thread's
/// share of superblock `x` against the eight q8_1 blocks `y[0..8]` that align with
/// it, for `iqs` in 0, 2, .., 30. Covers 16 values of sub-blocks 2c and 2c+1,
/// c = iqs/8.
///
/// # Panics
/// If `iqs` is out of range or `y` has fewer than 8 blocks.
pub fn vec_dot_q4_k_q8_1(x: &BlockQ4K, y: &[BlockQ8_1], iqs: usize, c: Contraction) -> f32 {
    q4_k_tail(x, y, iqs, c).value()
}

/// Twin of `vec_dot_q6_K_q8_1` (with `vec_dot_q6_K_q8_1_impl_mmvq`): one thread's share
/// of superblock `x` against the eight aligned q8_1 blocks `y[0..8]`, `iqs` in 0..32.
/// Covers 8 values. The returned `d * sumf` is rounded; inside the kernel the product
/// may instead be fused into the caller's sum ([`Contraction::accumulate`]).
///
/// # Panics
/// If `iqs` is out of range or `y` has fewer than 8 blocks.
pub fn vec_dot_q6_k_q8_1(x: &BlockQ6K, y: &[BlockQ8_1], iqs: usize, c: Contraction) -> f32 {
    q6_k_tail(x, y, iqs, c).value()
}

/// Twin of `vec_dot_q8_0_q8_1` (with `vec_dot_q8_0_q8_1_impl<float, 2>`): one thread's
/// share of block `x` against the q8_1 block `y`, `iqs` in 0, 2, 4, 6 (8 values).
/// Returns `(d_x * d_y) * (float)sumi`; inside the kernel the last product may be fused
/// into the caller's sum ([`Contraction::accumulate`]).
///
/// # Panics
/// If `iqs` is out of range.
pub fn vec_dot_q8_0_q8_1(x: &BlockQ8_0, y: &BlockQ8_1, iqs: usize) -> f32 {
    q8_0_tail(x, y, iqs).value()
}
