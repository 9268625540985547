//! Portable twin of the `x86_64-avx512` lane's vec_dot kernels: a schedule of our own
//! (it reproduces no ggml kernel) that shows what a 16-lane float accumulator does to
//! the bits of the same integer sums. Each function here has a native counterpart with
//! the same name in `tiercheck-x86_64` (`avx512::vec_dot`), loop for loop.
//!
//! Integer stage: one instruction, `_mm512_dpbusd_epi32` (AVX-512 VNNI), modelled by
//! [`dpbusd`]. It multiplies 64 unsigned bytes by 64 signed bytes and adds each group of
//! four products into one i32 lane, so lane t holds bytes 4t..4t+3 of a 64-byte
//! chunk. The four products are summed exactly in 32 bits (unlike `maddubs_epi16`
//! there is no saturating i16 intermediate); the lane is therefore exact for *every*
//! byte input, and the lane does not depend on which of the two paths a CPU has.
//! Signed weight codes q are fed as unsigned codes u = q + o, and the offset is removed
//! per lane with a second dpbusd of the constant o against the same activation bytes:
//! lane = dpbusd(u, y) - dpbusd(o, y) = sum q*y exactly (o = 8 for q4_0, 128 for q8_0,
//! where u = q XOR 0x80, and 32 for q6_K). Sub-block scales multiply whole lanes
//! (`_mm512_mullo_epi32`, wrapping, exact for valid blocks). So every integer lane is
//! the exact integer dot of its values; q8_0 codes of -128 included (the AVX2 sign
//! trick wraps there, this lane does not).
//!
//! Float stage: 16 f32 lanes `acc[0..16]`, each updated by one fused multiply-add per
//! block pair or superblock, then [`hsum_float_16`]: `r[t] = acc[t + 8] + acc[t]` for
//! t < 8 (512 -> 256 bits), then the tree of [`hsum_float_8`]:
//! `s[t] = r[t + 4] + r[t]` for t < 4, then `(s[0] + s[2]) + (s[1] + s[3])`.
//!
//! - `vec_dot_q4_0_q8_0` / `vec_dot_q8_0_q8_0`: blocks in pairs (2i, 2i+1); block 2i
//!   fills bytes 0..32 of the register (lanes 0..8), block 2i+1 bytes 32..64 (lanes
//!   8..16); within a block, byte j is the block's value j (q4_0: values 0..16 are the
//!   low nibbles, 16..32 the high nibbles). `d_b = f16(x_b.d) * f16(y_b.d)` (one
//!   rounding) and `acc[t] = fma(d_(2i + t/8), float(lane[t]), acc[t])`. An odd final
//!   block fills bytes 0..32 only and updates lanes 0..8 (a masked FMA); lanes 8..16
//!   keep their values. End: `hsum_float_16(acc)`.
//! - `vec_dot_q4_K_q8_K`: per superblock `d = y.d * f16(x.d)`,
//!   `dmin = -y.d * f16(x.dmin)`. Chunk c (0..4) is 64 values: bytes 0..32 the low
//!   nibbles of `qs[32c..32c+32]` (sub-block 2c), bytes 32..64 the high nibbles
//!   (sub-block 2c+1), against `y.qs[64c..64c+64]`;
//!   `sumi[t] += sc[2c + t/8] * lane[t]` over the four chunks. Min lanes:
//!   `m[t] = min[t/2] * bsums[t]` (`bsums[t]` covers values 16t..16t+16, in sub-block
//!   t/2). Then `acc[t] = fma(d, float(sumi[t]), acc[t])` and
//!   `acc_m[t] = fma(dmin, float(m[t]), acc_m[t])`. End:
//!   `hsum_float_16(acc + acc_m)`, the two accumulators added lane by lane first.
//! - `vec_dot_q6_K_q8_K`: per superblock `d = y.d * f16(x.d)`. Chunk (n, p), for the
//!   half n (0..2) and p (0..2), is the 64 values 128n + 64p + b as unsigned codes
//!   q + 32 (0..64); the offset comes off per lane as `dpbusd(32, y)`. Lane t lies in
//!   the 16-value sub-block 8n + 4p + t/4, so `sumi[t] += sc[8n + 4p + t/4] * lane[t]`
//!   over the four chunks. Then `acc[t] = fma(d, float(sumi[t]), acc[t])`; end
//!   `hsum_float_16(acc)`.
//!
//! Error: every product term passes through at most k/64 + 1 (legacy types) or k/256
//! (K-quants) serial FMAs in its lane, one lane-wise add (q4_K) and four tree levels,
//! far fewer roundings than the harness's rigorous bound allows (`gamma_(k/16 + 67)`).

