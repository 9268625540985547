//! `mul_mat_vec_q` (`ggml-cuda/mmvq.cu`) for one output, and the launch parameters
//! that set its float order: warp size and `calc_nwarps`.

use super::quantize::MAX_WARP;
use super::vecdotq::{q4_k_tail, q6_k_tail, q8_0_tail, Contraction, Tail};
use crate::blocks::{cast_blocks, BlockQ4K, BlockQ6K, BlockQ8_0, BlockQ8_1, QK};
use crate::error::KernelError;
use crate::GgmlType;

/// `mmvq_parameter_table_id`: the per-generation table `calc_nwarps` reads.
///
/// Which table a GPU uses (`get_device_table_id`): RDNA4 (gfx12xx) `Rdna4`; RDNA3.0
/// (gfx1100-1102) `Rdna3_0`; RDNA2 (gfx1030-1037) and RDNA3.5 (gfx1150-1153) `Rdna2`;
/// GCN (gfx803, gfx900-906) and CDNA (gfx908, gfx90a, gfx942, gfx950) `Gcn`; NVIDIA
/// Turing `Turing`; DGX Spark (GB10) `Gb10`; everything else `Generic`, including
/// RDNA1 (gfx1010, gfx1012) and NVIDIA from Ampere on. The physical warp size is 64
/// on gfx8/gfx9 (GCN, CDNA), 32 everywhere else.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MmvqTable {
    /// `MMVQ_PARAMETERS_GENERIC`.
    Generic,
    /// `MMVQ_PARAMETERS_TURING`.
    Turing,
    /// `MMVQ_PARAMETERS_GCN` (GCN and CDNA).
    Gcn,
    /// `MMVQ_PARAMETERS_RDNA2` (RDNA2 and RDNA3.5).
    Rdna2,
    /// `MMVQ_PARAMETERS_RDNA3_0`.
    Rdna3_0,
    /// `MMVQ_PARAMETERS_RDNA4`.
    Rdna4,
    /// `MMVQ_PARAMETERS_GB10`.
    Gb10,
}

/// `calc_nwarps(type, ncols_dst, table_id, small_k, halve_iters)`: warps per block.
///
/// Only the GB10 table reads `small_k` and `halve_iters` (it doubles the generic value
/// for some types when the host decides the K loop halves).
pub fn calc_nwarps(
    ty: GgmlType,
    ncols_dst: usize,
    table: MmvqTable,
    small_k: bool,
    halve_iters: bool,
) -> usize {
    use GgmlType as T;
    match table {
        MmvqTable::Generic => match ncols_dst {
            1..=4 => 4,
            5..=8 => 2,
            _ => 1,
        },
        MmvqTable::Gcn => match ncols_dst {
            1..=4 => 2,
            _ => 1,
        },
        MmvqTable::Rdna4 => match (ncols_dst, ty) {
            (
                1,
                T::Q4_0
                | T::Q4_1
                | T::Q5_0
                | T::Q5_1
                | T::Q8_0
                | T::Q2_K
                | T::Q4_K
                | T::Q5_K
                | T::Q6_K
                | T::IQ4_NL
                | T::IQ4_XS,
            ) => 8,
            _ => 1,
        },
        MmvqTable::Rdna3_0 => match (ncols_dst, ty) {
            (1, T::Q4_0 | T::Q4_1 | T::Q5_0 | T::Q5_1 | T::Q8_0 | T::IQ4_NL) => 8,
            (1, T::Q6_K) => 2,
            _ => 1,
        },
        MmvqTable::Turing => match (ncols_dst, ty) {
            (1, T::Q2_K | T::Q3_K | T::Q4_K | T::Q5_K | T::Q6_K) => 2,
            (1, _) => 4,
            (2..=4, _) => 4,
            (5..=8, _) => 2,
            _ => 1,
        },
        MmvqTable::Gb10 => {
            let generic = calc_nwarps(ty, ncols_dst, MmvqTable::Generic, false, false);
            let promoted = matches!(
                ty,
                T::Q4_0
                    | T::Q4_1
                    | T::Q5_0
                    | T::Q5_1
                    | T::Q8_0
                    | T::Q4_K
                    | T::Q5_K
                    | T::Q6_K
                    | T::IQ4_NL
            );
            if ncols_dst == 1 && !small_k && halve_iters && promoted {
                2 * generic
            } else {
                generic
            }
        }
        MmvqTable::Rdna2 => 1,
    }
}

/// Warps per block for one activation column (decode), on the default path: NVIDIA
/// generic 4, Turing 2 for K-quants (else 4), GCN/CDNA 2, RDNA2/RDNA3.5 1, RDNA3.0 8
/// for legacy quants and Q8_0, 2 for Q6_K, 1 for Q4_K, RDNA4 8 for the common types.
pub fn nwarps_one_column(table: MmvqTable, ty: GgmlType) -> usize {
    calc_nwarps(ty, 1, table, false, false)
}

/// An MMVQ configuration: warp size, the nwarps table and the fused multiply-adds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MmvqConfig {
    /// Stable name.
    pub name: &'static str,
    /// Lanes per warp (wavefront): 32 or 64.
    pub warp_size: usize,
    /// Which `calc_nwarps` table the GPU reads.
    pub table: MmvqTable,
    /// Which multiply-adds the compiler fused.
    pub contraction: Contraction,
    /// Built with fast math (ggml's CUDA build): the activations are
    /// [`super::quantize_q8_1_cuda`]'s, not [`super::quantize_q8_1_mmvq`]'s. (The MMVQ
    /// arithmetic is unchanged: see [`CUDA`] for why flushing subnormals never changes
    /// it.)
    pub fast_math: bool,
}

/// RDNA2 / RDNA3.5 (gfx1030, gfx1151, ...): wave32, `MMVQ_PARAMETERS_RDNA2`, so one
/// warp per block for every type. (RDNA3.0, gfx1100, reads another table: build an
/// [`MmvqConfig`] with [`MmvqTable::Rdna3_0`].)
pub const WAVE32: MmvqConfig = MmvqConfig {
    name: "hip-wave32",
    warp_size: 32,
    table: MmvqTable::Rdna2,
    contraction: Contraction::HIP_CLANG,
    fast_math: false,
};

/// RDNA3.0 (gfx1100, W7900): wave32 with `MMVQ_PARAMETERS_RDNA3_0` (eight warps for
/// Q8_0, two for Q6_K, one for Q4_K) and RDNA's contraction. No lane models it; the
/// gfx1100 code-object trials check ggml's code against it.
pub const WAVE32_RDNA3_0: MmvqConfig =
    MmvqConfig { name: "rdna3.0", table: MmvqTable::Rdna3_0, ..WAVE32 };

