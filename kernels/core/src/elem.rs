//! The decoder's elementwise and attention float kernels, per tier: ggml's CPU
//! `ggml_vec_soft_max_f32`, `ggml_vec_swiglu_f32` (its SIMD `ggml_v_expf` /
//! `ggml_v_silu`), `ggml_vec_dot_f32` (the attention `K·Q` and, for one token, `V·softmax`)
//! and llamafile's tinyBLAS f32 tile (`V·softmax` for a batch of tokens), and the NeoX
//! RoPE rotation `rotate_pairs` with the multiply-adds GCC fuses.
//!
//! Several flavours exist, because ggml compiles these loops differently per ISA:
//!
//! - [`ElemFlavour::X64`] — ggml's x64 tier (baseline x86-64: SSE2, no FMA, no SSE3), the
//!   `ref` lane. `ggml_v_expf` in its `__SSE2__` form, four floats per vector, every
//!   multiply-add rounded twice (`MADD128` = mul then add); the softmax sums each vector
//!   as `(v0+v1)+(v2+v3)` (the shuffle / movehl path); `ggml_vec_dot_f32` is the scalar
//!   loop (no `GGML_SIMD` without SSE3): each product rounded to f32, summed in f64; no
//!   tinyBLAS for f32 (llamafile needs AVX or NEON); RoPE unfused.
//! - [`ElemFlavour::Avx2`] — the haswell tier (AVX2+FMA): `ggml_v_expf` on eight floats
//!   with fused multiply-adds; softmax vector sums `((v0+v4)+(v2+v6))+((v1+v5)+(v3+v7))`
//!   (extract-high plus low, movehl, movehdup); `ggml_vec_dot_f32` with four 8-float FMA
//!   accumulators over 32-float steps, reduced `(a0+a2)+(a1+a3)`, then low+high halves
//!   and two `hadd`s; tinyBLAS `<8, __m256>` from two tokens on (one 8-float FMA
//!   accumulator per output, the same 8-float horizontal sum as the softmax); RoPE with
//!   the `x0` products fused (`fma(x0, cos, -(x1*sin))`, `fma(x0, sin, x1*cos)`, read off
//!   the disassembly of the haswell library and confirmed against llama.cpp).
//! - [`ElemFlavour::Avx512`] — ggml's AVX-512 variants (zen4, skylakex, ...: `__AVX512F__`
//!   and `__AVX512DQ__`): every f32 loop sixteen floats wide. Its `ggml_v_expf` is its own
//!   formulation: `z = fma(x, log2e, 0x1.8p23)`, `n = z - 0x1.8p23`,
//!   `b = fnmadd(n, ln2_lo, fnmadd(n, ln2_hi, x))`, `u = b*b`,
//!   `j = fma(fma(fma(c5, b, c4), u, fma(c3, b, c2)), u, fma(c1, b, 1))`, the result
//!   `scalef(j, n)` (`j * 2^n` rounded once), and `0` (`n <= 0`) or `inf` where
//!   `|n| > 192`; SiLU `x / (1 + expf(0 - x))` with it. Vector sums are GCC's
//!   `_mm512_reduce_add_ps`: `t = hi256 + lo256`, `t = hi128 + lo128`,
//!   `(t0+t2) + (t1+t3)`. `ggml_vec_dot_f32`: four 16-float FMA accumulators over
//!   64-float steps, `(a0+a2)+(a1+a3)`, then that sum; tinyBLAS `<16, __m512>` from two
//!   tokens on (one accumulator per output, the same sum); RoPE as on haswell.
//! - [`ElemFlavour::Neon`] — GCC-built aarch64: `ggml_v_expf` on four floats with
//!   `vfmaq`/`vfmsq`; vector sums by `vaddvq_f32`, `(v0+v1)+(v2+v3)`; `ggml_vec_dot_f32`
//!   with four 4-float FMA accumulators over 16-float steps, reduced `(a0+a2)+(a1+a3)` then
//!   `vaddvq`; tinyBLAS `<4, float32x4_t>` from four tokens on; RoPE fused as on haswell
//!   (the scalar NeoX loop of the aarch64 library: `fnmsub`/`fmadd` on the `x0`
//!   products).
//!
//! - [`ElemFlavour::NeonNoLlamafile`] — the same NEON loops in a build without
//!   llamafile: ggml-cpu compiles llamafile's sgemm out when the compiler targets i8mm
//!   or SVE (`ggml-cpu.c` undefines `GGML_USE_LLAMAFILE` under `__ARM_FEATURE_MATMUL_INT8`
//!   or `__ARM_FEATURE_SVE`), so a batch's f32 `V·softmax` goes through
//!   `ggml_vec_dot_f32` as a single token's does (the i8mm lanes).
//!
//! - [`ElemFlavour::Sve128`], [`ElemFlavour::Sve256`] — ggml's SVE loops
//!   (`__ARM_FEATURE_SVE`: the armv8.6 variants of Neoverse V1/V2/V3) at a vector length
//!   of 128 or 256 bits, `w` = 4 or 8 floats. `ggml_v_expf` and `ggml_v_silu` are the
//!   NEON formulas lane for lane (`svmla`/`svmls` fused like `vfmaq`/`vfmsq`), but there
//!   is no scalar tail: the last, partial vector runs under a `whilelt` predicate. Vector
//!   sums are `svaddv` (FADDV), the architecture's recursive halving tree
//!   (`faddv(v) = faddv(low half) + faddv(high half)`), inactive lanes reading `+0.0`.
//!   `ggml_vec_dot_f32`: eight `w`-float fused accumulators over `8w`-float steps, then
//!   whole vectors into the first, then the predicated remainder into the first's low
//!   lanes; reduced `((a0+a1)+(a2+a3))+((a4+a5)+(a6+a7))` lane by lane, then FADDV.
//!   `ggml_vec_dot_f16`: `2w` halves per vector, four pairs of accumulators over
//!   `16w`-half steps (vector `k` of a step into pair `k % 4`), the even halves of each
//!   vector into the pair's low accumulator and the odd ones into its high one
//!   (`svmlalb`/`svmlalt` on SVE2, the `trn1`/`trn2` + convert + `svmla` fallback on
//!   SVE: the same fused, exact-product sums), remainders into pair 0 with zero
//!   padding; pairs reduced `(p0+p1)+(p2+p3)`, the result
//!   `faddv(low) + faddv(high)` in f32. No llamafile (ggml-cpu compiles it out under
//!   SVE). The F16 flash-attention accumulator uses FP16 arithmetic
//!   ([`ElemFlavour::f16_arith`]).
//!
//! Elements that do not fill a vector go through the scalar tail: `expf` from the C
//! library (Rust's `f32::exp` calls the same glibc function ggml does). The decoder pads
//! attention rows the way llama.cpp pads its KV cache (multiples of 256), so softmax and
//! the attention dot products never reach a tail; SwiGLU reaches one only when the
//! feed-forward width is not a multiple of the vector width.
//!
//! - [`ElemFlavour::GpuHip`], [`ElemFlavour::GpuHipWave64`], [`ElemFlavour::GpuCuda`] —
//!   the GPU lanes' flavours: ggml's
//!   GPU RMSNorm (times its weight) and SwiGLU as HIP clang and nvcc compile them, an
//!   f32 block-reduction tree for the sum of squares and the device's `expf` and
//!   divisions ([`crate::gpu::elem`], through [`ElemOps::rms_norm_mul`] and
//!   [`ElemOps::swiglu`]); their RoPE angles, `sinf`/`cosf` and rotation
//!   ([`ElemFlavour::rope_cache`], [`ElemFlavour::rope_rotation`]: CUDA's fast math,
//!   [`crate::gpu::elem::rope_cache_cuda`]; HIP's device library,
//!   [`crate::gpu::ocml::rope_cache_hip`]); without flash attention the softmax of an
//!   attention row ([`ElemOps::soft_max_row`], [`crate::gpu::elem::soft_max_row`]) and
//!   the attention products where ggml takes its MMVF kernel ([`ElemFlavour::mmvf`],
//!   [`crate::gpu::MmvfConfig`]; the two HIP flavours differ only there, by wavefront).
//!   Everything else (flash attention, the products of batches ggml hands to BLAS)
//!   borrows the x64 loops ([`ElemFlavour::loops`]) or the MMVF order: a stand-in, not
//!   reproduced.
//!
//! This module is the portable form of every flavour. Native SIMD versions live in the
//! architecture crates and must give the same bits (see their tests).

