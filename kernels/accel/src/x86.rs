//! AVX2 integer stages. Each function needs AVX2 (the slots that use them are filled only
//! where the CPU has it).

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

/// The sum of the eight i32 lanes of `v` (wrapping).
#[inline]
#[target_feature(enable = "avx2")]
pub(crate) fn hsum_i32(v: __m256i) -> i32 {
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
pub(crate) fn q6k_lanes(ql: &[u8; 128], qh: &[u8; 64], y: &[u8; 256], sc: &[u8; 16]) -> __m256i {
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
    x: &tiercheck_core::repack::BlockQ6Kx8,
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
                lo = _mm256_add_epi32(lo, _mm256_madd_epi16(_mm256_maddubs_epi16(nl, yl), ones));
                hi = _mm256_add_epi32(hi, _mm256_madd_epi16(_mm256_maddubs_epi16(nh, yh), ones));
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
    let ml = _mm256_madd_epi16(_mm256_cvtepi8_epi16(xl), _mm256_cvtepi8_epi16(load16(at16(y, 0))));
    let mh = _mm256_madd_epi16(_mm256_cvtepi8_epi16(xh), _mm256_cvtepi8_epi16(load16(at16(y, 16))));
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
    let ml = _mm256_madd_epi16(_mm256_cvtepi8_epi16(xl), _mm256_cvtepi8_epi16(load16(at16(y, 0))));
    let mh = _mm256_madd_epi16(_mm256_cvtepi8_epi16(xh), _mm256_cvtepi8_epi16(load16(at16(y, 16))));
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
        _mm256_madd_epi16(w(_mm256_extracti128_si256::<1>(x)), w(_mm256_extracti128_si256::<1>(y))),
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
        let (l, h) = madd_i8_halves(load32(at32(qs, 32 * c)), y_for_chunk(yv, 2 * c as i32, il));
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
    let minus8: [i8; 16] = core::array::from_fn(|n| n as i8 - 8);
    nib4x4_isums(qs, il, y, 0x88, &minus8)
}

/// The exact integer dots of the four rows of one 4-row 32-value nibble block (`il` 4
/// or 8, quants stored XOR `flip`, each nibble's value by `table`: `block_q4_0x4`,
/// `block_iq4_nlx4`) with one Q8_0 activation block: `sum_o v(lo_o) * y[o] + v(hi_o) *
/// y[o + 16]` over the row's 16 plain bytes. Bounds: 32 products of at most 128 * 128.
#[inline]
#[target_feature(enable = "avx2")]
pub(crate) fn nib4x4_isums(
    qs: &[u8; 64],
    il: usize,
    y: &[u8; 32],
    flip: u8,
    table: &[i8; 16],
) -> [i32; 4] {
    let yv = load32(y);
    let m4 = _mm256_set1_epi8(0x0F);
    let table = table16(table);
    let (mut lo, mut hi) = (_mm256_setzero_si256(), _mm256_setzero_si256());
    for c in 0..2 {
        let q = _mm256_xor_si256(load32(at32(qs, 32 * c)), _mm256_set1_epi8(flip as i8));
        let ql = _mm256_shuffle_epi8(table, _mm256_and_si256(q, m4));
        let qh = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16::<4>(q), m4));
        let w = 2 * c as i32;
        for (v, yw) in [(ql, y_for_chunk(yv, w, il)), (qh, y_for_chunk(yv, w + 4, il))] {
            let (l, h) = madd_i8_halves(v, yw);
            lo = _mm256_add_epi32(lo, l);
            hi = _mm256_add_epi32(hi, h);
        }
    }
    rows4(lo, hi, il)
}

/// The 16 low and 16 high nibbles of 16 packed bytes, unsigned (0..15).
#[inline]
#[target_feature(enable = "avx2")]
pub(crate) fn nibble_halves(qs: &[u8; 16]) -> (__m128i, __m128i) {
    let q = load16(qs);
    let m4 = _mm_set1_epi8(0x0F);
    (_mm_and_si128(q, m4), _mm_and_si128(_mm_srli_epi16::<4>(q), m4))
}

/// The 16 low and 16 high signed values of a Q4_0 block's nibbles, minus 8.
#[inline]
#[target_feature(enable = "avx2")]
pub(crate) fn q4_0_halves(qs: &[u8; 16]) -> (__m128i, __m128i) {
    let (lo, hi) = nibble_halves(qs);
    let eight = _mm_set1_epi8(8);
    (_mm_sub_epi8(lo, eight), _mm_sub_epi8(hi, eight))
}

