//! The `aarch64-i8mm-repack` lane: ggml built by GCC for aarch64 with dotprod and i8mm
//! (`-march=armv8.6-a+dotprod+i8mm`) and the CPU repack buffer (llama.cpp's default).
//! Weights are repacked as that build does it ([`crate::repack`]): Q4_K as `q4_K_8x8`
//! and Q6_K as `q6_K_8x8` when the row count is a multiple of 8, Q4_0 as `q4_0_4x8` and Q8_0 as `q8_0_4x8` when
//! it is a multiple of 4, and multiplied by the i8mm gemm / dotprod gemv kernels
//! ([`kernels`]). Other weights take the `aarch64-i8mm` lane's plain path (2x2 `smmla`
//! vec_dot tiles where both row counts are even, `nrc == 1` otherwise, see
//! [`crate::arch::aarch64::i8mm`]). The matmul itself is the shared [`RepackedLane`]; this
//! module supplies the layouts and the group kernels (the row rules are the dotprod
//! build's, [`arm_row_rule`]).
//!
//! The decoder's batched attention runs without llamafile, as in the i8mm build
//! ([`crate::elem::ElemFlavour::NeonNoLlamafile`]).
//!
//! Row split, as `forward_mul_mat` does it: with m activation rows, the first
//! m - m % 4 go through the gemm kernel (activations by `ggml_quantize_mat_q8_K_4x8` /
//! `ggml_quantize_mat_q8_0_4x8`, which equal the lane's row rules row by row), the last
//! m % 4 through the gemv kernel. Every output is one pass over all of k, so column
//! chunking (threads) never changes a bit.

pub mod kernels;

use crate::arch::aarch64::i8mm::{I8mmTwin, ARM_I8MM_NRC2};
use crate::arch::aarch64::neon_repack::arm_row_rule;
use crate::blocks::cast_blocks;
use crate::error::KernelError;
use crate::lane::{
    unsupported_layout, Accumulation, Arch, Contraction, GroupFn, Lane, Level, MatmulPath, Proof,
    Recipe, RepackScheme, RepackedLane, RowPath, Status, WeightLayout,
};
use crate::quant::ActRule;
use crate::repack::{BlockQ4Kx8, BlockQ4_0x4, BlockQ6Kx8, BlockQ8_0x4, RepackLayout};
use crate::GgmlType;

