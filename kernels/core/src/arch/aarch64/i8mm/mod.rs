//! The `aarch64-i8mm` lane: ggml built by GCC for aarch64 with dotprod and i8mm
//! (`-march=armv8.6-a+dotprod+i8mm`), repack off (`--no-repack`), plain weights:
//!
//! - activations, dequantization and the single-row (`nrc == 1`) vec_dot: the
//!   `aarch64-neon` lane's (the same source compiled for dotprod), but for Q5_0's scalar
//!   tail, which this build computes with unsigned weight bytes ([`i8mm_build_vec_dot`]);
//!   the types beside the four (Q5_0, Q5_1, Q2_K, Q3_K, Q5_K, IQ4_NL, IQ4_XS) have one
//!   row per call, and Q4_1 has a tile of its own ([`vec_dot2::vec_dot2_q4_1_q8_1`]);
//! - the plain matmul ([`ARM_I8MM_NRC2`]): the i8mm build's type traits give Q4_0,
//!   Q4_1, Q8_0, Q4_K and Q6_K `nrows = 2`, so `ggml_compute_forward_mul_mat` calls their
//!   vec_dot on 2x2 tiles (two weight rows by two activation rows, `smmla`,
//!   [`vec_dot2`]) when the weight row count and the activation row count are both even
//!   and the chunk of ggml's thread plan the output lies in has even spans in both
//!   ([`ChunkPlan`]), and one pair at a time (`nrc == 1`) otherwise. The tiles are rows
//!   (2a, 2a + 1) by activation rows (2b, 2b + 1);
//! - the decoder's elementwise loops: NEON, with llamafile compiled out
//!   ([`crate::elem::ElemFlavour::NeonNoLlamafile`]).
//!
//! The chunk plan is `ggml_compute_forward_mul_mat`'s: chunks of 16 rows (64 when either
//! side has one row), `ceil(rows / chunks)` rows each, so 88 activation rows make six
//! chunks of 15 (odd: no tiles) where 600 make chunks of 16; and when that gives fewer
//! than four chunks per thread, one chunk per thread along the longer side (the plan
//! then depends on the tier's thread count, which the lane takes as
//! [`crate::Kernels::matmul_quantized_tier`]'s `tier`). NUMA-aware ggml (`--numa` on a
//! host ggml finds several NUMA nodes on) re-chunks by thread always
//! ([`ChunkPlan::with_pool`]).

pub mod vec_dot2;

use crate::arch::aarch64::neon::{arm_act_rule, NeonTwin};
use crate::blocks::cast_blocks;
use crate::error::KernelError;
use crate::lane::dispatch::check_pair;
use crate::lane::{
    act_rows, vec_dot_rows, Accumulation, Arch, Contraction, Kernels, Lane, Level, MatmulPath,
    PlainGemm, Proof, Recipe, Status, WeightLayout,
};
use crate::quant::ActRule;
use crate::weight_matrix::WeightMatrix;
use crate::GgmlType;
pub use vec_dot2::Tile;

/// The i8mm build's plain matmul: 2x2 `smmla` vec_dot tiles where both row counts are
/// even (Q4_0, Q8_0, Q4_K, Q6_K), `vec_dot` per pair otherwise.
pub const ARM_I8MM_NRC2: PlainGemm = PlainGemm::named("arm-i8mm-nrc2-even-rows");

