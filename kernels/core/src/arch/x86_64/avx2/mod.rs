//! The `x86_64-avx2` lane: ggml's haswell tier (AVX2 + FMA + F16C, no AVX-512), plain
//! (not repacked) weights. Activations: q8_K by the reference quantizer (the x86
//! `quantize_row_q8_K` calls it, and ggml-base is built without FMA), q8_0 by the AVX2
//! quantizer ([`ActRule::Q8_0X86`]: id = 127/max, nearest even). Dot products: the
//! AVX2 `ggml_vec_dot_*` kernels ([`vec_dot`]). Matmul: vec_dot per (weight
//! row, activation row) for Q4_0/Q8_0 at any m (llamafile's tinyBLAS_Q0_AVX gives the
//! same bits) and for K-quants at m < 8; Q4_K and Q6_K at m >= 8 by ggml's x86 tiled
//! K-quant matmul ([`tiled`], [`crate::lane::PlainGemm::X86TiledK`]), llama.cpp's
//! default (`GGML_CPU_TILED_MM` unset).

pub mod tiled;
pub mod vec_dot;

use crate::blocks::cast_blocks as cast;
use crate::error::KernelError;
use crate::lane::dispatch::{check_pair, dispatch_vec_dot, VecDotFns};
use crate::lane::{
    act_rows, vec_dot_rows, Accumulation, Arch, Contraction, Kernels, Lane, Level, MatmulPath,
    Proof, Recipe, Status, WeightLayout,
};
use crate::quant::ActRule;
use crate::weight_matrix::WeightMatrix;
use crate::GgmlType;
use vec_dot as avx2;

/// The x86 tiers' activation rule for weights of `wtype` (each type's `vec_dot_type`,
/// quantized by the tier's `from_float`): q8_K by the reference quantizer for the
/// K-quants and IQ4_XS, q8_0 by the AVX2 quantizer for Q4_0, Q5_0, Q8_0 and IQ4_NL,
/// q8_1 by the AVX2 quantizer for Q4_1 and Q5_1.
pub fn x86_act_rule(wtype: GgmlType) -> Result<ActRule, KernelError> {
    match wtype {
        GgmlType::Q2_K | GgmlType::Q3_K | GgmlType::Q5_K | GgmlType::IQ4_XS => {
            Ok(X86_64_AVX2.recipe.act_k)
        }
        GgmlType::Q5_0 | GgmlType::IQ4_NL => Ok(X86_64_AVX2.recipe.act_legacy),
        GgmlType::Q4_1 | GgmlType::Q5_1 => Ok(ActRule::Q8_1X86),
        _ => X86_64_AVX2.recipe.act_rule(wtype, "x86_64-avx2 matmul"),
    }
}

/// Whether the x86 builds multiply `m` rows of plain `wtype` weights by llamafile's
/// `tinyBLAS_Q0_AVX` with bits that differ from `vec_dot`'s: IQ4_NL at two or more rows
/// (`llamafile_sgemm` declines one row). Q4_0, Q5_0 and Q8_0 take it too, with
/// `vec_dot`'s bits (one accumulator, the same products and `hsum`).
pub fn tinyblas_applies(wtype: GgmlType, m: usize) -> bool {
    wtype == GgmlType::IQ4_NL && m >= 2
}

/// `out[i*n + j]` by `kernel` on every (weight row j, activation row i): the tinyBLAS
/// outputs (each one pass over k; the tile shape and the threads change no bit).
pub fn tinyblas_rows(
    w: &WeightMatrix<'_>,
    act: &[&[u8]],
    kernel: fn(&[crate::blocks::BlockIq4Nl], &[crate::blocks::BlockQ8_0]) -> f32,
) -> Result<Vec<f32>, KernelError> {
    let n = w.n();
    let mut out = vec![0.0f32; act.len() * n];
    for (i, a) in act.iter().enumerate() {
        let y = cast(GgmlType::Q8_0, a)?;
        for j in 0..n {
            out[i * n + j] = kernel(cast(GgmlType::IQ4_NL, w.row(j))?, y);
        }
    }
    Ok(out)
}

/// Portable twin of the `x86_64-avx2` lane.
#[derive(Debug, Default)]
pub struct Avx2Twin;

