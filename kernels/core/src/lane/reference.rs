//! The `ref` lane: the specification. ggml's generic (portable C) kernels as built
//! without FMA (the x64 tier library of ggml 0.25.3), op for op:
//! q8_K activations by `quantize_row_q8_K_ref` for K-quant weights, q8_0 by
//! `quantize_row_q8_0_ref` for Q4_0/Q8_0 weights, and the `*_generic` vec_dot kernels
//! ([`crate::dot::generic`]) for every (weight row, activation row) pair.

use super::{Accumulation, Contraction, Kernels, Lane, MatmulPath, Recipe, WeightLayout};
use crate::blocks::{cast_blocks, BlockQ4K, BlockQ4_0, BlockQ6K, BlockQ8K, BlockQ8_0};
use crate::dot::generic;
use crate::error::KernelError;
use crate::quant::ActRule;
use crate::GgmlType;

/// The `ref` lane's kernels.
#[derive(Debug, Default)]
pub struct RefKernels;

/// The `ref` lane.
pub static REF: Lane = Lane {
    name: "ref",
    summary: "ggml generic C kernels built without FMA (the specification)",
    recipe: Recipe {
        act_k: ActRule::Q8KRef,
        act_legacy: ActRule::Q8_0Ref,
        accumulation: Accumulation::GgmlGeneric,
        contraction: Contraction::None,
        layout: WeightLayout::Plain,
        matmul: MatmulPath::VecDotPerRow,
        elem: crate::elem::ElemFlavour::X64,
    },
    portable: &RefKernels,
};

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

impl Kernels for RefKernels {
    fn act_rule(&self, wtype: GgmlType) -> Result<ActRule, KernelError> {
        match wtype {
            GgmlType::Q4_K | GgmlType::Q6_K => Ok(REF.recipe.act_k),
            GgmlType::Q4_0 | GgmlType::Q8_0 => Ok(REF.recipe.act_legacy),
            other => Err(KernelError::Unsupported { op: "ref matmul", ty: other.name() }),
        }
    }

    fn vec_dot(&self, wtype: GgmlType, w_row: &[u8], act: &[u8]) -> Result<f32, KernelError> {
        let fns = VecDotFns {
            q4_0: generic::vec_dot_q4_0_q8_0,
            q8_0: generic::vec_dot_q8_0_q8_0,
            q4_k: generic::vec_dot_q4_k_q8_k,
            q6_k: generic::vec_dot_q6_k_q8_k,
        };
        dispatch_vec_dot(self, &fns, "ref vec_dot", wtype, w_row, act)
    }
}