/// The `aarch64-i8mm` lane.
pub static AARCH64_I8MM: Lane = Lane {
    name: "aarch64-i8mm",
    arch: Arch::Aarch64,
    summary: "ggml aarch64 (GCC, dotprod+i8mm), repack off: smmla vec_dot on 2x2 tiles for even \
              row counts, nrc=1 otherwise; attention without llamafile",
    recipe: Recipe {
        act_k: ActRule::Q8KFusedNearest,
        act_legacy: ActRule::Q8_0Neon,
        accumulation: Accumulation::NeonSerial,
        contraction: Contraction::GccAarch64,
        layout: WeightLayout::Plain,
        matmul: MatmulPath::VecDotPerRow,
        plain_gemm: ARM_I8MM_NRC2,
        elem: crate::elem::ElemFlavour::NeonNoLlamafile,
    },
    status: Status::Proven(&[
        Proof {
            level: Level::Kernel,
            against: "ggml aarch64 i8mm build (GCC) under qemu: vec_dot nrc=2 and plain mul_mat",
            only: "",
            suite: "oracle_arm_lanes",
            trials: &["oracle/arm-i8mm/vec_dot2", "oracle/arm-i8mm/matmul-plain"],
        },
        Proof {
            level: Level::DecoderDecode,
            against: "llama.cpp aarch64 i8mm build under qemu, repack off (F16 KV cache with flash attention, llama.cpp's default, and F32 without)",
            only: "",
            suite: "model_oracle",
            trials: &[
                "llama_cpp/arm-i8mm/no_repack/decode/end_to_end",
                "llama_cpp/arm-i8mm/no_repack/decode/layer_local",
                "llama_cpp/arm-i8mm/f32_off/no_repack/decode/end_to_end",
                "llama_cpp/arm-i8mm/f32_off/no_repack/decode/layer_local",
            ],
        },
        Proof {
            level: Level::DecoderPrompt,
            against: "llama.cpp aarch64 i8mm build under qemu, repack off (F16 KV cache with flash attention, llama.cpp's default, and F32 without)",
            only: "",
            suite: "model_oracle",
            trials: &[
                "llama_cpp/arm-i8mm/no_repack/prompt/end_to_end",
                "llama_cpp/arm-i8mm/no_repack/prompt/layer_local",
                "llama_cpp/arm-i8mm/f32_off/no_repack/prompt/end_to_end",
                "llama_cpp/arm-i8mm/f32_off/no_repack/prompt/layer_local",
            ],
        },
        Proof {
            level: Level::DecoderPrompt,
            against: "llama.cpp aarch64 i8mm build under qemu, repack off, on llama.cpp's Q3_K_M mix and uniform Q4_1 and Q5_0 models (F16 KV cache with flash attention)",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/quant/arm-i8mm/no_repack/prompt/"],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp aarch64 i8mm build under qemu, repack off, on the embedded Q4_K_M model (q4_K and q6_K weights), run as llama-cli runs it: a prompt in batches and ubatches (157 ids in ubatches of 64, and 600 ids in ubatches of 512 and 88 in 1024 cells), the last row's logits, greedy steps; 1, 2, 3, 8 and 14 threads, 3 NUMA-aware; decode steps after 4096 and 16384 cells saved by the haswell build, in a context of 32768; F16 KV cache with flash attention and F32 without",
            only: "",
            suite: "model_oracle",
            trials: &[
                "llama_cpp/arm-i8mm/cli/no_repack/end_to_end",
                "llama_cpp/arm-i8mm/numa/3/no_repack/end_to_end",
                "llama_cpp/arm-i8mm/long/4096/no_repack/end_to_end",
                "llama_cpp/arm-i8mm/long/4096/f32_off/no_repack/end_to_end",
                "llama_cpp/arm-i8mm/long/16384/no_repack/end_to_end",
                "llama_cpp/arm-i8mm/long/16384/f32_off/no_repack/end_to_end",
                "llama_cpp/arm-i8mm/long/16384/threads/1/no_repack/end_to_end",
                "llama_cpp/arm-i8mm/long/16384/threads/3/no_repack/end_to_end",
                "llama_cpp/arm-i8mm/long/16384/threads/8/no_repack/end_to_end",
                "llama_cpp/arm-i8mm/long/16384/threads/14/no_repack/end_to_end",
                "llama_cpp/arm-i8mm/long/16384/no_repack/layer_local",
                "llama_cpp/arm-i8mm/long/16384/f32_off/no_repack/layer_local",
                "llama_cpp/arm-i8mm/cli/no_repack/layer_local",
                "llama_cpp/arm-i8mm/cli/f32_off/no_repack/end_to_end",
                "llama_cpp/arm-i8mm/threads/1/no_repack/end_to_end",
                "llama_cpp/arm-i8mm/threads/3/no_repack/end_to_end",
                "llama_cpp/arm-i8mm/threads/8/no_repack/end_to_end",
                "llama_cpp/arm-i8mm/threads/14/no_repack/end_to_end",
                "llama_cpp/arm-i8mm/cli_defaults/no_repack/end_to_end",
            ],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp aarch64 i8mm build under qemu, repack off, on uniform Q4_1 and Q5_0 models, run as llama-cli runs it: a prompt of 157 ids in batches of 96 and ubatches of 64, the last row's logits, greedy steps; 2 threads, and 3 and 8 on the Q4_1 model (26 ids in ubatches of 16); F16 KV cache with flash attention",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/quant/arm-i8mm/no_repack/cli/", "llama_cpp/quant/arm-i8mm/no_repack/threads/"],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp aarch64 i8mm build under qemu, repack off, on a uniform Q4_1 model (its nrc == 2 tiles) at llama-cli's own sizes: a prompt of 600 ids as ubatches of 512 and 88 in a context of 1024, the last row's logits, greedy steps attending 600+ cells (split-KV flash attention), and decode steps after 4096 and 16384 cells the haswell build filled with the same model and saved, in a context of 32768; F16 KV cache with flash attention",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/quant/arm-i8mm/no_repack/cli_defaults/", "llama_cpp/quant/arm-i8mm/no_repack/long/"],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp aarch64 i8mm build under qemu, repack off, on the qwen2 model (golden/model/qwen2.toml: Q, K and V biases, no Q/K norm): prompt mode; as llama-cli runs it, a prompt of 157 ids in batches of 96 and ubatches of 64 and one of 600 ids as ubatches of 512 and 88 in a context of 1024, the last row's logits, greedy steps; 2 threads, and 3 (26 ids in ubatches of 16); F16 KV cache with flash attention",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/arch/qwen2/arm-i8mm/no_repack/"],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp aarch64 i8mm build under qemu, repack off, on the llama model (golden/model/llama.toml: normal-mode RoPE on adjacent pairs with Llama 3.1's frequency factors, no norm or bias): prompt mode; as llama-cli runs it, a prompt of 157 ids in batches of 96 and ubatches of 64 and one of 600 ids as ubatches of 512 and 88 in a context of 1024, the last row's logits, greedy steps; 2 threads, and 3 (26 ids in ubatches of 16); F16 KV cache with flash attention",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/arch/llama/arm-i8mm/no_repack/"],
        },
        Proof {
            level: Level::DecoderCli,
            against: "llama.cpp aarch64 i8mm build under qemu, repack off, on the qwen3moe model (golden/model/qwen3moe.toml: an F32 router, softmax, the top 4 of 8 experts by libstdc++'s sort, each expert's matmul as ggml's MUL_MAT_ID runs it, the weighted sum in slot order): prompt mode; as llama-cli runs it, a prompt of 600 ids as ubatches of 512 and 88 in a context of 1024, the last row's logits, greedy steps; 2 threads; F16 KV cache with flash attention",
            only: "",
            suite: "model_oracle",
            trials: &["llama_cpp/arch/qwen3moe/arm-i8mm/no_repack/"],
        },
    ]),
    portable: &I8mmTwin,
};

