//! The `aarch64-sve128` lane: ggml's aarch64 `armv8.6_2` variant (the one a
//! `GGML_CPU_ALL_VARIANTS` build loads on Neoverse V2/V3: Grace, Graviton4, Jetson Thor),
//! built by GCC with `-march=armv8.6-a+dotprod+fp16+sve+i8mm+sve2`, on a CPU whose SVE
//! vector length is 128 bits, repack off (`--no-repack`), plain weights:
//!
//! - activations and dequantization: the `aarch64-neon` lane's (the same source; ggml's
//!   quantizers have no SVE path);
//! - `nrc == 1` vec_dot: the SVE-128 kernels for Q4_0 and Q8_0 (fused `svmla`, one FADDV),
//!   the NEON order for Q4_K and Q6_K ([`vec_dot`]), and for Q4_1, Q5_0 (with the i8mm
//!   builds' unsigned tail, [`crate::arch::aarch64::i8mm::i8mm_build_vec_dot`]), Q5_1,
//!   Q5_K, IQ4_NL and IQ4_XS; Q2_K by its SVE kernel at this length, Q3_K by the NEON
//!   order (its SVE kernel reduces the integers exactly, so the bits are NEON's);
//! - the plain matmul: 2x2 tiles where both row counts are even, as on the i8mm build
//!   ([`crate::arch::aarch64::i8mm::ARM_I8MM_NRC2`]), with the SVE + i8mm tile kernels for
//!   Q4_K and Q6_K (fused) and the NEON i8mm ones for Q4_0 and Q8_0;
//! - the decoder's elementwise and attention loops: SVE at 128 bits
//!   ([`crate::elem::ElemFlavour::Sve128`]: 4-float predicated vectors, 8-accumulator
//!   `ggml_vec_dot_f32`, widening `ggml_vec_dot_f16`, FP16 flash-attention accumulator,
//!   no llamafile).
//!
//! Native form: `tiercheck-aarch64`'s `sve` module (SVE assembly for the Q4_0/Q8_0
//! `nrc == 1` vec_dot and the elementwise loops, NEON + i8mm for the rest), handed out
//! only on a CPU with SVE at the lane's vector length.

pub mod vec_dot;

use crate::arch::aarch64::i8mm::{matmul_nrc2, nrc2_applies, nrc2_split, Tile, ARM_I8MM_NRC2};
use crate::arch::aarch64::neon::{arm_act_rule, NeonTwin};
use crate::blocks::{cast_blocks, BlockQ4_0, BlockQ8K, BlockQ8_0};
use crate::error::KernelError;
use crate::lane::dispatch::{check_pair, dispatch_vec_dot, VecDotFns};
use crate::lane::{
    Accumulation, Arch, Contraction, Kernels, Lane, Level, MatmulPath, Proof, Recipe, Status,
    WeightLayout,
};
use crate::quant::ActRule;
use crate::weight_matrix::WeightMatrix;
use crate::GgmlType;

/// ggml's SVE kernels at 128 bits: Q4_0/Q8_0 four fused lanes per block pair reduced by
/// one FADDV; K-quants one serial sum per superblock (NEON's); 2x2 tiles fused.
pub const SVE128_ACCUMULATION: Accumulation = Accumulation::named("sve128-fmla-faddv");

/// GCC on aarch64 with SVE: C expressions `a + b*c` fused as on NEON, and every SVE
/// `svmla` a fused multiply-add.
pub const GCC_AARCH64_SVE: Contraction = Contraction::named("gcc-aarch64-sve-fmla");