use crate::fp16;

/// The vector-loop code a flavour runs: one family per distinct body of loops in this
/// module (and in the architecture crates' native forms).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Loops {
    /// ggml's x64 tier (SSE2, no FMA): scalar loops, the specification.
    X64,
    /// Eight-wide AVX2 loops with fused multiply-adds.
    Avx2,
    /// Sixteen-wide AVX-512 loops, their own `expf`.
    Avx512,
    /// Four-wide NEON loops with fused multiply-adds (GCC's aarch64 build).
    Neon,
    /// ggml's SVE loops at a 128-bit vector length.
    Sve128,
    /// ggml's SVE loops at a 256-bit vector length.
    Sve256,
}

impl Loops {
    /// Floats per vector in `ggml_v_expf` / `ggml_v_silu`.
    pub fn width(self) -> usize {
        match self {
            Loops::Avx2 | Loops::Sve256 => 8,
            Loops::Avx512 => 16,
            Loops::X64 | Loops::Neon | Loops::Sve128 => 4,
        }
    }

    /// Whether these are ggml's SVE loops.
    pub fn is_sve(self) -> bool {
        matches!(self, Loops::Sve128 | Loops::Sve256)
    }

    /// Whether the loops fuse multiply-adds.
    pub fn fused(self) -> bool {
        self != Loops::X64
    }
}

/// Which tier's elementwise loops to reproduce: data (a name, the loop family it runs,
/// the GPU kernels it takes instead, its tinyBLAS use), so a tier that shares a loop
/// family is one constant. [`ElemFlavour::ALL`] lists every flavour; two flavours are
/// the same flavour when their names are equal.
#[derive(Clone, Copy)]
pub struct ElemFlavour {
    ident: &'static str,
    name: &'static str,
    loops: Loops,
    gpu_math: Option<crate::gpu::elem::GpuMath>,
    mmvf: Option<crate::gpu::MmvfConfig>,
    sgemm_f16: Option<F16Sgemm>,
    sgemm_min_rows: Option<usize>,
}

impl PartialEq for ElemFlavour {
    fn eq(&self, other: &ElemFlavour) -> bool {
        self.name == other.name
    }
}

impl Eq for ElemFlavour {}

impl core::hash::Hash for ElemFlavour {
    fn hash<H: core::hash::Hasher>(&self, state: &mut H) {
        self.name.hash(state);
    }
}

impl core::fmt::Debug for ElemFlavour {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.ident)
    }
}

/// A CPU flavour: its loops and its tinyBLAS use.
const fn cpu(
    ident: &'static str,
    name: &'static str,
    loops: Loops,
    sgemm_f16: Option<F16Sgemm>,
    sgemm_min_rows: Option<usize>,
) -> ElemFlavour {
    ElemFlavour { ident, name, loops, gpu_math: None, mmvf: None, sgemm_f16, sgemm_min_rows }
}

/// A GPU flavour: its own kernels (`math`, `mmvf`), the x64 loops for the rest.
const fn gpu(
    ident: &'static str,
    name: &'static str,
    math: crate::gpu::elem::GpuMath,
    mmvf: crate::gpu::MmvfConfig,
) -> ElemFlavour {
    ElemFlavour {
        ident,
        name,
        loops: Loops::X64,
        gpu_math: Some(math),
        mmvf: Some(mmvf),
        sgemm_f16: None,
        sgemm_min_rows: None,
    }
}

// The flavours keep the names they had as an enumeration (`ElemFlavour::Avx2`, ...).
#[allow(non_upper_case_globals)]
impl ElemFlavour {
    /// ggml's x64 tier (SSE2, no FMA): the specification.
    pub const X64: ElemFlavour = cpu("X64", "x64-sse2", Loops::X64, None, None);
    /// ggml's haswell tier (AVX2 + FMA); tinyBLAS from 2 rows, F16 matrices with F16
    /// activations.
    pub const Avx2: ElemFlavour =
        cpu("Avx2", "avx2-fma", Loops::Avx2, Some(F16Sgemm::F16Activations), Some(2));
    /// ggml's AVX-512 variants (zen4): sixteen-wide loops, its own `expf`; tinyBLAS as
    /// haswell.
    pub const Avx512: ElemFlavour =
        cpu("Avx512", "avx512-fma", Loops::Avx512, Some(F16Sgemm::F16Activations), Some(2));
    /// GCC-built ggml for aarch64 (NEON, fused multiply-adds); tinyBLAS from 4 rows, F16
    /// matrices with the F32 activations.
    pub const Neon: ElemFlavour =
        cpu("Neon", "neon-fma", Loops::Neon, Some(F16Sgemm::F32Activations), Some(4));
    /// The NEON loops in an aarch64 build without llamafile (i8mm or SVE targeted): no
    /// tinyBLAS.
    pub const NeonNoLlamafile: ElemFlavour =
        cpu("NeonNoLlamafile", "neon-fma-no-llamafile", Loops::Neon, None, None);
    /// ggml's SVE loops at a 128-bit vector length (Neoverse V2/V3).
    pub const Sve128: ElemFlavour = cpu("Sve128", "sve128-fma", Loops::Sve128, None, None);
    /// ggml's SVE loops at a 256-bit vector length (Neoverse V1).
    pub const Sve256: ElemFlavour = cpu("Sve256", "sve256-fma", Loops::Sve256, None, None);
    /// ggml's GPU kernels as HIP clang builds them for RDNA2 (gfx1030, 32-lane warps):
    /// its own RMSNorm, SwiGLU and softmax ([`crate::gpu::elem`]) and attention products
    /// ([`crate::gpu::MMVF_RDNA2`]); flash attention, RoPE and the rest borrow the x64
    /// loops.
    pub const GpuHip: ElemFlavour =
        gpu("GpuHip", "hip-gpu", crate::gpu::elem::GpuMath::Hip, crate::gpu::MMVF_RDNA2);
    /// The same for CDNA (gfx90a, 64-lane wavefronts), whose attention products reduce
    /// over the 64-lane wavefront ([`crate::gpu::MMVF_CDNA`]); everything else as
    /// [`ElemFlavour::GpuHip`].
    pub const GpuHipWave64: ElemFlavour = gpu(
        "GpuHipWave64",
        "hip-gpu-wave64",
        crate::gpu::elem::GpuMath::Hip,
        crate::gpu::MMVF_CDNA,
    );
    /// ggml's GPU kernels as nvcc (`-use_fast_math`) builds them for NVIDIA from Ampere
    /// on: its own RMSNorm, SwiGLU, softmax and RoPE ([`crate::gpu::elem`]) and attention
    /// products ([`crate::gpu::MMVF_AMPERE`]); flash attention and the rest borrow the
    /// x64 loops.
    pub const GpuCuda: ElemFlavour =
        gpu("GpuCuda", "cuda-gpu", crate::gpu::elem::GpuMath::Cuda, crate::gpu::MMVF_AMPERE);

