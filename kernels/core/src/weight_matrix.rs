//! Weight matrices and the row-by-row matmul that every `vec_dot`-based path shares.
//!
//! Shapes follow ggml: a weight matrix has `n` rows (output features) of `k` values
//! (input features, `ne0`); activations are `m` rows of `k` f32 values; the output is
//! `m` rows of `n` values, `out[i*n + j] = dot(W_j, x_i)`.

use crate::error::KernelError;
use crate::GgmlType;

/// A borrowed, validated quantized weight matrix in ggml's plain (not repacked) layout.
#[derive(Clone, Copy, Debug)]
pub struct WeightMatrix<'a> {
    ty: GgmlType,
    n: usize,
    k: usize,
    row_bytes: usize,
    data: &'a [u8],
}

impl<'a> WeightMatrix<'a> {
    /// Check that `data` holds exactly `n` rows of `k` values of type `ty`.
    pub fn new(ty: GgmlType, n: usize, k: usize, data: &'a [u8]) -> Result<Self, KernelError> {
        let row_bytes = ty.row_bytes(k).ok_or(KernelError::BadRowLength {
            ty: ty.name(),
            k,
            block: ty.block_size(),
        })?;
        let total = row_bytes.checked_mul(n).ok_or(KernelError::ShapeMismatch {
            what: "weight bytes",
            expected: usize::MAX,
            got: data.len(),
        })?;
        if data.len() != total {
            return Err(KernelError::ShapeMismatch {
                what: "weight bytes",
                expected: total,
                got: data.len(),
            });
        }
        Ok(WeightMatrix { ty, n, k, row_bytes, data })
    }

    /// The block type.
    pub fn ty(&self) -> GgmlType {
        self.ty
    }
    /// Rows (output features).
    pub fn n(&self) -> usize {
        self.n
    }
    /// Values per row (input features).
    pub fn k(&self) -> usize {
        self.k
    }
    /// All bytes.
    pub fn data(&self) -> &'a [u8] {
        self.data
    }
    /// Rows `start..end` as their own matrix (a view, no copy).
    pub fn rows(&self, start: usize, end: usize) -> Result<WeightMatrix<'a>, KernelError> {
        if start > end || end > self.n {
            return Err(KernelError::ShapeMismatch {
                what: "weight row range",
                expected: self.n,
                got: end,
            });
        }
        Ok(WeightMatrix {
            ty: self.ty,
            n: end - start,
            k: self.k,
            row_bytes: self.row_bytes,
            data: &self.data[start * self.row_bytes..end * self.row_bytes],
        })
    }

    /// Bytes of row `j`.
    pub fn row(&self, j: usize) -> &'a [u8] {
        &self.data[j * self.row_bytes..(j + 1) * self.row_bytes]
    }
}

/// Check that `x` holds `m` rows of `k` values.
pub fn check_activations(x: &[f32], m: usize, k: usize) -> Result<(), KernelError> {
    let want = m.checked_mul(k).ok_or(KernelError::ShapeMismatch {
        what: "activation values",
        expected: usize::MAX,
        got: x.len(),
    })?;
    if x.len() != want {
        return Err(KernelError::ShapeMismatch {
            what: "activation values",
            expected: want,
            got: x.len(),
        });
    }
    Ok(())
}