/// The `aarch64-sve128` lane.
pub static AARCH64_SVE128: Lane = Lane {
    name: "aarch64-sve128",
    arch: Arch::Aarch64,
    summary: "ggml aarch64 armv8.6_2 variant (GCC, SVE2+i8mm+fp16) at 128-bit SVE (Neoverse V2/V3), \
              repack off: SVE vec_dot, fused SVE+i8mm 2x2 tiles, SVE elementwise, FP16 flash attention; native on 128-bit SVE only",
    recipe: Recipe {
        act_k: ActRule::Q8KFusedNearest,
        act_legacy: ActRule::Q8_0Neon,
        accumulation: SVE128_ACCUMULATION,
        contraction: GCC_AARCH64_SVE,
        layout: WeightLayout::Plain,
        matmul: MatmulPath::VecDotPerRow,
        plain_gemm: ARM_I8MM_NRC2,
        elem: crate::elem::ElemFlavour::Sve128,
    },
    status: Status::Proven(&[
        Proof {
            level: Level::Kernel,
            against: "ggml aarch64 armv8.6_2 build (GCC) under qemu at 128-bit SVE: vec_dot nrc=1 \
                      and nrc=2, plain mul_mat",
            only: "",
            suite: "oracle_arm_lanes",
            trials: &[
                "oracle/arm-sve128/vec_dot/",
                "oracle/arm-sve128/vec_dot2/",
                "oracle/arm-sve128/matmul-plain/",
            ],
        },
        Proof {
            level: Level::DecoderDecode,
            against: "llama.cpp aarch64 armv8.6_2 build under qemu at 128-bit SVE, repack off (F16 \
                      KV cache with flash attention, llama.cpp's default, and F32 without)",
            only: "",
            suite: "model_oracle",
            trials: &[
                "llama_cpp/arm-sve128/no_repack/decode/end_to_end",
                "llama_cpp/arm-sve128/no_repack/decode/layer_local",
                "llama_cpp/arm-sve128/f32_off/no_repack/decode/end_to_end",
                "llama_cpp/arm-sve128/f32_off/no_repack/decode/layer_local",
            ],
        },
        Proof {
            level: Level::DecoderPrompt,
            against: "llama.cpp aarch64 armv8.6_2 build under qemu at 128-bit SVE, repack off (F16 \
                      KV cache with flash attention, llama.cpp's default, and F32 without)",
            only: "",
            suite: "model_oracle",
            trials: &[
                "llama_cpp/arm-sve128/no_repack/prompt/end_to_end",
                "llama_cpp/arm-sve128/no_repack/prompt/layer_local",
                "llama_cpp/arm-sve128/f32_off/no_repack/prompt/end_to_end",
                "llama_cpp/arm-sve128/f32_off/no_repack/prompt/layer_local",
            ],
        },
        Proof {
            level: Level::DecoderPrompt,
            against: "llama.cpp aarch64 armv8.6_2 build at 128-bit SVE under qemu, repack off, on llama.cpp's IQ4_XS and Q2_K mixes (F16 KV cache with flash attention)",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/quant/arm-sve128/no_repack/prompt/"],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp aarch64 armv8.6_2 build under qemu at 128-bit SVE, repack off, on the embedded Q4_K_M model (q4_K and q6_K weights), run as llama-cli runs it: a prompt of 157 ids in batches of 96 and ubatches of 64, the last row's logits, greedy steps; 1, 2, 3, 8 and 14 threads, 3 NUMA-aware; decode steps after 4096 and 16384 cells saved by the haswell build, in a context of 32768; F16 KV cache with flash attention and F32 without",
            only: "",
            suite: "model_oracle",
            trials: &[
                "llama_cpp/arm-sve128/cli/no_repack/end_to_end",
                "llama_cpp/arm-sve128/numa/3/no_repack/end_to_end",
                "llama_cpp/arm-sve128/long/4096/no_repack/end_to_end",
                "llama_cpp/arm-sve128/long/4096/f32_off/no_repack/end_to_end",
                "llama_cpp/arm-sve128/long/16384/no_repack/end_to_end",
                "llama_cpp/arm-sve128/long/16384/f32_off/no_repack/end_to_end",
                "llama_cpp/arm-sve128/cli/no_repack/layer_local",
                "llama_cpp/arm-sve128/cli/f32_off/no_repack/end_to_end",
                "llama_cpp/arm-sve128/threads/1/no_repack/end_to_end",
                "llama_cpp/arm-sve128/threads/3/no_repack/end_to_end",
                "llama_cpp/arm-sve128/threads/8/no_repack/end_to_end",
                "llama_cpp/arm-sve128/threads/14/no_repack/end_to_end",
            ],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp aarch64 armv8.6_2 build under qemu at 128-bit SVE, repack off, on llama.cpp's Q2_K mix, run as llama-cli runs it: a prompt of 157 ids in batches of 96 and ubatches of 64, the last row's logits, greedy steps; 2 threads, and 3 (26 ids in ubatches of 16); F16 KV cache with flash attention",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/quant/arm-sve128/no_repack/cli/", "llama_cpp/quant/arm-sve128/no_repack/threads/"],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp aarch64 armv8.6_2 build under qemu at 128-bit SVE, repack off, on llama.cpp's Q2_K mix at llama-cli's own sizes: a prompt of 600 ids as ubatches of 512 and 88 in a context of 1024, the last row's logits, greedy steps attending 600+ cells (split-KV flash attention), and decode steps after 16384 cells the haswell build filled with the same model and saved, in a context of 32768; 2 threads; F16 KV cache with flash attention",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/quant/arm-sve128/no_repack/cli_defaults/", "llama_cpp/quant/arm-sve128/no_repack/long/"],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp aarch64 armv8.6_2 build under qemu at 128-bit SVE, repack off, on the qwen2 model (golden/model/qwen2.toml: Q, K and V biases, no Q/K norm): prompt mode; as llama-cli runs it, a prompt of 157 ids in batches of 96 and ubatches of 64 and one of 600 ids as ubatches of 512 and 88 in a context of 1024, the last row's logits, greedy steps; 2 threads, and 3 (26 ids in ubatches of 16); F16 KV cache with flash attention",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/arch/qwen2/arm-sve128/no_repack/"],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp aarch64 armv8.6_2 build under qemu at 128-bit SVE, repack off, on the llama model (golden/model/llama.toml: normal-mode RoPE on adjacent pairs with Llama 3.1's frequency factors, no norm or bias): prompt mode; as llama-cli runs it, a prompt of 157 ids in batches of 96 and ubatches of 64 and one of 600 ids as ubatches of 512 and 88 in a context of 1024, the last row's logits, greedy steps; 2 threads, and 3 (26 ids in ubatches of 16); F16 KV cache with flash attention",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/arch/llama/arm-sve128/no_repack/"],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp aarch64 armv8.6_2 build under qemu at 128-bit SVE, repack off, on the qwen3moe model (golden/model/qwen3moe.toml: an F32 router, softmax, the top 4 of 8 experts by libstdc++'s sort, each expert's matmul as ggml's MUL_MAT_ID runs it, the weighted sum in slot order): prompt mode; as llama-cli runs it, a prompt of 600 ids as ubatches of 512 and 88 in a context of 1024, the last row's logits, greedy steps; 2 threads; F16 KV cache with flash attention",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/arch/qwen3moe/arm-sve128/no_repack/"],
        },
    ]),
    portable: &SVE128_TWIN,
};

