//! The `aarch64-neon` lane: ggml built by GCC for aarch64 with NEON and dotprod
//! (`-march=armv8.2-a+dotprod`), plain weights, `nrc == 1` vec_dot (the decode path):
//!
//! - activations: q8_K by `quantize_row_q8_K_ref` as GCC compiles it on aarch64, with
//!   `nearest_int(iscale * x)` fused into one multiply-add ([`ActRule::Q8KFusedNearest`]),
//!   for the K-quants and IQ4_XS; q8_0 by the NEON quantizer ([`ActRule::Q8_0Neon`]) for
//!   Q4_0, Q5_0, Q8_0 and IQ4_NL; q8_1 by the NEON quantizer ([`ActRule::Q8_1Neon`]) for
//!   Q4_1 and Q5_1 ([`neon_act_rule`]);
//! - dot products: the NEON kernels of all twelve weight types with GCC's contractions
//!   ([`vec_dot`]);
//! - dequantize: `dequantize_row_q4_K` contracted to `fma(d1, q, -m1)` by GCC (the other
//!   formats have nothing to contract and equal `ref`).
//!
//! - the plain Q4_0 and Q8_0 matmul with two or more activation rows: llamafile's
//!   `tinyBLAS_Q0_ARM` ([`tinyblas`], [`ARM_TINYBLAS_Q0`]); the other types (the ARM
//!   tinyBLAS takes no others) and single rows take `vec_dot`.
//!
//! On i8mm builds ggml runs these vec_dots two rows at a time (smmla) when both row
//! counts are even; that is the `aarch64-i8mm` family's business, not this lane's.

pub mod tinyblas;
pub mod vec_dot;

use crate::blocks::{cast_blocks, BlockQ4K, QK_K};
use crate::error::KernelError;
use crate::lane::dispatch::{check_pair, dispatch_vec_dot, VecDotFns};
use crate::lane::{
    vec_dot_rows, Accumulation, Arch, Contraction, Kernels, Lane, Level, MatmulPath, PlainGemm,
    Proof, Recipe, Status, WeightLayout,
};
use crate::quant::ActRule;
use crate::weight_matrix::WeightMatrix;
use crate::GgmlType;
use vec_dot as neon;

/// The dotprod build's plain matmul: llamafile's `tinyBLAS_Q0_ARM` for Q4_0 and Q8_0 at
/// two or more activation rows, `vec_dot` per pair otherwise.
pub const ARM_TINYBLAS_Q0: PlainGemm = PlainGemm::named("arm-tinyblas-q0-m2");

/// ggml's plain matmul on the dotprod build over `kernels`' activation format, with
/// `dot` as one `tinyBLAS_Q0_ARM` output (twin or native) for (type, weight row,
/// activation row): `out[i * n + j]`.
pub fn matmul_tinyblas<K: Kernels + ?Sized>(
    kernels: &K,
    w: &WeightMatrix<'_>,
    act: &[u8],
    m: usize,
    dot: impl Fn(GgmlType, &[u8], &[u8]) -> Result<f32, KernelError>,
) -> Result<Vec<f32>, KernelError> {
    if !tinyblas::applies(w.ty(), m) || w.k() == 0 {
        return vec_dot_rows(kernels, w, act, m);
    }
    let atype = kernels.act_rule(w.ty())?.format();
    let rows = crate::lane::act_rows(kernels, w, act, m)?;
    let n = w.n();
    let mut out = vec![0.0f32; m * n];
    for (i, a) in rows.into_iter().enumerate() {
        for j in 0..n {
            crate::lane::dispatch::check_pair(w.ty(), w.row(j), atype, a)?;
            out[i * n + j] = dot(w.ty(), w.row(j), a)?;
        }
    }
    Ok(out)
}

/// One twin `tinyBLAS_Q0_ARM` output.
fn tinyblas_dot(ty: GgmlType, w: &[u8], a: &[u8]) -> Result<f32, KernelError> {
    let y = cast_blocks(GgmlType::Q8_0, a)?;
    Ok(match ty {
        GgmlType::Q4_0 => tinyblas::dot_q4_0(cast_blocks(ty, w)?, y),
        GgmlType::Q8_0 => tinyblas::dot_q8_0(cast_blocks(ty, w)?, y),
        other => return Err(KernelError::Unsupported { op: "tinyBLAS_Q0_ARM", ty: other.name() }),
    })
}