/// Portable twin of the `aarch64-i8mm` lane.
#[derive(Debug, Default)]
pub struct I8mmTwin;

/// `ggml_compute_forward_mul_mat`'s chunk plan for `nr0` weight rows (output columns) by
/// `nr1` activation rows on `nth` threads: chunks of `dr0` x `dr1`, the last of each side
/// shorter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkPlan {
    /// Weight rows per chunk.
    pub dr0: usize,
    /// Activation rows per chunk.
    pub dr1: usize,
}

impl ChunkPlan {
    /// The plan: chunk size 16, or 64 when either side is one row; `ceil(nr / size)`
    /// chunks per side; fewer than `4 * nth` chunks in all re-chunks by thread (`nth`
    /// chunks along the weight rows when they outnumber the activation rows, else along
    /// the activation rows); `dr = ceil(nr / chunks)`.
    pub fn new(nr0: usize, nr1: usize, nth: usize) -> ChunkPlan {
        let nth = nth.max(1);
        let size = if nr0 == 1 || nr1 == 1 { 64 } else { 16 };
        let (mut c0, mut c1) = (nr0.div_ceil(size).max(1), nr1.div_ceil(size).max(1));
        if c0 * c1 < nth * 4 {
            (c0, c1) = if nr0 > nr1 { (nth, 1) } else { (1, nth) };
        }
        ChunkPlan { dr0: nr0.div_ceil(c0).max(1), dr1: nr1.div_ceil(c1).max(1) }
    }

