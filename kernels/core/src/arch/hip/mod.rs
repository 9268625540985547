//! The `hip-wave32` and `hip-wave64` lanes: ggml's CUDA/HIP matrix-vector path (MMVQ)
//! as HIP clang compiles it for AMD GPUs, with 32-lane warps (RDNA2/RDNA3.5, one warp
//! per block) and 64-lane wavefronts (CDNA gfx90a, two warps per block for one column).
//!
//! Reproduces `quantize_q8_1` (activations: q8_1 blocks of 32 by true divisions and
//! half-away rounding, d and the float sum of x in f16), the `vec_dot_*_q8_1` thread
//! shares and `mul_mat_vec_q`'s reduction (per-thread strided partial sums, warps added
//! into warp 0 in order, XOR butterfly), with the multiply-adds HIP clang fuses by
//! default. The float order of each stage is documented in [`crate::gpu`]; the
//! portable twins here are the specification a device run is checked against.
//!
//! Weight types: the eleven of [`crate::gpu::MMVQ_TYPES`] (Q4_1, Q5_0, Q5_1, Q8_0, Q2_K,
//! Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS; Q4_0 is not reproduced: no trial). Matmul: MMVQ
//! per activation column, which is what the GPU runs for up to 8 columns; for larger
//! batches ggml switches to MMQ (tiled, another float order), which this lane does not
//! reproduce. The elementwise flavour is the GPU's own RMSNorm (times its weight) and
//! SwiGLU ([`crate::elem::ElemFlavour::GpuHip`] / [`crate::elem::ElemFlavour::GpuCuda`],
//! [`crate::gpu::elem`]: the device's reduction tree and operation order, its hardware
//! `rsqrt`/`exp2`/`rcp` modelled as correctly rounded), its RoPE
//! ([`crate::elem::ElemFlavour::rope_cache`]: CUDA's fast math, HIP's device-library
//! `powf`/`sinf`/`cosf` of [`crate::gpu::ocml`]), and without flash attention the softmax
//! of an attention row ([`crate::elem::ElemOps::soft_max_row`]) and the attention
//! products `K·Q` and `V·p` where ggml takes its `mul_mat_vec_f`
//! ([`crate::gpu::MmvfConfig`]: the wave64 lane's flavour,
//! [`crate::elem::ElemFlavour::GpuHipWave64`], reduces them over the 64-lane wavefront).
//! Not reproduced: flash attention and the attention products ggml hands to BLAS, for
//! which the decoder uses the `ref` lane's x64 loops (or the MMVF order) as a stand-in,
//! and the embedding `get_rows`
//! (llama.cpp keeps the token embedding in host memory and ggml's scheduler never
//! offloads `get_rows`, so the CPU dequantizes it: the reference dequantizer).
//!
//! The native form is the device code of the `tiercheck-hip` crate (HIP kernels built
//! by hipcc behind its `hip` feature); where no device exists its trials are ignored
//! with the runtime's reason. The wave64 twin uses gfx90a's contraction, the wave32
//! twin RDNA2's ([`crate::gpu::Contraction`]). Both recipes are checked against ggml's
//! own kernels at the code-object level: `ci/ggml-gpu` compiles ggml's `mmvq.cu` and
//! `quantize.cu` with hipcc for gfx1030 and gfx90a, and `kernels/hip`'s `ggml` trials
//! read each kernel's float operations from the disassembly and compare them with the
//! recipe (and reject every other recipe). No GPU has run them yet.

use crate::blocks::{cast_blocks, BlockQ8_1};
use crate::error::KernelError;
use crate::gpu::{MmvqConfig, CUDA, MMVQ_TYPES, WAVE32, WAVE64};
use crate::lane::{
    Accumulation, Arch, Contraction, Kernels, Lane, MatmulPath, Recipe, Status, WeightLayout,
};
use crate::quant::ActRule;
use crate::GgmlType;

/// Portable twin of a HIP MMVQ lane.
#[derive(Debug)]
pub struct HipTwin(pub MmvqConfig);

/// Twin of `hip-wave32`.
pub static HIP_WAVE32_TWIN: HipTwin = HipTwin(WAVE32);
/// Twin of `hip-wave64`.
pub static HIP_WAVE64_TWIN: HipTwin = HipTwin(WAVE64);
/// Twin of `cuda-sm90`.
pub static CUDA_SM90_TWIN: HipTwin = HipTwin(CUDA);

const fn recipe(acc: Accumulation) -> Recipe {
    Recipe {
        act_k: ActRule::Q8_1HipMmvq,
        act_legacy: ActRule::Q8_1HipMmvq,
        accumulation: acc,
        contraction: Contraction::HipClang,
        layout: WeightLayout::Plain,
        matmul: MatmulPath::VecDotPerRow,
        plain_gemm: crate::lane::PlainGemm::VecDot,
        elem: crate::elem::ElemFlavour::GpuHip,
    }
}

