//! Portable twin of ggml's x86 tiled K-quant matmul as the haswell build compiles it
//! (`ggml_compute_forward_mul_mat_tiled` in `ggml-cpu/tiled/tiled.cpp` with the AVX2
//! microkernel `tiled_run_microtile_avx2` of `tiled-kernel.cpp`).
//!
//! **When ggml takes it.** `ggml_compute_forward_mul_mat` tries it first, before
//! llamafile's sgemm and the `vec_dot` loop: for weights of a K-quant type that are not
//! in the repack buffer (`src0->extra == NULL`) when the activation has 8 or more rows
//! (`ne11 >= 8`), unless the environment sets `GGML_CPU_TILED_MM=0`. Of the types the
//! lanes multiply that is Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and IQ4_XS ([`applies`]). Activations are quantized to
//! q8_K by the tier's `from_float` (on x86 the reference `quantize_row_q8_K`), the same
//! codes the `vec_dot` path uses.
//!
//! **What one output is.** For weight row `j` and activation row `i`, superblock by
//! superblock in ascending order (the driver's 256-wide K loop, or its narrow path's
//! slabs: both visit the blocks of one output in order and add into one float):
//!
//! - integer sums, exact (every `maddubs` pair stays below the i16 limit: Q4_K codes are
//!   0..15, and Q6_K is multiplied with the activation biased by +128 against the
//!   weight minus 32, then the bias is subtracted as `128 * sum_s sc_s * sum(q - 32)`):
//!   `s1 = sum_s sc_s * sum_{e in s} q_e * a_e` over the eight 32-value sub-blocks of
//!   Q4_K (6-bit scales) or the sixteen 16-value sub-blocks of Q6_K (signed scales, codes
//!   `q - 32`); for Q4_K also `s2 = sum_s m_s * (bsums[2s] + bsums[2s+1])` from the
//!   activation block's stored 16-value sums. The other types the same way
//!   ([`TiledBlock`]): Q5_K as Q4_K with 5-bit codes; Q2_K sixteen 16-value sub-blocks
//!   with 4-bit scales and mins (`s2 = sum_s m_s * bsums[s]`), codes 0..3; Q3_K sixteen
//!   sub-blocks, scales `code - 32`, codes -4..3 (the activation biased by +128 against
//!   the weight code minus 4, as Q6_K); IQ4_XS eight 32-value sub-blocks, scales `code -
//!   32`, codes the 16-entry table (the sign trick, `|w|` against `sign(a, w)`);
//! - the float chain, in f32, with `d`/`dmin` the weight block's f16 values widened and
//!   `d8` the activation block's scale:
//!   Q4_K, Q5_K and Q2_K (the types with mins) `r = fma(-dmin, (float)s2, d *
//!   (float)s1)` (the product `d * (float)s1` rounded, then `_mm256_fnmadd_ps`); Q6_K,
//!   Q3_K and IQ4_XS `r = d * (float)s1`;
//!   then `acc = fma(r, d8, acc)` (`_mm256_fmadd_ps`), from `acc = 0`.
//!
//! The int-to-float conversions round to nearest even (`_mm256_cvtepi32_ps`). Threads
//! split the output into chunks of whole (row, column) ranges, so the thread count never
//! changes a bit. The non-FMA AVX build (`_mm256_sub_ps`/`_mm256_add_ps`), the scalar
//! fallback (float sums per sub-block) and the AVX-512 VNNI microkernel (whose final
//! `acc + r * d8` is not fused) round differently: they are not this tier.

use crate::blocks::q4_k::scale_min_k4;
use crate::blocks::{BlockQ4K, BlockQ6K, BlockQ8K, QK_K};
use crate::error::KernelError;
use crate::weight_matrix::WeightMatrix;
use crate::GgmlType;

/// The fewest activation rows at which ggml takes the tiled path (`ggml_tiled_min_batch`).
pub const MIN_ROWS: usize = 8;