/// Portable twin of the `aarch64-neon` lane.
#[derive(Debug, Default)]
pub struct NeonTwin;

/// The `aarch64-neon` lane.
pub static AARCH64_NEON: Lane = Lane {
    name: "aarch64-neon",
    arch: Arch::Aarch64,
    summary: "ggml aarch64 (GCC, dotprod): NEON vec_dot nrc=1 with GCC's fused multiply-adds; \
              llamafile's tinyBLAS_Q0_ARM for plain q4_0/q8_0 from 2 rows",
    recipe: Recipe {
        act_k: ActRule::Q8KFusedNearest,
        act_legacy: ActRule::Q8_0Neon,
        accumulation: Accumulation::NeonSerial,
        contraction: Contraction::GccAarch64,
        layout: WeightLayout::Plain,
        matmul: MatmulPath::VecDotPerRow,
        plain_gemm: ARM_TINYBLAS_Q0,
        elem: crate::elem::ElemFlavour::Neon,
    },
    status: Status::Proven(&[
        Proof {
            level: Level::Kernel,
            against: "ggml aarch64 dotprod build (GCC) under qemu",
            only: "",
            suite: "oracle_arm_lanes",
            trials: &[
                "oracle/arm-dotprod/vec_dot",
                "oracle/arm-dotprod/from_float",
                "oracle/arm-dotprod/matmul-plain",
            ],
        },
        Proof {
            level: Level::DecoderDecode,
            against: "llama.cpp aarch64 dotprod build under qemu, repack off (F16 KV cache with flash attention, llama.cpp's default, and F32 without)",
            only: "",
            suite: "model_oracle",
            trials: &[
                "llama_cpp/arm-dotprod/no_repack/decode/end_to_end",
                "llama_cpp/arm-dotprod/no_repack/decode/layer_local",
                "llama_cpp/arm-dotprod/f32_off/no_repack/decode/end_to_end",
                "llama_cpp/arm-dotprod/f32_off/no_repack/decode/layer_local",
            ],
        },
        Proof {
            level: Level::DecoderPrompt,
            against: "llama.cpp aarch64 dotprod build under qemu, repack off (F16 KV cache with flash attention, llama.cpp's default, and F32 without)",
            only: "",
            suite: "model_oracle",
            trials: &[
                "llama_cpp/arm-dotprod/no_repack/prompt/end_to_end",
                "llama_cpp/arm-dotprod/no_repack/prompt/layer_local",
                "llama_cpp/arm-dotprod/f32_off/no_repack/prompt/end_to_end",
                "llama_cpp/arm-dotprod/f32_off/no_repack/prompt/layer_local",
            ],
        },
        Proof {
            level: Level::DecoderDecode,
            against: "llama.cpp aarch64 dotprod build under qemu, repack off, on llama.cpp's Q3_K_M mix (F16 KV cache with flash attention)",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/quant/arm-dotprod/no_repack/decode/"],
        },
        Proof {
            level: Level::DecoderPrompt,
            against: "llama.cpp aarch64 dotprod build under qemu, repack off, on llama.cpp's Q3_K_M and IQ4_XS mixes and uniform Q2_K, Q4_1, Q5_1 and IQ4_NL models (F16 KV cache with flash attention)",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/quant/arm-dotprod/no_repack/prompt/"],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp aarch64 dotprod build under qemu, repack off, on the embedded Q4_K_M model (q4_K and q6_K weights), run as llama-cli runs it: a prompt of 157 ids in batches of 96 and ubatches of 64, the last row's logits, greedy steps; 2 and 3 threads; decode steps after 4096 and 16384 cells saved by the haswell build, in a context of 32768; F16 KV cache with flash attention and F32 without",
            only: "",
            suite: "model_oracle",
            trials: &[
                "llama_cpp/arm-dotprod/cli/no_repack/end_to_end",
                "llama_cpp/arm-dotprod/long/4096/no_repack/end_to_end",
                "llama_cpp/arm-dotprod/long/4096/f32_off/no_repack/end_to_end",
                "llama_cpp/arm-dotprod/long/16384/no_repack/end_to_end",
                "llama_cpp/arm-dotprod/long/16384/f32_off/no_repack/end_to_end",
                "llama_cpp/arm-dotprod/cli/no_repack/layer_local",
                "llama_cpp/arm-dotprod/cli/f32_off/no_repack/end_to_end",
                "llama_cpp/arm-dotprod/threads/3/no_repack/end_to_end",
            ],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp aarch64 dotprod build under qemu, repack off, on llama.cpp's IQ4_XS mix, run as llama-cli runs it: a prompt of 157 ids in batches of 96 and ubatches of 64, the last row's logits, greedy steps; 2 threads; F16 KV cache with flash attention",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/quant/arm-dotprod/no_repack/cli/"],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp aarch64 dotprod build under qemu, repack off, on llama.cpp's IQ4_XS mix at llama-cli's own sizes: a prompt of 600 ids as ubatches of 512 and 88 in a context of 1024, the last row's logits, greedy steps attending 600+ cells (split-KV flash attention); 2 threads; F16 KV cache with flash attention",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/quant/arm-dotprod/no_repack/cli_defaults/"],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp aarch64 dotprod build under qemu, repack off, on the qwen2 model (golden/model/qwen2.toml: Q, K and V biases, no Q/K norm): prompt mode; as llama-cli runs it, a prompt of 157 ids in batches of 96 and ubatches of 64 and one of 600 ids as ubatches of 512 and 88 in a context of 1024, the last row's logits, greedy steps; 2 threads, and 3 (26 ids in ubatches of 16); F16 KV cache with flash attention",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/arch/qwen2/arm-dotprod/no_repack/"],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp aarch64 dotprod build under qemu, repack off, on the llama model (golden/model/llama.toml: normal-mode RoPE on adjacent pairs with Llama 3.1's frequency factors, no norm or bias): prompt mode; as llama-cli runs it, a prompt of 157 ids in batches of 96 and ubatches of 64 and one of 600 ids as ubatches of 512 and 88 in a context of 1024, the last row's logits, greedy steps; 2 threads, and 3 (26 ids in ubatches of 16); F16 KV cache with flash attention",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/arch/llama/arm-dotprod/no_repack/"],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp aarch64 dotprod build under qemu, repack off, on the qwen3moe model (golden/model/qwen3moe.toml: an F32 router, softmax, the top 4 of 8 experts by libstdc++'s sort, each expert's matmul as ggml's MUL_MAT_ID runs it, the weighted sum in slot order): prompt mode; as llama-cli runs it, a prompt of 600 ids as ubatches of 512 and 88 in a context of 1024, the last row's logits, greedy steps; 2 threads; F16 KV cache with flash attention",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/arch/qwen3moe/arm-dotprod/no_repack/"],
        },
    ]),
    portable: &NeonTwin,
};

