//! The `x86_64-avx2-repack` lane: ggml's haswell tier with the CPU repack buffer (the
//! default in llama.cpp on AVX2 machines). Q4_K and Q4_0 weights whose row count is a
//! multiple of 8 are repacked to `q4_K_8x8` / `q4_0_8x8` ([`crate::repack`]) and
//! multiplied by the repacked kernels ([`crate::dot::avx2_repack`]); other weights, and
//! Q6_K and Q8_0 (which x86 does not repack), take the `x86_64-avx2` lane's plain path.
//!
//! Row split, as `forward_mul_mat` does it: with m activation rows, the first
//! m - m % 4 go through the gemm kernel (K-quants: activations by
//! [`ActRule::Q8KX86x4`]; Q4_0: the x86 q8_0 rule), the last m % 4 through the gemv
//! kernel (q8_K by the reference rule, q8_0 by the x86 rule). Every output is one pass
//! over all of k, so column chunking (threads) never changes a bit.

use super::x86_64_avx2::family_rule;
use super::{Accumulation, Avx2Twin, Contraction, Kernels, Lane, MatmulPath, Recipe, WeightLayout};
use crate::blocks::cast_blocks;
use crate::dot::avx2_repack;
use crate::error::KernelError;
use crate::matrix::{check_activations, WeightMatrix};
use crate::quant::ActRule;
use crate::repack::{BlockQ4Kx8, BlockQ4_0x8, Prepared, RepackLayout, RepackedMatrix, Target};
use crate::GgmlType;

/// Portable twin of the `x86_64-avx2-repack` lane.
#[derive(Debug, Default)]
pub struct Avx2RepackTwin;

/// The `x86_64-avx2-repack` lane.
pub static X86_64_AVX2_REPACK: Lane = Lane {
    name: "x86_64-avx2-repack",
    summary: "ggml haswell tier with CPU repack: q4_K/q4_0 8x8 gemv and gemm",
    recipe: Recipe {
        act_k: ActRule::Q8KRef,
        act_legacy: ActRule::Q8_0X86,
        accumulation: Accumulation::X86Avx2,
        contraction: Contraction::FusedAccumulate,
        layout: WeightLayout::X86Repack8x8,
        matmul: MatmulPath::RepackedGemmGemv { gemm_act: ActRule::Q8KX86x4 },
        elem: crate::elem::ElemFlavour::Avx2,
    },
    portable: &Avx2RepackTwin,
};

/// The layout x86 repacks `ty` into, if any.
pub fn x86_layout(ty: GgmlType) -> Option<RepackLayout> {
    match ty {
        GgmlType::Q4_K => Some(RepackLayout::Q4K8x8),
        GgmlType::Q4_0 => Some(RepackLayout::Q4_0_8x8),
        _ => None,
    }
}

/// The repack decision: CPU target, a type x86 repacks, and a row count divisible by 8.
pub fn prepare_x86<'a>(w: WeightMatrix<'a>, target: Target) -> Result<Prepared<'a>, KernelError> {
    match (target, x86_layout(w.ty())) {
        (Target::Cpu, Some(layout)) if w.n().is_multiple_of(8) => {
            Ok(Prepared::Repacked(RepackedMatrix::from_plain(&w, layout)?))
        }
        _ => Ok(Prepared::Plain(w)),
    }
}

/// Which kernel and activation rule one activation row uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowPath {
    /// Part of a group of four: the gemm kernel.
    Gemm,
    /// One of the m % 4 leftover rows: the gemv kernel.
    Gemv,
}

/// Row `i` of `m`: gemm for the first m - m % 4 rows, gemv for the rest.
pub fn row_path(i: usize, m: usize) -> RowPath {
    if i < m - m % 4 {
        RowPath::Gemm
    } else {
        RowPath::Gemv
    }
}

