//! ggml's quantized block formats (`ggml-common.h`), byte for byte.
//!
//! Every struct is `#[repr(C)]` with alignment 1: half-precision fields are stored as
//! `[u8; 2]` (little-endian IEEE binary16) and q8_K's f32 scale as `[u8; 4]`, so a
//! slice of any block type can be viewed in place over unaligned file bytes
//! (`bytemuck::try_cast_slice`) and the struct size equals ggml's `sizeof(block_*)`
//! exactly. Sizes are pinned by compile-time assertions next to each struct.
//!
//! Each format module holds the block type and its dequantizer (the `ref` lane's
//! `dequantize_row_*`, `ggml-quants.c`), with the float order of every value in words.

pub mod iq4_nl;
pub mod iq4_xs;
pub mod q2_k;
pub mod q3_k;
pub mod q4_0;
pub mod q4_1;
pub mod q4_k;
pub mod q5_0;
pub mod q5_1;
pub mod q5_k;
pub mod q6_k;
pub mod q8_0;
pub mod q8_1;
pub mod q8_k;

pub use iq4_nl::BlockIq4Nl;
pub use iq4_xs::BlockIq4Xs;
pub use q2_k::BlockQ2K;
pub use q3_k::BlockQ3K;
pub use q4_0::BlockQ4_0;
pub use q4_1::BlockQ4_1;
pub use q4_k::BlockQ4K;
pub use q5_0::BlockQ5_0;
pub use q5_1::BlockQ5_1;
pub use q5_k::BlockQ5K;
pub use q6_k::BlockQ6K;
pub use q8_0::BlockQ8_0;
pub use q8_1::BlockQ8_1;
pub use q8_k::BlockQ8K;

/// Values per K-quant superblock (`QK_K`).
pub const QK_K: usize = 256;
/// Values per legacy block (`QK4_0`, `QK4_1`, `QK5_0`, `QK5_1`, `QK8_0`, `QK8_1`).
pub const QK: usize = 32;

use crate::error::KernelError;
use crate::GgmlType;

/// View `bytes` as a slice of blocks, checking that the length is a whole number of
/// blocks.
pub fn cast_blocks<B: bytemuck::Pod>(ty: GgmlType, bytes: &[u8]) -> Result<&[B], KernelError> {
    debug_assert_eq!(core::mem::size_of::<B>(), ty.type_size());
    bytemuck::try_cast_slice(bytes).map_err(|_| KernelError::BadLength {
        what: ty.name(),
        len: bytes.len(),
        unit: ty.type_size(),
    })
}

/// Mutable form of [`cast_blocks`].
pub fn cast_blocks_mut<B: bytemuck::Pod>(
    ty: GgmlType,
    bytes: &mut [u8],
) -> Result<&mut [B], KernelError> {
    let len = bytes.len();
    bytemuck::try_cast_slice_mut(bytes).map_err(|_| KernelError::BadLength {
        what: ty.name(),
        len,
        unit: ty.type_size(),
    })
}

/// Dequantize `bytes` holding whole blocks (or plain elements) of type `ty` into `out`,
/// which must have exactly as many values as the bytes encode.
///
/// Supports F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K, Q3_K, Q4_K, Q5_K,
/// Q6_K, Q8_K, IQ4_NL and IQ4_XS.
pub fn dequantize(ty: GgmlType, bytes: &[u8], out: &mut [f32]) -> Result<(), KernelError> {
    let unit = ty.type_size();
    if !bytes.len().is_multiple_of(unit) {
        return Err(KernelError::BadLength { what: ty.name(), len: bytes.len(), unit });
    }
    let n = bytes.len() / unit * ty.block_size();
    if out.len() != n {
        return Err(KernelError::ShapeMismatch {
            what: "dequantize output",
            expected: n,
            got: out.len(),
        });
    }
    match ty {
        GgmlType::F32 => {
            for (o, c) in out.iter_mut().zip(bytes.chunks_exact(4)) {
                *o = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            }
        }
        GgmlType::F16 => {
            for (o, c) in out.iter_mut().zip(bytes.chunks_exact(2)) {
                *o = crate::fp16::f16_bits_to_f32(u16::from_le_bytes([c[0], c[1]]));
            }
        }
        GgmlType::BF16 => {
            for (o, c) in out.iter_mut().zip(bytes.chunks_exact(2)) {
                *o = crate::fp16::bf16_bits_to_f32(u16::from_le_bytes([c[0], c[1]]));
            }
        }
        GgmlType::Q4_0 => q4_0::dequantize(cast_blocks(ty, bytes)?, out),
        GgmlType::Q4_1 => q4_1::dequantize(cast_blocks(ty, bytes)?, out),
        GgmlType::Q5_0 => q5_0::dequantize(cast_blocks(ty, bytes)?, out),
        GgmlType::Q5_1 => q5_1::dequantize(cast_blocks(ty, bytes)?, out),
        GgmlType::Q5_K => q5_k::dequantize(cast_blocks(ty, bytes)?, out),
        GgmlType::Q8_0 => q8_0::dequantize(cast_blocks(ty, bytes)?, out),
        GgmlType::Q8_1 => q8_1::dequantize(cast_blocks(ty, bytes)?, out),
        GgmlType::Q2_K => q2_k::dequantize(cast_blocks(ty, bytes)?, out),
        GgmlType::Q3_K => q3_k::dequantize(cast_blocks(ty, bytes)?, out),
        GgmlType::Q4_K => q4_k::dequantize(cast_blocks(ty, bytes)?, out),
        GgmlType::Q6_K => q6_k::dequantize(cast_blocks(ty, bytes)?, out),
        GgmlType::Q8_K => q8_k::dequantize(cast_blocks(ty, bytes)?, out),
        GgmlType::IQ4_NL => iq4_nl::dequantize(cast_blocks(ty, bytes)?, out),
        GgmlType::IQ4_XS => iq4_xs::dequantize(cast_blocks(ty, bytes)?, out),
        other => return Err(KernelError::Unsupported { op: "dequantize", ty: other.name() }),
    }
    Ok(())
}

/// Read a little-endian binary16 field.
#[inline]
pub(crate) fn half(b: [u8; 2]) -> f32 {
    crate::fp16::f16_bits_to_f32(u16::from_le_bytes(b))
}

/// Encode an f32 as a little-endian binary16 field, as `GGML_FP32_TO_FP16`.
#[inline]
pub(crate) fn to_half(x: f32) -> [u8; 2] {
    crate::fp16::f32_to_f16_bits(x).to_le_bytes()
}
