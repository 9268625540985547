//! The eight MMVQ types without hand-written block forms (Q4_1, Q5_0, Q5_1, Q2_K, Q3_K,
//! Q5_K, IQ4_NL, IQ4_XS): each thread's share ([`Kind::tail`], the specification, in
//! `vecdotq`) and every thread of one weight block at once ([`Kind::block`]): the same
//! integers formed in another grouping, and the same float operations on the same
//! operands in the same order, thread by thread, over arrays of the threads that share
//! a q8_1 block, so that a compiler vectorizes them across threads where the caller's
//! target features allow (`tiercheck-accel` compiles the grid inside its AVX2+FMA
//! function; `mul_add` is one fused operation everywhere).
//!
//! The grouping: every `dp4a` of a thread pairs the weight codes of four consecutive
//! values with the q8 codes of the same four values (a dot product pairs value `v` with
//! value `v`), so it equals that 4-value group's dot of the block's codes, decoded in
//! value order, with the activation's ([`BlockForms::dots32`], per q8_1 block); a
//! `dp4a` with a replicated byte (Q2_K's min, Q5_K's `0x01010101`) is that byte times
//! the group's q8 sum. Every sum here is exact (at most 256 products of 8-bit values),
//! so the integers equal the tails' whatever the order.

use super::mmvq::BlockForms;
use super::vecdotq::{
    iq4_nl_tail, iq4_xs_tail, q2_k_tail, q3_k_tail, q4_1_tail, q4_k_scales_for_chunk, q5_0_tail,
    q5_1_tail, q5_k_tail, Contraction, Tail,
};
use crate::blocks::iq4_nl::KVALUES_IQ4NL;
use crate::blocks::{
    BlockIq4Nl, BlockIq4Xs, BlockQ2K, BlockQ3K, BlockQ4_1, BlockQ5K, BlockQ5_0, BlockQ5_1,
    BlockQ8_1,
};
use crate::fp16::round_to_f16;
use crate::GgmlType;

/// One of the eight types: its block, how many q8_1 blocks a weight block spans, its
/// thread share and its block-at-once form.
pub(super) trait Kind {
    type B: bytemuck::Pod;
    /// The type.
    const TYPE: GgmlType;
    /// q8_1 blocks per weight block.
    const PER: usize;
    /// Thread `iqs`'s share (`vecdotq`'s tail).
    fn tail(x: &Self::B, y: &[BlockQ8_1], iqs: usize, c: Contraction) -> Tail;
    /// Every thread's share of `x` (against `y`, whose `d`s are `yd` and, for Q2_K and
    /// Q5_K, whose 4-byte group sums are `gs`) accumulated into `tmp` (one value per
    /// thread, in thread order) as `Tail::accumulate` does, with `f`'s integer dots.
    fn block(f: &impl BlockForms, x: &Self::B, k: Blk<'_>, tmp: &mut [f32]);
}

/// What a block form reads besides its weight block: the q8_1 blocks it spans, their
/// `d`s, the column's `sums` for them (Q2_K, Q5_K: 4-byte group sums; Q3_K: four times
/// those; empty otherwise) and the contraction.
#[derive(Clone, Copy)]
pub(super) struct Blk<'a> {
    pub y: &'a [BlockQ8_1],
    pub yd: &'a [f32],
    pub gs: &'a [[i32; 8]],
    pub c: Contraction,
}

/// `acc + a * b`, fused when `fuse` (`Contraction::mad`).
#[inline(always)]
fn mad(fuse: bool, a: f32, b: f32, acc: f32) -> f32 {
    if fuse {
        a.mul_add(b, acc)
    } else {
        acc + a * b
    }
}

/// `acc[r] + a[r] * b[r]` for every lane `r`, fused when `fuse` (the branch outside
/// the loop, so that it vectorizes).
#[inline(always)]
fn mad_lanes<const N: usize>(fuse: bool, a: &[f32; N], b: &[f32; N], acc: &mut [f32; N]) {
    if fuse {
        for r in 0..N {
            acc[r] = a[r].mul_add(b[r], acc[r]);
        }
    } else {
        for r in 0..N {
            acc[r] += a[r] * b[r];
        }
    }
}

/// Thread `t` (`iqs = 2t`) of a 32-value legacy block: its `sumi` from the group dots
/// (ints `2t`, `2t + 1` of the low codes and the same of the high ones).
#[inline(always)]
fn legacy_sumi(gd: &[i32; 8], t: usize) -> i32 {
    gd[2 * t] + gd[2 * t + 1] + gd[2 * t + 4] + gd[2 * t + 5]
}