/// The `x86_64-avx2` lane.
pub static X86_64_AVX2: Lane = Lane {
    name: "x86_64-avx2",
    arch: Arch::X86_64,
    summary: "ggml haswell tier: AVX2+FMA vec_dot, x86 q8_0 activations, plain weights",
    recipe: Recipe {
        act_k: ActRule::Q8KRef,
        act_legacy: ActRule::Q8_0X86,
        accumulation: Accumulation::X86Avx2,
        contraction: Contraction::FusedAccumulate,
        layout: WeightLayout::Plain,
        matmul: MatmulPath::VecDotPerRow,
        plain_gemm: crate::lane::PlainGemm::X86TiledK,
        elem: crate::elem::ElemFlavour::Avx2,
    },
    status: Status::Proven(&[
        Proof {
            level: Level::Kernel,
            against: "ggml haswell",
            only: "",
            suite: "oracle_ref",
            trials: &["oracle/haswell/vec_dot", "oracle/haswell/from_float"],
        },
        Proof {
            level: Level::Kernel,
            against: "ggml haswell mul_mat",
            only: "",
            suite: "oracle_x86_lanes",
            trials: &["oracle/haswell/matmul-plain"],
        },
        Proof {
            level: Level::DecoderDecode,
            against: "llama.cpp haswell, repack off (F16 KV cache with flash attention, llama.cpp's default, and F32 without)",
            only: "",
            suite: "model_oracle",
            trials: &[
                "llama_cpp/no_repack/decode/end_to_end",
                "llama_cpp/no_repack/decode/layer_local",
                "llama_cpp/f32_off/no_repack/decode/end_to_end",
                "llama_cpp/f32_off/no_repack/decode/layer_local",
            ],
        },
        Proof {
            level: Level::DecoderPrompt,
            against: "llama.cpp haswell, repack off (F16 KV cache with flash attention, llama.cpp's default, and F32 without)",
            only: "",
            suite: "model_oracle",
            trials: &[
                "llama_cpp/no_repack/prompt/end_to_end",
                "llama_cpp/no_repack/prompt/layer_local",
                "llama_cpp/f32_off/no_repack/prompt/end_to_end",
                "llama_cpp/f32_off/no_repack/prompt/layer_local",
            ],
        },
        Proof {
            level: Level::DecoderDecode,
            against: "llama.cpp haswell, repack off, on llama.cpp's Q5_K_M, Q3_K_M, Q2_K and IQ4_XS mixes and uniform Q4_1, Q5_0, Q5_1 and IQ4_NL models (F16 KV cache with flash attention)",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/quant/haswell/no_repack/decode/"],
        },
        Proof {
            level: Level::DecoderPrompt,
            against: "llama.cpp haswell, repack off, on llama.cpp's Q5_K_M, Q3_K_M, Q2_K and IQ4_XS mixes and uniform Q4_1, Q5_0, Q5_1 and IQ4_NL models (F16 KV cache with flash attention)",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/quant/haswell/no_repack/prompt/"],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp haswell, repack off, on the embedded Q4_K_M model (q4_K and q6_K weights), run as llama-cli runs it: a prompt in batches and ubatches (157 ids in ubatches of 64, and 600 ids in ubatches of 512 and 88 in 1024 cells), the last row's logits, greedy steps; 1, 2, 3, 8 and 14 threads; decode steps after 4096 and 16384 cells saved by the haswell build, in a context of 32768; F16 KV cache with flash attention and F32 without",
            only: "",
            suite: "model_oracle",
            trials: &[
                "llama_cpp/cli/no_repack/end_to_end",
                "llama_cpp/long/4096/no_repack/end_to_end",
                "llama_cpp/long/4096/f32_off/no_repack/end_to_end",
                "llama_cpp/long/16384/no_repack/end_to_end",
                "llama_cpp/long/16384/f32_off/no_repack/end_to_end",
                "llama_cpp/cli/no_repack/layer_local",
                "llama_cpp/cli/f32_off/no_repack/end_to_end",
                "llama_cpp/threads/1/no_repack/end_to_end",
                "llama_cpp/threads/3/no_repack/end_to_end",
                "llama_cpp/threads/8/no_repack/end_to_end",
                "llama_cpp/threads/14/no_repack/end_to_end",
                "llama_cpp/cli_defaults/no_repack/end_to_end",
                "llama_cpp/cli_defaults/f32_off/no_repack/end_to_end",
            ],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp haswell, repack off, on llama.cpp's Q5_K_M, Q3_K_M, Q2_K and IQ4_XS mixes and uniform Q4_1, Q5_0, Q5_1 and IQ4_NL models, run as llama-cli runs it: a prompt of 157 ids in batches of 96 and ubatches of 64, the last row's logits, greedy steps; 2 threads, and 1, 3, 8 and 14 on the IQ4_XS mix (26 ids in ubatches of 16); F16 KV cache with flash attention",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/quant/haswell/no_repack/cli/", "llama_cpp/quant/haswell/no_repack/threads/"],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp haswell, repack off, on llama.cpp's Q3_K_M and IQ4_XS mixes and uniform Q4_1, Q5_0 and Q5_1 models at llama-cli's own sizes: a prompt of 600 ids as ubatches of 512 and 88 in a context of 1024, the last row's logits, greedy steps attending 600+ cells (split-KV flash attention); on the IQ4_XS mix and the Q4_1 model decode steps after 4096 cells the haswell build filled with the same model and saved, in a context of 32768; F16 KV cache with flash attention",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/quant/haswell/no_repack/cli_defaults/", "llama_cpp/quant/haswell/no_repack/long/"],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp haswell, repack off, on the qwen2 model (golden/model/qwen2.toml: Q, K and V biases, no Q/K norm): decode and prompt mode; as llama-cli runs it, a prompt of 157 ids in batches of 96 and ubatches of 64 and one of 600 ids as ubatches of 512 and 88 in a context of 1024, the last row's logits, greedy steps; 2 threads, and 3 (26 ids in ubatches of 16); F16 KV cache with flash attention",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/arch/qwen2/haswell/no_repack/"],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp haswell, repack off, on the llama model (golden/model/llama.toml: normal-mode RoPE on adjacent pairs with Llama 3.1's frequency factors, no norm or bias): decode and prompt mode; as llama-cli runs it, a prompt of 157 ids in batches of 96 and ubatches of 64 and one of 600 ids as ubatches of 512 and 88 in a context of 1024, the last row's logits, greedy steps; 2 threads, and 3 (26 ids in ubatches of 16); F16 KV cache with flash attention",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/arch/llama/haswell/no_repack/"],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp haswell, repack off, on the qwen3moe model (golden/model/qwen3moe.toml: an F32 router, softmax, the top 4 of 8 experts by libstdc++'s sort, each expert's matmul as ggml's MUL_MAT_ID runs it, the weighted sum in slot order): decode and prompt mode; as llama-cli runs it, a prompt of 157 ids in batches of 96 and ubatches of 64 and one of 600 ids as ubatches of 512 and 88 in a context of 1024, the last row's logits, greedy steps; 2 threads, and 3 (26 ids in ubatches of 16); F16 KV cache with flash attention",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/arch/qwen3moe/haswell/no_repack/"],
        },
    ]),
    portable: &Avx2Twin,
};