use crate::arch::x86_64::avx2::vec_dot::hsum_float_8;
use crate::blocks::q4_k::scale_min_k4;
use crate::blocks::{BlockQ4K, BlockQ4_0, BlockQ6K, BlockQ8K, BlockQ8_0, QK_K};

/// Float lanes of one 512-bit register.
pub const LANES: usize = 16;

/// The 16-lane horizontal sum: (hi256 + lo256), i.e. `r[t] = a[t + 8] + a[t]` for
/// t < 8, then [`hsum_float_8`] of r.
#[inline]
pub fn hsum_float_16(a: [f32; LANES]) -> f32 {
    let r: [f32; 8] = core::array::from_fn(|t| a[t + 8] + a[t]);
    hsum_float_8(r)
}

/// `_mm512_dpbusd_epi32` with a zero accumulator: lane t = the sum of the four products
/// `a[4t + j] * b[4t + j]` (u8 times i8), exact (at most 4 * 255 * 128 in magnitude).
#[inline]
pub fn dpbusd(a: &[u8; 64], b: &[i8; 64]) -> [i32; LANES] {
    core::array::from_fn(|t| (0..4).map(|j| a[4 * t + j] as i32 * b[4 * t + j] as i32).sum())
}

/// The 32 q4_0 nibble codes (0..16, offset 8 not removed) in value order.
#[inline]
fn q4_0_codes(xb: &BlockQ4_0) -> [u8; 32] {
    core::array::from_fn(|j| if j < 16 { xb.qs[j] & 0xF } else { xb.qs[j - 16] >> 4 })
}

/// 64 bytes: `lo` in bytes 0..32, `hi` in bytes 32..64.
#[inline]
fn join<T: Copy + Default>(lo: &[T; 32], hi: &[T; 32]) -> [T; 64] {
    core::array::from_fn(|b| if b < 32 { lo[b] } else { hi[b - 32] })
}

/// The signed activation codes of a q8_0 block.
#[inline]
fn q8_0_codes(yb: &BlockQ8_0) -> [i8; 32] {
    core::array::from_fn(|j| yb.qs[j] as i8)
}

/// Accumulate one block pair (lo = lanes 0..8, hi = lanes 8..16), or one block in
/// lanes 0..8 (`lanes` = 8): `acc[t] = fma(d[t / 8], float(raw[t] - off[t]), acc[t])`.
#[inline]
fn fma_lanes(
    acc: &mut [f32; LANES],
    d: [f32; 2],
    raw: [i32; LANES],
    off: [i32; LANES],
    lanes: usize,
) {
    for t in 0..lanes {
        let lane = raw[t].wrapping_sub(off[t]);
        acc[t] = d[t / 8].mul_add(lane as f32, acc[t]);
    }
}

/// q4_0 times q8_0, 16 lanes: block pairs, an odd final block in lanes 0..8.
pub fn vec_dot_q4_0_q8_0(x: &[BlockQ4_0], y: &[BlockQ8_0]) -> f32 {
    let nb = x.len().min(y.len());
    let (x, y) = (&x[..nb], &y[..nb]);
    let eight = [8u8; 64];
    let mut acc = [0.0f32; LANES];
    for (xp, yp) in x.chunks_exact(2).zip(y.chunks_exact(2)) {
        let d = [xp[0].d() * yp[0].d(), xp[1].d() * yp[1].d()];
        let qx = join(&q4_0_codes(&xp[0]), &q4_0_codes(&xp[1]));
        let qy = join(&q8_0_codes(&yp[0]), &q8_0_codes(&yp[1]));
        fma_lanes(&mut acc, d, dpbusd(&qx, &qy), dpbusd(&eight, &qy), LANES);
    }
    if let ([xb], [yb]) = (x.chunks_exact(2).remainder(), y.chunks_exact(2).remainder()) {
        let d = [xb.d() * yb.d(), 0.0];
        let qx = join(&q4_0_codes(xb), &[0; 32]);
        let qy = join(&q8_0_codes(yb), &[0; 32]);
        fma_lanes(&mut acc, d, dpbusd(&qx, &qy), dpbusd(&eight, &qy), LANES / 2);
    }
    hsum_float_16(acc)
}