    /// Every flavour.
    pub const ALL: [ElemFlavour; 10] = [
        ElemFlavour::X64,
        ElemFlavour::Avx2,
        ElemFlavour::Avx512,
        ElemFlavour::Neon,
        ElemFlavour::NeonNoLlamafile,
        ElemFlavour::Sve128,
        ElemFlavour::Sve256,
        ElemFlavour::GpuHip,
        ElemFlavour::GpuHipWave64,
        ElemFlavour::GpuCuda,
    ];

    /// Stable name.
    pub fn name(self) -> &'static str {
        self.name
    }

    /// The vector loops this flavour runs (the GPU flavours: the x64 ones, a stand-in,
    /// for everything but their own kernels; [`ElemFlavour::NeonNoLlamafile`] the NEON
    /// ones).
    pub fn loops(self) -> Loops {
        self.loops
    }

    /// The GPU math of a GPU flavour ([`crate::gpu::elem`]), `None` for a CPU tier.
    pub fn gpu_math(self) -> Option<crate::gpu::elem::GpuMath> {
        self.gpu_math
    }

    /// The GPU's matrix-vector kernel for F32/F16 matrices (the attention products
    /// without flash attention, [`crate::gpu::MmvfConfig`]), `None` for a CPU tier.
    pub fn mmvf(self) -> Option<crate::gpu::MmvfConfig> {
        self.mmvf
    }

    /// Floats per vector in `ggml_v_expf` / `ggml_v_silu`.
    pub fn width(self) -> usize {
        self.loops.width()
    }

    /// Whether these are ggml's SVE loops.
    pub fn is_sve(self) -> bool {
        self.loops.is_sve()
    }

    /// Whether the tier is an aarch64 build (NEON or SVE).
    pub fn is_aarch64(self) -> bool {
        self.loops == Loops::Neon || self.is_sve()
    }

    /// Whether `ggml_vec_scale_f16` and `ggml_vec_mad_f16` (the F16 flash-attention
    /// accumulator) compute in FP16 arithmetic: `y = f16(y * f16(v))` and
    /// `y = f16(fma(x, f16(v), y))`, one rounding to F16 each, with the scalar `v` itself
    /// rounded to F16 first. ggml's SVE paths of both do (`svfloat16_t`); every other
    /// tier here widens to f32 and rounds back.
    pub fn f16_arith(self) -> bool {
        self.is_sve()
    }

    /// Whether the tier fuses multiply-adds in these loops.
    pub fn fused(self) -> bool {
        self.loops.fused()
    }

    /// The RoPE cache (`[cos, sin]` per pair) of one position: [`rope_cache`] on the
    /// CPU tiers; the GPUs compute every angle afresh with their own `powf`, reduction
    /// and `sinf`/`cosf` (CUDA's fast math, [`crate::gpu::elem::rope_cache_cuda`];
    /// HIP's device library, [`crate::gpu::ocml::rope_cache_hip`]).
    pub fn rope_cache(self, pos: i32, n_dims: usize, freq_base: f32) -> Vec<[f32; 2]> {
        match self.gpu_math {
            Some(crate::gpu::elem::GpuMath::Cuda) => {
                crate::gpu::elem::rope_cache_cuda(pos, n_dims, freq_base)
            }
            Some(crate::gpu::elem::GpuMath::Hip) => {
                crate::gpu::ocml::rope_cache_hip(pos, n_dims, freq_base)
            }
            None => rope_cache(pos, n_dims, freq_base),
        }
    }

    /// How the tier forms the normal-mode RoPE rotation ([`rope_norm`], llama), where
    /// GCC vectorizes ggml's `rotate_pairs` with `n_offset = 1` (four pairs a step: a
    /// head's pair count a multiple of four, checked by the decoder). The haswell and
    /// zen4 builds: `vfmaddsub` of the `x0` products against the rounded `x1` products
    /// ([`RopeRotation::FuseX0`], as the NeoX loop); the armv8.6 (SVE) builds the same;
    /// the dotprod and i8mm builds (`ld2`, `fmul` of the `cos` products, `fmls`/`fmla`
    /// of the `sin` products: [`RopeRotation::FuseSin`]); x64 nothing fused; the GPU
    /// flavours as [`ElemFlavour::rope_rotation`] (the same kernel expression, not
    /// checked on a GPU). The haswell and dotprod forms were read from the builds' code;
    /// each CPU choice is the one the llama oracle trials (`llama_cpp/arch/llama/*`) find
    /// bitwise on that build, the other forms fail them.
    pub fn rope_norm_rotation(self) -> RopeRotation {
        match self.gpu_math {
            Some(_) => self.rope_rotation(),
            None if self.loops == Loops::Neon => RopeRotation::FuseSin,
            None if self.fused() => RopeRotation::FuseX0,
            None => RopeRotation::Unfused,
        }
    }

    /// How the tier forms the RoPE rotation ([`rope_neox`]): the `x0` products fused on
    /// the FMA tiers ([`ElemFlavour::fused`]) and CUDA (read from its SASS), nothing
    /// fused on x64, the `cos` products fused on HIP (read by executing its code
    /// objects).
    pub fn rope_rotation(self) -> RopeRotation {
        match self.gpu_math {
            Some(crate::gpu::elem::GpuMath::Cuda) => RopeRotation::FuseX0,
            Some(crate::gpu::elem::GpuMath::Hip) => RopeRotation::FuseCos,
            None if self.fused() => RopeRotation::FuseX0,
            None => RopeRotation::Unfused,
        }
    }

    /// How llamafile's tinyBLAS multiplies an F16 matrix (the F16 K/V cache without flash
    /// attention) by a batch of activations, or `None` where it never does (then
    /// `ggml_vec_dot_f16` on activations rounded to F16). ggml-cpu offers tinyBLAS the
    /// F32 activations first, when they are contiguous, and then the activations
    /// converted to the F16 `vec_dot_type`; haswell's tinyBLAS takes only F16 ones, the
    /// NEON build without FP16 vector arithmetic only F32 ones. Like every tinyBLAS
    /// call, only for at least two activation rows.
    pub fn sgemm_f16(self) -> Option<F16Sgemm> {
        self.sgemm_f16
    }

    /// Floats per step of `ggml_vec_dot_f32` / `ggml_vec_dot_f16` (four vectors), or 1
    /// where the dot product is the scalar loop (the x64 tier).
    pub fn dot_step(self) -> usize {
        match self.loops {
            Loops::X64 => 1,
            l if l.is_sve() => 8 * l.width(),
            l => 4 * l.width(),
        }
    }

    /// Fewest activation rows (tokens) for which the tier multiplies f32 matrices with
    /// llamafile's tinyBLAS instead of `ggml_vec_dot_f32`; `None` when it never does.
    pub fn sgemm_min_rows(self) -> Option<usize> {
        self.sgemm_min_rows
    }
}

/// Which activations llamafile's tinyBLAS accepts next to an F16 matrix
/// ([`ElemFlavour::sgemm_f16`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum F16Sgemm {
    /// Activations converted to F16 first (`tinyBLAS<.., ggml_fp16_t, ggml_fp16_t>`).
    F16Activations,
    /// The F32 activations as they are, where contiguous (`tinyBLAS<.., ggml_fp16_t,
    /// float>`); non-contiguous ones (the permuted queries of a batch) get no tinyBLAS.
    F32Activations,
}

/// The decoder's elementwise kernels of one flavour. Native implementations override
/// the vector loops; [`PortableElem`] is the specification of each flavour.
pub trait ElemOps: Sync + Send {
    /// The flavour reproduced.
    fn flavour(&self) -> ElemFlavour;

    /// `ggml_vec_soft_max_f32`: `y[i] = exp(x[i] - max)`, returning the f64 sum.
    fn soft_max(&self, y: &mut [f32], x: &[f32], max: f32) -> f64;