/// A 32-value block's nibbles in value order (the low nibbles of its 16 bytes, then the
/// high ones), unsigned.
#[inline]
#[target_feature(enable = "avx2")]
pub(crate) fn nibbles32(qs: &[u8; 16]) -> __m256i {
    let (lo, hi) = nibble_halves(qs);
    _mm256_set_m128i(hi, lo)
}

/// Byte i is 0xFF where bit i of the little-endian 32-bit `qh` is set, else 0: byte i
/// takes qh's byte i / 8 (a shuffle of the broadcast word; the upper 128-bit lane reads
/// the same four bytes) and keeps bit i % 8.
#[inline]
#[target_feature(enable = "avx2")]
pub(crate) fn bit_bytes32(qh: [u8; 4]) -> __m256i {
    let word = _mm256_set1_epi32(i32::from_le_bytes(qh));
    let pick =
        _mm256_set_epi64x(0x0303_0303_0303_0303, 0x0202_0202_0202_0202, 0x0101_0101_0101_0101, 0);
    let bit = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
    let sel = _mm256_and_si256(_mm256_shuffle_epi8(word, pick), bit);
    _mm256_cmpeq_epi8(sel, bit)
}

/// The eight lanes of `madd(1, maddubs(u, y))` for unsigned codes `u` of at most 5 bits
/// against signed bytes `y`: lane t sums bytes 4t..4t+3 (no pair saturates: 2 * 31 *
/// 128 < 32767).
#[inline]
#[target_feature(enable = "avx2")]
pub(crate) fn unsigned_lanes(u: __m256i, y: __m256i) -> __m256i {
    _mm256_madd_epi16(_mm256_set1_epi16(1), _mm256_maddubs_epi16(u, y))
}

/// The exact sum of the 32 products of signed bytes x and y (widened to i16 first, so
/// no `sign` wrap-around: the scalar loops' sum).
#[inline]
#[target_feature(enable = "avx2")]
pub(crate) fn dot_i8_exact(x: __m256i, y: __m256i) -> i32 {
    let (a, b) = madd_i8_halves(x, y);
    hsum_i32(_mm256_add_epi32(a, b))
}

/// The 16 signed IQ4_NL table values of `table` broadcast to both 128-bit lanes, for a
/// byte shuffle by 4-bit codes.
#[inline]
#[target_feature(enable = "avx2")]
pub(crate) fn table16(table: &[i8; 16]) -> __m256i {
    // SAFETY: `table` is 16 readable bytes; the load is unaligned.
    let t = unsafe { _mm_loadu_si128(table.as_ptr() as *const __m128i) };
    _mm256_set_m128i(t, t)
}

/// The two 16-byte halves of a Q8_0 block's values.
#[inline]
#[target_feature(enable = "avx2")]
pub(crate) fn q8_halves(qs: &[u8; 32]) -> (__m128i, __m128i) {
    (load16(at16(qs, 0)), load16(at16(qs, 16)))
}

/// `(v >> s) & mask` per byte for a shift `s` with `s + width(mask) <= 8` (the 16-bit
/// shift's bits from the neighbouring byte land above the mask).
#[inline]
#[target_feature(enable = "avx2")]
fn bits_at(v: __m256i, s: usize, mask: i8) -> __m256i {
    let count = _mm_cvtsi32_si128(s as i32);
    _mm256_and_si256(_mm256_srl_epi16(v, count), _mm256_set1_epi8(mask))
}

/// `madd(p, scales)` on the i16 pair sums `p` of one 32-byte run: bytes 0..16 times
/// `lo`, bytes 16..32 times `hi`; lane t sums bytes 4t..4t+3.
#[inline]
#[target_feature(enable = "avx2")]
fn scaled_run(p: __m256i, lo: i16, hi: i16) -> __m256i {
    _mm256_madd_epi16(p, _mm256_set_m128i(_mm_set1_epi16(hi), _mm_set1_epi16(lo)))
}

