//! Accelerated forms of the portable twins: the same bits, computed with the host's SIMD.
//!
//! A twin's contract is its bits, not its scalar code. The scalar twins stay the readable
//! specification; where a twin's cost lies in an exact integer stage (the byte products
//! and sums of a quantized dot product), this module computes that stage with the host's
//! vector instructions and the twin keeps its float operations, in its order, around it.
//! What makes this exact:
//!
//! - **Integer stages**: every sum here is a sum of integer products that fits in i32
//!   (the bounds are stated per function), so any grouping and order of the additions
//!   gives the same integer. The byte instructions used cannot saturate or wrap on the
//!   operands they get: `_mm256_maddubs_epi16` takes 4- or 6-bit unsigned values against
//!   signed bytes (a pair sum at most 2 * 63 * 128 = 16128 in magnitude), signed-by-signed
//!   products are widened to i16 first (`_mm256_cvtepi8_epi16`, `_mm256_madd_epi16`).
//! - **Float stages**: the accelerated functions perform the scalar twin's IEEE
//!   operations one for one (a separate multiply and add stay separate, a fused one is an
//!   FMA3 instruction, a lane-wise 4-float accumulation is one SSE register); Rust never
//!   contracts or reassociates float arithmetic, whatever the target features.
//!
//! The accelerated forms run where the CPU has what they need (x86-64 with AVX2 and FMA,
//! detected at run time; std caches the detection; on aarch64, NEON, which every CPU
//! has) and the calling thread has not asked for the scalar twins with [`with_scalar`]. The golden suite runs every case both ways
//! (`<case>/<lane>` and `<case>/<lane>/scalar`) against the same stored golden, and the
//! unit tests below compare each primitive with its scalar definition on random and
//! extreme inputs.
//!
//! Where the accelerated form is used:
//!
//! - the aarch64 twins' `nrc == 1` vec_dot kernels (`arch::aarch64::neon::vec_dot`,
//!   which the i8mm and SVE lanes share for their K-quant single-row dots; the SVE
//!   lanes' own Q4_0/Q8_0 kernels at 128 and 256 bits, `arch::aarch64::sve::vec_dot`)
//!   and the Q6_K integer sum every aarch64 twin shares
//!   ([`crate::arch::aarch64::neon::vec_dot::q6_k_isum`]);
//! - the aarch64 repacked twins' integer stages: Q4_K and Q6_K eight rows at a time
//!   (`x86::q4kx8_dots`, `x86::q6kx8_isums`), Q8_0 and Q4_0 four rows at a time
//!   (`x86::q8_0x4_isums`, `x86::q4_0x4_isums`, 4- and 8-byte interleaves), and the
//!   float sides of their Q4_0/Q8_0 and Q6_K gemv and Q6_K gemm (the rows in SSE/AVX
//!   lanes, the f16 scales by F16C), as `x86_64-avx2-repack`'s Q4_K 8x8 gemv;
//! - the x86 lanes' vec_dot twins (`arch::x86_64::avx2::vec_dot`): the tier's own
//!   integer lanes (for Q4_0/Q8_0 its `sign`/`maddubs`/`madd` sequence,
//!   `x86::mul_sum_i8_lanes`) and its eight-lane FMA accumulation; on aarch64 hosts the
//!   same lanes from NEON widening products (`neon::q4k_lanes`, `neon::q6k_lanes`,
//!   `neon::bsums_lanes`, `neon::mul_sum_i8_lanes`) and the accumulation as two
//!   four-float `fmla` vectors;
//! - the GPU lanes' MMVQ warp emulation ([`crate::gpu::mmvq_gemv`]: every thread of one
//!   weight block at once in AVX2 lanes, compiled with FMA so each fused multiply-add is
//!   one instruction; the warps' additions and the butterfly eight lanes at a time; in a
//!   matmul, each activation column's scales and group sums once for all rows,
//!   [`crate::gpu::MmvqConfig::gemv_rows`]); on aarch64 hosts the same forms with NEON,
//!   four threads per vector.
//!
//! Those of the forms that read f16 scales directly need F16C as well (every CPU with
//! AVX2 has it; it is detected all the same, and without it the scalar form runs).
//!
//! The other twins run their scalar form everywhere (docs/PERFORMANCE.md has the
//! figures).

use std::cell::Cell;

thread_local! {
    static SCALAR_ONLY: Cell<bool> = const { Cell::new(false) };
}

/// Run `f` with the scalar twins only, on this thread (threads `f` spawns are not
/// affected). The golden suite uses it to check every case on the scalar specification
/// as well as on the accelerated form.
pub fn with_scalar<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            SCALAR_ONLY.with(|s| s.set(self.0));
        }
    }
    let _restore = Restore(SCALAR_ONLY.with(|s| s.replace(true)));
    f()
}

/// Whether the x86-64 AVX2+FMA accelerated forms run on this thread now.
#[inline]
pub fn x86_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        !SCALAR_ONLY.with(|s| s.get())
            && std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether the aarch64 NEON accelerated forms run on this thread now (NEON is part of
/// every aarch64 CPU; only [`with_scalar`] turns them off).
#[inline]
pub fn aarch64_neon() -> bool {
    #[cfg(target_arch = "aarch64")]
    {
        !SCALAR_ONLY.with(|s| s.get())
    }
    #[cfg(not(target_arch = "aarch64"))]
    {
        false
    }
}

/// Which accelerated form the twins use on this thread: `avx2+fma` or `scalar`.
pub fn describe() -> &'static str {
    if x86_avx2() {
        "avx2+fma"
    } else {
        "scalar"
    }
}

/// The eight (scale, min) pairs of a Q4_K superblock's 12 scale bytes at once, as
/// ggml's kernels unpack them (`utmp` with `kmask1..3`): `scales[j], mins[j]` equal
/// [`crate::blocks::q4_k::scale_min_k4`]`(j)` for every j (checked exhaustively over
/// the bytes that matter in the tests).
#[inline]
pub fn q4k_scales_mins(q: &[u8; 12]) -> ([u8; 8], [u8; 8]) {
    const KMASK1: u32 = 0x3f3f_3f3f;
    const KMASK2: u32 = 0x0f0f_0f0f;
    const KMASK3: u32 = 0x0303_0303;
    let w = |i: usize| u32::from_le_bytes([q[4 * i], q[4 * i + 1], q[4 * i + 2], q[4 * i + 3]]);
    let (u0, u1, u2) = (w(0), w(1), w(2));
    let u3 = ((u2 >> 4) & KMASK2) | (((u1 >> 6) & KMASK3) << 4);
    let m_lo = u1 & KMASK1;
    let s_hi = (u2 & KMASK2) | (((u0 >> 6) & KMASK3) << 4);
    let s_lo = u0 & KMASK1;
    let mut sc = [0u8; 8];
    let mut mn = [0u8; 8];
    sc[..4].copy_from_slice(&s_lo.to_le_bytes());
    sc[4..].copy_from_slice(&s_hi.to_le_bytes());
    mn[..4].copy_from_slice(&m_lo.to_le_bytes());
    mn[4..].copy_from_slice(&u3.to_le_bytes());
    (sc, mn)
}

