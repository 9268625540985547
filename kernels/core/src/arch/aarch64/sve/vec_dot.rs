//! Portable twin of the vec_dot kernels of ggml's aarch64 SVE builds
//! (`ggml-cpu/arch/arm/quants.c` under `__ARM_FEATURE_SVE`, with i8mm) where they differ
//! from the NEON ones, at a 128-bit and a 256-bit vector length
//! (`ggml_cpu_get_sve_cnt() == 16` / `32`, the `case 128` / `case 256` branches). SVE's
//! `svmla` is a fused multiply-add (FMLA/FMAD), unlike GCC's NEON `vmlaq`. Integer parts
//! (`svdot`, `svmmla`) are exact.
//!
//! Float order, per output:
//!
//! - `ggml_vec_dot_q4_0_q8_0`, `ggml_vec_dot_q8_0_q8_0` (`nrc == 1`): blocks in pairs;
//!   four i32 lanes per block as NEON forms them (lane t: bytes 4t..4t+3 of each 16-byte
//!   half), `sumv0[t] = fma(float(p0[t]), d0, sumv0[t])` (even block) and `sumv1` (odd
//!   block), d = f16(x.d) * f16(y.d); then one FADDV of the lane sums:
//!   `sumf = ((sumv0[0]+sumv1[0]) + (sumv0[1]+sumv1[1])) + ((sumv0[2]+sumv1[2]) +
//!   (sumv0[3]+sumv1[3]))` (NEON: `vaddvq(sumv0) + vaddvq(sumv1)`). At 256 bits one
//!   vector holds a whole block: eight lanes (lane t: values 4t..4t+3, Q4_0's low nibbles
//!   being values 0..15 and its high ones 16..31), the same fused accumulation and one
//!   eight-lane FADDV. An odd last block as NEON (the scalar tail after the `#endif`).
//! - `ggml_vec_dot_q4_K_q8_K` and `ggml_vec_dot_q6_K_q8_K` with `nrc == 1`: the NEON
//!   order (one serial float sum per superblock, the same contractions), so the
//!   `aarch64-neon` twin's.
//! - `ggml_vec_dot_q4_K_q8_K` with `nrc == 2` (the SVE + i8mm branch, every vector
//!   length): per output and superblock `acc = fma(-(d_y * f16(dmin_x)), float(bias),
//!   fma(float(isum), d_y * f16(d_x), acc))`: the scale term first, then the min term,
//!   both fused (NEON i8mm: the min term first, both unfused).
//! - `ggml_vec_dot_q6_K_q8_K` with `nrc == 2`: `acc = fma(float(isum - 32 * isum_mins),
//!   d_y * f16(d_x), acc)` (NEON i8mm: unfused).
//! - `ggml_vec_dot_q4_0_q8_0`, `ggml_vec_dot_q8_0_q8_0` with `nrc == 2`: the NEON i8mm
//!   branch, which the SVE build compiles unchanged (the `aarch64-i8mm` twin's).
//! - `ggml_vec_dot_q2_K_q8_K`: W float lanes (4 at 128 bits, 8 at 256); per superblock
//!   first `acc[t] = fma(float(mins_t), -d_y * f16(dmin_x), acc[t])`, mins_t the lane's
//!   integer sum of `m_s * bsums[s]` over s = t, t + W, ... (the 4-bit mins of the
//!   16-value sub-blocks), then `acc[t] = fma(float(sumi_t), d_y * f16(d_x), acc[t])`,
//!   sumi_t the sum over the values i with `(i mod 4W) / 4 == t` of `sc_(i/16) * q_i *
//!   a_i` (the `svdot` lanes, scaled per sub-block); the result one FADDV of the lanes.
//! - `ggml_vec_dot_q3_K_q8_K`: the integer lanes reduced exactly (`svaddv_s32`), then
//!   `sum = fma(d_y * f16(d_x), float(isum), sum)`: the NEON order and bits.
//!
//! Native counterpart: `tiercheck-aarch64` (`sve::vec_dot`, the Q4_0/Q8_0 `nrc == 1`
//! kernels and Q2_K's float side in SVE assembly; the others are the native NEON and
//! i8mm kernels).
//!
//! The Q4_0/Q8_0 `nrc == 1` twins and the Q2_K twins run their accelerated form where
//! [`crate::accel`] allows (x86-64 with AVX2 and FMA): the `svdot` lanes by byte
//! instructions (exact), the fused accumulation as one FMA3 per lane on four (128-bit)
//! or eight (256-bit) float lanes, the lane sums and the FADDV tree as in the scalar
//! form.

