//! ggml's GPU RMSNorm, SwiGLU and attention softmax (`ggml-cuda/norm.cu`
//! `rms_norm_f32<block, do_multiply>`, `ggml-cuda/unary.cu` `unary_gated_op_kernel<op_silu,
//! float>`, `ggml-cuda/softmax.cu` `soft_max_f32<true, ncols, block, float>`, [`soft_max_row`])
//! and CUDA's RoPE angles as HIP clang and nvcc compile them (HIP's RoPE:
//! [`super::ocml`]): the GPU lanes' own elementwise kernels ([`GpuMath`]). The float order
//! below was read from the code objects `ci/ggml-gpu` builds from ggml's sources, and
//! `kernels/hip`'s `ggml` trials compare it with those code objects for every target.
//!
//! # RMSNorm times a weight row (`rms_norm_f32<B, true>`, the fused `RMS_NORM` + `MUL`)
//!
//! One block of `B` threads per row: `B = 256` for rows shorter than 1024, else 1024
//! ([`rms_norm_block`]).
//! - Thread `t` sums its columns `t, t+B, t+2B, ..` in increasing order, each square
//!   fused into the running sum: `tmp = fma(x, x, tmp)` from `tmp = 0` (both compilers
//!   contract `tmp += x*x`).
//! - `block_reduce<SUM, B>` ([`block_reduce_sum`]): the 32-lane XOR butterfly within
//!   each warp of 32 threads (ggml's `WARP_SIZE`, also on 64-wide wavefronts); lane 0
//!   of warp `w` stores its value to shared slot `w`; then lane `l` of every warp reads
//!   slot `l` (`0.0` for `l >= B/32`) and the same butterfly runs again.
//! - HIP: `mean = tmp / ncols` (a correctly rounded division), `v = mean + eps`.
//!   CUDA (`-use_fast_math`): the division becomes `tmp * rcp(ncols)` and is fused with
//!   the addition: `v = fma(tmp, rcp((float)ncols), eps)`.
//! - `scale = rsqrtf(v)`: a hardware reciprocal square root on both (`v_rsq_f32`, whose
//!   argument HIP scales by 2^100 below 2^-100 and whose result it scales back by 2^50,
//!   both exact; `MUFU.RSQ` on NVIDIA).
//! - `y = (scale * x) * w`: two rounded products.
//!
//! # SwiGLU (`unary_gated_op_kernel<op_silu>`: `silu(x) * g`, one thread per element)
//!
//! HIP (`expf` from the device library, inlined):
//! - `ph = RN(-x * log2e)`, `pl = fma(-log2e, x, -ph)` (the product's rounding error),
//!   `pl = fma(-log2e_lo, x, pl)` (`log2e_lo = 0x32A5705F`, the next 24 bits of log2 e),
//!   `n = rint(ph)`, `a = (ph - n) + pl`, `e = ldexp(v_exp_f32(a), n)`;
//! - `den = 1 + e`, except `den = 1` where `x > 0x42CE8ED0` (103.28: `e` underflows) and
//!   `den = inf` where `x < 0xC2B17218` (-88.72: `e` overflows);
//! - `y = (x / den) * g`, the division correctly rounded.
//!
//! CUDA (`-use_fast_math`: `expf` is `__expf`, `/` is approximate), every instruction
//! flushing subnormal inputs and results to zero:
//! - `den = 1 + ex2(RN(x * -log2e))` (`FMUL`, `MUFU.EX2`, `FADD`);
//! - `y = (x * rcp(den)) * g` (`MUFU.RCP`, two `FMUL`).
//!
//! # What is a model
//!
//! The hardware approximations `v_rsq_f32`, `v_exp_f32`, `MUFU.RSQ`, `MUFU.EX2` and
//! `MUFU.RCP` have no bit-exact specification; here each is the correctly rounded
//! result of its function, computed in f64 and rounded once to f32 ([`rsqrt`],
//! [`exp2`], [`rcp`]). Every other operation is the device's own. So the order of
//! every sum and product is the device's, and a result differs from the device's only
//! where one of those approximations does not return the correctly rounded value —
//! which only a run on a GPU can settle. AMDGPU kernels are taken to keep f32
//! subnormals (the ROCm default; the kernel descriptor's denormal mode is not read).

use super::quantize::ftz;

/// ggml's `WARP_SIZE`: the width of every butterfly here, on every GPU.
pub const WARP: usize = 32;

