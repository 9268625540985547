//! `mul_mat_vec_q` (`ggml-cuda/mmvq.cu`) for one output, and the launch parameters
//! that set its float order: warp size and `calc_nwarps`.

use super::quantize::{butterfly_sum, MAX_WARP};
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
}

/// RDNA2 / RDNA3.5 (gfx1030, gfx1151, ...): wave32, `MMVQ_PARAMETERS_RDNA2`, so one
/// warp per block for every type. (RDNA3.0, gfx1100, reads another table: build an
/// [`MmvqConfig`] with [`MmvqTable::Rdna3_0`].)
pub const WAVE32: MmvqConfig = MmvqConfig {
    name: "hip-wave32",
    warp_size: 32,
    table: MmvqTable::Rdna2,
    contraction: Contraction::HIP_CLANG,
};

/// CDNA gfx90a (MI210/MI250): wave64, `MMVQ_PARAMETERS_GCN`, two warps per block for
/// one column, and gfx90a's contraction ([`Contraction::HIP_CLANG_GFX90A`]: q4_K's
/// final combine is not fused there).
pub const WAVE64: MmvqConfig = MmvqConfig {
    name: "hip-wave64",
    warp_size: 64,
    table: MmvqTable::Gcn,
    contraction: Contraction::HIP_CLANG_GFX90A,
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
/// If `warp_size` is not 32 or 64, or `nwarps` is 0.
pub fn mmvq_gemv(
    ty: GgmlType,
    w_row: &[u8],
    act: &[BlockQ8_1],
    warp_size: usize,
    nwarps: usize,
    contraction: Contraction,
) -> Result<f32, KernelError> {
    assert!(warp_size == 32 || warp_size == 64, "warp size {warp_size}");
    assert!(nwarps > 0, "nwarps must be positive");
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
    let call: Box<dyn Fn(usize, usize) -> Tail + '_> = match ty {
        GgmlType::Q4_K => {
            let x: &[BlockQ4K] = cast_blocks(ty, w_row)?;
            Box::new(move |kbx, kqs| q4_k_tail(&x[kbx], &act[kbx * 8..], kqs, contraction))
        }
        GgmlType::Q6_K => {
            let x: &[BlockQ6K] = cast_blocks(ty, w_row)?;
            Box::new(move |kbx, kqs| q6_k_tail(&x[kbx], &act[kbx * 8..], kqs, contraction))
        }
        _ => {
            let x: &[BlockQ8_0] = cast_blocks(ty, w_row)?;
            Box::new(move |kbx, kqs| q8_0_tail(&x[kbx], &act[kbx], kqs))
        }
    };

    let threads_per_block = qi / vdr; // threads sharing one weight block
    let blocks_per_iter = vdr * nwarps * warp_size / qi;
    let partial = |tid: usize| -> f32 {
        let mut tmp = 0.0f32;
        let kqs = vdr * (tid % threads_per_block);
        let mut kbx = tid / threads_per_block;
        while kbx < blocks_per_row {
            tmp = call(kbx, kqs).accumulate(tmp, contraction);
            kbx += blocks_per_iter;
        }
        tmp
    };

    let mut lanes = [0.0f32; MAX_WARP];
    for (lane, v) in lanes[..warp_size].iter_mut().enumerate() {
        let mut tmp = partial(lane);
        for w in 1..nwarps {
            tmp += partial(warp_size * w + lane);
        }
        *v = tmp;
    }
    Ok(butterfly_sum(&mut lanes[..warp_size]))
}