/// The 2x2 tile of weight rows `x` by quantized activation rows `y` by the twin kernels
/// of the SVE + i8mm build.
pub fn tile(
    ty: GgmlType,
    atype: GgmlType,
    x: [&[u8]; 2],
    y: [&[u8]; 2],
) -> Result<Tile, KernelError> {
    Ok(match ty {
        GgmlType::Q4_K => vec_dot::vec_dot2_q4_k_q8_k_sve(
            [cast_blocks(ty, x[0])?, cast_blocks(ty, x[1])?],
            [cast_blocks(atype, y[0])?, cast_blocks(atype, y[1])?],
        ),
        GgmlType::Q6_K => vec_dot::vec_dot2_q6_k_q8_k_sve(
            [cast_blocks(ty, x[0])?, cast_blocks(ty, x[1])?],
            [cast_blocks(atype, y[0])?, cast_blocks(atype, y[1])?],
        ),
        _ => return crate::arch::aarch64::i8mm::tile(ty, atype, x, y),
    })
}

/// Portable twin of an SVE lane: the lane's own Q4_0/Q8_0 `nrc == 1` vec_dot for its
/// vector length, everything else shared by both lengths (NEON K-quant vec_dot, the
/// [`tile`] kernels, the i8mm build's tile decision).
#[derive(Debug)]
pub struct SveTwin {
    /// The lane (its recipe gives the activation rules).
    lane: &'static Lane,
    /// `ggml_vec_dot_q4_0_q8_0` at this vector length.
    q4_0: fn(&[BlockQ4_0], &[BlockQ8_0]) -> f32,
    /// `ggml_vec_dot_q8_0_q8_0` at this vector length.
    q8_0: fn(&[BlockQ8_0], &[BlockQ8_0]) -> f32,
    /// `ggml_vec_dot_q2_K_q8_K` at this vector length.
    pub q2_k: fn(&[crate::blocks::BlockQ2K], &[BlockQ8K]) -> f32,
    /// Operation names for errors.
    ops: (&'static str, &'static str),
}