/// Which compiler's math a GPU elementwise twin reproduces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GpuMath {
    /// HIP clang for AMD GPUs: IEEE divisions, the device library's `expf`, subnormals
    /// kept.
    Hip,
    /// nvcc with `-use_fast_math`: approximate divisions, `__expf`, subnormals flushed.
    Cuda,
}

impl GpuMath {
    /// Whether every float instruction flushes subnormals to zero.
    pub fn ftz(self) -> bool {
        self == GpuMath::Cuda
    }

    /// How RMSNorm forms `mean + eps` from the sum of squares.
    pub fn rms_mean(self) -> RmsMean {
        match self {
            GpuMath::Hip => RmsMean::DivideThenAdd,
            GpuMath::Cuda => RmsMean::FmaReciprocal,
        }
    }

    /// How SiLU computes `exp(-x)`.
    pub fn expf(self) -> Expf {
        match self {
            GpuMath::Hip => Expf::DeviceLibrary,
            GpuMath::Cuda => Expf::FastEx2,
        }
    }

    /// How softmax forms `1 / sum`.
    pub fn soft_max_inverse(self) -> Divide {
        match self {
            GpuMath::Hip => Divide::Ieee,
            GpuMath::Cuda => Divide::Reciprocal,
        }
    }

    /// How SiLU divides `x` by `1 + exp(-x)`.
    pub fn silu_divide(self) -> Divide {
        match self {
            GpuMath::Hip => Divide::Ieee,
            GpuMath::Cuda => Divide::Reciprocal,
        }
    }
}

/// SiLU's `1 + expf(-x)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expf {
    /// The device library's `expf`, inlined (HIP): the split product, `v_exp_f32`,
    /// `ldexp`, and the two cut-offs.
    DeviceLibrary,
    /// `__expf` (CUDA fast math): `ex2(RN(x * -log2e))`.
    FastEx2,
}

/// RMSNorm's `mean + eps`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RmsMean {
    /// `RN(RN(sum / n) + eps)` (HIP).
    DivideThenAdd,
    /// `fma(sum, rcp(n), eps)` (CUDA fast math).
    FmaReciprocal,
}

/// An f32 division `x / d` in device code (SiLU's, softmax's `1 / sum`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Divide {
    /// `x / d`, correctly rounded (HIP).
    Ieee,
    /// `x * rcp(d)` (CUDA fast math; `1 / d` is `rcp(d)` itself).
    Reciprocal,
}

/// Threads per block of `rms_norm_f32` for a row of `n` values.
pub fn rms_norm_block(n: usize) -> usize {
    if n < 1024 {
        256
    } else {
        1024
    }
}

/// The model of a hardware reciprocal square root: `1/sqrt(v)` in f64, rounded once.
#[inline]
pub fn rsqrt(v: f32) -> f32 {
    (1.0 / (v as f64).sqrt()) as f32
}

/// The model of a hardware `2^a`: the f64 `exp2`, rounded once.
#[inline]
pub fn exp2(a: f32) -> f32 {
    (a as f64).exp2() as f32
}

/// The model of a hardware reciprocal: `1/v` in f64, rounded once (the correctly
/// rounded f32 reciprocal: the f64 quotient is within half an f64 ulp, far inside
/// every f32 rounding interval that is not a tie, and `1/v` is never an f32 tie).
#[inline]
pub fn rcp(v: f32) -> f32 {
    (1.0 / v as f64) as f32
}

#[inline]
fn flush(on: bool, v: f32) -> f32 {
    if on {
        ftz(v)
    } else {
        v
    }
}

/// `block_reduce<SUM, B>` of the per-thread values `tmp` (`B = tmp.len()`, a multiple
/// of 32 up to 1024): each warp's 32-lane butterfly, lane 0's results in shared slots,
/// then one more butterfly over slots `0..B/32` padded with `0.0`. `add` is the
/// device's addition (flushing or not). Returns the block's sum (every thread's).
pub fn block_reduce_sum(tmp: &mut [f32], add: impl Fn(f32, f32) -> f32 + Copy) -> f32 {
    let b = tmp.len();
    assert!(b.is_multiple_of(WARP) && b <= WARP * WARP, "block of {b} threads");
    // `x += __shfl_xor(x, off)` for off = 16, .., 1: lane i adds lane i^off.
    let bfly = |lanes: &mut [f32]| {
        let mut prev = [0.0f32; WARP];
        let mut off = WARP / 2;
        while off > 0 {
            prev.copy_from_slice(lanes);
            for i in 0..WARP {
                lanes[i] = add(prev[i], prev[i ^ off]);
            }
            off /= 2;
        }
        lanes[0]
    };
    let mut slots = [0.0f32; WARP];
    for (w, lanes) in tmp.chunks_exact_mut(WARP).enumerate() {
        slots[w] = bfly(lanes);
    }
    if b == WARP {
        return slots[0];
    }
    bfly(&mut slots)
}

