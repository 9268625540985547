//! Portable twin of ggml's NEON vec_dot kernels with `nrc == 1` (the decode path), as
//! GCC 12 builds them for aarch64 with ggml's flags (`-O3`, no `-ffp-contract`, so
//! `fast`): plain C expressions `a + b*c` are contracted into one fused multiply-add,
//! while the `vmlaq_n_f32` intrinsic stays a separate multiply and add (GCC implements
//! it as such). Integer parts (`sdot` over 16-byte vectors, `vaddvq_s32`) are exact.
//! Native counterpart: `tiercheck-aarch64` (`neon::vec_dot`), same names.
//!
//! Float order:
//! - `ggml_vec_dot_q4_0_q8_0`, `ggml_vec_dot_q8_0_q8_0`: blocks in pairs; for the pair
//!   (2i, 2i+1), four i32 lanes per block (lane t: bytes 4t..4t+3 of each 16-byte half),
//!   `sumv0[t] = sumv0[t] + round(float(p0[t]) * d0)` and the same for `sumv1` with the
//!   odd block, d = f16(x.d) * f16(y.d); then `sumf = vaddvq(sumv0) + vaddvq(sumv1)`
//!   with `vaddvq(v) = (v0 + v1) + (v2 + v3)`. An odd last block:
//!   `sumf = fma(float(sumi) * d_x, d_y, sumf)` (q4_0) or
//!   `sumf = fma(float(sumi), d_x * d_y, sumf)` (q8_0), as GCC contracts the scalar tail.
//! - `ggml_vec_dot_q4_K_q8_K`: per superblock, serially: `sumf = fma(-dmin,
//!   float(minsum), sumf)` (fmsub), then `sumf = fma(d, float(sumi1 + sumi2), sumf)`
//!   (fmadd), d = y.d * f16(x.d), dmin = y.d * f16(x.dmin).
//! - `ggml_vec_dot_q6_K_q8_K`: per superblock `sum = fma(f16(x.d) * y.d, float(isum -
//!   32 * isum_mins), sum)`.
//!
//! Each function runs its accelerated form where [`crate::accel`] allows (x86-64 with
//! AVX2 and FMA): the integer stages by byte instructions (exact), the float operations
//! above one for one (`vmlaq_n_f32`'s separate multiply and add as `_mm_mul_ps` and
//! `_mm_add_ps` on the same four lanes, `fma` as FMA3). The scalar code here is the
//! specification; the golden suite checks both forms on every case.

use crate::blocks::q4_k::scale_min_k4;
use crate::blocks::{BlockQ4K, BlockQ4_0, BlockQ6K, BlockQ8K, BlockQ8_0};

mod more;

pub use more::{
    q4_1_pairs, q5_0_pairs, q5_1_pairs, vec_dot_iq4_nl_q8_0, vec_dot_iq4_xs_q8_k,
    vec_dot_q2_k_q8_k, vec_dot_q3_k_q8_k, vec_dot_q4_1_q8_1, vec_dot_q5_0_q8_0,
    vec_dot_q5_0_q8_0_i8mm, vec_dot_q5_1_q8_1, vec_dot_q5_k_q8_k,
};

/// `vaddvq_f32`: pairwise, (v0 + v1) + (v2 + v3).
#[inline]
pub fn vaddvq_f32(v: [f32; 4]) -> f32 {
    (v[0] + v[1]) + (v[2] + v[3])
}

/// `sdot` lanes of two 32-byte halves: lane t sums bytes 4t..4t+3 of both halves.
#[inline]
pub(crate) fn sdot_lanes(xl: &[i8; 16], yl: &[i8], xh: &[i8; 16], yh: &[i8]) -> [i32; 4] {
    core::array::from_fn(|t| {
        (4 * t..4 * t + 4).map(|b| xl[b] as i32 * yl[b] as i32 + xh[b] as i32 * yh[b] as i32).sum()
    })
}

pub(crate) fn q4_0_halves(b: &BlockQ4_0) -> ([i8; 16], [i8; 16]) {
    (
        core::array::from_fn(|j| (b.qs[j] & 0xF) as i8 - 8),
        core::array::from_fn(|j| (b.qs[j] >> 4) as i8 - 8),
    )
}

pub(crate) fn q8_halves(b: &BlockQ8_0) -> ([i8; 16], [i8; 16]) {
    (core::array::from_fn(|j| b.qs[j] as i8), core::array::from_fn(|j| b.qs[16 + j] as i8))
}

