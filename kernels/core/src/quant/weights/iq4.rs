//! `quantize_row_iq4_nl_impl` (`ggml-quants.c`) without an importance matrix, as
//! `ggml_quantize_chunk` calls it for IQ4_NL (super-block 32, `ntry = 7`) and IQ4_XS
//! (super-block 256 of 32-value blocks, `ntry = 7`; `quantize_row_iq4_xs_ref` is the
//! same call). (`quantize_row_iq4_nl_ref` passes `ntry = -1` and then leaves the indices
//! of an all-zero block as the previous block left them, uninitialised for the first: no
//! model file is written that way, and it is not reproduced.)
//!
//! Per 32-value block: weights x^2; amax and max as q3_K's; below `GROUP_MAX_EPS` the
//! block's scale is 0 (its indices are set later, or stay 0 for IQ4_NL, see below).
//! Else d = -max/table[0], indices `best_index_int8(table, x/d)` (the nearest level, a
//! tie to the upper one... see [`best_index`]), sums sumqx += (w*q)*x and sumq2 +=
//! (w*q)*q, d = sumqx/sumq2 (0 when sumq2 <= 0), best = d*sumqx; then for itry in -7..=7,
//! id = (itry + table[0])/max gives candidate sums, and d = sumqx/sumq2, best = d*sumqx
//! whenever sumq2 > 0 and sumqx^2 > best*sumq2.
//!
//! IQ4_NL: d is stored as f16 and the indices are recomputed with 1/d (the unrounded d;
//! id = 0 when d is 0, which gives every value index 8). IQ4_XS: the block scale of
//! largest magnitude (signed, first wins) gives the superblock d = -max_scale/32 (stored
//! as f16, the sign of -0.0 kept), id = d ? 1/d : 0; each block's code
//! l = clamp(nearest_int(id*scale), -32, 31), dl = d*l, idl = dl ? 1/dl : 0, indices
//! `best_index(idl*x)`, code l + 32 split into `scales_l` nibbles and `scales_h` bit
//! pairs. The indices pack as q4_0's nibbles per 32 values.

use crate::blocks::iq4_nl::KVALUES_IQ4NL;
use crate::blocks::{to_half, BlockIq4Nl, BlockIq4Xs, QK, QK_K};
use crate::quant::round::nearest_int;

use super::{signed_absmax, GROUP_MAX_EPS};

/// The `ntry` of ggml's chunk quantizer.
const NTRY: i32 = 7;

/// `best_index_int8(16, kvalues_iq4nl, x)`: 0 at or below the first level, 15 at or above
/// the last; else a bisection to the two neighbouring levels and the lower one when x is
/// strictly closer to it (`x - lo < hi - x`), the upper one otherwise.
fn best_index(x: f32) -> u8 {
    let val = |i: usize| KVALUES_IQ4NL[i] as f32;
    if x <= val(0) {
        return 0;
    }
    if x >= val(15) {
        return 15;
    }
    let (mut ml, mut mu) = (0usize, 15usize);
    while mu - ml > 1 {
        let mav = (ml + mu) / 2;
        if x < val(mav) {
            mu = mav;
        } else {
            ml = mav;
        }
    }
    if x - val(mu - 1) < val(mu) - x {
        (mu - 1) as u8
    } else {
        mu as u8
    }
}

/// The search over one 32-value block: its scale (0 for a block below `GROUP_MAX_EPS`,
/// whose `l` is left as it is).
fn fit_block(xb: &[f32], l: &mut [u8]) -> f32 {
    let mut weight = [0.0f32; 32];
    for (w, &v) in weight.iter_mut().zip(xb) {
        *w = v * v;
    }
    let (max, amax) = signed_absmax(xb);
    if amax < GROUP_MAX_EPS {
        return 0.0;
    }
    let v0 = KVALUES_IQ4NL[0] as f32;
    let mut d = -max / v0;
    let mut id = 1.0 / d;
    let (mut sumqx, mut sumq2) = (0.0f32, 0.0f32);
    for j in 0..xb.len() {
        let al = id * xb[j];
        let li = best_index(al);
        l[j] = li;
        let q = KVALUES_IQ4NL[li as usize] as f32;
        let w = weight[j];
        sumqx += w * q * xb[j];
        sumq2 += w * q * q;
    }
    d = if sumq2 > 0.0 { sumqx / sumq2 } else { 0.0 };
    let mut best = d * sumqx;
    for itry in -NTRY..=NTRY {
        id = (itry + KVALUES_IQ4NL[0] as i32) as f32 / max;
        let (mut sumqx, mut sumq2) = (0.0f32, 0.0f32);
        for j in 0..xb.len() {
            let al = id * xb[j];
            let q = KVALUES_IQ4NL[best_index(al) as usize] as f32;
            let w = weight[j];
            sumqx += w * q * xb[j];
            sumq2 += w * q * q;
        }
        if sumq2 > 0.0 && sumqx * sumqx > best * sumq2 {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    d
}

/// Indices of 32 values, packed: element j low nibble, element j + 16 high nibble.
fn pack(l: &[u8]) -> [u8; QK / 2] {
    let mut q = [0u8; QK / 2];
    for j in 0..QK / 2 {
        q[j] = l[j] | (l[j + QK / 2] << 4);
    }
    q
}

pub(super) fn quantize_nl(x: &[f32], out: &mut [BlockIq4Nl]) {
    for (xb, y) in x.chunks_exact(QK).zip(out.iter_mut()) {
        let mut l = [0u8; QK];
        let d = fit_block(xb, &mut l);
        y.d = to_half(d);
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        for (l, &v) in l.iter_mut().zip(xb) {
            *l = best_index(id * v);
        }
        y.qs = pack(&l);
    }
}

pub(super) fn quantize_xs(x: &[f32], out: &mut [BlockIq4Xs]) {
    for (xs, y) in x.chunks_exact(QK_K).zip(out.iter_mut()) {
        let mut l = [0u8; QK_K];
        let mut scales = [0.0f32; 8];
        let (mut max_scale, mut amax_scale) = (0.0f32, 0.0f32);
        for ib in 0..8 {
            scales[ib] = fit_block(&xs[32 * ib..32 * ib + 32], &mut l[32 * ib..32 * ib + 32]);
            let abs_d = scales[ib].abs();
            if abs_d > amax_scale {
                amax_scale = abs_d;
                max_scale = scales[ib];
            }
        }
        let d = -max_scale / 32.0;
        y.d = to_half(d);
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        let mut scales_h = 0u16;
        y.scales_l = [0; QK_K / 64];
        for ib in 0..8 {
            let code = nearest_int(id * scales[ib]).clamp(-32, 31);
            let dl = d * code as f32;
            let idl = if dl != 0.0 { 1.0 / dl } else { 0.0 };
            for j in 0..32 {
                l[32 * ib + j] = best_index(idl * xs[32 * ib + j]);
            }
            let code = (code + 32) as u8;
            let (lo, hi) = (code & 0xF, code >> 4);
            if ib % 2 == 0 {
                y.scales_l[ib / 2] = lo;
            } else {
                y.scales_l[ib / 2] |= lo << 4;
            }
            scales_h |= (hi as u16) << (2 * (ib % 8));
        }
        y.scales_h = scales_h.to_le_bytes();
        for ib in 0..8 {
            y.qs[16 * ib..16 * ib + 16].copy_from_slice(&pack(&l[32 * ib..32 * ib + 32]));
        }
    }
}