/// The (scale, min) pairs of all eight rows of a `block_q4_Kx8`, by sub-block then row:
/// `.0[s][r], .1[s][r]` equal `BlockQ4Kx8::scale_min(r, s)`.
#[inline]
pub fn q4kx8_scales_mins(x: &crate::repack::BlockQ4Kx8) -> ([[u8; 8]; 8], [[u8; 8]; 8]) {
    let mut sc = [[0u8; 8]; 8];
    let mut mn = [[0u8; 8]; 8];
    for s in 0..8 {
        let q: &[u8; 12] = x.scales[12 * s..12 * s + 12].try_into().expect("12 bytes");
        (sc[s], mn[s]) = q4k_scales_mins(q);
    }
    (sc, mn)
}

/// AVX2 integer stages. Each function needs AVX2 (its callers check [`x86_avx2`]).
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use core::arch::x86_64::*;

    #[inline]
    #[target_feature(enable = "avx2")]
    fn load32(b: &[u8; 32]) -> __m256i {
        // SAFETY: `b` is 32 readable bytes; the load is unaligned.
        unsafe { _mm256_loadu_si256(b.as_ptr() as *const __m256i) }
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    fn load16(b: &[u8; 16]) -> __m128i {
        // SAFETY: `b` is 16 readable bytes; the load is unaligned.
        unsafe { _mm_loadu_si128(b.as_ptr() as *const __m128i) }
    }

    #[inline]
    fn at32<const N: usize>(b: &[u8; N], o: usize) -> &[u8; 32] {
        b[o..o + 32].try_into().expect("32 bytes")
    }

    #[inline]
    fn at16<const N: usize>(b: &[u8; N], o: usize) -> &[u8; 16] {
        b[o..o + 16].try_into().expect("16 bytes")
    }

    /// The sum of the eight i32 lanes of `v`.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn hsum_i32(v: __m256i) -> i32 {
        let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
        let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01_00_11_10>(s));
        let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b10_11_00_01>(s));
        _mm_cvtsi128_si32(s)
    }

    /// `sum_j sc[j] * sum_l nib_j(l) * y[32j + l]` of one Q4_K superblock against the
    /// 256 activation bytes `y` (signed): sub-block `2c` is the low nibbles of
    /// `qs[32c..32c+32]`, `2c+1` their high nibbles. Bounds: a `maddubs` pair is at most
    /// 2 * 15 * 128 = 3840 in magnitude, a `madd` lane at most 2 * 3840 * 63, eight of
    /// them well inside i32.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(crate) fn q4k_sumi(qs: &[u8; 128], y: &[u8; 256], sc: &[u8; 8]) -> i32 {
        hsum_i32(q4k_lanes(qs, y, sc))
    }

    /// The eight i32 lanes whose sum is [`q4k_sumi`], as ggml's AVX2 kernel forms them:
    /// lane t sums bytes 4t..4t+3 of every 32-byte run (low and high nibbles against
    /// their activations, times their sub-block's scale). Bounds as [`q4k_sumi`].
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(crate) fn q4k_lanes(qs: &[u8; 128], y: &[u8; 256], sc: &[u8; 8]) -> __m256i {
        let m4 = _mm256_set1_epi8(0x0F);
        let mut acc = _mm256_setzero_si256();
        for c in 0..4 {
            let q = load32(at32(qs, 32 * c));
            let lo = _mm256_and_si256(q, m4);
            let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(q), m4);
            let pl = _mm256_maddubs_epi16(lo, load32(at32(y, 64 * c)));
            let ph = _mm256_maddubs_epi16(hi, load32(at32(y, 64 * c + 32)));
            let sl = _mm256_madd_epi16(pl, _mm256_set1_epi16(sc[2 * c] as i16));
            let sh = _mm256_madd_epi16(ph, _mm256_set1_epi16(sc[2 * c + 1] as i16));
            acc = _mm256_add_epi32(acc, _mm256_add_epi32(sl, sh));
        }
        acc
    }

    /// `sum_g sc[g] * sum_{i in g} q_i * y_i` of one Q6_K superblock, with `q_i` its
    /// unsigned 6-bit values (0..63, value order as `BlockQ6K::quants` + 32) and `y` the
    /// 256 activation bytes (signed), groups of 16 values. Bounds: a `maddubs` pair at
    /// most 2 * 63 * 128 = 16128, a `madd` lane at most 2 * 16128 * 128, sixteen of them
    /// inside i32.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(crate) fn q6k_dot(ql: &[u8; 128], qh: &[u8; 64], y: &[u8; 256], sc: &[u8; 16]) -> i32 {
        hsum_i32(q6k_lanes(ql, qh, y, sc))
    }

    /// The eight i32 lanes whose sum is [`q6k_dot`], as ggml's AVX2 kernel forms them:
    /// lane t sums bytes 4t..4t+3 of every 32-value chunk times its group's scale
    /// (bytes 0..16 of a chunk are one group, 16..32 the next). Bounds as [`q6k_dot`].
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(crate) fn q6k_lanes(
        ql: &[u8; 128],
        qh: &[u8; 64],
        y: &[u8; 256],
        sc: &[u8; 16],
    ) -> __m256i {
        q6k_lanes_from(|o| load32(at32(ql, o)), |o| load32(at32(qh, o)), y, sc)
    }

    /// The four 6-bit values of a Q6_K half for value groups `l`, `l+32`, `l+64`, `l+96`,
    /// byte by byte: from ql bytes `l0` (plain offset 64j+l) and `l1` (64j+32+l), low
    /// then high nibbles, with the matching 2-bit pairs of the qh bytes `h` (32j+l).
    #[inline]
    #[target_feature(enable = "avx2")]
    fn q6_values(l0: __m256i, l1: __m256i, h: __m256i) -> [__m256i; 4] {
        let m4 = _mm256_set1_epi8(0x0F);
        [
            _mm256_or_si256(
                _mm256_and_si256(l0, m4),
                _mm256_slli_epi16::<4>(_mm256_and_si256(h, _mm256_set1_epi8(0x03))),
            ),
            _mm256_or_si256(
                _mm256_and_si256(l1, m4),
                _mm256_slli_epi16::<2>(_mm256_and_si256(h, _mm256_set1_epi8(0x0C))),
            ),
            _mm256_or_si256(
                _mm256_and_si256(_mm256_srli_epi16::<4>(l0), m4),
                _mm256_and_si256(h, _mm256_set1_epi8(0x30)),
            ),
            _mm256_or_si256(
                _mm256_and_si256(_mm256_srli_epi16::<4>(l1), m4),
                _mm256_srli_epi16::<2>(_mm256_and_si256(h, _mm256_set1_epi8(0xC0u8 as i8))),
            ),
        ]
    }

    /// [`q6k_lanes`] with the 32-byte pieces of `ql` (at byte 0, 32, 64, 96) and `qh` (at
    /// 0, 32) supplied by `ql_at` / `qh_at` (plain or gathered from an interleave).
    #[inline]
    #[target_feature(enable = "avx2")]
    fn q6k_lanes_from(
        ql_at: impl Fn(usize) -> __m256i,
        qh_at: impl Fn(usize) -> __m256i,
        y: &[u8; 256],
        sc: &[u8; 16],
    ) -> __m256i {
        let mut acc = _mm256_setzero_si256();
        for j in 0..2 {
            let l0 = ql_at(64 * j);
            let l1 = ql_at(64 * j + 32);
            let h = qh_at(32 * j);
            let q = q6_values(l0, l1, h);
            for (c, qc) in q.into_iter().enumerate() {
                let g = 8 * j + 2 * c;
                let p = _mm256_maddubs_epi16(qc, load32(at32(y, 128 * j + 32 * c)));
                let s = _mm256_set_m128i(
                    _mm_set1_epi16(sc[g + 1] as i8 as i16),
                    _mm_set1_epi16(sc[g] as i8 as i16),
                );
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, s));
            }
        }
        acc
    }

    /// The exact integer sums of the eight rows of one `block_q6_Kx8` (interleave `il`, 4
    /// or 8: plain byte `o` of row `r` at `((o / il) * 8 + r) * il + o % il`) against one
    /// Q8_K block (`y` its 256 activation bytes, `bsums` its 16 group sums), each
    /// `sum_g sc[g][r] * sum_{i in g} u_i * y_i - 32 * sum_g sc[g][r] * bsum_g` with `u_i`
    /// the unsigned 6-bit values: the same integers as [`q6k_dot`] minus 32 times
    /// [`bsums_dot`] on each deinterleaved row, computed with the rows in vector lanes as
    /// the interleave lays them out (one 32-byte load holds the same `il` plain bytes of
    /// 32 / il rows, against one broadcast piece of the activations). Bounds as
    /// [`q6k_dot`]: a `maddubs` pair at most 16128, a row's total below 2^31.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(crate) fn q6kx8_isums(
        x: &crate::repack::BlockQ6Kx8,
        il: usize,
        y: &[u8; 256],
        bsums: &[u8; 32],
    ) -> [i32; 8] {
        let ones = _mm256_set1_epi16(1);
        let ld = |b: &[u8], at: usize| load32(b[at..at + 32].try_into().expect("32 bytes"));
        let scales8 = |g: usize| -> __m256i {
            // The eight rows' scales of group g, as i32 lanes (row r in lane r).
            let b: [u8; 8] = x.scales[8 * g..8 * g + 8].try_into().expect("8 bytes");
            _mm256_cvtepi8_epi32(_mm_cvtsi64_si128(i64::from_le_bytes(b)))
        };
        // The bsum term, rows in lanes.
        let mut mins = _mm256_setzero_si256();
        for g in 0..16 {
            let bs = i16::from_le_bytes([bsums[2 * g], bsums[2 * g + 1]]) as i32;
            mins = _mm256_add_epi32(mins, _mm256_mullo_epi32(_mm256_set1_epi32(bs), scales8(g)));
        }
        let mut rows = [0i32; 8];
        if il == 4 {
            // 32 bytes: 4 plain bytes of each of the 8 rows; one i32 lane per row.
            let mut acc = _mm256_setzero_si256();
            for j in 0..2 {
                for half in 0..2 {
                    let mut sums = [_mm256_setzero_si256(); 4];
                    for t in 0..4 {
                        let l = 16 * half + 4 * t;
                        let a = ld(&x.ql, (64 * j + l) / 4 * 32);
                        let b = ld(&x.ql, (64 * j + 32 + l) / 4 * 32);
                        let h = ld(&x.qh, (32 * j + l) / 4 * 32);
                        for (k, q) in q6_values(a, b, h).into_iter().enumerate() {
                            let i = 128 * j + 32 * k + l;
                            let yv = _mm256_set1_epi32(i32::from_le_bytes(
                                y[i..i + 4].try_into().expect("4 bytes"),
                            ));
                            let p = _mm256_madd_epi16(_mm256_maddubs_epi16(q, yv), ones);
                            sums[k] = _mm256_add_epi32(sums[k], p);
                        }
                    }
                    for (k, sk) in sums.into_iter().enumerate() {
                        let g = 8 * j + 2 * k + half;
                        acc = _mm256_add_epi32(acc, _mm256_mullo_epi32(sk, scales8(g)));
                    }
                }
            }
            let v = _mm256_sub_epi32(acc, _mm256_slli_epi32::<5>(mins));
            // SAFETY: `rows` is 32 writable bytes; the store is unaligned.
            unsafe { _mm256_storeu_si256(rows.as_mut_ptr() as *mut __m256i, v) };
            return rows;
        }
        debug_assert_eq!(il, 8);
        // 64 bytes: 8 plain bytes of each of the 8 rows; the 32-byte half `qd` holds rows
        // 4qd..4qd+4, two i32 lanes per row.
        for qd in 0..2 {
            let mut acc = _mm256_setzero_si256();
            for j in 0..2 {
                for half in 0..2 {
                    let mut sums = [_mm256_setzero_si256(); 4];
                    for t in 0..2 {
                        let l = 16 * half + 8 * t;
                        let a = ld(&x.ql, (64 * j + l) / 8 * 64 + 32 * qd);
                        let b = ld(&x.ql, (64 * j + 32 + l) / 8 * 64 + 32 * qd);
                        let h = ld(&x.qh, (32 * j + l) / 8 * 64 + 32 * qd);
                        for (k, q) in q6_values(a, b, h).into_iter().enumerate() {
                            let i = 128 * j + 32 * k + l;
                            let yv = _mm256_set1_epi64x(i64::from_le_bytes(
                                y[i..i + 8].try_into().expect("8 bytes"),
                            ));
                            let p = _mm256_madd_epi16(_mm256_maddubs_epi16(q, yv), ones);
                            sums[k] = _mm256_add_epi32(sums[k], p);
                        }
                    }
                    for (k, sk) in sums.into_iter().enumerate() {
                        let g = 8 * j + 2 * k + half;
                        let s = &x.scales[8 * g + 4 * qd..8 * g + 4 * qd + 4];
                        let dup = [s[0], s[0], s[1], s[1], s[2], s[2], s[3], s[3]];
                        let sc = _mm256_cvtepi8_epi32(_mm_cvtsi64_si128(i64::from_le_bytes(dup)));
                        acc = _mm256_add_epi32(acc, _mm256_mullo_epi32(sk, sc));
                    }
                }
            }
            let mut lanes = [0i32; 8];
            // SAFETY: `lanes` is 32 writable bytes; the store is unaligned.
            unsafe { _mm256_storeu_si256(lanes.as_mut_ptr() as *mut __m256i, acc) };
            for r in 0..4 {
                rows[4 * qd + r] = lanes[2 * r] + lanes[2 * r + 1];
            }
        }
        let mut m = [0i32; 8];
        // SAFETY: `m` is 32 writable bytes; the store is unaligned.
        unsafe { _mm256_storeu_si256(m.as_mut_ptr() as *mut __m256i, mins) };
        for (r, v) in rows.iter_mut().enumerate() {
            *v -= 32 * m[r];
        }
        rows
    }

    /// `sum_g bsum_g * sc[g]` over the 16 i16 group sums of a Q8_K block (`bsums`, 32
    /// bytes) and 16 signed scales. Bounds: |bsum| <= 16 * 128, |sc| <= 128.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(crate) fn bsums_dot(bsums: &[u8; 32], sc: &[u8; 16]) -> i32 {
        hsum_i32(bsums_lanes(bsums, sc))
    }

    /// The eight i32 lanes whose sum is [`bsums_dot`]: lane t is `bsum[2t] * sc[2t] +
    /// bsum[2t+1] * sc[2t+1]` (`_mm256_madd_epi16`, exact at these bounds).
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(crate) fn bsums_lanes(bsums: &[u8; 32], sc: &[u8; 16]) -> __m256i {
        _mm256_madd_epi16(load32(bsums), _mm256_cvtepi8_epi16(load16(sc)))
    }

    /// ggml's AVX2 `mul_sum_i8_pairs` before its float conversion, on 32 signed bytes x
    /// and y: the eight i32 lanes of `madd(1, maddubs(|x|, sign(y, x)))`, lane t summing
    /// bytes 4t..4t+3. The instructions themselves, so their wrap-around (`sign` of -128)
    /// is the tier's; no `maddubs` pair saturates (|x| <= 128, sign(y, x) in -128..=127).
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(crate) fn mul_sum_i8_lanes(x: __m256i, y: __m256i) -> __m256i {
        let ax = _mm256_sign_epi8(x, x);
        let sy = _mm256_sign_epi8(y, x);
        _mm256_madd_epi16(_mm256_set1_epi16(1), _mm256_maddubs_epi16(ax, sy))
    }

    /// The 32 bytes of a Q8_0 block's values.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(crate) fn q8_0_bytes(qs: &[u8; 32]) -> __m256i {
        load32(qs)
    }

    /// A Q4_0 block's 32 signed values (low nibbles, then high ones, minus 8) as ggml's
    /// `bytes_from_nibbles_32` and `_mm256_sub_epi8(_, 8)` lay them out.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(crate) fn q4_0_bytes(qs: &[u8; 16]) -> __m256i {
        let (lo, hi) = q4_0_halves(qs);
        _mm256_set_m128i(hi, lo)
    }

    /// The sub-block dots of the eight interleaved rows of one `block_q4_Kx8` against
    /// one Q8_K block's 256 activation bytes: `dot[s][r]` = sum over sub-block s's 32
    /// values of row r of nibble * activation (sub-block 2c: low nibbles of plain bytes
    /// 32c..32c+32, against activations 64c..; 2c+1: high nibbles, against 64c+32..).
    /// `il` is the interleave (4 or 8 bytes: plain byte o of row r at
    /// `((o / il) * 8 + r) * il + o % il`). Bounds as [`q4k_sumi`].
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(crate) fn q4kx8_dots(qs: &[u8; 1024], y: &[u8; 256], il: usize) -> [[i32; 8]; 8] {
        let m4 = _mm256_set1_epi8(0x0F);
        let ones = _mm256_set1_epi16(1);
        let y4 = |o: usize| i32::from_le_bytes([y[o], y[o + 1], y[o + 2], y[o + 3]]);
        let y8 = |o: usize| i64::from_le_bytes(y[o..o + 8].try_into().expect("8 bytes"));
        let mut dot = [[0i32; 8]; 8];
        let mut put = |s: usize, v: __m256i| {
            // SAFETY: `dot[s]` holds eight i32; the store is unaligned.
            unsafe { _mm256_storeu_si256(dot[s].as_mut_ptr() as *mut __m256i, v) }
        };
        for c in 0..4 {
            if il == 4 {
                // One 32-byte load: the 4 bytes at plain offset o of all eight rows.
                let (mut lo, mut hi) = (_mm256_setzero_si256(), _mm256_setzero_si256());
                for t in 0..8 {
                    let o = 32 * c + 4 * t;
                    let v = load32(at32(qs, (o / 4) * 32));
                    let yl = _mm256_set1_epi32(y4(64 * c + 4 * t));
                    let yh = _mm256_set1_epi32(y4(64 * c + 32 + 4 * t));
                    let nl = _mm256_and_si256(v, m4);
                    let nh = _mm256_and_si256(_mm256_srli_epi16::<4>(v), m4);
                    lo =
                        _mm256_add_epi32(lo, _mm256_madd_epi16(_mm256_maddubs_epi16(nl, yl), ones));
                    hi =
                        _mm256_add_epi32(hi, _mm256_madd_epi16(_mm256_maddubs_epi16(nh, yh), ones));
                }
                put(2 * c, lo);
                put(2 * c + 1, hi);
            } else {
                // Two 32-byte loads: the 8 bytes at plain offset o of rows 0..4 and 4..8.
                let mut lo = [_mm256_setzero_si256(); 2];
                let mut hi = [_mm256_setzero_si256(); 2];
                for t in 0..4 {
                    let o = 32 * c + 8 * t;
                    let yl = _mm256_set1_epi64x(y8(64 * c + 8 * t));
                    let yh = _mm256_set1_epi64x(y8(64 * c + 32 + 8 * t));
                    for h in 0..2 {
                        let v = load32(at32(qs, (o / 8) * 64 + 32 * h));
                        let nl = _mm256_and_si256(v, m4);
                        let nh = _mm256_and_si256(_mm256_srli_epi16::<4>(v), m4);
                        lo[h] = _mm256_add_epi32(
                            lo[h],
                            _mm256_madd_epi16(_mm256_maddubs_epi16(nl, yl), ones),
                        );
                        hi[h] = _mm256_add_epi32(
                            hi[h],
                            _mm256_madd_epi16(_mm256_maddubs_epi16(nh, yh), ones),
                        );
                    }
                }
                // Row 4h + q holds lanes 2q, 2q + 1 of acc[h]; hadd pairs them as rows
                // (0, 1, 4, 5 | 2, 3, 6, 7), the permutation puts them in order.
                let order = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
                put(2 * c, _mm256_permutevar8x32_epi32(_mm256_hadd_epi32(lo[0], lo[1]), order));
                put(2 * c + 1, _mm256_permutevar8x32_epi32(_mm256_hadd_epi32(hi[0], hi[1]), order));
            }
        }
        dot
    }

    /// The four `sdot` lanes of one 32-value block pair (x, y signed bytes): lane t is
    /// `sum_{b in 4t..4t+4} x[b] * y[b] + x[16 + b] * y[16 + b]` (exact: products widened
    /// to i16, pair sums in i32).
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(crate) fn sdot_lanes(xl: __m128i, xh: __m128i, y: &[u8; 32]) -> __m128i {
        let ml =
            _mm256_madd_epi16(_mm256_cvtepi8_epi16(xl), _mm256_cvtepi8_epi16(load16(at16(y, 0))));
        let mh =
            _mm256_madd_epi16(_mm256_cvtepi8_epi16(xh), _mm256_cvtepi8_epi16(load16(at16(y, 16))));
        // Lane k of s: bytes 2k, 2k+1 of both halves; lane t of the result: k = 2t, 2t+1.
        let s = _mm256_add_epi32(ml, mh);
        let h = _mm256_hadd_epi32(s, s);
        _mm_unpacklo_epi64(_mm256_castsi256_si128(h), _mm256_extracti128_si256::<1>(h))
    }

    /// The eight 256-bit SVE `svdot` lanes of one 32-value block pair (x as its two
    /// 16-byte halves, values 0..15 and 16..31; y signed bytes): lane t is
    /// `sum_{b in 4t..4t+4} x[b] * y[b]` (exact: products widened to i16, pair sums in
    /// i32, quads by one horizontal add, put back in order by one permute).
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(crate) fn sdot_lanes8(xl: __m128i, xh: __m128i, y: &[u8; 32]) -> __m256i {
        // Element k of ml: values 2k, 2k+1 (k < 8); of mh: values 16 + 2k, 17 + 2k.
        let ml =
            _mm256_madd_epi16(_mm256_cvtepi8_epi16(xl), _mm256_cvtepi8_epi16(load16(at16(y, 0))));
        let mh =
            _mm256_madd_epi16(_mm256_cvtepi8_epi16(xh), _mm256_cvtepi8_epi16(load16(at16(y, 16))));
        // Per 128-bit half: quads (0, 1, 4, 5) in the low one, (2, 3, 6, 7) in the high.
        let h = _mm256_hadd_epi32(ml, mh);
        _mm256_permute4x64_epi64::<0b11_01_10_00>(h)
    }

    /// The activation bytes that line up with chunk `c` of a 4-row interleave (32 bytes
    /// holding plain offsets 8c..8c+8 of each row; `il` 4: the rows' first four bytes,
    /// then their last four; `il` 8: the rows' eight bytes in turn): `y` words (4 bytes)
    /// `w`, `w + 1`, repeated in the same pattern.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn y_for_chunk(y: __m256i, w: i32, il: usize) -> __m256i {
        let idx = if il == 4 {
            _mm256_setr_epi32(w, w, w, w, w + 1, w + 1, w + 1, w + 1)
        } else {
            _mm256_setr_epi32(w, w + 1, w, w + 1, w, w + 1, w, w + 1)
        };
        _mm256_permutevar8x32_epi32(y, idx)
    }

    /// Exact signed byte products of x and y, pairs summed: for the low and the high
    /// 16 bytes, eight i32 lanes each (lane k: bytes 2k, 2k+1 of that half).
    #[inline]
    #[target_feature(enable = "avx2")]
    fn madd_i8_halves(x: __m256i, y: __m256i) -> (__m256i, __m256i) {
        let w = |v: __m128i| _mm256_cvtepi8_epi16(v);
        (
            _mm256_madd_epi16(w(_mm256_castsi256_si128(x)), w(_mm256_castsi256_si128(y))),
            _mm256_madd_epi16(
                w(_mm256_extracti128_si256::<1>(x)),
                w(_mm256_extracti128_si256::<1>(y)),
            ),
        )
    }

    /// The four rows' sums from the low-half and high-half lanes of
    /// [`madd_i8_halves`] summed over the chunks of a 4-row interleave `il`: byte 16h + 2k
    /// of a chunk belongs to row `((16h + 2k) / il) % 4`. `il` 4: lane k of either half
    /// is row k / 2; `il` 8: lanes 0..4 of the low half row 0, 4..8 row 1, of the high
    /// half rows 2 and 3. Two horizontal adds and one unpack put the rows in order.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn rows4(acc_lo: __m256i, acc_hi: __m256i, il: usize) -> [i32; 4] {
        let r = if il == 4 {
            // [r0 r0 r1 r1 | r2 r2 r3 r3] -> [r0 r1 r0 r1 | r2 r3 r2 r3]
            let s = _mm256_add_epi32(acc_lo, acc_hi);
            let h = _mm256_hadd_epi32(s, s);
            _mm_unpacklo_epi64(_mm256_castsi256_si128(h), _mm256_extracti128_si256::<1>(h))
        } else {
            // [l01 l23 h01 h23 | l45 l67 h45 h67] -> [r0 r2 r0 r2 | r1 r3 r1 r3]
            let h = _mm256_hadd_epi32(acc_lo, acc_hi);
            let h = _mm256_hadd_epi32(h, h);
            _mm_unpacklo_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256::<1>(h))
        };
        let mut out = [0i32; 4];
        // SAFETY: `out` holds four i32; the store is unaligned.
        unsafe { _mm_storeu_si128(out.as_mut_ptr() as *mut __m128i, r) };
        out
    }

    /// The exact integer dots of the four rows of one `block_q8_0x4` (interleave `il`, 4
    /// or 8: plain value o of row r at `((o / il) * 4 + r) * il + o % il`) with one Q8_0
    /// activation block's 32 values: `sum_o x[r][o] * y[o]`. Bounds: 32 products of at
    /// most 2^14 each.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(crate) fn q8_0x4_isums(qs: &[u8; 128], il: usize, y: &[u8; 32]) -> [i32; 4] {
        let yv = load32(y);
        let (mut lo, mut hi) = (_mm256_setzero_si256(), _mm256_setzero_si256());
        for c in 0..4 {
            let (l, h) =
                madd_i8_halves(load32(at32(qs, 32 * c)), y_for_chunk(yv, 2 * c as i32, il));
            lo = _mm256_add_epi32(lo, l);
            hi = _mm256_add_epi32(hi, h);
        }
        rows4(lo, hi, il)
    }

    /// The exact integer dots of the four rows of one `block_q4_0x4` (interleave `il`, 4
    /// or 8, quants stored XOR 0x88) with one Q8_0 activation block: `sum_o (lo_o - 8) *
    /// y[o] + (hi_o - 8) * y[o + 16]` over the row's 16 plain bytes. Bounds: 32 products
    /// of at most 8 * 128 each.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(crate) fn q4_0x4_isums(qs: &[u8; 64], il: usize, y: &[u8; 32]) -> [i32; 4] {
        let yv = load32(y);
        let m4 = _mm256_set1_epi8(0x0F);
        let eight = _mm256_set1_epi8(8);
        let (mut lo, mut hi) = (_mm256_setzero_si256(), _mm256_setzero_si256());
        for c in 0..2 {
            let q = _mm256_xor_si256(load32(at32(qs, 32 * c)), _mm256_set1_epi8(0x88u8 as i8));
            let ql = _mm256_sub_epi8(_mm256_and_si256(q, m4), eight);
            let qh = _mm256_sub_epi8(_mm256_and_si256(_mm256_srli_epi16::<4>(q), m4), eight);
            let w = 2 * c as i32;
            for (v, yw) in [(ql, y_for_chunk(yv, w, il)), (qh, y_for_chunk(yv, w + 4, il))] {
                let (l, h) = madd_i8_halves(v, yw);
                lo = _mm256_add_epi32(lo, l);
                hi = _mm256_add_epi32(hi, h);
            }
        }
        rows4(lo, hi, il)
    }

    /// The 16 low and 16 high signed values of a Q4_0 block's nibbles, minus 8.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(crate) fn q4_0_halves(qs: &[u8; 16]) -> (__m128i, __m128i) {
        let q = load16(qs);
        let m4 = _mm_set1_epi8(0x0F);
        let eight = _mm_set1_epi8(8);
        let lo = _mm_sub_epi8(_mm_and_si128(q, m4), eight);
        let hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16::<4>(q), m4), eight);
        (lo, hi)
    }

    /// The two 16-byte halves of a Q8_0 block's values.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(crate) fn q8_halves(qs: &[u8; 32]) -> (__m128i, __m128i) {
        (load16(at16(qs, 0)), load16(at16(qs, 16)))
    }
}