use crate::arch::aarch64::i8mm::vec_dot2::{q4_k_isum_bias, Tile};
use crate::arch::aarch64::neon::vec_dot::{q4_0_halves, q6_k_isum, q8_halves, sdot_lanes};
use crate::blocks::{BlockQ2K, BlockQ4K, BlockQ4_0, BlockQ6K, BlockQ8K, BlockQ8_0};
use crate::elem::faddv;

/// `ggml_vec_dot_q2_K_q8_K` with `W` float lanes (the module doc's order).
fn q2_k_sve<const W: usize>(x: &[BlockQ2K], y: &[BlockQ8K]) -> f32 {
    let mut acc = [0.0f32; W];
    for (xb, yb) in x.iter().zip(y) {
        let d = yb.d() * xb.d();
        let dmin = -yb.d() * xb.dmin();
        let mins: [i32; W] = core::array::from_fn(|t| {
            (t..16).step_by(W).map(|s| (xb.scales[s] >> 4) as i32 * yb.bsum(s) as i32).sum()
        });
        for t in 0..W {
            acc[t] = (mins[t] as f32).mul_add(dmin, acc[t]);
        }
        let mut sumi = [0i32; W];
        for i in 0..crate::blocks::QK_K {
            let q = crate::blocks::q2_k::crumb(&xb.qs, i) as i32;
            let sc = (xb.scales[i / 16] & 0xF) as i32;
            let t = (i % (4 * W)) / 4;
            sumi[t] = sumi[t].wrapping_add(sc * q * yb.q(i) as i32);
        }
        for t in 0..W {
            acc[t] = (sumi[t] as f32).mul_add(d, acc[t]);
        }
    }
    faddv(&acc)
}

/// `ggml_vec_dot_q2_K_q8_K`, SVE at 128 bits.
pub fn vec_dot_q2_k_q8_k_sve128(x: &[BlockQ2K], y: &[BlockQ8K]) -> f32 {
    crate::accelerated!(slots::VEC_DOT_Q2_K_Q8_K_SVE128, (x, y));
    q2_k_sve::<4>(x, y)
}

/// `ggml_vec_dot_q2_K_q8_K`, SVE at 256 bits.
pub fn vec_dot_q2_k_q8_k_sve256(x: &[BlockQ2K], y: &[BlockQ8K]) -> f32 {
    crate::accelerated!(slots::VEC_DOT_Q2_K_Q8_K_SVE256, (x, y));
    q2_k_sve::<8>(x, y)
}

/// The pair loop of the SVE legacy kernels with `W` i32 lanes per block: `lanes(b)`
/// gives block b's lanes and `d(b)` its scale product.
fn pairs_sve<const W: usize>(
    nb: usize,
    lanes: impl Fn(usize) -> [i32; W],
    d: impl Fn(usize) -> f32,
) -> (usize, f32) {
    let mut sumv0 = [0.0f32; W];
    let mut sumv1 = [0.0f32; W];
    let mut ib = 0;
    while ib + 1 < nb {
        for (sumv, b) in [(&mut sumv0, ib), (&mut sumv1, ib + 1)] {
            let p = lanes(b);
            let db = d(b);
            for t in 0..W {
                sumv[t] = (p[t] as f32).mul_add(db, sumv[t]);
            }
        }
        ib += 2;
    }
    let s: [f32; W] = core::array::from_fn(|t| sumv0[t] + sumv1[t]);
    (ib, faddv(&s))
}

/// The eight `svdot` lanes of one 32-value block at 256 bits: lane t sums the products of
/// values 4t..4t+3 (the block's values in order: Q4_0's low nibbles, then its high ones).
fn lanes8(v: impl Fn(usize) -> i32) -> [i32; 8] {
    core::array::from_fn(|t| (4 * t..4 * t + 4).map(&v).sum())
}