/// CDNA gfx90a (MI210/MI250): wave64, `MMVQ_PARAMETERS_GCN`, two warps per block for
/// one column, and gfx90a's contraction ([`Contraction::HIP_CLANG_GFX90A`]: q4_K's
/// final combine is not fused there).
pub const WAVE64: MmvqConfig = MmvqConfig {
    name: "hip-wave64",
    warp_size: 64,
    table: MmvqTable::Gcn,
    contraction: Contraction::HIP_CLANG_GFX90A,
    fast_math: false,
};

/// NVIDIA from Ampere on (sm_80 A100, sm_90 H100/H200) as ggml's CUDA build compiles
/// MMVQ: 32-lane warps, `MMVQ_PARAMETERS_GENERIC` (four warps per block for one column),
/// and nvcc's contraction ([`Contraction::NVCC`]), as read from the SASS of ggml's own
/// `mmvq.cu` compiled by nvcc for sm_90 and sm_80 (`kernels/hip`'s `ggml` trials).
///
/// ggml's CUDA build uses `-use_fast_math`, so every float instruction of MMVQ flushes
/// subnormal inputs and results to zero (`.FTZ`). In MMVQ that never changes a bit:
/// every operand is an f16 scale (an integer multiple of 2^-24, the smallest f16
/// subnormal), an exact integer, or a sum or product of those; rounding to binary32
/// keeps a value a multiple of a power of two q once it is one (a value with a finer
/// ulp than q is exact), so every product of two f16-derived factors and every sum of
/// such products is a multiple of 2^-48, and a nonzero one is at least 2^-48 in
/// magnitude, far above the smallest normal 2^-126. Infinities and NaNs are not
/// flushed. So [`mmvq_gemv`] with this configuration is the CUDA tier's MMVQ.
///
/// The activations differ: see [`super::quantize_q8_1_cuda`] (`fast_math`).
pub const CUDA: MmvqConfig = MmvqConfig {
    name: "cuda-sm90",
    warp_size: 32,
    table: MmvqTable::Generic,
    contraction: Contraction::NVCC,
    fast_math: true,
};

impl MmvqConfig {
    /// Warps per block for one column of type `ty`.
    pub fn nwarps(&self, ty: GgmlType) -> usize {
        nwarps_one_column(self.table, ty)
    }

    /// [`mmvq_gemv`] with this configuration.
    pub fn gemv(&self, ty: GgmlType, w_row: &[u8], act: &[BlockQ8_1]) -> Result<f32, KernelError> {
        mmvq_gemv(ty, w_row, act, self.warp_size, self.nwarps(ty), self.contraction)
    }

    /// [`MmvqConfig::gemv`] of every row of `rows` (whole rows of `ty`, one after another)
    /// with the one activation column `act`, into `out` (one value per row): the same
    /// bits as row by row. The column's q8_1 scales are converted from f16 once for all
    /// rows instead of once per row (each conversion is exact, so where it happens does
    /// not change a bit).
    pub fn gemv_rows(
        &self,
        ty: GgmlType,
        rows: &[u8],
        act: &[BlockQ8_1],
        out: &mut [f32],
    ) -> Result<(), KernelError> {
        let n = out.len();
        if n == 0 {
            return Ok(());
        }
        if !rows.len().is_multiple_of(n) {
            return Err(KernelError::ShapeMismatch {
                what: "mmvq weight bytes per row",
                expected: n * (rows.len() / n),
                got: rows.len(),
            });
        }
        let col = fast_forms().then(|| Column::new(ty, act));
        let row = rows.len() / n;
        for (o, w) in out.iter_mut().zip(rows.chunks_exact(row)) {
            *o = gemv_in(
                ty,
                w,
                act,
                col.as_ref(),
                self.warp_size,
                self.nwarps(ty),
                self.contraction,
            )?;
        }
        Ok(())
    }
}

/// What the block-at-once forms read of one activation column besides its bytes, the
/// same for every weight row, so [`MmvqConfig::gemv_rows`] computes it once. Every
/// entry is exact (f16 to f32 conversions, integer sums), so computing it once instead
/// of inside each row's loop changes no bit.
#[derive(Default)]
struct Column {
    /// Each q8_1 block's `d` as f32.
    yd: Vec<f32>,
    /// Q4_K, per superblock and step `s = 2p + i` of [`fast::q4_k_block`] (chunks `2p`
    /// and `2p + 1`, q8_1 blocks `k0 = 4p + i` and `k1 = 4p + 2 + i`): the sums of the
    /// eight 4-byte groups `g0..g8` of block `k0`, then of `k1`, as i16 (each at most
    /// 4 * 128 in size) in the order `g0 g4 g1 g5 g2 g6 g3 g7`, so that one `vpmaddwd`
    /// against a scale gives `(g_r + g_{r+4}) * m`, thread `r`'s `dot2 * m`.
    q4k: Vec<[[i16; 16]; 4]>,
    /// Q4_K, per superblock and step `s`: `d` of block `k0` four times, then of `k1`.
    q4k_d: Vec<[[f32; 8]; 4]>,
    /// Q6_K: per q8_1 block, 32 times the sum of each 4-byte group (the `- 32` of the
    /// signed 6-bit quants, summed once: `(q - 32) . u = q . u - 32 * sum(u)`).
    q6k: Vec<[i32; 8]>,
}

impl Column {
    fn new(ty: GgmlType, act: &[BlockQ8_1]) -> Column {
        let groups = |b: &BlockQ8_1| -> [i32; 8] {
            std::array::from_fn(|t| b.qs[4 * t..4 * t + 4].iter().map(|&v| v as i8 as i32).sum())
        };
        let mut col = Column { yd: act.iter().map(BlockQ8_1::d).collect(), ..Default::default() };
        match ty {
            GgmlType::Q4_K => {
                let sums: Vec<[i16; 8]> = act
                    .iter()
                    .map(|b| {
                        let g = groups(b);
                        std::array::from_fn(|i| g[(i / 2) + 4 * (i % 2)] as i16)
                    })
                    .collect();
                let pair = |sb: usize, s: usize| {
                    (8 * sb + 4 * (s / 2) + s % 2, 8 * sb + 4 * (s / 2) + 2 + s % 2)
                };
                let n_sb = act.len() / 8;
                col.q4k = (0..n_sb)
                    .map(|sb| {
                        std::array::from_fn(|s| {
                            let (k0, k1) = pair(sb, s);
                            std::array::from_fn(
                                |e| if e < 8 { sums[k0][e] } else { sums[k1][e - 8] },
                            )
                        })
                    })
                    .collect();
                col.q4k_d = (0..n_sb)
                    .map(|sb| {
                        std::array::from_fn(|s| {
                            let (k0, k1) = pair(sb, s);
                            std::array::from_fn(|e| col.yd[if e < 4 { k0 } else { k1 }])
                        })
                    })
                    .collect();
            }
            GgmlType::Q6_K => {
                col.q6k = act.iter().map(|b| groups(b).map(|g| 32 * g)).collect();
            }
            _ => {}
        }
        col
    }
}

