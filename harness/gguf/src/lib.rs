//! GGUF v2/v3 reader ([`GgufFile`]) and writer ([`GgufWriter`]), with the other file
//! formats tiercheck reads and writes: f32 tensors as safetensors ([`tensorfile`]) and
//! atomic file replacement ([`atomic_write`]).
//!
//! # Format
//!
//! A GGUF file is little-endian throughout:
//!
//! | field              | encoding                                                        |
//! |--------------------|-----------------------------------------------------------------|
//! | magic              | the bytes `GGUF` (`47 47 55 46`)                                |
//! | version            | u32: 2 or 3 (identical layouts; v1 had u32 counts)              |
//! | tensor count       | u64                                                             |
//! | metadata kv count  | u64                                                             |
//! | metadata kvs       | key (string), u32 value type, value                             |
//! | tensor infos       | name (string), u32 n_dims, n_dims × u64 dims, u32 ggml type, u64 offset |
//! | padding            | zeros up to the next multiple of the alignment                  |
//! | data section       | tensor data, each at `data section start + offset`              |
//!
//! A string is a u64 byte length followed by that many UTF-8 bytes (no terminator). Value
//! types ([`MetaValueType`]): 0 u8, 1 i8, 2 u16, 3 i16, 4 u32, 5 i32, 6 f32, 7 bool (one
//! byte, 0 or 1), 8 string, 9 array (u32 element type, u64 count, the elements; arrays may
//! hold arrays, each with its own element type), 10 u64, 11 i64, 12 f64.
//!
//! Dims list ne0 first: ne0 is the row length (innermost, contiguous), so a PyTorch/numpy
//! shape `(rows, cols)` is stored as `[cols, rows]`. The ggml type ([`GgmlType`]) fixes the
//! byte size: `ne0 / block_size * type_size` bytes per row, times the other dims.
//!
//! The alignment is the metadata key `general.alignment` (u32, default 32). The data section
//! starts at the end of the tensor infos rounded up to it, and every tensor offset is a
//! multiple of it.
//!
//! # Validation
//!
//! [`GgufFile`] validates the whole structure before handing out anything, and never panics
//! on any input. Every length, count, offset and size is computed with checked arithmetic and
//! compared with the bytes that remain before anything is allocated for it: a declared count
//! of metadata entries, tensors or array elements must fit in the rest of the file at the
//! smallest possible encoding of each item ([`GgufError::CountTooLarge`]), and a string length
//! must fit in the rest of the file. Arrays nest at most [`MAX_ARRAY_DEPTH`] deep. The checks,
//! each its own [`GgufError`] variant whose message starts with the file path:
//!
//! - magic `GGUF` ([`BadMagic`](GgufError::BadMagic)); version 2 or 3
//!   ([`UnsupportedVersion`](GgufError::UnsupportedVersion)); a version that only reads right
//!   byte-swapped is a big-endian file, which is not supported
//!   ([`BigEndian`](GgufError::BigEndian));
//! - the file must hold every field it declares ([`TruncatedHeader`](GgufError::TruncatedHeader),
//!   [`TruncatedMetadata`](GgufError::TruncatedMetadata),
//!   [`TruncatedTensorInfo`](GgufError::TruncatedTensorInfo),
//!   [`CountTooLarge`](GgufError::CountTooLarge));
//! - metadata: keys, strings and tensor names are UTF-8 ([`InvalidUtf8`](GgufError::InvalidUtf8)),
//!   value types are known ([`UnknownValueType`](GgufError::UnknownValueType)), bools are 0 or 1
//!   ([`InvalidBool`](GgufError::InvalidBool)), keys are unique
//!   ([`DuplicateKey`](GgufError::DuplicateKey)), arrays are not nested too deep
//!   ([`ArrayTooDeep`](GgufError::ArrayTooDeep)), and `general.alignment` is a u32
//!   ([`AlignmentType`](GgufError::AlignmentType)) nonzero power of two
//!   ([`InvalidAlignment`](GgufError::InvalidAlignment));
//! - tensor infos: names are unique ([`DuplicateTensor`](GgufError::DuplicateTensor)),
//!   1..=4 dims ([`NDimsOutOfRange`](GgufError::NDimsOutOfRange)), none zero
//!   ([`ZeroDimension`](GgufError::ZeroDimension)), element count at most `i64::MAX` and byte
//!   size without overflow ([`DimensionOverflow`](GgufError::DimensionOverflow)), ne0 a
//!   multiple of the type's block size ([`RowNotBlockMultiple`](GgufError::RowNotBlockMultiple)),
//!   a known ggml type ([`UnknownTensorType`](GgufError::UnknownTensorType)), an offset that is
//!   a multiple of the alignment ([`MisalignedOffset`](GgufError::MisalignedOffset));
//! - tensor data: inside the file ([`TensorDataOutOfBounds`](GgufError::TensorDataOutOfBounds))
//!   and not overlapping another tensor's ([`OverlappingTensors`](GgufError::OverlappingTensors)).
//!   Tensors may appear in any order and leave gaps.
//!
//! [`GgufWriter`] applies the same rules to what it is given, so whatever it writes reads back.
//!
//! Files are memory-mapped read-only; like any mmap-based loader, a file must not be modified
//! while a [`GgufFile`] of it is alive.

