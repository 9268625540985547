//! `mul_mat_vec_q` (`ggml-cuda/mmvq.cu`) for one output, and the launch parameters
//! that set its float order: warp size and `calc_nwarps`.

use super::blockwise;
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
/// every operand is an f16 scale or an f16 product (Q4_1's and Q5_1's `__hmul2`, f16
/// arithmetic that keeps subnormals: an integer multiple of 2^-24, the smallest f16
/// subnormal; their `ms8 * 0.5` a multiple of 2^-25), an exact integer, or a sum or
/// product of those; rounding to binary32 keeps a value a multiple of a power of two q
/// once it is one (a value with a finer ulp than q is exact), so every product of two
/// f16-derived factors and every sum of such products is a multiple of 2^-49, and a
/// nonzero one is at least 2^-49 in magnitude, far above the smallest normal 2^-126.
/// Infinities and NaNs are not flushed. So [`mmvq_gemv`] with this configuration is the
/// CUDA tier's MMVQ.
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
        let col = slots::GEMV.get().map(|_| Column::new(ty, act));
        let row = rows.len() / n;
        if let (Some(f), Some(col)) = (slots::GEMV_ROWS.get(), &col) {
            // One call for every row: the grid checked once, the rows' loop inside the
            // accelerated crate's target-feature function.
            let g = grid(ty, row, act.len(), self.warp_size, self.nwarps(ty), self.contraction)?;
            return f(ty, rows, row, act, col, g, out);
        }
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
pub struct Column {
    /// Each q8_1 block's `d` as f32.
    pub yd: Vec<f32>,
    /// Q4_K, per superblock and step `s = 2p + i` of [`BlockForms::q4_k_block`] (chunks `2p`
    /// and `2p + 1`, q8_1 blocks `k0 = 4p + i` and `k1 = 4p + 2 + i`): the sums of the
    /// eight 4-byte groups `g0..g8` of block `k0`, then of `k1`, as i16 (each at most
    /// 4 * 128 in size) in the order `g0 g4 g1 g5 g2 g6 g3 g7`, so that one `vpmaddwd`
    /// against a scale gives `(g_r + g_{r+4}) * m`, thread `r`'s `dot2 * m`.
    pub q4k: Vec<[[i16; 16]; 4]>,
    /// Q4_K, per superblock and step `s`: `d` of block `k0` four times, then of `k1`.
    pub q4k_d: Vec<[[f32; 8]; 4]>,
    /// Q6_K: per q8_1 block, 32 times the sum of each 4-byte group (the `- 32` of the
    /// signed 6-bit quants, summed once: `(q - 32) . u = q . u - 32 * sum(u)`).
    pub q6k: Vec<[i32; 8]>,
    /// Q2_K and Q5_K: per q8_1 block, the sum of each 4-byte group (their min terms);
    /// Q3_K: four times it (what its block forms subtract for a clear high bit).
    pub sums: Vec<[i32; 8]>,
    /// Q2_K: per q8_1 block, its `d` times each 4-byte group's sum, exact (an f16 `d`
    /// has at most 11 significant bits and a group sum at most 512 in size, so the
    /// product fits f32's 24): `d * (g * m)` of the min term equals `(d * g) * m`,
    /// rounded once either way, fused or not.
    pub sums_d: Vec<[f32; 8]>,
}

impl Column {
    /// The column of `act` for weights of `ty`.
    pub fn new(ty: GgmlType, act: &[BlockQ8_1]) -> Column {
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
            GgmlType::Q2_K | GgmlType::Q5_K => {
                col.sums = act.iter().map(groups).collect();
                if ty == GgmlType::Q2_K {
                    col.sums_d = (col.sums.iter().zip(&col.yd))
                        .map(|(g, &d)| g.map(|v| d * v as f32))
                        .collect();
                }
            }
            GgmlType::Q3_K => {
                col.sums = act.iter().map(|b| groups(b).map(|g| 4 * g)).collect();
            }
            _ => {}
        }
        col
    }
}