/// `(qk, qi, vdr)` of `ggml_cuda_type_traits` and `get_vdr_mmvq`.
fn traits(ty: GgmlType) -> Result<(usize, usize, usize), KernelError> {
    match ty {
        GgmlType::Q4_K => Ok((256, 32, 2)),
        GgmlType::Q6_K => Ok((256, 32, 1)),
        GgmlType::Q8_0 => Ok((32, 8, 2)),
        other => Err(KernelError::Unsupported { op: "mmvq", ty: other.name() }),
    }
}

/// Twin of `mul_mat_vec_q<type, 1, false>` for one output: the dot product of one
/// weight row (`w_row`, whole blocks of `ty`) with one q8_1 activation column (`act`,
/// exactly one q8_1 block per 32 weights, e.g. from [`super::quantize_q8_1_mmvq`]),
/// reduced over `nwarps` warps of `warp_size` lanes in the device's order: per-thread
/// strided partial sums, warps 1..n-1 added into warp 0 in order, then the XOR
/// butterfly; lane 0's value.
///
/// Supports Q4_K, Q6_K and Q8_0.
///
/// # Panics
/// If `warp_size` is not 32 or 64, or `nwarps` is not in 1..=8.
pub fn mmvq_gemv(
    ty: GgmlType,
    w_row: &[u8],
    act: &[BlockQ8_1],
    warp_size: usize,
    nwarps: usize,
    contraction: Contraction,
) -> Result<f32, KernelError> {
    gemv_in(ty, w_row, act, None, warp_size, nwarps, contraction)
}

/// [`mmvq_gemv`], with the [`Column`] of `act` where the caller has computed it.
fn gemv_in(
    ty: GgmlType,
    w_row: &[u8],
    act: &[BlockQ8_1],
    col: Option<&Column>,
    warp_size: usize,
    nwarps: usize,
    contraction: Contraction,
) -> Result<f32, KernelError> {
    assert!(warp_size == 32 || warp_size == 64, "warp size {warp_size}");
    assert!(nwarps > 0 && nwarps <= 8, "nwarps {nwarps} (1..=8)");
    let (qk, qi, vdr) = traits(ty)?;
    let unit = ty.type_size();
    if !w_row.len().is_multiple_of(unit) {
        return Err(KernelError::BadLength { what: ty.name(), len: w_row.len(), unit });
    }
    let blocks_per_row = w_row.len() / unit;
    let want = blocks_per_row * (qk / QK);
    if act.len() != want {
        return Err(KernelError::ShapeMismatch {
            what: "mmvq q8_1 activation blocks",
            expected: want,
            got: act.len(),
        });
    }
    let g = Grid {
        blocks_per_row,
        threads_per_block: qi / vdr, // threads sharing one weight block
        blocks_per_iter: vdr * nwarps * warp_size / qi,
        vdr,
        warp_size,
        nwarps,
        contraction,
    };
    let fast = fast_forms();
    let own;
    let col = match col {
        Some(c) if !fast || c.yd.len() == act.len() => c,
        _ => {
            own = if fast { Column::new(ty, act) } else { Column::default() };
            &own
        }
    };
    Ok(match ty {
        GgmlType::Q4_K => g.run(fast, &Q4K(cast_blocks(ty, w_row)?, act, col, contraction)),
        GgmlType::Q6_K => g.run(fast, &Q6K(cast_blocks(ty, w_row)?, act, col, contraction)),
        _ => g.run(fast, &Q80(cast_blocks(ty, w_row)?, act, col, contraction)),
    })
}

/// Whether the block-at-once forms run here: AVX2, FMA and F16C (the weights' f16
/// scales converted by `vcvtph2ps`, exact like the scalar conversion, NaN payloads
/// included: both set the quiet bit and keep the payload).
/// On aarch64: NEON, which every CPU has, unless the thread asked for the scalar form.
#[inline]
fn fast_forms() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        crate::accel::x86_avx2() && std::arch::is_x86_feature_detected!("f16c")
    }
    #[cfg(target_arch = "aarch64")]
    {
        crate::accel::aarch64_neon()
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        false
    }
}

#[cfg(target_arch = "x86_64")]
use fast as simd;
#[cfg(target_arch = "aarch64")]
use neon_fast as simd;

/// One thread's share of weight block `kbx` at quant offset `kqs`.
trait Share {
    fn tail(&self, kbx: usize, kqs: usize) -> Tail;

    /// Every thread's share of block `kbx` accumulated into `tmp` (one value per thread
    /// of the block, in thread order), with AVX2, FMA and F16C (x86-64) or NEON
    /// (aarch64); `false` where there is no such form (the caller then runs
    /// [`Share::tail`] per thread).
    ///
    /// # Safety
    /// On x86-64 the CPU must have AVX2, FMA and F16C.
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    #[inline(always)]
    unsafe fn block_fast(&self, _kbx: usize, _tmp: &mut [f32]) -> bool {
        false
    }
}

// The weight blocks, the activation blocks, the activation's [`Column`] (read by the
// block-at-once forms only) and the contraction.
#[cfg_attr(not(any(target_arch = "x86_64", target_arch = "aarch64")), allow(dead_code))]
struct Q4K<'a>(&'a [BlockQ4K], &'a [BlockQ8_1], &'a Column, Contraction);
#[cfg_attr(not(any(target_arch = "x86_64", target_arch = "aarch64")), allow(dead_code))]
struct Q6K<'a>(&'a [BlockQ6K], &'a [BlockQ8_1], &'a Column, Contraction);
#[cfg_attr(not(any(target_arch = "x86_64", target_arch = "aarch64")), allow(dead_code))]
struct Q80<'a>(&'a [BlockQ8_0], &'a [BlockQ8_1], &'a Column, Contraction);

impl Share for Q4K<'_> {
    #[inline(always)]
    fn tail(&self, kbx: usize, kqs: usize) -> Tail {
        q4_k_tail(&self.0[kbx], &self.1[kbx * 8..], kqs, self.3)
    }

    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    #[inline(always)]
    unsafe fn block_fast(&self, kbx: usize, tmp: &mut [f32]) -> bool {
        let y = &self.1[kbx * 8..kbx * 8 + 8];
        let (d, sums) = (&self.2.q4k_d[kbx], &self.2.q4k[kbx]);
        // SAFETY: the caller guarantees AVX2, FMA and F16C on x86-64.
        unsafe { simd::q4_k_block(&self.0[kbx], y, d, sums, self.3, tmp) };
        true
    }
}