/// NEON integer stages for the x86 lanes' twins on aarch64 hosts: the lanes of ggml's
/// AVX2 kernels (each 256-bit register's eight i32 lanes, lane `t` summing bytes
/// `4t..4t+4`), formed exactly from widening byte products (`smull`) and pairwise
/// additions. Every sum is of integer products inside i32 (bounds per function), so the
/// grouping does not matter; the AVX2 instructions' saturation cannot occur on these
/// operands (see [`x86`]), so the exact sums are theirs.
#[cfg(target_arch = "aarch64")]
pub(crate) mod neon {
    use core::arch::aarch64::*;

    /// The four sums of 4-byte groups of the byte products of `a` and `b` (16 signed
    /// bytes each): `[a0 b0 + .. + a3 b3, .., a12 b12 + .. + a15 b15]`.
    #[inline(always)]
    pub(crate) fn group4(a: int8x16_t, b: int8x16_t) -> int32x4_t {
        // SAFETY: NEON is part of every aarch64 CPU.
        unsafe {
            let lo = vpaddlq_s16(vmull_s8(vget_low_s8(a), vget_low_s8(b)));
            let hi = vpaddlq_s16(vmull_high_s8(a, b));
            vpaddq_s32(lo, hi)
        }
    }

    #[inline(always)]
    pub(crate) fn load16(b: &[u8], at: usize) -> int8x16_t {
        assert!(at + 16 <= b.len());
        // SAFETY: 16 readable bytes at `at` (checked above); the load is unaligned.
        unsafe { vld1q_s8(b.as_ptr().add(at).cast()) }
    }

