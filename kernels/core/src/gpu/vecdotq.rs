//! One thread's share of an MMVQ dot product (`ggml-cuda/vecdotq.cuh`): the integer
//! parts exactly as the `dp4a` instructions compute them, the float parts in the
//! device's order, with the multiply-adds the compiler fuses chosen by [`Contraction`].
//! See the parent module for the order in words.

use crate::blocks::{BlockQ4K, BlockQ6K, BlockQ8_0, BlockQ8_1};

/// Which multiply-adds of the MMVQ path the device compiler fused into one rounding.
///
/// Unfused, every product and sum below is its own binary32 rounding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Contraction {
    /// `sumf += d8_i * (float)int_i` inside `vec_dot_q4_K_q8_1` (both `sumf_d` and
    /// `sumf_m`) and `vec_dot_q6_K_q8_1` as `fma(d8_i, int_i, sumf)`.
    pub vec_dot_sums: bool,
    /// How q4_K's `dm.x * sumf_d - dm.y * sumf_m` is evaluated.
    pub q4_k_combine: Q4KCombine,
    /// The kernel's `tmp += vec_dot(...)` as one fma when the inlined `vec_dot` ends in
    /// a multiply: q6_K `fma(d, sumf, tmp)`, q8_0 `fma(d_x * d_y, (float)sumi, tmp)`.
    pub accumulate: bool,
}

/// The evaluation of q4_K's `dm.x * sumf_d - dm.y * sumf_m`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Q4KCombine {
    /// Two products and a subtraction, three roundings.
    Unfused,
    /// `fma(dm.x, sumf_d, -(dm.y * sumf_m))`: the first product fused (LLVM's DAG
    /// combiner's choice when both products have one use).
    FuseFirst,
    /// `fma(-dm.y, sumf_m, dm.x * sumf_d)`: the second product fused.
    FuseSecond,
}

impl Contraction {
    /// Nothing fused (`-ffp-contract=off`).
    pub const OFF: Contraction =
        Contraction { vec_dot_sums: false, q4_k_combine: Q4KCombine::Unfused, accumulate: false };
    /// HIP clang's default, `-ffp-contract=fast-honor-pragmas`, on an AMD GPU without
    /// packed f32 arithmetic (RDNA2, gfx1030): every multiply that feeds an add fused,
    /// q4_K's combine as `fma(dm.x, sumf_d, -(dm.y * sumf_m))`. Read from the
    /// disassembly of `kernels/hip`'s gfx1030 code object (see the parent module).
    pub const HIP_CLANG: Contraction =
        Contraction { vec_dot_sums: true, q4_k_combine: Q4KCombine::FuseFirst, accumulate: true };

    /// HIP clang's default on CDNA2 (gfx90a), which has packed f32 instructions: as
    /// [`Contraction::HIP_CLANG`] except that the SLP vectorizer pairs q4_K's two
    /// products `dm.x * sumf_d` and `dm.y * sumf_m` into one `v_pk_mul_f32` before the
    /// subtraction, so that combine is **unfused** (and `sumf_d`/`sumf_m` are built by
    /// `v_pk_fma_f32`, fused as before). Read from the disassembly of `kernels/hip`'s
    /// gfx90a code object.
    pub const HIP_CLANG_GFX90A: Contraction =
        Contraction { vec_dot_sums: true, q4_k_combine: Q4KCombine::Unfused, accumulate: true };

    /// nvcc's default (`--fmad=true`, implied by ggml's `-use_fast_math`) for ggml's
    /// MMVQ on sm_80 and sm_90: the same fusions as [`Contraction::HIP_CLANG`] (ptxas
    /// contracts `dm.x * sumf_d - dm.y * sumf_m` into `fma(dm.x, sumf_d, -(dm.y *
    /// sumf_m))`). Read from the SASS of ggml's own `mmvq.cu`.
    pub const NVCC: Contraction =
        Contraction { vec_dot_sums: true, q4_k_combine: Q4KCombine::FuseFirst, accumulate: true };

    /// `acc + a * b`, fused when `fuse`.
    #[inline(always)]
    fn mad(fuse: bool, a: f32, b: f32, acc: f32) -> f32 {
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
pub(super) fn q4_k_scales_for_chunk(scales: &[u8; 12], j: usize) -> ([u8; 2], [u8; 2]) {
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
    let dx = x.d();
    let dy = x.dmin();
    Tail::Value(match c.q4_k_combine {
        Q4KCombine::Unfused => dx * sumf_d - dy * sumf_m,
        Q4KCombine::FuseFirst => dx.mul_add(sumf_d, -(dy * sumf_m)),
        Q4KCombine::FuseSecond => (-dy).mul_add(sumf_m, dx * sumf_d),
    })
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