/// The portable twin of `aarch64-sve128`.
pub static SVE128_TWIN: SveTwin = SveTwin {
    lane: &AARCH64_SVE128,
    q4_0: vec_dot::vec_dot_q4_0_q8_0_sve128,
    q8_0: vec_dot::vec_dot_q8_0_q8_0_sve128,
    q2_k: vec_dot::vec_dot_q2_k_q8_k_sve128,
    ops: ("aarch64-sve128 matmul", "aarch64-sve128 vec_dot"),
};

/// The portable twin of `aarch64-sve256`.
pub static SVE256_TWIN: SveTwin = SveTwin {
    lane: &AARCH64_SVE256,
    q4_0: vec_dot::vec_dot_q4_0_q8_0_sve256,
    q8_0: vec_dot::vec_dot_q8_0_q8_0_sve256,
    q2_k: vec_dot::vec_dot_q2_k_q8_k_sve256,
    ops: ("aarch64-sve256 matmul", "aarch64-sve256 vec_dot"),
};

impl Kernels for SveTwin {
    fn act_rule(&self, wtype: GgmlType) -> Result<ActRule, KernelError> {
        // Q2_K has SVE kernels of its own ([`vec_dot`]); Q3_K's SVE kernel gives NEON's
        // bits; Q4_1 (with the i8mm tile), Q5_0, Q5_1, Q5_K, IQ4_NL and IQ4_XS take the
        // NEON code.
        arm_act_rule(&self.lane.recipe, wtype, self.ops.0)
    }

    fn dequantize(&self, ty: GgmlType, bytes: &[u8], out: &mut [f32]) -> Result<(), KernelError> {
        NeonTwin.dequantize(ty, bytes, out)
    }

    fn vec_dot(&self, wtype: GgmlType, w_row: &[u8], act: &[u8]) -> Result<f32, KernelError> {
        use crate::arch::aarch64::neon::vec_dot as neon;
        let fns = VecDotFns {
            q4_0: self.q4_0,
            q8_0: self.q8_0,
            q4_k: neon::vec_dot_q4_k_q8_k,
            q6_k: neon::vec_dot_q6_k_q8_k,
        };
        if wtype == GgmlType::Q2_K {
            let atype = self.act_rule(wtype)?.format();
            check_pair(wtype, w_row, atype, act)?;
            return Ok((self.q2_k)(cast_blocks(wtype, w_row)?, cast_blocks(atype, act)?));
        }
        if !matches!(wtype, GgmlType::Q4_0 | GgmlType::Q8_0 | GgmlType::Q4_K | GgmlType::Q6_K) {
            // (Q4_1's single rows included.)
            // The other types this lane multiplies: the NEON kernels (module doc).
            self.act_rule(wtype)?;
            return crate::arch::aarch64::i8mm::i8mm_build_vec_dot(&NeonTwin, wtype, w_row, act);
        }
        dispatch_vec_dot(self, &fns, self.ops.1, wtype, w_row, act)
    }

    fn matmul_quantized(
        &self,
        w: &WeightMatrix<'_>,
        act: &[u8],
        m: usize,
    ) -> Result<Vec<f32>, KernelError> {
        matmul_nrc2(self, w, act, m, crate::lane::TierPool::threads(1), tile)
    }

    fn matmul_quantized_tier(
        &self,
        w: &WeightMatrix<'_>,
        act: &[u8],
        m: usize,
        tier: crate::lane::TierPool,
    ) -> Result<Vec<f32>, KernelError> {
        matmul_nrc2(self, w, act, m, tier, tile)
    }

    fn plain_split(&self, wtype: GgmlType, n: usize, m: usize) -> Option<usize> {
        nrc2_split(wtype, n, m)
    }