    /// The plan on the tier's pool: [`ChunkPlan::new`], except that NUMA-aware ggml
    /// (`ggml_is_numa`) always re-chunks by thread (`nchunk0 * nchunk1 < nth * 4 ||
    /// ggml_is_numa()` in `ggml_compute_forward_mul_mat`).
    pub fn with_pool(nr0: usize, nr1: usize, tier: crate::lane::TierPool) -> ChunkPlan {
        if !tier.numa {
            return ChunkPlan::new(nr0, nr1, tier.threads);
        }
        let nth = tier.threads.max(1);
        let (c0, c1) = if nr0 > nr1 { (nth, 1) } else { (1, nth) };
        ChunkPlan { dr0: nr0.div_ceil(c0).max(1), dr1: nr1.div_ceil(c1).max(1) }
    }

    /// The span of the chunk holding index `i` of a side of `nr` with chunk size `dr`.
    fn span(i: usize, dr: usize, nr: usize) -> usize {
        let start = i / dr * dr;
        (start + dr).min(nr) - start
    }

    /// Whether the output of weight row `j` and activation row `i` lies in a chunk of
    /// even spans on both sides (of `nr0` x `nr1`): ggml's condition for `nrc == 2`
    /// besides both row counts being even.
    pub fn even(&self, j: usize, i: usize, nr0: usize, nr1: usize) -> bool {
        Self::span(j, self.dr0, nr0).is_multiple_of(2)
            && Self::span(i, self.dr1, nr1).is_multiple_of(2)
    }
}

/// Whether ggml's i8mm build multiplies `n` plain rows of `ty` by `m` activation rows on
/// 2x2 tiles (`nrc == 2`) anywhere (chunks with odd spans still go one pair at a time:
/// [`ChunkPlan`]).
pub fn nrc2_applies(ty: GgmlType, n: usize, m: usize) -> bool {
    matches!(ty, GgmlType::Q4_0 | GgmlType::Q4_1 | GgmlType::Q8_0 | GgmlType::Q4_K | GgmlType::Q6_K)
        && n.is_multiple_of(2)
        && m.is_multiple_of(2)
}

/// How `n` plain rows may be split between threads without changing the tile decision
/// ([`Kernels::plain_split`]): freely when no tile applies (`m` odd, or a type without
/// tiles); whole otherwise (the tile decision follows ggml's chunk plan over all `n`
/// rows, [`ChunkPlan`], which a part of the rows would not see).
pub fn nrc2_split(ty: GgmlType, n: usize, m: usize) -> Option<usize> {
    if !nrc2_applies(ty, 2, m) {
        Some(1)
    } else {
        let _ = n;
        None
    }
}