/// The 2-bit fields of run `r` (values 32r..32r+32) of a Q2_K/Q3_K `qs` array: byte l
/// is `(qs[32 * (r / 4) + l] >> (2 * (r % 4))) & 3` (`blocks::q2_k::crumb`).
#[inline]
#[target_feature(enable = "avx2")]
fn crumbs32(qs: &[u8; 64], r: usize) -> __m256i {
    bits_at(load32(at32(qs, 32 * (r / 4))), 2 * (r % 4), 3)
}

/// The eight lanes of one Q2_K superblock as ggml's AVX2 kernel forms them: lane t sums,
/// over the eight 32-value runs, bytes 4t..4t+3 of `code * y` times the 4-bit scale of
/// their 16-value sub-block (`sc[s] & 0xF`). Bounds: a `maddubs` pair at most 2 * 3 *
/// 128, a run's lane at most 2 * 768 * 15.
#[inline]
#[target_feature(enable = "avx2")]
pub(crate) fn q2k_lanes(qs: &[u8; 64], sc: &[u8; 16], y: &[u8; 256]) -> __m256i {
    // The 4-bit scales in both 128-bit lanes; run r's i16 scale vector (sub-block 2r in
    // the low lane, 2r + 1 in the high one) by one byte shuffle: even bytes pick scale
    // byte 2r (+1 in the high lane), odd bytes 0x80 (zero).
    let scales = _mm256_broadcastsi128_si256(_mm_and_si128(load16(sc), _mm_set1_epi8(0x0F)));
    let pick = _mm256_set_m128i(_mm_set1_epi16(0x8001u16 as i16), _mm_set1_epi16(0x8000u16 as i16));
    let mut acc = _mm256_setzero_si256();
    for r in 0..8 {
        let p = _mm256_maddubs_epi16(crumbs32(qs, r), load32(at32(y, 32 * r)));
        let at = _mm256_add_epi8(pick, _mm256_set1_epi16(2 * r as i16));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, _mm256_shuffle_epi8(scales, at)));
    }
    acc
}

/// The eight lanes of one Q3_K superblock as ggml's AVX2 kernel forms them:
/// `maddubs(low 2 bits, y) - maddubs(4 where the high bit is clear, y)` per run (codes
/// -4..3; bit r of `hmask[l]` is value 32r + l's), times the signed scales `sc` of its
/// 16-value sub-blocks. Bounds: a pair at most 2 * 4 * 128, a run's lane at most 2 *
/// 1024 * 32.
#[inline]
#[target_feature(enable = "avx2")]
pub(crate) fn q3k_lanes(qs: &[u8; 64], hmask: &[u8; 32], sc: &[i16; 16], y: &[u8; 256]) -> __m256i {
    let (one, hm) = (_mm256_set1_epi8(1), load32(hmask));
    let mut acc = _mm256_setzero_si256();
    for r in 0..8 {
        let yv = load32(at32(y, 32 * r));
        let four = _mm256_slli_epi16::<2>(_mm256_xor_si256(bits_at(hm, r, 1), one));
        let p = _mm256_sub_epi16(
            _mm256_maddubs_epi16(crumbs32(qs, r), yv),
            _mm256_maddubs_epi16(four, yv),
        );
        acc = _mm256_add_epi32(acc, scaled_run(p, sc[2 * r], sc[2 * r + 1]));
    }
    acc
}

/// The eight lanes of one Q5_K superblock as ggml's AVX2 kernel forms them: codes of
/// run s (sub-block s) the nibbles `(qs[32 * (s / 2) + l] >> 4 * (s % 2)) & 15` with bit
/// s of `qh[l]` as bit 4, `maddubs` against the activations, times `sc[s]`. Bounds: a
/// pair at most 2 * 31 * 128, a run's lane at most 2 * 7936 * 63.
#[inline]
#[target_feature(enable = "avx2")]
pub(crate) fn q5k_lanes(qs: &[u8; 128], qh: &[u8; 32], sc: &[u8; 8], y: &[u8; 256]) -> __m256i {
    let hv = load32(qh);
    let mut acc = _mm256_setzero_si256();
    for s in 0..8 {
        let low = bits_at(load32(at32(qs, 32 * (s / 2))), 4 * (s % 2), 0x0F);
        let code = _mm256_or_si256(low, _mm256_slli_epi16::<4>(bits_at(hv, s, 1)));
        let p = _mm256_maddubs_epi16(code, load32(at32(y, 32 * s)));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, _mm256_set1_epi16(sc[s] as i16)));
    }
    acc
}

