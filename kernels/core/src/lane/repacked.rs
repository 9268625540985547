//! One implementation of every lane that runs ggml's CPU repack buffer, parameterised by
//! the tier's [`RepackScheme`].
//!
//! ggml's repacked matmul (`forward_mul_mat` of the CPU "extra" buffer type) has the
//! same shape on every tier: the weight types the tier repacks are interleaved into a
//! layout of `cols` rows when the row count is a multiple of `cols`; with `m` activation
//! rows, the first `m - m % 4` go through the layout's gemm kernel and the last `m % 4`
//! through its gemv kernel; every output is one pass over all of `k` for one row group,
//! so chunking the columns (threads) never changes a bit. Weights the tier does not
//! repack, and single rows of plain weights, take the tier's plain path.
//!
//! What varies by tier is data: which layout a type is repacked into, the activation
//! rule of a gemm or gemv row, and the kernels of one row group. A lane supplies those
//! as a [`RepackScheme`]; its portable twin and its native form are both a
//! [`RepackedLane`] over the same layouts and rules, differing only in the group
//! kernels (scalar twins in `tiercheck-core`, SIMD in the architecture crate) and in the
//! plain lane underneath (twin or native).

use super::Kernels;
use crate::error::KernelError;
use crate::quant::ActRule;
use crate::repack::{Prepared, RepackLayout, RepackedMatrix, Target};
use crate::weight_matrix::{check_activations, WeightMatrix};
use crate::GgmlType;

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

/// The outputs of one row group (`layout.cols()` columns) for one quantized activation
/// row: (layout, row path, the group's bytes, the activation row, out).
pub type GroupFn = fn(RepackLayout, RowPath, &[u8], &[u8], &mut [f32]) -> Result<(), KernelError>;

/// What one tier's repack buffer does, as data.
#[derive(Clone, Copy)]
pub struct RepackScheme {
    /// The lane name, for errors.
    pub lane: &'static str,
    /// The layout this tier repacks `ty` into, if any, for a matrix of `n` rows (ggml
    /// checks the row count against each candidate layout's row group in turn, so a tier
    /// may pick another layout, or none, for some row counts). A returned layout's row
    /// group divides `n`.
    pub layout: fn(GgmlType, usize) -> Option<RepackLayout>,
    /// The activation rule of one row taking `path` on `layout`.
    pub act_rule: fn(RepackLayout, RowPath) -> ActRule,
    /// One row group's outputs.
    pub group: GroupFn,
    /// Types this tier repacks into a layout the lane does not reproduce: the lane
    /// refuses them (its activation rule for them is an error), rather than computing
    /// them by the plain path the tier does not take.
    pub unreproduced: &'static [GgmlType],
}

impl core::fmt::Debug for RepackScheme {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("RepackScheme").field("lane", &self.lane).finish_non_exhaustive()
    }
}

impl RepackScheme {
    /// The repack decision: the CPU target, a type this tier repacks, and a row count
    /// divisible by the layout's row group; otherwise the weights stay plain.
    pub fn prepare<'a>(
        &self,
        w: WeightMatrix<'a>,
        target: Target,
    ) -> Result<Prepared<'a>, KernelError> {
        match (target, (self.layout)(w.ty(), w.n())) {
            (Target::Cpu, Some(layout)) if w.n().is_multiple_of(layout.cols()) => {
                Ok(Prepared::Repacked(RepackedMatrix::from_plain(&w, layout)?))
            }
            _ => Ok(Prepared::Plain(w)),
        }
    }
}

/// A lane with ggml's CPU repack buffer: the repacked path of [`RepackScheme`] over a
/// plain lane's kernels.
#[derive(Debug)]
pub struct RepackedLane {
    /// The tier's plain kernels: activation quantizers, dequantizer, single-row vec_dot
    /// and the matmul of weights that stay plain.
    pub plain: &'static dyn Kernels,
    /// The layouts, row rules and group kernels.
    pub scheme: RepackScheme,
}

impl core::fmt::Debug for dyn Kernels {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("dyn Kernels")
    }
}

impl RepackedLane {
    /// Quantize one activation row for a row taking `path` on `layout`: the plain lane's
    /// quantizer where the row's rule is the plain rule for the layout's type (so a
    /// native lane uses its native quantizer), else the named rule.
    fn quantize_row(
        &self,
        layout: RepackLayout,
        path: RowPath,
        x: &[f32],
    ) -> Result<Vec<u8>, KernelError> {
        let ty = layout.source();
        let rule = (self.scheme.act_rule)(layout, path);
        if rule == self.plain.act_rule(ty)? {
            self.plain.quantize_act(ty, x)
        } else {
            rule.quantize(x)
        }
    }

