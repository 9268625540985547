//! The `x86_64-avx512` lane: an AVX-512 (F + BW + VNNI) schedule of our own design. It
//! reproduces no ggml tier; it multiplies the same quantized operands as
//! `x86_64-avx2` with exact integer lanes and sixteen float lanes instead of eight, to
//! show how a wider accumulator alone changes the bits. Activations: x86 rules, q8_K
//! by the reference quantizer and q8_0 by the AVX2 quantizer ([`ActRule::Q8_0X86`]).
//! Dot products: [`vec_dot`] (block pairs, 16 lanes, one FMA per lane per
//! block pair or superblock, a 512 -> 256 halving and then `hsum_float_8`). Matmul:
//! vec_dot per (weight row, activation row) for every row count. Decoder elementwise
//! loops: the AVX2 flavour ([`crate::elem::ElemFlavour::Avx2`]), i.e. the design keeps
//! ggml's AVX2 softmax/SiLU/f32 dot code (ggml's own AVX-512 builds would use its
//! `_mm512_scalef_ps` `expf`, which no lane reproduces).

pub mod vec_dot;

use crate::error::KernelError;
use crate::lane::dispatch::{dispatch_vec_dot, VecDotFns};
use crate::lane::{
    Accumulation, Arch, Contraction, Kernels, Lane, MatmulPath, Recipe, Status, WeightLayout,
};
use crate::quant::ActRule;
use crate::GgmlType;
use vec_dot as avx512;

/// Portable twin of the `x86_64-avx512` lane.
#[derive(Debug, Default)]
pub struct Avx512Twin;

/// The `x86_64-avx512` lane.
pub static X86_64_AVX512: Lane = Lane {
    name: "x86_64-avx512",
    arch: Arch::X86_64,
    summary: "our AVX-512 VNNI schedule: exact dpbusd lanes, 16 float lanes, x86 activations",
    recipe: Recipe {
        act_k: ActRule::Q8KRef,
        act_legacy: ActRule::Q8_0X86,
        accumulation: Accumulation::X86Avx512,
        contraction: Contraction::FusedAccumulate,
        layout: WeightLayout::Plain,
        matmul: MatmulPath::VecDotPerRow,
        plain_gemm: crate::lane::PlainGemm::VecDot,
        elem: crate::elem::ElemFlavour::Avx2,
    },
    status: Status::Synthetic {
        checked: "the project's own AVX-512 design, no ggml tier: rigorous error bounds \
                  against the exact answer",
    },
    portable: &Avx512Twin,
};

impl Kernels for Avx512Twin {
    fn act_rule(&self, wtype: GgmlType) -> Result<ActRule, KernelError> {
        X86_64_AVX512.recipe.act_rule(wtype, "x86_64-avx512 matmul")
    }

    fn vec_dot(&self, wtype: GgmlType, w_row: &[u8], act: &[u8]) -> Result<f32, KernelError> {
        let fns = VecDotFns {
            q4_0: avx512::vec_dot_q4_0_q8_0,
            q8_0: avx512::vec_dot_q8_0_q8_0,
            q4_k: avx512::vec_dot_q4_k_q8_k,
            q6_k: avx512::vec_dot_q6_k_q8_k,
        };
        dispatch_vec_dot(self, &fns, "x86_64-avx512 vec_dot", wtype, w_row, act)
    }
}