/// The IQ4_NL/IQ4_XS table values of the 32 codes of sub-block `s` of an IQ4_XS `qs`
/// array (low nibbles of `qs[16s..16s+16]`, then their high nibbles).
#[inline]
#[target_feature(enable = "avx2")]
fn iq4xs_values(table: __m256i, qs: &[u8; 128], s: usize) -> __m256i {
    _mm256_shuffle_epi8(table, nibbles32(at16(qs, 16 * s)))
}

/// The eight lanes of one IQ4_XS superblock as ggml's AVX2 kernel forms them: per
/// sub-block s [`mul_sum_i8_lanes`] of its table values against the activations (the
/// tier's `sign` wrap-around included), times `ls[s]`, summed. Bounds: a lane of a
/// sub-block at most 4 * 128 * 128, times |ls| <= 32.
#[inline]
#[target_feature(enable = "avx2")]
pub(crate) fn iq4xs_lanes(qs: &[u8; 128], ls: &[i32; 8], y: &[u8; 256]) -> __m256i {
    let table = table16(&tiercheck_core::blocks::iq4_nl::KVALUES_IQ4NL);
    let mut acc = _mm256_setzero_si256();
    for (s, &l) in ls.iter().enumerate() {
        let lanes = mul_sum_i8_lanes(iq4xs_values(table, qs, s), load32(at32(y, 32 * s)));
        acc = _mm256_add_epi32(acc, _mm256_mullo_epi32(lanes, _mm256_set1_epi32(l)));
    }
    acc
}

/// `sum_s ls[s] * (sub-block s's table values . activations)` of one IQ4_XS superblock,
/// the products exact (widened to i16 first: no `sign` wrap-around). Bounds as
/// [`iq4xs_lanes`].
#[inline]
#[target_feature(enable = "avx2")]
pub(crate) fn iq4xs_isum(qs: &[u8; 128], ls: &[i32; 8], y: &[u8; 256]) -> i32 {
    let table = table16(&tiercheck_core::blocks::iq4_nl::KVALUES_IQ4NL);
    let mut acc = _mm256_setzero_si256();
    for (s, &l) in ls.iter().enumerate() {
        let (a, b) = madd_i8_halves(iq4xs_values(table, qs, s), load32(at32(y, 32 * s)));
        let lanes = _mm256_add_epi32(a, b);
        acc = _mm256_add_epi32(acc, _mm256_mullo_epi32(lanes, _mm256_set1_epi32(l)));
    }
    hsum_i32(acc)
}

/// The eight rows' sums of one 8-row, 8-byte-interleaved 32-value block (`block_q4_0x8`,
/// `block_iq4_nlx8`: plain byte o of row r at `64 * (o / 8) + 8r + o % 8`, stored XOR
/// `flip`) against one Q8_0 block's values `y`, each nibble mapped by `table`: per row
/// the products `|x| * sign(y, x)` of [`mul_sum_i8_lanes`] (the tier's `sign`
/// wrap-around of -128 included), low nibbles against `y[o]`, high ones against
/// `y[o + 16]`; the rows in order. Bounds: a `maddubs` pair at most 2 * 127 * 128.
#[inline]
#[target_feature(enable = "avx2")]
pub(crate) fn b32x8_isums(qs: &[u8; 128], flip: u8, table: __m256i, y: &[u8; 32]) -> __m256i {
    let m4 = _mm256_set1_epi8(0x0F);
    let y8 = |o: usize| _mm256_set1_epi64x(i64::from_le_bytes(y[o..o + 8].try_into().expect("8")));
    // Load c holds bytes 8 * (c / 2)..+8 of rows 4 * (c % 2)..+4, lanes 2q and 2q + 1 row q.
    let mut half = [_mm256_setzero_si256(); 2];
    for c in 0..4 {
        let q = _mm256_xor_si256(load32(at32(qs, 32 * c)), _mm256_set1_epi8(flip as i8));
        let lo = _mm256_shuffle_epi8(table, _mm256_and_si256(q, m4));
        let hi = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16::<4>(q), m4));
        let o = 8 * (c / 2);
        let s = _mm256_add_epi32(mul_sum_i8_lanes(lo, y8(o)), mul_sum_i8_lanes(hi, y8(o + 16)));
        half[c % 2] = _mm256_add_epi32(half[c % 2], s);
    }
    // hadd: rows (0, 1, 4, 5 | 2, 3, 6, 7); the 64-bit permutation puts them in order.
    _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_hadd_epi32(half[0], half[1]))
}

