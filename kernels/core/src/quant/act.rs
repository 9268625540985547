//! Activation quantizers. Each is a named rule ([`ActRule`]) so a lane's recipe can
//! say which one it uses and attribution can swap one for another.
//!
//! Reference rules (`ggml-quants.c`):
//! - **q8_K** (`quantize_row_q8_K_ref`): per 256 values, amax = max |x| and `max` = the
//!   signed value that reached it (first occurrence wins: strict `>`). If amax == 0:
//!   d = 0 and all quants 0; ggml leaves `bsums` unwritten there, and we define them
//!   as 0. Otherwise iscale = -127/max, q = min(127, nearest_int(iscale*x)) (the
//!   product rounded to f32, then round half to even), `bsums[g]` = sum of quants
//!   16g..16g+15, d = 1/iscale (f32). So d < 0 when max > 0, and the
//!   largest-magnitude value always maps to -127.
//! - **q8_0** (`quantize_row_q8_0_ref`): per 32 values, amax = max |x| (NaN ignored by
//!   `MAX`'s comparison), d = amax/127, id = d ? 1/d : 0 (from the f32 d, before it
//!   is rounded to f16), q = roundf(x*id), half away from zero; d stored as f16.
//! - **q8_1** (`quantize_row_q8_1_ref`): as q8_0, plus s = f16((float)sum(q) * d).

use crate::blocks::{cast_blocks_mut, to_half, BlockQ8K, BlockQ8_0, BlockQ8_1, QK, QK_K};
use crate::error::KernelError;
use crate::quant::round::{f32_to_i8_c, nearest_int, nearest_int_fused, round_half_away};
use crate::GgmlType;

/// An activation quantization rule: output format, scale rule and rounding mode, as data
/// (a name, the block format, the quantizer). The rules below are the ones the lanes use;
/// a lane whose tier quantizes otherwise defines its own with [`ActRule::new`] beside its
/// twin. Two rules are the same rule when their names are equal.
#[derive(Clone, Copy)]
pub struct ActRule {
    ident: &'static str,
    name: &'static str,
    format: GgmlType,
    quantize: Quantizer,
}

/// A rule's quantizer: one row `x` (whole blocks, checked by the caller) into `out`, exactly
/// the row's size in bytes of the rule's format.
pub type Quantizer = fn(x: &[f32], out: &mut [u8]) -> Result<(), KernelError>;