    #[inline(always)]
    fn lanes(a: int32x4_t, b: int32x4_t) -> [i32; 8] {
        let mut out = [0i32; 8];
        // SAFETY: two stores of four i32 into `out`.
        unsafe {
            vst1q_s32(out.as_mut_ptr(), a);
            vst1q_s32(out.as_mut_ptr().add(4), b);
        }
        out
    }

    /// The eight lanes of [`x86::q4k_lanes`](super::x86): lane `t` sums bytes `4t..4t+4`
    /// of every 32-byte run `c` of `qs`, low nibbles against `y[64c..]` times `sc[2c]`,
    /// high nibbles against `y[64c + 32..]` times `sc[2c + 1]`. Bounds: a product at
    /// most 15 * 128, a scaled 4-byte group at most 4 * 1920 * 63, eight per lane.
    #[inline]
    pub(crate) fn q4k_lanes(qs: &[u8; 128], y: &[u8; 256], sc: &[u8; 8]) -> [i32; 8] {
        // SAFETY: NEON is part of every aarch64 CPU.
        unsafe {
            let m4 = vdupq_n_s8(0x0F);
            let (mut a0, mut a1) = (vdupq_n_s32(0), vdupq_n_s32(0));
            for c in 0..4 {
                let (q0, q1) = (load16(qs, 32 * c), load16(qs, 32 * c + 16));
                let lo = |q: int8x16_t| vandq_s8(q, m4);
                let hi =
                    |q: int8x16_t| vreinterpretq_s8_u8(vshrq_n_u8::<4>(vreinterpretq_u8_s8(q)));
                let (sl, sh) = (sc[2 * c] as i32, sc[2 * c + 1] as i32);
                a0 = vmlaq_n_s32(a0, group4(lo(q0), load16(y, 64 * c)), sl);
                a1 = vmlaq_n_s32(a1, group4(lo(q1), load16(y, 64 * c + 16)), sl);
                a0 = vmlaq_n_s32(a0, group4(hi(q0), load16(y, 64 * c + 32)), sh);
                a1 = vmlaq_n_s32(a1, group4(hi(q1), load16(y, 64 * c + 48)), sh);
            }
            lanes(a0, a1)
        }
    }