/// The `aarch64-i8mm-repack` lane.
pub static AARCH64_I8MM_REPACK: Lane = Lane {
    name: "aarch64-i8mm-repack",
    arch: Arch::Aarch64,
    summary: "ggml aarch64 (GCC, dotprod+i8mm) with CPU repack: q4_K/q5_K/q6_K 8x8, q4_0/q8_0 4x8, iq4_nl 4x4 gemv and gemm; \
              plain weights as aarch64-i8mm; attention without llamafile",
    status: Status::Proven(&[
        Proof {
            level: Level::Kernel,
            against: "ggml aarch64 i8mm build (GCC) repacked mul_mat under qemu",
            only: "",
            suite: "oracle_arm_lanes",
            trials: &["oracle/arm-i8mm/matmul-repack"],
        },
        Proof {
            level: Level::DecoderDecode,
            against: "llama.cpp aarch64 i8mm build under qemu, repack on (F16 KV cache with flash attention, llama.cpp's default, and F32 without)",
            only: "",
            suite: "model_oracle",
            trials: &[
                "llama_cpp/arm-i8mm/repack/decode/end_to_end",
                "llama_cpp/arm-i8mm/repack/decode/layer_local",
                "llama_cpp/arm-i8mm/f32_off/repack/decode/end_to_end",
                "llama_cpp/arm-i8mm/f32_off/repack/decode/layer_local",
            ],
        },
        Proof {
            level: Level::DecoderPrompt,
            against: "llama.cpp aarch64 i8mm build under qemu, repack on (F16 KV cache with flash attention, llama.cpp's default, and F32 without)",
            only: "",
            suite: "model_oracle",
            trials: &[
                "llama_cpp/arm-i8mm/repack/prompt/end_to_end",
                "llama_cpp/arm-i8mm/repack/prompt/layer_local",
                "llama_cpp/arm-i8mm/f32_off/repack/prompt/end_to_end",
                "llama_cpp/arm-i8mm/f32_off/repack/prompt/layer_local",
            ],
        },
        Proof {
            level: Level::DecoderPrompt,
            against: "llama.cpp aarch64 i8mm build under qemu, repack on, on llama.cpp's Q3_K_M mix (Q5_K in q5_K_8x8) and a uniform IQ4_NL model (iq4_nl_4x4) (F16 KV cache with flash attention)",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/quant/arm-i8mm/repack/prompt/"],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp aarch64 i8mm build under qemu, repack on, on the embedded Q4_K_M model (q4_K and q6_K weights), run as llama-cli runs it: a prompt of 157 ids in batches of 96 and ubatches of 64, the last row's logits, greedy steps; 2 and 3 threads; decode steps after 4096 and 16384 cells saved by the haswell build, in a context of 32768; F16 KV cache with flash attention and F32 without",
            only: "",
            suite: "model_oracle",
            trials: &[
                "llama_cpp/arm-i8mm/cli/repack/end_to_end",
                "llama_cpp/arm-i8mm/long/4096/repack/end_to_end",
                "llama_cpp/arm-i8mm/long/4096/f32_off/repack/end_to_end",
                "llama_cpp/arm-i8mm/long/16384/repack/end_to_end",
                "llama_cpp/arm-i8mm/long/16384/f32_off/repack/end_to_end",
                "llama_cpp/arm-i8mm/cli/repack/layer_local",
                "llama_cpp/arm-i8mm/cli/f32_off/repack/end_to_end",
                "llama_cpp/arm-i8mm/threads/3/repack/end_to_end",
            ],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp aarch64 i8mm build under qemu, repack on, on llama.cpp's Q3_K_M mix (Q5_K in q5_K_8x8), run as llama-cli runs it: a prompt of 157 ids in batches of 96 and ubatches of 64, the last row's logits, greedy steps; 2 threads; F16 KV cache with flash attention",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/quant/arm-i8mm/repack/cli/"],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp aarch64 i8mm build under qemu, repack on, on llama.cpp's Q3_K_M and Q5_K_M mixes (Q5_K in q5_K_8x8) at llama-cli's own sizes: a prompt of 600 ids as ubatches of 512 and 88 in a context of 1024, the last row's logits, greedy steps attending 600+ cells (split-KV flash attention), the Q5_K_M mix at 2 threads and 3; and on the Q3_K_M mix decode steps after 4096 cells the haswell build filled with the same model and saved, in a context of 32768; F16 KV cache with flash attention",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/quant/arm-i8mm/repack/cli_defaults/", "llama_cpp/quant/arm-i8mm/repack/threads/", "llama_cpp/quant/arm-i8mm/repack/long/"],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp aarch64 i8mm build under qemu, repack on, on the qwen2 model (golden/model/qwen2.toml: Q, K and V biases, no Q/K norm): prompt mode; as llama-cli runs it, a prompt of 157 ids in batches of 96 and ubatches of 64 and one of 600 ids as ubatches of 512 and 88 in a context of 1024, the last row's logits, greedy steps; 2 threads, and 3 (26 ids in ubatches of 16); F16 KV cache with flash attention",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/arch/qwen2/arm-i8mm/repack/"],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp aarch64 i8mm build under qemu, repack on, on the llama model (golden/model/llama.toml: normal-mode RoPE on adjacent pairs with Llama 3.1's frequency factors, no norm or bias): prompt mode; as llama-cli runs it, a prompt of 157 ids in batches of 96 and ubatches of 64 and one of 600 ids as ubatches of 512 and 88 in a context of 1024, the last row's logits, greedy steps; 2 threads, and 3 (26 ids in ubatches of 16); F16 KV cache with flash attention",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/arch/llama/arm-i8mm/repack/"],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp aarch64 i8mm build under qemu, repack on, on the qwen3moe model (golden/model/qwen3moe.toml: an F32 router, softmax, the top 4 of 8 experts by libstdc++'s sort, each expert's matmul as ggml's MUL_MAT_ID runs it, the weighted sum in slot order): prompt mode; as llama-cli runs it, a prompt of 600 ids as ubatches of 512 and 88 in a context of 1024, the last row's logits, greedy steps; 2 threads; F16 KV cache with flash attention",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/arch/qwen3moe/arm-i8mm/repack/"],
        },
    ]),
    recipe: Recipe {
        act_k: ActRule::Q8KFusedNearest,
        act_legacy: ActRule::Q8_0Neon,
        accumulation: Accumulation::NeonSerial,
        contraction: Contraction::GccAarch64,
        layout: WeightLayout::ArmI8mmRepack,
        matmul: MatmulPath::RepackedGemmGemv { gemm_act: ActRule::Q8KFusedNearest },
        plain_gemm: ARM_I8MM_NRC2,
        elem: crate::elem::ElemFlavour::NeonNoLlamafile,
    },
    portable: &TWIN,
};

/// The portable twin: the shared repacked matmul over the `aarch64-i8mm` twin.
static TWIN: RepackedLane = RepackedLane { plain: &I8mmTwin, scheme: scheme(group) };

/// The i8mm build's repack buffer with `group` as its row-group kernels (the twins here,
/// NEON, `sdot` and `smmla` in `tiercheck-aarch64`).
pub const fn scheme(group: GroupFn) -> RepackScheme {
    RepackScheme {
        lane: "aarch64-i8mm-repack",
        layout: |ty, n| arm_i8mm_layout(ty).filter(|l| n.is_multiple_of(l.cols())),
        act_rule: arm_row_rule,
        group,
        unreproduced: &[],
    }
}

