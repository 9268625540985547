//! `quantize_row_q3_K_ref` and its search `make_q3_quants(n = 16, nmax = 4, do_rmse =
//! true)` (`ggml-quants.c`).
//!
//! `make_q3_quants`: max = the value of largest magnitude (first wins); below
//! `GROUP_MAX_EPS` (1e-15) all levels are 0 and the scale 0. Else iscale = -nmax/max,
//! levels clamp(nearest_int(iscale*x), -nmax, nmax - 1) with sums sumlx += (x*x*x)*l
//! and suml2 += (x*x*l)*l in index order (products left to right); then up to five
//! passes over the values: with w = x*x, slx = sumlx - w*x*L, and when slx > 0,
//! sl2 = suml2 - w*L*L, a candidate clamp(nearest_int(x*sl2/slx)) that differs is taken
//! when sl2 > 0 and slx^2*suml2 > sumlx^2*sl2 (each side left to right), updating the
//! sums; a pass without change ends early. The scale is sumlx/suml2 (0 when suml2 <= 0)
//! and the levels are shifted by nmax.
//!
//! Per superblock: the sixteen scales; the one of largest magnitude (signed, first wins)
//! sets iscale = -32/max_scale, each code `(int8_t)nearest_int(iscale*scale)` clamped to
//! -32..=31 and offset by 32, packed as [`crate::blocks::BlockQ3K::scale`] reads them;
//! d = f16(1/iscale) (0 when max_scale is 0). Levels again from the stored d*(code-32):
//! clamp(nearest_int(x/d), -4, 3) + 4, except a sub-block whose product is 0. Levels
//! above 3 lose 4 and set bit i/32 of `hmask[i % 32]`; the low two bits pack as q2_K's.

use crate::blocks::{half, to_half, BlockQ3K, QK_K};
use crate::quant::round::nearest_int;

use super::{signed_absmax, GROUP_MAX_EPS};

use super::q2_k::pack_crumbs;

/// `make_q3_quants(16, nmax, x, L, true)`: the scale; `l_out` gets levels + nmax.
fn make_q3_quants(nmax: i32, x: &[f32], l_out: &mut [u8]) -> f32 {
    let (max, amax) = signed_absmax(x);
    if amax < GROUP_MAX_EPS {
        l_out.fill(0);
        return 0.0;
    }
    let iscale = -(nmax as f32) / max;
    let mut l = [0i32; 16];
    let (mut sumlx, mut suml2) = (0.0f32, 0.0f32);
    for (i, &v) in x.iter().enumerate() {
        l[i] = nearest_int(iscale * v).clamp(-nmax, nmax - 1);
        let w = v * v;
        let lf = l[i] as f32;
        sumlx += w * v * lf;
        suml2 += w * lf * lf;
    }
    for _ in 0..5 {
        let mut changed = 0;
        for (i, &v) in x.iter().enumerate() {
            let w = v * v;
            let li = l[i] as f32;
            let mut slx = sumlx - w * v * li;
            if slx > 0.0 {
                let mut sl2 = suml2 - w * li * li;
                let new_l = nearest_int(v * sl2 / slx).clamp(-nmax, nmax - 1);
                if new_l != l[i] {
                    let nl = new_l as f32;
                    slx += w * v * nl;
                    sl2 += w * nl * nl;
                    if sl2 > 0.0 && slx * slx * suml2 > sumlx * sumlx * sl2 {
                        l[i] = new_l;
                        sumlx = slx;
                        suml2 = sl2;
                        changed += 1;
                    }
                }
            }
        }
        if changed == 0 {
            break;
        }
    }
    for (o, &li) in l_out.iter_mut().zip(&l) {
        *o = (li + nmax) as u8;
    }
    if suml2 > 0.0 {
        sumlx / suml2
    } else {
        0.0
    }
}

pub(super) fn quantize(x: &[f32], out: &mut [BlockQ3K]) {
    for (xs, y) in x.chunks_exact(QK_K).zip(out.iter_mut()) {
        let mut levels = [0u8; QK_K];
        let mut scales = [0.0f32; 16];
        let (mut max_scale, mut amax) = (0.0f32, 0.0f32);
        for j in 0..16 {
            scales[j] =
                make_q3_quants(4, &xs[16 * j..16 * j + 16], &mut levels[16 * j..16 * j + 16]);
            let scale = scales[j].abs();
            if scale > amax {
                amax = scale;
                max_scale = scales[j];
            }
        }
        y.scales = [0; 12];
        if max_scale != 0.0 {
            let iscale = -32.0 / max_scale;
            for j in 0..16 {
                // int8_t l = nearest_int(...): the low 8 bits, then clamped and offset.
                let l = (nearest_int(iscale * scales[j]) as i8 as i32).clamp(-32, 31) + 32;
                let l = l as u8;
                if j < 8 {
                    y.scales[j] = l & 0xF;
                } else {
                    y.scales[j - 8] |= (l & 0xF) << 4;
                }
                y.scales[j % 4 + 8] |= (l >> 4) << (2 * (j / 4));
            }
            y.d = to_half(1.0 / iscale);
        } else {
            y.d = to_half(0.0);
        }
        for j in 0..16 {
            let d = half(y.d) * (y.scale(j) as i32 - 32) as f32;
            if d == 0.0 {
                continue;
            }
            for ii in 0..16 {
                let l = nearest_int(xs[16 * j + ii] / d).clamp(-4, 3);
                levels[16 * j + ii] = (l + 4) as u8;
            }
        }
        y.hmask = [0; QK_K / 8];
        for (i, l) in levels.iter_mut().enumerate() {
            if *l > 3 {
                y.hmask[i % 32] |= 1 << (i / 32);
                *l -= 4;
            }
        }
        y.qs = pack_crumbs(&levels);
    }
}
