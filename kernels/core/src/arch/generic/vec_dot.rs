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
//! - `ggml_vec_dot_q5_K_q8_K_generic`: q4_K's shape with 5-bit values (0..31).
//! - `ggml_vec_dot_q3_K_q8_K_generic`: q6_K's shape with 3-bit values (-4..3) and scales
//!   code - 32.
//! - `ggml_vec_dot_q2_K_q8_K_generic`: per superblock one integer sum `isum` of
//!   scale_s * (q8 * q2) and `summs` of `bsums[s] * min_s`; `sumf += dall*(float)isum -
//!   dmin*(float)summs` with `dall = y.d * f16(x.d)`, `dmin = y.d * f16(x.dmin)` (each
//!   product and the difference rounded, then the sum).
//! - `ggml_vec_dot_q4_1_q8_1_generic` / `q5_1_q8_1`: per block
//!   `sumf += (d_x*d_y)*(float)sumi + m_x*s_y` (four roundings in that order, then the sum).
//! - `ggml_vec_dot_q5_0_q8_0_generic`: per block `sumf += (d_x*d_y)*(float)sumi` (not
//!   q4_0's `(sumi*d_x)*d_y`).
//! - `ggml_vec_dot_iq4_nl_q8_0_generic`: per block `sumf += (d_y*d_x)*(float)sumi` over the
//!   table values; `ggml_vec_dot_iq4_xs_q8_K_generic`: per 32-value sub-block
//!   `sumf += (d4d8*(float)(code - 32))*(float)sumi` with `d4d8 = f16(x.d)*y.d`.

use crate::blocks::iq4_nl::KVALUES_IQ4NL;
use crate::blocks::q2_k::crumb;
use crate::blocks::q4_k::scale_min_k4;
use crate::blocks::q5_0::quants5;
use crate::blocks::{
    BlockIq4Nl, BlockIq4Xs, BlockQ2K, BlockQ3K, BlockQ4K, BlockQ4_0, BlockQ4_1, BlockQ5K,
    BlockQ5_0, BlockQ5_1, BlockQ6K, BlockQ8K, BlockQ8_0, BlockQ8_1, QK, QK_K,
};

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
    vec_dot_with_mins(x, y, |b| {
        let (scales, mins) = q4_k_scales_mins(b);
        (q4_k_values(b), scales, mins, b.d(), b.dmin())
    })
}