impl Share for Q6K<'_> {
    #[inline(always)]
    fn tail(&self, kbx: usize, kqs: usize) -> Tail {
        q6_k_tail(&self.0[kbx], &self.1[kbx * 8..], kqs, self.3)
    }

    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    #[inline(always)]
    unsafe fn block_fast(&self, kbx: usize, tmp: &mut [f32]) -> bool {
        let (y, b) = (&self.1[kbx * 8..kbx * 8 + 8], kbx * 8..kbx * 8 + 8);
        let (yd, sums) = (&self.2.yd[b.clone()], &self.2.q6k[b]);
        // SAFETY: the caller guarantees AVX2, FMA and F16C on x86-64.
        unsafe { simd::q6_k_block(&self.0[kbx], y, yd, sums, self.3, tmp) };
        true
    }
}

impl Share for Q80<'_> {
    #[inline(always)]
    fn tail(&self, kbx: usize, kqs: usize) -> Tail {
        q8_0_tail(&self.0[kbx], &self.1[kbx], kqs)
    }

    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    #[inline(always)]
    unsafe fn block_fast(&self, kbx: usize, tmp: &mut [f32]) -> bool {
        // SAFETY: the caller guarantees AVX2, FMA and F16C on x86-64.
        unsafe { simd::q8_0_block(&self.0[kbx], &self.1[kbx], self.2.yd[kbx], self.3, tmp) };
        true
    }
}

/// The thread grid of one `mul_mat_vec_q` output.
struct Grid {
    blocks_per_row: usize,
    threads_per_block: usize,
    blocks_per_iter: usize,
    vdr: usize,
    warp_size: usize,
    nwarps: usize,
    contraction: Contraction,
}

impl Grid {
    /// The output: every thread's strided partial sum, warps 1..n-1 added into warp 0 in
    /// order, the XOR butterfly. `call.tail(kbx, kqs)` is one thread's share of weight
    /// block `kbx` at quant offset `kqs`. `fast`: compiled with AVX2 and FMA, each block's
    /// threads at once where there is such a form (each `mul_add` one `vfmadd`
    /// instruction instead of a library call; the same IEEE operations in the same
    /// order).
    fn run(&self, fast: bool, call: &impl Share) -> f32 {
        #[cfg(target_arch = "x86_64")]
        if fast {
            // SAFETY: `fast` comes from `fast_forms()`, true only when the CPU has
            // AVX2, FMA and F16C.
            return unsafe { self.run_avx2(call) };
        }
        #[cfg(target_arch = "aarch64")]
        if fast {
            return self.run_in::<true>(call);
        }
        let _ = fast;
        self.run_in::<false>(call)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn run_avx2(&self, call: &impl Share) -> f32 {
        self.run_in::<true>(call)
    }

    /// Thread `tid` (of `nwarps * warp_size`) starts at block `tid / threads_per_block`
    /// with offset `vdr * (tid % threads_per_block)` and strides `blocks_per_iter`
    /// blocks, so the threads of block `kbx` are `(kbx % blocks_per_iter) *
    /// threads_per_block + k`: walking the blocks in order and, in each, its threads,
    /// gives every thread its own blocks in its own order. `FAST`: a block's threads at
    /// once where [`Share::block_fast`] has a form (on x86-64 only from
    /// `Grid::run_avx2`), and the reduction several lanes per instruction.
    #[inline(always)]
    fn run_in<const FAST: bool>(&self, call: &impl Share) -> f32 {
        // The per-thread sums (zeroing only what a small grid uses: every row pays it).
        let n = self.nwarps * self.warp_size;
        let mut small = [0.0f32; 128];
        let mut large = Vec::new();
        let tmp: &mut [f32] = if n <= small.len() {
            &mut small[..n]
        } else {
            large.resize(n, 0.0f32);
            &mut large
        };
        for kbx in 0..self.blocks_per_row {
            let base = (kbx % self.blocks_per_iter) * self.threads_per_block;
            let block = &mut tmp[base..base + self.threads_per_block];
            #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
            // SAFETY: `FAST` is true only inside `run_avx2`, which runs only where the
            // CPU has AVX2, FMA and F16C, or on aarch64 (NEON is part of every CPU).
            if FAST && unsafe { call.block_fast(kbx, block) } {
                continue;
            }
            for (k, t) in block.iter_mut().enumerate() {
                *t = call.tail(kbx, self.vdr * k).accumulate(*t, self.contraction);
            }
        }
        #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
        if FAST {
            // SAFETY: as above.
            return unsafe { simd::reduce(tmp, self.warp_size, self.nwarps) };
        }
        let mut lanes = [0.0f32; MAX_WARP];
        let lanes = &mut lanes[..self.warp_size];
        for (lane, v) in lanes.iter_mut().enumerate() {
            let mut acc = tmp[lane];
            for w in 1..self.nwarps {
                acc += tmp[self.warp_size * w + lane];
            }
            *v = acc;
        }
        // Lane 0 of the XOR butterfly (`butterfly_sum`): at offset `o` lane `i < o`
        // adds lane `i + o` (= `i ^ o`) to itself, the halving tree; lanes `>= o` are
        // not needed for lane 0 (`gpu_butterfly_sum_is_the_halving_tree_...`).
        let mut off = self.warp_size / 2;
        while off > 0 {
            let (lo, hi) = lanes.split_at_mut(off);
            for (a, b) in lo.iter_mut().zip(&hi[..off]) {
                *a += *b;
            }
            off /= 2;
        }
        lanes[0]
    }
}

/// The eight 6-bit scales and mins of a Q4_K superblock (`get_scale_min_k4` for
/// sub-blocks 0..8, which the device's branchless per-chunk decode equals:
/// `gpu_q4_k_branchless_scale_decode_matches_get_scale_min_k4`): bytes 0..4 hold
/// the low six bits of scales 0..4 and their top two bits the top bits of scales
/// 4..8, bytes 4..8 the same for the mins, bytes 8..12 the low four bits of scales
/// (low nibble) and mins (high nibble) 4..8.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
#[inline(always)]
fn fast_scales_and_mins(s: &[u8; 12]) -> ([u8; 8], [u8; 8]) {
    let w = |i: usize| u32::from_le_bytes([s[4 * i], s[4 * i + 1], s[4 * i + 2], s[4 * i + 3]]);
    let (a, b, c) = (w(0), w(1), w(2));
    let (low6, low4, top2) = (0x3f3f_3f3f, 0x0f0f_0f0f, 0x0303_0303);
    let sc_hi = (c & low4) | (((a >> 6) & top2) << 4);
    let m_hi = ((c >> 4) & low4) | (((b >> 6) & top2) << 4);
    let join = |lo: u32, hi: u32| {
        let (l, h) = (lo.to_le_bytes(), hi.to_le_bytes());
        [l[0], l[1], l[2], l[3], h[0], h[1], h[2], h[3]]
    };
    (join(a & low6, sc_hi), join(b & low6, m_hi))
}

/// The block-at-once forms of the Q4_K and Q6_K shares with AVX2 and FMA: every thread
/// of one weight block in one pass, lane `t` of a vector holding thread `t`'s value. The
/// integer sums are exact whatever the grouping (bounds below); the float operations are
/// the scalar tails' own, lane by lane: the same products, sums and fused multiply-adds
/// ([`Contraction`]) in the same order, each thread's accumulator added last.
#[cfg(target_arch = "x86_64")]
mod fast {
    use std::arch::x86_64::*;

