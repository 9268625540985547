//! The dispatch every plain lane shares: validate one (weight row, activation row) pair
//! against the lane's activation format and run the schedule's kernel for the type.

use super::Kernels;
use crate::blocks::{cast_blocks, BlockQ4K, BlockQ4_0, BlockQ6K, BlockQ8K, BlockQ8_0};
use crate::error::KernelError;
use crate::weight_matrix::WeightMatrix;
use crate::GgmlType;

/// Check that a weight row and an activation row hold the same number of values.
pub(crate) fn check_pair(
    wtype: GgmlType,
    w_row: &[u8],
    atype: GgmlType,
    act: &[u8],
) -> Result<(), KernelError> {
    let wunit = wtype.type_size();
    if !w_row.len().is_multiple_of(wunit) {
        return Err(KernelError::BadLength { what: wtype.name(), len: w_row.len(), unit: wunit });
    }
    let k = w_row.len() / wunit * wtype.block_size();
    let want = atype.row_bytes(k).ok_or(KernelError::BadRowLength {
        ty: atype.name(),
        k,
        block: atype.block_size(),
    })?;
    if act.len() != want {
        return Err(KernelError::ShapeMismatch {
            what: "activation bytes",
            expected: want,
            got: act.len(),
        });
    }
    Ok(())
}

/// One schedule's four vec_dot kernels, as plain function pointers.
pub(crate) struct VecDotFns {
    pub q4_0: fn(&[BlockQ4_0], &[BlockQ8_0]) -> f32,
    pub q8_0: fn(&[BlockQ8_0], &[BlockQ8_0]) -> f32,
    pub q4_k: fn(&[BlockQ4K], &[BlockQ8K]) -> f32,
    pub q6_k: fn(&[BlockQ6K], &[BlockQ8K]) -> f32,
}

/// Validate a (weight row, activation row) pair for `kernels`' activation format and
/// run the schedule's kernel for `wtype`; `op` names the lane in errors.
pub(crate) fn dispatch_vec_dot(
    kernels: &dyn Kernels,
    fns: &VecDotFns,
    op: &'static str,
    wtype: GgmlType,
    w: &[u8],
    a: &[u8],
) -> Result<f32, KernelError> {
    let atype = kernels.act_rule(wtype)?.format();
    check_pair(wtype, w, atype, a)?;
    Ok(match wtype {
        GgmlType::Q4_0 => (fns.q4_0)(cast_blocks(wtype, w)?, cast_blocks(atype, a)?),
        GgmlType::Q8_0 => (fns.q8_0)(cast_blocks(wtype, w)?, cast_blocks(atype, a)?),
        GgmlType::Q4_K => (fns.q4_k)(cast_blocks(wtype, w)?, cast_blocks(atype, a)?),
        GgmlType::Q6_K => (fns.q6_k)(cast_blocks(wtype, w)?, cast_blocks(atype, a)?),
        other => return Err(KernelError::Unsupported { op, ty: other.name() }),
    })
}

/// `m` quantized activation rows (concatenated, `kernels`' format for `w.ty()`) split
/// into rows, with the length checked: `act` must hold exactly `m` rows.
pub fn act_rows<'a, K: Kernels + ?Sized>(
    kernels: &K,
    w: &WeightMatrix<'_>,
    act: &'a [u8],
    m: usize,
) -> Result<Vec<&'a [u8]>, KernelError> {
    let atype = kernels.act_rule(w.ty())?.format();
    let row = atype.row_bytes(w.k()).ok_or(KernelError::BadRowLength {
        ty: atype.name(),
        k: w.k(),
        block: atype.block_size(),
    })?;
    if act.len() != row * m {
        return Err(KernelError::ShapeMismatch {
            what: "quantized activation bytes",
            expected: row * m,
            got: act.len(),
        });
    }
    Ok(if row == 0 { vec![act; m] } else { act.chunks_exact(row).collect() })
}

/// `vec_dot` per (weight row, activation row) pair: `out[i*n + j]`
/// ([`super::PlainGemm::VecDot`]).
pub fn vec_dot_rows<K: Kernels + ?Sized>(
    kernels: &K,
    w: &WeightMatrix<'_>,
    act: &[u8],
    m: usize,
) -> Result<Vec<f32>, KernelError> {
    let n = w.n();
    let mut out = vec![0.0f32; m * n];
    if w.k() == 0 {
        return Ok(out);
    }
    for (i, a) in act_rows(kernels, w, act, m)?.into_iter().enumerate() {
        for j in 0..n {
            out[i * n + j] = kernels.vec_dot(w.ty(), w.row(j), a)?;
        }
    }
    Ok(out)
}