// The rules keep the names they had as an enumeration (`ActRule::Q8KRef`, ...).
#[allow(non_upper_case_globals)]
impl ActRule {
    /// q8_K, `quantize_row_q8_K_ref` as compiled without contraction (x86-64):
    /// iscale = -127/max, nearest-even of the f32 product.
    pub const Q8KRef: ActRule =
        ActRule::new("Q8KRef", "q8_K/ref-nearest-even", GgmlType::Q8_K, q8k_ref);
    /// q8_K with `nearest_int(iscale*x)` fused into one multiply-add, as GCC compiles
    /// `quantize_row_q8_K_ref` on aarch64 (one rounding fewer).
    pub const Q8KFusedNearest: ActRule = ActRule::new(
        "Q8KFusedNearest",
        "q8_K/fused-nearest-even",
        GgmlType::Q8_K,
        q8k_fused_nearest,
    );
    /// q8_0, `quantize_row_q8_0_ref`: id = 1/d, roundf (half away from zero).
    pub const Q8_0Ref: ActRule =
        ActRule::new("Q8_0Ref", "q8_0/ref-round-away", GgmlType::Q8_0, q8_0_ref);
    /// q8_1, `quantize_row_q8_1_ref`: as [`ActRule::Q8_0Ref`] plus s = f16(d * sum q).
    pub const Q8_1Ref: ActRule =
        ActRule::new("Q8_1Ref", "q8_1/ref-round-away", GgmlType::Q8_1, q8_1_ref);
    /// q8_0 as ggml's AVX2/AVX `quantize_row_q8_0` (`arch/x86/quants.c`): amax by a
    /// `maxps` tree, d = amax/127 rounded to f16 by F16C, **id = 127/amax** (not 1/d),
    /// `_mm256_round_ps` to nearest even, then `cvtps_epi32` and two saturating packs.
    pub const Q8_0X86: ActRule =
        ActRule::new("Q8_0X86", "q8_0/x86-127-over-max-nearest-even", GgmlType::Q8_0, q8_0_x86);
    /// q8_1 as ggml's AVX2 `quantize_row_q8_1` (`arch/x86/quants.c`): the quants of
    /// [`ActRule::Q8_0X86`], and s = f16(d * (float)sum), the sum taken over the 32-bit
    /// conversions before the saturating packs (wrapping, as `hsum_i32_8` adds).
    pub const Q8_1X86: ActRule =
        ActRule::new("Q8_1X86", "q8_1/x86-127-over-max-nearest-even", GgmlType::Q8_1, q8_1_x86);
    /// q8_K as ggml's AVX2 `ggml_quantize_mat_q8_K_4x8` (`arch/x86/repack.cpp`), the
    /// activations of the repacked gemm: amax by a `maxps` tree; iscale = -127/amax if
    /// some value equals +amax, else +127/amax (not the first maximum's sign); q =
    /// `round_ps` to nearest even of x*iscale, converted and packed with saturation;
    /// d = 1/iscale; bsums from the quants.
    pub const Q8KX86x4: ActRule =
        ActRule::new("Q8KX86x4", "q8_K/x86-4x8-positive-max-sign", GgmlType::Q8_K, q8k_x86x4);
    /// q8_0 as ggml's NEON `quantize_row_q8_0` (`arch/arm/quants.c`): amax by a `fmax`
    /// tree (NaN propagates), d = amax/127, id = 1/d, q = `vcvtnq_s32_f32(x*id)` (round to
    /// nearest even; NaN converts to 0), stored as the low byte; d to f16 by the hardware.
    pub const Q8_0Neon: ActRule =
        ActRule::new("Q8_0Neon", "q8_0/neon-1-over-d-nearest-even", GgmlType::Q8_0, q8_0_neon);
    /// q8_1 as ggml's NEON `quantize_row_q8_1` (`arch/arm/quants.c`): the quants and d
    /// of [`ActRule::Q8_0Neon`], and s = f16(d * (float)sum), the sum taken over the 32-bit
    /// conversions (wrapping adds) before each is stored as its low byte.
    pub const Q8_1Neon: ActRule =
        ActRule::new("Q8_1Neon", "q8_1/neon-1-over-d-nearest-even", GgmlType::Q8_1, q8_1_neon);
    /// q8_1 as ggml's CUDA/HIP `quantize_q8_1` kernel compiled by HIP clang (the MMVQ
    /// activations): warp-butterfly amax and sum, d = amax/127 and q = roundf(x/d) by
    /// true divisions (half away from zero), d and the float sum of x stored as f16. See
    /// [`crate::gpu::quantize_q8_1_mmvq`].
    pub const Q8_1HipMmvq: ActRule = ActRule::new(
        "Q8_1HipMmvq",
        "q8_1/hip-divide-round-away-f16-sum",
        GgmlType::Q8_1,
        q8_1_hip_mmvq,
    );
    /// q8_1 as ggml's CUDA build (`-use_fast_math`) computes `quantize_q8_1`: subnormals
    /// flushed, d = amax * RN(1/127), q = roundf(x * rcp(d)) with the reciprocal
    /// **modelled** as correctly rounded. See [`crate::gpu::quantize_q8_1_cuda`].
    pub const Q8_1CudaMmvq: ActRule = ActRule::new(
        "Q8_1CudaMmvq",
        "q8_1/cuda-ftz-rcp-round-away-f16-sum",
        GgmlType::Q8_1,
        q8_1_cuda_mmvq,
    );

    /// A rule: `ident` its short name in debug output, `name` its stable name (recipes,
    /// reports, test names), `format` the block format it produces, `quantize` the
    /// quantizer.
    pub const fn new(
        ident: &'static str,
        name: &'static str,
        format: GgmlType,
        quantize: Quantizer,
    ) -> ActRule {
        ActRule { ident, name, format, quantize }
    }

