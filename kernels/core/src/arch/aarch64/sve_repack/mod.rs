//! The `aarch64-sve128-repack` lane: ggml's `armv8.6_2` variant at a 128-bit SVE vector
//! length with the CPU repack buffer (llama.cpp's default). At that length ggml chooses
//! the i8mm build's layouts (`ggml_repack_get_optimal_repack_type`: Q4_0 as `q4_0_8x8`
//! only when `ggml_cpu_get_sve_cnt() == 32`, so `q4_0_4x8` here; Q4_K `q4_K_8x8`, Q6_K
//! `q6_K_8x8`, Q8_0 `q8_0_4x8`), and their gemv/gemm kernels take their NEON + i8mm paths
//! (the SVE branches of `ggml_gemm_q4_K_8x8_q8_K`, `ggml_gemm_q8_0_4x8_q8_0` and the
//! `q4_0_8x8` kernels run only at 256 bits): the `aarch64-i8mm-repack` lane's group
//! kernels ([`crate::arch::aarch64::i8mm_repack::kernels`]). Weights that stay plain
//! take the `aarch64-sve128` lane's path, and the decoder's elementwise loops are SVE's
//! ([`crate::elem::ElemFlavour::Sve128`]).
//!
//! Native form: `tiercheck-aarch64`'s `sve_repack` module, on a CPU with SVE at the
//! lane's vector length only.

pub mod kernels;

use crate::arch::aarch64::i8mm::ARM_I8MM_NRC2;
use crate::arch::aarch64::i8mm_repack::{arm_i8mm_layout, group};
use crate::arch::aarch64::neon_repack::arm_row_rule;
use crate::arch::aarch64::sve::{
    GCC_AARCH64_SVE, SVE128_ACCUMULATION, SVE128_TWIN, SVE256_ACCUMULATION, SVE256_TWIN,
};
use crate::blocks::cast_blocks;
use crate::error::KernelError;
use crate::lane::{
    Arch, Lane, Level, MatmulPath, Proof, Recipe, RepackScheme, RepackedLane, RowPath, Status,
    WeightLayout,
};
use crate::quant::ActRule;
use crate::repack::{BlockQ4Kx8, BlockQ4_0x8, RepackLayout};
use crate::GgmlType;

