//! Weight quantizers, byte-identical to llama.cpp's reference quantizers without an
//! importance matrix (`ggml_quantize_chunk(type, src, dst, 0, nrows, n_per_row, NULL)`,
//! which for these types calls `quantize_row_*_ref` over all rows at once).
//!
//! Q4_K, Q5_K and Q6_K run ggml's iterative searches (`make_qkx2_quants`, `make_qx_quants`)
//! with every float operation in the C source's order and without contraction, as the
//! x86-64 build of ggml-base computes them. (GCC on aarch64 contracts some of them, so
//! an aarch64-built llama-quantize can produce different Q4_K bytes; see docs/NUMERICS.md, section 3.)

mod iq4;
mod q2_k;
mod q3_k;
mod q4_0;
mod q4_1;
mod q4_k;
mod q5_0;
mod q5_1;
mod q5_k;
mod q6_k;
mod search;

use crate::error::KernelError;
use crate::quant::ActRule;
use crate::GgmlType;

/// The value of largest magnitude in `x` (the first of equal magnitudes, 0 for none above
/// 0) and that magnitude: ggml's `if (fabsf(v) > amax) { amax = fabsf(v); max = v; }`.
pub(super) fn signed_absmax(x: &[f32]) -> (f32, f32) {
    let (mut amax, mut max) = (0.0f32, 0.0f32);
    for &v in x {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    (max, amax)
}

/// ggml's `GROUP_MAX_EPS`: below it a group's values count as all zero.
pub(super) const GROUP_MAX_EPS: f32 = 1e-15;

/// The weight types this crate can quantize (and dequantize), each bitwise with ggml's
/// reference quantizer. Every lane multiplies [`crate::lane::WEIGHT_TYPES`]; which lane
/// multiplies which of the others, its activation rule says (`ref`: all of them).
pub const QUANTIZABLE: &[GgmlType] = &[
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q8_0,
    GgmlType::Q2_K,
    GgmlType::Q3_K,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
    GgmlType::IQ4_NL,
    GgmlType::IQ4_XS,
];

/// Quantize `nrows` rows of `n_per_row` values with the reference quantizer of `ty` (for
/// IQ4_NL, the chunk quantizer's search, `ntry = 7`: what llama.cpp writes into models).
pub fn quantize(
    ty: GgmlType,
    src: &[f32],
    nrows: usize,
    n_per_row: usize,
) -> Result<Vec<u8>, KernelError> {
    let row_bytes = ty.row_bytes(n_per_row).ok_or(KernelError::BadRowLength {
        ty: ty.name(),
        k: n_per_row,
        block: ty.block_size(),
    })?;
    let n = nrows.checked_mul(n_per_row).ok_or(KernelError::ShapeMismatch {
        what: "weight elements",
        expected: usize::MAX,
        got: src.len(),
    })?;
    if src.len() != n {
        return Err(KernelError::ShapeMismatch {
            what: "weight elements",
            expected: n,
            got: src.len(),
        });
    }
    let mut out = vec![0u8; row_bytes * nrows];
    match ty {
        GgmlType::Q4_0 => q4_0::quantize(src, crate::blocks::cast_blocks_mut(ty, &mut out)?),
        GgmlType::Q4_1 => q4_1::quantize(src, crate::blocks::cast_blocks_mut(ty, &mut out)?),
        GgmlType::Q5_0 => q5_0::quantize(src, crate::blocks::cast_blocks_mut(ty, &mut out)?),
        GgmlType::Q5_1 => q5_1::quantize(src, crate::blocks::cast_blocks_mut(ty, &mut out)?),
        GgmlType::Q5_K => q5_k::quantize(src, crate::blocks::cast_blocks_mut(ty, &mut out)?),
        GgmlType::Q2_K => q2_k::quantize(src, crate::blocks::cast_blocks_mut(ty, &mut out)?),
        GgmlType::Q3_K => q3_k::quantize(src, crate::blocks::cast_blocks_mut(ty, &mut out)?),
        GgmlType::IQ4_NL => iq4::quantize_nl(src, crate::blocks::cast_blocks_mut(ty, &mut out)?),
        GgmlType::IQ4_XS => iq4::quantize_xs(src, crate::blocks::cast_blocks_mut(ty, &mut out)?),
        // quantize_q8_0 is quantize_row_q8_0_ref: the same rule as the activations.
        GgmlType::Q8_0 => ActRule::Q8_0Ref.quantize_into(src, &mut out)?,
        GgmlType::Q4_K => q4_k::quantize(src, crate::blocks::cast_blocks_mut(ty, &mut out)?),
        GgmlType::Q6_K => q6_k::quantize(src, crate::blocks::cast_blocks_mut(ty, &mut out)?),
        other => {
            return Err(KernelError::Unsupported { op: "weight quantization", ty: other.name() })
        }
    }
    Ok(out)
}
