//! The `aarch64-neon-repack` lane: ggml built by GCC for aarch64 with dotprod
//! (`-march=armv8.2-a+dotprod`) and the CPU repack buffer (llama.cpp's default). Weights
//! are repacked as that build does it ([`crate::repack`]): Q4_K as `q4_K_8x4` when the
//! row count is a multiple of 8, Q4_0 as `q4_0_4x4` and Q8_0 as `q8_0_4x4` when it is a
//! multiple of 4, and multiplied by the NEON dotprod kernels
//! ([`crate::dot::neon_repack`]). Other weights take the `aarch64-neon` lane's plain
//! vec_dot path.
//!
//! Not reproduced: ggml's dotprod build also repacks Q6_K (`q6_K_8x4`); this lane
//! keeps Q6_K plain (the `aarch64-neon` vec_dot), so its Q6_K results at row counts
//! divisible by 8 are not ggml's repacked ones. Plain Q4_0/Q8_0 weights (rows not a
//! multiple of 4) with several activation rows go through llamafile's tinyBLAS in ggml,
//! which the `aarch64-neon` path does not reproduce either.
//!
//! Row split, as `forward_mul_mat` does it: with m activation rows, the first
//! m - m % 4 go through the gemm kernel (activations by `ggml_quantize_mat_q8_K_4x4` /
//! `ggml_quantize_mat_q8_0_4x4`, which equal the lane's row rules row by row), the last
//! m % 4 through the gemv kernel. Every output is one pass over all of k, so column
//! chunking (threads) never changes a bit.

use super::aarch64_neon::NeonTwin;
use super::x86_64_avx2::family_rule;
use super::x86_64_avx2_repack::{row_path, RowPath};
use super::{Accumulation, Contraction, Kernels, Lane, MatmulPath, Recipe, WeightLayout};
use crate::blocks::cast_blocks;
use crate::dot::neon_repack;
use crate::error::KernelError;
use crate::matrix::{check_activations, WeightMatrix};
use crate::quant::ActRule;
use crate::repack::{
    BlockQ4Kx8, BlockQ4_0x4, BlockQ8_0x4, Prepared, RepackLayout, RepackedMatrix, Target,
};
use crate::GgmlType;

/// Portable twin of the `aarch64-neon-repack` lane.
#[derive(Debug, Default)]
pub struct NeonRepackTwin;

/// The `aarch64-neon-repack` lane.
pub static AARCH64_NEON_REPACK: Lane = Lane {
    name: "aarch64-neon-repack",
    summary: "ggml aarch64 (GCC, dotprod) with CPU repack: q4_K 8x4, q4_0/q8_0 4x4 gemv and gemm",
    recipe: Recipe {
        act_k: ActRule::Q8KFusedNearest,
        act_legacy: ActRule::Q8_0Neon,
        accumulation: Accumulation::NeonSerial,
        contraction: Contraction::GccAarch64,
        layout: WeightLayout::ArmDotprodRepack,
        matmul: MatmulPath::RepackedGemmGemv { gemm_act: ActRule::Q8KFusedNearest },
        elem: crate::elem::ElemFlavour::Neon,
    },
    portable: &NeonRepackTwin,
};

/// The layout ggml's aarch64 dotprod build repacks `ty` into (reproduced here), if any.
pub fn arm_dotprod_layout(ty: GgmlType) -> Option<RepackLayout> {
    match ty {
        GgmlType::Q4_K => Some(RepackLayout::Q4K8x4),
        GgmlType::Q4_0 => Some(RepackLayout::Q4_0_4x4),
        GgmlType::Q8_0 => Some(RepackLayout::Q8_0_4x4),
        _ => None,
    }
}

/// The repack decision: CPU target, a type the dotprod build repacks, and a row count
/// divisible by the layout's row group.
pub fn prepare_arm_dotprod<'a>(
    w: WeightMatrix<'a>,
    target: Target,
) -> Result<Prepared<'a>, KernelError> {
    match (target, arm_dotprod_layout(w.ty())) {
        (Target::Cpu, Some(layout)) if w.n().is_multiple_of(layout.cols()) => {
            Ok(Prepared::Repacked(RepackedMatrix::from_plain(&w, layout)?))
        }
        _ => Ok(Prepared::Plain(w)),
    }
}

/// The outputs of one row group (`layout.cols()` columns) for one quantized activation
/// row, by the twin kernels.
pub fn neon_repack_group(
    layout: RepackLayout,
    path: RowPath,
    group: &[u8],
    act: &[u8],
    out: &mut [f32],
) -> Result<(), KernelError> {
    match layout {
        RepackLayout::Q4K8x4 => {
            let blocks: &[BlockQ4Kx8] = bytemuck::cast_slice(group);
            out.copy_from_slice(&neon_repack::gemv_q4_k_8x4(
                blocks,
                cast_blocks(GgmlType::Q8_K, act)?,
            ));
        }
        RepackLayout::Q4_0_4x4 => {
            let blocks: &[BlockQ4_0x4] = bytemuck::cast_slice(group);
            out.copy_from_slice(&neon_repack::gemv_q4_0_4x4(
                blocks,
                cast_blocks(GgmlType::Q8_0, act)?,
            ));
        }
        RepackLayout::Q8_0_4x4 => {
            let blocks: &[BlockQ8_0x4] = bytemuck::cast_slice(group);
            let y = cast_blocks(GgmlType::Q8_0, act)?;
            out.copy_from_slice(&match path {
                RowPath::Gemm => neon_repack::gemm_q8_0_4x4(blocks, y),
                RowPath::Gemv => neon_repack::gemv_q8_0_4x4(blocks, y),
            });
        }
        other => {
            return Err(KernelError::Unsupported {
                op: "aarch64-neon-repack matmul",
                ty: other.name(),
            })
        }
    }
    Ok(())
}

