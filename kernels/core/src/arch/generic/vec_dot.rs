//! ggml's generic vec_dot kernels (`ggml-cpu/quants.c`), as compiled without FMA: the
//! x64 tier library, where the integer parts are exact and every float operation is a
//! separate binary32 rounding in the order below.
//!
//! - `ggml_vec_dot_q4_0_q8_0_generic`: per block, sumi = sum (q4 - 8) * q8 (exact);
//!   `sumf += ((float)sumi * d_x) * d_y`, blocks in order, sumf starting at 0.
//! - `ggml_vec_dot_q8_0_q8_0_generic`: per block `sumf += (float)sumi * (d_x * d_y)`.
//! - `ggml_vec_dot_q4_K_q8_K_generic`: per superblock, an integer stage with eight i32
//!   lanes: lane l accumulates, over the 32 runs of 8 values, scale_s * (q8 * q4) of
//!   the run's l-th value (so lane l holds the values with index = l mod 8); and
//!   sumi = sum over 16 groups of `bsums[g] * min[g/2]`. Float stage per superblock:
//!   d = f16(x.d) * y.d; `sums[l] += d * (float)aux32[l]` for l = 0..8;
//!   dmin = f16(x.dmin) * y.d; `sumf -= dmin * (float)sumi`. After all superblocks:
//!   `sumf += sums[0]`, then `sums[1]`, ..., `sums[7]`, in order.
//! - `ggml_vec_dot_q6_K_q8_K_generic`: the same shape with q6 values (-32..31), 16
//!   scales (one per 16 values, two runs of 8 each) and no min term.

use crate::blocks::q4_k::scale_min_k4;
use crate::blocks::{BlockQ4K, BlockQ4_0, BlockQ6K, BlockQ8K, BlockQ8_0, QK, QK_K};

/// `ggml_vec_dot_q4_0_q8_0_generic`.
pub fn vec_dot_q4_0_q8_0(x: &[BlockQ4_0], y: &[BlockQ8_0]) -> f32 {
    let mut sumf = 0.0f32;
    for (xb, yb) in x.iter().zip(y) {
        let mut sumi0 = 0i32;
        let mut sumi1 = 0i32;
        for j in 0..QK / 2 {
            let v0 = (xb.qs[j] & 0x0F) as i32 - 8;
            let v1 = (xb.qs[j] >> 4) as i32 - 8;
            sumi0 += v0 * yb.q(j) as i32;
            sumi1 += v1 * yb.q(j + QK / 2) as i32;
        }
        let sumi = sumi0 + sumi1;
        sumf += sumi as f32 * xb.d() * yb.d();
    }
    sumf
}

/// `ggml_vec_dot_q8_0_q8_0_generic`.
pub fn vec_dot_q8_0_q8_0(x: &[BlockQ8_0], y: &[BlockQ8_0]) -> f32 {
    let mut sumf = 0.0f32;
    for (xb, yb) in x.iter().zip(y) {
        let mut sumi = 0i32;
        for j in 0..QK {
            sumi += xb.q(j) as i32 * yb.q(j) as i32;
        }
        sumf += sumi as f32 * (xb.d() * yb.d());
    }
    sumf
}

/// The 4-bit values of a q4_K superblock in value order (0..=15).
#[inline]
pub fn q4_k_values(b: &BlockQ4K) -> [i8; QK_K] {
    let mut a = [0i8; QK_K];
    for c in 0..4 {
        for l in 0..32 {
            a[64 * c + l] = (b.qs[32 * c + l] & 0xF) as i8;
            a[64 * c + 32 + l] = (b.qs[32 * c + l] >> 4) as i8;
        }
    }
    a
}

/// The eight 6-bit scales and eight 6-bit mins of a q4_K superblock.
#[inline]
pub fn q4_k_scales_mins(b: &BlockQ4K) -> ([u8; 8], [u8; 8]) {
    let mut sc = [0u8; 8];
    let mut m = [0u8; 8];
    for j in 0..8 {
        (sc[j], m[j]) = scale_min_k4(j, &b.scales);
    }
    (sc, m)
}

/// `ggml_vec_dot_q4_K_q8_K_generic`.
pub fn vec_dot_q4_k_q8_k(x: &[BlockQ4K], y: &[BlockQ8K]) -> f32 {
    let mut sums = [0.0f32; 8];
    let mut sumf = 0.0f32;
    for (xb, yb) in x.iter().zip(y) {
        let a = q4_k_values(xb);
        let (scales, mins) = q4_k_scales_mins(xb);
        let mut sumi = 0i32;
        for g in 0..QK_K / 16 {
            sumi += yb.bsum(g) as i32 * mins[g / 2] as i32;
        }
        let mut aux32 = [0i32; 8];
        for (run, chunk) in a.chunks_exact(8).enumerate() {
            let scale = scales[run / 4] as i32;
            for l in 0..8 {
                let prod = yb.q(8 * run + l) as i16 * chunk[l] as i16;
                aux32[l] += scale * prod as i32;
            }
        }
        let d = xb.d() * yb.d();
        for l in 0..8 {
            sums[l] += d * aux32[l] as f32;
        }
        let dmin = xb.dmin() * yb.d();
        sumf -= dmin * sumi as f32;
    }
    for s in sums {
        sumf += s;
    }
    sumf
}

/// `ggml_vec_dot_q6_K_q8_K_generic`.
pub fn vec_dot_q6_k_q8_k(x: &[BlockQ6K], y: &[BlockQ8K]) -> f32 {
    let mut sums = [0.0f32; 8];
    let mut sumf = 0.0f32;
    for (xb, yb) in x.iter().zip(y) {
        let a = xb.quants();
        let mut aux32 = [0i32; 8];
        for (run, chunk) in a.chunks_exact(8).enumerate() {
            let scale = xb.scale(run / 2) as i32;
            for l in 0..8 {
                let prod = yb.q(8 * run + l) as i16 * chunk[l] as i16;
                aux32[l] += scale * prod as i32;
            }
        }
        let d = xb.d() * yb.d();
        for l in 0..8 {
            sums[l] += d * aux32[l] as f32;
        }
    }
    for s in sums {
        sumf += s;
    }
    sumf
}