    /// `ggml_vec_swiglu_f32`: `y[i] = silu(x[i]) * g[i]`.
    fn swiglu(&self, y: &mut [f32], x: &[f32], g: &[f32]);

    /// `ggml_vec_dot_f32` of two equally long rows.
    fn dot_f32(&self, x: &[f32], y: &[f32]) -> f32;

    /// RMSNorm of one row times a weight row (`ggml_rms_norm` then `ggml_mul`, fused or
    /// not): [`rms_norm_mul`] on every CPU tier, the GPU's own order on the GPU
    /// flavours ([`crate::gpu::elem::rms_norm_mul`]).
    fn rms_norm_mul(&self, y: &mut [f32], x: &[f32], w: &[f32], eps: f32) {
        match self.flavour().gpu_math() {
            Some(math) => crate::gpu::elem::rms_norm_mul(math, y, x, w, eps),
            None => rms_norm_mul(y, x, w, eps),
        }
    }

    /// The softmax of one attention row without flash attention (ggml's `soft_max_ext`;
    /// `w` holds the scores already scaled and masked: `RN(kq * scale)`, or `-inf` at
    /// masked cells). Every CPU tier (`ggml_compute_forward_soft_max_f32`): the row
    /// maximum, [`ElemOps::soft_max`] (the f64 sum), then `p *= (f32)(1/sum)` in f64
    /// rounded once; the GPU flavours: the GPU kernel's own order
    /// ([`crate::gpu::elem::soft_max_row`]).
    fn soft_max_row(&self, p: &mut [f32], w: &[f32]) {
        if let Some(math) = self.flavour().gpu_math() {
            return crate::gpu::elem::soft_max_row(math, p, w);
        }
        let max = w.iter().fold(f32::NEG_INFINITY, |m, &v| if m > v { m } else { v });
        let sum = self.soft_max(p, w, max);
        let inv = (1.0 / sum) as f32;
        for v in p.iter_mut() {
            *v *= inv;
        }
    }

    /// One output of llamafile's tinyBLAS f32 tile: the dot product of two rows whose
    /// length is a multiple of the vector width. Only called where
    /// [`ElemFlavour::sgemm_min_rows`] says the tier uses it.
    fn sgemm_dot(&self, a: &[f32], b: &[f32]) -> f32;

    /// `ggml_vec_dot_f16` of two rows of F16 values (given widened to f32, which is
    /// exact): the vector part is `ggml_vec_dot_f32`'s (the same accumulators, fused
    /// multiply-adds and reduction tree on the widened halves, `GGML_F16_STEP` =
    /// `GGML_F32_STEP` on these tiers), its f32 result widened to f64; the leftovers
    /// (`n % step`) are added as f64 sums of f32 products; the total rounded to f32.
    fn dot_f16(&self, x: &[f32], y: &[f32]) -> f32 {
        assert_eq!(x.len(), y.len(), "dot_f16: lengths differ");
        let step = self.flavour().dot_step();
        let np = x.len() - x.len() % step;
        let mut s = if np > 0 { self.dot_f32(&x[..np], &y[..np]) as f64 } else { 0.0 };
        for (a, b) in x[np..].iter().zip(&y[np..]) {
            s += (a * b) as f64;
        }
        s as f32
    }
}

/// The portable form of one flavour.
#[derive(Clone, Copy, Debug)]
pub struct PortableElem(pub ElemFlavour);

/// The portable kernels of every flavour of [`ElemFlavour::ALL`], in that order.
pub static PORTABLE: [PortableElem; ElemFlavour::ALL.len()] = {
    let mut out = [PortableElem(ElemFlavour::X64); ElemFlavour::ALL.len()];
    let mut i = 0;
    while i < out.len() {
        out[i] = PortableElem(ElemFlavour::ALL[i]);
        i += 1;
    }
    out
};

/// The portable kernels of `flavour` (a flavour outside [`ElemFlavour::ALL`] gets its own,
/// made once and kept for the process).
pub fn portable(flavour: ElemFlavour) -> &'static PortableElem {
    if let Some(p) = PORTABLE.iter().find(|p| p.0 == flavour) {
        return p;
    }
    static MORE: std::sync::Mutex<Vec<&'static PortableElem>> = std::sync::Mutex::new(Vec::new());
    let mut more = MORE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = more.iter().find(|p| p.0 == flavour) {
        return p;
    }
    let p: &'static PortableElem = Box::leak(Box::new(PortableElem(flavour)));
    more.push(p);
    p
}

// The constants of ggml_v_expf (hex floats in the C source), as bit patterns; a unit
// test recomputes each from its hex-float spelling.
/// `0x1.8p23f`: adding it rounds to an integer in the low mantissa bits.
pub const EXP_SHIFT: f32 = 12582912.0;
/// `0x1.715476p+0f` (log2 e).
pub const EXP_LOG2E: f32 = f32::from_bits(0x3FB8_AA3B);
/// `0x1.62e4p-1f` (ln 2, high part).
pub const EXP_LN2_HI: f32 = f32::from_bits(0x3F31_7200);
/// `0x1.7f7d1cp-20f` (ln 2, low part).
pub const EXP_LN2_LO: f32 = f32::from_bits(0x35BF_BE8E);
/// `0x1.ffffecp-1f`.
pub const EXP_C1: f32 = f32::from_bits(0x3F7F_FFF6);
/// `0x1.fffdb6p-2f`.
pub const EXP_C2: f32 = f32::from_bits(0x3EFF_FEDB);
/// `0x1.555e66p-3f`.
pub const EXP_C3: f32 = f32::from_bits(0x3E2A_AF33);
/// `0x1.573e2ep-5f`.
pub const EXP_C4: f32 = f32::from_bits(0x3D2B_9F17);
/// `0x1.0e4020p-7f`.
pub const EXP_C5: f32 = f32::from_bits(0x3C07_2010);

#[inline(always)]
fn madd(a: f32, b: f32, c: f32, fused: bool) -> f32 {
    if fused {
        a.mul_add(b, c)
    } else {
        a * b + c
    }
}

/// `c - a*b`, fused (`fnmadd` / `vfmsq`) or not.
#[inline(always)]
fn nmadd(a: f32, b: f32, c: f32, fused: bool) -> f32 {
    if fused {
        (-a).mul_add(b, c)
    } else {
        c - a * b
    }
}

/// One lane of ggml's SIMD `ggml_v_expf` ("adapted from arm limited optimized
/// routine"), in the operation order of the C source. `fused` selects the FMA forms
/// (AVX2, NEON) or the SSE2 mul-then-add form. Lanes of one vector never interact, so
/// this per-lane form gives the vector's bits (the vector-wide early return for "no
/// lane out of range" computes `fma(j, k, k)`, which is also what the blended path
/// keeps for in-range lanes).
#[inline(always)]
pub fn v_expf(x: f32, fused: bool) -> f32 {
    let z = madd(x, EXP_LOG2E, EXP_SHIFT, fused);
    let n = z - EXP_SHIFT;
    let b = nmadd(n, EXP_LN2_LO, nmadd(n, EXP_LN2_HI, x, fused), fused);
    let e = z.to_bits().wrapping_shl(23);
    let k = f32::from_bits(e.wrapping_add(1.0f32.to_bits()));
    let u = b * b;
    let j = madd(
        madd(madd(EXP_C5, b, EXP_C4, fused), u, madd(EXP_C3, b, EXP_C2, fused), fused),
        u,
        EXP_C1 * b,
        fused,
    );
    // |n| > 126 (an ordered compare: false for NaN, which takes the early return).
    #[allow(clippy::neg_cmp_op_on_partial_ord)]
    if !(n.abs() > 126.0) {
        return madd(j, k, k, fused);
    }
    let g: u32 = if n <= 0.0 { 0x8200_0000 } else { 0 };
    let s1 = f32::from_bits(g.wrapping_add(0x7f00_0000));
    let s2 = f32::from_bits(e.wrapping_sub(g));
    if n.abs() > 192.0 {
        s1 * s1
    } else {
        madd(s2, j, s2, fused) * s1
    }
}