/// Twin of ggml's GPU `rms_norm_f32<B, do_multiply = true>`: `y = rmsnorm(x) * w` (see
/// the module doc for the order).
pub fn rms_norm_mul(math: GpuMath, y: &mut [f32], x: &[f32], w: &[f32], eps: f32) {
    assert!(y.len() == x.len() && x.len() == w.len(), "rms_norm: lengths differ");
    let n = x.len();
    let z = math.ftz();
    let b = rms_norm_block(n);
    let mut tmp = vec![0.0f32; b];
    for (t, acc) in tmp.iter_mut().enumerate() {
        for col in (t..n).step_by(b) {
            let v = flush(z, x[col]);
            *acc = flush(z, v.mul_add(v, *acc));
        }
    }
    let sum = block_reduce_sum(&mut tmp, move |a, c| flush(z, flush(z, a) + flush(z, c)));
    let v = match math.rms_mean() {
        RmsMean::DivideThenAdd => sum / n as f32 + eps,
        RmsMean::FmaReciprocal => flush(z, sum.mul_add(flush(z, rcp(n as f32)), flush(z, eps))),
    };
    let scale = flush(z, rsqrt(flush(z, v)));
    for i in 0..n {
        y[i] = flush(z, flush(z, scale * flush(z, x[i])) * flush(z, w[i]));
    }
}

/// `log2 e` rounded to f32 (0x3FB8AA3B).
const LOG2E: f32 = f32::from_bits(0x3FB8_AA3B);
/// The next 24 bits of `log2 e` (0x32A5705F), HIP's device `expf` splits the product
/// with.
const LOG2E_LO: f32 = f32::from_bits(0x32A5_705F);
/// Above this `x`, HIP's `1 + expf(-x)` is 1 (0x42CE8ED0).
const SILU_ONE_ABOVE: f32 = f32::from_bits(0x42CE_8ED0);
/// Below this `x`, HIP's `1 + expf(-x)` is infinite (0xC2B17218).
const SILU_INF_BELOW: f32 = f32::from_bits(0xC2B1_7218);
/// Below this `v`, HIP's `expf(v)` is 0 (0xC2CE8ED0, -103.28).
const EXPF_ZERO_BELOW: f32 = f32::from_bits(0xC2CE_8ED0);
/// Above this `v`, HIP's `expf(v)` is infinite (0x42B17218, 88.72).
const EXPF_INF_ABOVE: f32 = f32::from_bits(0x42B1_7218);

/// `ldexp(v, n)`, one rounding (exact unless the result is subnormal or overflows).
#[inline]
fn ldexp(v: f32, n: i32) -> f32 {
    (v as f64 * 2f64.powi(n.clamp(-400, 400))) as f32
}

/// `expf(v)` in the form `expf` (flushing subnormals when `z`), without the cut-offs
/// of the device library's form (the caller applies them where its comparison is).
#[inline]
fn expf_core(expf: Expf, z: bool, v: f32) -> f32 {
    match expf {
        Expf::DeviceLibrary => {
            let ph = flush(z, v * LOG2E);
            let pl = flush(z, LOG2E.mul_add(v, -ph));
            let pl = flush(z, LOG2E_LO.mul_add(v, pl));
            let n = ph.round_ties_even();
            let a = flush(z, flush(z, ph - n) + pl);
            // `v_cvt_i32_f32` of n: saturating, NaN to 0 (Rust's `as`).
            flush(z, ldexp(exp2(a), n as i32))
        }
        Expf::FastEx2 => flush(z, exp2(flush(z, v * LOG2E))),
    }
}

/// The GPU's `expf(v)`: the device library's form (HIP: the split product,
/// `v_exp_f32`, `ldexp`; `0` below -103.28 and `inf` above 88.72, where the compares
/// are ordered) or `__expf` (CUDA fast math: `ex2(RN(v * log2e))`).
#[inline]
pub fn expf(math: GpuMath, v: f32) -> f32 {
    let z = math.ftz();
    let v = flush(z, v);
    let e = expf_core(math.expf(), z, v);
    match math.expf() {
        Expf::DeviceLibrary if v < EXPF_ZERO_BELOW => 0.0,
        Expf::DeviceLibrary if v > EXPF_INF_ABOVE => f32::INFINITY,
        _ => e,
    }
}

