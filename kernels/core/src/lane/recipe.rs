//! Recipe components. The accumulation schedule, the contraction, the weight layout and
//! the plain-weight gemm are named labels (a new lane with a new one defines its own constant beside its
//! twin); the matmul path is a closed enum: its two shapes are the only two the shared
//! matmul code implements (`Kernels::matmul`, [`super::RepackedLane`]). Every value has a stable name for reports.

use crate::error::KernelError;
use crate::quant::ActRule;
use crate::GgmlType;

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
    /// How weights that stay plain are multiplied by several activation rows.
    pub plain_gemm: PlainGemm,
    /// The decoder's elementwise and attention loops (softmax, SwiGLU, f32 dots, RoPE).
    pub elem: crate::elem::ElemFlavour,
}

impl Recipe {
    /// The activation rule for weights of `wtype`: [`Recipe::act_k`] for the K-quants,
    /// [`Recipe::act_legacy`] for Q4_0/Q8_0; `op` names the operation in the error for
    /// any other type.
    pub fn act_rule(&self, wtype: GgmlType, op: &'static str) -> Result<ActRule, KernelError> {
        match wtype {
            GgmlType::Q4_K | GgmlType::Q6_K => Ok(self.act_k),
            GgmlType::Q4_0 | GgmlType::Q8_0 => Ok(self.act_legacy),
            other => Err(KernelError::Unsupported { op, ty: other.name() }),
        }
    }
}

/// Float accumulation schedule.
///
/// A named label, not a closed list: a lane whose tier has another one defines its own
/// constant with [`Accumulation::named`] beside its twin, and nothing here changes.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Accumulation {
    name: &'static str,
}

#[allow(non_upper_case_globals)]
impl Accumulation {
    /// ggml's generic C kernels: one serial float sum per block (legacy types); eight
    /// float partial sums, one per value index mod 8, added to the min term at the end
    /// in order (K-quants). See [`crate::arch::generic::vec_dot`].
    pub const GgmlGeneric: Accumulation = Accumulation::named("ggml-generic");
    /// ggml's AVX2 kernels: eight float lanes (plus four min lanes for q4_K), one FMA per
    /// block or superblock per lane, `hsum_float_8` at the end. See [`crate::arch::x86_64::avx2::vec_dot`].
    pub const X86Avx2: Accumulation = Accumulation::named("avx2-8-lanes-hsum");
    /// ggml's NEON kernels with `nrc == 1`: K-quants one serial float sum per
    /// superblock; Q4_0/Q8_0 two 4-lane accumulators (even and odd blocks) reduced by
    /// `vaddvq`. See [`crate::arch::aarch64::neon::vec_dot`].
    pub const NeonSerial: Accumulation = Accumulation::named("neon-serial");
    /// ggml's CUDA/HIP MMVQ (`mul_mat_vec_q`), 32-lane warps (RDNA): per-thread strided
    /// partial sums, warps added into warp 0 in order, XOR butterfly. See
    /// [`crate::gpu::mmvq_gemv`].
    pub const HipMmvqWave32: Accumulation = Accumulation::named("hip-mmvq-wave32");
    /// The same with 64-lane wavefronts (GCN/CDNA).
    pub const HipMmvqWave64: Accumulation = Accumulation::named("hip-mmvq-wave64");
    /// The same on NVIDIA from Ampere on: 32-lane warps, four warps per block for one
    /// column ([`crate::gpu::CUDA`]).
    pub const CudaMmvq: Accumulation = Accumulation::named("cuda-mmvq-warp32x4");

    /// The label `name` (stable: it names the component in reports).
    pub const fn named(name: &'static str) -> Self {
        Accumulation { name }
    }

    /// Stable name.
    pub fn name(self) -> &'static str {
        self.name
    }
}

impl core::fmt::Debug for Accumulation {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name)
    }
}

/// Fused multiply-add usage.
///
/// A named label, not a closed list: a lane whose tier has another one defines its own
/// constant with [`Contraction::named`] beside its twin, and nothing here changes.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Contraction {
    name: &'static str,
}

#[allow(non_upper_case_globals)]
impl Contraction {
    /// No multiply-add is fused (x86-64 baseline builds: no FMA instruction).
    pub const None: Contraction = Contraction::named("unfused");
    /// Every accumulation `acc = d * q + acc` is one fused multiply-add (the x86 SIMD
    /// kernels' `_mm256_fmadd_ps`); nothing else is fused.
    pub const FusedAccumulate: Contraction = Contraction::named("fma-accumulate");
    /// GCC on aarch64 with `-ffp-contract=fast`: C expressions `a + b*c` fused (fmadd,
    /// fmsub), `vmlaq` intrinsics not fused.
    pub const GccAarch64: Contraction = Contraction::named("gcc-aarch64-contract");
    /// HIP clang device code (`-ffp-contract=fast-honor-pragmas`, its default): the
    /// sums of scale products fused; q4_K's final combine fused on RDNA2, not on
    /// gfx90a (see [`crate::gpu::Contraction::HIP_CLANG`] and
    /// [`crate::gpu::Contraction::HIP_CLANG_GFX90A`]).
    pub const HipClang: Contraction = Contraction::named("hip-clang-contract");
    /// nvcc with `--fmad=true` (ggml's `-use_fast_math`): the same fusions of MMVQ as
    /// HIP clang on RDNA2 ([`crate::gpu::Contraction::NVCC`]).
    pub const Nvcc: Contraction = Contraction::named("nvcc-fmad");

