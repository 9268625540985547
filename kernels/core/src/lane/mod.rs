//! The lane model.
//!
//! A **lane** is one tier's complete, deterministic arithmetic, named by a stable
//! string (`ref`, `x86_64-avx2`, `aarch64-i8mm-repack`, ...). Its [`Recipe`] names
//! the components that decide its bits:
//!
//! - the **activation quantizer** ([`crate::quant::ActRule`]) for K-quant
//!   weights and for legacy (Q4_0/Q8_0) weights: output format, scale rule, rounding;
//! - the **accumulation schedule** ([`Accumulation`]): lane widths, grouping of the
//!   float sums and the horizontal reduction tree;
//! - **contraction** ([`Contraction`]): which multiply-adds are fused;
//! - the **weight layout** ([`WeightLayout`]): plain blocks or a repacked
//!   interleave, which also selects a different kernel;
//! - the **matmul path** ([`MatmulPath`]): which kernel variant runs for one
//!   activation row (decode, gemv) and for several (prompt, gemm).
//!
//! Every lane has a **portable** implementation ([`Kernels`]) in this crate: scalar
//! Rust performing the same float operations in the same order as the tier, so it runs
//! bitwise-identically on any machine. Architecture crates (`kernels/x86_64`,
//! `kernels/aarch64`, `kernels/hip`) add **native** implementations of the same trait
//! for the same lane names; the harness pairs them up by name and checks them bitwise.
//!
//! Adding a lane means adding one module with its [`Lane`] constant and one line in
//! [`LANES`]; no existing lane changes.

mod aarch64_i8mm_repack;
mod aarch64_neon;
mod aarch64_neon_repack;
mod hip;
pub mod parallel;
mod recipe;
mod reference;
mod x86_64_avx2;
mod x86_64_avx2_repack;
mod x86_64_avx512;

pub use aarch64_i8mm_repack::{
    arm_i8mm_layout, i8mm_repack_group, prepare_arm_i8mm, I8mmRepackTwin, AARCH64_I8MM_REPACK,
};
pub use aarch64_neon::{dequantize_q4_k_fused, NeonTwin, AARCH64_NEON};
pub use aarch64_neon_repack::{
    arm_dotprod_layout, neon_repack_group, neon_repack_matmul, prepare_arm_dotprod, NeonRepackTwin,
    AARCH64_NEON_REPACK,
};
pub use hip::{HipTwin, HIP_WAVE32, HIP_WAVE32_TWIN, HIP_WAVE64, HIP_WAVE64_TWIN};
pub use recipe::{Accumulation, Contraction, MatmulPath, Recipe, WeightLayout};
pub use reference::{RefKernels, REF};
pub use x86_64_avx2::{Avx2Twin, X86_64_AVX2};
pub use x86_64_avx2_repack::{
    prepare_x86, repacked_act_rule, row_path, x86_layout, Avx2RepackTwin, RowPath,
    X86_64_AVX2_REPACK,
};
pub use x86_64_avx512::{Avx512Twin, X86_64_AVX512};

use crate::error::KernelError;
use crate::matrix::{check_activations, WeightMatrix};
use crate::quant::ActRule;
use crate::GgmlType;

/// One implementation (portable or native) of a lane's kernels.
///
/// Activations are quantized per row with the lane's rule for the weight type, then
/// multiplied. Implementations override [`Kernels::matmul`] where the tier runs a
/// different kernel for several activation rows (gemm) than for one (gemv).
pub trait Kernels: Sync + Send {
    /// The activation rule this lane applies before multiplying by weights of `wtype`.
    fn act_rule(&self, wtype: GgmlType) -> Result<ActRule, KernelError>;

    /// Quantize one activation row for weights of `wtype`.
    fn quantize_act(&self, wtype: GgmlType, x: &[f32]) -> Result<Vec<u8>, KernelError> {
        self.act_rule(wtype)?.quantize(x)
    }