/// The q8_0 weight codes as unsigned bytes q + 128 (`q XOR 0x80`).
#[inline]
fn q8_0_biased(xb: &BlockQ8_0) -> [u8; 32] {
    core::array::from_fn(|j| xb.qs[j] ^ 0x80)
}

/// q8_0 times q8_0, 16 lanes: block pairs, an odd final block in lanes 0..8.
pub fn vec_dot_q8_0_q8_0(x: &[BlockQ8_0], y: &[BlockQ8_0]) -> f32 {
    let nb = x.len().min(y.len());
    let (x, y) = (&x[..nb], &y[..nb]);
    let bias = [128u8; 64];
    let mut acc = [0.0f32; LANES];
    for (xp, yp) in x.chunks_exact(2).zip(y.chunks_exact(2)) {
        let d = [xp[0].d() * yp[0].d(), xp[1].d() * yp[1].d()];
        let qx = join(&q8_0_biased(&xp[0]), &q8_0_biased(&xp[1]));
        let qy = join(&q8_0_codes(&yp[0]), &q8_0_codes(&yp[1]));
        fma_lanes(&mut acc, d, dpbusd(&qx, &qy), dpbusd(&bias, &qy), LANES);
    }
    if let ([xb], [yb]) = (x.chunks_exact(2).remainder(), y.chunks_exact(2).remainder()) {
        let d = [xb.d() * yb.d(), 0.0];
        // The zero upper half gives raw = off = 0 there; those lanes are not updated.
        let qx = join(&q8_0_biased(xb), &[0; 32]);
        let qy = join(&q8_0_codes(yb), &[0; 32]);
        fma_lanes(&mut acc, d, dpbusd(&qx, &qy), dpbusd(&bias, &qy), LANES / 2);
    }
    hsum_float_16(acc)
}

/// q4_K times q8_K, 16 scale lanes plus 16 min lanes.
pub fn vec_dot_q4_k_q8_k(x: &[BlockQ4K], y: &[BlockQ8K]) -> f32 {
    let mut acc = [0.0f32; LANES];
    let mut acc_m = [0.0f32; LANES];
    for (xb, yb) in x.iter().zip(y) {
        let d = yb.d() * xb.d();
        let dmin = -yb.d() * xb.dmin();
        let mut sc = [0i32; 8];
        let mut mn = [0i32; 8];
        for j in 0..8 {
            let (s, m) = scale_min_k4(j, &xb.scales);
            sc[j] = s as i32;
            mn[j] = m as i32;
        }
        let mins: [i32; LANES] = core::array::from_fn(|t| mn[t / 2] * yb.bsum(t) as i32);
        let mut sumi = [0i32; LANES];
        for c in 0..QK_K / 64 {
            let q4 = &xb.qs[32 * c..32 * c + 32];
            let qx: [u8; 64] =
                core::array::from_fn(|b| if b < 32 { q4[b] & 0xF } else { q4[b - 32] >> 4 });
            let qy: [i8; 64] = core::array::from_fn(|b| yb.qs[64 * c + b] as i8);
            let raw = dpbusd(&qx, &qy);
            for t in 0..LANES {
                sumi[t] = sumi[t].wrapping_add(sc[2 * c + t / 8].wrapping_mul(raw[t]));
            }
        }
        for t in 0..LANES {
            acc[t] = d.mul_add(sumi[t] as f32, acc[t]);
            acc_m[t] = dmin.mul_add(mins[t] as f32, acc_m[t]);
        }
    }
    hsum_float_16(core::array::from_fn(|t| acc[t] + acc_m[t]))
}