    /// Stable name, used in recipes, reports and test names.
    pub fn name(self) -> &'static str {
        self.name
    }

    /// The block format this rule produces.
    pub fn format(self) -> GgmlType {
        self.format
    }

    /// Quantize one row `x` (a whole number of blocks) into bytes of [`Self::format`].
    pub fn quantize(self, x: &[f32]) -> Result<Vec<u8>, KernelError> {
        let ty = self.format();
        let bytes = ty.row_bytes(x.len()).ok_or(KernelError::BadRowLength {
            ty: ty.name(),
            k: x.len(),
            block: ty.block_size(),
        })?;
        let mut out = vec![0u8; bytes];
        self.quantize_into(x, &mut out)?;
        Ok(out)
    }

    /// Quantize `x` into `out`, which must be exactly the row's size in bytes.
    pub fn quantize_into(self, x: &[f32], out: &mut [u8]) -> Result<(), KernelError> {
        let ty = self.format();
        let want = ty.row_bytes(x.len()).ok_or(KernelError::BadRowLength {
            ty: ty.name(),
            k: x.len(),
            block: ty.block_size(),
        })?;
        if out.len() != want {
            return Err(KernelError::ShapeMismatch {
                what: "activation output bytes",
                expected: want,
                got: out.len(),
            });
        }
        (self.quantize)(x, out)
    }
}

impl PartialEq for ActRule {
    fn eq(&self, other: &ActRule) -> bool {
        self.name == other.name
    }
}

impl Eq for ActRule {}

impl core::hash::Hash for ActRule {
    fn hash<H: core::hash::Hasher>(&self, state: &mut H) {
        self.name.hash(state);
    }
}

impl core::fmt::Debug for ActRule {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.ident)
    }
}

fn q8k_ref(x: &[f32], out: &mut [u8]) -> Result<(), KernelError> {
    quantize_q8_k(x, cast_blocks_mut(GgmlType::Q8_K, out)?, nearest_int_mul);
    Ok(())
}

fn q8k_fused_nearest(x: &[f32], out: &mut [u8]) -> Result<(), KernelError> {
    quantize_q8_k(x, cast_blocks_mut(GgmlType::Q8_K, out)?, nearest_int_fused);
    Ok(())
}

fn q8_0_ref(x: &[f32], out: &mut [u8]) -> Result<(), KernelError> {
    quantize_q8_0(x, cast_blocks_mut(GgmlType::Q8_0, out)?);
    Ok(())
}

fn q8_1_ref(x: &[f32], out: &mut [u8]) -> Result<(), KernelError> {
    quantize_q8_1(x, cast_blocks_mut(GgmlType::Q8_1, out)?);
    Ok(())
}

fn q8_0_x86(x: &[f32], out: &mut [u8]) -> Result<(), KernelError> {
    quantize_q8_0_x86(x, cast_blocks_mut(GgmlType::Q8_0, out)?);
    Ok(())
}

fn q8_1_x86(x: &[f32], out: &mut [u8]) -> Result<(), KernelError> {
    quantize_q8_1_x86(x, cast_blocks_mut(GgmlType::Q8_1, out)?);
    Ok(())
}

fn q8k_x86x4(x: &[f32], out: &mut [u8]) -> Result<(), KernelError> {
    quantize_q8_k_x86x4(x, cast_blocks_mut(GgmlType::Q8_K, out)?);
    Ok(())
}

fn q8_0_neon(x: &[f32], out: &mut [u8]) -> Result<(), KernelError> {
    quantize_q8_0_neon(x, cast_blocks_mut(GgmlType::Q8_0, out)?);
    Ok(())
}

fn q8_1_neon(x: &[f32], out: &mut [u8]) -> Result<(), KernelError> {
    quantize_q8_1_neon(x, cast_blocks_mut(GgmlType::Q8_1, out)?);
    Ok(())
}

fn q8_1_hip_mmvq(x: &[f32], out: &mut [u8]) -> Result<(), KernelError> {
    let dst: &mut [BlockQ8_1] = cast_blocks_mut(GgmlType::Q8_1, out)?;
    dst.copy_from_slice(&crate::gpu::quantize_q8_1_mmvq(x));
    Ok(())
}

fn q8_1_cuda_mmvq(x: &[f32], out: &mut [u8]) -> Result<(), KernelError> {
    let dst: &mut [BlockQ8_1] = cast_blocks_mut(GgmlType::Q8_1, out)?;
    dst.copy_from_slice(&crate::gpu::quantize_q8_1_cuda(x));
    Ok(())
}

#[inline]
fn nearest_int_mul(iscale: f32, x: f32) -> i32 {
    nearest_int(iscale * x)
}