    /// The eight lanes of [`x86::q6k_lanes`](super::x86): lane `t` sums bytes `4t..4t+4`
    /// of every 32-value chunk (the unsigned 6-bit values, chunk `c` of half `j` at
    /// `128j + 32c`) times its group's signed scale (`sc[8j + 2c]` for bytes 0..16,
    /// `sc[8j + 2c + 1]` for 16..32). Bounds: a product at most 63 * 128, a scaled group
    /// 4 * 8064 * 128, eight per lane.
    #[inline]
    pub(crate) fn q6k_lanes(
        ql: &[u8; 128],
        qh: &[u8; 64],
        y: &[u8; 256],
        sc: &[u8; 16],
    ) -> [i32; 8] {
        // SAFETY: NEON is part of every aarch64 CPU.
        unsafe {
            let m4 = vdupq_n_u8(0x0F);
            let mut acc = [vdupq_n_s32(0), vdupq_n_s32(0)];
            for j in 0..2 {
                for (h, a) in acc.iter_mut().enumerate() {
                    let u = |v: int8x16_t| vreinterpretq_u8_s8(v);
                    let l0 = u(load16(ql, 64 * j + 16 * h));
                    let l1 = u(load16(ql, 64 * j + 32 + 16 * h));
                    let hb = u(load16(qh, 32 * j + 16 * h));
                    let q = [
                        vorrq_u8(vandq_u8(l0, m4), vshlq_n_u8::<4>(vandq_u8(hb, vdupq_n_u8(0x03)))),
                        vorrq_u8(vandq_u8(l1, m4), vshlq_n_u8::<2>(vandq_u8(hb, vdupq_n_u8(0x0C)))),
                        vorrq_u8(vshrq_n_u8::<4>(l0), vandq_u8(hb, vdupq_n_u8(0x30))),
                        vorrq_u8(
                            vshrq_n_u8::<4>(l1),
                            vshrq_n_u8::<2>(vandq_u8(hb, vdupq_n_u8(0xC0))),
                        ),
                    ];
                    for (c, qc) in q.into_iter().enumerate() {
                        let g =
                            group4(vreinterpretq_s8_u8(qc), load16(y, 128 * j + 32 * c + 16 * h));
                        *a = vmlaq_n_s32(*a, g, sc[8 * j + 2 * c + h] as i8 as i32);
                    }
                }
            }
            lanes(acc[0], acc[1])
        }
    }