/// Q4_1 / Q5_0 / Q5_1 codes in value order: low nibbles, then high ones, with bit `j` of
/// `qh` as bit 4 of value `j` where given.
#[inline(always)]
fn legacy_codes(qs: &[u8; 16], qh: Option<[u8; 4]>) -> [i8; 32] {
    let h = qh.map_or(0, u32::from_le_bytes);
    let mut codes = [0i8; 32];
    for j in 0..16 {
        codes[j] = ((qs[j] & 0xF) as u32 | (((h >> j) & 1) << 4)) as i8;
        codes[j + 16] = ((qs[j] >> 4) as u32 | (((h >> (j + 16)) & 1) << 4)) as i8;
    }
    codes
}

/// The close of Q4_1 and Q5_1 (`min_close` in `vecdotq`) for both threads.
#[inline(always)]
fn min_close_block(
    gd: &[i32; 8],
    d: f32,
    m: f32,
    y: &BlockQ8_1,
    yd: f32,
    c: Contraction,
    tmp: &mut [f32],
) {
    let dd8 = round_to_f16(d * yd);
    let ms8 = round_to_f16(m * y.s());
    for (t, acc) in tmp.iter_mut().enumerate().take(2) {
        *acc += c.combine.eval(legacy_sumi(gd, t) as f32, dd8, 1.0, ms8, 0.5);
    }
}

pub(super) struct Q41;
impl Kind for Q41 {
    type B = BlockQ4_1;
    const TYPE: GgmlType = GgmlType::Q4_1;
    const PER: usize = 1;
    #[inline(always)]
    fn tail(x: &BlockQ4_1, y: &[BlockQ8_1], iqs: usize, c: Contraction) -> Tail {
        q4_1_tail(x, &y[0], iqs, c)
    }
    #[inline(always)]
    fn block(f: &impl BlockForms, x: &BlockQ4_1, k: Blk<'_>, tmp: &mut [f32]) {
        let Blk { y, yd, c, .. } = k;
        let gd = f.dots32(&legacy_codes(&x.qs, None), &y[0].qs);
        min_close_block(&gd, x.d(), x.m(), &y[0], yd[0], c, tmp);
    }
}

pub(super) struct Q51;
impl Kind for Q51 {
    type B = BlockQ5_1;
    const TYPE: GgmlType = GgmlType::Q5_1;
    const PER: usize = 1;
    #[inline(always)]
    fn tail(x: &BlockQ5_1, y: &[BlockQ8_1], iqs: usize, c: Contraction) -> Tail {
        q5_1_tail(x, &y[0], iqs, c)
    }
    #[inline(always)]
    fn block(f: &impl BlockForms, x: &BlockQ5_1, k: Blk<'_>, tmp: &mut [f32]) {
        let Blk { y, yd, c, .. } = k;
        let gd = f.dots32(&legacy_codes(&x.qs, Some(x.qh)), &y[0].qs);
        min_close_block(&gd, x.d(), x.m(), &y[0], yd[0], c, tmp);
    }
}

pub(super) struct Q50;
impl Kind for Q50 {
    type B = BlockQ5_0;
    const TYPE: GgmlType = GgmlType::Q5_0;
    const PER: usize = 1;
    #[inline(always)]
    fn tail(x: &BlockQ5_0, y: &[BlockQ8_1], iqs: usize, c: Contraction) -> Tail {
        q5_0_tail(x, &y[0], iqs, c)
    }
    #[inline(always)]
    fn block(f: &impl BlockForms, x: &BlockQ5_0, k: Blk<'_>, tmp: &mut [f32]) {
        let Blk { y, yd, c, .. } = k;
        let gd = f.dots32(&legacy_codes(&x.qs, Some(x.qh)), &y[0].qs);
        let (d5, s8) = (x.d(), y[0].s());
        for (t, acc) in tmp.iter_mut().enumerate().take(2) {
            let inner = c.combine.eval(legacy_sumi(&gd, t) as f32, yd[0], -1.0, 8.0, s8);
            *acc = mad(c.accumulate, d5, inner, *acc);
        }
    }
}

/// The IQ4_NL code book values of 16 bytes of nibbles: low nibbles, then high ones.
#[inline(always)]
fn iq4_codes(qs: &[u8]) -> [i8; 32] {
    let mut codes = [0i8; 32];
    for j in 0..16 {
        codes[j] = KVALUES_IQ4NL[(qs[j] & 0xF) as usize];
        codes[j + 16] = KVALUES_IQ4NL[(qs[j] >> 4) as usize];
    }
    codes
}

