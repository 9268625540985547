//! Twin of ggml's GPU matrix-vector product for F32 and F16 matrices (MMVF,
//! `ggml-cuda/mmvf.cu` `mul_mat_vec_f<T, type_acc, ncols_dst, block_size>`), the kernel
//! behind the two attention products without flash attention when one token (or a few)
//! is decoded: `K·Q` (the cache's K rows times the query, `GGML_PREC_F32`) and `V·p`
//! (the transposed V cache times the probabilities, default precision).
//!
//! # One output (`ncols_dst` = 1, or one column of a few: each column's order is the same)
//!
//! One block of `B` threads per output row ([`MmvfConfig::block_size`]): `B` is the
//! multiple of the physical warp from one warp up to 256 threads (128 on AMD GPUs before
//! RDNA) that needs the fewest iterations over the row's pairs, the smaller on a tie
//! (`launch_mul_mat_vec_f_cuda`). The row is read as pairs (`float2` / `half2`); thread
//! `t` takes pairs `t, t+B, t+2B, ..` in increasing order:
//!
//! - **f32 accumulator** (an F32 matrix, or an F16 one widened: `K·Q`, whose precision
//!   llama.cpp sets to F32): `s = 0`, then per pair `s = fma(x0, y0, s)`,
//!   `s = fma(x1, y1, s)` (ggml's `ggml_cuda_mad`, `acc += v*u`, contracted by nvcc
//!   and by HIP clang for RDNA2: `FFMA` / `v_fma_f32`). On CDNA2 (gfx90a) HIP clang
//!   pairs the two products of the one-column kernel into one packed `v_pk_mul_f32` and
//!   adds them one by one: `s = (s + RN(x0 y0)) + RN(x1 y1)`, unfused
//!   ([`MmvfConfig::fused`]); its kernels for two columns fuse like the others
//!   ([`MmvfConfig::fused_columns`]). [`MmvfAcc::F32`].
//! - **F16 accumulator** (an F16 matrix at default precision on GPUs with fast FP16,
//!   which is every AMD GPU and NVIDIA's from compute capability 6.0 but 6.1: `V·p`):
//!   `h = (0, 0)` as `half2`; per pair the activations are rounded to F16
//!   (`make_half2(y0, y1)`, nearest even) and `h = h + x * y` lane-wise as one fused
//!   FP16 multiply-add per half (`v_pk_fma_f16`, `HFMA2`: one rounding to F16, F16
//!   subnormals kept on both vendors); after the loop `s = f32(h.lo) + f32(h.hi)`, one
//!   f32 addition. [`MmvfAcc::F16`].
//!
//! Then the block's reduction, over the **physical** warp (`warp_reduce_sum<warp_size>`,
//! 64 lanes on CDNA, 32 elsewhere; not ggml's 32-wide `WARP_SIZE` of the other kernels):
//! the XOR butterfly within each warp (offsets `warp/2, .., 1`); if `B` is more than one
//! warp, each warp's sum goes to shared slot `w` of `warp` slots zeroed first, and warp 0
//! runs the same butterfly over the slots (`0.0` beyond the last warp). Lane 0's value is
//! the output. On NVIDIA (`-use_fast_math`) every f32 instruction flushes subnormal inputs
//! and results; the F16 instructions do not.
//!
//! The order was read from the code objects of ggml's own `mmvf.cu` built by hipcc
//! (gfx1030, gfx90a) and nvcc (sm_90, sm_80); `kernels/hip`'s `ggml <target> mmvf`
//! trials compare it with those code objects.
//!
//! # When ggml takes MMVF (`ggml_cuda_should_use_mmvf`)
//!
//! For `ne11` activation columns, a matrix of `rows` rows (`ne01`) in `mats` matrices
//! (`ne02*ne03`), the row length even ([`MmvfConfig::takes`]):
//!
//! - RDNA2 (gfx1030: no matrix cores): F32 and F16 up to 8 columns.
//! - CDNA (gfx90a: MFMA): F32 up to 3 columns, F16 up to 2.
//! - NVIDIA from Ampere on: F32 up to 3 columns; F16 only for one column and only when
//!   the matrix is small (at most 512 rows, or a single matrix).
//!
//! Otherwise ggml multiplies with its tiled or BLAS kernels (hipBLAS, cuBLAS, MMF),
//! whose order is not reproduced.

