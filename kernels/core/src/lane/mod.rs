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
//!   activation row (decode, gemv) and for several (prompt, gemm);
//! - the **plain gemm** ([`PlainGemm`]): how weights that stay plain are multiplied by
//!   several activation rows (`vec_dot` per row, or a tier's whole-matrix kernel).
//!
//! Every lane has a **portable** implementation ([`Kernels`]) in this crate
//! ([`crate::arch`]): scalar Rust performing the same float operations in the same order
//! as the tier, so it runs bitwise-identically on any machine. Architecture crates
//! (`kernels/x86_64`, `kernels/aarch64`, `kernels/hip`) add **native** implementations of
//! the same trait at the same paths, each reached through one entry point of type
//! [`NativeEntry`] and listed in that crate's one table of [`NativeLane`]s; the harness
//! loops over the tables and checks twin and native bitwise.
//!
//! A lane also declares, as data, its [`Arch`] (where its native code runs) and its
//! [`Status`]: what it is proven against and at which level ([`Proof`]: kernel, decoder
//! decode mode, decoder prompt mode), or that it is [`Status::Modelled`] or
//! [`Status::Synthetic`]. Each claimed proof names the test target and the trials that
//! establish it; those trials check the claim (see `docs/ADDING_A_LANE.md`).
//!
//! Adding a lane (five places, `docs/ADDING_A_LANE.md`): its twin module under
//! [`crate::arch`] with its [`Lane`] constant, its native module, one row in each
//! registry ([`crate::LANES`] in `arch/mod.rs`, its crate's `NATIVE` table), a row in
//! `targets/<triple>.toml`, and the bless of its goldens.

pub(crate) mod dispatch;
pub use dispatch::{act_rows, vec_dot_rows};
pub mod parallel;
mod recipe;
mod registry;
mod repacked;
mod status;
#[cfg(test)]
mod tests;

pub use recipe::{Accumulation, Contraction, MatmulPath, PlainGemm, Recipe, WeightLayout};
pub use registry::{
    native_entry, NativeElem, NativeElemEntry, NativeEntry, NativeLane, Unavailable,
};
pub use repacked::{row_path, unsupported_layout, GroupFn, RepackScheme, RepackedLane, RowPath};
pub use status::{Arch, Level, Proof, Status};

use crate::error::KernelError;
use crate::quant::ActRule;
use crate::weight_matrix::{check_activations, WeightMatrix};
use crate::GgmlType;

/// The tier's own thread pool, as far as its arithmetic can read it: llama.cpp's thread
/// count (`-t`) and whether ggml runs NUMA-aware (`--numa` on a machine ggml finds more
/// than one NUMA node on: `ggml_is_numa`, which makes `mul_mat` chunk by thread always).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TierPool {
    /// Threads.
    pub threads: usize,
    /// NUMA-aware.
    pub numa: bool,
}