/// Whether ggml's haswell build multiplies `m` rows of plain `wtype` weights by the
/// tiled kernel: the K-quants and IQ4_XS at [`MIN_ROWS`] or more rows.
pub fn applies(wtype: GgmlType, m: usize) -> bool {
    matches!(
        wtype,
        GgmlType::Q2_K
            | GgmlType::Q3_K
            | GgmlType::Q4_K
            | GgmlType::Q5_K
            | GgmlType::Q6_K
            | GgmlType::IQ4_XS
    ) && m >= MIN_ROWS
}

/// One weight superblock as the tiled path unpacks it (`tiled_unpack_src0`): the codes
/// with the format's bias taken off (signed, value order), one scale (and min) per
/// sub-block of `sub` values, and the f16 scales widened.
#[derive(Clone, Debug)]
pub struct TiledBlock {
    /// The block's scale `d`.
    pub d: f32,
    /// The block's `dmin` (0 for the types without mins).
    pub dmin: f32,
    /// Whether the type has mins (the `fnmadd` step).
    pub has_min: bool,
    /// Sub-block size, 16 or 32.
    pub sub: usize,
    /// The 256 signed codes.
    pub codes: [i32; QK_K],
    /// Per sub-block scales (the first `256 / sub` entries).
    pub scales: [i32; 16],
    /// Per sub-block mins (the first `256 / sub` entries; zero without mins).
    pub mins: [i32; 16],
}

/// The [`TiledBlock`] of block `b` of a row of `ty` (Q2_K, Q3_K, Q5_K or IQ4_XS).
pub fn tiled_block(ty: GgmlType, row: &[u8], b: usize) -> Result<TiledBlock, KernelError> {
    use crate::blocks::{BlockIq4Xs, BlockQ2K, BlockQ3K, BlockQ5K};
    let mut t = TiledBlock {
        d: 0.0,
        dmin: 0.0,
        has_min: false,
        sub: 16,
        codes: [0; QK_K],
        scales: [0; 16],
        mins: [0; 16],
    };
    match ty {
        GgmlType::Q2_K => {
            let x = &crate::blocks::cast_blocks::<BlockQ2K>(ty, row)?[b];
            (t.d, t.dmin, t.has_min) = (x.d(), x.dmin(), true);
            t.codes = core::array::from_fn(|i| crate::blocks::q2_k::crumb(&x.qs, i) as i32);
            t.scales = core::array::from_fn(|s| (x.scales[s] & 0xF) as i32);
            t.mins = core::array::from_fn(|s| (x.scales[s] >> 4) as i32);
        }
        GgmlType::Q3_K => {
            let x = &crate::blocks::cast_blocks::<BlockQ3K>(ty, row)?[b];
            t.d = x.d();
            t.codes = core::array::from_fn(|i| x.quant(i));
            t.scales = core::array::from_fn(|s| x.scale(s) as i32 - 32);
        }
        GgmlType::Q5_K => {
            let x = &crate::blocks::cast_blocks::<BlockQ5K>(ty, row)?[b];
            (t.d, t.dmin, t.has_min, t.sub) = (x.d(), x.dmin(), true, 32);
            t.codes = core::array::from_fn(|i| x.quant(i) as i32);
            for s in 0..8 {
                let (sc, mn) = scale_min_k4(s, &x.scales);
                (t.scales[s], t.mins[s]) = (sc as i32, mn as i32);
            }
        }
        GgmlType::IQ4_XS => {
            let x = &crate::blocks::cast_blocks::<BlockIq4Xs>(ty, row)?[b];
            (t.d, t.sub) = (x.d(), 32);
            t.codes = core::array::from_fn(|i| {
                let (s, r) = (i / 32, i % 32);
                let byte = x.qs[16 * s + r % 16];
                let n = if r < 16 { byte & 0xF } else { byte >> 4 };
                crate::blocks::iq4_nl::KVALUES_IQ4NL[n as usize] as i32
            });
            for s in 0..8 {
                t.scales[s] = x.scale(s) as i32 - 32;
            }
        }
        other => return Err(KernelError::Unsupported { op: "x86 tiled matmul", ty: other.name() }),
    }
    Ok(t)
}

