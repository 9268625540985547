//! Accelerated forms of `tiercheck_core::gpu::mmvq` (the GPU lanes' MMVQ warp
//! emulation): every thread of one weight block at once — in AVX2 lanes with FMA and
//! F16C on x86-64, four threads per NEON vector on aarch64 — and the warps' additions
//! and the butterfly several lanes per instruction, through the twin's
//! [`BlockForms`] hooks and its generic grid ([`gemv_with`]), compiled here inside a
//! target-feature function.

use tiercheck_core::blocks::BlockQ8_1;
#[allow(unused_imports)]
use tiercheck_core::blocks::{BlockQ4K, BlockQ6K, BlockQ8_0};
#[allow(unused_imports)]
use tiercheck_core::gpu::mmvq::{gemv_with, slots, BlockForms, Column, Grid};
#[allow(unused_imports)]
use tiercheck_core::gpu::Contraction;
use tiercheck_core::{GgmlType, KernelError};

use crate::Host;

/// Fills this file's slot where `host` serves it.
pub(crate) fn install(host: Host) {
    #[cfg(target_arch = "x86_64")]
    if host.avx2_fma && host.f16c {
        // SAFETY: installed only where the CPU has AVX2, FMA and F16C.
        slots::GEMV.set_fast(|ty, w, act, col, g| unsafe { gemv_avx2(ty, w, act, col, g) });
        // SAFETY: as above.
        slots::GEMV_ROWS.set_fast(|ty, rows, row, act, col, g, out| unsafe {
            gemv_rows_avx2(ty, rows, row, act, col, g, out)
        });
    }
    #[cfg(target_arch = "aarch64")]
    if host.neon {
        slots::GEMV.set_fast(gemv_neon);
        slots::GEMV_ROWS.set_fast(gemv_rows_neon);
    }
    let _ = host;
}

/// [`gemv_with`] with `forms` for every row of `rows` (`row` bytes each) into `out`;
/// always inlined, so it compiles inside the caller's target-feature function.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn rows_with<F: BlockForms>(
    forms: &F,
    ty: GgmlType,
    rows: &[u8],
    row: usize,
    act: &[BlockQ8_1],
    col: &Column,
    g: Grid,
    out: &mut [f32],
) -> Result<(), KernelError> {
    for (o, w) in out.iter_mut().zip(rows.chunks_exact(row)) {
        *o = gemv_with(Some(forms), ty, w, act, col, g)?;
    }
    Ok(())
}

/// The [`BlockForms`] of a unit struct whose every method calls the function of the same
/// name in module `$m` (`unsafe` functions, legal where the struct can exist: `$why`).
macro_rules! block_forms {
    ($ty:ident, $m:ident, $why:literal) => {
        #[doc = $why]
        impl BlockForms for $ty {
            #[inline(always)]
            fn q4_k_block(
                &self,
                x: &BlockQ4K,
                y: &[BlockQ8_1],
                yd: &[[f32; 8]; 4],
                sums: &[[i16; 16]; 4],
                c: Contraction,
                tmp: &mut [f32],
            ) {
                // SAFETY: the struct exists only where these functions are legal (the
                // impl's doc says why).
                unsafe { $m::q4_k_block(x, y, yd, sums, c, tmp) }
            }
            #[inline(always)]
            fn q6_k_block(
                &self,
                x: &BlockQ6K,
                y: &[BlockQ8_1],
                yd: &[f32],
                sums: &[[i32; 8]],
                c: Contraction,
                tmp: &mut [f32],
            ) {
                // SAFETY: the struct exists only where these functions are legal (the
                // impl's doc says why).
                unsafe { $m::q6_k_block(x, y, yd, sums, c, tmp) }
            }
            #[inline(always)]
            fn q8_0_block(
                &self,
                x: &BlockQ8_0,
                y: &BlockQ8_1,
                yd: f32,
                c: Contraction,
                tmp: &mut [f32],
            ) {
                // SAFETY: the struct exists only where these functions are legal (the
                // impl's doc says why).
                unsafe { $m::q8_0_block(x, y, yd, c, tmp) }
            }
            #[inline(always)]
            fn reduce(&self, tmp: &[f32], warp_size: usize, nwarps: usize) -> f32 {
                // SAFETY: the struct exists only where these functions are legal (the
                // impl's doc says why).
                unsafe { $m::reduce(tmp, warp_size, nwarps) }
            }
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
                // SAFETY: the struct exists only where these functions are legal (the
                // impl's doc says why).
                unsafe { $m::other_block(ty, x, y, yd, gs, gsd, c, tmp) }
            }
            #[inline(always)]
            fn dots32(&self, codes: &[i8; 32], q: &[u8; 32]) -> [i32; 8] {
                // SAFETY: the struct exists only where these functions are legal (the
                // impl's doc says why).
                unsafe { $m::dots32(codes, q) }
            }
        }
    };
}

/// [`gemv_with`] with the AVX2 forms, compiled with AVX2, FMA and F16C.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn gemv_avx2(
    ty: GgmlType,
    w: &[u8],
    act: &[BlockQ8_1],
    col: &Column,
    g: Grid,
) -> Result<f32, KernelError> {
    gemv_with(Some(&Avx2), ty, w, act, col, g)
}

/// [`gemv_with`] with the AVX2 forms for every row of `rows` (`row` bytes each) into
/// `out`, compiled with AVX2, FMA and F16C (the grid's code inlined into the rows' loop).
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn gemv_rows_avx2(
    ty: GgmlType,
    rows: &[u8],
    row: usize,
    act: &[BlockQ8_1],
    col: &Column,
    g: Grid,
    out: &mut [f32],
) -> Result<(), KernelError> {
    rows_with(&Avx2, ty, rows, row, act, col, g, out)
}

/// The AVX2 block forms. Constructed only inside [`gemv_avx2`] and [`gemv_rows_avx2`],
/// so its methods run only where the CPU has AVX2, FMA and F16C.
#[cfg(target_arch = "x86_64")]
struct Avx2;

#[cfg(target_arch = "x86_64")]
block_forms!(Avx2, fast, "`Avx2` exists only inside `gemv_avx2` (AVX2, FMA and F16C present)");

/// [`gemv_with`] with the NEON forms.
#[cfg(target_arch = "aarch64")]
fn gemv_neon(
    ty: GgmlType,
    w: &[u8],
    act: &[BlockQ8_1],
    col: &Column,
    g: Grid,
) -> Result<f32, KernelError> {
    gemv_with(Some(&Neon), ty, w, act, col, g)
}

