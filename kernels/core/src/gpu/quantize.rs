//! `quantize_q8_1` (`ggml-cuda/quantize.cu`) as HIP computes it, and the warp
//! butterflies of `common.cuh` (`warp_reduce_sum`, `warp_reduce_max`). See the parent
//! module for the float order in words.

use crate::blocks::{to_half, BlockQ8_1, QK};

/// The widest warp (wavefront) there is: 64 lanes on GCN/CDNA.
pub(super) const MAX_WARP: usize = 64;

/// The XOR butterfly of `warp_reduce_*`: for `off = width/2, .., 2, 1`, every lane i
/// replaces its value by `op(v_i, v_(i^off))` (its own value first, as `x +=
/// __shfl_xor(x, off)`); returns lane 0's final value. `lanes.len()` is the width, a
/// power of two up to 64; the slice is left holding every lane's result.
fn butterfly(lanes: &mut [f32], op: impl Fn(f32, f32) -> f32) -> f32 {
    let width = lanes.len();
    assert!(width.is_power_of_two() && width <= MAX_WARP, "warp width {width}");
    let mut prev = [0.0f32; MAX_WARP];
    let mut off = width / 2;
    while off > 0 {
        prev[..width].copy_from_slice(lanes);
        for i in 0..width {
            lanes[i] = op(prev[i], prev[i ^ off]);
        }
        off /= 2;
    }
    lanes[0]
}

/// `warp_reduce_sum<width>(float)`: the XOR butterfly with one binary32 addition per
/// step. Returns lane 0's value; `lanes` is left holding every lane's (all equal up to
/// NaN payloads, since addition is commutative).
pub fn butterfly_sum(lanes: &mut [f32]) -> f32 {
    butterfly(lanes, |a, b| a + b)
}

/// `fmaxf` as the device computes it (`llvm.maxnum`): a NaN operand is ignored.
#[inline]
fn fmaxf(a: f32, b: f32) -> f32 {
    if a.is_nan() {
        b
    } else if b.is_nan() || a > b {
        a
    } else {
        b
    }
}

/// `warp_reduce_max<width>(float)`: the XOR butterfly with `fmaxf`.
pub fn butterfly_max(lanes: &mut [f32]) -> f32 {
    butterfly(lanes, fmaxf)
}

/// `(int8_t) roundf(v)` on AMDGPU: `v_cvt_i32_f32` (NaN to 0, out of range saturates)
/// then the low byte. Only non-finite quotients reach the special cases.
#[inline]
fn to_i8_amdgpu(r: f32) -> i8 {
    (r as i32) as i8 // `as i32` saturates and maps NaN to 0, like the instruction
}

/// Twin of the `quantize_q8_1` kernel as compiled by HIP clang (no fast-math): the
/// activation quantizer of MMVQ.
///
/// `x` is one activation row; a final partial block is padded with 0.0, as the kernel
/// reads `i0 < ne00 ? x[i0] : 0.0f`. (ggml allocates the row padded to a multiple of
/// 512 values; those extra all-zero blocks are never read by MMVQ and are not
/// returned here.) Per block of 32: amax and the sum by the 32-lane XOR butterflies,
/// `d = amax / 127`, `q = roundf(x / d)` (0 when amax == 0), `d` and the float sum
/// stored as f16.
pub fn quantize_q8_1_mmvq(x: &[f32]) -> Vec<BlockQ8_1> {
    let nblocks = x.len().div_ceil(QK);
    let mut out = vec![<BlockQ8_1 as bytemuck::Zeroable>::zeroed(); nblocks];
    for (ib, y) in out.iter_mut().enumerate() {
        // One value per lane; lanes past the row's end read 0.0.
        let xi: [f32; QK] = core::array::from_fn(|l| x.get(QK * ib + l).copied().unwrap_or(0.0));
        let mut lanes = [0.0f32; QK];
        for l in 0..QK {
            lanes[l] = xi[l].abs();
        }
        let amax = butterfly_max(&mut lanes);
        lanes = xi;
        let sum = butterfly_sum(&mut lanes);

        let d = amax / 127.0f32;
        for l in 0..QK {
            let q = if amax == 0.0 { 0 } else { to_i8_amdgpu((xi[l] / d).round()) };
            y.qs[l] = q as u8;
        }
        y.d = to_half(d);
        y.s = to_half(sum);
    }
    out
}