/// One lane of `ggml_v_silu`: `x / (1 + expf(0 - x))` with the vector `expf`.
#[inline]
pub fn v_silu(x: f32, fused: bool) -> f32 {
    let e = v_expf(0.0 - x, fused);
    x / (1.0 + e)
}

/// One lane of the AVX-512 `ggml_v_expf(__m512)`, in the C source's operation order (see
/// the module doc). `scalef(j, n)` multiplies by `2^n` with one rounding: `n` is an
/// integer of at most 192 in magnitude there, so the f64 product is exact and the
/// conversion to f32 is that one rounding (subnormal results included).
#[inline(always)]
pub fn v_expf_avx512(x: f32) -> f32 {
    let z = x.mul_add(EXP_LOG2E, EXP_SHIFT);
    let n = z - EXP_SHIFT;
    let b = (-n).mul_add(EXP_LN2_LO, (-n).mul_add(EXP_LN2_HI, x));
    let u = b * b;
    let j = EXP_C5
        .mul_add(b, EXP_C4)
        .mul_add(u, EXP_C3.mul_add(b, EXP_C2))
        .mul_add(u, EXP_C1.mul_add(b, 1.0));
    // |n| > 192, an ordered compare (false for NaN).
    if n.abs() > 192.0 {
        return if n <= 0.0 { 0.0 } else { f32::INFINITY };
    }
    if j.is_nan() || n.is_nan() {
        return f32::NAN;
    }
    (j as f64 * 2f64.powi(n as i32)) as f32
}

/// One lane of the AVX-512 `ggml_v_silu`.
#[inline]
pub fn v_silu_avx512(x: f32) -> f32 {
    let e = v_expf_avx512(0.0 - x);
    x / (1.0 + e)
}

/// The vector `expf` of `flavour`, one lane.
#[inline(always)]
fn vexp(flavour: ElemFlavour, x: f32) -> f32 {
    match flavour.loops() {
        Loops::Avx512 => v_expf_avx512(x),
        l => v_expf(x, l.fused()),
    }
}

/// The vector SiLU of `flavour`, one lane.
#[inline(always)]
fn vsilu(flavour: ElemFlavour, x: f32) -> f32 {
    match flavour.loops() {
        Loops::Avx512 => v_silu_avx512(x),
        l => v_silu(x, l.fused()),
    }
}

/// GCC's `_mm512_reduce_add_ps` of sixteen floats.
#[inline]
pub fn hsum16(v: &[f32]) -> f32 {
    let t: [f32; 8] = core::array::from_fn(|i| v[i + 8] + v[i]);
    let t: [f32; 4] = core::array::from_fn(|i| t[i + 4] + t[i]);
    (t[0] + t[2]) + (t[1] + t[3])
}

/// SVE's FADDV of the active lanes `v` (a power-of-two count; pad with `+0.0` for
/// inactive lanes): the architecture's recursive pairwise reduction, the low half's sum
/// plus the high half's.
#[inline]
pub fn faddv(v: &[f32]) -> f32 {
    if v.len() == 1 {
        v[0]
    } else {
        let h = v.len() / 2;
        faddv(&v[..h]) + faddv(&v[h..])
    }
}

/// The scalar tail's `ggml_silu_f32`: `x / (1 + expf(-x))` with the C library's `expf`.
#[inline]
pub fn silu_scalar(x: f32) -> f32 {
    x / (1.0 + (-x).exp())
}

/// Horizontal sum of one vector in the loops' order.
#[inline(always)]
fn hsum(loops: Loops, v: &[f32]) -> f32 {
    match loops {
        // SSE2 shuffle/movehl (x64) and vaddvq (NEON): (v0+v1)+(v2+v3).
        Loops::X64 | Loops::Neon => (v[0] + v[1]) + (v[2] + v[3]),
        // _mm256: high + low, then movehl, then movehdup.
        Loops::Avx2 => {
            let w = [v[4] + v[0], v[5] + v[1], v[6] + v[2], v[7] + v[3]];
            (w[0] + w[2]) + (w[1] + w[3])
        }
        Loops::Avx512 => hsum16(v),
        Loops::Sve128 | Loops::Sve256 => faddv(v),
    }
}

/// The bodies of the portable kernels (the specification); `tiercheck-accel` installs
/// them compiled with FMA where the CPU has it ([`slots`]: `mul_add` is then one
/// instruction instead of a library call: the same correctly rounded result).
impl PortableElem {
    /// The body of the [`ElemOps`] method of the same name without `_in`.
    #[inline(always)]
    pub fn soft_max_in(&self, y: &mut [f32], x: &[f32], max: f32) -> f64 {
        let flavour = self.0;
        let w = flavour.width();
        assert_eq!(y.len(), x.len(), "soft_max: lengths differ");
        let n = x.len();
        let mut sum = 0.0f64;
        let mut i = 0;
        let mut v = [0.0f32; 16];
        if flavour.is_sve() {
            // Predicated vectors to the end: the last one's inactive lanes read +0.0.
            while i < n {
                let active = w.min(n - i);
                for l in 0..w {
                    v[l] = if l < active { v_expf(x[i + l] - max, true) } else { 0.0 };
                }
                y[i..i + active].copy_from_slice(&v[..active]);
                sum += faddv(&v[..w]) as f64;
                i += w;
            }
            return sum;
        }
        while i + w <= n {
            for l in 0..w {
                v[l] = vexp(flavour, x[i + l] - max);
                y[i + l] = v[l];
            }
            sum += hsum(flavour.loops(), &v[..w]) as f64;
            i += w;
        }
        while i < n {
            let val = (x[i] - max).exp();
            sum += val as f64;
            y[i] = val;
            i += 1;
        }
        sum
    }

    /// The body of the [`ElemOps`] method of the same name without `_in`.
    #[inline(always)]
    pub fn swiglu_in(&self, y: &mut [f32], x: &[f32], g: &[f32]) {
        let w = self.0.width();
        assert!(y.len() == x.len() && x.len() == g.len(), "swiglu: lengths differ");
        let n = x.len();
        // SVE: every element in (predicated) vectors, no scalar tail.
        let vec_end = if self.0.is_sve() { n } else { n - n % w };
        for i in 0..vec_end {
            y[i] = vsilu(self.0, x[i]) * g[i];
        }
        for i in vec_end..n {
            y[i] = silu_scalar(x[i]) * g[i];
        }
    }