impl Kernels for Avx2Twin {
    fn act_rule(&self, wtype: GgmlType) -> Result<ActRule, KernelError> {
        x86_act_rule(wtype)
    }

    fn vec_dot(&self, wtype: GgmlType, w_row: &[u8], act: &[u8]) -> Result<f32, KernelError> {
        let fns = VecDotFns {
            q4_0: avx2::vec_dot_q4_0_q8_0,
            q8_0: avx2::vec_dot_q8_0_q8_0,
            q4_k: avx2::vec_dot_q4_k_q8_k,
            q6_k: avx2::vec_dot_q6_k_q8_k,
        };
        let atype = self.act_rule(wtype)?.format();
        check_pair(wtype, w_row, atype, act)?;
        let (w, a) = (w_row, act);
        Ok(match wtype {
            GgmlType::Q4_1 => avx2::vec_dot_q4_1_q8_1(cast(wtype, w)?, cast(atype, a)?),
            GgmlType::Q5_0 => avx2::vec_dot_q5_0_q8_0(cast(wtype, w)?, cast(atype, a)?),
            GgmlType::Q5_1 => avx2::vec_dot_q5_1_q8_1(cast(wtype, w)?, cast(atype, a)?),
            GgmlType::Q2_K => avx2::vec_dot_q2_k_q8_k(cast(wtype, w)?, cast(atype, a)?),
            GgmlType::Q3_K => avx2::vec_dot_q3_k_q8_k(cast(wtype, w)?, cast(atype, a)?),
            GgmlType::Q5_K => avx2::vec_dot_q5_k_q8_k(cast(wtype, w)?, cast(atype, a)?),
            GgmlType::IQ4_NL => avx2::vec_dot_iq4_nl_q8_0(cast(wtype, w)?, cast(atype, a)?),
            GgmlType::IQ4_XS => avx2::vec_dot_iq4_xs_q8_k(cast(wtype, w)?, cast(atype, a)?),
            _ => return dispatch_vec_dot(self, &fns, "x86_64-avx2 vec_dot", wtype, w_row, act),
        })
    }

    fn matmul_quantized(
        &self,
        w: &WeightMatrix<'_>,
        act: &[u8],
        m: usize,
    ) -> Result<Vec<f32>, KernelError> {
        if tiled::applies(w.ty(), m) {
            tiled::matmul(w, &act_rows(self, w, act, m)?)
        } else if tinyblas_applies(w.ty(), m) {
            tinyblas_rows(w, &act_rows(self, w, act, m)?, avx2::tinyblas_iq4_nl_q8_0)
        } else {
            vec_dot_rows(self, w, act, m)
        }
    }

    fn id_takes_plain_gemm(&self, wtype: GgmlType, m: usize) -> bool {
        tiled::applies(wtype, m)
    }

    fn plain_path(&self, wtype: GgmlType, m: usize) -> &'static str {
        if tiled::applies(wtype, m) {
            "tiled"
        } else if tinyblas_applies(wtype, m) {
            "tinyblas"
        } else {
            "vec_dot"
        }
    }
}