    use super::super::vecdotq::{Contraction, Q4KCombine};
    use crate::blocks::{BlockQ4K, BlockQ6K, BlockQ8_0, BlockQ8_1};

    /// The end of [`super::Grid::run_in`] on eight lanes at a time: lane `l`'s warps
    /// added in order (`acc = tmp[l]`, then `acc + tmp[warp_size * w + l]` for `w` =
    /// 1..), then lane 0 of the XOR butterfly, the halving tree (`lanes[i] + lanes[i +
    /// off]` for `off` = `warp_size / 2` down to 1): the scalar form's additions, each
    /// with the same two operands in the same order, several per instruction.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn reduce(tmp: &[f32], warp_size: usize, nwarps: usize) -> f32 {
        assert!(warp_size.is_multiple_of(8) && warp_size <= 64 && tmp.len() >= warp_size * nwarps);
        let mut lanes = [0.0f32; 64];
        // SAFETY: every load and store below is of 8 floats inside `tmp` (the assert) or
        // `lanes` (offsets below `warp_size` <= 64).
        unsafe {
            for c in (0..warp_size).step_by(8) {
                let mut acc = _mm256_loadu_ps(tmp.as_ptr().add(c));
                for w in 1..nwarps {
                    acc = _mm256_add_ps(acc, _mm256_loadu_ps(tmp.as_ptr().add(warp_size * w + c)));
                }
                _mm256_storeu_ps(lanes.as_mut_ptr().add(c), acc);
            }
            let mut off = warp_size / 2;
            while off >= 8 {
                for c in (0..off).step_by(8) {
                    let a = _mm256_loadu_ps(lanes.as_ptr().add(c));
                    let b = _mm256_loadu_ps(lanes.as_ptr().add(c + off));
                    _mm256_storeu_ps(lanes.as_mut_ptr().add(c), _mm256_add_ps(a, b));
                }
                off /= 2;
            }
            // off = 4, 2, 1 on lanes 0..8 (only lane 0's inputs are kept).
            let v = _mm256_loadu_ps(lanes.as_ptr());
            let x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
            let y = _mm_add_ps(x, _mm_movehl_ps(x, x));
            _mm_cvtss_f32(_mm_add_ss(y, _mm_shuffle_ps::<1>(y, y)))
        }
    }