/// The activation rule of a repacked row.
pub fn repacked_act_rule(layout: RepackLayout, path: RowPath) -> ActRule {
    match (layout, path) {
        (RepackLayout::Q4K8x8, RowPath::Gemm) => ActRule::Q8KX86x4,
        (RepackLayout::Q4K8x8, RowPath::Gemv) => ActRule::Q8KRef,
        (RepackLayout::Q4_0_8x8, _) => ActRule::Q8_0X86,
        // aarch64 dotprod layouts: one rule for gemm and gemv rows.
        (RepackLayout::Q4K8x4, _) => ActRule::Q8KFusedNearest,
        (
            RepackLayout::Q4_0_4x4
            | RepackLayout::Q8_0_4x4
            | RepackLayout::Q4_0_4x8
            | RepackLayout::Q8_0_4x8,
            _,
        ) => ActRule::Q8_0Neon,
    }
}

impl Avx2RepackTwin {
    fn matmul_repacked(
        &self,
        r: &RepackedMatrix,
        x: &[f32],
        m: usize,
    ) -> Result<Vec<f32>, KernelError> {
        check_activations(x, m, r.k())?;
        let n = r.n();
        let mut out = vec![0.0f32; m * n];
        for (i, xi) in x.chunks_exact(r.k().max(1)).enumerate().take(m) {
            let path = row_path(i, m);
            let act = repacked_act_rule(r.layout(), path).quantize(xi)?;
            for g in 0..n / 8 {
                let cols = match r.layout() {
                    RepackLayout::Q4K8x8 => {
                        let blocks: &[BlockQ4Kx8] = bytemuck::cast_slice(r.group(g));
                        let y = cast_blocks(GgmlType::Q8_K, &act)?;
                        match path {
                            RowPath::Gemm => avx2_repack::gemm_q4_k_8x8(blocks, y),
                            RowPath::Gemv => avx2_repack::gemv_q4_k_8x8(blocks, y),
                        }
                    }
                    RepackLayout::Q4_0_8x8 => {
                        let blocks: &[BlockQ4_0x8] = bytemuck::cast_slice(r.group(g));
                        avx2_repack::gemv_q4_0_8x8(blocks, cast_blocks(GgmlType::Q8_0, &act)?)
                    }
                    other => {
                        return Err(KernelError::Unsupported {
                            op: "x86_64-avx2-repack matmul",
                            ty: other.name(),
                        })
                    }
                };
                out[i * n + 8 * g..i * n + 8 * g + 8].copy_from_slice(&cols);
            }
        }
        Ok(out)
    }
}

impl Kernels for Avx2RepackTwin {
    fn act_rule(&self, wtype: GgmlType) -> Result<ActRule, KernelError> {
        family_rule(&X86_64_AVX2_REPACK.recipe, wtype, "x86_64-avx2-repack matmul")
    }

    fn vec_dot(&self, wtype: GgmlType, w_row: &[u8], act: &[u8]) -> Result<f32, KernelError> {
        // Single rows of plain weights: the plain AVX2 kernel.
        Avx2Twin.vec_dot(wtype, w_row, act)
    }

    fn prepare<'a>(
        &self,
        w: WeightMatrix<'a>,
        target: Target,
    ) -> Result<Prepared<'a>, KernelError> {
        prepare_x86(w, target)
    }

    fn matmul_prepared(
        &self,
        w: &Prepared<'_>,
        x: &[f32],
        m: usize,
    ) -> Result<Vec<f32>, KernelError> {
        match w {
            Prepared::Plain(w) => Avx2Twin.matmul(w, x, m),
            Prepared::Repacked(r) => self.matmul_repacked(r, x, m),
        }
    }

    fn matmul(&self, w: &WeightMatrix<'_>, x: &[f32], m: usize) -> Result<Vec<f32>, KernelError> {
        let prepared = self.prepare(*w, Target::Cpu)?;
        self.matmul_prepared(&prepared, x, m)
    }
}