/// The weight types the MMVQ twin reproduces.
pub const MMVQ_TYPES: [GgmlType; 11] = [
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q8_0,
    GgmlType::Q2_K,
    GgmlType::Q3_K,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
    GgmlType::IQ4_NL,
    GgmlType::IQ4_XS,
];

/// `(qk, qi, vdr)` of `ggml_cuda_type_traits` and `get_vdr_mmvq` (`qi = qk / (4 * qr)`).
fn traits(ty: GgmlType) -> Result<(usize, usize, usize), KernelError> {
    use GgmlType as T;
    match ty {
        T::Q4_1 | T::Q5_0 | T::Q5_1 | T::IQ4_NL => Ok((32, 4, 2)),
        T::Q8_0 => Ok((32, 8, 2)),
        T::Q2_K | T::Q3_K => Ok((256, 16, 1)),
        T::Q4_K | T::Q5_K => Ok((256, 32, 2)),
        T::Q6_K => Ok((256, 32, 1)),
        T::IQ4_XS => Ok((256, 32, 4)),
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
/// Supports the [`MMVQ_TYPES`].
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

/// The grid of a weight row of `row_bytes` bytes of `ty` against `act_blocks` q8_1
/// blocks, after checking that they fit (whole blocks, one q8_1 block per 32 values).
///
/// # Panics
/// If `warp_size` is not 32 or 64, or `nwarps` is not in 1..=8.
fn grid(
    ty: GgmlType,
    row_bytes: usize,
    act_blocks: usize,
    warp_size: usize,
    nwarps: usize,
    contraction: Contraction,
) -> Result<Grid, KernelError> {
    assert!(warp_size == 32 || warp_size == 64, "warp size {warp_size}");
    assert!(nwarps > 0 && nwarps <= 8, "nwarps {nwarps} (1..=8)");
    let (qk, qi, vdr) = traits(ty)?;
    let unit = ty.type_size();
    if !row_bytes.is_multiple_of(unit) {
        return Err(KernelError::BadLength { what: ty.name(), len: row_bytes, unit });
    }
    let blocks_per_row = row_bytes / unit;
    let want = blocks_per_row * (qk / QK);
    if act_blocks != want {
        return Err(KernelError::ShapeMismatch {
            what: "mmvq q8_1 activation blocks",
            expected: want,
            got: act_blocks,
        });
    }
    Ok(Grid {
        blocks_per_row,
        threads_per_block: qi / vdr, // threads sharing one weight block
        blocks_per_iter: vdr * nwarps * warp_size / qi,
        vdr,
        warp_size,
        nwarps,
        contraction,
    })
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
    let g = grid(ty, w_row.len(), act.len(), warp_size, nwarps, contraction)?;
    if let Some(f) = slots::GEMV.get() {
        let own;
        let col = match col {
            Some(c) if c.yd.len() == act.len() => c,
            _ => {
                own = Column::new(ty, act);
                &own
            }
        };
        return f(ty, w_row, act, col, g);
    }
    g.run(None::<&NoForms>, ty, w_row, act, &Column::default())
}

/// The block-at-once forms of one weight block and the reduction, supplied by an
/// accelerated crate (`tiercheck-accel`) for the MMVQ emulation: each must give the bits
/// of the scalar per-thread loop it replaces (the same integers, the same float
/// operations on the same operands in the same order), several threads per instruction.
pub trait BlockForms {
    /// Every thread's `q4_k_tail` share of Q4_K superblock `x` added into `tmp[0..16]`
    /// (thread order), with the column's per-step scales `yd` and group sums `sums`
    /// ([`Column`]).
    fn q4_k_block(
        &self,
        x: &BlockQ4K,
        y: &[BlockQ8_1],
        yd: &[[f32; 8]; 4],
        sums: &[[i16; 16]; 4],
        c: Contraction,
        tmp: &mut [f32],
    );
    /// Every thread's `q6_k_tail` share of Q6_K superblock `x` added into `tmp[0..32]`.
    fn q6_k_block(
        &self,
        x: &BlockQ6K,
        y: &[BlockQ8_1],
        yd: &[f32],
        sums: &[[i32; 8]],
        c: Contraction,
        tmp: &mut [f32],
    );
    /// Every thread's `q8_0_tail` share of Q8_0 block `x` added into `tmp[0..4]`.
    fn q8_0_block(&self, x: &BlockQ8_0, y: &BlockQ8_1, yd: f32, c: Contraction, tmp: &mut [f32]);
    /// The end of the grid's run: each lane's warps added in order, then lane 0 of the
    /// XOR butterfly (the halving tree).
    fn reduce(&self, tmp: &[f32], warp_size: usize, nwarps: usize) -> f32;
    /// Every thread's share of one block of `ty` (one of the eight types of
    /// `blockwise`, `x` its bytes) into `tmp`, with the q8_1 blocks `y`, their `d`s `yd`
    /// and (Q2_K, Q3_K, Q5_K) the column's `sums` for them, `gs`, (Q2_K) its `sums_d`,
    /// `gsd`; `false` where these forms have none for `ty` (the generic block form then
    /// runs). The default has none.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn other_block(
        &self,
        ty: GgmlType,
        x: &[u8],
        y: &[BlockQ8_1],
        yd: &[f32],
        gs: &[[i32; 8]],
        gsd: &[[f32; 8]],
        c: Contraction,
        tmp: &mut [f32],
    ) -> bool {
        let _ = (ty, x, y, yd, gs, gsd, c, tmp);
        false
    }
    /// The dot of each 4-byte group of the signed `codes` with the signed `q`: eight
    /// exact integers (each at most 4 * 128 * 128 in size), as the eight `dp4a` of one
    /// q8_1 block would give them. The default is the plain loop.
    #[inline(always)]
    fn dots32(&self, codes: &[i8; 32], q: &[u8; 32]) -> [i32; 8] {
        core::array::from_fn(|g| {
            (0..4).map(|k| codes[4 * g + k] as i32 * q[4 * g + k] as i8 as i32).sum()
        })
    }
}

/// No block-at-once forms: the scalar per-thread loop (never called).
struct NoForms;

impl BlockForms for NoForms {
    fn q4_k_block(
        &self,
        _: &BlockQ4K,
        _: &[BlockQ8_1],
        _: &[[f32; 8]; 4],
        _: &[[i16; 16]; 4],
        _: Contraction,
        _: &mut [f32],
    ) {
        unreachable!("NoForms is never asked for a block")
    }
    fn q6_k_block(
        &self,
        _: &BlockQ6K,
        _: &[BlockQ8_1],
        _: &[f32],
        _: &[[i32; 8]],
        _: Contraction,
        _: &mut [f32],
    ) {
        unreachable!("NoForms is never asked for a block")
    }
    fn q8_0_block(&self, _: &BlockQ8_0, _: &BlockQ8_1, _: f32, _: Contraction, _: &mut [f32]) {
        unreachable!("NoForms is never asked for a block")
    }
    fn reduce(&self, _: &[f32], _: usize, _: usize) -> f32 {
        unreachable!("NoForms is never asked for a reduction")
    }
}

/// One output of the grid `g` with the block-at-once forms `forms` (the scalar
/// per-thread loop where `None`): weight row `w_row` of `ty` (validated by the caller,
/// whole blocks) against `act`, with the activation's [`Column`] (read by the forms
/// only). Generic and always inlined, so an accelerated crate compiles it inside its
/// own target-feature function (each `mul_add` one instruction).
#[inline(always)]
pub fn gemv_with<F: BlockForms>(
    forms: Option<&F>,
    ty: GgmlType,
    w_row: &[u8],
    act: &[BlockQ8_1],
    col: &Column,
    g: Grid,
) -> Result<f32, KernelError> {
    g.run(forms, ty, w_row, act, col)
}

/// The slots of this file's entry points (see [`crate::accel`]), filled by
/// `tiercheck-accel` (its `src/gpu/mmvq.rs`).
pub mod slots {
    // A slot's type is its entry point's signature, spelt out.
    #![allow(clippy::type_complexity)]

    use super::*;
    use crate::accel::Slot;

    /// One output with the block-at-once forms ([`gemv_with`] inside the accelerated
    /// crate's target-feature function).
    pub static GEMV: Slot<
        fn(GgmlType, &[u8], &[BlockQ8_1], &Column, Grid) -> Result<f32, KernelError>,
    > = Slot::new();
    /// [`GEMV`] of every row of `rows` (rows of the given byte length, one after
    /// another) into `out`, one value per row, the loop over rows inside the accelerated
    /// crate (the same bits as row by row).
    pub static GEMV_ROWS: Slot<
        fn(
            GgmlType,
            &[u8],
            usize,
            &[BlockQ8_1],
            &Column,
            Grid,
            &mut [f32],
        ) -> Result<(), KernelError>,
    > = Slot::new();
}

/// One thread's share of weight block `kbx` at quant offset `kqs`.
trait Share {
    fn tail(&self, kbx: usize, kqs: usize) -> Tail;

    /// Every thread's share of block `kbx` accumulated into `tmp` (one value per thread
    /// of the block, in thread order) by `forms`.
    fn block(&self, forms: &impl BlockForms, kbx: usize, tmp: &mut [f32]);
}

/// The weight blocks of one of the eight [`blockwise`] kinds, the activation blocks,
/// their `d`s (the [`Column`]'s) and the contraction.
struct Plain<'a, K: blockwise::Kind> {
    x: &'a [K::B],
    y: &'a [BlockQ8_1],
    col: &'a Column,
    c: Contraction,
}