/// The 2x2 tile of weight rows `x` by quantized activation rows `y` by the twin kernels.
pub fn tile(
    ty: GgmlType,
    atype: GgmlType,
    x: [&[u8]; 2],
    y: [&[u8]; 2],
) -> Result<Tile, KernelError> {
    Ok(match ty {
        GgmlType::Q4_0 => vec_dot2::vec_dot2_q4_0_q8_0(
            [cast_blocks(ty, x[0])?, cast_blocks(ty, x[1])?],
            [cast_blocks(atype, y[0])?, cast_blocks(atype, y[1])?],
        ),
        GgmlType::Q8_0 => vec_dot2::vec_dot2_q8_0_q8_0(
            [cast_blocks(ty, x[0])?, cast_blocks(ty, x[1])?],
            [cast_blocks(atype, y[0])?, cast_blocks(atype, y[1])?],
        ),
        GgmlType::Q4_1 => vec_dot2::vec_dot2_q4_1_q8_1(
            [cast_blocks(ty, x[0])?, cast_blocks(ty, x[1])?],
            [cast_blocks(atype, y[0])?, cast_blocks(atype, y[1])?],
        ),
        GgmlType::Q4_K => vec_dot2::vec_dot2_q4_k_q8_k(
            [cast_blocks(ty, x[0])?, cast_blocks(ty, x[1])?],
            [cast_blocks(atype, y[0])?, cast_blocks(atype, y[1])?],
        ),
        GgmlType::Q6_K => vec_dot2::vec_dot2_q6_k_q8_k(
            [cast_blocks(ty, x[0])?, cast_blocks(ty, x[1])?],
            [cast_blocks(atype, y[0])?, cast_blocks(atype, y[1])?],
        ),
        other => {
            return Err(KernelError::Unsupported {
                op: "aarch64-i8mm nrc=2 vec_dot",
                ty: other.name(),
            })
        }
    })
}

/// ggml's plain matmul on the i8mm build ([`ARM_I8MM_NRC2`]) on the tier's pool `tier`
/// over `kernels`' activation format, with `tile` as the 2x2 kernel (twin or native):
/// `out[i * n + j]`; the outputs of chunks with an odd span ([`ChunkPlan`]) by
/// `kernels`' `vec_dot`, one pair at a time.
pub fn matmul_nrc2<K: Kernels + ?Sized>(
    kernels: &K,
    w: &WeightMatrix<'_>,
    act: &[u8],
    m: usize,
    tier: crate::lane::TierPool,
    tile: impl Fn(GgmlType, GgmlType, [&[u8]; 2], [&[u8]; 2]) -> Result<Tile, KernelError>,
) -> Result<Vec<f32>, KernelError> {
    let n = w.n();
    if !nrc2_applies(w.ty(), n, m) || w.k() == 0 {
        return vec_dot_rows(kernels, w, act, m);
    }
    let atype = kernels.act_rule(w.ty())?.format();
    let rows = act_rows(kernels, w, act, m)?;
    if let Some(a) = rows.first() {
        check_pair(w.ty(), w.row(0), atype, a)?;
    }
    let plan = ChunkPlan::with_pool(n, m, tier);
    let mut out = vec![0.0f32; m * n];
    for i in (0..m).step_by(2) {
        for j in (0..n).step_by(2) {
            // With both row counts even, a chunk of even span starts at an even row (an odd
            // start would leave the rest of the side odd), so a pair lies in one chunk
            // and its first element decides for all four outputs.
            if !plan.even(j, i, n, m) {
                for (ii, jj) in [(i, j), (i, j + 1), (i + 1, j), (i + 1, j + 1)] {
                    out[ii * n + jj] = kernels.vec_dot(w.ty(), w.row(jj), rows[ii])?;
                }
                continue;
            }
            let t = tile(w.ty(), atype, [w.row(j), w.row(j + 1)], [rows[i], rows[i + 1]])?;
            out[i * n + j] = t[0][0];
            out[i * n + j + 1] = t[0][1];
            out[(i + 1) * n + j] = t[1][0];
            out[(i + 1) * n + j + 1] = t[1][1];
        }
    }
    Ok(out)
}

/// The i8mm build's activation rules ([`arm_act_rule`]), for all twelve types: Q4_1 has
/// an `nrc == 2` tile as the four; the other types take the NEON `nrc == 1` kernels.
pub fn i8mm_act_rule(wtype: GgmlType) -> Result<ActRule, KernelError> {
    arm_act_rule(&AARCH64_I8MM.recipe, wtype, "aarch64-i8mm matmul")
}