impl TierPool {
    /// `threads` threads, not NUMA-aware.
    pub const fn threads(threads: usize) -> TierPool {
        TierPool { threads, numa: false }
    }
}

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
    /// values: each row quantized by [`Kernels::quantize_act`], then
    /// [`Kernels::matmul_quantized`].
    fn matmul(&self, w: &WeightMatrix<'_>, x: &[f32], m: usize) -> Result<Vec<f32>, KernelError> {
        check_activations(x, m, w.k())?;
        if w.k() == 0 {
            return Ok(vec![0.0f32; m * w.n()]);
        }
        let mut act = Vec::new();
        for xi in x.chunks_exact(w.k()) {
            act.extend_from_slice(&self.quantize_act(w.ty(), xi)?);
        }
        self.matmul_quantized(w, &act, m)
    }

    /// The plain-weight matmul on `m` activation rows already quantized in this lane's
    /// format for `w.ty()`, concatenated (`act`): `out[i*n + j]`. The default runs
    /// [`Kernels::vec_dot`] for every (row, column) pair ([`PlainGemm::VecDot`]), which
    /// is what ggml's plain CPU matmul does on the tiers that have no gemm variant; a
    /// lane whose tier has one overrides this.
    fn matmul_quantized(
        &self,
        w: &WeightMatrix<'_>,
        act: &[u8],
        m: usize,
    ) -> Result<Vec<f32>, KernelError> {
        dispatch::vec_dot_rows(self, w, act, m)
    }

    /// [`Kernels::matmul_quantized`] as the tier computes it with its own thread pool
    /// `tier` (llama.cpp's `-t`, and whether ggml runs NUMA-aware): where ggml chooses a
    /// kernel per chunk of its thread plan (the i8mm build's 2x2 tiles need chunks of even
    /// spans, [`crate::arch::aarch64::i8mm::ChunkPlan`]), the result depends on it. The
    /// default ignores it: the lane's outputs do not depend on the chunking.
    fn matmul_quantized_tier(
        &self,
        w: &WeightMatrix<'_>,
        act: &[u8],
        m: usize,
        tier: TierPool,
    ) -> Result<Vec<f32>, KernelError> {
        let _ = tier;
        self.matmul_quantized(w, act, m)
    }

    /// [`Kernels::matmul_prepared`] as the tier computes it with its thread pool `tier`:
    /// plain weights quantized by [`Kernels::quantize_act`] and multiplied by
    /// [`Kernels::matmul_quantized_tier`]; repacked weights by
    /// [`Kernels::matmul_prepared`] (the repacked gemv/gemm do not depend on it).
    fn matmul_prepared_tier(
        &self,
        w: &crate::repack::Prepared<'_>,
        x: &[f32],
        m: usize,
        tier: TierPool,
    ) -> Result<Vec<f32>, KernelError> {
        match w {
            crate::repack::Prepared::Plain(w) => {
                check_activations(x, m, w.k())?;
                if w.k() == 0 {
                    return Ok(vec![0.0f32; m * w.n()]);
                }
                let mut act = Vec::new();
                for xi in x.chunks_exact(w.k()) {
                    act.extend_from_slice(&self.quantize_act(w.ty(), xi)?);
                }
                self.matmul_quantized_tier(w, &act, m, tier)
            }
            crate::repack::Prepared::Repacked(_) => self.matmul_prepared(w, x, m),
        }
    }

    /// The name of the kernel [`Kernels::matmul_quantized`] runs for `m` rows of plain
    /// `wtype` weights (reported in a trace's provenance).
    fn plain_path(&self, wtype: GgmlType, m: usize) -> &'static str {
        let _ = (wtype, m);
        "vec_dot"
    }

    /// Whether ggml-cpu's `MUL_MAT_ID` multiplies the `m` activation rows routed to one
    /// expert of plain `wtype` weights together, by the kernel [`Kernels::matmul_quantized`]
    /// runs for `m` rows (the x86 tiled K-quant matmul from 8 rows:
    /// `ggml_compute_forward_mul_mat_id_tiled`); otherwise it runs [`Kernels::vec_dot`] one
    /// (weight row, activation row) pair at a time (`mul_mat_id` has no llamafile tinyBLAS
    /// and no `nrc == 2` tile). The default: never.
    fn id_takes_plain_gemm(&self, wtype: GgmlType, m: usize) -> bool {
        let _ = (wtype, m);
        false
    }

    /// The granularity in weight rows at which `n` plain rows of `wtype` times `m`
    /// activation rows may be split between threads without changing a bit of
    /// [`Kernels::matmul_quantized`]; `None` when they must stay whole. The default, 1,
    /// suits every kernel whose outputs do not depend on the other weight rows.
    fn plain_split(&self, wtype: GgmlType, n: usize, m: usize) -> Option<usize> {
        let _ = (wtype, n, m);
        Some(1)
    }

    /// A fault planted in the decoder's own arithmetic around this lane's kernels, for
    /// the negative controls of divergence analysis (a lane whose tier is known to be
    /// wrong in one place). Every lane of the registry returns `None`, the default.
    fn planted_fault(&self) -> Option<PlantedFault> {
        None
    }
}

/// A planted decoder fault (see [`Kernels::planted_fault`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlantedFault {
    /// Layer `layer`'s K row of position `pos` is never written to the KV cache, so
    /// attention reads what the slot held before (zeros in a fresh cache): a tier that
    /// reads a stale K row.
    StaleK {
        /// Layer.
        layer: usize,
        /// Position.
        pos: usize,
    },
    /// A mixture-of-experts model's layer `layer` routes the token at position `pos` to
    /// the best expert its router did not select in place of the last one it did (the
    /// expert index swapped, the weights those of the experts used): a tier whose
    /// routing is wrong in one place.
    SwapExpert {
        /// Layer.
        layer: usize,
        /// Position.
        pos: usize,
    },
}

/// A lane: stable name, architecture, one-line summary, status, recipe and portable
/// implementation.
pub struct Lane {
    /// Stable name (`ref`, `x86_64-avx2`, ...), used in test names, goldens and the CLI.
    pub name: &'static str,
    /// Where the lane's native code runs ([`Arch::Portable`] for `ref`, which has none).
    pub arch: Arch,
    /// What tier the lane reproduces, in one line.
    pub summary: &'static str,
    /// What the lane is proven against, and at which level.
    pub status: Status,
    /// The components that decide the lane's bits.
    pub recipe: Recipe,
    /// The portable implementation, which runs on every target.
    pub portable: &'static dyn Kernels,
}

impl core::fmt::Debug for Lane {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Lane")
            .field("name", &self.name)
            .field("arch", &self.arch)
            .field("recipe", &self.recipe)
            .finish_non_exhaustive()
    }
}

/// The weight types every lane multiplies (a lane may multiply more: those its
/// [`Kernels::act_rule`] is defined for among [`crate::quant::weights::QUANTIZABLE`]).
pub const WEIGHT_TYPES: &[GgmlType] =
    &[GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K];