    /// The repacked matmul: rows split by [`row_path`], each row quantized once, every
    /// row group computed by the scheme's group kernel.
    fn matmul_repacked(
        &self,
        r: &RepackedMatrix,
        x: &[f32],
        m: usize,
    ) -> Result<Vec<f32>, KernelError> {
        check_activations(x, m, r.k())?;
        let (n, cols, layout) = (r.n(), r.layout().cols(), r.layout());
        let mut out = vec![0.0f32; m * n];
        for (i, xi) in x.chunks_exact(r.k().max(1)).enumerate().take(m) {
            let path = row_path(i, m);
            let act = self.quantize_row(layout, path, xi)?;
            for g in 0..n / cols {
                let dst = &mut out[i * n + cols * g..i * n + cols * (g + 1)];
                (self.scheme.group)(layout, path, r.group(g), &act, dst)?;
            }
        }
        Ok(out)
    }
}

impl Kernels for RepackedLane {
    fn act_rule(&self, wtype: GgmlType) -> Result<ActRule, KernelError> {
        if self.scheme.unreproduced.contains(&wtype) {
            return Err(KernelError::Unsupported { op: self.scheme.lane, ty: wtype.name() });
        }
        self.plain.act_rule(wtype)
    }

    fn quantize_act(&self, wtype: GgmlType, x: &[f32]) -> Result<Vec<u8>, KernelError> {
        self.plain.quantize_act(wtype, x)
    }

    fn dequantize(&self, ty: GgmlType, bytes: &[u8], out: &mut [f32]) -> Result<(), KernelError> {
        self.plain.dequantize(ty, bytes, out)
    }

    fn vec_dot(&self, wtype: GgmlType, w_row: &[u8], act: &[u8]) -> Result<f32, KernelError> {
        // Single rows of plain weights: the tier's plain kernel.
        self.plain.vec_dot(wtype, w_row, act)
    }

    fn matmul_quantized(
        &self,
        w: &WeightMatrix<'_>,
        act: &[u8],
        m: usize,
    ) -> Result<Vec<f32>, KernelError> {
        // Weights that stay plain: the tier's plain matmul.
        self.plain.matmul_quantized(w, act, m)
    }

    fn matmul_quantized_tier(
        &self,
        w: &WeightMatrix<'_>,
        act: &[u8],
        m: usize,
        tier: crate::lane::TierPool,
    ) -> Result<Vec<f32>, KernelError> {
        self.plain.matmul_quantized_tier(w, act, m, tier)
    }

    fn plain_path(&self, wtype: GgmlType, m: usize) -> &'static str {
        self.plain.plain_path(wtype, m)
    }

    fn id_takes_plain_gemm(&self, wtype: GgmlType, m: usize) -> bool {
        self.plain.id_takes_plain_gemm(wtype, m)
    }

    fn plain_split(&self, wtype: GgmlType, n: usize, m: usize) -> Option<usize> {
        self.plain.plain_split(wtype, n, m)
    }

    fn prepare<'a>(
        &self,
        w: WeightMatrix<'a>,
        target: Target,
    ) -> Result<Prepared<'a>, KernelError> {
        self.scheme.prepare(w, target)
    }

    fn matmul_prepared(
        &self,
        w: &Prepared<'_>,
        x: &[f32],
        m: usize,
    ) -> Result<Vec<f32>, KernelError> {
        match w {
            Prepared::Plain(w) => self.plain.matmul(w, x, m),
            Prepared::Repacked(r) => self.matmul_repacked(r, x, m),
        }
    }

    fn matmul(&self, w: &WeightMatrix<'_>, x: &[f32], m: usize) -> Result<Vec<f32>, KernelError> {
        let prepared = self.prepare(*w, Target::Cpu)?;
        self.matmul_prepared(&prepared, x, m)
    }
}

/// The error of a group kernel handed a layout its tier does not use (`op` names the
/// lane's matmul).
pub fn unsupported_layout(op: &'static str, layout: RepackLayout) -> KernelError {
    KernelError::Unsupported { op, ty: layout.name() }
}