/// The 64 unsigned q6_K codes (q + 32, 0..64) of chunk p (0..2) of half n: values
/// 128n + 64p + b.
#[inline]
fn q6_k_chunk(xb: &BlockQ6K, n: usize, p: usize) -> [u8; 64] {
    let ql = &xb.ql[64 * n..64 * n + 64];
    let qh = &xb.qh[32 * n..32 * n + 32];
    core::array::from_fn(|b| {
        let l = b % 32;
        match 2 * p + b / 32 {
            0 => (ql[l] & 0xF) | ((qh[l] & 3) << 4),
            1 => (ql[32 + l] & 0xF) | (((qh[l] >> 2) & 3) << 4),
            2 => (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4),
            _ => (ql[32 + l] >> 4) | (((qh[l] >> 6) & 3) << 4),
        }
    })
}

/// q6_K times q8_K, 16 lanes.
pub fn vec_dot_q6_k_q8_k(x: &[BlockQ6K], y: &[BlockQ8K]) -> f32 {
    let thirty_two = [32u8; 64];
    let mut acc = [0.0f32; LANES];
    for (xb, yb) in x.iter().zip(y) {
        let d = yb.d() * xb.d();
        let mut sumi = [0i32; LANES];
        for n in 0..QK_K / 128 {
            for p in 0..2 {
                let qx = q6_k_chunk(xb, n, p);
                let qy: [i8; 64] = core::array::from_fn(|b| yb.qs[128 * n + 64 * p + b] as i8);
                let raw = dpbusd(&qx, &qy);
                let off = dpbusd(&thirty_two, &qy);
                for t in 0..LANES {
                    let sc = xb.scale(8 * n + 4 * p + t / 4) as i32;
                    sumi[t] = sumi[t].wrapping_add(sc.wrapping_mul(raw[t].wrapping_sub(off[t])));
                }
            }
        }
        for t in 0..LANES {
            acc[t] = d.mul_add(sumi[t] as f32, acc[t]);
        }
    }
    hsum_float_16(acc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::generic::vec_dot as generic;
    use crate::arch::x86_64::avx2::vec_dot as avx2;

    const TWO_24: f32 = 16_777_216.0;

    fn f16_bits(v: f32) -> [u8; 2] {
        crate::blocks::to_half(v)
    }

    /// Test bytes from the project's seeded generator ([`crate::rng::Rng`]).
    struct Bytes {
        g: crate::rng::Rng,
    }
    #[allow(non_snake_case)]
    fn Bytes(seed: u64) -> Bytes {
        Bytes { g: crate::rng::Rng::new(seed) }
    }
    impl Bytes {
        fn next(&mut self) -> u8 {
            self.g.next_u8()
        }
        fn fill(&mut self, out: &mut [u8]) {
            out.iter_mut().for_each(|b| *b = self.next());
        }
    }

    #[test]
    fn hsum_16_pairs_halves_first() {
        // 2^24 + 1 rounds back to 2^24 (tie to even); 2^24 + 2 is exact. The tree adds
        // lane 8 to lane 0 and lane 12 to lane 4 before either meets lane 0's 2^24 ...
        let mut a = [0.0f32; LANES];
        a[0] = TWO_24;
        a[4] = 1.0;
        a[12] = 1.0;
        assert_eq!(hsum_float_16(a), TWO_24 + 2.0);
        // ... whereas a serial sum absorbs both ones.
        assert_eq!(a.iter().fold(0.0f32, |s, &v| s + v), TWO_24);

        // Lanes 1 and 9 meet first, then (0 + 2) + (1 + 3): the ones survive as 2.
        let mut b = [0.0f32; LANES];
        b[0] = TWO_24;
        b[1] = 1.0;
        b[9] = 1.0;
        assert_eq!(hsum_float_16(b), TWO_24 + 2.0);
        // Pairing adjacent lanes first (0 + 1) would lose one of them.
        assert_eq!((b[0] + b[1]) + (b[8] + b[9]), TWO_24);

        // Lane 0 + lane 2 happens before lane 1 + lane 3 meets it: 2^24 + (1 + 1).
        let mut c = [0.0f32; LANES];
        c[0] = TWO_24;
        c[3] = 1.0;
        c[1] = 1.0;
        assert_eq!(hsum_float_16(c), TWO_24 + 2.0);
        // Lanes 2 and 0 together: each 1 alone is absorbed.
        let mut e = [0.0f32; LANES];
        e[0] = TWO_24;
        e[2] = 1.0;
        e[8] = 1.0;
        assert_eq!(hsum_float_16(e), TWO_24);
    }

    #[test]
    fn dpbusd_groups_of_four_exact() {
        let mut a = [0u8; 64];
        let mut b = [0i8; 64];
        a[..4].copy_from_slice(&[255, 255, 255, 255]);
        b[..4].copy_from_slice(&[-128, -128, -128, -128]);
        a[60..].copy_from_slice(&[1, 2, 3, 4]);
        b[60..].copy_from_slice(&[5, -6, 7, -8]);
        let r = dpbusd(&a, &b);
        assert_eq!(r[0], -4 * 255 * 128); // no i16 saturation (maddubs gives -32768 per pair)
        assert_eq!(r[15], 5 - 12 + 21 - 32);
        assert!(r[1..15].iter().all(|&v| v == 0));
    }

    fn q4_0_block(d: f32, codes: impl Fn(usize) -> u8) -> BlockQ4_0 {
        let mut b = BlockQ4_0 { d: f16_bits(d), qs: [0; 16] };
        for j in 0..16 {
            b.qs[j] = codes(j) | (codes(j + 16) << 4);
        }
        b
    }

    fn q8_0_block(d: f32, codes: impl Fn(usize) -> i8) -> BlockQ8_0 {
        let mut b = BlockQ8_0 { d: f16_bits(d), qs: [0; 32] };
        for j in 0..32 {
            b.qs[j] = codes(j) as u8;
        }
        b
    }

    #[test]
    fn q4_0_odd_final_block_only_low_lanes() {
        // Three blocks: values (code - 8) = 1 times 1, scales 1, 2, 4. Every lane holds
        // 4 values, so lanes 0..8 get 4*1 + 4*4 = 20 (blocks 0 and 2), lanes 8..16 get
        // 4*2 = 8 (block 1): total 8*20 + 8*8 = 224.
        let x: Vec<BlockQ4_0> = [1.0, 2.0, 4.0].iter().map(|&d| q4_0_block(d, |_| 9)).collect();
        let y: Vec<BlockQ8_0> = (0..3).map(|_| q8_0_block(1.0, |_| 1)).collect();
        assert_eq!(vec_dot_q4_0_q8_0(&x, &y), 224.0);
        // One block alone.
        assert_eq!(vec_dot_q4_0_q8_0(&x[..1], &y[..1]), 32.0);
        // The offset trick is exact at the extremes: codes 0 (value -8) times -128.
        let x = [q4_0_block(1.0, |_| 0)];
        let y = [q8_0_block(1.0, |_| -128)];
        assert_eq!(vec_dot_q4_0_q8_0(&x, &y), 32.0 * 1024.0);
    }

    #[test]
    fn q8_0_minus_128_squared_is_exact() {
        // -128 * -128 = 16384 per value, 32 values: 2^19. The AVX2 sign trick wraps
        // -(-128) to -128 and gets the sign wrong; this lane does not.
        let x = [q8_0_block(1.0, |_| -128)];
        let y = [q8_0_block(1.0, |_| -128)];
        assert_eq!(vec_dot_q8_0_q8_0(&x, &y), 524_288.0);
        assert_eq!(avx2::vec_dot_q8_0_q8_0(&x, &y), -524_288.0);
    }

    #[test]
    fn q8_0_block_pairs_change_the_bits() {
        // Four blocks, one nonzero value each, at byte 0: block 0 puts 2^24 (scale
        // 4096 * 4096, codes 1 * 1) into lane 0, blocks 1 and 3 put 1 into lane 8, block
        // 2 puts 1 into lane 0. Lane 0 = fma(1, 1, 2^24) = 2^24 (tie to even absorbs
        // the 1); lane 8 = 1 + 1 = 2; the tree adds lane 8 to lane 0: 2^24 + 2 (exact:
        // 2^24 + 3). The 8-lane AVX2 schedule puts all four blocks in lane 0 and keeps
        // only 2^24.
        let at0 = |d: f32| q8_0_block(d, |j| i8::from(j == 0));
        let x = [at0(4096.0), at0(1.0), at0(1.0), at0(1.0)];
        let y = [at0(4096.0), at0(1.0), at0(1.0), at0(1.0)];
        assert_eq!(vec_dot_q8_0_q8_0(&x, &y), TWO_24 + 2.0);
        assert_eq!(avx2::vec_dot_q8_0_q8_0(&x, &y), TWO_24);
        assert_eq!(generic::vec_dot_q8_0_q8_0(&x, &y), TWO_24);
        // Odd count: block 2 is the tail and goes to lane 0, where the 1 is absorbed;
        // lane 8 holds block 1's 1 alone, also absorbed by the tree: 2^24. (Had the
        // tail gone to lanes 8..16, lane 8 would hold 2 and the result be 2^24 + 2.)
        assert_eq!(vec_dot_q8_0_q8_0(&x[..3], &y[..3]), TWO_24);
    }

    fn random_q4_k(g: &mut Bytes) -> BlockQ4K {
        let mut b =
            BlockQ4K { d: f16_bits(0.01), dmin: f16_bits(0.003), scales: [0; 12], qs: [0; 128] };
        g.fill(&mut b.scales);
        g.fill(&mut b.qs);
        b
    }

    fn random_q6_k(g: &mut Bytes) -> BlockQ6K {
        let mut b = BlockQ6K { ql: [0; 128], qh: [0; 64], scales: [0; 16], d: f16_bits(0.02) };
        g.fill(&mut b.ql);
        g.fill(&mut b.qh);
        g.fill(&mut b.scales);
        b
    }

    fn random_q8_k(g: &mut Bytes) -> BlockQ8K {
        let mut b = BlockQ8K { d: 0.5f32.to_le_bytes(), qs: [0; QK_K], bsums: [0; 32] };
        g.fill(&mut b.qs);
        for i in 0..16 {
            let s: i32 = (0..16).map(|j| b.qs[16 * i + j] as i8 as i32).sum();
            b.bsums[2 * i..2 * i + 2].copy_from_slice(&(s as i16).to_le_bytes());
        }
        b
    }

    /// The exact dot product in f64 from the blocks' own dequantized values.
    fn exact_k(w: &[f32], y: &[BlockQ8K]) -> f64 {
        let mut a = vec![0.0f32; w.len()];
        crate::blocks::dequantize(crate::GgmlType::Q8_K, bytemuck::cast_slice(y), &mut a).unwrap();
        w.iter().zip(&a).map(|(&w, &a)| w as f64 * a as f64).sum()
    }

    #[test]
    fn k_quants_close_to_exact_and_to_generic() {
        let mut g = Bytes(0x9e37_79b9_7f4a_7c15);
        for nb in [1usize, 2, 5] {
            let x4: Vec<BlockQ4K> = (0..nb).map(|_| random_q4_k(&mut g)).collect();
            let x6: Vec<BlockQ6K> = (0..nb).map(|_| random_q6_k(&mut g)).collect();
            let y: Vec<BlockQ8K> = (0..nb).map(|_| random_q8_k(&mut g)).collect();
            for (ty, bytes, got, generic) in [
                (
                    crate::GgmlType::Q4_K,
                    bytemuck::cast_slice::<BlockQ4K, u8>(&x4),
                    vec_dot_q4_k_q8_k(&x4, &y),
                    generic::vec_dot_q4_k_q8_k(&x4, &y),
                ),
                (
                    crate::GgmlType::Q6_K,
                    bytemuck::cast_slice::<BlockQ6K, u8>(&x6),
                    vec_dot_q6_k_q8_k(&x6, &y),
                    generic::vec_dot_q6_k_q8_k(&x6, &y),
                ),
            ] {
                let mut w = vec![0.0f32; nb * QK_K];
                crate::blocks::dequantize(ty, bytes, &mut w).unwrap();
                let exact = exact_k(&w, &y);
                let mag: f64 = w.iter().map(|v| v.abs() as f64 * 64.0).sum();
                // Dequantized weights round once (d*sc*q), so allow a few ulps of S.
                assert!((got as f64 - exact).abs() <= 1e-5 * mag, "{ty:?} {got} vs {exact}");
                assert!((got - generic).abs() as f64 <= 1e-5 * mag, "{ty:?} {got} vs {generic}");
            }
        }
    }
}