/// `quantize_row_q8_K_ref`, with the rounding of `iscale * x` supplied by `round`.
fn quantize_q8_k(x: &[f32], out: &mut [BlockQ8K], round: fn(f32, f32) -> i32) {
    for (xb, y) in x.chunks_exact(QK_K).zip(out.iter_mut()) {
        let mut max = 0.0f32;
        let mut amax = 0.0f32;
        for &v in xb {
            let ax = v.abs();
            if ax > amax {
                amax = ax;
                max = v;
            }
        }
        if amax == 0.0 {
            // ggml: d = 0, qs = 0, bsums left unwritten (we define them as 0).
            *y = bytemuck::Zeroable::zeroed();
            continue;
        }
        let iscale = -127.0f32 / max;
        for (j, &v) in xb.iter().enumerate() {
            let q = round(iscale, v).min(127);
            y.qs[j] = q as i8 as u8;
        }
        for g in 0..QK_K / 16 {
            let sum: i32 = y.qs[16 * g..16 * g + 16].iter().map(|&q| q as i8 as i32).sum();
            let b = (sum as i16).to_le_bytes();
            y.bsums[2 * g] = b[0];
            y.bsums[2 * g + 1] = b[1];
        }
        y.d = (1.0f32 / iscale).to_le_bytes();
    }
}

/// Shared head of q8_0 / q8_1: amax over the block (C's `MAX(amax, fabsf(v))`, which
/// keeps amax when the comparison with NaN is false), d and id.
#[inline]
fn q8_scale(xb: &[f32]) -> (f32, f32) {
    let mut amax = 0.0f32;
    for &v in xb {
        let av = v.abs();
        // MAX(a, b) = ((a) > (b) ? (a) : (b))
        amax = if amax > av { amax } else { av };
    }
    let d = amax / 127.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    (d, id)
}

/// `quantize_row_q8_0_ref`.
fn quantize_q8_0(x: &[f32], out: &mut [BlockQ8_0]) {
    for (xb, y) in x.chunks_exact(QK).zip(out.iter_mut()) {
        let (d, id) = q8_scale(xb);
        y.d = to_half(d);
        for (q, &v) in y.qs.iter_mut().zip(xb) {
            *q = f32_to_i8_c(round_half_away(v * id)) as u8;
        }
    }
}

/// `quantize_row_q8_1_ref`.
fn quantize_q8_1(x: &[f32], out: &mut [BlockQ8_1]) {
    for (xb, y) in x.chunks_exact(QK).zip(out.iter_mut()) {
        let (d, id) = q8_scale(xb);
        y.d = to_half(d);
        let mut sum = 0i32;
        for j in 0..QK / 2 {
            let v0 = xb[j] * id;
            let v1 = xb[QK / 2 + j] * id;
            y.qs[j] = f32_to_i8_c(round_half_away(v0)) as u8;
            y.qs[QK / 2 + j] = f32_to_i8_c(round_half_away(v1)) as u8;
            sum += y.qs[j] as i8 as i32;
            sum += y.qs[QK / 2 + j] as i8 as i32;
        }
        y.s = to_half(sum as f32 * d);
    }
}

/// `_mm_max_ps` for one lane: `a > b ? a : b` (the second operand when either is NaN).
#[inline]
fn maxps(a: f32, b: f32) -> f32 {
    if a > b {
        a
    } else {
        b
    }
}

/// `_mm256_cvtps_epi32`: NaN and out-of-range give the integer indefinite 0x80000000.
#[inline]
fn cvtps_epi32(r: f32) -> i32 {
    if (-2147483648.0..2147483648.0).contains(&r) {
        r as i32
    } else {
        i32::MIN
    }
}

/// `_mm256_cvtps_epi32` then `packs_epi32` and `packs_epi16`: the conversion, then the
/// packs saturate to i16 then i8.
#[inline]
fn cvt_pack_i8(r: f32) -> i8 {
    let i = cvtps_epi32(r);
    i.clamp(i16::MIN as i32, i16::MAX as i32).clamp(i8::MIN as i32, i8::MAX as i32) as i8
}

/// The head of ggml's AVX2 `quantize_row_q8_0`/`_q8_1` for one block: the absolute
/// maximum by a `maxps` tree (lane l of eight takes x[l], x[8+l], x[16+l], x[24+l] in
/// that order, then max(lane 4+i, lane i), then (0 with 2, 1 with 3), then (0 with 1)),
/// d = max/127 and the 32 rounded products x * (127/max) before conversion.
fn x86_scale_round(xb: &[f32]) -> (f32, [f32; QK]) {
    let mut m = [0.0f32; 8];
    for (l, ml) in m.iter_mut().enumerate() {
        let mut v = xb[l].abs();
        for r in 1..4 {
            v = maxps(v, xb[8 * r + l].abs());
        }
        *ml = v;
    }
    let m4: [f32; 4] = core::array::from_fn(|i| maxps(m[4 + i], m[i]));
    let m2 = [maxps(m4[0], m4[2]), maxps(m4[1], m4[3])];
    let max_scalar = maxps(m2[0], m2[1]);
    let d = max_scalar / 127.0;
    let id = if max_scalar != 0.0 { 127.0 / max_scalar } else { 0.0 };
    (d, core::array::from_fn(|j| (xb[j] * id).round_ties_even()))
}