pub(super) struct Iq4Nl;
impl Kind for Iq4Nl {
    type B = BlockIq4Nl;
    const TYPE: GgmlType = GgmlType::IQ4_NL;
    const PER: usize = 1;
    #[inline(always)]
    fn tail(x: &BlockIq4Nl, y: &[BlockQ8_1], iqs: usize, _: Contraction) -> Tail {
        iq4_nl_tail(x, &y[0], iqs)
    }
    #[inline(always)]
    fn block(f: &impl BlockForms, x: &BlockIq4Nl, k: Blk<'_>, tmp: &mut [f32]) {
        let Blk { y, yd, c, .. } = k;
        let gd = f.dots32(&iq4_codes(&x.qs), &y[0].qs);
        let d = x.d() * yd[0];
        for (t, acc) in tmp.iter_mut().enumerate().take(2) {
            *acc = mad(c.accumulate, d, legacy_sumi(&gd, t) as f32, *acc);
        }
    }
}

pub(super) struct Iq4Xs;
impl Kind for Iq4Xs {
    type B = BlockIq4Xs;
    const TYPE: GgmlType = GgmlType::IQ4_XS;
    const PER: usize = 8;
    #[inline(always)]
    fn tail(x: &BlockIq4Xs, y: &[BlockQ8_1], iqs: usize, _: Contraction) -> Tail {
        iq4_xs_tail(x, y, iqs)
    }
    #[inline(always)]
    fn block(f: &impl BlockForms, x: &BlockIq4Xs, k: Blk<'_>, tmp: &mut [f32]) {
        let Blk { y, yd, c, .. } = k;
        // Thread t (iqs = 4t): sub-block t, bytes 16t.., against q8_1 block t.
        let d = x.d();
        let scales_h = u16::from_le_bytes(x.scales_h) as i32;
        for (t, acc) in tmp.iter_mut().enumerate().take(8) {
            let gd = f.dots32(&iq4_codes(&x.qs[16 * t..16 * t + 16]), &y[t].qs);
            let sumi: i32 = gd.iter().sum();
            let iqs = 4 * t;
            let ls = ((x.scales_l[iqs / 8] as i32 >> (iqs & 4)) & 0xF)
                | (((scales_h >> (iqs / 2)) & 3) << 4);
            *acc = mad(c.accumulate, d * yd[t], (sumi * (ls - 32)) as f32, *acc);
        }
    }
}

/// The 2-bit codes of q8_1 block `b` of a Q2_K / Q3_K superblock in value order: value
/// `128n + 32j + l` (`b = 4n + j`) is bits `2j` of byte `32n + l`.
#[inline(always)]
fn crumbs(qs: &[u8; 64], b: usize) -> [i8; 32] {
    let (n, j) = (b / 4, b % 4);
    core::array::from_fn(|l| ((qs[32 * n + l] >> (2 * j)) & 3) as i8)
}

pub(super) struct Q2K;
impl Kind for Q2K {
    type B = BlockQ2K;
    const TYPE: GgmlType = GgmlType::Q2_K;
    const PER: usize = 8;
    #[inline(always)]
    fn tail(x: &BlockQ2K, y: &[BlockQ8_1], iqs: usize, c: Contraction) -> Tail {
        q2_k_tail(x, y, iqs, c)
    }
    #[inline(always)]
    fn block(f: &impl BlockForms, x: &BlockQ2K, k: Blk<'_>, tmp: &mut [f32]) {
        let Blk { y, yd, gs, c } = k;
        // Thread 8n + r (iqs = 8n + r) at step i: group r of q8_1 block b = 4n + i,
        // sub-block 2b + r / 4.
        let (d, dmin) = (x.d(), x.dmin());
        for n in 0..2 {
            let mut sumf_d = [0.0f32; 8];
            let mut sumf_m = [0.0f32; 8];
            for i in 0..4 {
                let b = 4 * n + i;
                let gd = f.dots32(&crumbs(&x.qs, b), &y[b].qs);
                let (s0, s1) = (x.scales[2 * b] as i32, x.scales[2 * b + 1] as i32);
                let sc: [i32; 8] = core::array::from_fn(|r| if r < 4 { s0 } else { s1 });
                let dot_d: [f32; 8] = core::array::from_fn(|r| (gd[r] * (sc[r] & 0xF)) as f32);
                let dot_m: [f32; 8] = core::array::from_fn(|r| (gs[b][r] * (sc[r] >> 4)) as f32);
                let d8 = [yd[b]; 8];
                mad_lanes(c.vec_dot_sums, &d8, &dot_d, &mut sumf_d);
                mad_lanes(c.vec_dot_sums, &d8, &dot_m, &mut sumf_m);
            }
            for r in 0..8 {
                tmp[8 * n + r] += c.combine.eval(d, sumf_d[r], -1.0, dmin, sumf_m[r]);
            }
        }
    }
}