/// [`gemv_neon`] for every row of `rows` (`row` bytes each) into `out`.
#[cfg(target_arch = "aarch64")]
fn gemv_rows_neon(
    ty: GgmlType,
    rows: &[u8],
    row: usize,
    act: &[BlockQ8_1],
    col: &Column,
    g: Grid,
    out: &mut [f32],
) -> Result<(), KernelError> {
    rows_with(&Neon, ty, rows, row, act, col, g, out)
}

/// The NEON block forms (NEON is part of every aarch64 CPU).
#[cfg(target_arch = "aarch64")]
struct Neon;

#[cfg(target_arch = "aarch64")]
block_forms!(Neon, neon_fast, "NEON is part of every aarch64 CPU");

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

    use tiercheck_core::blocks::iq4_nl::KVALUES_IQ4NL;
    use tiercheck_core::blocks::{
        BlockIq4Nl, BlockIq4Xs, BlockQ2K, BlockQ3K, BlockQ4K, BlockQ4_1, BlockQ5K, BlockQ5_0,
        BlockQ5_1, BlockQ6K, BlockQ8_0, BlockQ8_1,
    };
    use tiercheck_core::fp16::round_to_f16;
    use tiercheck_core::gpu::{Combine, Contraction};
    use tiercheck_core::GgmlType;

    /// The end of the grid's run on eight lanes at a time: lane `l`'s warps
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

    /// The eight 4-byte group dots of signed `codes` and signed `q`
    /// (`BlockForms::dots32`): both widened to i16, pair products summed by
    /// `vpmaddwd` (each at most 2 * 128 * 128), pairs of pairs by `vphaddd`, exact for
    /// every byte value; `vphaddd` works within 128-bit halves, so its result
    /// `[g0 g1 g4 g5 | g2 g3 g6 g7]` is put in order by one permute.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn dots32(codes: &[i8; 32], q: &[u8; 32]) -> [i32; 8] {
        let mut out = [0i32; 8];
        // SAFETY: 32 bytes each; 8 i32 out.
        unsafe {
            let c = _mm256_loadu_si256(codes.as_ptr().cast());
            let y = _mm256_loadu_si256(q.as_ptr().cast());
            let lo = |v: __m256i| _mm256_cvtepi8_epi16(_mm256_castsi256_si128(v));
            let hi = |v: __m256i| _mm256_cvtepi8_epi16(_mm256_extracti128_si256::<1>(v));
            let p0 = _mm256_madd_epi16(lo(c), lo(y));
            let p1 = _mm256_madd_epi16(hi(c), hi(y));
            let h = _mm256_hadd_epi32(p0, p1);
            let g = _mm256_permutevar8x32_epi32(h, _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7));
            _mm256_storeu_si256(out.as_mut_ptr().cast(), g);
        }
        out
    }

    /// `tmp[at..at + 8] += v` (a `Tail::Value` accumulated: the thread's sum first).
    #[inline(always)]
    unsafe fn add8(tmp: &mut [f32], at: usize, v: __m256) {
        assert!(at + 8 <= tmp.len());
        // SAFETY: eight floats at `at` (checked above); AVX is enabled in the callers.
        unsafe {
            let p = tmp.as_mut_ptr().add(at);
            _mm256_storeu_ps(p, _mm256_add_ps(_mm256_loadu_ps(p), v));
        }
    }

    /// `tmp[at..at + 8] = mad(fuse, a, b, tmp[at..at + 8])` (a `Tail::Product`
    /// accumulated).
    #[inline(always)]
    unsafe fn mad_into8(fuse: bool, tmp: &mut [f32], at: usize, a: __m256, b: __m256) {
        assert!(at + 8 <= tmp.len());
        // SAFETY: eight floats at `at` (checked above); FMA is enabled in the callers.
        unsafe {
            let p = tmp.as_mut_ptr().add(at);
            _mm256_storeu_ps(p, mad8(fuse, a, b, _mm256_loadu_ps(p)));
        }
    }

    /// `a * b - p * q` lane by lane, combined as `c.combine` says (`Combine::eval` with
    /// sign -1: the negation exact).
    #[inline(always)]
    unsafe fn combine_minus(c: Contraction, a: __m256, b: __m256, p: __m256, q: __m256) -> __m256 {
        // SAFETY: the callers run with AVX2 and FMA.
        unsafe {
            let neg = _mm256_set1_ps(-0.0);
            match c.combine {
                Combine::Unfused => {
                    _mm256_add_ps(_mm256_mul_ps(a, b), _mm256_xor_ps(_mm256_mul_ps(p, q), neg))
                }
                Combine::FuseFirst => {
                    _mm256_fmadd_ps(a, b, _mm256_xor_ps(_mm256_mul_ps(p, q), neg))
                }
                Combine::FuseSecond => {
                    _mm256_fmadd_ps(_mm256_xor_ps(p, neg), q, _mm256_mul_ps(a, b))
                }
            }
        }
    }

    /// Bit `b` of every byte of `v` moved to bit `to` (`to` <= 4, `b` <= 7), every other
    /// bit cleared: one 16-bit shift by the distance (a bit crossing into the next byte
    /// lands below `to`, or leaves the byte above it, and the mask drops it) and a mask.
    #[inline(always)]
    unsafe fn bit_to(v: __m256i, b: usize, to: usize) -> __m256i {
        // SAFETY: the callers run with AVX2.
        unsafe {
            let moved = if b <= to {
                _mm256_sll_epi16(v, _mm_cvtsi32_si128((to - b) as i32))
            } else {
                _mm256_srl_epi16(v, _mm_cvtsi32_si128((b - to) as i32))
            };
            _mm256_and_si256(moved, _mm256_set1_epi8(1 << to))
        }
    }

    /// The eight 4-byte group dots of unsigned codes below 64 with signed q8 codes, in
    /// group order (`vpmaddubsw` pairs at most 2 * 63 * 128, exact; then `vpmaddwd` with
    /// ones).
    #[inline(always)]
    unsafe fn udots(codes: __m256i, q: &[u8; 32]) -> __m256i {
        // SAFETY: 32 bytes; the callers run with AVX2.
        unsafe { int_dots(codes, _mm256_loadu_si256(q.as_ptr().cast())) }
    }

    /// The 32 nibbles of 16 bytes in value order (low nibbles, then high ones).
    #[inline(always)]
    unsafe fn nibbles(qs: &[u8; 16]) -> __m256i {
        // SAFETY: 16 bytes; the callers run with AVX2.
        unsafe {
            let v = _mm_loadu_si128(qs.as_ptr().cast());
            let m = _mm_set1_epi8(0x0F);
            _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16::<4>(v), m), _mm_and_si128(v, m))
        }
    }

    /// Bit `j` of the little-endian `qh` as 0x10 in byte `j`: each byte picks its `qh`
    /// byte (`vpshufb` within the broadcast dword) and tests its bit.
    #[inline(always)]
    unsafe fn fifth_bits(qh: [u8; 4]) -> __m256i {
        // SAFETY: the callers run with AVX2.
        unsafe {
            let v = _mm256_set1_epi32(i32::from_le_bytes(qh));
            let pick = _mm256_setr_epi8(
                0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3,
                3, 3, 3, 3,
            );
            let bit = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
            let set = _mm256_cmpeq_epi8(_mm256_and_si256(_mm256_shuffle_epi8(v, pick), bit), bit);
            _mm256_and_si256(set, _mm256_set1_epi8(0x10))
        }
    }

    /// The IQ4_NL code book values of 16 bytes of nibbles in value order.
    #[inline(always)]
    unsafe fn iq4_codes(qs: &[u8; 16]) -> __m256i {
        // SAFETY: 16 bytes of codes and of the table; the callers run with AVX2.
        unsafe {
            let table = _mm_loadu_si128(KVALUES_IQ4NL.as_ptr().cast());
            let v = _mm_loadu_si128(qs.as_ptr().cast());
            let m = _mm_set1_epi8(0x0F);
            _mm256_set_m128i(
                _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16::<4>(v), m)),
                _mm_shuffle_epi8(table, _mm_and_si128(v, m)),
            )
        }
    }

    /// The two threads' `sumi` of a legacy block from its group dots: thread t has
    /// groups `2t`, `2t + 1` (low codes) and `2t + 4`, `2t + 5` (high ones).
    #[inline(always)]
    unsafe fn legacy_sumi(g: __m256i) -> [i32; 2] {
        // SAFETY: the callers run with AVX2.
        unsafe {
            let a = _mm_add_epi32(_mm256_castsi256_si128(g), _mm256_extracti128_si256::<1>(g));
            let t = _mm_hadd_epi32(a, a);
            [_mm_cvtsi128_si32(t), _mm_extract_epi32::<1>(t)]
        }
    }

    /// `legacy_sumi` of signed codes (IQ4_NL's): the widened pair products of values
    /// 0..16 and 16..32 added lane by lane, so thread 0's values (0..8, 16..24) fill the
    /// low 128-bit half and thread 1's the high one, each then summed; exact.
    #[inline(always)]
    unsafe fn legacy_sumi_signed(codes: __m256i, q: &[u8; 32]) -> [i32; 2] {
        // SAFETY: 32 bytes; the callers run with AVX2.
        unsafe {
            let y = _mm256_loadu_si256(q.as_ptr().cast());
            let lo = |v: __m256i| _mm256_cvtepi8_epi16(_mm256_castsi256_si128(v));
            let hi = |v: __m256i| _mm256_cvtepi8_epi16(_mm256_extracti128_si256::<1>(v));
            let s = _mm256_add_epi32(
                _mm256_madd_epi16(lo(codes), lo(y)),
                _mm256_madd_epi16(hi(codes), hi(y)),
            );
            let h = _mm_hadd_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256::<1>(s));
            let t = _mm_hadd_epi32(h, h);
            [_mm_cvtsi128_si32(t), _mm_extract_epi32::<1>(t)]
        }
    }

    /// Q4_1's and Q5_1's close for both threads (`min_close` in the twin): the f16
    /// products `d * d8` and `m * s8`, then `sumi * dd8 + ms8 / 2` by the combine. The
    /// products (exact in f32) are rounded to f16 by `vcvtps2ph` to nearest even, the
    /// twin's `round_to_f16` for every value but a NaN, which keeps the twin's form.
    #[inline(always)]
    unsafe fn min_close(
        t: &[i32; 2],
        d: f32,
        m: f32,
        y: &BlockQ8_1,
        yd: f32,
        c: Contraction,
        tmp: &mut [f32],
    ) {
        // SAFETY: the callers run with F16C.
        let (p, q) = (d * yd, m * unsafe { half(y.s) });
        let (dd8, ms8) = if p.is_nan() || q.is_nan() {
            (round_to_f16(p), round_to_f16(q))
        } else {
            // SAFETY: the callers run with F16C.
            unsafe {
                let h = _mm_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm_setr_ps(p, q, 0.0, 0.0));
                let w = _mm_cvtph_ps(h);
                (_mm_cvtss_f32(w), _mm_cvtss_f32(_mm_movehdup_ps(w)))
            }
        };
        for (k, acc) in tmp.iter_mut().enumerate().take(2) {
            *acc += c.combine.eval(t[k] as f32, dd8, 1.0, ms8, 0.5);
        }
    }

    /// A block of one of the eight other types (`BlockForms::other_block`), dispatched by
    /// type; each form below states its integer grouping, its floats being the tail's.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(super) unsafe fn other_block(
        ty: GgmlType,
        x: &[u8],
        y: &[BlockQ8_1],
        yd: &[f32],
        gs: &[[i32; 8]],
        gsd: &[[f32; 8]],
        c: Contraction,
        tmp: &mut [f32],
    ) -> bool {
        // SAFETY: AVX2, FMA and F16C are enabled here; each form checks its lengths.
        unsafe {
            match ty {
                GgmlType::Q2_K => q2_k_block(bytemuck::from_bytes(x), y, yd, gsd, c, tmp),
                GgmlType::Q3_K => q3_k_block(bytemuck::from_bytes(x), y, yd, gs, c, tmp),
                GgmlType::Q5_K => q5_k_block(bytemuck::from_bytes(x), y, yd, gs, c, tmp),
                GgmlType::IQ4_XS => iq4_xs_block(bytemuck::from_bytes(x), y, yd, c, tmp),
                GgmlType::Q4_1 => {
                    let b: &BlockQ4_1 = bytemuck::from_bytes(x);
                    let t = legacy_sumi(udots(nibbles(&b.qs), &y[0].qs));
                    min_close(&t, half(b.d), half(b.m), &y[0], yd[0], c, tmp);
                }
                GgmlType::Q5_1 => {
                    let b: &BlockQ5_1 = bytemuck::from_bytes(x);
                    let codes = _mm256_or_si256(nibbles(&b.qs), fifth_bits(b.qh));
                    let t = legacy_sumi(udots(codes, &y[0].qs));
                    min_close(&t, half(b.d), half(b.m), &y[0], yd[0], c, tmp);
                }
                GgmlType::Q5_0 => {
                    let b: &BlockQ5_0 = bytemuck::from_bytes(x);
                    let codes = _mm256_or_si256(nibbles(&b.qs), fifth_bits(b.qh));
                    let t = legacy_sumi(udots(codes, &y[0].qs));
                    let (d5, s8) = (half(b.d), half(y[0].s));
                    for (k, acc) in tmp.iter_mut().enumerate().take(2) {
                        let inner = c.combine.eval(t[k] as f32, yd[0], -1.0, 8.0, s8);
                        *acc =
                            if c.accumulate { d5.mul_add(inner, *acc) } else { *acc + d5 * inner };
                    }
                }
                GgmlType::IQ4_NL => {
                    let b: &BlockIq4Nl = bytemuck::from_bytes(x);
                    let t = legacy_sumi_signed(iq4_codes(&b.qs), &y[0].qs);
                    let d = half(b.d) * yd[0];
                    for (k, acc) in tmp.iter_mut().enumerate().take(2) {
                        let v = t[k] as f32;
                        *acc = if c.accumulate { d.mul_add(v, *acc) } else { *acc + d * v };
                    }
                }
                _ => return false,
            }
        }
        true
    }

    /// The 16 bytes `s` as two vectors of eight i32 lanes (zero-extended), bytes
    /// `8n..8n + 8` in the second's place n, each in the order `0 2 4 6 1 3 5 7`: the
    /// even sub-blocks of a half in the low 128 bits, the odd ones in the high.
    #[inline(always)]
    unsafe fn even_odd(s: &[u8; 16]) -> (__m256i, __m256i) {
        // SAFETY: 16 bytes; the callers run with AVX2.
        unsafe {
            let v = _mm_loadu_si128(s.as_ptr().cast());
            let order = _mm_setr_epi8(0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15);
            let o = _mm_shuffle_epi8(v, order);
            (_mm256_cvtepu8_epi32(o), _mm256_cvtepu8_epi32(_mm_srli_si128::<8>(o)))
        }
    }

    /// `$f::<IMM>($v)` with the immediate that copies lane `$i` (0..4) of each 128-bit
    /// half into every lane of that half.
    macro_rules! each_half {
        ($f:ident, $v:expr, $i:expr) => {
            match $i {
                0 => $f::<0x00>($v),
                1 => $f::<0x55>($v),
                2 => $f::<0xAA>($v),
                _ => $f::<0xFF>($v),
            }
        };
    }

    /// Lane `i` (0..4) of each 128-bit half of `v` in every lane of that half (one
    /// in-lane `vpshufd`).
    #[inline(always)]
    unsafe fn lane_each_half(v: __m256i, i: usize) -> __m256i {
        // SAFETY: the callers run with AVX2.
        unsafe { each_half!(_mm256_shuffle_epi32, v, i) }
    }

    /// [`lane_each_half`] of floats (one `vpermilps`).
    #[inline(always)]
    unsafe fn lane_each_half_ps(v: __m256, i: usize) -> __m256 {
        // SAFETY: the callers run with AVX.
        unsafe { each_half!(_mm256_permute_ps, v, i) }
    }

    /// `q2_k_tail` for the 16 threads of superblock `x`: thread `8n + r` at step `i`
    /// reads group `r` of q8_1 block `b = 4n + i`, so one step of eight threads is one
    /// q8_1 block's eight group dots (the 2-bit codes `(qs[32n..] >> 2i) & 3`, unsigned)
    /// times its two sub-block scales (lanes 0..4 and 4..8), and the column's group sums
    /// times the two mins. The integers: `vpmaddwd` of the byte-pair sums against the
    /// scale (in both 16-bit halves of a lane) is `dot * sc` per group, exact (a pair
    /// at most 2 * 3 * 128, a group times 15 far inside i32 and below 2^24). The min
    /// term `d8 * (g * m)` as `gsd * m` (`Column::sums_d`: `d8 * g`, exact, so the one
    /// rounding, fused or not, is the tail's).
    #[inline(always)]
    unsafe fn q2_k_block(
        x: &BlockQ2K,
        y: &[BlockQ8_1],
        yd: &[f32],
        gsd: &[[f32; 8]],
        c: Contraction,
        tmp: &mut [f32],
    ) {
        assert!(y.len() == 8 && yd.len() == 8 && gsd.len() == 8 && tmp.len() == 16);
        // SAFETY: F16C, AVX2 and FMA are enabled here; loads are of 32 bytes inside
        // `qs` (64 bytes), of 16 bytes of `scales` and of eight f32 of `gsd`.
        unsafe {
            let (d, dmin) = (_mm256_set1_ps(half(x.d)), _mm256_set1_ps(half(x.dmin)));
            let three = _mm256_set1_epi8(3);
            // Per half n (sub-blocks 8n..8n + 8) as i32 lanes in the order even, odd
            // (`even_odd`): the scales' low nibbles in both 16-bit halves of their lane,
            // and the mins as f32; step i takes lane i of each 128-bit half (sub-blocks
            // 2i and 2i + 1) by an in-lane broadcast.
            let (r0, r1) = even_odd(&x.scales);
            let low = |r: __m256i| {
                let l = _mm256_and_si256(r, _mm256_set1_epi32(0xF));
                _mm256_or_si256(l, _mm256_slli_epi32::<16>(l))
            };
            let sc = [low(r0), low(r1)];
            let mins = [
                _mm256_cvtepi32_ps(_mm256_srli_epi32::<4>(r0)),
                _mm256_cvtepi32_ps(_mm256_srli_epi32::<4>(r1)),
            ];
            let q = [
                _mm256_loadu_si256(x.qs.as_ptr().cast()),
                _mm256_loadu_si256(x.qs.as_ptr().add(32).cast()),
            ];
            let mut sumf_d = [_mm256_setzero_ps(); 2];
            let mut sumf_m = [_mm256_setzero_ps(); 2];
            // Both halves' threads step by step (independent chains, interleaved).
            for i in 0..4 {
                let shift = _mm_cvtsi32_si128(2 * i as i32);
                for n in 0..2 {
                    let b = 4 * n + i;
                    let codes = _mm256_and_si256(_mm256_srl_epi16(q[n], shift), three);
                    let yq = _mm256_loadu_si256(y[b].qs.as_ptr().cast());
                    let bytes = _mm256_maddubs_epi16(codes, yq);
                    let s = lane_each_half(sc[n], i);
                    let dot_d = _mm256_cvtepi32_ps(_mm256_madd_epi16(bytes, s));
                    let m = lane_each_half_ps(mins[n], i);
                    let gd = _mm256_loadu_ps(gsd[b].as_ptr());
                    sumf_d[n] = mad8(c.vec_dot_sums, _mm256_set1_ps(yd[b]), dot_d, sumf_d[n]);
                    sumf_m[n] = mad8(c.vec_dot_sums, gd, m, sumf_m[n]);
                }
            }
            for n in 0..2 {
                add8(tmp, 8 * n, combine_minus(c, d, sumf_d[n], dmin, sumf_m[n]));
            }
        }
    }

    /// `q3_k_tail` for the 16 threads of superblock `x`, grouped as Q2_K: the codes of
    /// q8_1 block `b` as `crumb + 4 * hbit` (0..7, unsigned: `vpmaddubsw` exact, a
    /// byte-pair sum at most 2 * 7 * 128), the column's `gs` (four times each group's sum:
    /// the tail's `- 4` where the bit is clear, at most 2048 in size) taken from each
    /// group's first pair sum (inside i16), and one `vpmaddwd` against the 6-bit scale
    /// minus 32 in both 16-bit halves of a lane: `(dot - 4 * sum) * sc` per group, as
    /// the tail forms it, exact.
    #[inline(always)]
    unsafe fn q3_k_block(
        x: &BlockQ3K,
        y: &[BlockQ8_1],
        yd: &[f32],
        gs: &[[i32; 8]],
        c: Contraction,
        tmp: &mut [f32],
    ) {
        assert!(y.len() == 8 && yd.len() == 8 && gs.len() == 8 && tmp.len() == 16);
        // The sixteen 6-bit scales four at a time in 32-bit words: scale s has the low
        // nibble `scales[s % 8] >> 4(s / 8)` and the top bits `scales[8 + s % 4] >>
        // 2(s / 4)`; byte s of the little-endian words is scale s.
        let w = |i: usize| {
            u32::from_le_bytes([
                x.scales[4 * i],
                x.scales[4 * i + 1],
                x.scales[4 * i + 2],
                x.scales[4 * i + 3],
            ])
        };
        let (a, b4, c4) = (w(0), w(1), w(2));
        let (nib, two) = (0x0f0f_0f0f, 0x0303_0303);
        let words = [
            (a & nib) | ((c4 & two) << 4),
            (b4 & nib) | (((c4 >> 2) & two) << 4),
            ((a >> 4) & nib) | (((c4 >> 4) & two) << 4),
            ((b4 >> 4) & nib) | (((c4 >> 6) & two) << 4),
        ];
        // SAFETY: F16C, AVX2 and FMA are enabled here; loads are of 16 bytes of
        // `words`, of 32 bytes inside `qs` (64 bytes) and `hmask` (32), and of eight
        // i32 of `gs`.
        unsafe {
            let d = _mm256_set1_ps(half(x.d));
            let three = _mm256_set1_epi8(3);
            let low16 = _mm256_set1_epi32(0xFFFF);
            let hm = _mm256_loadu_si256(x.hmask.as_ptr().cast());
            // Per half n (sub-blocks 8n..8n + 8) as i32 lanes in the order even, odd
            // (`even_odd`): the scales minus 32 in both 16-bit halves of their lane;
            // step i takes lane i of each 128-bit half (sub-blocks 2i and 2i + 1).
            let bytes16: [u8; 16] = bytemuck::cast(words.map(u32::to_le_bytes));
            let (r0, r1) = even_odd(&bytes16);
            let both = |r: __m256i| {
                // The byte, 0..63, minus 32 as a signed 16-bit value in both halves.
                let s = _mm256_sub_epi32(r, _mm256_set1_epi32(32));
                _mm256_or_si256(_mm256_and_si256(s, low16), _mm256_slli_epi32::<16>(s))
            };
            let sc = [both(r0), both(r1)];
            let q = [
                _mm256_loadu_si256(x.qs.as_ptr().cast()),
                _mm256_loadu_si256(x.qs.as_ptr().add(32).cast()),
            ];
            let mut sumf = [_mm256_setzero_ps(); 2];
            // Both halves' threads step by step (independent chains, interleaved).
            for i in 0..4 {
                let shift = _mm_cvtsi32_si128(2 * i as i32);
                for n in 0..2 {
                    let b = 4 * n + i;
                    let crumb = _mm256_and_si256(_mm256_srl_epi16(q[n], shift), three);
                    let codes = _mm256_or_si256(crumb, bit_to(hm, b, 2));
                    let yq = _mm256_loadu_si256(y[b].qs.as_ptr().cast());
                    let g = _mm256_and_si256(_mm256_loadu_si256(gs[b].as_ptr().cast()), low16);
                    let bytes = _mm256_sub_epi16(_mm256_maddubs_epi16(codes, yq), g);
                    let dot =
                        _mm256_cvtepi32_ps(_mm256_madd_epi16(bytes, lane_each_half(sc[n], i)));
                    sumf[n] = mad8(c.vec_dot_sums, _mm256_set1_ps(yd[b]), dot, sumf[n]);
                }
            }
            mad_into8(c.accumulate, tmp, 0, d, sumf[0]);
            mad_into8(c.accumulate, tmp, 8, d, sumf[1]);
        }
    }

    /// `q5_k_tail` for the 16 threads of superblock `x`, two chunks per vector (lane
    /// `4h + r`: thread `4(2p + h) + r`): the codes of q8_1 block `b = 2ch + i` (nibble
    /// `i` of `qs[32ch..]` with bit `b` of `qh` as bit 4, unsigned below 32), their
    /// group dots folded `g_r + g_{r+4}` (the tail's two `dp4a`), times the chunk's scale;
    /// the column's group sums folded the same way times its min.
    #[inline(always)]
    unsafe fn q5_k_block(
        x: &BlockQ5K,
        y: &[BlockQ8_1],
        yd: &[f32],
        gs: &[[i32; 8]],
        c: Contraction,
        tmp: &mut [f32],
    ) {
        assert!(y.len() == 8 && yd.len() == 8 && gs.len() == 8 && tmp.len() == 16);
        // SAFETY: F16C, AVX2 and FMA are enabled here; loads are of 32 bytes inside
        // `qs` (128 bytes) and `qh` (32), and of eight i32 of `gs`.
        unsafe {
            let (d, dmin) = (_mm256_set1_ps(half(x.d)), _mm256_set1_ps(half(x.dmin)));
            let nib = _mm256_set1_epi8(0x0F);
            let qh = _mm256_loadu_si256(x.qh.as_ptr().cast());
            // Two vectors of group dots (chunks 2p and 2p + 1) folded `g_r + g_{r+4}`,
            // chunk 2p's in lanes 0..4.
            let fold2 = |a: __m256i, b: __m256i| {
                _mm256_add_epi32(
                    _mm256_permute2x128_si256::<0x20>(a, b),
                    _mm256_permute2x128_si256::<0x31>(a, b),
                )
            };
            // Sub-block k's scale and min in lane k (the device's per-chunk decode
            // equals `get_scale_min_k4`:
            // `gpu_q4_k_branchless_scale_decode_matches_get_scale_min_k4`), below 64.
            let (scs, ms) = super::fast_scales_and_mins(&x.scales);
            let sc8 = _mm256_cvtepu8_epi32(_mm_loadl_epi64(scs.as_ptr().cast()));
            let m8 = _mm256_cvtepu8_epi32(_mm_loadl_epi64(ms.as_ptr().cast()));
            for p in 0..2 {
                let q = [
                    _mm256_loadu_si256(x.qs.as_ptr().add(64 * p).cast()),
                    _mm256_loadu_si256(x.qs.as_ptr().add(64 * p + 32).cast()),
                ];
                let mut sumf_d = _mm256_setzero_ps();
                let mut sumf_m = _mm256_setzero_ps();
                for i in 0..2 {
                    let mut gd = [_mm256_setzero_si256(); 2];
                    for h in 0..2 {
                        let b = 2 * (2 * p + h) + i;
                        let shift = _mm_cvtsi32_si128(4 * i as i32);
                        let lo = _mm256_and_si256(_mm256_srl_epi16(q[h], shift), nib);
                        gd[h] = udots(_mm256_or_si256(lo, bit_to(qh, b, 4)), &y[b].qs);
                    }
                    let (b0, b1) = (4 * p + i, 4 * p + 2 + i);
                    let g = |k: usize| _mm256_loadu_si256(gs[k].as_ptr().cast());
                    let dot1 = fold2(gd[0], gd[1]);
                    let dot2 = fold2(g(b0), g(b1));
                    let pick = _mm256_setr_epi32(
                        b0 as i32, b0 as i32, b0 as i32, b0 as i32, b1 as i32, b1 as i32,
                        b1 as i32, b1 as i32,
                    );
                    // Each product below 2^15 times 64, the scale's high half 0: exact.
                    let d1 = _mm256_madd_epi16(dot1, _mm256_permutevar8x32_epi32(sc8, pick));
                    let d2 = _mm256_madd_epi16(dot2, _mm256_permutevar8x32_epi32(m8, pick));
                    let d8 = _mm256_set_m128(_mm_set1_ps(yd[b1]), _mm_set1_ps(yd[b0]));
                    sumf_d = mad8(c.vec_dot_sums, d8, _mm256_cvtepi32_ps(d1), sumf_d);
                    sumf_m = mad8(c.vec_dot_sums, d8, _mm256_cvtepi32_ps(d2), sumf_m);
                }
                add8(tmp, 8 * p, combine_minus(c, d, sumf_d, dmin, sumf_m));
            }
        }
    }

    /// `iq4_xs_tail` for the 8 threads of superblock `x` (thread `t`: sub-block `t`
    /// against q8_1 block `t`): the code book by `vpshufb`, signed codes times signed
    /// q8 codes widened to i16 (`vpmaddwd`, exact for every byte), each thread's 16 pair
    /// sums added by a `vphaddd` tree across the eight threads, times its 6-bit scale
    /// minus 32; `d * d8` per lane, as the tail's `x.d() * b8.d()`.
    #[inline(always)]
    unsafe fn iq4_xs_block(
        x: &BlockIq4Xs,
        y: &[BlockQ8_1],
        yd: &[f32],
        c: Contraction,
        tmp: &mut [f32],
    ) {
        assert!(y.len() == 8 && yd.len() == 8 && tmp.len() == 8);
        // SAFETY: AVX2, FMA and F16C are enabled here; loads are of 16 bytes of `qs`
        // (128), 32 of each q8_1 block and 8 floats of `yd`.
        unsafe {
            let table = _mm_loadu_si128(KVALUES_IQ4NL.as_ptr().cast());
            let nib = _mm_set1_epi8(0x0F);
            let mut part = [_mm256_setzero_si256(); 8];
            for (t, pt) in part.iter_mut().enumerate() {
                let qs = _mm_loadu_si128(x.qs.as_ptr().add(16 * t).cast());
                let lo = _mm_shuffle_epi8(table, _mm_and_si128(qs, nib));
                let hi = _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16::<4>(qs), nib));
                let q8 = _mm256_loadu_si256(y[t].qs.as_ptr().cast());
                let p0 = _mm256_madd_epi16(
                    _mm256_cvtepi8_epi16(lo),
                    _mm256_cvtepi8_epi16(_mm256_castsi256_si128(q8)),
                );
                let p1 = _mm256_madd_epi16(
                    _mm256_cvtepi8_epi16(hi),
                    _mm256_cvtepi8_epi16(_mm256_extracti128_si256::<1>(q8)),
                );
                *pt = _mm256_add_epi32(p0, p1);
            }
            // Horizontal sums of the eight vectors, thread t in lane t.
            let h01 = _mm256_hadd_epi32(part[0], part[1]);
            let h23 = _mm256_hadd_epi32(part[2], part[3]);
            let h45 = _mm256_hadd_epi32(part[4], part[5]);
            let h67 = _mm256_hadd_epi32(part[6], part[7]);
            let h0123 = _mm256_hadd_epi32(h01, h23);
            let h4567 = _mm256_hadd_epi32(h45, h67);
            let sumi = _mm256_add_epi32(
                _mm256_permute2x128_si256::<0x20>(h0123, h4567),
                _mm256_permute2x128_si256::<0x31>(h0123, h4567),
            );
            let scales_h = u16::from_le_bytes(x.scales_h) as i32;
            let ls: [i32; 8] = core::array::from_fn(|t| {
                let iqs = 4 * t;
                (((x.scales_l[iqs / 8] as i32 >> (iqs & 4)) & 0xF)
                    | (((scales_h >> (iqs / 2)) & 3) << 4))
                    - 32
            });
            let sumi = _mm256_mullo_epi32(sumi, _mm256_loadu_si256(ls.as_ptr().cast()));
            let dd = _mm256_mul_ps(_mm256_set1_ps(half(x.d)), _mm256_loadu_ps(yd.as_ptr()));
            mad_into8(c.accumulate, tmp, 0, dd, _mm256_cvtepi32_ps(sumi));
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
    /// ..`, see `Column`) against `m`; `yd` the column's q8_1 scales laid out
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
            let v = match c.combine {
                Combine::Unfused => {
                    _mm256_sub_ps(_mm256_mul_ps(dx, sumf_d), _mm256_mul_ps(dy, sumf_m))
                }
                // fma(dx, sumf_d, -(dy * sumf_m))
                Combine::FuseFirst => _mm256_fmsub_ps(dx, sumf_d, _mm256_mul_ps(dy, sumf_m)),
                // fma(-dy, sumf_m, dx * sumf_d)
                Combine::FuseSecond => _mm256_fnmadd_ps(dy, sumf_m, _mm256_mul_ps(dx, sumf_d)),
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
        // SAFETY: F16C and AVX2 are enabled here; 16 scale bytes.
        let (d, scs) = unsafe {
            let w = _mm256_cvtepi8_epi16(_mm_loadu_si128(x.scales.as_ptr().cast()));
            // The scales of half h (sub-blocks 8h..8h + 8) as i16 in both 128-bit halves.
            let s =
                [_mm256_permute2x128_si256::<0x00>(w, w), _mm256_permute2x128_si256::<0x11>(w, w)];
            (_mm256_set1_ps(half(x.d)), s)
        };
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
                // SAFETY: as above; a group-sum entry is 32 bytes, a pick 32.
                let (u, s32, pick) = unsafe {
                    (
                        _mm256_loadu_si256(y[k].qs.as_ptr().cast()),
                        _mm256_loadu_si256(sums[k].as_ptr().cast()),
                        _mm256_loadu_si256(Q6K_PICK[2 * hh + i].as_ptr().cast()),
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
                // Each group dot of (q - 32) * a is below 4 * 32 * 128 = 2^14 in size, so
                // its low i16 is the value; the scale (sub-block 8h + 2hh + 4i in lanes
                // 0..4, the next in 4..8) sits as an i16 beside a zero: `vpmaddwd` is the
                // exact product.
                let dot = _mm256_sub_epi32(pq, s32);
                let scv = _mm256_shuffle_epi8(scs[h], pick);
                let f = _mm256_cvtepi32_ps(_mm256_madd_epi16(dot, scv));
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

    /// `vpshufb` indices of a Q6_K step (2 hh + i): the i16 scale of sub-block
    /// `2 hh + 4 i` (of the half's eight) into the low i16 of lanes 0..4, the next one
    /// into lanes 4..8, the high i16 of every lane zero (0x80).
    const Q6K_PICK: [[u8; 32]; 4] = q6k_picks();

    const fn q6k_picks() -> [[u8; 32]; 4] {
        let mut t = [[0x80u8; 32]; 4];
        let mut step = 0;
        while step < 4 {
            let (hh, i) = (step / 2, step % 2);
            let mut j = 0;
            while j < 32 {
                let sub = 2 * hh + 4 * i + j / 16;
                if j % 4 < 2 {
                    t[step][j] = (2 * sub + j % 2) as u8;
                }
                j += 1;
            }
            step += 1;
        }
        t
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

    use tiercheck_core::GgmlType;

    use crate::neon::{group4, load16};
    use tiercheck_core::blocks::{BlockQ4K, BlockQ6K, BlockQ8_0, BlockQ8_1};
    use tiercheck_core::gpu::{Combine, Contraction};

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

    /// The eight 4-byte group dots of signed `codes` and signed `q`
    /// (`BlockForms::dots32`): widening byte products (`smull`, at most 128 * 128 in
    /// size), pairwise widening additions (`saddlp`) and pairwise additions (`addp`),
    /// exact for every byte value.
    pub(super) unsafe fn dots32(codes: &[i8; 32], q: &[u8; 32]) -> [i32; 8] {
        let mut out = [0i32; 8];
        // SAFETY: 32 bytes each; 8 i32 out; NEON is part of every aarch64 CPU.
        unsafe {
            for h in 0..2 {
                let c = vld1q_s8(codes.as_ptr().add(16 * h));
                let y = vld1q_s8(q.as_ptr().add(16 * h).cast());
                let p0 = vpaddlq_s16(vmull_s8(vget_low_s8(c), vget_low_s8(y)));
                let p1 = vpaddlq_s16(vmull_high_s8(c, y));
                vst1q_s32(out.as_mut_ptr().add(4 * h), vpaddq_s32(p0, p1));
            }
        }
        out
    }

    /// No NEON forms of the eight other types: the generic block forms (with
    /// [`dots32`]) run.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(super) unsafe fn other_block(
        _: GgmlType,
        _: &[u8],
        _: &[BlockQ8_1],
        _: &[f32],
        _: &[[i32; 8]],
        _: &[[f32; 8]],
        _: Contraction,
        _: &mut [f32],
    ) -> bool {
        false
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
                let v = match c.combine {
                    Combine::Unfused => vsubq_f32(vmulq_f32(vdx, sumf_d), vmulq_f32(vdy, sumf_m)),
                    // fma(dx, sumf_d, -(dy * sumf_m))
                    Combine::FuseFirst => vfmaq_f32(vnegq_f32(vmulq_f32(vdy, sumf_m)), vdx, sumf_d),
                    // fma(-dy, sumf_m, dx * sumf_d)
                    Combine::FuseSecond => vfmsq_f32(vmulq_f32(vdx, sumf_d), vdy, sumf_m),
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

    /// The end of the grid's run four lanes at a time: each lane's warps added
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::installed;
    use tiercheck_core::accel::with_scalar;
    use tiercheck_core::gpu::{mmvq_gemv, quantize_q8_1_mmvq, Combine, WAVE32, WAVE64};
    use tiercheck_core::rng::Rng;

    /// `k` values of weight row of `ty`: random bytes, each block's f16 scales finite
    /// (exponent below all-ones), or every quant byte extreme with `extreme`.
    fn row(rng: &mut Rng, ty: GgmlType, k: usize, extreme: bool) -> Vec<u8> {
        let unit = ty.type_size();
        let mut b = vec![0u8; k / ty.block_size() * unit];
        rng.fill_bytes(&mut b);
        for blk in b.chunks_mut(unit) {
            let mut f16 = || (0x2000u16 + rng.below(0x2000) as u16).to_le_bytes();
            match ty {
                GgmlType::Q4_K => {
                    blk[..2].copy_from_slice(&f16());
                    blk[2..4].copy_from_slice(&f16());
                    if extreme {
                        blk[16..].fill(0xFF);
                    }
                }
                GgmlType::Q6_K => {
                    blk[208..210].copy_from_slice(&f16());
                    if extreme {
                        blk[..192].fill(0xFF);
                    }
                }
                // Two f16 fields first (d and m, or d and dmin).
                GgmlType::Q4_1 | GgmlType::Q5_1 | GgmlType::Q5_K => {
                    blk[..2].copy_from_slice(&f16());
                    blk[2..4].copy_from_slice(&f16());
                    if extreme {
                        blk[4..].fill(0xFF);
                    }
                }
                // Q2_K: d and dmin after 16 scale and 64 quant bytes; Q3_K: d last.
                GgmlType::Q2_K => {
                    blk[80..82].copy_from_slice(&f16());
                    blk[82..84].copy_from_slice(&f16());
                    if extreme {
                        blk[..80].fill(0xFF);
                    }
                }
                GgmlType::Q3_K => {
                    blk[108..110].copy_from_slice(&f16());
                    if extreme {
                        blk[..108].fill(0xFF);
                    }
                }
                _ => {
                    blk[..2].copy_from_slice(&f16());
                    if extreme {
                        blk[2..].fill(0x80);
                    }
                }
            }
        }
        b
    }

    fn activations(rng: &mut Rng, k: usize, extreme: bool) -> Vec<BlockQ8_1> {
        let mut act = quantize_q8_1_mmvq(&rng.normals(k, 1.0));
        if extreme {
            for (i, a) in act.iter_mut().enumerate() {
                a.qs.fill(if i % 2 == 0 { 0x80 } else { 0x7F });
            }
        }
        act
    }

    /// The accelerated emulation (AVX2+FMA+F16C on x86-64, NEON on aarch64) equals the
    /// scalar twin bitwise for every type, warp layout and contraction (the types
    /// without block-at-once forms through the twin's per-thread loop compiled in the
    /// accelerated function).
    #[test]
    fn accelerated_mmvq_equals_the_scalar_twin_bitwise() {
        let here = if cfg!(target_arch = "x86_64") {
            crate::testing::avx2_here() && Host::detect().f16c
        } else {
            cfg!(target_arch = "aarch64")
        };
        installed("mmvq", &slots::GEMV, here);
        let mut rng = Rng::new(0x5EED_0001);
        let contractions = [
            Contraction::OFF,
            Contraction::NVCC,
            Contraction::HIP_CLANG,
            Contraction::HIP_CLANG_GFX90A,
            Contraction { vec_dot_sums: true, combine: Combine::FuseSecond, accumulate: false },
        ];
        for ty in tiercheck_core::gpu::MMVQ_TYPES {
            for (k, extreme) in [(256usize, false), (2048, false), (1024, true)] {
                let w = row(&mut rng, ty, k, extreme);
                let act = activations(&mut rng, k, extreme);
                for (warp, nwarps) in [(32, 1), (32, 4), (32, 8), (64, 1), (64, 2)] {
                    for c in contractions {
                        let a = mmvq_gemv(ty, &w, &act, warp, nwarps, c).unwrap();
                        let s = with_scalar(|| mmvq_gemv(ty, &w, &act, warp, nwarps, c)).unwrap();
                        let what = format!("{ty} k={k} extreme={extreme} {warp}x{nwarps} {c:?}");
                        assert_eq!(a.to_bits(), s.to_bits(), "{what}");
                    }
                }
            }
        }
    }

    /// Q4_1 and Q5_1 with scales so small that `d * d8` is an f16 subnormal (and some
    /// weights' `m` so large that `m * s8` overflows f16): the accelerated f16 products
    /// (`vcvtps2ph`) equal the twin's `round_to_f16`.
    #[test]
    fn accelerated_f16_products_equal_the_twin_at_subnormals_and_overflow() {
        let here = if cfg!(target_arch = "x86_64") {
            crate::testing::avx2_here() && Host::detect().f16c
        } else {
            cfg!(target_arch = "aarch64")
        };
        installed("mmvq", &slots::GEMV, here);
        let mut rng = Rng::new(0x5EED_0003);
        for ty in [GgmlType::Q4_1, GgmlType::Q5_1] {
            let mut w = row(&mut rng, ty, 2048, false);
            for (i, blk) in w.chunks_mut(ty.type_size()).enumerate() {
                // d: 2^-14 .. 2^-13 (times a d8 near 2^-7: an f16 subnormal); m: a
                // few of 2^15 (times an s8 beyond 2: past f16's largest finite).
                blk[..2].copy_from_slice(&(0x0400u16 + (i as u16 * 37) % 0x400).to_le_bytes());
                if i % 5 == 0 {
                    blk[2..4].copy_from_slice(&0x7800u16.to_le_bytes());
                }
            }
            let act = activations(&mut rng, 2048, false);
            for (warp, nwarps) in [(32, 1), (64, 2), (32, 4)] {
                for c in [Contraction::HIP_CLANG, Contraction::HIP_CLANG_GFX90A] {
                    let a = mmvq_gemv(ty, &w, &act, warp, nwarps, c).unwrap();
                    let s = with_scalar(|| mmvq_gemv(ty, &w, &act, warp, nwarps, c)).unwrap();
                    let same = a.to_bits() == s.to_bits() || (a.is_nan() && s.is_nan());
                    assert!(same, "{ty} {warp}x{nwarps} {c:?}: {a} vs {s}");
                }
            }
        }
    }

    /// `gemv_rows` (the column computed once, the weights' f16 scales by F16C in the
    /// accelerated form) equals the scalar `gemv` row by row, also where scales are
    /// special (NaN, infinity, subnormal, -0: a NaN result only has to be a NaN).
    #[test]
    fn accelerated_gemv_rows_equal_the_scalar_gemv_per_row() {
        crate::install();
        let mut rng = Rng::new(0x5EED_0002);
        let special: [u16; 8] = [0x7C01, 0x7E00, 0xFC00, 0x0001, 0x8000, 0x3C00, 0x03FF, 0xFD17];
        for ty in [GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0] {
            let (n, k, unit) = (7usize, 1024usize, ty.type_size());
            for specials in [false, true] {
                let mut rows: Vec<u8> = (0..n).flat_map(|_| row(&mut rng, ty, k, false)).collect();
                let mut act = activations(&mut rng, k, false);
                if specials {
                    for (b, blk) in rows.chunks_mut(unit).enumerate() {
                        let at = if ty == GgmlType::Q6_K { 208 } else { 0 };
                        blk[at..at + 2].copy_from_slice(&special[b % 8].to_le_bytes());
                    }
                    for (i, a) in act.iter_mut().enumerate().filter(|(i, _)| i % 3 == 1) {
                        a.d = special[i % 8].to_le_bytes();
                    }
                }
                for cfg in [WAVE32, WAVE64] {
                    let mut got = vec![0.0f32; n];
                    cfg.gemv_rows(ty, &rows, &act, &mut got).unwrap();
                    for (j, g) in got.iter().enumerate() {
                        let r = &rows
                            [j * k / ty.block_size() * unit..(j + 1) * k / ty.block_size() * unit];
                        let want = with_scalar(|| cfg.gemv(ty, r, &act)).unwrap();
                        let same = g.to_bits() == want.to_bits() || (g.is_nan() && want.is_nan());
                        assert!(
                            same,
                            "{ty} {} specials={specials} row {j}: {g} vs {want}",
                            cfg.name
                        );
                    }
                }
            }
        }
    }
}