    /// The eight lanes of [`x86::bsums_lanes`](super::x86): lane `t` is `bsum[2t] *
    /// sc[2t] + bsum[2t + 1] * sc[2t + 1]` over a Q8_K block's sixteen i16 group sums
    /// and sixteen signed scales (`|bsum| <= 16 * 128`, `|sc| <= 128`).
    #[inline]
    pub(crate) fn bsums_lanes(bsums: &[u8; 32], sc: &[u8; 16]) -> [i32; 8] {
        // SAFETY: NEON is part of every aarch64 CPU; 32 bytes of `bsums` and 16 of `sc`.
        unsafe {
            let b0 = vld1q_s16(bsums.as_ptr().cast());
            let b1 = vld1q_s16(bsums.as_ptr().add(16).cast());
            let s = vld1q_s8(sc.as_ptr().cast());
            let (s0, s1) = (vmovl_s8(vget_low_s8(s)), vmovl_high_s8(s));
            let half = |b: int16x8_t, s: int16x8_t| {
                vpaddq_s32(vmull_s16(vget_low_s16(b), vget_low_s16(s)), vmull_high_s16(b, s))
            };
            lanes(half(b0, s0), half(b1, s1))
        }
    }

    /// The eight lanes of [`x86::mul_sum_i8_lanes`](super::x86) on 32 signed bytes:
    /// lane `t` sums bytes `4t..4t+4` of `|x| * sign(y, x)` as the AVX2 instructions
    /// form them (`|-128|` is 128 as an unsigned byte; `sign(-128, x < 0)` wraps to
    /// -128), widened to i16 before multiplying (each product at most 128 * 128).
    #[inline]
    pub(crate) fn mul_sum_i8_lanes(x: &[u8; 32], y: &[u8; 32]) -> [i32; 8] {
        // SAFETY: NEON is part of every aarch64 CPU.
        unsafe {
            let mut out = [vdupq_n_s32(0), vdupq_n_s32(0)];
            for (h, o) in out.iter_mut().enumerate() {
                let (xv, yv) = (load16(x, 16 * h), load16(y, 16 * h));
                let ax = vreinterpretq_u8_s8(vabsq_s8(xv));
                let sy = vbslq_s8(vcltzq_s8(xv), vnegq_s8(yv), yv);
                let a16 = |u: uint8x8_t| vreinterpretq_s16_u16(vmovl_u8(u));
                let p_lo = vmulq_s16(a16(vget_low_u8(ax)), vmovl_s8(vget_low_s8(sy)));
                let p_hi = vmulq_s16(a16(vget_high_u8(ax)), vmovl_high_s8(sy));
                *o = vpaddq_s32(vpaddlq_s16(p_lo), vpaddlq_s16(p_hi));
            }
            lanes(out[0], out[1])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blocks::q4_k::scale_min_k4;

    /// Whether the AVX2 forms can be checked here. Without AVX2 the lanes never take
    /// them (the dispatch asserted below), so there is nothing to compare; under CI
    /// (`CI` set), whose machines have AVX2, that is a failure, not a pass.
    #[cfg(target_arch = "x86_64")]
    fn avx2_here() -> bool {
        assert!(x86_avx2() || !std::is_x86_feature_detected!("avx2"));
        if !x86_avx2() {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI is set but this host lacks AVX2: the accelerated forms cannot be checked"
            );
        }
        x86_avx2()
    }

    #[test]
    fn q4k_scales_mins_is_scale_min_k4() {
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..20000 {
            let mut q = [0u8; 12];
            for b in q.iter_mut() {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                *b = s as u8;
            }
            let (sc, mn) = q4k_scales_mins(&q);
            for j in 0..8 {
                assert_eq!((sc[j], mn[j]), scale_min_k4(j, &q), "{q:?} j={j}");
            }
        }
    }

    /// `q8_0x4_isums` and `q4_0x4_isums` against their definition, both interleaves, on
    /// random bytes and on extreme ones (-128 and 127 everywhere).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn x4_isums_are_their_definition() {
        use crate::repack::interleaved_index;
        if !avx2_here() {
            return;
        }
        let mut st = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            st ^= st << 13;
            st ^= st >> 7;
            st ^= st << 17;
            st as u8
        };
        for round in 0..2000 {
            let pick = |b: u8| match round % 4 {
                0 => 0x80,
                1 => 0x7F,
                _ => b,
            };
            let q8: [u8; 128] = core::array::from_fn(|_| pick(next()));
            let q4: [u8; 64] = core::array::from_fn(|_| pick(next()));
            let y: [u8; 32] = core::array::from_fn(|_| pick(next()));
            for il in [4, 8] {
                // SAFETY: AVX2 checked above.
                let got8 = unsafe { x86::q8_0x4_isums(&q8, il, &y) };
                // SAFETY: AVX2 checked above.
                let got4 = unsafe { x86::q4_0x4_isums(&q4, il, &y) };
                for r in 0..4 {
                    let want8: i32 = (0..32)
                        .map(|o| {
                            q8[interleaved_index(4, il, r, o)] as i8 as i32 * y[o] as i8 as i32
                        })
                        .sum();
                    let want4: i32 = (0..16)
                        .map(|o| {
                            let q = q4[interleaved_index(4, il, r, o)] ^ 0x88;
                            ((q & 0xF) as i32 - 8) * y[o] as i8 as i32
                                + ((q >> 4) as i32 - 8) * y[o + 16] as i8 as i32
                        })
                        .sum();
                    assert_eq!(got8[r], want8, "q8_0x4 il {il} row {r} round {round}");
                    assert_eq!(got4[r], want4, "q4_0x4 il {il} row {r} round {round}");
                }
            }
        }
    }

    /// `q4kx8_dots` against its definition on random bytes and on extreme ones (every
    /// nibble 15 against -128).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn q4kx8_dots_is_its_definition() {
        if !avx2_here() {
            return;
        }
        let mut rng = crate::rng::Rng::new(5);
        for round in 0..200 {
            let mut qs = [0u8; 1024];
            let mut y = [0u8; 256];
            rng.fill_bytes(&mut qs);
            rng.fill_bytes(&mut y);
            if round == 0 {
                (qs, y) = ([0xFF; 1024], [0x80; 256]);
            }
            for il in [4, 8] {
                // SAFETY: AVX2 detected above.
                let got = unsafe { x86::q4kx8_dots(&qs, &y, il) };
                for r in 0..8 {
                    for s in 0..8 {
                        let (c, high) = (s / 2, s % 2 == 1);
                        let want: i32 = (0..32)
                            .map(|l| {
                                let b = qs[crate::repack::interleaved_index(8, il, r, 32 * c + l)];
                                let n = if high { b >> 4 } else { b & 0xF };
                                n as i32 * y[64 * c + 32 * high as usize + l] as i8 as i32
                            })
                            .sum();
                        assert_eq!(got[s][r], want, "il={il} r={r} s={s}");
                    }
                }
            }
        }
    }

    /// `q6kx8_isums` against its definition (each row deinterleaved, its signed 6-bit
    /// values times the activations, by group times the group's scale) on random bytes and
    /// on extreme ones (every value 63 - 32 = 31 against -128, scales -128).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn q6kx8_isums_is_its_definition() {
        if !avx2_here() {
            return;
        }
        let mut rng = crate::rng::Rng::new(6);
        for round in 0..200 {
            let mut x: crate::repack::BlockQ6Kx8 = bytemuck::Zeroable::zeroed();
            rng.fill_bytes(bytemuck::bytes_of_mut(&mut x));
            let mut y = [0u8; 256];
            rng.fill_bytes(&mut y);
            if round == 0 {
                x.ql = [0xFF; 1024];
                x.qh = [0xFF; 512];
                x.scales = [0x80; 128];
                y = [0x80; 256];
            }
            let mut bsums = [0u8; 32];
            for g in 0..16 {
                let s: i16 = (0..16).map(|i| y[16 * g + i] as i8 as i16).sum();
                bsums[2 * g..2 * g + 2].copy_from_slice(&s.to_le_bytes());
            }
            for il in [4, 8] {
                // SAFETY: AVX2 detected above.
                let got = unsafe { x86::q6kx8_isums(&x, il, &y, &bsums) };
                for (r, &g) in got.iter().enumerate() {
                    let b = x.row(r, il);
                    let q = b.quants();
                    let want: i32 = (0..16)
                        .map(|grp| {
                            let dot: i32 = (16 * grp..16 * grp + 16)
                                .map(|i| q[i] as i32 * y[i] as i8 as i32)
                                .sum();
                            dot * b.scale(grp) as i32
                        })
                        .sum();
                    assert_eq!(g, want, "round {round} il={il} r={r}");
                }
            }
        }
    }

    #[test]
    fn with_scalar_turns_the_accelerated_forms_off_on_this_thread_only() {
        let on = x86_avx2();
        with_scalar(|| {
            assert!(!x86_avx2());
            assert_eq!(describe(), "scalar");
            std::thread::spawn(move || assert_eq!(x86_avx2(), on)).join().unwrap();
        });
        assert_eq!(x86_avx2(), on);
    }
}