    /// The body of the [`ElemOps`] method of the same name without `_in`.
    #[inline(always)]
    pub fn dot_f32_in(&self, x: &[f32], y: &[f32]) -> f32 {
        assert_eq!(x.len(), y.len(), "dot_f32: lengths differ");
        match self.0.loops() {
            Loops::X64 => {
                // No GGML_SIMD: each product rounded to f32, summed in f64.
                let mut s = 0.0f64;
                for (a, b) in x.iter().zip(y) {
                    s += (a * b) as f64;
                }
                s as f32
            }
            Loops::Avx2 => dot_f32_simd::<8>(x, y, |acc| {
                // acc[0]+=acc[2], acc[1]+=acc[3], acc[0]+=acc[1]; low + high halves;
                // hadd, hadd.
                let a: [f32; 8] =
                    core::array::from_fn(|l| (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]));
                let t = [a[0] + a[4], a[1] + a[5], a[2] + a[6], a[3] + a[7]];
                (t[0] + t[1]) + (t[2] + t[3])
            }),
            Loops::Avx512 => dot_f32_simd::<16>(x, y, |acc| {
                // GGML_F32x16_REDUCE: acc0 += acc2, acc1 += acc3, acc0 += acc1, then
                // _mm512_reduce_add_ps.
                let a: [f32; 16] =
                    core::array::from_fn(|l| (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]));
                hsum16(&a)
            }),
            Loops::Neon => dot_f32_simd::<4>(x, y, |acc| {
                let a: [f32; 4] =
                    core::array::from_fn(|l| (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]));
                (a[0] + a[1]) + (a[2] + a[3])
            }),
            Loops::Sve128 => dot_f32_sve::<4>(x, y),
            Loops::Sve256 => dot_f32_sve::<8>(x, y),
        }
    }

    /// The body of the [`ElemOps`] method of the same name without `_in`.
    #[inline(always)]
    pub fn dot_f16_in(&self, x: &[f32], y: &[f32]) -> f32 {
        assert_eq!(x.len(), y.len(), "dot_f16: lengths differ");
        match self.0.loops() {
            Loops::Sve128 => dot_f16_sve::<4>(x, y),
            Loops::Sve256 => dot_f16_sve::<8>(x, y),
            _ => {
                let step = self.0.dot_step();
                let np = x.len() - x.len() % step;
                let mut s = if np > 0 { self.dot_f32_in(&x[..np], &y[..np]) as f64 } else { 0.0 };
                for (a, b) in x[np..].iter().zip(&y[np..]) {
                    s += (a * b) as f64;
                }
                s as f32
            }
        }
    }

    /// The body of the [`ElemOps`] method of the same name without `_in`.
    #[inline(always)]
    pub fn sgemm_dot_in(&self, a: &[f32], b: &[f32]) -> f32 {
        assert_eq!(a.len(), b.len(), "sgemm_dot: lengths differ");
        let w = self.0.width();
        assert!(a.len().is_multiple_of(w), "sgemm_dot: length not a multiple of {w}");
        let mut acc = [0.0f32; 16];
        for (ca, cb) in a.chunks_exact(w).zip(b.chunks_exact(w)) {
            for l in 0..w {
                acc[l] = ca[l].mul_add(cb[l], acc[l]);
            }
        }
        match self.0.loops() {
            // X64 and builds without llamafile have no tinyBLAS; the 4-float form is
            // given for completeness and never reached through the decoder.
            Loops::Avx2 => hsum(Loops::Avx2, &acc[..8]),
            Loops::Avx512 => hsum16(&acc),
            // SVE builds have no llamafile either; a w-wide accumulator and FADDV.
            Loops::Sve128 | Loops::Sve256 => faddv(&acc[..w]),
            Loops::X64 | Loops::Neon => hsum(Loops::Neon, &acc[..4]),
        }
    }
}

impl ElemOps for PortableElem {
    fn flavour(&self) -> ElemFlavour {
        self.0
    }

    fn soft_max(&self, y: &mut [f32], x: &[f32], max: f32) -> f64 {
        crate::accelerated!(slots::SOFT_MAX, (self, y, x, max));
        self.soft_max_in(y, x, max)
    }

    fn swiglu(&self, y: &mut [f32], x: &[f32], g: &[f32]) {
        if let Some(math) = self.0.gpu_math() {
            return crate::gpu::elem::swiglu(math, y, x, g);
        }
        crate::accelerated!(slots::SWIGLU, (self, y, x, g));
        self.swiglu_in(y, x, g)
    }

    fn dot_f32(&self, x: &[f32], y: &[f32]) -> f32 {
        crate::accelerated!(slots::DOT_F32, (self, x, y));
        self.dot_f32_in(x, y)
    }

    fn dot_f16(&self, x: &[f32], y: &[f32]) -> f32 {
        crate::accelerated!(slots::DOT_F16, (self, x, y));
        self.dot_f16_in(x, y)
    }

    fn sgemm_dot(&self, a: &[f32], b: &[f32]) -> f32 {
        crate::accelerated!(slots::SGEMM_DOT, (self, a, b));
        self.sgemm_dot_in(a, b)
    }
}

/// `ggml_vec_dot_f32` with `GGML_F32_ARR = 4` accumulators of `W` floats over steps of
/// `4*W` floats (`sum[j] = fma(x, y, sum[j])`), `reduce` for the accumulators, then the
/// leftovers added one fused product at a time in f32 (GCC contracts
/// `sumf += x[i]*y[i]` on these tiers).
#[inline(always)]
fn dot_f32_simd<const W: usize>(
    x: &[f32],
    y: &[f32],
    reduce: impl Fn(&[[f32; W]; 4]) -> f32,
) -> f32 {
    let step = 4 * W;
    let n = x.len();
    let np = n - n % step;
    let mut acc = [[0.0f32; W]; 4];
    let mut i = 0;
    while i < np {
        for j in 0..4 {
            for l in 0..W {
                let o = i + j * W + l;
                acc[j][l] = x[o].mul_add(y[o], acc[j][l]);
            }
        }
        i += step;
    }
    let mut s = reduce(&acc);
    for o in np..n {
        s = x[o].mul_add(y[o], s);
    }
    s
}

/// ggml's SVE `ggml_vec_dot_f32` with `W` floats per vector (module doc).
#[inline(always)]
fn dot_f32_sve<const W: usize>(x: &[f32], y: &[f32]) -> f32 {
    let n = x.len();
    let step = 8 * W;
    let np = n - n % step;
    let np2 = n - n % W;
    let mut acc = [[0.0f32; W]; 8];
    let mut i = 0;
    while i < np {
        for (j, a) in acc.iter_mut().enumerate() {
            for l in 0..W {
                let o = i + j * W + l;
                a[l] = x[o].mul_add(y[o], a[l]);
            }
        }
        i += step;
    }
    while i < np2 {
        for l in 0..W {
            acc[0][l] = x[i + l].mul_add(y[i + l], acc[0][l]);
        }
        i += W;
    }
    // The predicated remainder: inactive lanes keep their value (`svmla_f32_m`).
    for l in 0..n - np2 {
        acc[0][l] = x[np2 + l].mul_add(y[np2 + l], acc[0][l]);
    }
    let add = |a: &[f32; W], b: &[f32; W]| -> [f32; W] { core::array::from_fn(|l| a[l] + b[l]) };
    let s1 = add(&acc[0], &acc[1]);
    let s3 = add(&acc[2], &acc[3]);
    let s5 = add(&acc[4], &acc[5]);
    let s7 = add(&acc[6], &acc[7]);
    let s1 = add(&s1, &s3);
    let s5 = add(&s5, &s7);
    faddv(&add(&s1, &s5))
}

/// ggml's SVE `ggml_vec_dot_f16` with `W` f32 lanes per vector (`2W` halves), on F16
/// values given widened to f32 (module doc).
fn dot_f16_sve<const W: usize>(x: &[f32], y: &[f32]) -> f32 {
    let n = x.len();
    let epr = 2 * W;
    let step = 8 * epr;
    let np = n - n % step;
    let np2 = n - n % epr;
    let mut lo = [[0.0f32; W]; 4];
    let mut hi = [[0.0f32; W]; 4];
    // One widening fused multiply-add of the vector at `o` (zero past `end`) into pair `p`.
    let mut fma_widened = |p: usize, o: usize, end: usize| {
        let at = |v: &[f32], i: usize| if i < end { v[i] } else { 0.0 };
        for l in 0..W {
            let (e, od) = (o + 2 * l, o + 2 * l + 1);
            lo[p][l] = at(x, e).mul_add(at(y, e), lo[p][l]);
            hi[p][l] = at(x, od).mul_add(at(y, od), hi[p][l]);
        }
    };
    let mut i = 0;
    while i < np {
        for k in 0..8 {
            fma_widened(k % 4, i + k * epr, n);
        }
        i += step;
    }
    while i < np2 {
        fma_widened(0, i, n);
        i += epr;
    }
    if np2 < n {
        fma_widened(0, np2, n);
    }
    let add = |a: &[f32; W], b: &[f32; W]| -> [f32; W] { core::array::from_fn(|l| a[l] + b[l]) };
    let lo1 = add(&add(&lo[0], &lo[1]), &add(&lo[2], &lo[3]));
    let hi1 = add(&add(&hi[0], &hi[1]), &add(&hi[2], &hi[3]));
    faddv(&lo1) + faddv(&hi1)
}