/// Quantizes one activation row.
pub type QuantizeRow<'a> = &'a dyn Fn(&[f32]) -> Result<Vec<u8>, KernelError>;

/// Computes one row group's outputs: (layout, row path, group bytes, activation row, out).
pub type GroupKernel<'a> =
    &'a dyn Fn(RepackLayout, RowPath, &[u8], &[u8], &mut [f32]) -> Result<(), KernelError>;

/// A repacked matmul with `group` computing one row group: activation rows quantized by
/// `quantize` (the same rule for gemm and gemv rows on this tier), rows split by
/// [`row_path`].
pub fn neon_repack_matmul(
    r: &RepackedMatrix,
    x: &[f32],
    m: usize,
    quantize: QuantizeRow<'_>,
    group: GroupKernel<'_>,
) -> Result<Vec<f32>, KernelError> {
    check_activations(x, m, r.k())?;
    let (n, cols) = (r.n(), r.layout().cols());
    let mut out = vec![0.0f32; m * n];
    for (i, xi) in x.chunks_exact(r.k().max(1)).enumerate().take(m) {
        let path = row_path(i, m);
        let act = quantize(xi)?;
        for g in 0..n / cols {
            let dst = &mut out[i * n + cols * g..i * n + cols * (g + 1)];
            group(r.layout(), path, r.group(g), &act, dst)?;
        }
    }
    Ok(out)
}

impl Kernels for NeonRepackTwin {
    fn act_rule(&self, wtype: GgmlType) -> Result<ActRule, KernelError> {
        family_rule(&AARCH64_NEON_REPACK.recipe, wtype, "aarch64-neon-repack matmul")
    }

    fn dequantize(&self, ty: GgmlType, bytes: &[u8], out: &mut [f32]) -> Result<(), KernelError> {
        NeonTwin.dequantize(ty, bytes, out)
    }

    fn vec_dot(&self, wtype: GgmlType, w_row: &[u8], act: &[u8]) -> Result<f32, KernelError> {
        // Single rows of plain weights: the plain NEON kernel.
        NeonTwin.vec_dot(wtype, w_row, act)
    }

    fn prepare<'a>(
        &self,
        w: WeightMatrix<'a>,
        target: Target,
    ) -> Result<Prepared<'a>, KernelError> {
        prepare_arm_dotprod(w, target)
    }

    fn matmul_prepared(
        &self,
        w: &Prepared<'_>,
        x: &[f32],
        m: usize,
    ) -> Result<Vec<f32>, KernelError> {
        match w {
            Prepared::Plain(w) => NeonTwin.matmul(w, x, m),
            Prepared::Repacked(r) => {
                let ty = r.layout().source();
                neon_repack_matmul(r, x, m, &|xi| self.quantize_act(ty, xi), &neon_repack_group)
            }
        }
    }

    fn matmul(&self, w: &WeightMatrix<'_>, x: &[f32], m: usize) -> Result<Vec<f32>, KernelError> {
        let prepared = self.prepare(*w, Target::Cpu)?;
        self.matmul_prepared(&prepared, x, m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::weights;

    #[test]
    fn gpu_target_stays_plain_and_cpu_repacks_by_row_group() {
        let x: Vec<f32> = (0..12 * 256).map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.02).collect();
        for (ty, repacked_at_12) in
            [(GgmlType::Q4_K, false), (GgmlType::Q4_0, true), (GgmlType::Q8_0, true)]
        {
            let bytes = weights::quantize(ty, &x, 12, 256).unwrap();
            let w = WeightMatrix::new(ty, 12, 256, &bytes).unwrap();
            assert!(matches!(NeonRepackTwin.prepare(w, Target::Gpu).unwrap(), Prepared::Plain(_)));
            let p = NeonRepackTwin.prepare(w, Target::Cpu).unwrap();
            assert_eq!(matches!(p, Prepared::Repacked(_)), repacked_at_12, "{ty:?}");
        }
    }

    #[test]
    fn repacked_matmul_is_close_to_plain() {
        let (n, k, m) = (16, 512, 5);
        let w: Vec<f32> = (0..n * k).map(|i| ((i * 7919 % 1013) as f32 - 506.0) * 0.001).collect();
        let x: Vec<f32> = (0..m * k).map(|i| ((i * 104729 % 997) as f32 - 498.0) * 0.002).collect();
        for ty in [GgmlType::Q4_K, GgmlType::Q4_0, GgmlType::Q8_0] {
            let bytes = weights::quantize(ty, &w, n, k).unwrap();
            let wm = WeightMatrix::new(ty, n, k, &bytes).unwrap();
            let plain = NeonTwin.matmul(&wm, &x, m).unwrap();
            let rep = NeonRepackTwin.matmul(&wm, &x, m).unwrap();
            for (a, b) in plain.iter().zip(&rep) {
                assert!((a - b).abs() <= 1e-3 * (1.0 + a.abs()), "{ty:?}: {a} vs {b}");
            }
        }
    }
}