/// The `aarch64-sve128-repack` lane.
pub static AARCH64_SVE128_REPACK: Lane = Lane {
    name: "aarch64-sve128-repack",
    arch: Arch::Aarch64,
    summary: "ggml aarch64 armv8.6_2 variant at 128-bit SVE (Neoverse V2/V3) with CPU repack: \
              q4_K/q5_K/q6_K 8x8, q4_0/q8_0 4x8, iq4_nl 4x4 (NEON+i8mm kernels at this length); plain weights \
              as aarch64-sve128; SVE elementwise; native on 128-bit SVE only",
    recipe: Recipe {
        act_k: ActRule::Q8KFusedNearest,
        act_legacy: ActRule::Q8_0Neon,
        accumulation: SVE128_ACCUMULATION,
        contraction: GCC_AARCH64_SVE,
        layout: WeightLayout::ArmI8mmRepack,
        matmul: MatmulPath::RepackedGemmGemv { gemm_act: ActRule::Q8KFusedNearest },
        plain_gemm: ARM_I8MM_NRC2,
        elem: crate::elem::ElemFlavour::Sve128,
    },
    status: Status::Proven(&[
        Proof {
            level: Level::Kernel,
            against:
                "ggml aarch64 armv8.6_2 build (GCC) repacked mul_mat under qemu at 128-bit SVE",
            only: "",
            suite: "oracle_arm_lanes",
            trials: &["oracle/arm-sve128/matmul-repack/"],
        },
        Proof {
            level: Level::DecoderDecode,
            against: "llama.cpp aarch64 armv8.6_2 build under qemu at 128-bit SVE, repack on (F16 \
                      KV cache with flash attention, llama.cpp's default, and F32 without)",
            only: "",
            suite: "model_oracle",
            trials: &[
                "llama_cpp/arm-sve128/repack/decode/end_to_end",
                "llama_cpp/arm-sve128/repack/decode/layer_local",
                "llama_cpp/arm-sve128/f32_off/repack/decode/end_to_end",
                "llama_cpp/arm-sve128/f32_off/repack/decode/layer_local",
            ],
        },
        Proof {
            level: Level::DecoderPrompt,
            against: "llama.cpp aarch64 armv8.6_2 build under qemu at 128-bit SVE, repack on (F16 \
                      KV cache with flash attention, llama.cpp's default, and F32 without)",
            only: "",
            suite: "model_oracle",
            trials: &[
                "llama_cpp/arm-sve128/repack/prompt/end_to_end",
                "llama_cpp/arm-sve128/repack/prompt/layer_local",
                "llama_cpp/arm-sve128/f32_off/repack/prompt/end_to_end",
                "llama_cpp/arm-sve128/f32_off/repack/prompt/layer_local",
            ],
        },
        Proof {
            level: Level::DecoderPrompt,
            against: "llama.cpp aarch64 armv8.6_2 build at 128-bit SVE under qemu, repack on, on llama.cpp's Q5_K_M mix (Q5_K in q5_K_8x8) (F16 KV cache with flash attention)",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/quant/arm-sve128/repack/prompt/"],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp aarch64 armv8.6_2 build under qemu at 128-bit SVE, repack on, on the embedded Q4_K_M model (q4_K and q6_K weights), run as llama-cli runs it: a prompt of 157 ids in batches of 96 and ubatches of 64, the last row's logits, greedy steps; 2 and 3 threads; decode steps after 4096 and 16384 cells saved by the haswell build, in a context of 32768; F16 KV cache with flash attention and F32 without",
            only: "",
            suite: "model_oracle",
            trials: &[
                "llama_cpp/arm-sve128/cli/repack/end_to_end",
                "llama_cpp/arm-sve128/long/4096/repack/end_to_end",
                "llama_cpp/arm-sve128/long/4096/f32_off/repack/end_to_end",
                "llama_cpp/arm-sve128/long/16384/repack/end_to_end",
                "llama_cpp/arm-sve128/long/16384/f32_off/repack/end_to_end",
                "llama_cpp/arm-sve128/cli/repack/layer_local",
                "llama_cpp/arm-sve128/cli/f32_off/repack/end_to_end",
                "llama_cpp/arm-sve128/threads/3/repack/end_to_end",
            ],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp aarch64 armv8.6_2 build under qemu at 128-bit SVE, repack on, on llama.cpp's Q5_K_M mix (Q5_K in q5_K_8x8), run as llama-cli runs it: a prompt of 157 ids in batches of 96 and ubatches of 64, the last row's logits, greedy steps; 2 threads; F16 KV cache with flash attention",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/quant/arm-sve128/repack/cli/"],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp aarch64 armv8.6_2 build under qemu at 128-bit SVE, repack on, on llama.cpp's Q5_K_M mix (Q5_K in q5_K_8x8) at llama-cli's own sizes: a prompt of 600 ids as ubatches of 512 and 88 in a context of 1024, the last row's logits, greedy steps attending 600+ cells (split-KV flash attention); 2 threads; F16 KV cache with flash attention",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/quant/arm-sve128/repack/cli_defaults/"],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp aarch64 armv8.6_2 build under qemu at 128-bit SVE, repack on, on the qwen2 model (golden/model/qwen2.toml: Q, K and V biases, no Q/K norm): prompt mode; as llama-cli runs it, a prompt of 157 ids in batches of 96 and ubatches of 64 and one of 600 ids as ubatches of 512 and 88 in a context of 1024, the last row's logits, greedy steps; 2 threads, and 3 (26 ids in ubatches of 16); F16 KV cache with flash attention",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/arch/qwen2/arm-sve128/repack/"],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp aarch64 armv8.6_2 build under qemu at 128-bit SVE, repack on, on the llama model (golden/model/llama.toml: normal-mode RoPE on adjacent pairs with Llama 3.1's frequency factors, no norm or bias): prompt mode; as llama-cli runs it, a prompt of 157 ids in batches of 96 and ubatches of 64 and one of 600 ids as ubatches of 512 and 88 in a context of 1024, the last row's logits, greedy steps; 2 threads, and 3 (26 ids in ubatches of 16); F16 KV cache with flash attention",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/arch/llama/arm-sve128/repack/"],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp aarch64 armv8.6_2 build under qemu at 128-bit SVE, repack on, on the qwen3moe model (golden/model/qwen3moe.toml: an F32 router, softmax, the top 4 of 8 experts by libstdc++'s sort, each expert's matmul as ggml's MUL_MAT_ID runs it, the weighted sum in slot order): prompt mode; as llama-cli runs it, a prompt of 600 ids as ubatches of 512 and 88 in a context of 1024, the last row's logits, greedy steps; 2 threads; F16 KV cache with flash attention",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/arch/qwen3moe/arm-sve128/repack/"],
        },
    ]),
    portable: &TWIN,
};

/// The repack buffer of the SVE-128 build: the i8mm layouts and group kernels.
pub const SCHEME: RepackScheme = RepackScheme {
    lane: "aarch64-sve128-repack",
    layout: |ty, n| arm_i8mm_layout(ty).filter(|l| n.is_multiple_of(l.cols())),
    act_rule: arm_row_rule,
    group,
    unreproduced: &[],
};