    /// Dequantize `bytes` of type `ty` into `out`, as this tier computes it (ggml's CPU
    /// `get_rows` path, used for the token embedding). The default is the reference
    /// dequantizer, [`crate::blocks::dequantize`].
    fn dequantize(&self, ty: GgmlType, bytes: &[u8], out: &mut [f32]) -> Result<(), KernelError> {
        crate::blocks::dequantize(ty, bytes, out)
    }

    /// Prepare weights for this lane's matmul on `target`: the tier's repack decision.
    /// The default keeps plain blocks (lanes whose tier does not repack, and every
    /// weight bound for a GPU).
    fn prepare<'a>(
        &self,
        w: WeightMatrix<'a>,
        target: crate::repack::Target,
    ) -> Result<crate::repack::Prepared<'a>, KernelError> {
        let _ = target;
        Ok(crate::repack::Prepared::Plain(w))
    }

    /// Matmul on prepared weights. The default accepts plain weights only: a lane that
    /// cannot read a repacked layout refuses it with an error.
    fn matmul_prepared(
        &self,
        w: &crate::repack::Prepared<'_>,
        x: &[f32],
        m: usize,
    ) -> Result<Vec<f32>, KernelError> {
        match w {
            crate::repack::Prepared::Plain(w) => self.matmul(w, x, m),
            crate::repack::Prepared::Repacked(r) => Err(KernelError::Unsupported {
                op: "matmul on repacked weights",
                ty: r.layout().name(),
            }),
        }
    }

    /// Dot product of one weight row (`k` values of `wtype`, plain layout) with one
    /// quantized activation row in this lane's activation format for `wtype`.
    fn vec_dot(&self, wtype: GgmlType, w_row: &[u8], act: &[u8]) -> Result<f32, KernelError>;

    /// `out[i*n + j] = dot(W_j, quantize(x_i))` for `m` activation rows of `w.k()`
    /// values. The default runs [`Kernels::vec_dot`] for every (row, column) pair, which
    /// is what ggml's plain CPU matmul does on the tiers that have no gemm variant.
    fn matmul(&self, w: &WeightMatrix<'_>, x: &[f32], m: usize) -> Result<Vec<f32>, KernelError> {
        check_activations(x, m, w.k())?;
        let n = w.n();
        let mut out = vec![0.0f32; m * n];
        if w.k() == 0 {
            return Ok(out);
        }
        for (i, xi) in x.chunks_exact(w.k()).enumerate() {
            let act = self.quantize_act(w.ty(), xi)?;
            for j in 0..n {
                out[i * n + j] = self.vec_dot(w.ty(), w.row(j), &act)?;
            }
        }
        Ok(out)
    }
}

/// A lane: stable name, one-line summary, recipe and portable implementation.
pub struct Lane {
    /// Stable name (`ref`, `x86_64-avx2`, ...), used in test names, goldens and the CLI.
    pub name: &'static str,
    /// What tier the lane reproduces, in one line.
    pub summary: &'static str,
    /// The components that decide the lane's bits.
    pub recipe: Recipe,
    /// The portable implementation, which runs on every target.
    pub portable: &'static dyn Kernels,
}

impl core::fmt::Debug for Lane {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Lane").field("name", &self.name).field("recipe", &self.recipe).finish()
    }
}

/// Every lane with a portable implementation, in a stable order.
pub static LANES: &[&Lane] = &[
    &REF,
    &X86_64_AVX2,
    &X86_64_AVX2_REPACK,
    &X86_64_AVX512,
    &AARCH64_NEON,
    &AARCH64_NEON_REPACK,
    &AARCH64_I8MM_REPACK,
    &HIP_WAVE32,
    &HIP_WAVE64,
];

/// The lane with this name.
pub fn lane(name: &str) -> Option<&'static Lane> {
    LANES.iter().copied().find(|l| l.name == name)
}

/// The weight types every lane multiplies.
pub const WEIGHT_TYPES: &[GgmlType] =
    &[GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K];