/// `ggml_vec_dot_q4_0_q8_0`, SVE at 128 bits, nrc = 1.
pub fn vec_dot_q4_0_q8_0_sve128(x: &[BlockQ4_0], y: &[BlockQ8_0]) -> f32 {
    crate::accelerated!(slots::VEC_DOT_Q4_0_Q8_0_SVE128, (x, y));
    let nb = x.len().min(y.len());
    let (ib, mut sumf) = pairs_sve::<4>(
        nb,
        |b| {
            let (xl, xh) = q4_0_halves(&x[b]);
            let (yl, yh) = q8_halves(&y[b]);
            sdot_lanes(&xl, &yl, &xh, &yh)
        },
        |b| x[b].d() * y[b].d(),
    );
    for b in ib..nb {
        let mut sumi = 0i32;
        for j in 0..16 {
            sumi += ((x[b].qs[j] & 0xF) as i32 - 8) * y[b].q(j) as i32;
            sumi += ((x[b].qs[j] >> 4) as i32 - 8) * y[b].q(j + 16) as i32;
        }
        sumf = (sumi as f32 * x[b].d()).mul_add(y[b].d(), sumf);
    }
    sumf
}

/// `ggml_vec_dot_q8_0_q8_0`, SVE at 128 bits, nrc = 1.
pub fn vec_dot_q8_0_q8_0_sve128(x: &[BlockQ8_0], y: &[BlockQ8_0]) -> f32 {
    crate::accelerated!(slots::VEC_DOT_Q8_0_Q8_0_SVE128, (x, y));
    let nb = x.len().min(y.len());
    let (ib, mut sumf) = pairs_sve::<4>(
        nb,
        |b| {
            let (xl, xh) = q8_halves(&x[b]);
            let (yl, yh) = q8_halves(&y[b]);
            sdot_lanes(&xl, &yl, &xh, &yh)
        },
        |b| x[b].d() * y[b].d(),
    );
    for b in ib..nb {
        let sumi: i32 = (0..32).map(|j| x[b].q(j) as i32 * y[b].q(j) as i32).sum();
        sumf = (sumi as f32).mul_add(x[b].d() * y[b].d(), sumf);
    }
    sumf
}

/// The scalar tail of `ggml_vec_dot_q4_0_q8_0` after the SVE branch (an odd last block).
pub fn q4_0_tail(x: &BlockQ4_0, y: &BlockQ8_0, sumf: f32) -> f32 {
    let mut sumi = 0i32;
    for j in 0..16 {
        sumi += ((x.qs[j] & 0xF) as i32 - 8) * y.q(j) as i32;
        sumi += ((x.qs[j] >> 4) as i32 - 8) * y.q(j + 16) as i32;
    }
    (sumi as f32 * x.d()).mul_add(y.d(), sumf)
}

/// The scalar tail of `ggml_vec_dot_q8_0_q8_0` after the SVE branch.
pub fn q8_0_tail(x: &BlockQ8_0, y: &BlockQ8_0, sumf: f32) -> f32 {
    let sumi: i32 = (0..32).map(|j| x.q(j) as i32 * y.q(j) as i32).sum();
    (sumi as f32).mul_add(x.d() * y.d(), sumf)
}

/// `ggml_vec_dot_q4_0_q8_0`, SVE at 256 bits, nrc = 1: the block's 32 values (low
/// nibbles, then high ones, minus 8) against the 32 activations, eight lanes of four.
pub fn vec_dot_q4_0_q8_0_sve256(x: &[BlockQ4_0], y: &[BlockQ8_0]) -> f32 {
    crate::accelerated!(slots::VEC_DOT_Q4_0_Q8_0_SVE256, (x, y));
    let nb = x.len().min(y.len());
    let q = |b: &BlockQ4_0, i: usize| {
        (if i < 16 { b.qs[i] & 0xF } else { b.qs[i - 16] >> 4 }) as i32 - 8
    };
    let (ib, mut sumf) =
        pairs_sve::<8>(nb, |b| lanes8(|i| q(&x[b], i) * y[b].q(i) as i32), |b| x[b].d() * y[b].d());
    for b in ib..nb {
        sumf = q4_0_tail(&x[b], &y[b], sumf);
    }
    sumf
}