/// Twin of ggml's AVX2 `quantize_row_q8_0` (see [`x86_scale_round`]).
fn quantize_q8_0_x86(x: &[f32], out: &mut [BlockQ8_0]) {
    for (xb, y) in x.chunks_exact(QK).zip(out.iter_mut()) {
        let (d, r) = x86_scale_round(xb);
        y.d = crate::fp16::f32_to_f16_bits_hw(d).to_le_bytes();
        for (q, &v) in y.qs.iter_mut().zip(&r) {
            *q = cvt_pack_i8(v) as u8;
        }
    }
}

/// Twin of ggml's AVX2 `quantize_row_q8_1`: [`quantize_q8_0_x86`]'s quants and d, and
/// s = f16(d * (float)sum) over the unsaturated 32-bit conversions (wrapping adds).
fn quantize_q8_1_x86(x: &[f32], out: &mut [BlockQ8_1]) {
    for (xb, y) in x.chunks_exact(QK).zip(out.iter_mut()) {
        let (d, r) = x86_scale_round(xb);
        y.d = crate::fp16::f32_to_f16_bits_hw(d).to_le_bytes();
        let sum = r.iter().fold(0i32, |s, &v| s.wrapping_add(cvtps_epi32(v)));
        y.s = crate::fp16::f32_to_f16_bits_hw(d * sum as f32).to_le_bytes();
        for (q, &v) in y.qs.iter_mut().zip(&r) {
            *q = cvt_pack_i8(v) as u8;
        }
    }
}

/// `_mm256_cmp_ps(a, b, _CMP_EQ_OQ)` for one lane: false when either is NaN.
#[inline]
fn eq_oq(a: f32, b: f32) -> bool {
    a == b
}

/// Twin of ggml's AVX2 `ggml_quantize_mat_q8_K_4x8` for one row (each of the four
/// rows it interleaves is quantized independently). Per 256 values, eight `maxps`
/// lanes l see x[32sb + 8r + l] for sb = 0..8, r = 0..4 in that order; each lane keeps
/// a flag "its maximum is attained by a value equal to +max" (reset when the lane's
/// maximum changes); the block's sign is negative (iscale = -127/amax) when a lane
/// holding the overall maximum has its flag set.
fn quantize_q8_k_x86x4(x: &[f32], out: &mut [BlockQ8K]) {
    for (xb, y) in x.chunks_exact(QK_K).zip(out.iter_mut()) {
        let mut max_abs = [0.0f32; 8];
        let mut flag = [false; 8];
        for l in 0..8 {
            let v = |sb: usize, r: usize| xb[32 * sb + 8 * r + l];
            let mut m = maxps(v(0, 0).abs(), v(0, 1).abs());
            m = maxps(m, v(0, 2).abs());
            m = maxps(m, v(0, 3).abs());
            let mut f = (0..4).any(|r| eq_oq(m, v(0, r)));
            for sb in 1..8 {
                let prev = m;
                for r in 0..4 {
                    m = maxps(m, v(sb, r).abs());
                }
                f &= eq_oq(prev, m);
                f |= (0..4).any(|r| eq_oq(m, v(sb, r)));
            }
            max_abs[l] = m;
            flag[l] = f;
        }
        let m4: [f32; 4] = core::array::from_fn(|i| maxps(max_abs[4 + i], max_abs[i]));
        let m2 = [maxps(m4[0], m4[2]), maxps(m4[1], m4[3])];
        let max_scalar = maxps(m2[0], m2[1]);
        let positive = (0..8).any(|l| flag[l] && eq_oq(max_scalar, max_abs[l]));
        let mut iscale = if max_scalar != 0.0 { 127.0 / max_scalar } else { 0.0 };
        if positive {
            iscale = if max_scalar != 0.0 { -127.0 / max_scalar } else { 0.0 };
        }
        let d = if max_scalar != 0.0 { 1.0 / iscale } else { 0.0 };
        y.d = d.to_le_bytes();
        for (q, &v) in y.qs.iter_mut().zip(xb) {
            *q = cvt_pack_i8((v * iscale).round_ties_even()) as u8;
        }
        for g in 0..QK_K / 16 {
            let sum: i32 = y.qs[16 * g..16 * g + 16].iter().map(|&q| q as i8 as i32).sum();
            let b = (sum as i16).to_le_bytes();
            y.bsums[2 * g] = b[0];
            y.bsums[2 * g + 1] = b[1];
        }
    }
}