impl<K: blockwise::Kind> Share for Plain<'_, K> {
    #[inline(always)]
    fn tail(&self, kbx: usize, kqs: usize) -> Tail {
        K::tail(&self.x[kbx], &self.y[kbx * K::PER..(kbx + 1) * K::PER], kqs, self.c)
    }

    #[inline(always)]
    fn block(&self, f: &impl BlockForms, kbx: usize, tmp: &mut [f32]) {
        let b = kbx * K::PER..(kbx + 1) * K::PER;
        let gs = if self.col.sums.is_empty() { &[][..] } else { &self.col.sums[b.clone()] };
        let gsd = if self.col.sums_d.is_empty() { &[][..] } else { &self.col.sums_d[b.clone()] };
        let (x, y, yd) = (&self.x[kbx], &self.y[b.clone()], &self.col.yd[b]);
        if !f.other_block(K::TYPE, bytemuck::bytes_of(x), y, yd, gs, gsd, self.c, tmp) {
            K::block(f, x, blockwise::Blk { y, yd, gs, c: self.c }, tmp);
        }
    }
}

// The weight blocks, the activation blocks, the activation's [`Column`] (read by the
// block-at-once forms only) and the contraction.
struct Q4K<'a>(&'a [BlockQ4K], &'a [BlockQ8_1], &'a Column, Contraction);
struct Q6K<'a>(&'a [BlockQ6K], &'a [BlockQ8_1], &'a Column, Contraction);
struct Q80<'a>(&'a [BlockQ8_0], &'a [BlockQ8_1], &'a Column, Contraction);