/// `ggml_vec_dot_q8_0_q8_0`, SVE at 256 bits, nrc = 1.
pub fn vec_dot_q8_0_q8_0_sve256(x: &[BlockQ8_0], y: &[BlockQ8_0]) -> f32 {
    crate::accelerated!(slots::VEC_DOT_Q8_0_Q8_0_SVE256, (x, y));
    let nb = x.len().min(y.len());
    let (ib, mut sumf) = pairs_sve::<8>(
        nb,
        |b| lanes8(|i| x[b].q(i) as i32 * y[b].q(i) as i32),
        |b| x[b].d() * y[b].d(),
    );
    for b in ib..nb {
        sumf = q8_0_tail(&x[b], &y[b], sumf);
    }
    sumf
}

/// `ggml_vec_dot_q4_K_q8_K` with `nrc == 2`, SVE + i8mm (any vector length).
pub fn vec_dot2_q4_k_q8_k_sve(x: [&[BlockQ4K]; 2], y: [&[BlockQ8K]; 2]) -> Tile {
    let mut t = [[0.0f32; 2]; 2];
    for b in 0..x[0].len() {
        for (yi, row) in t.iter_mut().enumerate() {
            for (xi, acc) in row.iter_mut().enumerate() {
                let (xb, yb) = (&x[xi][b], &y[yi][b]);
                let (isum, bias) = q4_k_isum_bias(xb, yb);
                let d = yb.d() * xb.d();
                let dmin = -(yb.d() * xb.dmin());
                *acc = dmin.mul_add(bias as f32, (isum as f32).mul_add(d, *acc));
            }
        }
    }
    t
}

/// `ggml_vec_dot_q6_K_q8_K` with `nrc == 2`, SVE + i8mm (any vector length).
pub fn vec_dot2_q6_k_q8_k_sve(x: [&[BlockQ6K]; 2], y: [&[BlockQ8K]; 2]) -> Tile {
    let mut t = [[0.0f32; 2]; 2];
    for b in 0..x[0].len() {
        for (yi, row) in t.iter_mut().enumerate() {
            for (xi, acc) in row.iter_mut().enumerate() {
                let (xb, yb) = (&x[xi][b], &y[yi][b]);
                *acc = (q6_k_isum(xb, yb) as f32).mul_add(yb.d() * xb.d(), *acc);
            }
        }
    }
    t
}

/// The slots of this file's entry points (see [`crate::accel`]), filled by
/// `tiercheck-accel` (its `src/arch/aarch64/sve/vec_dot.rs`).
pub mod slots {
    // A slot's type is its entry point's signature, spelt out.
    #![allow(clippy::type_complexity)]

    use super::*;
    use crate::accel::Slot;

    /// [`vec_dot_q4_0_q8_0_sve128`].
    pub static VEC_DOT_Q4_0_Q8_0_SVE128: Slot<fn(&[BlockQ4_0], &[BlockQ8_0]) -> f32> = Slot::new();
    /// [`vec_dot_q8_0_q8_0_sve128`].
    pub static VEC_DOT_Q8_0_Q8_0_SVE128: Slot<fn(&[BlockQ8_0], &[BlockQ8_0]) -> f32> = Slot::new();
    /// [`vec_dot_q4_0_q8_0_sve256`].
    pub static VEC_DOT_Q4_0_Q8_0_SVE256: Slot<fn(&[BlockQ4_0], &[BlockQ8_0]) -> f32> = Slot::new();
    /// [`vec_dot_q8_0_q8_0_sve256`].
    pub static VEC_DOT_Q8_0_Q8_0_SVE256: Slot<fn(&[BlockQ8_0], &[BlockQ8_0]) -> f32> = Slot::new();
    /// [`vec_dot_q2_k_q8_k_sve128`].
    pub static VEC_DOT_Q2_K_Q8_K_SVE128: Slot<fn(&[BlockQ2K], &[BlockQ8K]) -> f32> = Slot::new();
    /// [`vec_dot_q2_k_q8_k_sve256`].
    pub static VEC_DOT_Q2_K_Q8_K_SVE256: Slot<fn(&[BlockQ2K], &[BlockQ8K]) -> f32> = Slot::new();
}
