//! The dispatch every plain lane shares: validate one (weight row, activation row) pair
//! against the lane's activation format and run the schedule's kernel for the type.

use super::Kernels;
use crate::blocks::{cast_blocks, BlockQ4K, BlockQ4_0, BlockQ6K, BlockQ8K, BlockQ8_0};
use crate::error::KernelError;
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