/// The layout ggml's aarch64 i8mm build repacks `ty` into (reproduced here), if any.
pub fn arm_i8mm_layout(ty: GgmlType) -> Option<RepackLayout> {
    match ty {
        GgmlType::Q4_K => Some(RepackLayout::Q4K8x8),
        GgmlType::Q6_K => Some(RepackLayout::Q6K8x8),
        GgmlType::Q4_0 => Some(RepackLayout::Q4_0_4x8),
        GgmlType::Q8_0 => Some(RepackLayout::Q8_0_4x8),
        GgmlType::Q5_K => Some(RepackLayout::Q5K8x8),
        // No i8mm layout: the dotprod one (`ggml_repack_get_optimal_repack_type`).
        GgmlType::IQ4_NL => Some(RepackLayout::Iq4Nl4x4),
        _ => None,
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
        RepackLayout::Q6K8x8 => {
            let blocks: &[BlockQ6Kx8] = bytemuck::cast_slice(bytes);
            let y = cast_blocks(GgmlType::Q8_K, act)?;
            // gemv and gemm have the same float order here (module docs of `kernels`).
            let _ = path;
            out.copy_from_slice(&crate::arch::aarch64::neon_repack::kernels::gemm_q6_k_8xil(
                blocks, 8, y,
            ));
        }
        RepackLayout::Q4_0_4x8 => {
            let blocks: &[BlockQ4_0x4] = bytemuck::cast_slice(bytes);
            out.copy_from_slice(&kernels::gemv_q4_0_4x8(blocks, cast_blocks(GgmlType::Q8_0, act)?));
        }
        RepackLayout::Q8_0_4x8 => {
            let blocks: &[BlockQ8_0x4] = bytemuck::cast_slice(bytes);
            out.copy_from_slice(&kernels::gemv_q8_0_4x8(blocks, cast_blocks(GgmlType::Q8_0, act)?));
        }
        RepackLayout::Q5K8x8 => {
            let blocks: &[crate::repack::BlockQ5Kx8] = bytemuck::cast_slice(bytes);
            let y = cast_blocks(GgmlType::Q8_K, act)?;
            out.copy_from_slice(&match path {
                RowPath::Gemm => kernels::gemm_q5_k_8x8(blocks, y),
                RowPath::Gemv => kernels::gemv_q5_k_8x8(blocks, y),
            });
        }
        RepackLayout::Iq4Nl4x4 => {
            crate::arch::aarch64::neon_repack::iq4_nl_4x4_group(bytes, act, out)?
        }
        other => return Err(unsupported_layout("aarch64-i8mm-repack matmul", other)),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::aarch64::neon::NeonTwin;
    use crate::lane::Kernels;
    use crate::quant::weights;
    use crate::repack::{Prepared, Target};
    use crate::weight_matrix::WeightMatrix;

    #[test]
    fn gpu_target_stays_plain_and_cpu_repacks_by_row_group() {
        let x: Vec<f32> = (0..12 * 256).map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.02).collect();
        for (ty, repacked_at_12) in [
            (GgmlType::Q4_K, false),
            (GgmlType::Q6_K, false),
            (GgmlType::Q4_0, true),
            (GgmlType::Q8_0, true),
        ] {
            let bytes = weights::quantize(ty, &x, 12, 256).unwrap();
            let w = WeightMatrix::new(ty, 12, 256, &bytes).unwrap();
            assert!(matches!(TWIN.prepare(w, Target::Gpu).unwrap(), Prepared::Plain(_)));
            let p = TWIN.prepare(w, Target::Cpu).unwrap();
            assert_eq!(matches!(p, Prepared::Repacked(_)), repacked_at_12, "{ty:?}");
        }
    }

    #[test]
    fn repacked_matmul_is_close_to_plain() {
        let (n, k, m) = (16, 512, 5);
        let w: Vec<f32> = (0..n * k).map(|i| ((i * 7919 % 1013) as f32 - 506.0) * 0.001).collect();
        let x: Vec<f32> = (0..m * k).map(|i| ((i * 104729 % 997) as f32 - 498.0) * 0.002).collect();
        for ty in [GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q4_0, GgmlType::Q8_0] {
            let bytes = weights::quantize(ty, &w, n, k).unwrap();
            let wm = WeightMatrix::new(ty, n, k, &bytes).unwrap();
            let plain = NeonTwin.matmul(&wm, &x, m).unwrap();
            let rep = TWIN.matmul(&wm, &x, m).unwrap();
            for (a, b) in plain.iter().zip(&rep) {
                assert!((a - b).abs() <= 1e-3 * (1.0 + a.abs()), "{ty:?}: {a} vs {b}");
            }
        }
    }
}