/// RMSNorm of one row as ggml's `rms_norm_f32` computes it, times `w` (the fused or
/// separate `ggml_mul`, same bits): `sum += (f64)(x*x)` with the product in f32,
/// `mean = (f32)(sum/n)`, `scale = 1/sqrtf(mean + eps)`, `y = x*scale*w`.
pub fn rms_norm_mul(y: &mut [f32], x: &[f32], w: &[f32], eps: f32) {
    assert!(y.len() == x.len() && x.len() == w.len(), "rms_norm: lengths differ");
    let mut sum = 0.0f64;
    for &v in x {
        sum += (v * v) as f64;
    }
    let mean = (sum / x.len() as f64) as f32;
    let scale = 1.0f32 / (mean + eps).sqrt();
    for i in 0..x.len() {
        y[i] = x[i] * scale * w[i];
    }
}

/// ggml's RoPE cache for one position (`ggml_rope_cache_init` with no frequency
/// factors, no YaRN, `mscale = 1`): `theta` starts at the position and is multiplied by
/// `theta_scale = powf(base, -2/n_dims)` after each pair; `cos`/`sin` come from the C
/// library (`sincosf`, which equals `cosf`/`sinf`). Returns `[cos, sin]` pairs.
pub fn rope_cache(pos: i32, n_dims: usize, freq_base: f32) -> Vec<[f32; 2]> {
    let theta_scale = freq_base.powf(-2.0f32 / n_dims as f32);
    let mut theta = pos as f32;
    let mut cache = Vec::with_capacity(n_dims / 2);
    for _ in 0..n_dims / 2 {
        // rope_yarn with ext_factor 0 and freq_scale 1: theta_interp = 1*theta.
        let t = 1.0f32 * theta;
        cache.push([t.cos() * 1.0, t.sin() * 1.0]);
        theta *= theta_scale;
    }
    cache
}

/// [`rope_cache`] with Llama 3.1's frequency factors (`rope_freqs.weight`, one per
/// pair): `ggml_rope_cache_init` divides each pair's `theta` by its factor (one f32
/// division) before `cos`/`sin`; the running `theta` is not divided.
pub fn rope_cache_ff(pos: i32, n_dims: usize, freq_base: f32, ff: &[f32]) -> Vec<[f32; 2]> {
    assert_eq!(ff.len(), n_dims / 2, "rope: one frequency factor per pair");
    let theta_scale = freq_base.powf(-2.0f32 / n_dims as f32);
    let mut theta = pos as f32;
    let mut cache = Vec::with_capacity(n_dims / 2);
    for &f in ff {
        let t = 1.0f32 * (theta / f);
        cache.push([t.cos() * 1.0, t.sin() * 1.0]);
        theta *= theta_scale;
    }
    cache
}

/// `(x0*cos - x1*sin, x0*sin + x1*cos)` with `rotation`'s contraction.
#[inline]
fn rotate_pair(x0: f32, x1: f32, c: f32, s: f32, rotation: RopeRotation) -> (f32, f32) {
    match rotation {
        RopeRotation::Unfused => (x0 * c - x1 * s, x0 * s + x1 * c),
        RopeRotation::FuseX0 => (x0.mul_add(c, -(x1 * s)), x0.mul_add(s, x1 * c)),
        RopeRotation::FuseCos => crate::gpu::ocml::rotate_hip(x0, x1, c, s),
        RopeRotation::FuseX1 => ((-x1).mul_add(s, x0 * c), x1.mul_add(c, x0 * s)),
        RopeRotation::FuseSin => ((-x1).mul_add(s, x0 * c), x0.mul_add(s, x1 * c)),
    }
}

/// Normal-mode rotation of one head (llama's RoPE: `rotate_pairs` with `n_offset = 1`,
/// the pairs `(x[2i], x[2i + 1])` adjacent), in place, with `rotation`'s contraction.
pub fn rope_norm(x: &mut [f32], cache: &[[f32; 2]], rotation: RopeRotation) {
    assert_eq!(cache.len() * 2, x.len(), "rope: cache/head size mismatch");
    for (pair, &[c, s]) in x.chunks_exact_mut(2).zip(cache) {
        let (x0, x1) = (pair[0], pair[1]);
        let (y0, y1) = rotate_pair(x0, x1, c, s, rotation);
        pair[0] = y0;
        pair[1] = y1;
    }
}

/// Which products of RoPE's rotation `y0 = x0*cos - x1*sin`, `y1 = x0*sin + x1*cos`
/// a tier fuses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RopeRotation {
    /// Four rounded products, then the sums (x64).
    Unfused,
    /// The `x0` products fused, the `x1` products rounded first:
    /// `fma(x0, cos, -RN(x1 sin))`, `fma(x0, sin, RN(x1 cos))` (GCC on the FMA tiers,
    /// nvcc).
    FuseX0,
    /// The `cos` products fused, the `sin` products rounded first:
    /// `fma(x0, cos, -RN(x1 sin))`, `fma(x1, cos, RN(x0 sin))` (HIP clang,
    /// [`crate::gpu::ocml::rotate_hip`]).
    FuseCos,
    /// The `x1` products fused, the `x0` products rounded first:
    /// `fma(-x1, sin, RN(x0 cos))`, `fma(x1, cos, RN(x0 sin))`.
    FuseX1,
    /// The `sin` products fused, the `cos` products rounded first:
    /// `fma(-x1, sin, RN(x0 cos))`, `fma(x0, sin, RN(x1 cos))`.
    FuseSin,
}

/// NeoX rotation of one head (`rotate_pairs` with `n_offset = n_dims/2`), in place.
/// [`RopeRotation::FuseX0`] reproduces GCC's contraction on FMA targets, read off the
/// disassembly of both the haswell and the aarch64 libraries
/// (`vfmsub231ss`/`vfmadd132ss`, `fnmsub`/`fmadd`) and confirmed bitwise against
/// llama.cpp's haswell tier.
pub fn rope_neox(x: &mut [f32], cache: &[[f32; 2]], rotation: RopeRotation) {
    let half = x.len() / 2;
    assert_eq!(cache.len(), half, "rope: cache/head size mismatch");
    for ic in 0..half {
        let [c, s] = cache[ic];
        let x0 = x[ic];
        let x1 = x[ic + half];
        let (y0, y1) = rotate_pair(x0, x1, c, s, rotation);
        x[ic] = y0;
        x[ic + half] = y1;
    }
}

/// Round an f32 to bf16 and back (ggml's `GGML_FP32_TO_BF16`: round to nearest even,
/// NaN quieted), for a bf16 residual stream.
pub fn round_bf16(x: f32) -> f32 {
    fp16::bf16_bits_to_f32(fp16::f32_to_bf16_bits(x))
}

/// The slots of the portable kernels (see [`crate::accel`]), filled by `tiercheck-accel`
/// (its `src/elem.rs`: the same bodies compiled with FMA).
pub mod slots {
    // A slot's type is its entry point's signature, spelt out.
    #![allow(clippy::type_complexity)]

    use super::*;
    use crate::accel::Slot;

