//! The `ref` lane: the specification. ggml's generic (portable C) kernels as built
//! without FMA (the x64 tier library of ggml 0.25.3), op for op:
//! q8_K activations by `quantize_row_q8_K_ref` for K-quant and IQ4_XS weights, q8_0 by
//! `quantize_row_q8_0_ref` for Q4_0/Q5_0/Q8_0/IQ4_NL weights, q8_1 by
//! `quantize_row_q8_1_ref` for Q4_1/Q5_1 weights (each type's `vec_dot_type`), and the
//! `*_generic` vec_dot kernels ([`vec_dot`]) for every (weight row, activation row) pair.
//! It multiplies every type [`crate::quant::weights::QUANTIZABLE`] names; the other
//! lanes the four of their recipes.

pub mod vec_dot;

use crate::blocks::cast_blocks as cast;
use crate::error::KernelError;
use crate::lane::dispatch::{check_pair, dispatch_vec_dot, VecDotFns};
use crate::lane::{
    Accumulation, Arch, Contraction, Kernels, Lane, Level, MatmulPath, Proof, Recipe, Status,
    WeightLayout,
};
use crate::quant::ActRule;
use crate::GgmlType;
use vec_dot as generic;

/// The `ref` lane's kernels.
#[derive(Debug, Default)]
pub struct RefTwin;

/// The `ref` lane.
pub static REF: Lane = Lane {
    name: "ref",
    arch: Arch::Portable,
    summary: "ggml generic C kernels built without FMA (the specification)",
    recipe: Recipe {
        act_k: ActRule::Q8KRef,
        act_legacy: ActRule::Q8_0Ref,
        accumulation: Accumulation::GgmlGeneric,
        contraction: Contraction::None,
        layout: WeightLayout::Plain,
        matmul: MatmulPath::VecDotPerRow,
        plain_gemm: crate::lane::PlainGemm::VecDot,
        elem: crate::elem::ElemFlavour::X64,
    },
    status: Status::Proven(&[
        Proof {
            level: Level::Kernel,
            against: "ggml x64 (generic C, no FMA)",
            only: "",
            suite: "oracle_ref",
            trials: &["oracle/x64/vec_dot", "oracle/x64/quantize", "oracle/x64/dequant"],
        },
        Proof {
            level: Level::Kernel,
            against: "ggml x64 mul_mat",
            only: "",
            suite: "oracle_mulmat",
            trials: &["oracle/mulmat/x64/plain_equals_ref"],
        },
    ]),
    portable: &RefTwin,
};

impl Kernels for RefTwin {
    fn act_rule(&self, wtype: GgmlType) -> Result<ActRule, KernelError> {
        match wtype {
            GgmlType::Q2_K | GgmlType::Q3_K | GgmlType::Q5_K | GgmlType::IQ4_XS => {
                Ok(REF.recipe.act_k)
            }
            GgmlType::Q5_0 | GgmlType::IQ4_NL => Ok(REF.recipe.act_legacy),
            GgmlType::Q4_1 | GgmlType::Q5_1 => Ok(ActRule::Q8_1Ref),
            _ => REF.recipe.act_rule(wtype, "ref matmul"),
        }
    }

    fn vec_dot(&self, wtype: GgmlType, w_row: &[u8], act: &[u8]) -> Result<f32, KernelError> {
        let fns = VecDotFns {
            q4_0: generic::vec_dot_q4_0_q8_0,
            q8_0: generic::vec_dot_q8_0_q8_0,
            q4_k: generic::vec_dot_q4_k_q8_k,
            q6_k: generic::vec_dot_q6_k_q8_k,
        };
        let atype = self.act_rule(wtype)?.format();
        check_pair(wtype, w_row, atype, act)?;
        let (w, a) = (w_row, act);
        Ok(match wtype {
            GgmlType::Q4_1 => generic::vec_dot_q4_1_q8_1(cast(wtype, w)?, cast(atype, a)?),
            GgmlType::Q5_0 => generic::vec_dot_q5_0_q8_0(cast(wtype, w)?, cast(atype, a)?),
            GgmlType::Q5_1 => generic::vec_dot_q5_1_q8_1(cast(wtype, w)?, cast(atype, a)?),
            GgmlType::Q2_K => generic::vec_dot_q2_k_q8_k(cast(wtype, w)?, cast(atype, a)?),
            GgmlType::Q3_K => generic::vec_dot_q3_k_q8_k(cast(wtype, w)?, cast(atype, a)?),
            GgmlType::Q5_K => generic::vec_dot_q5_k_q8_k(cast(wtype, w)?, cast(atype, a)?),
            GgmlType::IQ4_NL => generic::vec_dot_iq4_nl_q8_0(cast(wtype, w)?, cast(atype, a)?),
            GgmlType::IQ4_XS => generic::vec_dot_iq4_xs_q8_k(cast(wtype, w)?, cast(atype, a)?),
            _ => return dispatch_vec_dot(self, &fns, "ref vec_dot", wtype, w_row, act),
        })
    }
}
