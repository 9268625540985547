//! Recipe components. Each enum is `#[non_exhaustive]`: lanes added later add
//! variants, and every variant has a stable name for reports.

use crate::quant::ActRule;

/// The components that decide a lane's bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Recipe {
    /// Activation rule for K-quant weights (Q4_K, Q6_K).
    pub act_k: ActRule,
    /// Activation rule for legacy weights (Q4_0, Q8_0).
    pub act_legacy: ActRule,
    /// Float accumulation schedule of the dot products.
    pub accumulation: Accumulation,
    /// Which multiply-adds are fused.
    pub contraction: Contraction,
    /// Weight layout.
    pub layout: WeightLayout,
    /// Kernel variant per activation-row count.
    pub matmul: MatmulPath,
}

/// Float accumulation schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Accumulation {
    /// ggml's generic C kernels: one serial float sum per block (legacy types); eight
    /// float partial sums, one per value index mod 8, added to the min term at the end
    /// in order (K-quants). See [`crate::dot::generic`].
    GgmlGeneric,
    /// ggml's AVX2 kernels: eight float lanes (plus four min lanes for q4_K), one FMA per
    /// block or superblock per lane, `hsum_float_8` at the end. See [`crate::dot::avx2`].
    X86Avx2,
}

/// Fused multiply-add usage.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Contraction {
    /// No multiply-add is fused (x86-64 baseline builds: no FMA instruction).
    None,
    /// Every accumulation `acc = d * q + acc` is one fused multiply-add (the x86 SIMD
    /// kernels' `_mm256_fmadd_ps`); nothing else is fused.
    FusedAccumulate,
}

/// Weight layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WeightLayout {
    /// ggml's plain blocks, one row after another.
    Plain,
}

/// Which kernel runs for one activation row and for several.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MatmulPath {
    /// `vec_dot` per (weight row, activation row) for any number of rows: gemv and
    /// gemm give the same bits per row.
    VecDotPerRow,
}

impl Accumulation {
    /// Stable name.
    pub fn name(self) -> &'static str {
        match self {
            Accumulation::GgmlGeneric => "ggml-generic",
            Accumulation::X86Avx2 => "avx2-8-lanes-hsum",
        }
    }
}

impl Contraction {
    /// Stable name.
    pub fn name(self) -> &'static str {
        match self {
            Contraction::None => "unfused",
            Contraction::FusedAccumulate => "fma-accumulate",
        }
    }
}

impl WeightLayout {
    /// Stable name.
    pub fn name(self) -> &'static str {
        match self {
            WeightLayout::Plain => "plain",
        }
    }
}

impl MatmulPath {
    /// Stable name.
    pub fn name(self) -> &'static str {
        match self {
            MatmulPath::VecDotPerRow => "vec_dot-per-row",
        }
    }
}

impl Recipe {
    /// `(component, value)` pairs, in a fixed order, for reports.
    pub fn components(&self) -> [(&'static str, &'static str); 6] {
        [
            ("act_k", self.act_k.name()),
            ("act_legacy", self.act_legacy.name()),
            ("accumulation", self.accumulation.name()),
            ("contraction", self.contraction.name()),
            ("layout", self.layout.name()),
            ("matmul", self.matmul.name()),
        ]
    }
}
