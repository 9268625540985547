//! The `ref` lane: the specification. ggml's generic (portable C) kernels as built
//! without FMA (the x64 tier library of ggml 0.25.3), op for op:
//! q8_K activations by `quantize_row_q8_K_ref` for K-quant weights, q8_0 by
//! `quantize_row_q8_0_ref` for Q4_0/Q8_0 weights, and the `*_generic` vec_dot kernels
//! ([`vec_dot`]) for every (weight row, activation row) pair.

pub mod vec_dot;

use crate::error::KernelError;
use crate::lane::dispatch::{dispatch_vec_dot, VecDotFns};
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
        REF.recipe.act_rule(wtype, "ref matmul")
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