/// The `nrc == 1` vec_dot of ggml's i8mm builds (the `aarch64-i8mm` and SVE families)
/// for a type the caller's lane multiplies: the NEON kernels (`neon`, twin or native),
/// except Q5_0, whose scalar tail these builds compile differently
/// ([`crate::arch::aarch64::neon::vec_dot::vec_dot_q5_0_q8_0_i8mm`]).
pub fn i8mm_build_vec_dot(
    neon: &dyn Kernels,
    wtype: GgmlType,
    w_row: &[u8],
    act: &[u8],
) -> Result<f32, KernelError> {
    if wtype != GgmlType::Q5_0 {
        return neon.vec_dot(wtype, w_row, act);
    }
    let atype = neon.act_rule(wtype)?.format();
    check_pair(wtype, w_row, atype, act)?;
    Ok(crate::arch::aarch64::neon::vec_dot::vec_dot_q5_0_q8_0_i8mm(
        cast_blocks(wtype, w_row)?,
        cast_blocks(atype, act)?,
    ))
}

impl Kernels for I8mmTwin {
    fn act_rule(&self, wtype: GgmlType) -> Result<ActRule, KernelError> {
        i8mm_act_rule(wtype)
    }

    fn dequantize(&self, ty: GgmlType, bytes: &[u8], out: &mut [f32]) -> Result<(), KernelError> {
        NeonTwin.dequantize(ty, bytes, out)
    }