    /// An f16 field as f32 by `vcvtph2ps` (exact, as the scalar conversion).
    #[inline(always)]
    unsafe fn half(bits: [u8; 2]) -> f32 {
        // SAFETY: the callers run with F16C.
        unsafe { _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(u16::from_le_bytes(bits) as i32))) }
    }

    /// `acc + a * b`, fused when `fuse` (`Contraction::mad`, 4 lanes).
    #[inline(always)]
    unsafe fn mad4(fuse: bool, a: __m128, b: __m128, acc: __m128) -> __m128 {
        // SAFETY: the callers run with AVX2 and FMA.
        unsafe {
            if fuse {
                _mm_fmadd_ps(a, b, acc)
            } else {
                _mm_add_ps(acc, _mm_mul_ps(a, b))
            }
        }
    }

    /// `acc + a * b`, fused when `fuse` (8 lanes).
    #[inline(always)]
    unsafe fn mad8(fuse: bool, a: __m256, b: __m256, acc: __m256) -> __m256 {
        // SAFETY: the callers run with AVX2 and FMA.
        unsafe {
            if fuse {
                _mm256_fmadd_ps(a, b, acc)
            } else {
                _mm256_add_ps(acc, _mm256_mul_ps(a, b))
            }
        }
    }

    /// Per group of 4 bytes (one 32-bit int), the sum of the byte products of unsigned
    /// `a` and signed `b`: exact while `a` is below 64 (a pair sum at most 2 * 63 * 128).
    #[inline(always)]
    unsafe fn int_dots(a: __m256i, b: __m256i) -> __m256i {
        // SAFETY: the callers run with AVX2.
        unsafe { _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), _mm256_set1_epi16(1)) }
    }

    /// `q4_k_tail` for the 16 threads of superblock `x` (thread `k`: `iqs = 2k`, chunk
    /// `k / 4`, ints `k % 4` and `k % 4 + 4` of the chunk), added into `tmp[0..16]`.
    /// Two chunks at a time are the eight lanes of an AVX vector (lane `4c + r`: chunk
    /// `2p + c`, thread `r` of it). The integers are the tail's, formed exactly in
    /// another grouping: `dot1 * sc` of a lane as `vpmaddwd` of the byte-pair sums
    /// against `sc` (so per 4-byte group `g * sc`), groups `r` and `r + 4` then added;
    /// `dot2 * m` as `vpmaddwd` of the column's group sums (`sums`, order `g0 g4 g1 g5
    /// ..`, see [`super::Column`]) against `m`; `yd` the column's q8_1 scales laid out
    /// per step. Bounds: a byte-pair sum is at most 2 * 15 * 128, a scaled
    /// group 2 * 3840 * 63 and a thread's total 2 * 483840, far inside i32 and below
    /// 2^24, so the conversions to f32 are exact as in the tail.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn q4_k_block(
        x: &BlockQ4K,
        y: &[BlockQ8_1],
        yd: &[[f32; 8]; 4],
        sums: &[[i16; 16]; 4],
        c: Contraction,
        tmp: &mut [f32],
    ) {
        assert!(y.len() == 8 && tmp.len() == 16);
        let mask = _mm256_set1_epi8(0x0F);
        // SAFETY: F16C is enabled here.
        let (dx, dy) = unsafe { (_mm256_set1_ps(half(x.d)), _mm256_set1_ps(half(x.dmin))) };
        let (sc, m) = super::fast_scales_and_mins(&x.scales);
        // The eight scales and mins as i16, in both halves of a vector.
        let wide = |b: [u8; 8]| {
            _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(i64::from_le_bytes(b))))
        };
        let (sc16, m16) = (wide(sc), wide(m));
        // Element `a` of such a vector in every i16 of the low half, element `b` in the
        // high half.
        let pick = |v: __m256i, a: usize, b: usize| {
            let (a, b) = ((2 * a) as i8, (2 * b) as i8);
            let lo = _mm_setr_epi8(
                a,
                a + 1,
                a,
                a + 1,
                a,
                a + 1,
                a,
                a + 1,
                a,
                a + 1,
                a,
                a + 1,
                a,
                a + 1,
                a,
                a + 1,
            );
            let hi = _mm_setr_epi8(
                b,
                b + 1,
                b,
                b + 1,
                b,
                b + 1,
                b,
                b + 1,
                b,
                b + 1,
                b,
                b + 1,
                b,
                b + 1,
                b,
                b + 1,
            );
            _mm256_shuffle_epi8(v, _mm256_setr_m128i(lo, hi))
        };
        // [a_lo + a_hi | b_lo + b_hi]: the four groups r + (r + 4) of a, then of b.
        let fold2 = |a: __m256i, b: __m256i| {
            _mm256_add_epi32(
                _mm256_permute2x128_si256::<0x20>(a, b),
                _mm256_permute2x128_si256::<0x31>(a, b),
            )
        };
        for p in 0..2 {
            let (j0, j1) = (2 * p, 2 * p + 1);
            // SAFETY: 32 bytes at 32 * j of the 128-byte `qs`; each q8_1 block has 32.
            let (q0, q1) = unsafe {
                (
                    _mm256_loadu_si256(x.qs.as_ptr().add(32 * j0).cast()),
                    _mm256_loadu_si256(x.qs.as_ptr().add(32 * j1).cast()),
                )
            };
            let mut sumf_d = _mm256_setzero_ps();
            let mut sumf_m = _mm256_setzero_ps();
            for i in 0..2 {
                let (k0, k1, step) = (2 * j0 + i, 2 * j1 + i, 2 * p + i);
                let (b0, b1) = (&y[k0], &y[k1]);
                // SAFETY: as above; a group-sum and a scale entry are 32 bytes each.
                let (u0, u1, g, d8) = unsafe {
                    (
                        _mm256_loadu_si256(b0.qs.as_ptr().cast()),
                        _mm256_loadu_si256(b1.qs.as_ptr().cast()),
                        _mm256_loadu_si256(sums[step].as_ptr().cast()),
                        _mm256_loadu_ps(yd[step].as_ptr()),
                    )
                };
                let nib = |q: __m256i| {
                    let q = if i == 0 { q } else { _mm256_srli_epi16::<4>(q) };
                    _mm256_and_si256(q, mask)
                };
                // Sub-block k's scale in every i16 (chunk j0's vector, then j1's), the
                // mins of k0 and k1 in the two halves.
                let (sc0, sc1, mv) = (pick(sc16, k0, k0), pick(sc16, k1, k1), pick(m16, k0, k1));
                let p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(nib(q0), u0), sc0);
                let p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(nib(q1), u1), sc1);
                let f1 = _mm256_cvtepi32_ps(fold2(p0, p1));
                let f2 = _mm256_cvtepi32_ps(_mm256_madd_epi16(g, mv));
                // SAFETY: FMA is enabled here.
                unsafe {
                    sumf_d = mad8(c.vec_dot_sums, d8, f1, sumf_d);
                    sumf_m = mad8(c.vec_dot_sums, d8, f2, sumf_m);
                }
            }
            let v = match c.q4_k_combine {
                Q4KCombine::Unfused => {
                    _mm256_sub_ps(_mm256_mul_ps(dx, sumf_d), _mm256_mul_ps(dy, sumf_m))
                }
                // fma(dx, sumf_d, -(dy * sumf_m))
                Q4KCombine::FuseFirst => _mm256_fmsub_ps(dx, sumf_d, _mm256_mul_ps(dy, sumf_m)),
                // fma(-dy, sumf_m, dx * sumf_d)
                Q4KCombine::FuseSecond => _mm256_fnmadd_ps(dy, sumf_m, _mm256_mul_ps(dx, sumf_d)),
            };
            let t = &mut tmp[8 * p..8 * p + 8];
            // SAFETY: `t` holds 8 floats.
            unsafe {
                _mm256_storeu_ps(t.as_mut_ptr(), _mm256_add_ps(_mm256_loadu_ps(t.as_ptr()), v))
            };
        }
    }

    /// `q6_k_tail` for the 32 threads of superblock `x` (thread `k = 8g + t`: int `k` of
    /// `ql`, int `8 (g / 2) + t` of `qh` shifted by `2 (g % 2)`, int `t` of q8_1 blocks
    /// `4 (g / 2) + g % 2 + 2i`, scale `8 (g / 2) + 2 (g % 2) + t / 4 + 4i`), added into
    /// `tmp[0..32]`, eight threads per AVX vector. The signed 6-bit value `q - 32` times a
    /// q8_1 byte is summed as `q * u` (unsigned `q` below 64) minus the column's
    /// `32 * sum(u)` of the thread's group (`sums`).
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn q6_k_block(
        x: &BlockQ6K,
        y: &[BlockQ8_1],
        yd: &[f32],
        sums: &[[i32; 8]],
        c: Contraction,
        tmp: &mut [f32],
    ) {
        assert!(y.len() == 8 && yd.len() == 8 && sums.len() == 8 && tmp.len() == 32);
        let lo = _mm256_set1_epi8(0x0F);
        let hi = _mm256_set1_epi8(0x30);
        // SAFETY: F16C is enabled here.
        let d = _mm256_set1_ps(unsafe { half(x.d) });
        for g in 0..4 {
            let (h, hh) = (g / 2, g % 2);
            // SAFETY: 32 bytes at 32 * g of the 128-byte `ql`, at 32 * h of the 64-byte
            // `qh`; each q8_1 block has 32.
            let (vl, vh) = unsafe {
                (
                    _mm256_loadu_si256(x.ql.as_ptr().add(32 * g).cast()),
                    _mm256_loadu_si256(x.qh.as_ptr().add(32 * h).cast()),
                )
            };
            let vh = if hh == 0 { vh } else { _mm256_srli_epi32::<2>(vh) };
            let mut sumf = _mm256_setzero_ps();
            for i in 0..2 {
                let k = 4 * h + hh + 2 * i;
                // SAFETY: as above; a group-sum entry is 32 bytes.
                let (u, s32) = unsafe {
                    (
                        _mm256_loadu_si256(y[k].qs.as_ptr().cast()),
                        _mm256_loadu_si256(sums[k].as_ptr().cast()),
                    )
                };
                let (vil, vih) = if i == 0 {
                    (_mm256_and_si256(vl, lo), _mm256_and_si256(_mm256_slli_epi32::<4>(vh), hi))
                } else {
                    (_mm256_and_si256(_mm256_srli_epi32::<4>(vl), lo), _mm256_and_si256(vh, hi))
                };
                let q = _mm256_or_si256(vil, vih);
                // SAFETY: AVX2 is enabled here.
                let pq = unsafe { int_dots(q, u) };
                let dot = _mm256_sub_epi32(pq, s32);
                let s0 = x.scale(8 * h + 2 * hh + 4 * i) as i32;
                let s1 = x.scale(8 * h + 2 * hh + 1 + 4 * i) as i32;
                let scv = _mm256_setr_epi32(s0, s0, s0, s0, s1, s1, s1, s1);
                let f = _mm256_cvtepi32_ps(_mm256_mullo_epi32(dot, scv));
                // SAFETY: FMA is enabled here.
                sumf = unsafe { mad8(c.vec_dot_sums, _mm256_set1_ps(yd[k]), f, sumf) };
            }
            let t = &mut tmp[8 * g..8 * g + 8];
            // SAFETY: `t` holds 8 floats; FMA is enabled here.
            unsafe {
                let acc = _mm256_loadu_ps(t.as_ptr());
                _mm256_storeu_ps(t.as_mut_ptr(), mad8(c.accumulate, d, sumf, acc));
            }
        }
    }

    /// `q8_0_tail` for the 4 threads of block `x` (thread `k`: bytes `8k..8k + 8`),
    /// added into `tmp[0..4]` with `(d_x * d_y) * sumi` fused into the accumulator where
    /// the contraction says. The signed bytes are widened to i16 before multiplying, so
    /// every product (including -128 * -128) is exact.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn q8_0_block(
        x: &BlockQ8_0,
        y: &BlockQ8_1,
        yd: f32,
        c: Contraction,
        tmp: &mut [f32],
    ) {
        assert!(tmp.len() == 4);
        // SAFETY: 32 bytes each.
        let (xv, yv) = unsafe {
            (_mm256_loadu_si256(x.qs.as_ptr().cast()), _mm256_loadu_si256(y.qs.as_ptr().cast()))
        };
        let wide = |v: __m256i, hi: bool| {
            _mm256_cvtepi8_epi16(if hi {
                _mm256_extracti128_si256::<1>(v)
            } else {
                _mm256_castsi256_si128(v)
            })
        };
        // Pair sums: bytes 0..16 in `lo`, 16..32 in `hi`, eight i32 each.
        let lo = _mm256_madd_epi16(wide(xv, false), wide(yv, false));
        let hi = _mm256_madd_epi16(wide(xv, true), wide(yv, true));
        // [l01 l23 h01 h23 | l45 l67 h45 h67], then [t0 t2 t0 t2 | t1 t3 t1 t3].
        let s = _mm256_hadd_epi32(lo, hi);
        let s = _mm256_hadd_epi32(s, s);
        let t = _mm256_permutevar8x32_epi32(s, _mm256_setr_epi32(0, 4, 1, 5, 0, 0, 0, 0));
        let sumi = _mm_cvtepi32_ps(_mm256_castsi256_si128(t));
        // SAFETY: F16C is enabled here.
        let dxdy = _mm_set1_ps(unsafe { half(x.d) } * yd);
        let acc = &mut tmp[..4];
        // SAFETY: `acc` holds 4 floats; FMA is enabled here.
        unsafe {
            let sum = mad4(c.accumulate, dxdy, sumi, _mm_loadu_ps(acc.as_ptr()));
            _mm_storeu_ps(acc.as_mut_ptr(), sum);
        }
    }
}