    /// [`ElemOps::soft_max`] of [`PortableElem`].
    pub static SOFT_MAX: Slot<fn(&PortableElem, &mut [f32], &[f32], f32) -> f64> = Slot::new();
    /// [`ElemOps::swiglu`] of [`PortableElem`] (CPU flavours).
    pub static SWIGLU: Slot<fn(&PortableElem, &mut [f32], &[f32], &[f32])> = Slot::new();
    /// [`ElemOps::dot_f32`] of [`PortableElem`].
    pub static DOT_F32: Slot<fn(&PortableElem, &[f32], &[f32]) -> f32> = Slot::new();
    /// [`ElemOps::dot_f16`] of [`PortableElem`].
    pub static DOT_F16: Slot<fn(&PortableElem, &[f32], &[f32]) -> f32> = Slot::new();
    /// [`ElemOps::sgemm_dot`] of [`PortableElem`].
    pub static SGEMM_DOT: Slot<fn(&PortableElem, &[f32], &[f32]) -> f32> = Slot::new();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `mant24 * 2^(exp - 24)` for a hex float `0x1.<6 hex digits>p<exp>`.
    fn hexf(mant: u32, exp: i32) -> f32 {
        let v = ((1u64 << 24) | mant as u64) as f64 * 2f64.powi(exp - 24);
        let f = v as f32;
        assert_eq!(f as f64, v, "hex float not exact in f32");
        f
    }

    #[test]
    fn expf_constants_match_their_hex_spelling() {
        assert_eq!(EXP_SHIFT, hexf(0x800000, 23));
        assert_eq!(EXP_LOG2E, hexf(0x715476, 0));
        assert_eq!(EXP_LN2_HI, hexf(0x62e400, -1));
        assert_eq!(EXP_LN2_LO, hexf(0x7f7d1c, -20));
        assert_eq!(EXP_C1, hexf(0xffffec, -1));
        assert_eq!(EXP_C2, hexf(0xfffdb6, -2));
        assert_eq!(EXP_C3, hexf(0x555e66, -3));
        assert_eq!(EXP_C4, hexf(0x573e2e, -5));
        assert_eq!(EXP_C5, hexf(0x0e4020, -7));
    }

    #[test]
    fn v_expf_is_close_to_exp_and_handles_ranges() {
        for fused in [false, true] {
            // Normal results only (below -87.3 they are subnormal and lose relative
            // precision by design).
            let mut x = -87.0f32;
            while x < 88.0 {
                let got = v_expf(x, fused) as f64;
                let want = (x as f64).exp();
                // "the maximum error is 1.45358 plus 0.5 ulps": allow 2 ulps relative.
                assert!(
                    ((got - want) / want).abs() <= 2.0 * f32::EPSILON as f64,
                    "x={x} got={got} want={want} fused={fused}"
                );
                x += 0.0137;
            }
            assert_eq!(v_expf(f32::NEG_INFINITY, fused), 0.0);
            assert_eq!(v_expf(-200.0, fused), 0.0);
            assert_eq!(v_expf(200.0, fused), f32::INFINITY);
            assert_eq!(v_expf(0.0, fused), 1.0);
        }
    }

    #[test]
    fn avx512_expf_is_close_to_exp_and_scales_into_subnormals_once() {
        let mut x = -87.0f32;
        while x < 88.0 {
            let got = v_expf_avx512(x) as f64;
            let want = (x as f64).exp();
            assert!(((got - want) / want).abs() <= 2.0 * f32::EPSILON as f64, "x={x}");
            x += 0.0137;
        }
        assert_eq!(v_expf_avx512(f32::NEG_INFINITY), 0.0);
        assert_eq!(v_expf_avx512(-200.0), 0.0);
        assert_eq!(v_expf_avx512(200.0), f32::INFINITY);
        assert_eq!(v_expf_avx512(0.0), 1.0);
        assert!(v_expf_avx512(f32::NAN).is_nan());
        // Subnormal results (n in -149..-126): scalef rounds j * 2^n once, so the result
        // stays within half a subnormal step of the exact value times (1 + 2 ulps).
        let mut x = -103.0f32;
        while x < -87.5 {
            let got = v_expf_avx512(x) as f64;
            let want = (x as f64).exp();
            let step = f32::from_bits(1) as f64;
            assert!((got - want).abs() <= 0.5 * step + want * 2.0 * f32::EPSILON as f64, "x={x}");
            x += 0.0371;
        }
    }

    #[test]
    fn fused_and_unfused_expf_differ_somewhere() {
        // The SSE2 (x64) and FMA forms are different functions: a lane that claimed
        // one while computing the other would be caught by this difference.
        let mut differ = 0;
        let mut x = -20.0f32;
        while x < 20.0 {
            if v_expf(x, true).to_bits() != v_expf(x, false).to_bits() {
                differ += 1;
            }
            x += 0.001;
        }
        assert!(differ > 0);
    }

    #[test]
    fn dot_flavours_agree_with_exact_within_rounding() {
        let x: Vec<f32> = (0..100).map(|i| ((i * 37 % 17) as f32 - 8.0) * 0.13).collect();
        let y: Vec<f32> = (0..100).map(|i| ((i * 11 % 13) as f32 - 6.0) * 0.07).collect();
        let exact: f64 = x.iter().zip(&y).map(|(a, b)| *a as f64 * *b as f64).sum();
        let abs: f64 = x.iter().zip(&y).map(|(a, b)| (*a as f64 * *b as f64).abs()).sum();
        for f in ElemFlavour::ALL {
            let got = portable(f).dot_f32(&x, &y) as f64;
            assert!((got - exact).abs() <= 100.0 * f32::EPSILON as f64 * abs, "{f:?}");
        }
        let g = portable(ElemFlavour::Avx2).sgemm_dot(&x[..96], &y[..96]) as f64;
        let e: f64 = x[..96].iter().zip(&y[..96]).map(|(a, b)| *a as f64 * *b as f64).sum();
        assert!((g - e).abs() <= 100.0 * f32::EPSILON as f64 * abs);
    }

    #[test]
    fn softmax_sums_match_the_outputs() {
        let x: Vec<f32> = (0..37).map(|i| (i as f32 * 0.37).sin() * 5.0).collect();
        let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        for f in ElemFlavour::ALL {
            let mut y = vec![0.0; x.len()];
            let s = portable(f).soft_max(&mut y, &x, max);
            let direct: f64 = y.iter().map(|&v| v as f64).sum();
            assert!((s - direct).abs() <= 1e-6 * direct, "{f:?}");
            assert!(y.iter().all(|&v| v > 0.0 && v <= 1.0));
        }
    }

    #[test]
    fn rms_norm_of_constant_row_is_near_weight() {
        let x = vec![3.0f32; 64];
        let w: Vec<f32> = (0..64).map(|i| 1.0 + i as f32 * 0.01).collect();
        let mut y = vec![0.0; 64];
        rms_norm_mul(&mut y, &x, &w, 1e-6);
        for (a, b) in y.iter().zip(&w) {
            assert!((a - b).abs() < 1e-5);
        }
    }

    #[test]
    fn rope_at_position_zero_is_identity_and_preserves_norm() {
        let mut x: Vec<f32> = (0..64).map(|i| i as f32 * 0.1 - 3.0).collect();
        let orig = x.clone();
        rope_neox(&mut x, &rope_cache(0, 64, 1e6), RopeRotation::FuseX0);
        assert_eq!(x, orig);
        rope_neox(&mut x, &rope_cache(17, 64, 1e6), RopeRotation::Unfused);
        let n0: f64 = orig.iter().map(|v| (*v as f64).powi(2)).sum();
        let n1: f64 = x.iter().map(|v| (*v as f64).powi(2)).sum();
        assert!((n0 - n1).abs() < 1e-4 * n0);
    }
}