use super::quantize::ftz;
use crate::fp16;

/// A GPU generation's MMVF: its warp, its block sizes, its subnormal mode and when
/// ggml takes the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MmvfConfig {
    /// Which GPUs.
    pub name: &'static str,
    /// The physical warp (`ggml_cuda_get_physical_warp_size`): 64 on CDNA, else 32.
    pub warp_size: usize,
    /// The largest block `launch_mul_mat_vec_f_cuda` considers: 128 on AMD GPUs before
    /// RDNA1 (CDNA), else 256.
    pub max_block: usize,
    /// Whether f32 instructions flush subnormals (nvcc's `-use_fast_math`).
    pub ftz: bool,
    /// Whether the f32 accumulator's multiply-adds are fused in the one-column kernel
    /// (not on CDNA2, whose packed multiply takes both products of a pair).
    pub fused: bool,
    /// The same for the kernels of several columns (a prompt's small batches).
    pub fused_columns: bool,
    /// Most activation columns for which an F32 matrix takes MMVF.
    pub f32_max_cols: usize,
    /// Most activation columns for which an F16 matrix takes MMVF.
    pub f16_max_cols: usize,
    /// F16 only: MMVF needs a small matrix, at most this many rows or a single matrix
    /// (NVIDIA from Ampere on: 512), `None` where any size does.
    pub f16_small_rows: Option<usize>,
}

/// RDNA2 (gfx1030), the `hip-wave32` lane.
pub const MMVF_RDNA2: MmvfConfig = MmvfConfig {
    name: "rdna2",
    warp_size: 32,
    max_block: 256,
    ftz: false,
    fused: true,
    fused_columns: true,
    f32_max_cols: 8,
    f16_max_cols: 8,
    f16_small_rows: None,
};

/// RDNA3 (gfx1100, gfx1151): RDNA2's kernels (32-lane warps, blocks up to 256, fused),
/// but ggml hands an F16 matrix to hipBLAS from 4 columns (RDNA3 has FP16 matrix
/// hardware). The `hip-wave32` lane's flavour keeps RDNA2's cut-off; this is what the
/// gfx1100 and gfx1151 code objects are checked against.
pub const MMVF_RDNA3: MmvfConfig = MmvfConfig { name: "rdna3", f16_max_cols: 3, ..MMVF_RDNA2 };

/// CDNA2 (gfx90a), the `hip-wave64` lane.
pub const MMVF_CDNA: MmvfConfig = MmvfConfig {
    name: "cdna",
    warp_size: 64,
    max_block: 128,
    ftz: false,
    fused: false,
    fused_columns: true,
    f32_max_cols: 3,
    f16_max_cols: 2,
    f16_small_rows: None,
};

/// NVIDIA from Ampere on (sm_80, sm_90), the `cuda-sm90` lane.
pub const MMVF_AMPERE: MmvfConfig = MmvfConfig {
    name: "nvidia-ampere",
    warp_size: 32,
    max_block: 256,
    ftz: true,
    fused: true,
    fused_columns: true,
    f32_max_cols: 3,
    f16_max_cols: 1,
    f16_small_rows: Some(512),
};

/// The accumulator of one MMVF instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MmvfAcc {
    /// An f32 fused multiply-add chain (F32 matrices; F16 ones at `GGML_PREC_F32`).
    F32,
    /// A `half2` FP16 fused multiply-add chain, the halves added in f32 at the end (F16
    /// matrices at default precision).
    F16,
}

impl MmvfAcc {
    /// Stable name.
    pub fn name(self) -> &'static str {
        match self {
            MmvfAcc::F32 => "f32-acc",
            MmvfAcc::F16 => "f16-acc",
        }
    }
}

impl MmvfConfig {
    /// Threads per block for rows of `ncols` values (`launch_mul_mat_vec_f_cuda`): from
    /// one warp, the block of `warp_size` multiples up to [`MmvfConfig::max_block`] with
    /// the fewest iterations `ceil(ncols / 2B)`; the first (smallest) on a tie.
    pub fn block_size(&self, ncols: usize) -> usize {
        let w = self.warp_size;
        let niter = |b: usize| ncols.div_ceil(2 * b);
        let mut best = (w, niter(w));
        let mut b = 2 * w;
        while b <= self.max_block {
            if niter(b) < best.1 {
                best = (b, niter(b));
            }
            b += w;
        }
        best.0
    }

