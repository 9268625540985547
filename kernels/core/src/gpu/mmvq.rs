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
/// If `warp_size` is not 32 or 64, or `nwarps` is not in 1..=8.
pub fn mmvq_gemv(
    ty: GgmlType,
    w_row: &[u8],
    act: &[BlockQ8_1],
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
    let fast = crate::accel::x86_avx2();
    Ok(match ty {
        GgmlType::Q4_K => g.run(fast, &Q4K(cast_blocks(ty, w_row)?, act, contraction)),
        GgmlType::Q6_K => g.run(fast, &Q6K(cast_blocks(ty, w_row)?, act, contraction)),
        _ => g.run(fast, &Q80(cast_blocks(ty, w_row)?, act, contraction)),
    })
}

/// One thread's share of weight block `kbx` at quant offset `kqs`.
trait Share {
    fn tail(&self, kbx: usize, kqs: usize) -> Tail;

    /// Every thread's share of block `kbx` accumulated into `tmp` (one value per thread
    /// of the block, in thread order), with AVX2 and FMA; `false` where there is no such
    /// form (the caller then runs [`Share::tail`] per thread).
    ///
    /// # Safety
    /// The CPU must have AVX2 and FMA.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn block_avx2(&self, _kbx: usize, _tmp: &mut [f32]) -> bool {
        false
    }
}

struct Q4K<'a>(&'a [BlockQ4K], &'a [BlockQ8_1], Contraction);
struct Q6K<'a>(&'a [BlockQ6K], &'a [BlockQ8_1], Contraction);
// The contraction is read by the block-at-once form only (x86-64).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
struct Q80<'a>(&'a [BlockQ8_0], &'a [BlockQ8_1], Contraction);

impl Share for Q4K<'_> {
    #[inline(always)]
    fn tail(&self, kbx: usize, kqs: usize) -> Tail {
        q4_k_tail(&self.0[kbx], &self.1[kbx * 8..], kqs, self.2)
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn block_avx2(&self, kbx: usize, tmp: &mut [f32]) -> bool {
        // SAFETY: the caller guarantees AVX2 and FMA.
        unsafe { fast::q4_k_block(&self.0[kbx], &self.1[kbx * 8..kbx * 8 + 8], self.2, tmp) };
        true
    }
}

impl Share for Q6K<'_> {
    #[inline(always)]
    fn tail(&self, kbx: usize, kqs: usize) -> Tail {
        q6_k_tail(&self.0[kbx], &self.1[kbx * 8..], kqs, self.2)
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn block_avx2(&self, kbx: usize, tmp: &mut [f32]) -> bool {
        // SAFETY: the caller guarantees AVX2 and FMA.
        unsafe { fast::q6_k_block(&self.0[kbx], &self.1[kbx * 8..kbx * 8 + 8], self.2, tmp) };
        true
    }
}