impl Share for Q4K<'_> {
    #[inline(always)]
    fn tail(&self, kbx: usize, kqs: usize) -> Tail {
        q4_k_tail(&self.0[kbx], &self.1[kbx * 8..], kqs, self.3)
    }

    #[inline(always)]
    fn block(&self, forms: &impl BlockForms, kbx: usize, tmp: &mut [f32]) {
        let y = &self.1[kbx * 8..kbx * 8 + 8];
        let (d, sums) = (&self.2.q4k_d[kbx], &self.2.q4k[kbx]);
        forms.q4_k_block(&self.0[kbx], y, d, sums, self.3, tmp);
    }
}

impl Share for Q6K<'_> {
    #[inline(always)]
    fn tail(&self, kbx: usize, kqs: usize) -> Tail {
        q6_k_tail(&self.0[kbx], &self.1[kbx * 8..], kqs, self.3)
    }

    #[inline(always)]
    fn block(&self, forms: &impl BlockForms, kbx: usize, tmp: &mut [f32]) {
        let (y, b) = (&self.1[kbx * 8..kbx * 8 + 8], kbx * 8..kbx * 8 + 8);
        let (yd, sums) = (&self.2.yd[b.clone()], &self.2.q6k[b]);
        forms.q6_k_block(&self.0[kbx], y, yd, sums, self.3, tmp);
    }
}