    /// The label `name` (stable: it names the component in reports).
    pub const fn named(name: &'static str) -> Self {
        Contraction { name }
    }

    /// Stable name.
    pub fn name(self) -> &'static str {
        self.name
    }
}

impl core::fmt::Debug for Contraction {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name)
    }
}

/// Weight layout.
///
/// A named label, not a closed list: a lane whose tier has another one defines its own
/// constant with [`WeightLayout::named`] beside its twin, and nothing here changes.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct WeightLayout {
    name: &'static str,
}

#[allow(non_upper_case_globals)]
impl WeightLayout {
    /// ggml's plain blocks, one row after another.
    pub const Plain: WeightLayout = WeightLayout::named("plain");
    /// x86 AVX2 repack: Q4_K as `q4_K_8x8`, Q4_0 as `q4_0_8x8` when the row count is a
    /// multiple of 8; everything else plain (see [`crate::repack`]).
    pub const X86Repack8x8: WeightLayout = WeightLayout::named("x86-repack-8x8");
    /// aarch64 dotprod repack: Q4_K as `q4_K_8x4` and Q6_K as `q6_K_8x4` (rows a
    /// multiple of 8), Q4_0 as
    /// `q4_0_4x4` and Q8_0 as `q8_0_4x4` (rows a multiple of 4); everything else plain.
    pub const ArmDotprodRepack: WeightLayout = WeightLayout::named("arm-dotprod-repack-8x4-4x4");
    /// aarch64 i8mm repack: Q4_K as `q4_K_8x8` and Q6_K as `q6_K_8x8` (rows a multiple
    /// of 8), Q4_0 as
    /// `q4_0_4x8` and Q8_0 as `q8_0_4x8` (rows a multiple of 4); everything else plain.
    pub const ArmI8mmRepack: WeightLayout = WeightLayout::named("arm-i8mm-repack-8x8-4x8");

    /// The label `name` (stable: it names the component in reports).
    pub const fn named(name: &'static str) -> Self {
        WeightLayout { name }
    }

    /// Stable name.
    pub fn name(self) -> &'static str {
        self.name
    }
}

impl core::fmt::Debug for WeightLayout {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name)
    }
}

/// How a tier multiplies weights that stay plain (not repacked) by several activation
/// rows.
///
/// A named label, not a closed list: a lane whose tier has another variant defines its
/// own constant with [`PlainGemm::named`] beside its twin and implements it in its
/// [`super::Kernels::matmul_quantized`].
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PlainGemm {
    name: &'static str,
}

#[allow(non_upper_case_globals)]
impl PlainGemm {
    /// `vec_dot` per (weight row, activation row) pair at every row count: one row and
    /// several give the same bits per row.
    pub const VecDot: PlainGemm = PlainGemm::named("vec_dot-per-row");
    /// ggml's x86 tiled K-quant matmul (`ggml-cpu/tiled`, on unless
    /// `GGML_CPU_TILED_MM=0`): Q4_K and Q6_K weights at 8 or more activation rows, one
    /// exact integer sum per (row, column, superblock) and a fused float chain per
    /// superblock (see [`crate::arch::x86_64::avx2::tiled`]); `vec_dot` below 8 rows and
    /// for the other types.
    pub const X86TiledK: PlainGemm = PlainGemm::named("x86-tiled-kquant-m8");

    /// The label `name` (stable: it names the component in reports).
    pub const fn named(name: &'static str) -> Self {
        PlainGemm { name }
    }

    /// Stable name.
    pub fn name(self) -> &'static str {
        self.name
    }
}

impl core::fmt::Debug for PlainGemm {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name)
    }
}

/// Which kernel runs for one activation row and for several.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MatmulPath {
    /// `vec_dot` per (weight row, activation row) for any number of rows: gemv and
    /// gemm give the same bits per row.
    VecDotPerRow,
    /// ggml's repacked matmul (`forward_mul_mat` in `ggml-cpu/repack.cpp`): activation
    /// rows in groups of four go through the gemm kernel with activations quantized by
    /// `gemm_act` (interleaved four rows at a time); the remaining m % 4 rows through the
    /// gemv kernel with the lane's plain activation rule. Weights that were not repacked
    /// take the lane's plain vec_dot path.
    RepackedGemmGemv {
        /// Activation rule of the gemm rows for K-quant weights.
        gemm_act: crate::quant::ActRule,
    },
}

impl MatmulPath {
    /// Stable name.
    pub fn name(self) -> &'static str {
        match self {
            MatmulPath::VecDotPerRow => "vec_dot-per-row",
            MatmulPath::RepackedGemmGemv { .. } => "repack-gemm4-gemv",
        }
    }
}

impl Recipe {
    /// `(component, value)` pairs, in a fixed order, for reports.
    pub fn components(&self) -> [(&'static str, &'static str); 8] {
        [
            ("act_k", self.act_k.name()),
            ("act_legacy", self.act_legacy.name()),
            ("accumulation", self.accumulation.name()),
            ("contraction", self.contraction.name()),
            ("layout", self.layout.name()),
            ("matmul", self.matmul.name()),
            ("plain_gemm", self.plain_gemm.name()),
            ("elem", self.elem.name()),
        ]
    }
}
