//! `quantize_q8_1` (`ggml-cuda/quantize.cu`) as HIP computes it and as ggml's CUDA
//! build (fast math) computes it, and the warp butterflies of `common.cuh`
//! (`warp_reduce_sum`, `warp_reduce_max`). See the parent module for the float order
//! in words.

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
    quantize_blocks(x, |xi, y| {
        let mut lanes = [0.0f32; QK];
        for l in 0..QK {
            lanes[l] = xi[l].abs();
        }
        let amax = butterfly_max(&mut lanes);
        lanes = *xi;
        let sum = butterfly_sum(&mut lanes);

        let d = amax / 127.0f32;
        for l in 0..QK {
            let q = if amax == 0.0 { 0 } else { to_i8_amdgpu((xi[l] / d).round()) };
            y.qs[l] = q as u8;
        }
        (d, sum)
    })
}

/// The block framing both quantizers share: one block of 32 lanes at a time (lanes past
/// the row's end read 0.0); `block` fills the codes and returns `(d, sum)`, which are
/// stored as f16.
fn quantize_blocks(
    x: &[f32],
    mut block: impl FnMut(&[f32; QK], &mut BlockQ8_1) -> (f32, f32),
) -> Vec<BlockQ8_1> {
    let nblocks = x.len().div_ceil(QK);
    let mut out = vec![<BlockQ8_1 as bytemuck::Zeroable>::zeroed(); nblocks];
    for (ib, y) in out.iter_mut().enumerate() {
        let xi: [f32; QK] = core::array::from_fn(|l| x.get(QK * ib + l).copied().unwrap_or(0.0));
        let (d, sum) = block(&xi, y);
        y.d = to_half(d);
        y.s = to_half(sum);
    }
    out
}

/// Flush to zero: a subnormal becomes a zero of the same sign (NVIDIA's `.FTZ`).
#[inline]
pub(super) fn ftz(v: f32) -> f32 {
    if v.is_subnormal() {
        f32::from_bits(v.to_bits() & 0x8000_0000)
    } else {
        v
    }
}

/// The correctly rounded f32 nearest to 1/127, the constant ptxas multiplies by for
/// `amax / 127.0f` under fast math (0x3C010204).
const INV_127: f32 = 1.0 / 127.0;

/// Twin of the `quantize_q8_1` kernel as ggml's CUDA build compiles it (nvcc
/// `-use_fast_math`, read from the SASS for sm_90 and sm_80). Per block of 32, with
/// every float instruction flushing subnormal inputs and results to zero:
///
/// - `amax`: the 32-lane butterfly of `fmaxf` over `|x|` (`FADD.FTZ |x|, -0`, so a
///   subnormal `x` counts 0); `sum`: the butterfly of flushed additions;
/// - `d = amax * RN(1/127)`: the division by the constant is approximate under fast
///   math and ptxas folds it into one product (not `amax / 127`);
/// - `q = 0` when `amax == 0` (a flushed compare); else `t = x * rcp(d)`, then
///   `roundf(t)` as `trunc(t + copysign(0.5, t))` with the addition rounded toward
///   zero (exactly `roundf`), converted to int32 saturating with NaN to 0 (`F2I`, as
///   PTX's `cvt.rzi.s32.f32` converts), low byte;
/// - `d` and `sum` stored as f16 (round to nearest even).
///
/// **`rcp(d)` is a model**: the device's `MUFU.RCP` is an approximate reciprocal whose
/// exact results no document specifies; it is taken here as the correctly rounded
/// `1/d`. Codes of values near a .5 boundary can differ from the device's by one,
/// which only a run on an NVIDIA GPU can settle.
pub fn quantize_q8_1_cuda(x: &[f32]) -> Vec<BlockQ8_1> {
    quantize_blocks(x, |xi, y| {
        let mut lanes = [0.0f32; QK];
        for l in 0..QK {
            lanes[l] = ftz(xi[l].abs());
        }
        let amax = butterfly(&mut lanes, |a, b| ftz(fmaxf(ftz(a), ftz(b))));
        lanes = *xi;
        let sum = butterfly(&mut lanes, |a, b| ftz(ftz(a) + ftz(b)));
        let d = ftz(amax * INV_127);
        for l in 0..QK {
            let q = if amax == 0.0 {
                0
            } else {
                let t = ftz(ftz(1.0 / d) * ftz(xi[l]));
                to_i8_amdgpu(round_half_away_rz(t))
            };
            y.qs[l] = q as u8;
        }
        (d, sum)
    })
}

/// `trunc(RZ(t + copysign(0.5, t)))`, the device's `roundf`, is `roundf(t)` (half away
/// from zero, Rust's `round`) for every t. For t >= 0 (the negative side is its mirror):
/// below 0.5 the exact sum is below 1 and so is its rounding toward zero, giving +0;
/// from 2^23 on, t is an integer and t + 0.5 rounds toward zero back to t; in between,
/// the integer part n of the exact sum is below 2^24, so representable, and rounding
/// toward zero cannot go below it: truncation gives n = floor(t + 0.5) either way.
/// Infinities and NaN pass through.
#[inline]
fn round_half_away_rz(t: f32) -> f32 {
    t.round()
}