/// `ggml_vec_dot_q4_0_q8_0`, NEON path, nrc = 1.
pub fn vec_dot_q4_0_q8_0(x: &[BlockQ4_0], y: &[BlockQ8_0]) -> f32 {
    crate::accelerated!(slots::VEC_DOT_Q4_0_Q8_0, (x, y));
    let nb = x.len().min(y.len());
    let mut sumv0 = [0.0f32; 4];
    let mut sumv1 = [0.0f32; 4];
    let mut ib = 0;
    let mut sumf = 0.0f32;
    if nb >= 2 {
        while ib + 1 < nb {
            for (sumv, b) in [(&mut sumv0, ib), (&mut sumv1, ib + 1)] {
                let (xl, xh) = q4_0_halves(&x[b]);
                let (yl, yh) = q8_halves(&y[b]);
                let p = sdot_lanes(&xl, &yl, &xh, &yh);
                let d = x[b].d() * y[b].d();
                for t in 0..4 {
                    sumv[t] += p[t] as f32 * d;
                }
            }
            ib += 2;
        }
        sumf = vaddvq_f32(sumv0) + vaddvq_f32(sumv1);
    }
    q4_0_tail(x, y, ib, nb, sumf)
}

/// The scalar tail of `ggml_vec_dot_q4_0_q8_0` (an odd last block).
#[inline(always)]
pub fn q4_0_tail(x: &[BlockQ4_0], y: &[BlockQ8_0], ib: usize, nb: usize, mut sumf: f32) -> f32 {
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

/// `ggml_vec_dot_q8_0_q8_0`, NEON path, nrc = 1.
pub fn vec_dot_q8_0_q8_0(x: &[BlockQ8_0], y: &[BlockQ8_0]) -> f32 {
    crate::accelerated!(slots::VEC_DOT_Q8_0_Q8_0, (x, y));
    let nb = x.len().min(y.len());
    let mut sumv0 = [0.0f32; 4];
    let mut sumv1 = [0.0f32; 4];
    let mut ib = 0;
    let mut sumf = 0.0f32;
    if nb >= 2 {
        while ib + 1 < nb {
            for (sumv, b) in [(&mut sumv0, ib), (&mut sumv1, ib + 1)] {
                let (xl, xh) = q8_halves(&x[b]);
                let (yl, yh) = q8_halves(&y[b]);
                let p = sdot_lanes(&xl, &yl, &xh, &yh);
                let d = x[b].d() * y[b].d();
                for t in 0..4 {
                    sumv[t] += p[t] as f32 * d;
                }
            }
            ib += 2;
        }
        sumf = vaddvq_f32(sumv0) + vaddvq_f32(sumv1);
    }
    q8_0_tail(x, y, ib, nb, sumf)
}

/// The scalar tail of `ggml_vec_dot_q8_0_q8_0` (an odd last block).
#[inline(always)]
pub fn q8_0_tail(x: &[BlockQ8_0], y: &[BlockQ8_0], ib: usize, nb: usize, mut sumf: f32) -> f32 {
    for b in ib..nb {
        let sumi: i32 = (0..32).map(|j| x[b].q(j) as i32 * y[b].q(j) as i32).sum();
        sumf = (sumi as f32).mul_add(x[b].d() * y[b].d(), sumf);
    }
    sumf
}

/// `ggml_vec_dot_q4_K_q8_K`, NEON path, nrc = 1.
pub fn vec_dot_q4_k_q8_k(x: &[BlockQ4K], y: &[BlockQ8K]) -> f32 {
    crate::accelerated!(slots::VEC_DOT_Q4_K_Q8_K, (x, y));
    let mut sumf = 0.0f32;
    for (xb, yb) in x.iter().zip(y) {
        let d = yb.d() * xb.d();
        let dmin = yb.d() * xb.dmin();
        let mut minsum = 0i32;
        for s in 0..8 {
            let (_, m) = scale_min_k4(s, &xb.scales);
            minsum += (yb.bsum(2 * s) as i32 + yb.bsum(2 * s + 1) as i32) * m as i32;
        }
        sumf = (-dmin).mul_add(minsum as f32, sumf);
        let (mut sumi1, mut sumi2) = (0i32, 0i32);
        for c in 0..4 {
            let q4 = &xb.qs[32 * c..32 * c + 32];
            let lo: i32 = (0..32).map(|l| (q4[l] & 0xF) as i32 * yb.q(64 * c + l) as i32).sum();
            let hi: i32 = (0..32).map(|l| (q4[l] >> 4) as i32 * yb.q(64 * c + 32 + l) as i32).sum();
            sumi1 += lo * scale_min_k4(2 * c, &xb.scales).0 as i32;
            sumi2 += hi * scale_min_k4(2 * c + 1, &xb.scales).0 as i32;
        }
        sumf = d.mul_add((sumi1 + sumi2) as f32, sumf);
    }
    sumf
}

/// The exact integer sum of one Q6_K superblock against one Q8_K block,
/// `sum_g sc_g * sum_{i in g} (q_i - 32) * a_i`, as ggml's aarch64 kernels form it: the
/// unsigned 6-bit values dotted with the activations, minus `32 * sum_g sc_g * bsum_g`
/// (every term fits in i32, so the grouping never changes the result).
pub fn q6_k_isum(xb: &BlockQ6K, yb: &BlockQ8K) -> i32 {
    crate::accelerated!(slots::Q6_K_ISUM, (xb, yb));
    let isum_mins: i32 = (0..16).map(|g| yb.bsum(g) as i32 * xb.scale(g) as i32).sum();
    let q = xb.quants();
    let mut isum = 0i32;
    for g in 0..16 {
        // quants() is value - 32; the kernel multiplies the unsigned 6-bit values.
        let dot: i32 = (16 * g..16 * g + 16).map(|i| (q[i] as i32 + 32) * yb.q(i) as i32).sum();
        isum += dot * xb.scale(g) as i32;
    }
    isum - 32 * isum_mins
}

/// `ggml_vec_dot_q6_K_q8_K`, NEON path, nrc = 1.
pub fn vec_dot_q6_k_q8_k(x: &[BlockQ6K], y: &[BlockQ8K]) -> f32 {
    crate::accelerated!(slots::VEC_DOT_Q6_K_Q8_K, (x, y));
    let mut sum = 0.0f32;
    for (xb, yb) in x.iter().zip(y) {
        sum = (xb.d() * yb.d()).mul_add(q6_k_isum(xb, yb) as f32, sum);
    }
    sum
}

/// The slots of this file's entry points (see [`crate::accel`]), filled by
/// `tiercheck-accel` (its `src/arch/aarch64/neon/vec_dot.rs`).
pub mod slots {
    // A slot's type is its entry point's signature, spelt out.
    #![allow(clippy::type_complexity)]

    use super::*;
    use crate::accel::Slot;
    use crate::blocks::{
        BlockIq4Nl, BlockIq4Xs, BlockQ2K, BlockQ3K, BlockQ4_1, BlockQ5K, BlockQ5_0, BlockQ5_1,
        BlockQ8_1,
    };

    /// [`vec_dot_q4_0_q8_0`].
    pub static VEC_DOT_Q4_0_Q8_0: Slot<fn(&[BlockQ4_0], &[BlockQ8_0]) -> f32> = Slot::new();
    /// [`vec_dot_q8_0_q8_0`].
    pub static VEC_DOT_Q8_0_Q8_0: Slot<fn(&[BlockQ8_0], &[BlockQ8_0]) -> f32> = Slot::new();
    /// [`vec_dot_q4_k_q8_k`].
    pub static VEC_DOT_Q4_K_Q8_K: Slot<fn(&[BlockQ4K], &[BlockQ8K]) -> f32> = Slot::new();
    /// [`q6_k_isum`].
    pub static Q6_K_ISUM: Slot<fn(&BlockQ6K, &BlockQ8K) -> i32> = Slot::new();
    /// [`vec_dot_q6_k_q8_k`].
    pub static VEC_DOT_Q6_K_Q8_K: Slot<fn(&[BlockQ6K], &[BlockQ8K]) -> f32> = Slot::new();
    /// [`q4_1_pairs`].
    pub static Q4_1_PAIRS: Slot<fn(&[BlockQ4_1], &[BlockQ8_1]) -> f32> = Slot::new();
    /// [`q5_0_pairs`].
    pub static Q5_0_PAIRS: Slot<fn(&[BlockQ5_0], &[BlockQ8_0]) -> f32> = Slot::new();
    /// [`q5_1_pairs`].
    pub static Q5_1_PAIRS: Slot<fn(&[BlockQ5_1], &[BlockQ8_1]) -> f32> = Slot::new();
    /// [`vec_dot_iq4_nl_q8_0`].
    pub static VEC_DOT_IQ4_NL_Q8_0: Slot<fn(&[BlockIq4Nl], &[BlockQ8_0]) -> f32> = Slot::new();
    /// [`vec_dot_iq4_xs_q8_k`].
    pub static VEC_DOT_IQ4_XS_Q8_K: Slot<fn(&[BlockIq4Xs], &[BlockQ8K]) -> f32> = Slot::new();
    /// [`vec_dot_q2_k_q8_k`].
    pub static VEC_DOT_Q2_K_Q8_K: Slot<fn(&[BlockQ2K], &[BlockQ8K]) -> f32> = Slot::new();
    /// [`vec_dot_q3_k_q8_k`].
    pub static VEC_DOT_Q3_K_Q8_K: Slot<fn(&[BlockQ3K], &[BlockQ8K]) -> f32> = Slot::new();
    /// [`vec_dot_q5_k_q8_k`].
    pub static VEC_DOT_Q5_K_Q8_K: Slot<fn(&[BlockQ5K], &[BlockQ8K]) -> f32> = Slot::new();
}
