//! The `x86_64-avx512` lane: ggml's AVX-512 tier, the zen4 variant of ggml-cpu
//! (`GGML_CPU_ALL_VARIANTS`: haswell's flags plus AVX512 F/CD/VL/DQ/BW, VBMI, VNNI, BF16),
//! plain (not repacked) weights.
//!
//! What the zen4 build computes differently from the haswell one was found by reading
//! the sources under both flag sets and checked against the zen4 llama.cpp build
//! (`model_oracle`, `llama_cpp/zen4/...`):
//!
//! - the quantized matmuls give haswell's bits: the `ggml_vec_dot_*` kernels keep their
//!   256-bit AVX2 bodies (VNNI's `dpbusd` replaces `maddubs` + `madd` in the integer
//!   pair sums, exact either way for these operands), the activation quantizers and the
//!   tiled K-quant matmul are the same code, and llamafile's `tinyBLAS_Q0_AVX` equals
//!   vec_dot as on haswell. So the lane's matmul kernels are `x86_64-avx2`'s
//!   ([`super::avx2`]), its recipe the same.
//! - every f32 loop of the decoder is sixteen floats wide, with its own `expf`: the
//!   [`crate::elem::ElemFlavour::Avx512`] flavour (softmax, SiLU, `ggml_vec_dot_f32` and
//!   `ggml_vec_dot_f16`, tinyBLAS `<16, __m512>` for f32 and F16 attention).
//!
//! Not covered: the zen4 build with its repack buffer on (its AVX-512 repacked gemm
//! bodies are not reproduced; no `x86_64-avx512-repack` lane).

use crate::lane::{Arch, Lane, Level, Proof, Recipe, Status};

use super::avx2::{Avx2Twin, X86_64_AVX2};