/// AArch64 `FMAX` for one lane: NaN if either operand is NaN, else the larger.
#[inline]
fn fmax(a: f32, b: f32) -> f32 {
    if a.is_nan() || b.is_nan() {
        f32::NAN
    } else if a > b {
        a
    } else {
        b
    }
}

/// `vcvtnq_s32_f32` for one lane: round to nearest even, saturate, NaN to 0.
#[inline]
fn fcvtns(v: f32) -> i32 {
    if v.is_nan() {
        0
    } else {
        v.round_ties_even() as i32 // `as` saturates, like the instruction
    }
}

/// The head of ggml's NEON `quantize_row_q8_0`/`_q8_1` for one block: the amax tree
/// (eight 4-lane vectors x[4j..4j+4] of absolute values, vmaxq pairs (0,1),(2,3),(4,5),
/// (6,7), then (0,2), (4,6), then (0,4), then `vmaxvq` over the four lanes, all `fmax`),
/// d = amax/127, and the 32 conversions `vcvtnq_s32_f32(x * (1/d))`.
fn neon_scale_convert(xb: &[f32]) -> (f32, [i32; QK]) {
    let a = |j: usize, l: usize| xb[4 * j + l].abs();
    let m: [f32; 4] = core::array::from_fn(|l| {
        let p0 = fmax(a(0, l), a(1, l));
        let p2 = fmax(a(2, l), a(3, l));
        let p4 = fmax(a(4, l), a(5, l));
        let p6 = fmax(a(6, l), a(7, l));
        fmax(fmax(p0, p2), fmax(p4, p6))
    });
    let amax = fmax(fmax(m[0], m[1]), fmax(m[2], m[3]));
    let d = amax / 127.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    (d, core::array::from_fn(|j| fcvtns(xb[j] * id)))
}

/// Twin of ggml's NEON `quantize_row_q8_0` (see [`neon_scale_convert`]): each conversion
/// stored as its low byte.
fn quantize_q8_0_neon(x: &[f32], out: &mut [BlockQ8_0]) {
    for (xb, y) in x.chunks_exact(QK).zip(out.iter_mut()) {
        let (d, q) = neon_scale_convert(xb);
        y.d = crate::fp16::f32_to_f16_bits_hw(d).to_le_bytes();
        for (o, &v) in y.qs.iter_mut().zip(&q) {
            *o = v as i8 as u8;
        }
    }
}

/// An aarch64 `fmul`: a NaN it generates from non-NaN operands (0 times infinity) is the
/// default NaN, 0x7FC00000 (x86-64 generates 0xFFC00000); NaN operands propagate alike.
#[inline]
fn arm_mul(a: f32, b: f32) -> f32 {
    let p = a * b;
    if p.is_nan() && !a.is_nan() && !b.is_nan() {
        f32::from_bits(0x7FC0_0000)
    } else {
        p
    }
}

/// Twin of ggml's NEON `quantize_row_q8_1`: [`quantize_q8_0_neon`]'s quants and d, and
/// s = f16(d * (float)sum) over the 32-bit conversions (wrapping adds), the product as
/// aarch64 rounds it ([`arm_mul`]: an infinite d times a zero sum is the default NaN).
fn quantize_q8_1_neon(x: &[f32], out: &mut [BlockQ8_1]) {
    for (xb, y) in x.chunks_exact(QK).zip(out.iter_mut()) {
        let (d, q) = neon_scale_convert(xb);
        y.d = crate::fp16::f32_to_f16_bits_hw(d).to_le_bytes();
        let sum = q.iter().fold(0i32, |s, &v| s.wrapping_add(v));
        y.s = crate::fp16::f32_to_f16_bits_hw(arm_mul(d, sum as f32)).to_le_bytes();
        for (o, &v) in y.qs.iter_mut().zip(&q) {
            *o = v as i8 as u8;
        }
    }
}