    fn plain_path(&self, wtype: GgmlType, m: usize) -> &'static str {
        if nrc2_applies(wtype, 2, m) {
            "vec_dot-nrc2"
        } else {
            "vec_dot"
        }
    }
}

/// ggml's SVE kernels at 256 bits: Q4_0/Q8_0 eight fused lanes per block pair reduced by
/// one FADDV; K-quants as at 128 bits.
pub const SVE256_ACCUMULATION: Accumulation = Accumulation::named("sve256-fmla-faddv");

/// The `aarch64-sve256` lane.
pub static AARCH64_SVE256: Lane = Lane {
    name: "aarch64-sve256",
    arch: Arch::Aarch64,
    summary: "ggml aarch64 armv8.6_1 variant (GCC, SVE+i8mm+fp16) at 256-bit SVE (Neoverse V1), \
              repack off: 8-lane SVE vec_dot, fused SVE+i8mm 2x2 tiles, 8-wide SVE elementwise, \
              FP16 flash attention; native on 256-bit SVE only",
    recipe: Recipe {
        act_k: ActRule::Q8KFusedNearest,
        act_legacy: ActRule::Q8_0Neon,
        accumulation: SVE256_ACCUMULATION,
        contraction: GCC_AARCH64_SVE,
        layout: WeightLayout::Plain,
        matmul: MatmulPath::VecDotPerRow,
        plain_gemm: ARM_I8MM_NRC2,
        elem: crate::elem::ElemFlavour::Sve256,
    },
    status: Status::Proven(&[
        Proof {
            level: Level::Kernel,
            against: "aarch64 armv8.6_1 build (GCC) under qemu at 256-bit SVE: vec_dot nrc=1 and nrc=2, plain mul_mat",
            only: "",
            suite: "oracle_arm_lanes",
            trials: &["oracle/arm-sve256/vec_dot/", "oracle/arm-sve256/vec_dot2/", "oracle/arm-sve256/matmul-plain/"],
        },
        Proof {
            level: Level::DecoderDecode,
            against: "llama.cpp aarch64 armv8.6_1 build under qemu at 256-bit SVE, repack off (F16 \
                      KV cache with flash attention, llama.cpp's default, and F32 without)",
            only: "",
            suite: "model_oracle",
            trials: &[
                "llama_cpp/arm-sve256/no_repack/decode/end_to_end",
                "llama_cpp/arm-sve256/no_repack/decode/layer_local",
                "llama_cpp/arm-sve256/f32_off/no_repack/decode/end_to_end",
                "llama_cpp/arm-sve256/f32_off/no_repack/decode/layer_local",
            ],
        },
        Proof {
            level: Level::DecoderPrompt,
            against: "llama.cpp aarch64 armv8.6_1 build under qemu at 256-bit SVE, repack off (F16 \
                      KV cache with flash attention, llama.cpp's default, and F32 without)",
            only: "",
            suite: "model_oracle",
            trials: &[
                "llama_cpp/arm-sve256/no_repack/prompt/end_to_end",
                "llama_cpp/arm-sve256/no_repack/prompt/layer_local",
                "llama_cpp/arm-sve256/f32_off/no_repack/prompt/end_to_end",
                "llama_cpp/arm-sve256/f32_off/no_repack/prompt/layer_local",
            ],
        },
        Proof {
            level: Level::DecoderPrompt,
            against: "llama.cpp aarch64 armv8.6_1 build at 256-bit SVE under qemu, repack off, on llama.cpp's Q2_K and Q3_K_M mixes (F16 KV cache with flash attention)",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/quant/arm-sve256/no_repack/prompt/"],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp aarch64 armv8.6_1 build under qemu at 256-bit SVE, repack off, on the embedded Q4_K_M model (q4_K and q6_K weights), run as llama-cli runs it: a prompt of 157 ids in batches of 96 and ubatches of 64, the last row's logits, greedy steps; 1, 2, 3, 8 and 14 threads, 3 NUMA-aware; decode steps after 4096 and 16384 cells saved by the haswell build, in a context of 32768; F16 KV cache with flash attention and F32 without",
            only: "",
            suite: "model_oracle",
            trials: &[
                "llama_cpp/arm-sve256/cli/no_repack/end_to_end",
                "llama_cpp/arm-sve256/numa/3/no_repack/end_to_end",
                "llama_cpp/arm-sve256/long/4096/no_repack/end_to_end",
                "llama_cpp/arm-sve256/long/4096/f32_off/no_repack/end_to_end",
                "llama_cpp/arm-sve256/long/16384/no_repack/end_to_end",
                "llama_cpp/arm-sve256/long/16384/f32_off/no_repack/end_to_end",
                "llama_cpp/arm-sve256/long/16384/threads/1/no_repack/end_to_end",
                "llama_cpp/arm-sve256/long/16384/threads/3/no_repack/end_to_end",
                "llama_cpp/arm-sve256/long/16384/threads/8/no_repack/end_to_end",
                "llama_cpp/arm-sve256/long/16384/threads/14/no_repack/end_to_end",
                "llama_cpp/arm-sve256/cli/no_repack/layer_local",
                "llama_cpp/arm-sve256/cli/f32_off/no_repack/end_to_end",
                "llama_cpp/arm-sve256/threads/1/no_repack/end_to_end",
                "llama_cpp/arm-sve256/threads/3/no_repack/end_to_end",
                "llama_cpp/arm-sve256/threads/8/no_repack/end_to_end",
                "llama_cpp/arm-sve256/threads/14/no_repack/end_to_end",
            ],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp aarch64 armv8.6_1 build under qemu at 256-bit SVE, repack off, on llama.cpp's Q2_K mix (the 256-bit Q2_K kernel), run as llama-cli runs it: a prompt of 157 ids in batches of 96 and ubatches of 64, the last row's logits, greedy steps; 2 threads, and 3 (26 ids in ubatches of 16); also at llama-cli's own sizes: a prompt of 600 ids as ubatches of 512 and 88 in a context of 1024, the last row's logits, greedy steps attending 600+ cells (split-KV flash attention), and decode steps after 4096 and 16384 cells the haswell build filled with the same model and saved, in a context of 32768; F16 KV cache with flash attention",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/quant/arm-sve256/no_repack/cli/", "llama_cpp/quant/arm-sve256/no_repack/threads/", "llama_cpp/quant/arm-sve256/no_repack/cli_defaults/", "llama_cpp/quant/arm-sve256/no_repack/long/"],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp aarch64 armv8.6_1 build under qemu at 256-bit SVE, repack off, on the qwen2 model (golden/model/qwen2.toml: Q, K and V biases, no Q/K norm): prompt mode; as llama-cli runs it, a prompt of 157 ids in batches of 96 and ubatches of 64 and one of 600 ids as ubatches of 512 and 88 in a context of 1024, the last row's logits, greedy steps; 2 threads, and 3 (26 ids in ubatches of 16); F16 KV cache with flash attention",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/arch/qwen2/arm-sve256/no_repack/"],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp aarch64 armv8.6_1 build under qemu at 256-bit SVE, repack off, on the llama model (golden/model/llama.toml: normal-mode RoPE on adjacent pairs with Llama 3.1's frequency factors, no norm or bias): prompt mode; as llama-cli runs it, a prompt of 157 ids in batches of 96 and ubatches of 64 and one of 600 ids as ubatches of 512 and 88 in a context of 1024, the last row's logits, greedy steps; 2 threads, and 3 (26 ids in ubatches of 16); F16 KV cache with flash attention",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/arch/llama/arm-sve256/no_repack/"],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp aarch64 armv8.6_1 build under qemu at 256-bit SVE, repack off, on the qwen3moe model (golden/model/qwen3moe.toml: an F32 router, softmax, the top 4 of 8 experts by libstdc++'s sort, each expert's matmul as ggml's MUL_MAT_ID runs it, the weighted sum in slot order): prompt mode; as llama-cli runs it, a prompt of 600 ids as ubatches of 512 and 88 in a context of 1024, the last row's logits, greedy steps; 2 threads; F16 KV cache with flash attention",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/arch/qwen3moe/arm-sve256/no_repack/"],
        },
    ]),
    portable: &SVE256_TWIN,
};