/// The block-at-once forms and the reduction on aarch64 hosts, with NEON: the x86-64
/// forms' arithmetic with four threads per float vector. The integers are the tails'
/// (4-byte groups of widening byte products, `smull` and pairwise additions; bounds as
/// in the x86-64 forms); the float operations are the tails' own, lane by lane (`fmla` where
/// [`Contraction`] fuses, `fmul` then `fadd` where it does not), each thread's
/// accumulator added last.
#[cfg(target_arch = "aarch64")]
mod neon_fast {
    use core::arch::aarch64::*;

    use super::super::vecdotq::{Contraction, Q4KCombine};
    use crate::accel::neon::{group4, load16};
    use crate::blocks::{BlockQ4K, BlockQ6K, BlockQ8_0, BlockQ8_1};

    /// `acc + a * b`, fused when `fuse` (`Contraction::mad`, 4 lanes).
    #[inline(always)]
    fn mad4(fuse: bool, a: float32x4_t, b: float32x4_t, acc: float32x4_t) -> float32x4_t {
        // SAFETY: NEON is part of every aarch64 CPU.
        unsafe {
            if fuse {
                vfmaq_f32(acc, a, b)
            } else {
                vaddq_f32(acc, vmulq_f32(a, b))
            }
        }
    }

    /// `tmp[at..at + 4] += v` (the thread's accumulator first).
    #[inline(always)]
    fn add_into(tmp: &mut [f32], at: usize, v: float32x4_t) {
        assert!(at + 4 <= tmp.len());
        // SAFETY: four floats at `at` (checked above).
        unsafe {
            let p = tmp.as_mut_ptr().add(at);
            vst1q_f32(p, vaddq_f32(vld1q_f32(p), v));
        }
    }

    /// `q4_k_tail` for the 16 threads of superblock `x`, four per vector (chunk `j`,
    /// threads `4j..4j + 4`): `dot1` of thread `r` the 4-byte groups `r` and `r + 4` of
    /// the chunk's products, times the sub-block scale; `dot2 * m` from the column's
    /// group sums (`sums`, pairs `g_r, g_{r+4}` added by `saddlp`).
    pub(super) unsafe fn q4_k_block(
        x: &BlockQ4K,
        y: &[BlockQ8_1],
        yd: &[[f32; 8]; 4],
        sums: &[[i16; 16]; 4],
        c: Contraction,
        tmp: &mut [f32],
    ) {
        assert!(y.len() == 8 && tmp.len() == 16);
        let (sc, m) = super::fast_scales_and_mins(&x.scales);
        let (dx, dy) = (x.d(), x.dmin());
        // SAFETY: NEON is part of every aarch64 CPU; the loads are of 4 or 8 elements
        // of the arrays named.
        unsafe {
            let mask = vdupq_n_u8(0x0F);
            for j in 0..4 {
                let (q0, q1) = (load16(&x.qs, 32 * j), load16(&x.qs, 32 * j + 16));
                let mut sumf_d = vdupq_n_f32(0.0);
                let mut sumf_m = vdupq_n_f32(0.0);
                for i in 0..2 {
                    let k = 2 * j + i;
                    let (step, half) = (2 * (j / 2) + i, j % 2);
                    let nib = |q: int8x16_t| {
                        let u = vreinterpretq_u8_s8(q);
                        let u = if i == 0 { u } else { vshrq_n_u8::<4>(u) };
                        vreinterpretq_s8_u8(vandq_u8(u, mask))
                    };
                    let g = vaddq_s32(
                        group4(nib(q0), load16(&y[k].qs, 0)),
                        group4(nib(q1), load16(&y[k].qs, 16)),
                    );
                    let f1 = vcvtq_f32_s32(vmulq_n_s32(g, sc[k] as i32));
                    let g2 = vpaddlq_s16(vld1q_s16(sums[step].as_ptr().add(8 * half)));
                    let f2 = vcvtq_f32_s32(vmulq_n_s32(g2, m[k] as i32));
                    let d8 = vld1q_f32(yd[step].as_ptr().add(4 * half));
                    sumf_d = mad4(c.vec_dot_sums, d8, f1, sumf_d);
                    sumf_m = mad4(c.vec_dot_sums, d8, f2, sumf_m);
                }
                let (vdx, vdy) = (vdupq_n_f32(dx), vdupq_n_f32(dy));
                let v = match c.q4_k_combine {
                    Q4KCombine::Unfused => {
                        vsubq_f32(vmulq_f32(vdx, sumf_d), vmulq_f32(vdy, sumf_m))
                    }
                    // fma(dx, sumf_d, -(dy * sumf_m))
                    Q4KCombine::FuseFirst => {
                        vfmaq_f32(vnegq_f32(vmulq_f32(vdy, sumf_m)), vdx, sumf_d)
                    }
                    // fma(-dy, sumf_m, dx * sumf_d)
                    Q4KCombine::FuseSecond => vfmsq_f32(vmulq_f32(vdx, sumf_d), vdy, sumf_m),
                };
                add_into(tmp, 4 * j, v);
            }
        }
    }

