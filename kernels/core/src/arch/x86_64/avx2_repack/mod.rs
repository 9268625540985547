//! The `x86_64-avx2-repack` lane: ggml's haswell tier with the CPU repack buffer (the
//! default in llama.cpp on AVX2 machines). Q4_K, Q4_0 and IQ4_NL weights whose row count
//! is a multiple of 8 are repacked to `q4_K_8x8` / `q4_0_8x8` / `iq4_nl_8x8`
//! ([`crate::repack`], `ggml_repack_get_optimal_repack_type`) and multiplied by the
//! repacked kernels ([`kernels`]); other weights, and the types x86's AVX2 build does not
//! repack (Q6_K, Q8_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q5_K, IQ4_XS), take the
//! `x86_64-avx2` lane's plain path (for the K-quants and IQ4_XS at 8 or more rows: ggml's
//! tiled matmul). The
//! matmul itself is the shared [`RepackedLane`]; this module supplies the layouts, the
//! row rules and the group kernels.
//!
//! Row split, as `forward_mul_mat` does it: with m activation rows, the first
//! m - m % 4 go through the gemm kernel (K-quants: activations by
//! [`ActRule::Q8KX86x4`]; Q4_0, IQ4_NL: the x86 q8_0 rule), the last m % 4 through the gemv
//! kernel (q8_K by the reference rule, q8_0 by the x86 rule). Every output is one pass
//! over all of k, so column chunking (threads) never changes a bit.

pub mod kernels;

use crate::arch::x86_64::avx2::Avx2Twin;
use crate::blocks::cast_blocks;
use crate::error::KernelError;
use crate::lane::{
    unsupported_layout, Accumulation, Arch, Contraction, Lane, Level, MatmulPath, Proof, Recipe,
    RepackScheme, RepackedLane, RowPath, Status, WeightLayout,
};
use crate::quant::ActRule;
use crate::repack::{BlockIq4Nlx8, BlockQ4Kx8, BlockQ4_0x8, RepackLayout};
use crate::GgmlType;