/// The `cuda-sm90` lane's recipe: the CUDA activations, nvcc's fusions.
const fn cuda_recipe() -> Recipe {
    Recipe {
        act_k: ActRule::Q8_1CudaMmvq,
        act_legacy: ActRule::Q8_1CudaMmvq,
        contraction: Contraction::Nvcc,
        elem: crate::elem::ElemFlavour::GpuCuda,
        ..recipe(Accumulation::CudaMmvq)
    }
}

/// What the HIP lanes are checked against today.
const MODELLED: Status = Status::Modelled {
    checked: "code-object level: the MMVQ recipe of the eleven weight types (fusions, \
              order, warps, butterfly, q8_1 divisions, Q4_1/Q5_1's f16 scale products) and \
              the RMSNorm, SwiGLU, softmax and MMVF (attention product) \
              twins equal the float operations read from ggml's own MMVQ, quantize_q8_1, \
              rms_norm_f32, SwiGLU, soft_max_f32 and mul_mat_vec_f code objects built by \
              hipcc (gfx1030 / gfx90a) and by clang 19 for gfx1151 (hip-wave32), and \
              the RoPE twin equals ggml's rope_neox code \
              object executed instruction by instruction, bit for bit; v_rsq_f32, \
              v_exp_f32, v_rcp_f32 and v_log_f32 modelled as correctly rounded; flash \
              attention is an x64 stand-in; not run on a GPU",
};

/// The `hip-wave32` lane.
pub static HIP_WAVE32: Lane = Lane {
    name: "hip-wave32",
    arch: Arch::AmdGpu,
    summary: "ggml CUDA/HIP MMVQ on RDNA2 (wave32, 1 warp): q8_1 activations, RDNA2 contraction",
    recipe: recipe(Accumulation::HipMmvqWave32),
    status: MODELLED,
    portable: &HIP_WAVE32_TWIN,
};

/// The `hip-wave64` lane.
pub static HIP_WAVE64: Lane = Lane {
    name: "hip-wave64",
    arch: Arch::AmdGpu,
    summary:
        "ggml CUDA/HIP MMVQ on CDNA gfx90a (wave64, 2 warps): q8_1 activations, gfx90a contraction",
    recipe: Recipe {
        elem: crate::elem::ElemFlavour::GpuHipWave64,
        ..recipe(Accumulation::HipMmvqWave64)
    },
    status: MODELLED,
    portable: &HIP_WAVE64_TWIN,
};

/// The `cuda-sm90` lane.
pub static CUDA_SM90: Lane = Lane {
    name: "cuda-sm90",
    arch: Arch::NvidiaGpu,
    summary: "ggml CUDA MMVQ on NVIDIA sm_80/sm_90 (warp 32, 4 warps): fast-math q8_1 \
              activations, nvcc contraction",
    recipe: cuda_recipe(),
    status: Status::Modelled {
        checked: "code-object level: the MMVQ recipe of the eleven weight types, the \
                  quantizer's operations and the \
                  RMSNorm, SwiGLU, softmax, RoPE and MMVF (attention product) twins equal \
                  those read from ggml's own SASS (nvcc, sm_90 / sm_80); the MUFU functions \
                  (RCP, RSQ, EX2, LG2, SIN, COS) are modelled as correctly rounded; flash \
                  attention and K·Q beyond 512 cells (cuBLAS) are stand-ins; not run on a \
                  GPU",
    },
    portable: &CUDA_SM90_TWIN,
};

impl Kernels for HipTwin {
    fn act_rule(&self, wtype: GgmlType) -> Result<ActRule, KernelError> {
        let rule = if self.0.fast_math { ActRule::Q8_1CudaMmvq } else { ActRule::Q8_1HipMmvq };
        if MMVQ_TYPES.contains(&wtype) {
            Ok(rule)
        } else {
            Err(KernelError::Unsupported { op: self.0.name, ty: wtype.name() })
        }
    }

    fn vec_dot(&self, wtype: GgmlType, w_row: &[u8], act: &[u8]) -> Result<f32, KernelError> {
        self.act_rule(wtype)?;
        let blocks: &[BlockQ8_1] = cast_blocks(GgmlType::Q8_1, act)?;
        self.0.gemv(wtype, w_row, blocks)
    }

    /// [`Kernels::vec_dot`] for every (weight row, activation column) pair, as the
    /// default does, with each column's q8_1 scales converted once for all rows
    /// ([`MmvqConfig::gemv_rows`]: the same bits).
    fn matmul_quantized(
        &self,
        w: &crate::WeightMatrix<'_>,
        act: &[u8],
        m: usize,
    ) -> Result<Vec<f32>, KernelError> {
        self.act_rule(w.ty())?;
        let n = w.n();
        let mut out = vec![0.0f32; m * n];
        if w.k() == 0 || n == 0 {
            return Ok(out);
        }
        let cols = crate::lane::dispatch::act_rows(self, w, act, m)?;
        for (a, o) in cols.into_iter().zip(out.chunks_exact_mut(n)) {
            let blocks: &[BlockQ8_1] = cast_blocks(GgmlType::Q8_1, a)?;
            self.0.gemv_rows(w.ty(), w.data(), blocks, o)?;
        }
        Ok(out)
    }
}