/// The `x86_64-avx512` lane.
pub static X86_64_AVX512: Lane = Lane {
    name: "x86_64-avx512",
    arch: Arch::X86_64,
    summary: "ggml zen4 tier (AVX-512): haswell's quantized matmuls, 16-wide f32 loops",
    recipe: Recipe { elem: crate::elem::ElemFlavour::Avx512, ..X86_64_AVX2.recipe },
    status: Status::Proven(&[
        Proof {
            level: Level::DecoderDecode,
            against: "llama.cpp zen4, repack off (F16 KV cache with flash attention, \
                      llama.cpp's default, and F32 without; run where the host has AVX-512)",
            only: "",
            suite: "model_oracle",
            trials: &[
                "llama_cpp/zen4/no_repack/decode/end_to_end",
                "llama_cpp/zen4/no_repack/decode/layer_local",
                "llama_cpp/zen4/f32_off/no_repack/decode/end_to_end",
                "llama_cpp/zen4/f32_off/no_repack/decode/layer_local",
            ],
        },
        Proof {
            level: Level::DecoderPrompt,
            against: "llama.cpp zen4, repack off (F16 KV cache with flash attention, \
                      llama.cpp's default, and F32 without; run where the host has AVX-512)",
            only: "",
            suite: "model_oracle",
            trials: &[
                "llama_cpp/zen4/no_repack/prompt/end_to_end",
                "llama_cpp/zen4/no_repack/prompt/layer_local",
                "llama_cpp/zen4/f32_off/no_repack/prompt/end_to_end",
                "llama_cpp/zen4/f32_off/no_repack/prompt/layer_local",
            ],
        },
        Proof {
            level: Level::DecoderDecode,
            against: "llama.cpp zen4, repack off (run where the host has AVX-512), on llama.cpp's Q5_K_M, Q3_K_M, Q2_K and IQ4_XS mixes and uniform Q4_1, Q5_0, Q5_1 and IQ4_NL models (F16 KV cache with flash attention)",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/quant/zen4/no_repack/decode/"],
        },
        Proof {
            level: Level::DecoderPrompt,
            against: "llama.cpp zen4, repack off (run where the host has AVX-512), on llama.cpp's Q5_K_M, Q3_K_M, Q2_K and IQ4_XS mixes and uniform Q4_1, Q5_0, Q5_1 and IQ4_NL models (F16 KV cache with flash attention)",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/quant/zen4/no_repack/prompt/"],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp zen4, repack off, on the embedded Q4_K_M model (q4_K and q6_K weights), run as llama-cli runs it: a prompt of 157 ids in batches of 96 and ubatches of 64, the last row's logits, greedy steps; 1, 2, 3, 8 and 14 threads; decode steps after 4096 and 16384 cells saved by the haswell build, in a context of 32768; F16 KV cache with flash attention and F32 without",
            only: "",
            suite: "model_oracle",
            trials: &[
                "llama_cpp/zen4/cli/no_repack/end_to_end",
                "llama_cpp/zen4/long/4096/no_repack/end_to_end",
                "llama_cpp/zen4/long/4096/f32_off/no_repack/end_to_end",
                "llama_cpp/zen4/long/16384/no_repack/end_to_end",
                "llama_cpp/zen4/long/16384/f32_off/no_repack/end_to_end",
                "llama_cpp/zen4/long/16384/threads/1/no_repack/end_to_end",
                "llama_cpp/zen4/long/16384/threads/3/no_repack/end_to_end",
                "llama_cpp/zen4/long/16384/threads/8/no_repack/end_to_end",
                "llama_cpp/zen4/long/16384/threads/14/no_repack/end_to_end",
                "llama_cpp/zen4/cli/no_repack/layer_local",
                "llama_cpp/zen4/cli/f32_off/no_repack/end_to_end",
                "llama_cpp/zen4/threads/1/no_repack/end_to_end",
                "llama_cpp/zen4/threads/3/no_repack/end_to_end",
                "llama_cpp/zen4/threads/8/no_repack/end_to_end",
                "llama_cpp/zen4/threads/14/no_repack/end_to_end",
            ],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp zen4, repack off, on llama.cpp's Q5_K_M mix and a uniform IQ4_NL model, run as llama-cli runs it: a prompt of 157 ids in batches of 96 and ubatches of 64, the last row's logits, greedy steps; 2 threads; F16 KV cache with flash attention",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/quant/zen4/no_repack/cli/"],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp zen4, repack off, on llama.cpp's Q5_K_M and IQ4_XS mixes at llama-cli's own sizes: a prompt of 600 ids as ubatches of 512 and 88 in a context of 1024, the last row's logits, greedy steps attending 600+ cells (split-KV flash attention), the Q5_K_M mix at 2 threads and 3; and on the Q5_K_M mix decode steps after 4096 and 16384 cells the haswell build filled with the same model and saved, in a context of 32768; F16 KV cache with flash attention",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/quant/zen4/no_repack/cli_defaults/", "llama_cpp/quant/zen4/no_repack/threads/", "llama_cpp/quant/zen4/no_repack/long/"],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp zen4, repack off, on the qwen2 model (golden/model/qwen2.toml: Q, K and V biases, no Q/K norm): decode and prompt mode; as llama-cli runs it, a prompt of 157 ids in batches of 96 and ubatches of 64 and one of 600 ids as ubatches of 512 and 88 in a context of 1024, the last row's logits, greedy steps; 2 threads, and 3 (26 ids in ubatches of 16); F16 KV cache with flash attention",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/arch/qwen2/zen4/no_repack/"],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp zen4, repack off, on the llama model (golden/model/llama.toml: normal-mode RoPE on adjacent pairs with Llama 3.1's frequency factors, no norm or bias): decode and prompt mode; as llama-cli runs it, a prompt of 157 ids in batches of 96 and ubatches of 64 and one of 600 ids as ubatches of 512 and 88 in a context of 1024, the last row's logits, greedy steps; 2 threads, and 3 (26 ids in ubatches of 16); F16 KV cache with flash attention",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/arch/llama/zen4/no_repack/"],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp zen4, repack off, on the qwen3moe model (golden/model/qwen3moe.toml: an F32 router, softmax, the top 4 of 8 experts by libstdc++'s sort, each expert's matmul as ggml's MUL_MAT_ID runs it, the weighted sum in slot order): decode and prompt mode; as llama-cli runs it, a prompt of 157 ids in batches of 96 and ubatches of 64 and one of 600 ids as ubatches of 512 and 88 in a context of 1024, the last row's logits, greedy steps; 2 threads, and 3 (26 ids in ubatches of 16); F16 KV cache with flash attention",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/arch/qwen3moe/zen4/no_repack/"],
        },
    ]),
    portable: &Avx2Twin,
};