/// The portable twin: the shared repacked matmul over the `aarch64-sve128` twin.
static TWIN: RepackedLane = RepackedLane { plain: &SVE128_TWIN, scheme: SCHEME };

/// The `aarch64-sve256-repack` lane.
pub static AARCH64_SVE256_REPACK: Lane = Lane {
    name: "aarch64-sve256-repack",
    arch: Arch::Aarch64,
    summary: "ggml aarch64 armv8.6_1 variant at 256-bit SVE (Neoverse V1) with CPU repack: \
              q4_0 8x8 (SVE assembly), q4_K 8x8 (fused SVE gemm), q5_K/q6_K 8x8, q8_0 4x8, iq4_nl 4x4; plain \
              weights as aarch64-sve256; 8-wide SVE elementwise; native on 256-bit SVE only",
    recipe: Recipe {
        act_k: ActRule::Q8KFusedNearest,
        act_legacy: ActRule::Q8_0Neon,
        accumulation: SVE256_ACCUMULATION,
        contraction: GCC_AARCH64_SVE,
        layout: SVE256_REPACK,
        matmul: MatmulPath::RepackedGemmGemv { gemm_act: ActRule::Q8KFusedNearest },
        plain_gemm: ARM_I8MM_NRC2,
        elem: crate::elem::ElemFlavour::Sve256,
    },
    status: Status::Proven(&[
        Proof {
            level: Level::Kernel,
            against: "aarch64 armv8.6_1 build (GCC) under qemu at 256-bit SVE: repacked mul_mat",
            only: "",
            suite: "oracle_arm_lanes",
            trials: &["oracle/arm-sve256/matmul-repack/"],
        },
        Proof {
            level: Level::DecoderDecode,
            against: "llama.cpp aarch64 armv8.6_1 build under qemu at 256-bit SVE, repack on (F16 \
                      KV cache with flash attention, llama.cpp's default, and F32 without)",
            only: "",
            suite: "model_oracle",
            trials: &[
                "llama_cpp/arm-sve256/repack/decode/end_to_end",
                "llama_cpp/arm-sve256/repack/decode/layer_local",
                "llama_cpp/arm-sve256/f32_off/repack/decode/end_to_end",
                "llama_cpp/arm-sve256/f32_off/repack/decode/layer_local",
            ],
        },
        Proof {
            level: Level::DecoderPrompt,
            against: "llama.cpp aarch64 armv8.6_1 build under qemu at 256-bit SVE, repack on (F16 \
                      KV cache with flash attention, llama.cpp's default, and F32 without)",
            only: "",
            suite: "model_oracle",
            trials: &[
                "llama_cpp/arm-sve256/repack/prompt/end_to_end",
                "llama_cpp/arm-sve256/repack/prompt/layer_local",
                "llama_cpp/arm-sve256/f32_off/repack/prompt/end_to_end",
                "llama_cpp/arm-sve256/f32_off/repack/prompt/layer_local",
            ],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp aarch64 armv8.6_1 build under qemu at 256-bit SVE, repack on, on the embedded Q4_K_M model (q4_K and q6_K weights), run as llama-cli runs it: a prompt of 157 ids in batches of 96 and ubatches of 64, the last row's logits, greedy steps; 2 and 3 threads; decode steps after 4096 and 16384 cells saved by the haswell build, in a context of 32768; F16 KV cache with flash attention and F32 without",
            only: "",
            suite: "model_oracle",
            trials: &[
                "llama_cpp/arm-sve256/cli/repack/end_to_end",
                "llama_cpp/arm-sve256/long/4096/repack/end_to_end",
                "llama_cpp/arm-sve256/long/4096/f32_off/repack/end_to_end",
                "llama_cpp/arm-sve256/long/16384/repack/end_to_end",
                "llama_cpp/arm-sve256/long/16384/f32_off/repack/end_to_end",
                "llama_cpp/arm-sve256/cli/repack/layer_local",
                "llama_cpp/arm-sve256/cli/f32_off/repack/end_to_end",
                "llama_cpp/arm-sve256/threads/3/repack/end_to_end",
            ],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp aarch64 armv8.6_1 build under qemu at 256-bit SVE, repack on, on llama.cpp's Q5_K_M mix (Q5_K in q5_K_8x8), run as llama-cli runs it: a prompt of 157 ids in batches of 96 and ubatches of 64, the last row's logits, greedy steps; 2 threads; F16 KV cache with flash attention",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/quant/arm-sve256/repack/cli/"],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp aarch64 armv8.6_1 build under qemu at 256-bit SVE, repack on, on llama.cpp's Q5_K_M mix (Q5_K in q5_K_8x8) at llama-cli's own sizes: a prompt of 600 ids as ubatches of 512 and 88 in a context of 1024, the last row's logits, greedy steps attending 600+ cells (split-KV flash attention); 2 threads; F16 KV cache with flash attention",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/quant/arm-sve256/repack/cli_defaults/"],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp aarch64 armv8.6_1 build under qemu at 256-bit SVE, repack on, on the qwen2 model (golden/model/qwen2.toml: Q, K and V biases, no Q/K norm): prompt mode; as llama-cli runs it, a prompt of 157 ids in batches of 96 and ubatches of 64 and one of 600 ids as ubatches of 512 and 88 in a context of 1024, the last row's logits, greedy steps; 2 threads, and 3 (26 ids in ubatches of 16); F16 KV cache with flash attention",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/arch/qwen2/arm-sve256/repack/"],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp aarch64 armv8.6_1 build under qemu at 256-bit SVE, repack on, on the llama model (golden/model/llama.toml: normal-mode RoPE on adjacent pairs with Llama 3.1's frequency factors, no norm or bias): prompt mode; as llama-cli runs it, a prompt of 157 ids in batches of 96 and ubatches of 64 and one of 600 ids as ubatches of 512 and 88 in a context of 1024, the last row's logits, greedy steps; 2 threads, and 3 (26 ids in ubatches of 16); F16 KV cache with flash attention",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/arch/llama/arm-sve256/repack/"],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp aarch64 armv8.6_1 build under qemu at 256-bit SVE, repack on, on the qwen3moe model (golden/model/qwen3moe.toml: an F32 router, softmax, the top 4 of 8 experts by libstdc++'s sort, each expert's matmul as ggml's MUL_MAT_ID runs it, the weighted sum in slot order): prompt mode; as llama-cli runs it, a prompt of 600 ids as ubatches of 512 and 88 in a context of 1024, the last row's logits, greedy steps; 2 threads; F16 KV cache with flash attention",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/arch/qwen3moe/arm-sve256/repack/"],
        },
    ]),
    portable: &TWIN256,
};