    /// `q6_k_tail` for the 32 threads of superblock `x` (thread `8g + t`), four per
    /// vector; the bit operations on 32-bit lanes as the tail's on its ints.
    pub(super) unsafe fn q6_k_block(
        x: &BlockQ6K,
        y: &[BlockQ8_1],
        yd: &[f32],
        sums: &[[i32; 8]],
        c: Contraction,
        tmp: &mut [f32],
    ) {
        assert!(y.len() == 8 && yd.len() == 8 && sums.len() == 8 && tmp.len() == 32);
        let d = x.d();
        // SAFETY: NEON is part of every aarch64 CPU; the loads are of 4 or 16 elements
        // of the arrays named.
        unsafe {
            let lo = vdupq_n_u32(0x0F0F_0F0F);
            let hi = vdupq_n_u32(0x3030_3030);
            for g in 0..4 {
                let (h, hh) = (g / 2, g % 2);
                for half in 0..2 {
                    let at = 16 * half;
                    let vl = vreinterpretq_u32_s8(load16(&x.ql, 32 * g + at));
                    let vh = vreinterpretq_u32_s8(load16(&x.qh, 32 * h + at));
                    let vh = if hh == 0 { vh } else { vshrq_n_u32::<2>(vh) };
                    let mut sumf = vdupq_n_f32(0.0);
                    for i in 0..2 {
                        let k = 4 * h + hh + 2 * i;
                        let (vil, vih) = if i == 0 {
                            (vandq_u32(vl, lo), vandq_u32(vshlq_n_u32::<4>(vh), hi))
                        } else {
                            (vandq_u32(vshrq_n_u32::<4>(vl), lo), vandq_u32(vh, hi))
                        };
                        let q = vreinterpretq_s8_u32(vorrq_u32(vil, vih));
                        let pq = group4(q, load16(&y[k].qs, at));
                        let dot = vsubq_s32(pq, vld1q_s32(sums[k].as_ptr().add(4 * half)));
                        let s = x.scale(8 * h + 2 * hh + half + 4 * i) as i32;
                        let f = vcvtq_f32_s32(vmulq_n_s32(dot, s));
                        sumf = mad4(c.vec_dot_sums, vdupq_n_f32(yd[k]), f, sumf);
                    }
                    let at = 8 * g + 4 * half;
                    let p = tmp.as_mut_ptr().add(at);
                    vst1q_f32(p, mad4(c.accumulate, vdupq_n_f32(d), sumf, vld1q_f32(p)));
                }
            }
        }
    }

    /// `q8_0_tail` for the 4 threads of block `x` (thread `k`: bytes `8k..8k + 8`),
    /// added into `tmp[0..4]` with `(d_x * d_y) * sumi` fused where the contraction
    /// says. Products of two signed bytes widened to i16 (at most 128 * 128).
    pub(super) unsafe fn q8_0_block(
        x: &BlockQ8_0,
        y: &BlockQ8_1,
        yd: f32,
        c: Contraction,
        tmp: &mut [f32],
    ) {
        assert!(tmp.len() == 4);
        // SAFETY: NEON is part of every aarch64 CPU; four floats of `tmp`.
        unsafe {
            let pairs = |at: usize| {
                let (a, b) = (load16(&x.qs, at), load16(&y.qs, at));
                let lo = vpaddlq_s16(vmull_s8(vget_low_s8(a), vget_low_s8(b)));
                let hi = vpaddlq_s16(vmull_high_s8(a, b));
                vpaddq_s32(lo, hi)
            };
            // [bytes 0..4, 4..8, 8..12, 12..16] and the same of 16..32, then per 8 bytes.
            let sumi = vcvtq_f32_s32(vpaddq_s32(pairs(0), pairs(16)));
            let dxdy = vdupq_n_f32(x.d() * yd);
            let p = tmp.as_mut_ptr();
            vst1q_f32(p, mad4(c.accumulate, dxdy, sumi, vld1q_f32(p)));
        }
    }

    /// The end of [`super::Grid::run_in`] four lanes at a time: each lane's warps added
    /// in order, then lane 0 of the halving tree, every addition with the scalar form's
    /// two operands in its order.
    pub(super) unsafe fn reduce(tmp: &[f32], warp_size: usize, nwarps: usize) -> f32 {
        assert!(warp_size.is_multiple_of(4) && warp_size <= 64 && tmp.len() >= warp_size * nwarps);
        let mut lanes = [0.0f32; 64];
        // SAFETY: NEON is part of every aarch64 CPU; every access is of four floats
        // inside `tmp` (the assert) or `lanes`.
        unsafe {
            for c in (0..warp_size).step_by(4) {
                let mut acc = vld1q_f32(tmp.as_ptr().add(c));
                for w in 1..nwarps {
                    acc = vaddq_f32(acc, vld1q_f32(tmp.as_ptr().add(warp_size * w + c)));
                }
                vst1q_f32(lanes.as_mut_ptr().add(c), acc);
            }
            let mut off = warp_size / 2;
            while off >= 4 {
                for c in (0..off).step_by(4) {
                    let a = vld1q_f32(lanes.as_ptr().add(c));
                    let b = vld1q_f32(lanes.as_ptr().add(c + off));
                    vst1q_f32(lanes.as_mut_ptr().add(c), vaddq_f32(a, b));
                }
                off /= 2;
            }
        }
        let (a, b) = (lanes[0] + lanes[2], lanes[1] + lanes[3]);
        a + b
    }
}