/// `1 + expf(-x)` in the form `expf` (flushing subnormals when `z`).
#[inline]
fn silu_den(expf: Expf, z: bool, x: f32) -> f32 {
    // `RN(-x * c)` is `RN(x * -c)`, and `fma(c, -x, y)` is `fma(-c, x, y)`, bit for bit.
    let mut den = flush(z, 1.0 + expf_core(expf, z, -x));
    if expf == Expf::DeviceLibrary {
        // `v_cmp_nlt` / `v_cmp_ngt`: the replacements apply only to ordered compares.
        if x > SILU_ONE_ABOVE {
            den = 1.0;
        }
        if x < SILU_INF_BELOW {
            den = f32::INFINITY;
        }
    }
    den
}

/// One element of ggml's GPU SiLU: `x / (1 + expf(-x))` in `math`'s form.
#[inline]
pub fn silu(math: GpuMath, x: f32) -> f32 {
    let z = math.ftz();
    let x = flush(z, x);
    let den = silu_den(math.expf(), z, x);
    match math.silu_divide() {
        Divide::Ieee => flush(z, x / den),
        Divide::Reciprocal => flush(z, x * flush(z, rcp(den))),
    }
}

/// Twin of ggml's GPU SwiGLU (`unary_gated_op_kernel<op_silu, float>`):
/// `y[i] = silu(x[i]) * g[i]`.
pub fn swiglu(math: GpuMath, y: &mut [f32], x: &[f32], g: &[f32]) {
    assert!(y.len() == x.len() && x.len() == g.len(), "swiglu: lengths differ");
    let z = math.ftz();
    for i in 0..x.len() {
        y[i] = flush(z, silu(math, x[i]) * flush(z, g[i]));
    }
}

/// `1/(2 pi)` rounded to f32 (0x3E22F983), the factor nvcc's fast `sinf`/`cosf` scale
/// the angle by before `MUFU.SIN`/`MUFU.COS`.
const INV_2PI: f32 = f32::from_bits(0x3E22_F983);

/// `a * b` rounded toward zero (SASS `FMUL.RZ`): the exact product (an f64 holds it)
/// rounded to nearest, stepped one ulp toward zero where that rounded away from it.
#[inline]
pub fn mul_rz(a: f32, b: f32) -> f32 {
    let p = a as f64 * b as f64;
    let r = p as f32;
    if r.is_finite() && (r as f64).abs() > p.abs() {
        f32::from_bits(r.to_bits() - 1)
    } else {
        r
    }
}

/// The model of `MUFU.SIN` / `MUFU.COS` of `t` (an angle in turns, already scaled by
/// `1/(2 pi)`): `sin(2 pi t)` / `cos(2 pi t)` in f64 of the fractional turn (exact in
/// f64), rounded once.
#[inline]
pub fn sincos_turns(t: f32) -> (f32, f32) {
    let t = t as f64;
    let frac = t - t.round();
    let a = frac * std::f64::consts::TAU;
    (a.sin() as f32, a.cos() as f32)
}

/// The model of `MUFU.LG2`: `log2` in f64, rounded once.
#[inline]
pub fn log2(v: f32) -> f32 {
    (v as f64).log2() as f32
}