/// The `x86_64-avx2-repack` lane.
pub static X86_64_AVX2_REPACK: Lane = Lane {
    name: "x86_64-avx2-repack",
    arch: Arch::X86_64,
    summary: "ggml haswell tier with CPU repack: q4_K/q4_0/iq4_nl 8x8 gemv and gemm",
    status: Status::Proven(&[
        Proof {
            level: Level::Kernel,
            against: "ggml haswell repacked mul_mat",
            only: "",
            suite: "oracle_x86_lanes",
            trials: &["oracle/haswell/matmul-repack"],
        },
        Proof {
            level: Level::DecoderDecode,
            against: "llama.cpp haswell (F16 KV cache with flash attention, llama.cpp's default, and F32 without)",
            only: "",
            suite: "model_oracle",
            trials: &[
                "llama_cpp/decode/end_to_end",
                "llama_cpp/decode/layer_local",
                "llama_cpp/f32_off/decode/end_to_end",
                "llama_cpp/f32_off/decode/layer_local",
            ],
        },
        Proof {
            level: Level::DecoderPrompt,
            against: "llama.cpp haswell (F16 KV cache with flash attention, llama.cpp's default, and F32 without)",
            only: "",
            suite: "model_oracle",
            trials: &[
                "llama_cpp/prompt/end_to_end",
                "llama_cpp/prompt/layer_local",
                "llama_cpp/f32_off/prompt/end_to_end",
                "llama_cpp/f32_off/prompt/layer_local",
            ],
        },
        Proof {
            level: Level::DecoderDecode,
            against: "llama.cpp haswell, repack on, on llama.cpp's Q5_K_M, Q3_K_M, Q2_K and IQ4_XS mixes and uniform Q4_1, Q5_0, Q5_1 models (F16 KV cache with flash attention)",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/quant/haswell/repack/decode/"],
        },
        Proof {
            level: Level::DecoderPrompt,
            against: "llama.cpp haswell, repack on, on llama.cpp's Q5_K_M, Q3_K_M, Q2_K and IQ4_XS mixes and uniform Q4_1, Q5_0, Q5_1 models (F16 KV cache with flash attention)",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/quant/haswell/repack/prompt/"],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp haswell, on the embedded Q4_K_M model (q4_K and q6_K weights), run as llama-cli runs it: a prompt in batches and ubatches (157 ids in ubatches of 64, and 600 ids in ubatches of 512 and 88 in 1024 cells), the last row's logits, greedy steps; 1, 2, 3, 8 and 14 threads, 3 NUMA-aware; decode steps after 4096 and 16384 cells saved by the haswell build, in a context of 32768; F16 KV cache with flash attention and F32 without",
            only: "",
            suite: "model_oracle",
            trials: &[
                "llama_cpp/cli/repack/end_to_end",
                "llama_cpp/numa/3/repack/end_to_end",
                "llama_cpp/long/4096/repack/end_to_end",
                "llama_cpp/long/4096/f32_off/repack/end_to_end",
                "llama_cpp/long/16384/repack/end_to_end",
                "llama_cpp/long/16384/f32_off/repack/end_to_end",
                "llama_cpp/long/16384/threads/1/repack/end_to_end",
                "llama_cpp/long/16384/threads/3/repack/end_to_end",
                "llama_cpp/long/16384/threads/8/repack/end_to_end",
                "llama_cpp/long/16384/threads/14/repack/end_to_end",
                "llama_cpp/long/16384/repack/layer_local",
                "llama_cpp/long/16384/f32_off/repack/layer_local",
                "llama_cpp/cli/repack/layer_local",
                "llama_cpp/cli/f32_off/repack/end_to_end",
                "llama_cpp/threads/1/repack/end_to_end",
                "llama_cpp/threads/3/repack/end_to_end",
                "llama_cpp/threads/8/repack/end_to_end",
                "llama_cpp/threads/14/repack/end_to_end",
                "llama_cpp/cli_defaults/repack/end_to_end",
                "llama_cpp/cli_defaults/f32_off/repack/end_to_end",
                "llama_cpp/threads_split_kv/1/repack/end_to_end",
                "llama_cpp/threads_split_kv/3/repack/end_to_end",
                "llama_cpp/threads_split_kv/8/repack/end_to_end",
                "llama_cpp/threads_split_kv/14/repack/end_to_end",
            ],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp haswell, on llama.cpp's Q5_K_M, Q3_K_M, Q2_K and IQ4_XS mixes and uniform Q4_1, Q5_0, Q5_1 and IQ4_NL models (IQ4_NL in iq4_nl_8x8), run as llama-cli runs it: a prompt of 157 ids in batches of 96 and ubatches of 64, the last row's logits, greedy steps; 2 threads, and 1, 3, 8 and 14 on the Q5_K_M mix (26 ids in ubatches of 16); F16 KV cache with flash attention",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/quant/haswell/repack/cli/", "llama_cpp/quant/haswell/repack/threads/"],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp haswell, on llama.cpp's Q5_K_M and Q2_K mixes and a uniform IQ4_NL model (iq4_nl_8x8) at llama-cli's own sizes: a prompt of 600 ids as ubatches of 512 and 88 in a context of 1024, the last row's logits, greedy steps attending 600+ cells (split-KV flash attention); on the Q5_K_M mix decode steps after 4096 and 16384 cells the haswell build filled with the same model and saved, in a context of 32768 (at 16384 cells also 14 threads: split-KV flash attention in 14 parts); F16 KV cache with flash attention",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/quant/haswell/repack/cli_defaults/", "llama_cpp/quant/haswell/repack/long/"],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp haswell, repack on, on the qwen2 model (golden/model/qwen2.toml: Q, K and V biases, no Q/K norm): decode and prompt mode; as llama-cli runs it, a prompt of 157 ids in batches of 96 and ubatches of 64 and one of 600 ids as ubatches of 512 and 88 in a context of 1024, the last row's logits, greedy steps; 2 threads, and 3 (26 ids in ubatches of 16); F16 KV cache with flash attention",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/arch/qwen2/haswell/repack/"],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp haswell, repack on, on the llama model (golden/model/llama.toml: normal-mode RoPE on adjacent pairs with Llama 3.1's frequency factors, no norm or bias): decode and prompt mode; as llama-cli runs it, a prompt of 157 ids in batches of 96 and ubatches of 64 and one of 600 ids as ubatches of 512 and 88 in a context of 1024, the last row's logits, greedy steps; 2 threads, and 3 (26 ids in ubatches of 16); F16 KV cache with flash attention",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/arch/llama/haswell/repack/"],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp haswell, repack on, on the qwen3moe model (golden/model/qwen3moe.toml: an F32 router, softmax, the top 4 of 8 experts by libstdc++'s sort, each expert's matmul as ggml's MUL_MAT_ID runs it, the weighted sum in slot order): decode and prompt mode; as llama-cli runs it, a prompt of 157 ids in batches of 96 and ubatches of 64 and one of 600 ids as ubatches of 512 and 88 in a context of 1024, the last row's logits, greedy steps; 2 threads, and 3 (26 ids in ubatches of 16); F16 KV cache with flash attention",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/arch/qwen3moe/haswell/repack/"],
        },
    ]),
    recipe: Recipe {
        act_k: ActRule::Q8KRef,
        act_legacy: ActRule::Q8_0X86,
        accumulation: Accumulation::X86Avx2,
        contraction: Contraction::FusedAccumulate,
        layout: WeightLayout::X86Repack8x8,
        matmul: MatmulPath::RepackedGemmGemv { gemm_act: ActRule::Q8KX86x4 },
        plain_gemm: crate::lane::PlainGemm::X86TiledK,
        elem: crate::elem::ElemFlavour::Avx2,
    },
    portable: &TWIN,
};