/// One superblock's step of the float chain for a [`TiledBlock`] against activation
/// block `y`: the exact sums s1 (and s2), then [`q4_k_step`] or [`q6_k_step`].
#[inline]
pub fn tiled_step(acc: f32, x: &TiledBlock, y: &BlockQ8K) -> f32 {
    let mut s1 = 0i32;
    for s in 0..QK_K / x.sub {
        let mut dot = 0i32;
        for e in x.sub * s..x.sub * (s + 1) {
            dot += x.codes[e] * y.q(e) as i32;
        }
        s1 += x.scales[s] * dot;
    }
    tiled_float_step(acc, x, s1, y)
}

/// The float step of [`tiled_step`] from its exact `s1`: with mins, s2 = the sum over
/// sub-blocks of min times the activation's stored 16-value sums under it, then
/// [`q4_k_step`]; without, [`q6_k_step`].
#[inline]
pub fn tiled_float_step(acc: f32, x: &TiledBlock, s1: i32, y: &BlockQ8K) -> f32 {
    if x.has_min {
        let per = x.sub / 16;
        let mut s2 = 0i32;
        for s in 0..QK_K / x.sub {
            let bsum: i32 = (0..per).map(|u| y.bsum(per * s + u) as i32).sum();
            s2 += x.mins[s] * bsum;
        }
        q4_k_step(acc, x.d, x.dmin, s1, s2, y.d())
    } else {
        q6_k_step(acc, x.d, s1, y.d())
    }
}

/// The eight 32-value sub-block scales and mins of a Q4_K block (6 bits each).
pub fn q4_k_scales_mins(b: &BlockQ4K) -> ([i32; 8], [i32; 8]) {
    let (mut sc, mut mn) = ([0i32; 8], [0i32; 8]);
    for (s, (sc, mn)) in sc.iter_mut().zip(mn.iter_mut()).enumerate() {
        let (a, b) = scale_min_k4(s, &b.scales);
        (*sc, *mn) = (a as i32, b as i32);
    }
    (sc, mn)
}

/// The codes of a Q4_K block in value order (0..=15).
pub fn q4_k_codes(b: &BlockQ4K) -> [u8; QK_K] {
    let mut q = [0u8; QK_K];
    for c in 0..4 {
        for l in 0..32 {
            let byte = b.qs[32 * c + l];
            q[64 * c + l] = byte & 0xF;
            q[64 * c + 32 + l] = byte >> 4;
        }
    }
    q
}

/// The sixteen signed sub-block scales of a Q6_K block.
pub fn q6_k_scales(b: &BlockQ6K) -> [i32; 16] {
    core::array::from_fn(|s| b.scale(s) as i32)
}

/// The per-superblock float step: `r` from the exact sums, then `acc = fma(r, d8, acc)`.
#[inline]
pub fn q4_k_step(acc: f32, d: f32, dmin: f32, s1: i32, s2: i32, d8: f32) -> f32 {
    let r = (-dmin).mul_add(s2 as f32, d * s1 as f32);
    r.mul_add(d8, acc)
}

/// The Q6_K step (no min term): `acc = fma(d * (float)s1, d8, acc)`.
#[inline]
pub fn q6_k_step(acc: f32, d: f32, s1: i32, d8: f32) -> f32 {
    (d * s1 as f32).mul_add(d8, acc)
}

/// `s2` of one Q4_K block: the mins times the activation's stored 32-value sums.
#[inline]
pub fn q4_k_s2(mins: &[i32; 8], y: &BlockQ8K) -> i32 {
    (0..8).map(|s| mins[s] * (y.bsum(2 * s) as i32 + y.bsum(2 * s + 1) as i32)).sum()
}