/// The sub-block dots of the eight rows of one `block_q5_Kx8` (interleave `il`, 4 or 8,
/// for `qs` and `qh` alike) against one Q8_K block: `dot[s][r]` = [`q4kx8_dots`]'s nibble
/// dot plus 16 times the sum of the activations whose value has its high bit set (bit s
/// of row r's plain `qh` byte l for value 32s + l). Bounds: a sub-block dot at most 32 *
/// 31 * 128.
#[inline]
#[target_feature(enable = "avx2")]
pub(crate) fn q5kx8_dots(
    qs: &[u8; 1024],
    qh: &[u8; 256],
    y: &[u8; 256],
    il: usize,
) -> [[i32; 8]; 8] {
    let mut dot = q4kx8_dots(qs, y, il);
    let ones = _mm256_set1_epi16(1);
    let y4 = |o: usize| i32::from_le_bytes([y[o], y[o + 1], y[o + 2], y[o + 3]]);
    let y8 = |o: usize| i64::from_le_bytes(y[o..o + 8].try_into().expect("8 bytes"));
    let sum = |bits: __m256i, yv: __m256i| _mm256_madd_epi16(_mm256_maddubs_epi16(bits, yv), ones);
    for (s, d) in dot.iter_mut().enumerate() {
        let hsum = if il == 4 {
            // Load t: plain qh bytes 4t..4t+4 of all eight rows (row r at bytes 4r..4r+4).
            let mut acc = _mm256_setzero_si256();
            for t in 0..8 {
                let bits = bits_at(load32(at32(qh, 32 * t)), s, 1);
                acc = _mm256_add_epi32(acc, sum(bits, _mm256_set1_epi32(y4(32 * s + 4 * t))));
            }
            acc
        } else {
            // Loads (t, h): plain qh bytes 8t..8t+8 of rows 4h..4h+4; row 4h + q in lanes
            // 2q, 2q + 1 of acc[h], put in order as in `q4kx8_dots`.
            let mut acc = [_mm256_setzero_si256(); 2];
            for t in 0..4 {
                let yv = _mm256_set1_epi64x(y8(32 * s + 8 * t));
                for (h, a) in acc.iter_mut().enumerate() {
                    let bits = bits_at(load32(at32(qh, 64 * t + 32 * h)), s, 1);
                    *a = _mm256_add_epi32(*a, sum(bits, yv));
                }
            }
            let order = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
            _mm256_permutevar8x32_epi32(_mm256_hadd_epi32(acc[0], acc[1]), order)
        };
        let mut h = [0i32; 8];
        // SAFETY: `h` holds eight i32; the store is unaligned.
        unsafe { _mm256_storeu_si256(h.as_mut_ptr() as *mut __m256i, hsum) };
        for r in 0..8 {
            d[r] += 16 * h[r];
        }
    }
    dot
}

/// A Q4_1/Q5_1 block's f16 `d` and `m` and a Q8_1 block's `d` and `s`, widened by one
/// `vcvtph2ps` (exact): `[d_x, m_x, d_y, s_y]`.
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(crate) fn heads4(xd: [u8; 2], xm: [u8; 2], yd: [u8; 2], ys: [u8; 2]) -> [f32; 4] {
    let w = u64::from_le_bytes([xd[0], xd[1], xm[0], xm[1], yd[0], yd[1], ys[0], ys[1]]);
    let v = _mm_cvtph_ps(_mm_cvtsi64_si128(w as i64));
    let mut out = [0.0f32; 4];
    // SAFETY: `out` holds four floats; the store is unaligned.
    unsafe { _mm_storeu_ps(out.as_mut_ptr(), v) };
    out
}

/// Two f16 fields widened by one `vcvtph2ps` (exact).
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(crate) fn halves2(a: [u8; 2], b: [u8; 2]) -> (f32, f32) {
    let v = _mm_cvtph_ps(_mm_cvtsi32_si128(i32::from_le_bytes([a[0], a[1], b[0], b[1]])));
    (_mm_cvtss_f32(v), _mm_cvtss_f32(_mm_shuffle_ps::<1>(v, v)))
}