impl Share for Q80<'_> {
    #[inline(always)]
    fn tail(&self, kbx: usize, kqs: usize) -> Tail {
        q8_0_tail(&self.0[kbx], &self.1[kbx], kqs)
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn block_avx2(&self, kbx: usize, tmp: &mut [f32]) -> bool {
        // SAFETY: the caller guarantees AVX2 and FMA.
        unsafe { fast::q8_0_block(&self.0[kbx], &self.1[kbx], self.2, tmp) };
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
            // SAFETY: `fast` comes from `accel::x86_avx2()`, true only when the CPU
            // has AVX2 and FMA.
            return unsafe { self.run_avx2(call) };
        }
        let _ = fast;
        self.run_in::<false>(call)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn run_avx2(&self, call: &impl Share) -> f32 {
        self.run_in::<true>(call)
    }

    /// Thread `tid` (of `nwarps * warp_size`) starts at block `tid / threads_per_block`
    /// with offset `vdr * (tid % threads_per_block)` and strides `blocks_per_iter`
    /// blocks, so the threads of block `kbx` are `(kbx % blocks_per_iter) *
    /// threads_per_block + k`: walking the blocks in order and, in each, its threads,
    /// gives every thread its own blocks in its own order. `AVX2`: a block's threads at
    /// once where [`Share::block_avx2`] has a form (only from [`Grid::run_avx2`]).
    #[inline(always)]
    fn run_in<const AVX2: bool>(&self, call: &impl Share) -> f32 {
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
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `AVX2` is true only inside `run_avx2`, which runs only where the
            // CPU has AVX2 and FMA.
            if AVX2 && unsafe { call.block_avx2(kbx, block) } {
                continue;
            }
            for (k, t) in block.iter_mut().enumerate() {
                *t = call.tail(kbx, self.vdr * k).accumulate(*t, self.contraction);
            }
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

/// The block-at-once forms of the Q4_K and Q6_K shares with AVX2 and FMA: every thread
/// of one weight block in one pass, lane `t` of a vector holding thread `t`'s value. The
/// integer sums are exact whatever the grouping (bounds below); the float operations are
/// the scalar tails' own, lane by lane: the same products, sums and fused multiply-adds
/// ([`Contraction`]) in the same order, each thread's accumulator added last.
#[cfg(target_arch = "x86_64")]
mod fast {
    use std::arch::x86_64::*;

    use super::super::vecdotq::{q4_k_scales_for_chunk, Contraction, Q4KCombine};
    use crate::blocks::{BlockQ4K, BlockQ6K, BlockQ8_0, BlockQ8_1};

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
    /// `2p + c`, thread `r` of it): `dot1` of a lane is group `r` plus group `r + 4` of
    /// its chunk's 32 byte products, `dot2` the same of the q8_1 bytes alone.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn q4_k_block(
        x: &BlockQ4K,
        y: &[BlockQ8_1],
        c: Contraction,
        tmp: &mut [f32],
    ) {
        assert!(y.len() == 8 && tmp.len() == 16);
        let mask = _mm256_set1_epi8(0x0F);
        let ones = _mm256_set1_epi8(1);
        let (dx, dy) = (_mm256_set1_ps(x.d()), _mm256_set1_ps(x.dmin()));
        // [a_lo + a_hi | b_lo + b_hi]: the four groups r + (r + 4) of a, then of b.
        let fold2 = |a: __m256i, b: __m256i| {
            _mm256_add_epi32(
                _mm256_permute2x128_si256::<0x20>(a, b),
                _mm256_permute2x128_si256::<0x31>(a, b),
            )
        };
        let pair = |lo: i32, hi: i32| _mm256_setr_epi32(lo, lo, lo, lo, hi, hi, hi, hi);
        for p in 0..2 {
            let (j0, j1) = (2 * p, 2 * p + 1);
            // SAFETY: 32 bytes at 32 * j of the 128-byte `qs`; each q8_1 block has 32.
            let (q0, q1) = unsafe {
                (
                    _mm256_loadu_si256(x.qs.as_ptr().add(32 * j0).cast()),
                    _mm256_loadu_si256(x.qs.as_ptr().add(32 * j1).cast()),
                )
            };
            let (sc0, m0) = q4_k_scales_for_chunk(&x.scales, j0);
            let (sc1, m1) = q4_k_scales_for_chunk(&x.scales, j1);
            let mut sumf_d = _mm256_setzero_ps();
            let mut sumf_m = _mm256_setzero_ps();
            for i in 0..2 {
                let (b0, b1) = (&y[2 * j0 + i], &y[2 * j1 + i]);
                // SAFETY: as above.
                let (u0, u1) = unsafe {
                    (
                        _mm256_loadu_si256(b0.qs.as_ptr().cast()),
                        _mm256_loadu_si256(b1.qs.as_ptr().cast()),
                    )
                };
                let nib = |q: __m256i| {
                    let q = if i == 0 { q } else { _mm256_srli_epi16::<4>(q) };
                    _mm256_and_si256(q, mask)
                };
                // SAFETY: AVX2 is enabled here.
                let (p0, p1, s0, s1) = unsafe {
                    (
                        int_dots(nib(q0), u0),
                        int_dots(nib(q1), u1),
                        int_dots(ones, u0),
                        int_dots(ones, u1),
                    )
                };
                let dot1 = fold2(p0, p1);
                let dot2 = fold2(s0, s1);
                let f1 = _mm256_cvtepi32_ps(_mm256_mullo_epi32(
                    dot1,
                    pair(sc0[i] as i32, sc1[i] as i32),
                ));
                let f2 =
                    _mm256_cvtepi32_ps(_mm256_mullo_epi32(dot2, pair(m0[i] as i32, m1[i] as i32)));
                let d8 = _mm256_set_m128(_mm_set1_ps(b1.d()), _mm_set1_ps(b0.d()));
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
    /// q8_1 byte is summed as `q * u` (unsigned `q` below 64) minus `32 * u`.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn q6_k_block(
        x: &BlockQ6K,
        y: &[BlockQ8_1],
        c: Contraction,
        tmp: &mut [f32],
    ) {
        assert!(y.len() == 8 && tmp.len() == 32);
        let lo = _mm256_set1_epi8(0x0F);
        let hi = _mm256_set1_epi8(0x30);
        let ones = _mm256_set1_epi8(1);
        let d = _mm256_set1_ps(x.d());
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
                let b8 = &y[4 * h + hh + 2 * i];
                // SAFETY: as above.
                let u = unsafe { _mm256_loadu_si256(b8.qs.as_ptr().cast()) };
                let (vil, vih) = if i == 0 {
                    (_mm256_and_si256(vl, lo), _mm256_and_si256(_mm256_slli_epi32::<4>(vh), hi))
                } else {
                    (_mm256_and_si256(_mm256_srli_epi32::<4>(vl), lo), _mm256_and_si256(vh, hi))
                };
                let q = _mm256_or_si256(vil, vih);
                // SAFETY: AVX2 is enabled here.
                let (pq, su) = unsafe { (int_dots(q, u), int_dots(ones, u)) };
                let dot = _mm256_sub_epi32(pq, _mm256_slli_epi32::<5>(su));
                let s0 = x.scale(8 * h + 2 * hh + 4 * i) as i32;
                let s1 = x.scale(8 * h + 2 * hh + 1 + 4 * i) as i32;
                let scv = _mm256_setr_epi32(s0, s0, s0, s0, s1, s1, s1, s1);
                let f = _mm256_cvtepi32_ps(_mm256_mullo_epi32(dot, scv));
                // SAFETY: FMA is enabled here.
                sumf = unsafe { mad8(c.vec_dot_sums, _mm256_set1_ps(b8.d()), f, sumf) };
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
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn q8_0_block(x: &BlockQ8_0, y: &BlockQ8_1, c: Contraction, tmp: &mut [f32]) {
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
        let dxdy = _mm_set1_ps(x.d() * y.d());
        let acc = &mut tmp[..4];
        // SAFETY: `acc` holds 4 floats; FMA is enabled here.
        unsafe {
            let sum = mad4(c.accumulate, dxdy, sumi, _mm_loadu_ps(acc.as_ptr()));
            _mm_storeu_ps(acc.as_mut_ptr(), sum);
        }
    }
}