impl Share for Q80<'_> {
    #[inline(always)]
    fn tail(&self, kbx: usize, kqs: usize) -> Tail {
        q8_0_tail(&self.0[kbx], &self.1[kbx], kqs)
    }

    #[inline(always)]
    fn block(&self, forms: &impl BlockForms, kbx: usize, tmp: &mut [f32]) {
        forms.q8_0_block(&self.0[kbx], &self.1[kbx], self.2.yd[kbx], self.3, tmp);
    }
}

/// The thread grid of one `mul_mat_vec_q` output.
#[derive(Clone, Copy, Debug)]
pub struct Grid {
    blocks_per_row: usize,
    threads_per_block: usize,
    blocks_per_iter: usize,
    vdr: usize,
    warp_size: usize,
    nwarps: usize,
    contraction: Contraction,
}

impl Grid {
    /// The output of weight row `w_row` (whole blocks of `ty`, checked by the caller):
    /// every thread's strided partial sum, warps 1..n-1 added into warp 0 in order, the
    /// XOR butterfly; each block's threads at once and the reduction by `forms` where
    /// given (the same IEEE operations in the same order).
    #[inline(always)]
    fn run<F: BlockForms>(
        &self,
        forms: Option<&F>,
        ty: GgmlType,
        w_row: &[u8],
        act: &[BlockQ8_1],
        col: &Column,
    ) -> Result<f32, KernelError> {
        let c = self.contraction;
        macro_rules! plain {
            ($k:ty) => {
                self.run_in(forms, &Plain::<$k> { x: cast_blocks(ty, w_row)?, y: act, col, c })
            };
        }
        use blockwise as b;
        use GgmlType as T;
        Ok(match ty {
            T::Q4_K => self.run_in(forms, &Q4K(cast_blocks(ty, w_row)?, act, col, c)),
            T::Q6_K => self.run_in(forms, &Q6K(cast_blocks(ty, w_row)?, act, col, c)),
            T::Q8_0 => self.run_in(forms, &Q80(cast_blocks(ty, w_row)?, act, col, c)),
            T::Q4_1 => plain!(b::Q41),
            T::Q5_0 => plain!(b::Q50),
            T::Q5_1 => plain!(b::Q51),
            T::IQ4_NL => plain!(b::Iq4Nl),
            T::Q2_K => plain!(b::Q2K),
            T::Q3_K => plain!(b::Q3K),
            T::Q5_K => plain!(b::Q5K),
            T::IQ4_XS => plain!(b::Iq4Xs),
            other => return Err(KernelError::Unsupported { op: "mmvq", ty: other.name() }),
        })
    }

    /// Thread `tid` (of `nwarps * warp_size`) starts at block `tid / threads_per_block`
    /// with offset `vdr * (tid % threads_per_block)` and strides `blocks_per_iter`
    /// blocks, so the threads of block `kbx` are `(kbx % blocks_per_iter) *
    /// threads_per_block + k`: walking the blocks in order and, in each, its threads,
    /// gives every thread its own blocks in its own order. With `forms`, a block's
    /// threads at once and the reduction several lanes per instruction.
    #[inline(always)]
    fn run_in<F: BlockForms>(&self, forms: Option<&F>, call: &impl Share) -> f32 {
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
        // `base` is `(kbx % blocks_per_iter) * threads_per_block`, kept by addition (a
        // division per block cost more than a small block's arithmetic).
        debug_assert_eq!(self.blocks_per_iter * self.threads_per_block, n);
        let mut base = 0;
        for kbx in 0..self.blocks_per_row {
            let block = &mut tmp[base..base + self.threads_per_block];
            base += self.threads_per_block;
            if base == n {
                base = 0;
            }
            if let Some(f) = forms {
                call.block(f, kbx, block);
                continue;
            }
            for (k, t) in block.iter_mut().enumerate() {
                *t = call.tail(kbx, self.vdr * k).accumulate(*t, self.contraction);
            }
        }
        if let Some(f) = forms {
            return f.reduce(tmp, self.warp_size, self.nwarps);
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