/// ggml's CUDA RoPE angles and their cosines and sines for one position, as `rope_neox`
/// (`ggml-cuda/rope.cu`, no frequency factors, `ext_factor = 0`, `freq_scale = 1`,
/// `attn_factor = 1`) computes them under nvcc's fast math, read from the SASS for sm_90
/// and sm_80. Returns `[cos, sin]` per pair `p` of `n_dims`:
///
/// - `theta_scale = powf(freq_base, -2/n_dims)` on the host (the C library's `powf`, as
///   on the CPU);
/// - `theta = pos * ex2(RN(RN(2p * 0.5) * lg2(theta_scale)))` (`__powf(theta_scale,
///   i0/2.0f)` is `MUFU.EX2(y * MUFU.LG2(x))`), then times `freq_scale`: every pair's
///   angle computed afresh, where the CPU multiplies `theta` by `theta_scale` pair after
///   pair;
/// - `t = RZ(theta * RN(1/(2 pi)))`, the product rounded **toward zero**, and
///   `cos = MUFU.COS(t)`, `sin = MUFU.SIN(t)` (`__cosf`/`__sinf`), each times
///   `mscale = attn_factor`.
///
/// Every `FMUL` flushes subnormals. `MUFU.LG2`, `EX2`, `SIN` and `COS` are modelled as
/// correctly rounded ([`log2`], [`exp2`], [`sincos_turns`]). The rotation is
/// `fma(x0, cos, -(x1 * sin))`, `fma(x0, sin, x1 * cos)`: the CPU's fused form
/// (`crate::elem::rope_neox` with `fused = true`).
///
/// Note what `t` costs: for a position in the thousands, `t` is a few hundred turns,
/// whose f32 ulp is 2^-15 turns (from 256 to 512 turns); rounding toward zero loses up
/// to one ulp, a phase error of up to 2 pi 2^-15 (about 2^-12.3) radians, far above an
/// f32 rounding of the cosine. The device's angles at long positions are that coarse; the
/// CPU's (glibc `cosf` of the angle) are not.
pub fn rope_cache_cuda(pos: i32, n_dims: usize, freq_base: f32) -> Vec<[f32; 2]> {
    let theta_scale = freq_base.powf(-2.0f32 / n_dims as f32);
    let lg = ftz(log2(ftz(theta_scale)));
    let posf = pos as f32;
    (0..n_dims / 2)
        .map(|p| {
            let half = ftz((2 * p) as f32 * 0.5);
            let pw = ftz(exp2(ftz(half * lg)));
            // `theta_base * freq_scale` with freq_scale = 1, exact.
            let theta = ftz(posf * pw);
            let (s, c) = sincos_turns(mul_rz(theta, INV_2PI));
            // `* mscale` (attn_factor = 1), exact.
            [ftz(c), ftz(s)]
        })
        .collect()
}

/// Threads per block of ggml's GPU `soft_max_f32` for rows of `n` values: the smallest
/// power of two from 32 that reaches `n`, at most 1024 (`soft_max_f32_cuda`). The
/// templated instances (`n` = 32, 64, .., 4096) use `min(n, 1024)`, the same number.
pub fn soft_max_block(n: usize) -> usize {
    let mut nth = WARP;
    while nth < n && nth < 1024 {
        nth *= 2;
    }
    nth
}

/// Twin of ggml's GPU softmax of one attention row (`ggml-cuda/softmax.cu`
/// `soft_max_f32<use_shared, ncols, block, float>`, no sinks, `max_bias = 0`):
/// `p = softmax(w)` for the scores `w`, already scaled and masked (`RN(kq * scale)`, or
/// `-inf` at masked cells: what the kernel forms as `x*scale + slope*mask` with
/// `slope = 1` and a mask of 0 or `-inf`, whichever product it fuses). One block of
/// `B` = [`soft_max_block`] threads:
///
/// - the row maximum (`fmaxf` per thread, then `block_reduce<MAX>`; a maximum does not
///   depend on the order);
/// - `e_j = expf(w_j - max)` ([`expf`]: the subtraction rounded, then the device's
///   `expf`); thread `t` sums its columns `t, t+B, ..` from `0.0` in increasing order,
///   one rounding each;
/// - `block_reduce<SUM>` of the per-thread sums ([`block_reduce_sum`]);
/// - `inv = 1 / sum`: a correctly rounded division (HIP), `MUFU.RCP` (CUDA fast math,
///   modelled as correctly rounded, [`rcp`]);
/// - `p_j = e_j * inv`, one product.
///
/// CUDA flushes subnormal inputs and results of every instruction.
pub fn soft_max_row(math: GpuMath, p: &mut [f32], w: &[f32]) {
    assert_eq!(p.len(), w.len(), "soft_max_row: lengths differ");
    let n = w.len();
    let z = math.ftz();
    let max = w.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(flush(z, v)));
    for (e, &v) in p.iter_mut().zip(w) {
        *e = expf(math, flush(z, flush(z, v) - max));
    }
    let b = soft_max_block(n);
    let mut tmp = vec![0.0f32; b];
    for (t, acc) in tmp.iter_mut().enumerate() {
        for col in (t..n).step_by(b) {
            *acc = flush(z, *acc + p[col]);
        }
    }
    let sum = block_reduce_sum(&mut tmp, move |a, c| flush(z, flush(z, a) + flush(z, c)));
    let inv = match math.soft_max_inverse() {
        Divide::Ieee => 1.0 / sum,
        Divide::Reciprocal => flush(z, rcp(flush(z, sum))),
    };
    for e in p.iter_mut() {
        *e = flush(z, *e * inv);
    }
}