/// ggml's repack choice at 256-bit SVE with i8mm: Q4_0 as `q4_0_8x8` (rows a multiple of
/// 8; else `q4_0_4x8` for a multiple of 4), Q4_K `q4_K_8x8`, Q6_K `q6_K_8x8`, Q8_0
/// `q8_0_4x8`.
pub const SVE256_REPACK: WeightLayout = WeightLayout::named("arm-sve256-repack-8x8-4x8");

/// The layout of [`SVE256_REPACK`] for `n` rows of `ty`, if any.
pub fn sve256_layout(ty: GgmlType, n: usize) -> Option<RepackLayout> {
    match ty {
        GgmlType::Q4_0 if n.is_multiple_of(8) => Some(RepackLayout::Q4_0_8x8),
        _ => arm_i8mm_layout(ty).filter(|l| n.is_multiple_of(l.cols())),
    }
}

/// One row group of the 256-bit SVE build's repacked matmul by the twin kernels.
pub fn group256(
    layout: RepackLayout,
    path: RowPath,
    bytes: &[u8],
    act: &[u8],
    out: &mut [f32],
) -> Result<(), KernelError> {
    match (layout, path) {
        (RepackLayout::Q4_0_8x8, _) => {
            let blocks: &[BlockQ4_0x8] = bytemuck::cast_slice(bytes);
            let y = cast_blocks(GgmlType::Q8_0, act)?;
            out.copy_from_slice(&crate::arch::x86_64::avx2_repack::kernels::gemv_q4_0_8x8(
                blocks, y,
            ));
        }
        (RepackLayout::Q4K8x8, RowPath::Gemm) => {
            let blocks: &[BlockQ4Kx8] = bytemuck::cast_slice(bytes);
            let y = cast_blocks(GgmlType::Q8_K, act)?;
            out.copy_from_slice(&kernels::gemm_q4_k_8x8_sve256(blocks, y));
        }
        _ => return group(layout, path, bytes, act, out),
    }
    Ok(())
}

/// The repack buffer of the 256-bit SVE build.
pub const SCHEME256: RepackScheme = RepackScheme {
    lane: "aarch64-sve256-repack",
    layout: sve256_layout,
    act_rule: arm_row_rule,
    group: group256,
    unreproduced: &[],
};

/// The portable twin: the shared repacked matmul over the `aarch64-sve256` twin.
static TWIN256: RepackedLane = RepackedLane { plain: &SVE256_TWIN, scheme: SCHEME256 };