/// `dequantize_row_q4_K` as GCC contracts it on aarch64: y = fma(d1, q, -m1).
pub fn dequantize_q4_k_fused(blocks: &[BlockQ4K], out: &mut [f32]) {
    for (b, y) in blocks.iter().zip(out.chunks_exact_mut(QK_K)) {
        let (d, min) = (b.d(), b.dmin());
        for c in 0..4 {
            let (sc, m) = crate::blocks::q4_k::scale_min_k4(2 * c, &b.scales);
            let (d1, m1) = (d * sc as f32, min * m as f32);
            let (sc, m) = crate::blocks::q4_k::scale_min_k4(2 * c + 1, &b.scales);
            let (d2, m2) = (d * sc as f32, min * m as f32);
            for l in 0..32 {
                let q = b.qs[32 * c + l];
                y[64 * c + l] = d1.mul_add((q & 0xF) as f32, -m1);
                y[64 * c + 32 + l] = d2.mul_add((q >> 4) as f32, -m2);
            }
        }
    }
}

/// The dotprod build's activation rule for weights of `wtype` (each type's
/// `vec_dot_type` by the build's `from_float`): q8_K by the reference quantizer as GCC
/// contracts it for the K-quants and IQ4_XS, q8_0 by the NEON quantizer for Q4_0, Q5_0,
/// Q8_0 and IQ4_NL, q8_1 by the NEON quantizer for Q4_1 and Q5_1.
pub fn neon_act_rule(wtype: GgmlType) -> Result<ActRule, KernelError> {
    arm_act_rule(&AARCH64_NEON.recipe, wtype, "aarch64-neon matmul")
}