/// The portable twin: the shared repacked matmul over the `x86_64-avx2` twin.
static TWIN: RepackedLane = RepackedLane { plain: &Avx2Twin, scheme: scheme(group) };

/// The haswell repack buffer with `group` as its row-group kernels (the twins here, the
/// AVX2 intrinsics in `tiercheck-x86_64`).
pub const fn scheme(group: crate::lane::GroupFn) -> RepackScheme {
    RepackScheme {
        lane: "x86_64-avx2-repack",
        layout: |ty, n| x86_layout(ty).filter(|l| n.is_multiple_of(l.cols())),
        act_rule: row_rule,
        group,
        unreproduced: &[],
    }
}

/// The layout x86 repacks `ty` into, if any (when the row count is a multiple of 8).
pub fn x86_layout(ty: GgmlType) -> Option<RepackLayout> {
    match ty {
        GgmlType::Q4_K => Some(RepackLayout::Q4K8x8),
        GgmlType::Q4_0 => Some(RepackLayout::Q4_0_8x8),
        GgmlType::IQ4_NL => Some(RepackLayout::Iq4Nl8x8),
        _ => None,
    }
}

/// The activation rule of a repacked row: q4_K gemm rows by the x86 4-row q8_K
/// quantizer, q4_K gemv rows by the reference q8_K rule, q4_0 rows by the x86 q8_0 rule.
pub fn row_rule(layout: RepackLayout, path: RowPath) -> ActRule {
    match (layout, path) {
        (RepackLayout::Q4K8x8, RowPath::Gemm) => ActRule::Q8KX86x4,
        (RepackLayout::Q4K8x8, RowPath::Gemv) => ActRule::Q8KRef,
        _ => ActRule::Q8_0X86,
    }
}

/// One row group by the twin kernels (the portable twin's [`RepackScheme::group`]).
pub fn group(
    layout: RepackLayout,
    path: RowPath,
    bytes: &[u8],
    act: &[u8],
    out: &mut [f32],
) -> Result<(), KernelError> {
    match layout {
        RepackLayout::Q4K8x8 => {
            let blocks: &[BlockQ4Kx8] = bytemuck::cast_slice(bytes);
            let y = cast_blocks(GgmlType::Q8_K, act)?;
            out.copy_from_slice(&match path {
                RowPath::Gemm => kernels::gemm_q4_k_8x8(blocks, y),
                RowPath::Gemv => kernels::gemv_q4_k_8x8(blocks, y),
            });
        }
        RepackLayout::Q4_0_8x8 => {
            let blocks: &[BlockQ4_0x8] = bytemuck::cast_slice(bytes);
            out.copy_from_slice(&kernels::gemv_q4_0_8x8(blocks, cast_blocks(GgmlType::Q8_0, act)?));
        }
        RepackLayout::Iq4Nl8x8 => {
            let blocks: &[BlockIq4Nlx8] = bytemuck::cast_slice(bytes);
            let y = cast_blocks(GgmlType::Q8_0, act)?;
            out.copy_from_slice(&kernels::gemv_iq4_nl_8x8(blocks, y));
        }
        other => return Err(unsupported_layout("x86_64-avx2-repack matmul", other)),
    }
    Ok(())
}