pub(super) struct Q3K;
impl Kind for Q3K {
    type B = BlockQ3K;
    const TYPE: GgmlType = GgmlType::Q3_K;
    const PER: usize = 8;
    #[inline(always)]
    fn tail(x: &BlockQ3K, y: &[BlockQ8_1], iqs: usize, c: Contraction) -> Tail {
        q3_k_tail(x, y, iqs, c)
    }
    #[inline(always)]
    fn block(f: &impl BlockForms, x: &BlockQ3K, k: Blk<'_>, tmp: &mut [f32]) {
        let Blk { y, yd, c, .. } = k;
        let sc: [i32; 16] = core::array::from_fn(|s| {
            let low = (x.scales[s % 8] >> (4 * (s / 8))) & 0xF;
            let high = ((x.scales[8 + s % 4] >> (2 * (s / 4))) & 3) << 4;
            (low | high) as i32 - 32
        });
        let d = x.d();
        for n in 0..2 {
            let mut sumf = [0.0f32; 8];
            for i in 0..4 {
                let b = 4 * n + i;
                // The 2-bit code minus 4 where the value's `hmask` bit (bit b of byte l
                // for value 32b + l) is clear.
                let mut codes = crumbs(&x.qs, b);
                for (l, v) in codes.iter_mut().enumerate() {
                    *v -= 4 * (1 - ((x.hmask[l] >> b) & 1)) as i8;
                }
                let gd = f.dots32(&codes, &y[b].qs);
                for r in 0..8 {
                    let dot = gd[r] * sc[2 * b + r / 4];
                    sumf[r] = mad(c.vec_dot_sums, yd[b], dot as f32, sumf[r]);
                }
            }
            for r in 0..8 {
                tmp[8 * n + r] = mad(c.accumulate, d, sumf[r], tmp[8 * n + r]);
            }
        }
    }
}

pub(super) struct Q5K;
impl Kind for Q5K {
    type B = BlockQ5K;
    const TYPE: GgmlType = GgmlType::Q5_K;
    const PER: usize = 8;
    #[inline(always)]
    fn tail(x: &BlockQ5K, y: &[BlockQ8_1], iqs: usize, c: Contraction) -> Tail {
        q5_k_tail(x, y, iqs, c)
    }
    #[inline(always)]
    fn block(f: &impl BlockForms, x: &BlockQ5K, k: Blk<'_>, tmp: &mut [f32]) {
        let Blk { y, yd, gs, c } = k;
        // Thread 4ch + r (iqs = 2(4ch + r)) at step i: groups r and r + 4 of q8_1 block
        // b = 2ch + i, whose value 32b + l is nibble i of byte 32ch + l with bit b of
        // qh[l] on top. Two chunks at a time: lane 4h + r is thread 4(2p + h) + r.
        let (d, dmin) = (x.d(), x.dmin());
        for p in 0..2 {
            let mut sumf_d = [0.0f32; 8];
            let mut sumf_m = [0.0f32; 8];
            let scm = [
                q4_k_scales_for_chunk(&x.scales, 2 * p),
                q4_k_scales_for_chunk(&x.scales, 2 * p + 1),
            ];
            for i in 0..2 {
                let mut dot1 = [0f32; 8];
                let mut dot2 = [0f32; 8];
                let mut d8 = [0f32; 8];
                for h in 0..2 {
                    let ch = 2 * p + h;
                    let b = 2 * ch + i;
                    let codes: [i8; 32] = core::array::from_fn(|l| {
                        let lo = (x.qs[32 * ch + l] >> (4 * i)) & 0xF;
                        (lo | (((x.qh[l] >> b) & 1) << 4)) as i8
                    });
                    let gd = f.dots32(&codes, &y[b].qs);
                    let (sc, m) = (scm[h].0[i] as i32, scm[h].1[i] as i32);
                    for r in 0..4 {
                        dot1[4 * h + r] = ((gd[r] + gd[r + 4]) * sc) as f32;
                        dot2[4 * h + r] = ((gs[b][r] + gs[b][r + 4]) * m) as f32;
                        d8[4 * h + r] = yd[b];
                    }
                }
                mad_lanes(c.vec_dot_sums, &d8, &dot1, &mut sumf_d);
                mad_lanes(c.vec_dot_sums, &d8, &dot2, &mut sumf_m);
            }
            for r in 0..8 {
                tmp[8 * p + r] += c.combine.eval(d, sumf_d[r], -1.0, dmin, sumf_m[r]);
            }
        }
    }
}