    /// Whether ggml multiplies with MMVF (`ggml_cuda_should_use_mmvf`): a matrix of
    /// `rows` rows of `ncols` values, `mats` matrices, times `cols` activation columns.
    pub fn takes(&self, f16: bool, ncols: usize, rows: usize, mats: usize, cols: usize) -> bool {
        if !ncols.is_multiple_of(2) || cols == 0 {
            return false;
        }
        if !f16 {
            return cols <= self.f32_max_cols;
        }
        let small = self.f16_small_rows.is_none_or(|max| rows <= max || mats == 1);
        small && cols <= self.f16_max_cols
    }

    #[inline]
    fn flush(&self, v: f32) -> f32 {
        if self.ftz {
            ftz(v)
        } else {
            v
        }
    }

    /// The device's f32 addition.
    #[inline]
    fn add(&self, a: f32, b: f32) -> f32 {
        self.flush(self.flush(a) + self.flush(b))
    }

    /// One output of the one-column kernel: the row `x` (F32 values, or F16 values
    /// widened to f32) times the activations `y`, in the kernel's order (module doc). The
    /// length must be even.
    pub fn dot(&self, acc: MmvfAcc, x: &[f32], y: &[f32]) -> f32 {
        self.dot_in(acc, 1, x, y)
    }

    /// One output of the kernel for `cols` activation columns (`ncols_dst`): each
    /// column in the one-column order, with [`MmvfConfig::fused_columns`] from two on.
    pub fn dot_in(&self, acc: MmvfAcc, cols: usize, x: &[f32], y: &[f32]) -> f32 {
        let fused = if cols > 1 { self.fused_columns } else { self.fused };
        assert_eq!(x.len(), y.len(), "mmvf: lengths differ");
        assert!(x.len().is_multiple_of(2), "mmvf: odd row length {}", x.len());
        let pairs = x.len() / 2;
        let b = self.block_size(x.len());
        let mut tmp = vec![0.0f32; b];
        for (t, s) in tmp.iter_mut().enumerate() {
            *s = match acc {
                MmvfAcc::F32 => {
                    let mut s = 0.0f32;
                    for p in (t..pairs).step_by(b) {
                        for i in [2 * p, 2 * p + 1] {
                            let (xi, yi) = (self.flush(x[i]), self.flush(y[i]));
                            s = if fused {
                                self.flush(xi.mul_add(yi, s))
                            } else {
                                self.add(s, xi * yi)
                            };
                        }
                    }
                    s
                }
                MmvfAcc::F16 => {
                    let mut h = [0.0f32; 2];
                    for p in (t..pairs).step_by(b) {
                        for (k, hk) in h.iter_mut().enumerate() {
                            let i = 2 * p + k;
                            *hk = fp16::fma_f16(x[i], fp16::round_to_f16(y[i]), *hk);
                        }
                    }
                    self.add(h[0], h[1])
                }
            };
        }
        self.reduce(&mut tmp)
    }

    /// The block's reduction of the per-thread sums `tmp` (module doc).
    pub fn reduce(&self, tmp: &mut [f32]) -> f32 {
        let w = self.warp_size;
        assert!(tmp.len().is_multiple_of(w) && tmp.len() <= w * w, "block of {}", tmp.len());
        let mut prev = vec![0.0f32; w];
        let mut bfly = |lanes: &mut [f32]| {
            let mut off = w / 2;
            while off > 0 {
                prev.copy_from_slice(lanes);
                for (i, l) in lanes.iter_mut().enumerate() {
                    *l = self.add(prev[i], prev[i ^ off]);
                }
                off /= 2;
            }
            lanes[0]
        };
        if tmp.len() == w {
            return bfly(tmp);
        }
        let mut slots = vec![0.0f32; w];
        for (s, lanes) in slots.iter_mut().zip(tmp.chunks_exact_mut(w)) {
            *s = bfly(lanes);
        }
        bfly(&mut slots)
    }
}