/// The aarch64 builds' activation rule for weights of `wtype` under `recipe` (its
/// `act_k` for the K-quants and IQ4_XS, its `act_legacy` for Q4_0, Q5_0, Q8_0 and
/// IQ4_NL, the NEON q8_1 rule for Q4_1 and Q5_1); `op` names the lane in errors.
pub fn arm_act_rule(
    recipe: &Recipe,
    wtype: GgmlType,
    op: &'static str,
) -> Result<ActRule, KernelError> {
    match wtype {
        GgmlType::Q2_K | GgmlType::Q3_K | GgmlType::Q5_K | GgmlType::IQ4_XS => Ok(recipe.act_k),
        GgmlType::Q5_0 | GgmlType::IQ4_NL => Ok(recipe.act_legacy),
        GgmlType::Q4_1 | GgmlType::Q5_1 => Ok(ActRule::Q8_1Neon),
        _ => recipe.act_rule(wtype, op),
    }
}

impl Kernels for NeonTwin {
    fn act_rule(&self, wtype: GgmlType) -> Result<ActRule, KernelError> {
        neon_act_rule(wtype)
    }

    fn dequantize(&self, ty: GgmlType, bytes: &[u8], out: &mut [f32]) -> Result<(), KernelError> {
        if ty != GgmlType::Q4_K {
            return crate::blocks::dequantize(ty, bytes, out);
        }
        let blocks: &[BlockQ4K] = cast_blocks(ty, bytes)?;
        if out.len() != blocks.len() * QK_K {
            return Err(KernelError::ShapeMismatch {
                what: "dequantize output",
                expected: blocks.len() * QK_K,
                got: out.len(),
            });
        }
        dequantize_q4_k_fused(blocks, out);
        Ok(())
    }

    fn vec_dot(&self, wtype: GgmlType, w_row: &[u8], act: &[u8]) -> Result<f32, KernelError> {
        let fns = VecDotFns {
            q4_0: neon::vec_dot_q4_0_q8_0,
            q8_0: neon::vec_dot_q8_0_q8_0,
            q4_k: neon::vec_dot_q4_k_q8_k,
            q6_k: neon::vec_dot_q6_k_q8_k,
        };
        let atype = self.act_rule(wtype)?.format();
        check_pair(wtype, w_row, atype, act)?;
        let (w, a) = (w_row, act);
        Ok(match wtype {
            GgmlType::Q4_1 => {
                neon::vec_dot_q4_1_q8_1(cast_blocks(wtype, w)?, cast_blocks(atype, a)?)
            }
            GgmlType::Q5_0 => {
                neon::vec_dot_q5_0_q8_0(cast_blocks(wtype, w)?, cast_blocks(atype, a)?)
            }
            GgmlType::Q5_1 => {
                neon::vec_dot_q5_1_q8_1(cast_blocks(wtype, w)?, cast_blocks(atype, a)?)
            }
            GgmlType::Q2_K => {
                neon::vec_dot_q2_k_q8_k(cast_blocks(wtype, w)?, cast_blocks(atype, a)?)
            }
            GgmlType::Q3_K => {
                neon::vec_dot_q3_k_q8_k(cast_blocks(wtype, w)?, cast_blocks(atype, a)?)
            }
            GgmlType::Q5_K => {
                neon::vec_dot_q5_k_q8_k(cast_blocks(wtype, w)?, cast_blocks(atype, a)?)
            }
            GgmlType::IQ4_NL => {
                neon::vec_dot_iq4_nl_q8_0(cast_blocks(wtype, w)?, cast_blocks(atype, a)?)
            }
            GgmlType::IQ4_XS => {
                neon::vec_dot_iq4_xs_q8_k(cast_blocks(wtype, w)?, cast_blocks(atype, a)?)
            }
            _ => return dispatch_vec_dot(self, &fns, "aarch64-neon vec_dot", wtype, w_row, act),
        })
    }

    fn matmul_quantized(
        &self,
        w: &WeightMatrix<'_>,
        act: &[u8],
        m: usize,
    ) -> Result<Vec<f32>, KernelError> {
        matmul_tinyblas(self, w, act, m, tinyblas_dot)
    }

    fn plain_path(&self, wtype: GgmlType, m: usize) -> &'static str {
        if tinyblas::applies(wtype, m) {
            "tinyblas-q0"
        } else {
            "vec_dot"
        }
    }
}