/// The q4_K / q5_K generic kernel: per superblock the eight integer lanes of
/// `scale * (q8 * a)` ([`lanes8`]) and `sumi` of `bsums[g] * min[g/2]`; `sums[l] +=
/// (d_x*d_y) * lane_l`, `sumf -= (dmin_x*d_y) * sumi`; at the end `sumf += sums[0..8]` in
/// order. `parts` gives a superblock's values, scales, mins, d and dmin.
fn vec_dot_with_mins<B>(
    x: &[B],
    y: &[BlockQ8K],
    parts: impl Fn(&B) -> ([i8; QK_K], [u8; 8], [u8; 8], f32, f32),
) -> f32 {
    let mut sums = [0.0f32; 8];
    let mut sumf = 0.0f32;
    for (xb, yb) in x.iter().zip(y) {
        let (a, scales, mins, xd, xdmin) = parts(xb);
        let mut sumi = 0i32;
        for g in 0..QK_K / 16 {
            sumi += yb.bsum(g) as i32 * mins[g / 2] as i32;
        }
        let aux32 = lanes8(&a, yb, |run| scales[run / 4] as i32);
        let d = xd * yb.d();
        for l in 0..8 {
            sums[l] += d * aux32[l] as f32;
        }
        let dmin = xdmin * yb.d();
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

/// The eight i32 lanes of the K-quant generic kernels: lane l accumulates, over the runs
/// of 8 values, `scale(run) * (q8 * a)` of the run's l-th value (the product as int16).
#[inline]
fn lanes8(a: &[i8; QK_K], y: &BlockQ8K, scale: impl Fn(usize) -> i32) -> [i32; 8] {
    let mut aux32 = [0i32; 8];
    for (run, chunk) in a.chunks_exact(8).enumerate() {
        let sc = scale(run);
        for l in 0..8 {
            let prod = y.q(8 * run + l) as i16 * chunk[l] as i16;
            aux32[l] += sc * prod as i32;
        }
    }
    aux32
}

/// `ggml_vec_dot_q5_K_q8_K_generic`.
pub fn vec_dot_q5_k_q8_k(x: &[BlockQ5K], y: &[BlockQ8K]) -> f32 {
    vec_dot_with_mins(x, y, |b| {
        let mut a = [0i8; QK_K];
        for (i, a) in a.iter_mut().enumerate() {
            *a = b.quant(i) as i8;
        }
        let (mut scales, mut mins) = ([0u8; 8], [0u8; 8]);
        for j in 0..8 {
            (scales[j], mins[j]) = scale_min_k4(j, &b.scales);
        }
        (a, scales, mins, b.d(), b.dmin())
    })
}

/// `ggml_vec_dot_q3_K_q8_K_generic`.
pub fn vec_dot_q3_k_q8_k(x: &[BlockQ3K], y: &[BlockQ8K]) -> f32 {
    let mut sums = [0.0f32; 8];
    let mut sumf = 0.0f32;
    for (xb, yb) in x.iter().zip(y) {
        let mut a = [0i8; QK_K];
        for (i, a) in a.iter_mut().enumerate() {
            *a = xb.quant(i) as i8;
        }
        let aux32 = lanes8(&a, yb, |run| xb.scale(run / 2) as i32 - 32);
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

/// `ggml_vec_dot_q2_K_q8_K_generic`.
pub fn vec_dot_q2_k_q8_k(x: &[BlockQ2K], y: &[BlockQ8K]) -> f32 {
    let mut sumf = 0.0f32;
    for (xb, yb) in x.iter().zip(y) {
        let mut summs = 0i32;
        for s in 0..16 {
            summs += yb.bsum(s) as i32 * (xb.scales[s] >> 4) as i32;
        }
        let dall = yb.d() * xb.d();
        let dmin = yb.d() * xb.dmin();
        let mut isum = 0i32;
        for s in 0..16 {
            let mut isuml = 0i32;
            for l in 0..16 {
                let i = 16 * s + l;
                isuml += yb.q(i) as i32 * crumb(&xb.qs, i) as i32;
            }
            isum += (xb.scales[s] & 0xF) as i32 * isuml;
        }
        sumf += dall * isum as f32 - dmin * summs as f32;
    }
    sumf
}

/// `sum(q_x * q_y)` of 32 unsigned 4- or 5-bit quants and a q8 block's quants.
#[inline]
fn dot32(q: &[u8; QK], y: &[u8; QK]) -> i32 {
    q.iter().zip(y).map(|(&a, &b)| a as i32 * (b as i8) as i32).sum()
}

/// `ggml_vec_dot_q4_1_q8_1_generic`.
pub fn vec_dot_q4_1_q8_1(x: &[BlockQ4_1], y: &[BlockQ8_1]) -> f32 {
    let mut sumf = 0.0f32;
    for (xb, yb) in x.iter().zip(y) {
        let mut q = [0u8; QK];
        for j in 0..QK / 2 {
            (q[j], q[j + QK / 2]) = (xb.qs[j] & 0x0F, xb.qs[j] >> 4);
        }
        let sumi = dot32(&q, &yb.qs);
        sumf += (xb.d() * yb.d()) * sumi as f32 + xb.m() * yb.s();
    }
    sumf
}

/// `ggml_vec_dot_q5_1_q8_1_generic`.
pub fn vec_dot_q5_1_q8_1(x: &[BlockQ5_1], y: &[BlockQ8_1]) -> f32 {
    let mut sumf = 0.0f32;
    for (xb, yb) in x.iter().zip(y) {
        let sumi = dot32(&quants5(&xb.qs, xb.qh), &yb.qs);
        sumf += (xb.d() * yb.d()) * sumi as f32 + xb.m() * yb.s();
    }
    sumf
}

/// `ggml_vec_dot_q5_0_q8_0_generic`.
pub fn vec_dot_q5_0_q8_0(x: &[BlockQ5_0], y: &[BlockQ8_0]) -> f32 {
    let mut sumf = 0.0f32;
    for (xb, yb) in x.iter().zip(y) {
        let q = quants5(&xb.qs, xb.qh);
        let sumi: i32 = (0..QK).map(|j| (q[j] as i32 - 16) * yb.q(j) as i32).sum();
        sumf += (xb.d() * yb.d()) * sumi as f32;
    }
    sumf
}

/// `sum(table[index] * q8)` over 32 values: 16 bytes of packed indices against 32 int8.
#[inline]
fn dot_iq4(qs: &[u8], q8: impl Fn(usize) -> i8) -> i32 {
    let (mut s1, mut s2) = (0i32, 0i32);
    for j in 0..16 {
        s1 += q8(j) as i32 * KVALUES_IQ4NL[(qs[j] & 0xF) as usize] as i32;
        s2 += q8(j + 16) as i32 * KVALUES_IQ4NL[(qs[j] >> 4) as usize] as i32;
    }
    s1 + s2
}

/// `ggml_vec_dot_iq4_nl_q8_0_generic`.
pub fn vec_dot_iq4_nl_q8_0(x: &[BlockIq4Nl], y: &[BlockQ8_0]) -> f32 {
    let mut sumf = 0.0f32;
    for (xb, yb) in x.iter().zip(y) {
        let d = yb.d() * xb.d();
        sumf += d * dot_iq4(&xb.qs, |j| yb.q(j)) as f32;
    }
    sumf
}

/// `ggml_vec_dot_iq4_xs_q8_K_generic`.
pub fn vec_dot_iq4_xs_q8_k(x: &[BlockIq4Xs], y: &[BlockQ8K]) -> f32 {
    let mut sumf = 0.0f32;
    for (xb, yb) in x.iter().zip(y) {
        let d4d8 = xb.d() * yb.d();
        for s in 0..8 {
            let dl = d4d8 * (xb.scale(s) as i32 - 32) as f32;
            let sumi = dot_iq4(&xb.qs[16 * s..16 * s + 16], |j| yb.q(32 * s + j));
            sumf += dl * sumi as f32;
        }
    }
    sumf
}