/// The twin: `out[i*n + j]` for plain Q4_K or Q6_K weights and `m` q8_K activation rows
/// (`act`, concatenated), every row by the tiled formula (the caller decides
/// [`applies`]).
pub fn matmul(w: &WeightMatrix<'_>, act: &[&[u8]]) -> Result<Vec<f32>, KernelError> {
    let ys: Vec<&[BlockQ8K]> = act
        .iter()
        .map(|a| crate::blocks::cast_blocks(GgmlType::Q8_K, a))
        .collect::<Result<_, _>>()?;
    if matches!(w.ty(), GgmlType::Q4_K | GgmlType::Q6_K) {
        crate::accelerated!(slots::MATMUL, (w, &ys));
    }
    let (n, m) = (w.n(), act.len());
    let mut out = vec![0.0f32; m * n];
    match w.ty() {
        GgmlType::Q4_K => {
            for j in 0..n {
                let row: &[BlockQ4K] = crate::blocks::cast_blocks(GgmlType::Q4_K, w.row(j))?;
                let mut acc = vec![0.0f32; m];
                for (b, x) in row.iter().enumerate() {
                    let ((sc, mn), q) = (q4_k_scales_mins(x), q4_k_codes(x));
                    let (d, dmin) = (x.d(), x.dmin());
                    for (acc, y) in acc.iter_mut().zip(&ys) {
                        let y = &y[b];
                        let mut s1 = 0i32;
                        for s in 0..8 {
                            let mut dot = 0i32;
                            for e in 32 * s..32 * s + 32 {
                                dot += q[e] as i32 * y.q(e) as i32;
                            }
                            s1 += sc[s] * dot;
                        }
                        *acc = q4_k_step(*acc, d, dmin, s1, q4_k_s2(&mn, y), y.d());
                    }
                }
                for (i, v) in acc.into_iter().enumerate() {
                    out[i * n + j] = v;
                }
            }
        }
        GgmlType::Q6_K => {
            for j in 0..n {
                let row: &[BlockQ6K] = crate::blocks::cast_blocks(GgmlType::Q6_K, w.row(j))?;
                let mut acc = vec![0.0f32; m];
                for (b, x) in row.iter().enumerate() {
                    let (sc, q, d) = (q6_k_scales(x), x.quants(), x.d());
                    for (acc, y) in acc.iter_mut().zip(&ys) {
                        let y = &y[b];
                        let mut s1 = 0i32;
                        for s in 0..16 {
                            let mut dot = 0i32;
                            for e in 16 * s..16 * s + 16 {
                                dot += q[e] as i32 * y.q(e) as i32;
                            }
                            s1 += sc[s] * dot;
                        }
                        *acc = q6_k_step(*acc, d, s1, y.d());
                    }
                }
                for (i, v) in acc.into_iter().enumerate() {
                    out[i * n + j] = v;
                }
            }
        }
        ty @ (GgmlType::Q2_K | GgmlType::Q3_K | GgmlType::Q5_K | GgmlType::IQ4_XS) => {
            for j in 0..n {
                let row = w.row(j);
                let mut acc = vec![0.0f32; m];
                for b in 0..w.k() / QK_K {
                    let x = tiled_block(ty, row, b)?;
                    for (acc, y) in acc.iter_mut().zip(&ys) {
                        *acc = tiled_step(*acc, &x, &y[b]);
                    }
                }
                for (i, v) in acc.into_iter().enumerate() {
                    out[i * n + j] = v;
                }
            }
        }
        other => return Err(KernelError::Unsupported { op: "x86 tiled matmul", ty: other.name() }),
    }
    Ok(out)
}

/// The slots of this file's entry points (see [`crate::accel`]), filled by
/// `tiercheck-accel` (its `src/arch/x86_64/avx2/tiled.rs`).
pub mod slots {
    // A slot's type is its entry point's signature, spelt out.
    #![allow(clippy::type_complexity)]

    use super::*;
    use crate::accel::Slot;

    /// [`matmul`] for Q4_K and Q6_K weights (the activation rows as Q8_K blocks).
    pub static MATMUL: Slot<
        fn(&WeightMatrix<'_>, &[&[BlockQ8K]]) -> Result<Vec<f32>, KernelError>,
    > = Slot::new();
}