pub mod atomic_write;
pub mod dump;
mod error;
mod reader;
pub mod tensorfile;
mod value;
mod writer;

#[cfg(test)]
mod tests;

pub use error::GgufError;
pub use reader::{GgufFile, TensorInfo};
pub use tiercheck_core::GgmlType;
pub use value::{MetaArray, MetaValue, MetaValueType, MAX_ARRAY_DEPTH};
pub use writer::GgufWriter;

/// The four magic bytes every GGUF file starts with.
pub(crate) const GGUF_MAGIC: [u8; 4] = *b"GGUF";

/// The metadata key holding the data alignment.
pub(crate) const ALIGNMENT_KEY: &str = "general.alignment";

/// The alignment when `general.alignment` is absent.
pub(crate) const DEFAULT_ALIGNMENT: u32 = 32;

/// Most dimensions a ggml tensor has (`GGML_MAX_DIMS`).
pub(crate) const GGML_MAX_DIMS: usize = 4;

/// `x` rounded up to a multiple of `align` (a power of two), or `None` on overflow.
pub(crate) fn align_up(x: u64, align: u32) -> Option<u64> {
    let mask = u64::from(align).checked_sub(1)?;
    x.checked_add(mask).map(|v| v & !mask)
}

/// Byte size of a tensor, checking that no dim is zero, the element count fits in `i64`
/// (ggml's `int64_t ne[]`), ne0 is a whole number of blocks and nothing overflows. `dims`
/// must hold 1..=4 entries (checked by the caller).
pub(crate) fn tensor_byte_size(
    path: &str,
    name: &str,
    dims: &[u64],
    ty: GgmlType,
) -> Result<u64, GgufError> {
    if dims.contains(&0) {
        return Err(GgufError::ZeroDimension {
            path: path.to_owned(),
            tensor: name.to_owned(),
            dims: dims.to_vec(),
        });
    }
    let overflow = || GgufError::DimensionOverflow {
        path: path.to_owned(),
        tensor: name.to_owned(),
        dims: dims.to_vec(),
        ty,
    };
    let n_elements =
        dims.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d)).ok_or_else(overflow)?;
    if n_elements > i64::MAX as u64 {
        return Err(overflow());
    }
    let ne0 = dims.first().copied().unwrap_or(1);
    let block = ty.block_size() as u64;
    if block == 0 || !ne0.is_multiple_of(block) {
        return Err(GgufError::RowNotBlockMultiple {
            path: path.to_owned(),
            tensor: name.to_owned(),
            ne0,
            ty,
            block_size: ty.block_size(),
        });
    }
    let rows = n_elements / ne0;
    usize::try_from(ne0)
        .ok()
        .and_then(|ne0| ty.row_bytes(ne0))
        .and_then(|row| (row as u64).checked_mul(rows))
        .filter(|&n| usize::try_from(n).is_ok())
        .ok_or_else(overflow)
}