    fn vec_dot(&self, wtype: GgmlType, w_row: &[u8], act: &[u8]) -> Result<f32, KernelError> {
        self.act_rule(wtype)?;
        i8mm_build_vec_dot(&NeonTwin, wtype, w_row, act)
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
        // The weight row count is not known here; report what an even one runs.
        if nrc2_applies(wtype, 2, m) {
            "vec_dot-nrc2"
        } else {
            "vec_dot"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::weights;

    #[test]
    fn nrc2_tiles_are_close_to_the_single_row_dots_and_odd_counts_are_single_row() {
        let (n, k) = (6, 512);
        let w: Vec<f32> = (0..n * k).map(|i| ((i * 7919 % 1013) as f32 - 506.0) * 0.001).collect();
        for ty in [GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K] {
            let bytes = weights::quantize(ty, &w, n, k).unwrap();
            let wm = WeightMatrix::new(ty, n, k, &bytes).unwrap();
            for m in [1usize, 2, 3, 4] {
                let x: Vec<f32> =
                    (0..m * k).map(|i| ((i * 104729 % 997) as f32 - 498.0) * 0.002).collect();
                // One row at a time: the nrc == 1 vec_dot (no tinyBLAS at m = 1).
                let plain: Vec<f32> =
                    x.chunks(k).flat_map(|xi| NeonTwin.matmul(&wm, xi, 1).unwrap()).collect();
                let got = I8mmTwin.matmul(&wm, &x, m).unwrap();
                if m % 2 == 1 {
                    assert_eq!(plain, got, "{ty:?} m={m}: odd rows are nrc=1");
                }
                for (a, b) in plain.iter().zip(&got) {
                    assert!((a - b).abs() <= 1e-3 * (1.0 + a.abs()), "{ty:?}: {a} vs {b}");
                }
            }
        }
    }
    /// The outputs of `matmul_nrc2` on `n` weight rows by `m` activation rows at the
    /// tier pool `tier`, against an expectation built without [`ChunkPlan`]: the 2x2
    /// tile's value where `tiled(j, i)` (worked out by hand from ggml's chunking below),
    /// the single-row vec_dot elsewhere, each at `out[i * n + j]`.
    fn check_plan(
        ty: GgmlType,
        n: usize,
        m: usize,
        tier: crate::lane::TierPool,
        tiled: impl Fn(usize, usize) -> bool,
    ) {
        let k = 256;
        let w: Vec<f32> = (0..n * k).map(|i| ((i * 7919 % 1013) as f32 - 506.0) * 0.001).collect();
        let x: Vec<f32> = (0..m * k).map(|i| ((i * 104729 % 997) as f32 - 498.0) * 0.002).collect();
        let bytes = weights::quantize(ty, &w, n, k).unwrap();
        let wm = WeightMatrix::new(ty, n, k, &bytes).unwrap();
        let atype = I8mmTwin.act_rule(ty).unwrap().format();
        let act: Vec<u8> =
            x.chunks(k).flat_map(|xi| I8mmTwin.quantize_act(ty, xi).unwrap()).collect();
        let rows = act_rows(&I8mmTwin, &wm, &act, m).unwrap();
        let got = I8mmTwin.matmul_quantized_tier(&wm, &act, m, tier).unwrap();
        assert_eq!(got.len(), m * n);
        let mut differ = 0;
        for i in 0..m {
            for j in 0..n {
                let (i0, j0) = (i / 2 * 2, j / 2 * 2);
                let t = tile(ty, atype, [wm.row(j0), wm.row(j0 + 1)], [rows[i0], rows[i0 + 1]])
                    .unwrap()[i - i0][j - j0];
                let one = I8mmTwin.vec_dot(ty, wm.row(j), rows[i]).unwrap();
                differ += usize::from(t.to_bits() != one.to_bits());
                let want = if tiled(j, i) { t } else { one };
                assert_eq!(
                    got[i * n + j].to_bits(),
                    want.to_bits(),
                    "{ty:?} n={n} m={m} {tier:?}: out[{i}][{j}] (tiled: {})",
                    tiled(j, i)
                );
            }
        }
        assert!(
            differ > 0,
            "{ty:?} n={n} m={m}: tiles and single rows agree, the case proves nothing"
        );
    }

    /// ggml's chunking (`ggml_compute_forward_mul_mat`), worked by hand per case: chunks
    /// of 16 rows per side, re-chunked by thread along the longer side when there are
    /// fewer than four chunks per thread (always when NUMA-aware); a pair is tiled when
    /// the chunk spans holding it are even on both sides.
    #[test]
    fn nrc2_tiles_follow_ggml_chunk_plan() {
        use crate::lane::TierPool;
        let numa = |threads| TierPool { threads, numa: true };
        for ty in [GgmlType::Q4_K, GgmlType::Q4_0] {
            // 88 activation rows: 6 chunks of 15 (spans 15 x5, 13): no tile anywhere
            check_plan(ty, 2, 88, TierPool::threads(1), |_, _| false);
            // 96: 6 chunks of 16: every pair tiled
            check_plan(ty, 2, 96, TierPool::threads(1), |_, _| true);
            // NUMA-aware, 1 thread: one chunk of 88 rows, even: every pair tiled
            check_plan(ty, 2, 88, numa(1), |_, _| true);
            // 20 rows on 3 threads: 2 chunks < 12, by thread along the activations:
            // chunks of 7 (spans 7, 7, 6): rows 14..20 tiled
            check_plan(ty, 2, 20, TierPool::threads(3), |_, i| i >= 14);
            // 20 weight rows by 2 on 3 threads: along the weights, spans 7, 7, 6
            check_plan(ty, 20, 2, TierPool::threads(3), |j, _| j >= 14);
            // 42 weight rows by 2 on 3 threads, NUMA-aware: along the (longer) weights,
            // chunks of 14: every pair tiled (along the activations: spans of 1, none)
            check_plan(ty, 42, 2, numa(3), |_, _| true);
            // 20 by 20, NUMA-aware, 3 threads: the weights do not outnumber the
            // activations, so by thread along the activations: rows 14..20 tiled
            check_plan(ty, 20, 20, numa(3), |_, i| i >= 14);
            // 30 weight rows: 1 thread, one chunk of 30; 2 threads, chunks of 15
            check_plan(ty, 30, 2, TierPool::threads(1), |_, _| true);
            check_plan(ty, 30, 2, TierPool::threads(2), |_, _| false);
            // 36 by 34 on 1 thread: 3 x 3 chunks of 12 weight and 12 activation rows
            // (spans 12, 12, 12 and 12, 12, 10): every pair tiled
            check_plan(ty, 36, 34, TierPool::threads(1), |_, _| true);
            // 18 by 34 on 1 thread: 2 x 3 chunks, spans 9, 9 (odd) by 12, 12, 10: none
            check_plan(ty, 18, 34, TierPool::threads(1), |_, _| false);
        }
    }
}
