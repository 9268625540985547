//! Tests of the MMVQ twins: the q8_1 quantizer against an f64 reference and hand-checked
//! cases, every vec_dot and gemv against the exact dot product of the dequantized
//! operands within a rigorous rounding-error bound, the wave32/wave64 order difference,
//! and a cross-check with the CPU q8_1 / q8_0 quantizers.
//!
//! Error bounds (no underflow: every scale below is a normal number): a result formed
//! from exact terms t_j, where each term passes through at most n roundings (products
//! and sums; an fma is one rounding, so the unfused count bounds both forms), satisfies
//! |computed - sum t_j| <= gamma_n * sum |t_j| with gamma_n = n u / (1 - n u), u = 2^-24.

use super::*;
use crate::arch::generic::vec_dot::q4_k_values;
use crate::blocks::q4_k::scale_min_k4;
use crate::blocks::{dequantize, BlockQ4K, BlockQ6K, BlockQ8_0, BlockQ8_1, QK, QK_K};
use crate::fp16::{f16_bits_to_f32, f32_to_f16_bits, round_to_f16};
use crate::quant::ActRule;
use crate::GgmlType;

const U: f64 = 1.0 / 16_777_216.0; // 2^-24

fn gamma(n: usize) -> f64 {
    let nu = n as f64 * U;
    nu / (1.0 - nu)
}

/// Test inputs from the project's seeded generator ([`crate::rng::Rng`]).
struct Rng {
    g: crate::rng::Rng,
}
#[allow(non_snake_case)]
fn Rng(seed: u64) -> Rng {
    Rng { g: crate::rng::Rng::new(seed) }
}
impl Rng {
    fn u64(&mut self) -> u64 {
        self.g.next_u64()
    }
    fn u8(&mut self) -> u8 {
        (self.u64() >> 56) as u8
    }
    fn below(&mut self, n: u64) -> u64 {
        (self.u64() >> 11) % n
    }
    /// Uniform in [-1, 1).
    fn sym(&mut self) -> f32 {
        ((self.u64() >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
    fn fill(&mut self, out: &mut [u8]) {
        out.iter_mut().for_each(|b| *b = self.u8());
    }
    /// A normal f16 scale in [2^lo, 2^hi).
    fn half(&mut self, lo: i32, hi: i32) -> [u8; 2] {
        let e = lo + self.below((hi - lo) as u64) as i32;
        let v = 2f32.powi(e) * (1.0 + (self.below(1024) as f32) / 1024.0);
        f32_to_f16_bits(v).to_le_bytes()
    }
    /// An activation row: per 32-block a random magnitude, sometimes an outlier,
    /// sometimes an all-zero block.
    fn activations(&mut self, k: usize) -> Vec<f32> {
        let mut x = vec![0.0f32; k];
        for b in x.chunks_mut(QK) {
            match self.below(16) {
                0 => continue, // all zero
                _ => {
                    let s = 2f32.powi(self.below(12) as i32 - 7);
                    b.iter_mut().for_each(|v| *v = s * self.sym());
                    if self.below(4) == 0 {
                        let j = self.below(QK as u64) as usize;
                        b[j] *= 16.0;
                    }
                }
            }
        }
        x
    }
}

fn random_q4_k(r: &mut Rng) -> BlockQ4K {
    let mut b: BlockQ4K = bytemuck::Zeroable::zeroed();
    b.d = r.half(-12, -4);
    b.dmin = r.half(-12, -4);
    r.fill(&mut b.scales);
    r.fill(&mut b.qs);
    b
}

fn random_q6_k(r: &mut Rng) -> BlockQ6K {
    let mut b: BlockQ6K = bytemuck::Zeroable::zeroed();
    r.fill(&mut b.ql);
    r.fill(&mut b.qh);
    r.fill(&mut b.scales);
    b.d = r.half(-12, -4);
    b
}

fn random_q8_0(r: &mut Rng) -> BlockQ8_0 {
    let mut b: BlockQ8_0 = bytemuck::Zeroable::zeroed();
    r.fill(&mut b.qs);
    b.d = r.half(-12, -4);
    b
}

/// A random weight row of `k` values as bytes.
fn random_row(r: &mut Rng, ty: GgmlType, k: usize) -> Vec<u8> {
    let n = k / ty.block_size();
    match ty {
        GgmlType::Q4_K => {
            let v: Vec<BlockQ4K> = (0..n).map(|_| random_q4_k(r)).collect();
            bytemuck::cast_slice(&v).to_vec()
        }
        GgmlType::Q6_K => {
            let v: Vec<BlockQ6K> = (0..n).map(|_| random_q6_k(r)).collect();
            bytemuck::cast_slice(&v).to_vec()
        }
        _ => {
            let v: Vec<BlockQ8_0> = (0..n).map(|_| random_q8_0(r)).collect();
            bytemuck::cast_slice(&v).to_vec()
        }
    }
}

/// Per value of a weight row, in value order: the exact weight (f64) and the sum of
/// the absolute values of its parts (`|d sc q| + |dmin m|` for q4_K), from the block
/// fields directly, independent of the kernels.
fn exact_weights(ty: GgmlType, row: &[u8]) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    match ty {
        GgmlType::Q4_K => {
            for b in bytemuck::cast_slice::<u8, BlockQ4K>(row) {
                let q = q4_k_values(b);
                let (d, dmin) = (b.d() as f64, b.dmin() as f64);
                for (v, &qv) in q.iter().enumerate() {
                    let (sc, m) = scale_min_k4(v / 32, &b.scales);
                    let p = d * sc as f64 * qv as f64;
                    let n = dmin * m as f64;
                    out.push((p - n, p.abs() + n.abs()));
                }
            }
        }
        GgmlType::Q6_K => {
            for b in bytemuck::cast_slice::<u8, BlockQ6K>(row) {
                let q = b.quants();
                for (v, &qv) in q.iter().enumerate() {
                    let w = b.d() as f64 * b.scale(v / 16) as f64 * qv as f64;
                    out.push((w, w.abs()));
                }
            }
        }
        _ => {
            for b in bytemuck::cast_slice::<u8, BlockQ8_0>(row) {
                for j in 0..QK {
                    let w = b.d() as f64 * b.q(j) as f64;
                    out.push((w, w.abs()));
                }
            }
        }
    }
    out
}

/// The dequantized q8_1 activations (q * d, exact).
fn act_values(act: &[BlockQ8_1]) -> Vec<f64> {
    let mut a = vec![0.0f32; act.len() * QK];
    dequantize(GgmlType::Q8_1, bytemuck::cast_slice(act), &mut a).unwrap();
    a.into_iter().map(f64::from).collect()
}

/// Roundings along the longest path of one vec_dot call, unfused.
fn call_depth(ty: GgmlType) -> usize {
    match ty {
        GgmlType::Q4_K => 4, // d8*X, +, dm.x*, -
        GgmlType::Q6_K => 3, // d8*Y, +, d*
        _ => 2,              // d_x*d_y, *sumi
    }
}

fn qk_qi_vdr(ty: GgmlType) -> (usize, usize, usize) {
    match ty {
        GgmlType::Q4_K => (256, 32, 2),
        GgmlType::Q6_K => (256, 32, 1),
        _ => (32, 8, 2),
    }
}

/// Checks one gemv against the exact dot product of the dequantized operands (the
/// crate's dequantizers). Returns the gemv value.
fn check_gemv(
    ty: GgmlType,
    row: &[u8],
    act: &[BlockQ8_1],
    warp: usize,
    nwarps: usize,
    c: Contraction,
) -> f32 {
    let v = mmvq_gemv(ty, row, act, warp, nwarps, c).unwrap();
    let k = act.len() * QK;
    let mut w = vec![0.0f32; k];
    dequantize(ty, row, &mut w).unwrap();
    let a = act_values(act);
    let exact = exact_weights(ty, row);
    let e_deq: f64 = w.iter().zip(&a).map(|(&w, &a)| w as f64 * a).sum();
    let e_exact: f64 = exact.iter().zip(&a).map(|(&(w, _), &a)| w * a).sum();
    let s: f64 = exact.iter().zip(&a).map(|(&(_, abs), &a)| abs * a.abs()).sum();
    // f64 summation of k exact products.
    let f64_err = k as f64 * 2f64.powi(-52) * s;
    // The dequantizers round each weight at most once (q4_K: d1*q - m1 with exact
    // products; q6_K: (d*sc)*q with d*sc exact; q8_0 exact).
    let deq_err = U * s;
    assert!((e_deq - e_exact).abs() <= deq_err + 2.0 * f64_err, "{ty} dequantizer error");

    let (qk, qi, vdr) = qk_qi_vdr(ty);
    let blocks = k / qk;
    let per_iter = vdr * nwarps * warp / qi;
    let calls = blocks.div_ceil(per_iter);
    let n = call_depth(ty) + calls + (nwarps - 1) + warp.trailing_zeros() as usize;
    let bound = gamma(n) * s + deq_err + f64_err;
    let err = (v as f64 - e_deq).abs();
    assert!(
        err <= bound,
        "{ty} k={k} warp={warp} nwarps={nwarps} {c:?}: |{v:e} - {e_deq:e}| = {err:e} > {bound:e}"
    );
    v
}

#[test]
fn gpu_butterfly_sum_is_the_halving_tree_and_every_lane_agrees() {
    let mut r = Rng(0x1234_5678_9ABC_DEF1);
    for width in [32usize, 64] {
        for _ in 0..2000 {
            let x: Vec<f32> =
                (0..width).map(|_| r.sym() * 2f32.powi(r.below(40) as i32 - 20)).collect();
            let mut lanes = x.clone();
            let got = butterfly_sum(&mut lanes);
            // Lane 0: at offset `off`, lane i (< off) adds lane i + off.
            let mut h = x.clone();
            let mut off = width / 2;
            while off > 0 {
                for i in 0..off {
                    h[i] += h[i + off];
                }
                off /= 2;
            }
            assert_eq!(got.to_bits(), h[0].to_bits());
            assert!(lanes.iter().all(|l| l.to_bits() == got.to_bits()));
        }
    }
}

/// Every code of `b` is the exact quotient `x / d` rounded half away from zero, unless
/// that quotient lies within `ulps` f32 rounding units of a .5 boundary (or 0 when
/// `amax == 0`).
fn check_codes(xb: &[f32], b: &BlockQ8_1, amax: f32, d: f32, ulps: f64) {
    for (j, &v) in xb.iter().enumerate() {
        let q = b.qs[j] as i8 as i32;
        if amax == 0.0 {
            assert_eq!(q, 0);
            continue;
        }
        let t = v as f64 / d as f64;
        assert!(t.abs() <= 127.0 + 1e-4);
        let want = t.round() as i32; // f64::round is half away from zero
        if q != want {
            let dist = (t.abs().fract() - 0.5).abs();
            assert!(dist <= ulps * U * t.abs(), "x={v} d={d} q={q} want={want}");
        }
    }
}

#[test]
fn gpu_q8_1_quantizer_matches_an_f64_reference() {
    let mut r = Rng(0xDEAD_BEEF_0BAD_F00D);
    for _ in 0..200 {
        let x = r.activations(1024);
        let y = quantize_q8_1_mmvq(&x);
        assert_eq!(y.len(), 1024 / QK);
        for (xb, b) in x.chunks(QK).zip(&y) {
            let amax = xb.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            // d: one correctly rounded f32 division, then f16 nearest-even.
            let d = amax / 127.0;
            assert!((d as f64 - amax as f64 / 127.0).abs() <= U * amax as f64 / 127.0);
            assert_eq!(u16::from_le_bytes(b.d), f32_to_f16_bits(d));
            // s: the f64 sum within the 5-level tree's error, then f16.
            let exact: f64 = xb.iter().map(|&v| v as f64).sum();
            let abs: f64 = xb.iter().map(|&v| (v as f64).abs()).sum();
            let tree_err = gamma(5) * abs;
            let s = b.s() as f64;
            let ulp16 = |v: f64| 2f64.powi(v.abs().max(2f64.powi(-14)).log2().floor() as i32 - 10);
            assert!(
                (s - exact).abs() <= tree_err + ulp16(exact.abs() + tree_err) / 2.0,
                "s = {s}, exact {exact}"
            );
            // q: round half away of the f32 quotient; equal to rounding the exact
            // quotient unless that lies within an f32 ulp of a .5 boundary.
            check_codes(xb, b, amax, d, 2.0);
        }
    }
}

#[test]
fn gpu_q8_1_quantizer_hand_checked_cases() {
    let d16 = |b: &BlockQ8_1| u16::from_le_bytes(b.d);
    let s16 = |b: &BlockQ8_1| u16::from_le_bytes(b.s);
    let qs = |b: &BlockQ8_1| -> Vec<i8> { b.qs.iter().map(|&q| q as i8).collect() };

    // amax = 127 -> d = 1 exactly, so x / d = x: ties at .5 go away from zero.
    let mut x = [0.0f32; QK];
    let vals = [2.5f32, -2.5, 0.5, -0.5, 1.5, -1.5, 126.5, -126.5, 127.0, -3.5, 0.49999997];
    x[..vals.len()].copy_from_slice(&vals);
    let b = quantize_q8_1_mmvq(&x)[0];
    assert_eq!(d16(&b), 0x3C00);
    assert_eq!(&qs(&b)[..vals.len()], &[3, -3, 1, -1, 2, -2, 127, -127, 127, -4, 0]);
    // The tree adds lane 2 (0.5) and lane 10 (0.5 - 2^-25) at offset 8: 1 - 2^-25 is
    // a tie in f32 and rounds to 1.0, and the remaining sums are exact: s = 124.
    assert_eq!(0.5f32 + 0.49999997, 1.0);
    assert_eq!(f16_bits_to_f32(s16(&b)), 124.0);

    // amax == 0: d = 0, q = 0; the sum of +0 is +0, the sum of -0 is -0.
    let b = quantize_q8_1_mmvq(&[0.0f32; QK])[0];
    assert_eq!((d16(&b), s16(&b)), (0x0000, 0x0000));
    assert!(qs(&b).iter().all(|&q| q == 0));
    let b = quantize_q8_1_mmvq(&[-0.0f32; QK])[0];
    assert_eq!((d16(&b), s16(&b)), (0x0000, 0x8000));
    assert!(qs(&b).iter().all(|&q| q == 0));

    // f16 rounding of d: d = 1 + 2^-11 is a tie between 1 and 1 + 2^-10 -> even (1);
    // d = 1 + 3*2^-11 ties between 1 + 2^-10 and 1 + 2^-9 -> even (1 + 2^-9).
    for (m, want) in [(2049.0f32, 0x3C00u16), (2051.0, 0x3C02)] {
        let amax = 127.0 * m / 2048.0; // exact in f32
        assert_eq!(amax / 127.0, m / 2048.0);
        let mut x = [0.0f32; QK];
        x[7] = -amax;
        let b = quantize_q8_1_mmvq(&x)[0];
        assert_eq!(d16(&b), want, "amax {amax}");
        assert_eq!(b.qs[7] as i8, -127);
    }

    // f16 rounding of s: 2049 ties between 2048 and 2050 -> 2048 (even); 2051 -> 2052.
    for (last, want) in [(65.0f32, 0x6800u16), (67.0, 0x6802)] {
        let mut x = [64.0f32; QK];
        x[31] = last;
        let b = quantize_q8_1_mmvq(&x)[0];
        assert_eq!(s16(&b), want);
        assert_eq!(b.qs[31] as i8, 127);
        assert_eq!(b.qs[0] as i8, (64.0 / (last / 127.0)).round() as i8);
    }

    // The butterfly pairs lane i with lane i+16 first: 1e8 and -1e8 cancel before the
    // ones are added, so s = 30; a left-to-right sum would lose x1..x15 (1e8 + 1 = 1e8)
    // and give 15.
    let mut x = [1.0f32; QK];
    x[0] = 1.0e8;
    x[16] = -1.0e8;
    let b = quantize_q8_1_mmvq(&x)[0];
    assert_eq!(f16_bits_to_f32(s16(&b)), 30.0);
    assert_eq!(x.iter().fold(0.0f32, |a, &v| a + v), 15.0);

    // A partial final block is padded with zeros.
    let x: Vec<f32> = (0..40).map(|i| i as f32 - 20.0).collect();
    let y = quantize_q8_1_mmvq(&x);
    assert_eq!(y.len(), 2);
    let mut padded = [0.0f32; QK];
    padded[..8].copy_from_slice(&x[32..]);
    assert_eq!(y[1], quantize_q8_1_mmvq(&padded)[0]);
}

#[test]
fn gpu_q4_k_branchless_scale_decode_matches_get_scale_min_k4() {
    let mut r = Rng(77);
    for _ in 0..20_000 {
        let mut s = [0u8; 12];
        r.fill(&mut s);
        for j in 0..4 {
            let (sc, m) = vecdotq::q4_k_scales_for_chunk(&s, j);
            for i in 0..2 {
                assert_eq!((sc[i], m[i]), scale_min_k4(2 * j + i, &s), "j={j} i={i}");
            }
        }
    }
}

/// The values one vec_dot call covers, from the layout described in the module docs
/// (value order, independent of the kernels' byte indexing): indices into the block's
/// values, each with the q8_1 block it meets.
fn call_values(ty: GgmlType, iqs: usize) -> Vec<usize> {
    match ty {
        GgmlType::Q4_K => {
            let (c, r) = (iqs / 8, 4 * ((iqs / 2) % 4));
            let mut v = Vec::new();
            for i in 0..2 {
                for base in [r, 16 + r] {
                    v.extend((0..4).map(|t| 64 * c + 32 * i + base + t));
                }
            }
            v
        }
        GgmlType::Q6_K => {
            let (n, t) = (iqs / 16, iqs % 16);
            let l0 = 4 * (t % 8);
            let first = if t < 8 { 0 } else { 32 };
            let mut v: Vec<usize> = (0..4).map(|k| 128 * n + first + l0 + k).collect();
            v.extend((0..4).map(|k| 128 * n + first + 64 + l0 + k));
            v
        }
        _ => (4 * iqs..4 * iqs + 8).collect(),
    }
}

#[test]
fn gpu_vec_dots_cover_their_values_exactly_once_within_bound() {
    let mut r = Rng(0x0F0F_1234_5555_AAAA);
    for ty in [GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0] {
        let (qk, qi, vdr) = qk_qi_vdr(ty);
        let calls: Vec<usize> = (0..qi / vdr).map(|t| vdr * t).collect();
        for round in 0..400 {
            let row = random_row(&mut r, ty, qk);
            let act = quantize_q8_1_mmvq(&r.activations(qk));
            let exact = exact_weights(ty, &row);
            let a = act_values(&act);
            // Coverage: every value of the block exactly once over all calls.
            let mut seen = vec![0u32; qk];
            for &iqs in &calls {
                call_values(ty, iqs).into_iter().for_each(|v| seen[v] += 1);
            }
            assert!(seen.iter().all(|&c| c == 1), "{ty} coverage");
            for c in [Contraction::OFF, Contraction::HIP_CLANG] {
                for &iqs in &calls {
                    let got = match ty {
                        GgmlType::Q4_K => {
                            let x = bytemuck::cast_slice::<u8, BlockQ4K>(&row)[0];
                            vec_dot_q4_k_q8_1(&x, &act, iqs, c)
                        }
                        GgmlType::Q6_K => {
                            let x = bytemuck::cast_slice::<u8, BlockQ6K>(&row)[0];
                            vec_dot_q6_k_q8_1(&x, &act, iqs, c)
                        }
                        _ => {
                            let x = bytemuck::cast_slice::<u8, BlockQ8_0>(&row)[0];
                            vec_dot_q8_0_q8_1(&x, &act[0], iqs)
                        }
                    };
                    let vals = call_values(ty, iqs);
                    let e: f64 = vals.iter().map(|&v| exact[v].0 * a[v]).sum();
                    let s: f64 = vals.iter().map(|&v| exact[v].1 * a[v].abs()).sum();
                    let bound = gamma(call_depth(ty)) * s + 1e-3 * U * s;
                    assert!(
                        (got as f64 - e).abs() <= bound,
                        "{ty} round {round} iqs {iqs} {c:?}: {got:e} vs {e:e} (bound {bound:e})"
                    );
                }
            }
        }
    }
}

#[test]
fn gpu_vec_dots_are_exact_with_unit_scales() {
    // With every scale 1 the results are integers below 2^24: exact whatever the order
    // or fusion, so they must equal the integer dot of the covered values.
    let mut r = Rng(99);
    let one = f32_to_f16_bits(1.0).to_le_bytes();
    for _ in 0..300 {
        let mut act = quantize_q8_1_mmvq(&r.activations(QK_K));
        act.iter_mut().for_each(|b| b.d = one);
        let q8: Vec<i64> = act.iter().flat_map(|b| b.qs.map(|q| q as i8 as i64)).collect();

        let mut x4 = random_q4_k(&mut r);
        (x4.d, x4.dmin) = (one, one);
        let q4 = q4_k_values(&x4);
        let mut x6 = random_q6_k(&mut r);
        x6.d = one;
        let q6 = x6.quants();
        let mut x8 = random_q8_0(&mut r);
        x8.d = one;
        for iqs in (0..32).step_by(2) {
            let want: i64 = call_values(GgmlType::Q4_K, iqs)
                .into_iter()
                .map(|v| {
                    let (sc, m) = scale_min_k4(v / 32, &x4.scales);
                    (sc as i64 * q4[v] as i64 - m as i64) * q8[v]
                })
                .sum();
            for c in [Contraction::OFF, Contraction::HIP_CLANG] {
                assert_eq!(vec_dot_q4_k_q8_1(&x4, &act, iqs, c) as i64, want);
            }
        }
        for iqs in 0..32 {
            let want: i64 = call_values(GgmlType::Q6_K, iqs)
                .into_iter()
                .map(|v| x6.scale(v / 16) as i64 * q6[v] as i64 * q8[v])
                .sum();
            assert_eq!(vec_dot_q6_k_q8_1(&x6, &act, iqs, Contraction::HIP_CLANG) as i64, want);
        }
        for iqs in (0..8).step_by(2) {
            let want: i64 =
                call_values(GgmlType::Q8_0, iqs).into_iter().map(|v| x8.q(v) as i64 * q8[v]).sum();
            assert_eq!(vec_dot_q8_0_q8_1(&x8, &act[0], iqs) as i64, want);
        }
    }
}

#[test]
fn gpu_nwarps_tables() {
    use GgmlType as T;
    for ty in [T::Q4_K, T::Q6_K, T::Q8_0] {
        assert_eq!(nwarps_one_column(MmvqTable::Generic, ty), 4);
        assert_eq!(nwarps_one_column(MmvqTable::Gcn, ty), 2);
        assert_eq!(nwarps_one_column(MmvqTable::Rdna2, ty), 1);
        assert_eq!(nwarps_one_column(MmvqTable::Rdna4, ty), 8);
        assert_eq!(calc_nwarps(ty, 5, MmvqTable::Generic, false, false), 2);
        assert_eq!(calc_nwarps(ty, 2, MmvqTable::Gcn, false, false), 2);
        assert_eq!(calc_nwarps(ty, 5, MmvqTable::Gcn, false, false), 1);
        assert_eq!(calc_nwarps(ty, 2, MmvqTable::Rdna4, false, false), 1);
        assert_eq!(calc_nwarps(ty, 1, MmvqTable::Gb10, false, true), 8);
        assert_eq!(calc_nwarps(ty, 1, MmvqTable::Gb10, true, true), 4);
    }
    assert_eq!(nwarps_one_column(MmvqTable::Rdna3_0, T::Q4_K), 1);
    assert_eq!(nwarps_one_column(MmvqTable::Rdna3_0, T::Q6_K), 2);
    assert_eq!(nwarps_one_column(MmvqTable::Rdna3_0, T::Q8_0), 8);
    assert_eq!(nwarps_one_column(MmvqTable::Turing, T::Q4_K), 2);
    assert_eq!(nwarps_one_column(MmvqTable::Turing, T::Q8_0), 4);
    assert_eq!(nwarps_one_column(MmvqTable::Rdna4, T::Q3_K), 1);
    assert_eq!((WAVE32.warp_size, WAVE32.nwarps(T::Q4_K)), (32, 1));
    assert_eq!((WAVE64.warp_size, WAVE64.nwarps(T::Q4_K)), (64, 2));
}

#[test]
fn gpu_gemv_within_rigorous_bound() {
    let mut r = Rng(0xC0FF_EE00_1234_0001);
    let configs: &[(usize, usize, Contraction)] = &[
        (WAVE32.warp_size, 1, WAVE32.contraction),
        (WAVE64.warp_size, 2, WAVE64.contraction),
        (32, 1, Contraction::OFF),
        (64, 2, Contraction::OFF),
        (32, 4, Contraction::HIP_CLANG), // NVIDIA generic shape
        (32, 8, Contraction::HIP_CLANG), // RDNA4
        (64, 1, Contraction::HIP_CLANG),
        (32, 2, Contraction { combine: Combine::FuseSecond, ..Contraction::HIP_CLANG }),
    ];
    for ty in [GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0] {
        for k in (256..=4096).step_by(256) {
            for _ in 0..3 {
                let row = random_row(&mut r, ty, k);
                let act = quantize_q8_1_mmvq(&r.activations(k));
                for &(warp, nwarps, c) in configs {
                    check_gemv(ty, &row, &act, warp, nwarps, c);
                }
                // The presets through their own entry point.
                for p in [WAVE32, WAVE64] {
                    let v = p.gemv(ty, &row, &act).unwrap();
                    let w = check_gemv(ty, &row, &act, p.warp_size, p.nwarps(ty), p.contraction);
                    assert_eq!(v.to_bits(), w.to_bits());
                }
            }
        }
    }
}

#[test]
fn gpu_wave32_and_wave64_differ_in_bits_but_both_stay_in_bounds() {
    let mut r = Rng(0x5EED_0000_0000_0042);
    for ty in [GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0] {
        let mut differ = 0;
        let trials = 60;
        for t in 0..trials {
            let k = 1024 + 256 * (t % 13);
            let row = random_row(&mut r, ty, k);
            let act = quantize_q8_1_mmvq(&r.activations(k));
            let a = check_gemv(ty, &row, &act, 32, WAVE32.nwarps(ty), WAVE32.contraction);
            let b = check_gemv(ty, &row, &act, 64, WAVE64.nwarps(ty), WAVE64.contraction);
            differ += (a.to_bits() != b.to_bits()) as usize;
        }
        assert!(differ > 0, "{ty}: wave32 and wave64 agreed on all {trials} rows");
        eprintln!("{ty}: wave32 vs wave64 differ on {differ} of {trials} rows");
    }
}

#[test]
fn gpu_contraction_changes_bits_on_some_rows() {
    // The fused and unfused forms are both within bounds (checked above); here they
    // must also be distinguishable, or the switch would be untestable on hardware.
    let mut r = Rng(31337);
    for ty in [GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0] {
        let mut differ = 0;
        for _ in 0..40 {
            let row = random_row(&mut r, ty, 2048);
            let act = quantize_q8_1_mmvq(&r.activations(2048));
            let a = mmvq_gemv(ty, &row, &act, 32, 1, Contraction::OFF).unwrap();
            let b = mmvq_gemv(ty, &row, &act, 32, 1, Contraction::HIP_CLANG).unwrap();
            differ += (a.to_bits() != b.to_bits()) as usize;
        }
        assert!(differ > 0, "{ty}: contraction never changed the result");
    }
}

#[test]
fn gpu_q8_1_versus_the_cpu_q8_1_and_q8_0_quantizers() {
    // GPU: q = roundf(x / d), s = f16(float sum of x). CPU ref (`quantize_row_q8_1_ref`,
    // `quantize_row_q8_0_ref`): q = roundf(x * (1/d)), s = f16(d * sum q). d is the same
    // f16(amax / 127) on both. Codes agree except where x/d and x*(1/d) round to
    // different sides of a .5 boundary; integer sums agree wherever the codes do; the
    // s fields are different quantities that agree within 16 d plus roundings.
    let mut r = Rng(0xABCD_EF01_2345_6789);
    let (mut blocks, mut code_diffs) = (0usize, 0usize);
    for _ in 0..300 {
        let x = r.activations(QK_K);
        let gpu = quantize_q8_1_mmvq(&x);
        let cpu1: Vec<BlockQ8_1> =
            bytemuck::cast_slice(&ActRule::Q8_1Ref.quantize(&x).unwrap()).to_vec();
        let cpu0: Vec<BlockQ8_0> =
            bytemuck::cast_slice(&ActRule::Q8_0Ref.quantize(&x).unwrap()).to_vec();
        for ((g, (c1, c0)), xb) in gpu.iter().zip(cpu1.iter().zip(&cpu0)).zip(x.chunks(QK)) {
            blocks += 1;
            assert_eq!(g.d, c1.d);
            assert_eq!(g.d, c0.d);
            assert_eq!(c1.qs, c0.qs);
            let amax = xb.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            let d = amax / 127.0;
            let mut same = true;
            for j in 0..QK {
                let (qg, qc) = (g.qs[j] as i8 as i32, c1.qs[j] as i8 as i32);
                if qg != qc {
                    same = false;
                    code_diffs += 1;
                    assert_eq!((qg - qc).abs(), 1);
                    let t = xb[j] as f64 / d as f64;
                    assert!(((t.abs().fract()) - 0.5).abs() <= 4.0 * U * t.abs());
                }
            }
            let sum_g: i32 = g.qs.iter().map(|&q| q as i8 as i32).sum();
            let sum_c: i32 = c1.qs.iter().map(|&q| q as i8 as i32).sum();
            if same {
                assert_eq!(sum_g, sum_c);
            }
            let (sg, sc) = (g.s() as f64, c1.s() as f64);
            let abs: f64 = xb.iter().map(|&v| (v as f64).abs()).sum();
            let tol = 16.0 * d as f64 + 2f64.powi(-10) * (abs + sg.abs() + sc.abs()) + 1e-7;
            assert!((sg - sc).abs() <= tol, "s gpu {sg} cpu {sc} (tol {tol})");
        }
    }
    eprintln!("gpu vs cpu q8_1 codes: {code_diffs} differ over {blocks} blocks");

    // The two rules do differ: scan values on both sides of .5 boundaries.
    let amax = 97.3f32;
    let d = amax / 127.0;
    let id = 1.0 / d;
    let mut found = 0;
    for n in 0..127 {
        let mid = (n as f32 + 0.5) * d;
        let mut v = f32::from_bits(mid.to_bits() - 8);
        for _ in 0..16 {
            if (v / d).round() != (v * id).round() {
                found += 1;
                let mut xb = [0.0f32; QK];
                xb[0] = amax;
                xb[1] = v;
                let g = quantize_q8_1_mmvq(&xb)[0];
                let c = ActRule::Q8_1Ref.quantize(&xb).unwrap();
                assert_eq!(g.qs[1] as i8 as f32, (v / d).round());
                assert_eq!(c[4 + 1] as i8 as f32, (v * id).round());
            }
            v = f32::from_bits(v.to_bits() + 1);
        }
    }
    assert!(found > 0, "no value where x/d and x*(1/d) round apart");
}

#[test]
fn gpu_q8_0_gemv_against_the_cpu_generic_kernel() {
    // Where the GPU and CPU activation codes agree (the usual case), both tiers compute
    // the same exact dot product, each within its own rounding bound.
    let mut r = Rng(4242);
    let mut compared = 0;
    for k in (256..=4096).step_by(512) {
        for _ in 0..4 {
            let row = random_row(&mut r, GgmlType::Q8_0, k);
            let x = r.activations(k);
            let gpu_act = quantize_q8_1_mmvq(&x);
            let cpu_act_bytes = ActRule::Q8_0Ref.quantize(&x).unwrap();
            let cpu_act: &[BlockQ8_0] = bytemuck::cast_slice(&cpu_act_bytes);
            if gpu_act.iter().zip(cpu_act).any(|(g, c)| g.qs != c.qs) {
                continue;
            }
            compared += 1;
            let w: &[BlockQ8_0] = bytemuck::cast_slice(&row);
            let cpu = crate::arch::generic::vec_dot::vec_dot_q8_0_q8_0(w, cpu_act);
            let gpu = check_gemv(GgmlType::Q8_0, &row, &gpu_act, 32, 1, Contraction::HIP_CLANG);
            let a = act_values(&gpu_act);
            let s: f64 = exact_weights(GgmlType::Q8_0, &row)
                .iter()
                .zip(&a)
                .map(|(&(_, abs), &a)| abs * a.abs())
                .sum();
            let cpu_bound = gamma(2 + k / QK) * s;
            let gpu_bound = gamma(2 + k / QK + 5) * s;
            assert!(((gpu - cpu) as f64).abs() <= cpu_bound + gpu_bound);
        }
    }
    assert!(compared > 0);
}

#[test]
fn gpu_gemv_rejects_bad_shapes() {
    let mut r = Rng(5);
    let row = random_row(&mut r, GgmlType::Q4_K, 512);
    let act = quantize_q8_1_mmvq(&r.activations(512));
    assert!(mmvq_gemv(GgmlType::Q4_K, &row[..100], &act, 32, 1, Contraction::OFF).is_err());
    assert!(mmvq_gemv(GgmlType::Q4_K, &row, &act[..8], 32, 1, Contraction::OFF).is_err());
    assert!(mmvq_gemv(GgmlType::Q4_0, &row, &act, 32, 1, Contraction::OFF).is_err());
}

/// `mul_mat_vec_q` for one output written block-major: weight block kbx, sub-call
/// `sub` belongs to thread `(kbx % blocks_per_iter) * (qi/vdr) + sub`; warps 1.. go
/// through a shared-memory array; warp 0's lanes are then reduced by the halving tree
/// (lane 0 of the butterfly).
fn gemv_block_major(
    ty: GgmlType,
    row: &[u8],
    act: &[BlockQ8_1],
    warp: usize,
    nwarps: usize,
    c: Contraction,
) -> f32 {
    let (qk, qi, vdr) = qk_qi_vdr(ty);
    let tpb = qi / vdr;
    let per_iter = vdr * nwarps * warp / qi;
    let mut tmp = vec![0.0f32; nwarps * warp];
    for kbx in 0..row.len() / ty.type_size() {
        let y = &act[kbx * qk / QK..];
        for sub in 0..tpb {
            let tail = match ty {
                GgmlType::Q4_K => {
                    let x = &bytemuck::cast_slice::<u8, BlockQ4K>(row)[kbx];
                    vecdotq::q4_k_tail(x, y, vdr * sub, c)
                }
                GgmlType::Q6_K => {
                    let x = &bytemuck::cast_slice::<u8, BlockQ6K>(row)[kbx];
                    vecdotq::q6_k_tail(x, y, vdr * sub, c)
                }
                _ => {
                    let x = &bytemuck::cast_slice::<u8, BlockQ8_0>(row)[kbx];
                    vecdotq::q8_0_tail(x, &y[0], vdr * sub)
                }
            };
            let tid = (kbx % per_iter) * tpb + sub;
            tmp[tid] = tail.accumulate(tmp[tid], c);
        }
    }
    let shared: Vec<Vec<f32>> =
        (1..nwarps).map(|w| tmp[w * warp..(w + 1) * warp].to_vec()).collect();
    let mut lanes: Vec<f32> = (0..warp)
        .map(|l| {
            let mut t = tmp[l];
            for s in &shared {
                t += s[l];
            }
            t
        })
        .collect();
    let mut off = warp / 2;
    while off > 0 {
        for i in 0..off {
            lanes[i] += lanes[i + off];
        }
        off /= 2;
    }
    lanes[0]
}

/// `mmvq_gemv` (its accelerated form where the CPU has AVX2 and FMA, and its scalar form)
/// against an independent block-major formulation, bitwise: random rows and extreme ones
/// (every quant byte 0xFF, activation bytes -128 and 127), every contraction variant.
#[test]
fn gpu_gemv_equals_a_block_major_formulation_bitwise() {
    let mut r = Rng(0xB10C_4A30);
    let contractions = [
        Contraction::OFF,
        Contraction::HIP_CLANG,
        Contraction::HIP_CLANG_GFX90A,
        Contraction { vec_dot_sums: false, combine: Combine::FuseSecond, accumulate: true },
        Contraction { vec_dot_sums: true, combine: Combine::FuseSecond, accumulate: false },
    ];
    for ty in [GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0] {
        for (k, extreme) in
            [(256usize, false), (768, false), (2048, false), (4096, false), (1024, true)]
        {
            let mut row = random_row(&mut r, ty, k);
            let mut act = quantize_q8_1_mmvq(&r.activations(k));
            if extreme {
                // Keep each block's scales (its first 4 bytes, and q6_K's last 18):
                // every quant byte 0xFF.
                let unit = ty.type_size();
                for b in row.chunks_mut(unit) {
                    match ty {
                        GgmlType::Q4_K => b[16..].fill(0xFF),
                        GgmlType::Q6_K => b[..192].fill(0xFF),
                        _ => b[2..].fill(0x80),
                    }
                }
                for (i, a) in act.iter_mut().enumerate() {
                    a.qs.fill(if i % 2 == 0 { 0x80 } else { 0x7F });
                }
            }
            for (warp, nwarps) in [(32, 1), (32, 2), (32, 4), (32, 8), (64, 1), (64, 2)] {
                for c in contractions {
                    let a = mmvq_gemv(ty, &row, &act, warp, nwarps, c).unwrap();
                    let s =
                        crate::accel::with_scalar(|| mmvq_gemv(ty, &row, &act, warp, nwarps, c))
                            .unwrap();
                    let b = gemv_block_major(ty, &row, &act, warp, nwarps, c);
                    let what = format!("{ty} k={k} extreme={extreme} {warp}x{nwarps} {c:?}");
                    assert_eq!(a.to_bits(), b.to_bits(), "{what}");
                    assert_eq!(s.to_bits(), b.to_bits(), "scalar {what}");
                }
            }
        }
    }
}

/// `MmvqConfig::gemv_rows` (the column's q8_1 scales converted once, the weights'
/// scales by F16C in the accelerated form) equals `gemv` row by row in the scalar form,
/// bitwise, for both lanes' configurations: random rows, and rows and activations whose
/// f16 scales are special (signalling and quiet NaNs, infinities, subnormals, -0; a NaN
/// result only has to be a NaN).
#[test]
fn gpu_gemv_rows_equals_the_scalar_gemv_per_row_bitwise() {
    let mut r = Rng(0x005C_A1E5);
    let special: [u16; 8] = [0x7C01, 0x7E00, 0xFC00, 0x0001, 0x8000, 0x3C00, 0x03FF, 0xFD17];
    let (mut n_nan, mut n_finite) = (0usize, 0usize);
    for ty in [GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0] {
        let (n, k) = (7usize, 1024usize);
        let unit = ty.type_size();
        for specials in [false, true] {
            let mut rows: Vec<u8> = (0..n).flat_map(|_| random_row(&mut r, ty, k)).collect();
            let mut act = quantize_q8_1_mmvq(&r.activations(k));
            if specials {
                for (b, blk) in rows.chunks_mut(unit).enumerate() {
                    let h = special[b % special.len()].to_le_bytes();
                    let at = match ty {
                        GgmlType::Q6_K => 208,
                        _ => 0,
                    };
                    blk[at..at + 2].copy_from_slice(&h);
                    if ty == GgmlType::Q4_K {
                        let m = special[(b + 3) % special.len()].to_le_bytes();
                        blk[2..4].copy_from_slice(&m);
                    }
                }
                for (i, a) in act.iter_mut().enumerate() {
                    if i % 3 == 1 {
                        a.d = special[i % special.len()].to_le_bytes();
                    }
                }
            }
            for cfg in [super::WAVE32, super::WAVE64] {
                let mut got = vec![0.0f32; n];
                cfg.gemv_rows(ty, &rows, &act, &mut got).unwrap();
                for (j, g) in got.iter().enumerate() {
                    let row = &rows[j * (rows.len() / n)..(j + 1) * (rows.len() / n)];
                    let want = crate::accel::with_scalar(|| cfg.gemv(ty, row, &act)).unwrap();
                    // A NaN result's sign and payload are whichever NaN operand the
                    // x86 instruction propagates, which the two forms order
                    // differently (and the device by its own rules): NaN is one value.
                    let same = g.to_bits() == want.to_bits() || (g.is_nan() && want.is_nan());
                    assert!(same, "{ty} {} specials={specials} row {j}: {g} vs {want}", cfg.name);
                    n_nan += usize::from(g.is_nan());
                    n_finite += usize::from(g.is_finite());
                }
            }
        }
    }
    // Both kinds of result were compared.
    assert!(n_nan > 0 && n_finite > 0, "{n_nan} NaN and {n_finite} finite results");
}

#[test]
fn gpu_cuda_q8_1_quantizer_matches_an_f64_reference() {
    // The fast-math quantizer: d = RN(amax * RN(1/127)), q = roundf(RN(x * RN(1/d))),
    // checked against exact arithmetic: d within one rounding of amax/127 and
    // 1/127's own rounding, each code the exact quotient's rounding unless that lies
    // within a few ulps of a .5 boundary; the sum as HIP's (no subnormals here).
    let mut r = Rng(0x0C0D_A5E5_1DEA_F00D);
    let inv = 1.0f32 / 127.0;
    assert_eq!(inv.to_bits(), 0x3C01_0204, "the constant ptxas multiplies by");
    for _ in 0..200 {
        let x = r.activations(1024);
        let y = quantize_q8_1_cuda(&x);
        let hip = quantize_q8_1_mmvq(&x);
        for ((xb, b), h) in x.chunks(QK).zip(&y).zip(&hip) {
            assert_eq!(b.s, h.s, "the float sums agree without subnormals");
            let amax = xb.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            let d = amax * inv;
            let exact_d = amax as f64 / 127.0;
            assert!((d as f64 - exact_d).abs() <= 2.0 * U * exact_d);
            assert_eq!(u16::from_le_bytes(b.d), f32_to_f16_bits(d));
            check_codes(xb, b, amax, d, 3.0);
        }
    }
}

#[test]
fn gpu_cuda_q8_1_quantizer_flushes_subnormals() {
    // Every value subnormal: |x| flushes to 0, so amax == 0, every code 0, d = s = 0
    // (HIP keeps them: amax is the largest subnormal, d underflows, the sum is kept).
    let tiny = f32::from_bits(0x0000_1234);
    let mut x = [0.0f32; QK];
    for (i, v) in x.iter_mut().enumerate() {
        *v = if i % 2 == 0 { tiny } else { -tiny };
    }
    let b = quantize_q8_1_cuda(&x)[0];
    assert!(b.qs.iter().all(|&q| q == 0));
    assert_eq!(u16::from_le_bytes(b.d) & 0x7fff, 0);
    assert_eq!(u16::from_le_bytes(b.s) & 0x7fff, 0);
    // A normal amax whose d = amax / 127 is subnormal: d flushes to 0, 1/d is +inf,
    // so a positive value saturates to i32::MAX (low byte 0xff = -1), a negative one
    // to i32::MIN (low byte 0), and 0 * inf is NaN, which converts to 0.
    let a = 2f32.powi(-120);
    let mut x = [0.0f32; QK];
    x[0] = a;
    x[1] = -a;
    let b = quantize_q8_1_cuda(&x)[0];
    assert_eq!(b.qs[0] as i8, -1);
    assert_eq!(b.qs[1] as i8, 0);
    assert!(b.qs[2..].iter().all(|&q| q == 0));
    assert_eq!(u16::from_le_bytes(b.d), 0);
    // A normal block, amax = 508: d = RN(508 * RN(1/127)), and every code is the
    // rounding of x * RN(1/d), within one of the exact x / 4.
    let mut x = [0.0f32; QK];
    for (i, v) in x.iter_mut().enumerate() {
        *v = (i as f32 - 16.0) * 4.0;
    }
    x[31] = 127.0 * 4.0;
    let b = quantize_q8_1_cuda(&x)[0];
    let d = (127.0f32 * 4.0) * (1.0 / 127.0);
    assert_eq!(u16::from_le_bytes(b.d), f32_to_f16_bits(d));
    for i in 0..31 {
        let want = ((i as f32 - 16.0) * 4.0 * (1.0 / d)).round() as i32;
        assert_eq!(b.qs[i] as i8 as i32, want, "lane {i}");
        assert!((want - (i as i32 - 16)).abs() <= 1);
    }
}

#[test]
fn gpu_cuda_mmvq_is_wave32s_arithmetic_with_four_warps() {
    // The CUDA configuration reads the generic table (4 warps for one column) and
    // nvcc's fusions, which are HIP clang's on RDNA2; on a long row the order differs
    // from one warp's, and equals mmvq_gemv with 32 lanes and 4 warps.
    assert_eq!(CUDA.nwarps(GgmlType::Q4_K), 4);
    assert_eq!(Contraction::NVCC, Contraction::HIP_CLANG);
    let mut r = Rng(0x5A55_C0DE);
    let mut differ = 0;
    for ty in [GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0] {
        for _ in 0..4 {
            let row = random_row(&mut r, ty, 8192);
            let act = quantize_q8_1_cuda(&r.activations(8192));
            let c = CUDA.gemv(ty, &row, &act).unwrap();
            let direct = mmvq_gemv(ty, &row, &act, 32, 4, Contraction::NVCC).unwrap();
            assert_eq!(c.to_bits(), direct.to_bits());
            let one = WAVE32.gemv(ty, &row, &act).unwrap();
            differ += usize::from(one.to_bits() != c.to_bits());
        }
    }
    assert!(differ > 0, "four warps never changed a bit against one");
}

// ---------------------------------------------------------------------------------
// GPU RMSNorm and SwiGLU (`elem`).

/// The block reduction's tree, worked by hand for a block of 256: thread 0 holds 1.0,
/// threads 8 and 16 hold 2^-24 each. Lane 0's first butterfly step adds lane 16:
/// `1 + 2^-24` ties to 1.0; lane 8's partner (24) holds 0, so lane 8 keeps 2^-24, and
/// the next step `1 + 2^-24` again gives 1.0. Any order that adds the two small values
/// first gives `1 + 2^-23`, which is representable (the f64 sum, the CPU's order).
#[test]
fn gpu_block_reduce_follows_the_butterfly_tree() {
    let mut tmp = vec![0.0f32; 256];
    tmp[0] = 1.0;
    tmp[8] = 2f32.powi(-24);
    tmp[16] = 2f32.powi(-24);
    assert_eq!(elem::block_reduce_sum(&mut tmp.clone(), |a, b| a + b), 1.0);
    let sequential: f32 = tmp.iter().rev().sum();
    assert_eq!(sequential, 1.0 + 2f32.powi(-23));
    // A second warp's partial joins in the second butterfly: warp 1 (threads 32..64)
    // holding 2^-23 in one lane turns slot 1 into 2^-23, and 1 + 2^-23 is exact.
    tmp[40] = 2f32.powi(-23);
    assert_eq!(elem::block_reduce_sum(&mut tmp, |a, b| a + b), 1.0 + 2f32.powi(-23));
}

/// RMSNorm twins against the exact (f64) result: the f32 sum of squares has at most
/// ceil(n/B) + 10 roundings (the thread's fma chain, two 5-level butterflies), the mean
/// two more, `+ eps` one; the reciprocal square root halves that relative error and
/// adds half an ulp (it is modelled correctly rounded); two products follow.
#[test]
fn gpu_rms_norm_within_its_rounding_bound() {
    let mut r = Rng { g: crate::rng::Rng::new(0x5eed_0e1e) };
    for n in [64usize, 128, 1000, 1024, 4096, 5120] {
        let x: Vec<f32> = (0..n).map(|_| r.sym() * 3.0).collect();
        let w: Vec<f32> = (0..n).map(|_| 1.0 + r.sym() * 0.5).collect();
        let eps = 1e-6f32;
        let mean = x.iter().map(|&v| f64::from(v).powi(2)).sum::<f64>() / n as f64;
        let scale = 1.0 / (mean + f64::from(eps)).sqrt();
        let c = n.div_ceil(elem::rms_norm_block(n));
        let rel = gamma(c + 13) / 2.0 + U / 2.0 + gamma(2);
        for math in [elem::GpuMath::Hip, elem::GpuMath::Cuda] {
            let mut y = vec![0.0f32; n];
            elem::rms_norm_mul(math, &mut y, &x, &w, eps);
            for i in 0..n {
                let want = f64::from(x[i]) * scale * f64::from(w[i]);
                let err = (f64::from(y[i]) - want).abs();
                assert!(
                    err <= rel * want.abs() * 1.0001,
                    "{math:?} n={n} i={i}: {} vs {want}",
                    y[i]
                );
            }
        }
    }
}

/// The GPU flavour is not the CPU's: over random rows, the f32 tree sum and the CPU's
/// f64 sum give different scales for some rows (and equal ones for others).
#[test]
fn gpu_rms_norm_differs_from_the_cpu_order_somewhere() {
    let mut r = Rng { g: crate::rng::Rng::new(7) };
    let (mut same, mut differ) = (0, 0);
    for _ in 0..64 {
        let x: Vec<f32> = (0..4096).map(|_| r.sym()).collect();
        let w = vec![1.0f32; 4096];
        let (mut a, mut b) = (vec![0.0; 4096], vec![0.0; 4096]);
        elem::rms_norm_mul(elem::GpuMath::Hip, &mut a, &x, &w, 1e-6);
        crate::elem::rms_norm_mul(&mut b, &x, &w, 1e-6);
        if a == b {
            same += 1;
        } else {
            differ += 1;
        }
    }
    assert!(same > 0 && differ > 0, "same {same}, differ {differ}");
}

/// The CUDA form folds the division into `fma(sum, rcp(n), eps)`: for a row whose mean
/// is not exact, the HIP and CUDA scales differ in some rows.
#[test]
fn gpu_rms_norm_hip_and_cuda_differ_somewhere() {
    let mut r = Rng { g: crate::rng::Rng::new(11) };
    let differ = (0..64).any(|_| {
        let x: Vec<f32> = (0..1000).map(|_| r.sym()).collect();
        let w = vec![1.0f32; 1000];
        let (mut a, mut b) = (vec![0.0; 1000], vec![0.0; 1000]);
        elem::rms_norm_mul(elem::GpuMath::Hip, &mut a, &x, &w, 1e-6);
        elem::rms_norm_mul(elem::GpuMath::Cuda, &mut b, &x, &w, 1e-6);
        a != b
    });
    assert!(differ);
}

/// SiLU twins against the exact value: HIP's `expf` (its split product, a correctly
/// rounded `2^a` model) is within a few ulp; CUDA's `__expf` rounds `x * log2e` first,
/// which costs `|x|` ulp relative in `exp(-x)`. Beyond the cut-offs both give
/// `x` (large x) and `-0.0` (x below -88.7 on HIP; on CUDA `rcp(inf) = 0`).
#[test]
fn gpu_silu_within_bounds_and_at_the_cut_offs() {
    let mut x = -80.0f32;
    while x < 80.0 {
        let want = f64::from(x) / (1.0 + (-f64::from(x)).exp());
        for math in [elem::GpuMath::Hip, elem::GpuMath::Cuda] {
            let got = f64::from(elem::silu(math, x));
            let ulps = if math == elem::GpuMath::Cuda { 6.0 + f64::from(x.abs()) } else { 6.0 };
            assert!(
                (got - want).abs() <= ulps * U * want.abs() + 1e-44,
                "{math:?} x={x}: {got} vs {want}"
            );
        }
        x += 0.173;
    }
    for math in [elem::GpuMath::Hip, elem::GpuMath::Cuda] {
        assert_eq!(elem::silu(math, 200.0), 200.0);
        assert_eq!(elem::silu(math, -100.0).to_bits(), (-0.0f32).to_bits(), "{math:?}");
    }
    // Between -88.72 and -87.34 HIP's 1 + e is finite and the quotient subnormal or
    // tiny; CUDA flushes what is subnormal.
    let (h, c) = (elem::silu(elem::GpuMath::Hip, -88.0), elem::silu(elem::GpuMath::Cuda, -88.0));
    assert!(h < 0.0 && h > -1e-35, "{h}");
    assert!(c <= 0.0 && !c.is_subnormal(), "{c}");
}

/// SwiGLU is `silu(x) * g`, one rounding more.
#[test]
fn gpu_swiglu_is_silu_times_gate() {
    let x: Vec<f32> = (0..100).map(|i| (i as f32 - 50.0) * 0.21).collect();
    let g: Vec<f32> = (0..100).map(|i| 1.0 - i as f32 * 0.013).collect();
    for math in [elem::GpuMath::Hip, elem::GpuMath::Cuda] {
        let mut y = vec![0.0; 100];
        elem::swiglu(math, &mut y, &x, &g);
        for i in 0..100 {
            assert_eq!(y[i].to_bits(), (elem::silu(math, x[i]) * g[i]).to_bits());
        }
    }
}

/// `FMUL.RZ`: 1.5 * (1 + 2^-23) = 1.5 + 1.5 ulp exactly; nearest-even rounds it to
/// 1.5 + 2 ulp, toward zero to 1.5 + 1 ulp (both signs).
#[test]
fn gpu_mul_rz_rounds_toward_zero() {
    let b = 1.0 + f32::EPSILON;
    assert_eq!(1.5f32 * b, 1.5 + 2.0 * f32::EPSILON);
    assert_eq!(elem::mul_rz(1.5, b), 1.5 + f32::EPSILON);
    assert_eq!(elem::mul_rz(-1.5, b), -(1.5 + f32::EPSILON));
    assert_eq!(elem::mul_rz(3.0, 0.5), 1.5);
}

/// CUDA's RoPE cache: the identity at position 0; elsewhere within the phase error its
/// recipe allows of the true cosine and sine (`t` rounded toward zero loses up to one ulp
/// of turns; the angle itself carries the roundings of `lg2`, the product, `ex2` and
/// `pos *`, the exponent's error amplified by `|m| ln 2`); and not the CPU's cache.
#[test]
fn gpu_rope_cache_cuda_within_its_phase_error() {
    for [c, s] in elem::rope_cache_cuda(0, 128, 1e6) {
        assert_eq!((c, s), (1.0, 0.0));
    }
    let mut differs = false;
    for pos in [1i32, 7, 100, 1000, 4095, 30000] {
        let cuda = elem::rope_cache_cuda(pos, 128, 1e6);
        let cpu = crate::elem::rope_cache(pos, 128, 1e6);
        differs |= cuda != cpu;
        let ts = f64::from(1e6f32.powf(-2.0 / 128.0));
        for (p, [c, s]) in cuda.iter().enumerate() {
            let m = p as f64 * ts.log2();
            let theta = f64::from(pos) * ts.powf(p as f64);
            let t = theta / std::f64::consts::TAU;
            let ulp_t = f64::from(f32::from_bits((t as f32).to_bits() + 1) - t as f32);
            let angle = std::f64::consts::TAU * 1.01 * ulp_t + theta * (4.0 + m.abs()) * 2.0 * U;
            let bound = angle + 2.0 * U;
            assert!((f64::from(*c) - theta.cos()).abs() <= bound, "pos {pos} pair {p}: cos {c}");
            assert!((f64::from(*s) - theta.sin()).abs() <= bound, "pos {pos} pair {p}: sin {s}");
        }
    }
    assert!(differs);
}

/// Block sizes of `soft_max_f32` as the launcher picks them.
#[test]
fn gpu_soft_max_block_sizes() {
    for (n, b) in [(1, 32), (7, 32), (32, 32), (33, 64), (256, 256), (333, 512), (768, 1024)] {
        assert_eq!(elem::soft_max_block(n), b, "n={n}");
    }
    for n in [1024, 2048, 4096, 100_000] {
        assert_eq!(elem::soft_max_block(n), 1024, "n={n}");
    }
}

/// The GPU's `expf`: within a few ulp of `exp` (CUDA's `__expf` loses `|v|` ulp to the
/// rounded `v * log2 e`, and a quarter of that more to `log2 e` rounded to f32); HIP's cut-offs give 0 below -103.28 and inf above 88.72,
/// subnormal results between (kept on HIP, flushed on CUDA); `-inf` gives 0.
#[test]
fn gpu_expf_within_bounds_and_at_the_cut_offs() {
    let mut v = -87.0f32;
    while v < 88.0 {
        let want = f64::from(v).exp();
        for math in [elem::GpuMath::Hip, elem::GpuMath::Cuda] {
            let got = f64::from(elem::expf(math, v));
            let ulps =
                if math == elem::GpuMath::Cuda { 3.0 + 1.25 * f64::from(v.abs()) } else { 3.0 };
            assert!((got - want).abs() <= ulps * U * want, "{math:?} v={v}: {got} vs {want}");
        }
        v += 0.0917;
    }
    let hip = elem::GpuMath::Hip;
    assert_eq!(elem::expf(hip, -104.0), 0.0);
    assert_eq!(elem::expf(hip, 89.0), f32::INFINITY);
    assert!(elem::expf(hip, -100.0).is_subnormal());
    assert_eq!(elem::expf(elem::GpuMath::Cuda, -100.0), 0.0);
    for math in [hip, elem::GpuMath::Cuda] {
        assert_eq!(elem::expf(math, f32::NEG_INFINITY), 0.0, "{math:?}");
        assert_eq!(elem::expf(math, 0.0), 1.0, "{math:?}");
    }
}

/// An independent statement of the softmax kernel's order, written per thread and per
/// warp as the device runs it: `B` threads, thread `t` owning columns `t, t+B, ..`;
/// each warp's XOR butterfly on an array of 32 lanes, lane 0 to its shared slot, the
/// slots (zero past `B/32`) through one more butterfly.
fn soft_max_threads(math: elem::GpuMath, w: &[f32]) -> Vec<f32> {
    let z = math.ftz();
    let fl = |v: f32| if z { crate::gpu::quantize::ftz(v) } else { v };
    let n = w.len();
    let b = elem::soft_max_block(n);
    let max = w.iter().map(|&v| fl(v)).fold(f32::NEG_INFINITY, f32::max);
    let e: Vec<f32> = w.iter().map(|&v| elem::expf(math, fl(fl(v) - max))).collect();
    let threads: Vec<f32> = (0..b)
        .map(|t| {
            let mut acc = 0.0f32;
            let mut col = t;
            while col < n {
                acc = fl(acc + e[col]);
                col += b;
            }
            acc
        })
        .collect();
    let warp_sum = |mut lanes: [f32; 32]| {
        for off in [16, 8, 4, 2, 1] {
            let before = lanes;
            for (i, l) in lanes.iter_mut().enumerate() {
                *l = fl(before[i] + before[i ^ off]);
            }
        }
        lanes[0]
    };
    let mut slots = [0.0f32; 32];
    for (wi, chunk) in threads.chunks(32).enumerate() {
        slots[wi] = warp_sum(chunk.try_into().expect("whole warps"));
    }
    let sum = if b == 32 { slots[0] } else { warp_sum(slots) };
    let inv = if z { fl(elem::rcp(fl(sum))) } else { 1.0 / sum };
    e.iter().map(|&v| fl(v * inv)).collect()
}

/// The softmax twin equals the per-thread statement bit for bit, at the templated
/// lengths (one and two columns per thread) and the generic ones (idle threads), with
/// masked (`-inf`) cells; and stays within its rounding bound of the exact softmax:
/// each `e` within 3u (HIP) or (3 + 1.25 |w - max|)u (CUDA), the sum within those plus
/// 2 log2(B) + ceil(n/B) roundings, the inverse and the product one each.
#[test]
fn gpu_soft_max_row_follows_the_threads_and_its_bound() {
    let mut r = Rng(0x50f7);
    for n in [7usize, 64, 256, 333, 768, 1024, 2048, 4096, 5000] {
        let used = n - n / 3;
        let w: Vec<f32> =
            (0..n).map(|j| if j < used { r.sym() * 8.0 } else { f32::NEG_INFINITY }).collect();
        let max = w.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let exact: Vec<f64> = w.iter().map(|&v| f64::from(v - max).exp()).collect();
        let total: f64 = exact.iter().sum();
        let b = elem::soft_max_block(n);
        let levels = 2.0 * (b as f64).log2().ceil() + n.div_ceil(b) as f64;
        for math in [elem::GpuMath::Hip, elem::GpuMath::Cuda] {
            let mut p = vec![0.0f32; n];
            elem::soft_max_row(math, &mut p, &w);
            let want = soft_max_threads(math, &w);
            for j in 0..n {
                assert_eq!(p[j].to_bits(), want[j].to_bits(), "{math:?} n={n} j={j}");
            }
            let ulps = |v: f32| {
                let d = f64::from((v - max).abs());
                3.0 + if math == elem::GpuMath::Cuda { 1.25 * d } else { 0.0 }
            };
            // Masked cells (`-inf`) contribute an exact 0.
            let e_err: f64 = exact
                .iter()
                .zip(&w)
                .filter(|(e, _)| **e > 0.0)
                .map(|(e, &v)| ulps(v) * U * e)
                .sum();
            let sum_rel = e_err / total + levels * U;
            for j in 0..used {
                let want = exact[j] / total;
                let rel = ulps(w[j]) * U + sum_rel + 2.0 * U;
                let err = (f64::from(p[j]) - want).abs();
                assert!(
                    err <= rel * want * 1.001 + 1e-44,
                    "{math:?} n={n} j={j}: {} vs {want}, rel {}",
                    p[j],
                    rel / U
                );
            }
            assert!(p[used..].iter().all(|&v| v == 0.0));
        }
    }
}

/// The GPU softmax is not the CPU's (f32 tree sum and the device's `expf` against an f64
/// sum and the C library's), and HIP's is not CUDA's, on some rows.
#[test]
fn gpu_soft_max_row_differs_from_the_cpu_and_between_vendors() {
    let mut r = Rng(0x50f8);
    let (mut cpu_differ, mut vendor_differ) = (false, false);
    for _ in 0..32 {
        let w: Vec<f32> = (0..256).map(|_| r.sym() * 8.0).collect();
        let (mut h, mut c, mut x) = (vec![0.0; 256], vec![0.0; 256], vec![0.0; 256]);
        elem::soft_max_row(elem::GpuMath::Hip, &mut h, &w);
        elem::soft_max_row(elem::GpuMath::Cuda, &mut c, &w);
        crate::elem::ElemOps::soft_max_row(
            crate::elem::portable(crate::elem::ElemFlavour::X64),
            &mut x,
            &w,
        );
        cpu_differ |= h != x;
        vendor_differ |= h != c;
    }
    assert!(cpu_differ && vendor_differ, "cpu {cpu_differ}, vendors {vendor_differ}");
}

// ---------------------------------------------------------------------------------
// MMVF (`mul_mat_vec_f`): the attention products.

const MMVF_ALL: [MmvfConfig; 3] = [MMVF_RDNA2, MMVF_CDNA, MMVF_AMPERE];

#[test]
fn mmvf_block_sizes() {
    // (ncols, RDNA2 / NVIDIA, CDNA), each worked by hand from the fewest
    // `ceil(ncols / 2B)` over B = warp, 2 warp, .. max (the smallest on a tie).
    let table = [
        (2, 32, 64),
        (16, 32, 64),
        (64, 32, 64),
        (128, 64, 64),
        (256, 128, 128),
        (300, 160, 128),
        (512, 256, 128),
        (1024, 256, 128),
        (4096, 256, 128),
    ];
    for (ncols, narrow, wide) in table {
        assert_eq!(MMVF_RDNA2.block_size(ncols), narrow, "rdna2, {ncols}");
        assert_eq!(MMVF_AMPERE.block_size(ncols), narrow, "ampere, {ncols}");
        assert_eq!(MMVF_CDNA.block_size(ncols), wide, "cdna, {ncols}");
    }
}

#[test]
fn mmvf_takes_follows_ggml_should_use_mmvf() {
    // (config, f16, rows, mats, cols, takes)
    let cases = [
        (MMVF_RDNA2, false, 256, 8, 8, true),
        (MMVF_RDNA2, false, 256, 8, 9, false),
        (MMVF_RDNA2, true, 4096, 8, 8, true),
        (MMVF_RDNA3, false, 256, 8, 8, true),
        (MMVF_RDNA3, true, 4096, 8, 3, true),
        (MMVF_RDNA3, true, 4096, 8, 4, false),
        (MMVF_CDNA, false, 256, 8, 3, true),
        (MMVF_CDNA, false, 256, 8, 4, false),
        (MMVF_CDNA, true, 256, 8, 2, true),
        (MMVF_CDNA, true, 256, 8, 3, false),
        (MMVF_AMPERE, false, 4096, 8, 3, true),
        (MMVF_AMPERE, false, 4096, 8, 4, false),
        (MMVF_AMPERE, true, 512, 8, 1, true),
        (MMVF_AMPERE, true, 768, 8, 1, false),
        (MMVF_AMPERE, true, 768, 1, 1, true),
        (MMVF_AMPERE, true, 128, 8, 2, false),
    ];
    for (cfg, f16, rows, mats, cols, want) in cases {
        assert_eq!(
            cfg.takes(f16, 128, rows, mats, cols),
            want,
            "{} {f16} {rows} {mats} {cols}",
            cfg.name
        );
    }
    // An odd row length never takes MMVF.
    assert!(!MMVF_RDNA2.takes(false, 127, 1, 1, 1));
}

/// The kernel written out per thread of the block, with global thread ids and the
/// shared-memory buffer as ggml declares it: an independent statement of the order.
fn mmvf_threads(cfg: &MmvfConfig, acc: MmvfAcc, cols: usize, x: &[f32], y: &[f32]) -> f32 {
    let fused = if cols > 1 { cfg.fused_columns } else { cfg.fused };
    let fl = |v: f32| if cfg.ftz && v.is_subnormal() { 0.0f32.copysign(v) } else { v };
    let (n2, b, w) = (x.len() / 2, cfg.block_size(x.len()), cfg.warp_size);
    let mut sumf = vec![0.0f32; b];
    for (tid, out) in sumf.iter_mut().enumerate() {
        let mut col2 = tid;
        let (mut s, mut h) = (0.0f32, [0.0f32; 2]);
        while col2 < n2 {
            let (x0, x1, y0, y1) = (x[2 * col2], x[2 * col2 + 1], y[2 * col2], y[2 * col2 + 1]);
            match acc {
                MmvfAcc::F32 if fused => {
                    s = fl(fl(x0).mul_add(fl(y0), fl(s)));
                    s = fl(fl(x1).mul_add(fl(y1), fl(s)));
                }
                MmvfAcc::F32 => {
                    let (p0, p1) = (fl(fl(x0) * fl(y0)), fl(fl(x1) * fl(y1)));
                    s = fl(fl(s + p0) + p1);
                }
                MmvfAcc::F16 => {
                    let (y0, y1) = (round_to_f16(y0), round_to_f16(y1));
                    h[0] = f16_fma_exact(x0, y0, h[0]);
                    h[1] = f16_fma_exact(x1, y1, h[1]);
                }
            }
            col2 += b;
        }
        *out = match acc {
            MmvfAcc::F32 => s,
            MmvfAcc::F16 => fl(h[0] + h[1]),
        };
    }
    let shfl = |v: &mut Vec<f32>, active: usize| {
        let mut off = w / 2;
        while off > 0 {
            let old = v.clone();
            for tid in 0..active {
                v[tid] = fl(fl(old[tid]) + fl(old[tid ^ off]));
            }
            off /= 2;
        }
    };
    shfl(&mut sumf, b);
    if b > w {
        let mut buf_iw = vec![0.0f32; w];
        for tid in 0..b {
            buf_iw[tid / w] = sumf[tid];
        }
        // Lanes of warp 0 read their slot.
        sumf[..w].copy_from_slice(&buf_iw);
        shfl(&mut sumf, w);
    }
    sumf[0]
}

/// `RN16(a*b + c)` for F16 values, in integers: every F16 value is a multiple of 2^-24,
/// so `a*b + c` is an exact multiple of 2^-48 (an i128), and the nearest F16 value
/// (ties to the even encoding) is chosen among the neighbours of an approximation by
/// exact integer distances.
fn f16_fma_exact(a: f32, b: f32, c: f32) -> f32 {
    let units = |v: f32| (v as f64 * 2f64.powi(24)) as i128; // exact for F16 values
    let s = units(a) * units(b) + (units(c) << 24);
    let r = round_to_f16((s as f64 * 2f64.powi(-48)) as f32);
    assert!(r.is_finite(), "f16_fma_exact: overflow");
    let next = |t: f32, up: bool| {
        let bits = f32_to_f16_bits(t);
        let bits = match (t == 0.0, up, t > 0.0 || (t == 0.0 && bits == 0)) {
            (true, true, _) => 0x0001,
            (true, false, _) => 0x8001,
            (false, true, true) | (false, false, false) => bits + 1,
            _ => bits - 1,
        };
        f16_bits_to_f32(bits)
    };
    let dist = |t: f32| ((units(t) << 24) - s).abs();
    let mut best = r;
    for t in [next(r, false), next(r, true)] {
        let (d, db) = (dist(t), dist(best));
        if t.is_finite() && (d < db || (d == db && f32_to_f16_bits(t) & 1 == 0)) {
            best = t;
        }
    }
    if best == 0.0 {
        // The sign of an exact zero sum: +0 unless both addends are -0 (round to nearest).
        let neg = s == 0 && (a * b).is_sign_negative() && c.is_sign_negative();
        return if neg { -0.0 } else { 0.0 };
    }
    best
}

#[test]
fn mmvf_follows_the_threads_bit_for_bit() {
    let mut rng = Rng(0x4D4D_5646);
    for cfg in MMVF_ALL {
        for n in [2usize, 16, 64, 128, 130, 256, 300, 512, 1024, 1030, 4096] {
            for trial in 0..3 {
                let x: Vec<f32> = (0..n).map(|_| round_to_f16(rng.sym() * 2.0)).collect();
                let y: Vec<f32> = (0..n)
                    .map(|i| if trial == 2 && i % 3 == 0 { 0.0 } else { rng.sym().abs() * 0.05 })
                    .collect();
                for (acc, cols) in [(MmvfAcc::F32, 1), (MmvfAcc::F32, 2), (MmvfAcc::F16, 1)] {
                    let (a, b) =
                        (cfg.dot_in(acc, cols, &x, &y), mmvf_threads(&cfg, acc, cols, &x, &y));
                    assert_eq!(
                        a.to_bits(),
                        b.to_bits(),
                        "{} {} n={n} trial {trial}: {a} vs {b}",
                        cfg.name,
                        acc.name()
                    );
                }
            }
        }
    }
}

#[test]
fn mmvf_small_rows_by_hand() {
    // Four values, one warp: thread 0 takes pair 0, thread 1 pair 1, the butterfly adds
    // zeros but for its last step: RN(fma(x1, y1, RN(x0 y0)) + fma(x3, y3, RN(x2 y2)))
    // where the f32 multiply-adds are fused, RN(RN(x0 y0) + RN(x1 y1)) + .. on CDNA2.
    // Pair 0 leaves -1; pair 1's (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24 is exact in the fma
    // and rounds to 1 + 2^-11 as a product (a tie, to even).
    let a = 1.0f32 + 2f32.powi(-12);
    let x = [-1.0f32, a, 0.0, 0.0];
    let y = [1.0f32, a, 0.5, 1.0 / 3.0];
    let fused = x[1].mul_add(y[1], x[0] * y[0]) + x[3].mul_add(y[3], x[2] * y[2]);
    let unfused = (x[0] * y[0] + x[1] * y[1]) + (x[2] * y[2] + x[3] * y[3]);
    assert_eq!(x[1].mul_add(y[1], -1.0), 2f32.powi(-11) + 2f32.powi(-24));
    assert_eq!(x[1] * y[1] - 1.0, 2f32.powi(-11));
    assert_ne!(fused.to_bits(), unfused.to_bits(), "the example tells the two apart");
    for cfg in MMVF_ALL {
        let want = if cfg.fused { fused } else { unfused };
        assert_eq!(cfg.dot(MmvfAcc::F32, &x, &y).to_bits(), want.to_bits(), "{}", cfg.name);
        // The kernels of several columns fuse on every GPU (CDNA2's too).
        let want = if cfg.fused_columns { fused } else { unfused };
        for cols in [2, 3, 8] {
            let got = cfg.dot_in(MmvfAcc::F32, cols, &x, &y);
            assert_eq!(got.to_bits(), want.to_bits(), "{} cols={cols}", cfg.name);
        }
    }
    const { assert!(!MMVF_CDNA.fused && MMVF_CDNA.fused_columns) };
    // The F16 accumulator fuses each multiply-add in F16: with ncols = 1024 (block 256 on
    // RDNA2, 128 on CDNA) thread 0 takes pair 0 and then pair B. Pair 0 leaves h.lo = -1;
    // pair B adds (1 + 2^-10)(1 + 2^-9) = 1 + 3*2^-10 + 2^-19: fused, h.lo = 3*2^-10 +
    // 2^-19 (exact in F16); the product rounded first would give 3*2^-10.
    for cfg in [MMVF_RDNA2, MMVF_CDNA, MMVF_AMPERE] {
        let b = cfg.block_size(1024);
        let (mut x, mut y) = (vec![0.0f32; 1024], vec![0.0f32; 1024]);
        (x[0], y[0]) = (-1.0, 1.0);
        (x[2 * b], y[2 * b]) = (1.0 + 2f32.powi(-10), 1.0 + 2f32.powi(-9));
        let want = 3.0 * 2f32.powi(-10) + 2f32.powi(-19);
        assert_eq!(cfg.dot(MmvfAcc::F16, &x, &y), want, "{}", cfg.name);
        // And the F16 accumulator loses what F16 cannot hold: 2048 + 1 rounds to 2048
        // (a tie, to even); the f32 accumulator keeps it.
        (x[0], y[0]) = (2048.0, 1.0);
        (x[2 * b], y[2 * b]) = (1.0, 1.0);
        assert_eq!(cfg.dot(MmvfAcc::F16, &x, &y), 2048.0, "{}", cfg.name);
        assert_eq!(cfg.dot(MmvfAcc::F32, &x, &y), 2049.0, "{}", cfg.name);
        // The activations are rounded to F16 first: 1 + 2^-12 becomes 1.
        let (mut x, mut y) = (vec![0.0f32; 4], vec![0.0f32; 4]);
        (x[0], y[0]) = (1.0, 1.0 + 2f32.powi(-12));
        assert_eq!(cfg.dot(MmvfAcc::F16, &x, &y), 1.0, "{}", cfg.name);
        assert_eq!(cfg.dot(MmvfAcc::F32, &x, &y), 1.0 + 2f32.powi(-12), "{}", cfg.name);
    }
}

#[test]
fn mmvf_within_its_rounding_bound() {
    let mut rng = Rng(0x4D56_4642);
    let u16_ = 2f64.powi(-11);
    for cfg in MMVF_ALL {
        for n in [16usize, 256, 1024, 4096] {
            let x: Vec<f32> = (0..n).map(|_| round_to_f16(rng.sym())).collect();
            let y: Vec<f32> = (0..n).map(|_| rng.sym().abs() * 0.01).collect();
            let b = cfg.block_size(n);
            let chain = 2 * (n / 2).div_ceil(b);
            let levels = 2 * cfg.warp_size.trailing_zeros() as usize + 1;
            let abs: f64 = x.iter().zip(&y).map(|(a, b)| (*a as f64 * *b as f64).abs()).sum();
            // f32 accumulator: every term passes through at most chain + levels roundings.
            let exact: f64 = x.iter().zip(&y).map(|(a, b)| *a as f64 * *b as f64).sum();
            let got = cfg.dot(MmvfAcc::F32, &x, &y) as f64;
            assert!((got - exact).abs() <= gamma(chain + levels) * abs, "{} f32 n={n}", cfg.name);
            // F16 accumulator: the activation's rounding and the chain's in F16, then
            // the f32 reduction.
            let got = cfg.dot(MmvfAcc::F16, &x, &y) as f64;
            let g16 = (1.0 + u16_).powi(chain as i32 + 1) - 1.0;
            let bound = ((1.0 + g16) * (1.0 + gamma(levels + 1)) - 1.0) * abs;
            assert!((got - exact).abs() <= bound, "{} f16 n={n}: {got} vs {exact}", cfg.name);
        }
    }
}

#[test]
fn mmvf_orders_differ_between_gpus_and_from_the_cpu() {
    let mut rng = Rng(0x4D56_4644);
    let n = 256;
    let x: Vec<f32> = (0..n).map(|_| round_to_f16(rng.sym())).collect();
    let y: Vec<f32> = (0..n).map(|_| rng.sym() * 0.3).collect();
    let differ = |a: f32, b: f32| a.to_bits() != b.to_bits();
    // Wave32 and wave64 reduce in other trees; find a row where that shows.
    let mut found = false;
    for s in 0..64 {
        let yy: Vec<f32> = y.iter().map(|v| v * (1.0 + s as f32 * 1e-3)).collect();
        if differ(MMVF_RDNA2.dot(MmvfAcc::F32, &x, &yy), MMVF_CDNA.dot(MmvfAcc::F32, &x, &yy)) {
            found = true;
            break;
        }
    }
    assert!(found, "the wave32 and wave64 trees never differ");
    // The F16 accumulator differs from the f32 one.
    assert!(differ(MMVF_RDNA2.dot(MmvfAcc::F16, &x, &y), MMVF_RDNA2.dot(MmvfAcc::F32, &x, &y)));
    // NVIDIA flushes subnormal products; AMD keeps them.
    let tiny = vec![1e-20f32; 4];
    assert_eq!(MMVF_AMPERE.dot(MmvfAcc::F32, &tiny, &tiny), 0.0);
    assert!(MMVF_RDNA2.dot(MmvfAcc::F32, &tiny, &tiny) > 0.0);
    // The CPU's F16 path (ggml_vec_dot_f16 on the query rounded to F16) is another order.
    let q16: Vec<f32> = y.iter().map(|v| round_to_f16(*v)).collect();
    let cpu = crate::elem::ElemOps::dot_f16(
        crate::elem::portable(crate::elem::ElemFlavour::X64),
        &x,
        &q16,
    );
    assert!(differ(cpu, MMVF_RDNA2.dot(MmvfAcc::F32, &x, &y)));
}

/// Distance in ulps between two finite f32 of one sign.
fn ulps(a: f32, b: f32) -> u32 {
    (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs() as u32
}

/// The device library's `sinf`/`cosf` twin against f64 on both reductions: within 2
/// ulps where the value is not tiny (its stated accuracy), hand-checked quadrant signs,
/// odd/even symmetry, and NaN for infinite arguments.
#[test]
fn gpu_ocml_sincos_against_f64() {
    let mut rng = Rng(71);
    let mut worst = 0u32;
    for k in 0..40_000u32 {
        // Magnitudes from 2^-10 to 2^40: both reductions (the large from 2^17).
        let e = (k % 50) as i32 - 10;
        let x = (1.0 + (rng.u64() >> 40) as f32 / (1u64 << 24) as f32) * 2f32.powi(e);
        let x = if k % 3 == 0 { -x } else { x };
        let (s, c) = ocml::sincosf(x);
        let (rs, rc) = ((x as f64).sin(), (x as f64).cos());
        for (v, r) in [(s, rs), (c, rc)] {
            if r.abs() > 1e-3 {
                let d = ulps(v, r as f32);
                assert!(d <= 2, "x = {x:e} ({:#010x}): {v:e} vs {r:e}, {d} ulps", x.to_bits());
                worst = worst.max(d);
            }
        }
        assert_eq!(ocml::sincosf(-x).0.to_bits(), (-s).to_bits(), "sin is odd at {x:e}");
        assert_eq!(ocml::sincosf(-x).1.to_bits(), c.to_bits(), "cos is even at {x:e}");
    }
    assert!(worst >= 1, "never one ulp off: the comparison is not looking");
    // Quadrants: sin(pi) ~ 0 (tiny positive), cos(pi) = -1, sin(3pi/2) = -1.
    assert_eq!(ocml::sincosf(std::f32::consts::PI).1, -1.0);
    assert_eq!(ocml::sincosf(3.0 * std::f32::consts::FRAC_PI_2).0, -1.0);
    assert_eq!(ocml::sincosf(0.0), (0.0, 1.0));
    assert!(ocml::sincosf(f32::INFINITY).0.is_nan() && ocml::sincosf(f32::NAN).1.is_nan());
    // Both reductions agree with each other just below and above 2^17 within the
    // polynomial's error.
    let (s1, _) = ocml::sincosf(131071.99);
    let (s2, _) = ocml::sincosf(131072.0);
    assert!(((s1 as f64) - 131071.99f32 as f64).sin().abs() < 1.0 && s2.is_finite());
}

/// The device library's `powf` twin against f64 (within 2 ulps for results in the
/// normal range) and the C standard's special cases.
#[test]
fn gpu_ocml_powf_against_f64() {
    let mut rng = Rng(72);
    for k in 0..40_000u32 {
        let x = (rng.u64() >> 40) as f32 / (1u64 << 20) as f32 + 1e-3; // (0, 16)
        let y = ((rng.u64() >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 60.0;
        let y = if k % 4 == 0 { y.round() } else { y };
        let r = (x as f64).powf(y as f64);
        if r > 1e-37 && r < 1e37 {
            let v = ocml::powf(x, y);
            let d = ulps(v, r as f32);
            assert!(d <= 2, "powf({x:e}, {y:e}) = {v:e}, f64 {r:e}: {d} ulps");
        }
    }
    // RoPE's powers: theta_scale^p for a 128-wide head and base 1e6.
    let ts = 1e6f32.powf(-2.0 / 128.0);
    for p in 0..64 {
        let v = ocml::powf(ts, p as f32);
        assert!(ulps(v, (ts as f64).powi(p) as f32) <= 1, "theta_scale^{p}");
    }
    assert_eq!(ocml::powf(2.0, 10.0), 1024.0);
    assert_eq!(ocml::powf(-2.0, 3.0), -8.0);
    assert_eq!(ocml::powf(-2.0, 2.0), 4.0);
    assert!(ocml::powf(-2.0, 0.5).is_nan());
    assert_eq!(ocml::powf(f32::NAN, 0.0), 1.0);
    assert_eq!(ocml::powf(1.0, f32::NAN), 1.0);
    assert!(ocml::powf(f32::NAN, 1.0).is_nan());
    assert_eq!(ocml::powf(0.0, -1.0), f32::INFINITY);
    assert_eq!(ocml::powf(-0.0, -1.0), f32::NEG_INFINITY);
    assert_eq!(ocml::powf(-0.0, 3.0).to_bits(), (-0.0f32).to_bits());
    assert_eq!(ocml::powf(0.5, f32::INFINITY), 0.0);
    assert_eq!(ocml::powf(2.0, f32::INFINITY), f32::INFINITY);
    assert_eq!(ocml::powf(-1.0, f32::INFINITY), 1.0);
    assert_eq!(ocml::powf(f32::INFINITY, -2.0), 0.0);
    assert_eq!(ocml::powf(f32::NEG_INFINITY, 3.0), f32::NEG_INFINITY);
    assert_eq!(ocml::powf(10.0, 40.0), f32::INFINITY);
    assert_eq!(ocml::powf(10.0, -50.0), 0.0);
}

/// The two forms of HIP's SwiGLU denominator that HIP clang emits round alike: clang 15
/// applies the device `expf`'s cut-offs to `1 + e` (`silu`'s form), clang 19 to `e`
/// before adding 1 (`1 + expf(-x)` with `expf`'s own cut-offs). Checked at and around
/// both cut-offs and over every 2^12-th f32.
#[test]
fn gpu_silu_cut_offs_inside_or_outside_round_alike() {
    let math = elem::GpuMath::Hip;
    let mut xs: Vec<f32> = (0..=u32::MAX / 4096).map(|k| f32::from_bits(k * 4096)).collect();
    for edge in [0x42B1_7218u32, 0x42CE_8ED0] {
        for d in -3i32..=3 {
            let e = f32::from_bits((edge as i32 + d) as u32);
            xs.extend([e, -e]);
        }
    }
    let mut seen_saturated = [false; 2];
    for x in xs {
        let inside = x / (1.0 + elem::expf(math, -x));
        let outside = elem::silu(math, x);
        assert!(
            inside.to_bits() == outside.to_bits() || (inside.is_nan() && outside.is_nan()),
            "x = {x:e} ({:#010x}): {inside:e} vs {outside:e}",
            x.to_bits()
        );
        seen_saturated[0] |= x > 103.0 && x.is_finite();
        seen_saturated[1] |= x < -89.0 && x.is_finite();
    }
    assert!(seen_saturated.iter().all(|&s| s));
}

/// The MMVQ types besides Q4_K, Q6_K and Q8_0.
const OTHER_TYPES: [GgmlType; 8] = [
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q2_K,
    GgmlType::Q3_K,
    GgmlType::Q5_K,
    GgmlType::IQ4_NL,
    GgmlType::IQ4_XS,
];

/// A row of `k` values of one of the [`OTHER_TYPES`]: every byte random, then each
/// block's f16 scale set by `d` and its f16 offset (min) by `m`.
fn other_row(
    r: &mut Rng,
    ty: GgmlType,
    k: usize,
    d: &mut dyn FnMut(&mut Rng) -> [u8; 2],
    m: &mut dyn FnMut(&mut Rng) -> [u8; 2],
) -> Vec<u8> {
    use crate::blocks::{
        BlockIq4Nl, BlockIq4Xs, BlockQ2K, BlockQ3K, BlockQ4_1, BlockQ5K, BlockQ5_0, BlockQ5_1,
    };
    let mut bytes = vec![0u8; k / ty.block_size() * ty.type_size()];
    r.fill(&mut bytes);
    for b in bytes.chunks_mut(ty.type_size()) {
        match ty {
            GgmlType::Q4_1 => {
                let x: &mut BlockQ4_1 = bytemuck::from_bytes_mut(b);
                (x.d, x.m) = (d(r), m(r));
            }
            GgmlType::Q5_1 => {
                let x: &mut BlockQ5_1 = bytemuck::from_bytes_mut(b);
                (x.d, x.m) = (d(r), m(r));
            }
            GgmlType::Q5_0 => bytemuck::from_bytes_mut::<BlockQ5_0>(b).d = d(r),
            GgmlType::Q2_K => {
                let x: &mut BlockQ2K = bytemuck::from_bytes_mut(b);
                (x.d, x.dmin) = (d(r), m(r));
            }
            GgmlType::Q5_K => {
                let x: &mut BlockQ5K = bytemuck::from_bytes_mut(b);
                (x.d, x.dmin) = (d(r), m(r));
            }
            GgmlType::Q3_K => bytemuck::from_bytes_mut::<BlockQ3K>(b).d = d(r),
            GgmlType::IQ4_NL => bytemuck::from_bytes_mut::<BlockIq4Nl>(b).d = d(r),
            GgmlType::IQ4_XS => bytemuck::from_bytes_mut::<BlockIq4Xs>(b).d = d(r),
            other => unreachable!("{other} is not one of the other types"),
        }
    }
    bytes
}

/// The row with every block's scale (`scale`) or offset (`!scale`) replaced by 0, so
/// that the crate's dequantizer gives the other part alone, exactly (every product of
/// an f16 scale with these codes fits in f32's 24 bits).
fn zeroed_part(ty: GgmlType, row: &[u8], scale: bool) -> Vec<f32> {
    use crate::blocks::{BlockQ2K, BlockQ4_1, BlockQ5K, BlockQ5_1};
    let mut row = row.to_vec();
    let zero = [0u8; 2];
    for b in row.chunks_mut(ty.type_size()) {
        match (ty, scale) {
            (GgmlType::Q4_1, true) => bytemuck::from_bytes_mut::<BlockQ4_1>(b).d = zero,
            (GgmlType::Q4_1, false) => bytemuck::from_bytes_mut::<BlockQ4_1>(b).m = zero,
            (GgmlType::Q5_1, true) => bytemuck::from_bytes_mut::<BlockQ5_1>(b).d = zero,
            (GgmlType::Q5_1, false) => bytemuck::from_bytes_mut::<BlockQ5_1>(b).m = zero,
            (GgmlType::Q2_K, true) => bytemuck::from_bytes_mut::<BlockQ2K>(b).d = zero,
            (GgmlType::Q2_K, false) => bytemuck::from_bytes_mut::<BlockQ2K>(b).dmin = zero,
            (GgmlType::Q5_K, true) => bytemuck::from_bytes_mut::<BlockQ5K>(b).d = zero,
            (GgmlType::Q5_K, false) => bytemuck::from_bytes_mut::<BlockQ5K>(b).dmin = zero,
            // No offset: the whole weight is the scale part.
            (_, false) => {}
            (_, true) => return vec![0.0; row.len() / ty.type_size() * ty.block_size()],
        }
    }
    let mut out = vec![0.0f32; row.len() / ty.type_size() * ty.block_size()];
    dequantize(ty, &row, &mut out).unwrap();
    out
}

/// The value ggml's MMVQ computes for one of the [`OTHER_TYPES`] in exact arithmetic,
/// and the sum of the magnitudes of its terms, from the block fields through the
/// crate's dequantizers (independent of the twin). Q4_1 and Q5_1 add each block's
/// `m * s8` and Q5_0 its `-16 d * s8`, with `s8` the q8_1 block's f16 sum of the
/// unquantized activations: that is what the device reads, not the dequantized sum.
fn other_exact(ty: GgmlType, row: &[u8], act: &[BlockQ8_1]) -> (f64, f64) {
    let a = act_values(act);
    let scale = zeroed_part(ty, row, false);
    let offset = zeroed_part(ty, row, true);
    let (mut e, mut s) = (0.0f64, 0.0f64);
    for (j, (&w, &o)) in scale.iter().zip(&offset).enumerate() {
        let b = j / QK;
        match ty {
            // Per block `m * s8`; `offset` holds m for each value.
            GgmlType::Q4_1 | GgmlType::Q5_1 => {
                e += w as f64 * a[j];
                s += (w as f64 * a[j]).abs();
                if j % QK == 0 {
                    let t = o as f64 * act[b].s() as f64;
                    e += t;
                    s += t.abs();
                }
            }
            // The dequantized weight is d * (q - 16): d * q times the activation, and
            // per block -16 d * s8.
            GgmlType::Q5_0 => {
                let d = bytemuck::cast_slice::<u8, crate::blocks::BlockQ5_0>(row)[b].d() as f64;
                let t = (w as f64 + 16.0 * d) * a[j];
                e += t;
                s += t.abs();
                if j % QK == 0 {
                    let t = -16.0 * d * act[b].s() as f64;
                    e += t;
                    s += t.abs();
                }
            }
            _ => {
                e += (w as f64 + o as f64) * a[j];
                s += (w as f64 * a[j]).abs() + (o as f64 * a[j]).abs();
            }
        }
    }
    (e, s)
}

#[test]
fn gpu_other_types_are_exact_with_unit_scales() {
    // Every scale 1 and activations in [-8, 8] with d = 1 and s = their sum: every
    // partial is an integer below 2^24, so any order or fusion gives the integer dot
    // of the codes the crate's dequantizer reads, over whole rows, on every grid.
    let mut r = Rng(0x0DD5_0F0F_7777_0001);
    let one = f32_to_f16_bits(1.0).to_le_bytes();
    for ty in OTHER_TYPES {
        for round in 0..60 {
            let k = if round % 2 == 0 { 256 } else { 512 };
            let row = other_row(&mut r, ty, k, &mut |_| one, &mut |_| one);
            let act: Vec<BlockQ8_1> = (0..k / QK)
                .map(|_| {
                    let mut b: BlockQ8_1 = bytemuck::Zeroable::zeroed();
                    b.qs.iter_mut().for_each(|q| *q = (r.below(17) as i8 - 8) as u8);
                    let sum: i32 = b.qs.iter().map(|&q| q as i8 as i32).sum();
                    (b.d, b.s) = (one, f32_to_f16_bits(sum as f32).to_le_bytes());
                    b
                })
                .collect();
            let mut w = vec![0.0f32; k];
            dequantize(ty, &row, &mut w).unwrap();
            let want: f64 = w.iter().zip(act_values(&act)).map(|(&w, a)| w as f64 * a).sum();
            for (warp, nwarps) in [(32, 1), (32, 4), (64, 2), (64, 1)] {
                for c in [Contraction::OFF, Contraction::HIP_CLANG, Contraction::HIP_CLANG_GFX90A] {
                    let got = mmvq_gemv(ty, &row, &act, warp, nwarps, c).unwrap();
                    assert_eq!(got as f64, want, "{ty} k={k} warp={warp}x{nwarps} {c:?}");
                }
            }
        }
    }
}

#[test]
fn gpu_other_types_gemv_within_rigorous_bound() {
    // Random f16 scales and offsets (negative offsets too), the device's q8_1
    // activations; against the exact value of ggml's formula (`other_exact`).
    let mut r = Rng(0x0DD5_0F0F_7777_0002);
    let configs = [
        (32, 1, Contraction::HIP_CLANG),
        (64, 2, Contraction::HIP_CLANG_GFX90A),
        (32, 4, Contraction::NVCC),
        (32, 2, Contraction::OFF),
        (32, 8, Contraction { combine: Combine::FuseSecond, ..Contraction::HIP_CLANG }),
    ];
    for ty in OTHER_TYPES {
        // Roundings along one call's longest path (unfused), as `call_depth`.
        let depth = match ty {
            GgmlType::Q2_K | GgmlType::Q3_K => 10,
            GgmlType::Q5_K => 6,
            GgmlType::Q4_1 | GgmlType::Q5_0 | GgmlType::Q5_1 => 4,
            _ => 2,
        };
        let (qk, qi, vdr) = match ty {
            GgmlType::Q2_K | GgmlType::Q3_K => (256, 16, 1),
            GgmlType::Q5_K => (256, 32, 2),
            GgmlType::IQ4_XS => (256, 32, 4),
            _ => (32, 4, 2),
        };
        for k in (256..=2048).step_by(256) {
            for _ in 0..4 {
                let row = other_row(&mut r, ty, k, &mut |r| r.half(-12, -4), &mut |r| {
                    let mut h = r.half(-12, -4);
                    h[1] |= (r.below(2) as u8) << 7;
                    h
                });
                let act = quantize_q8_1_mmvq(&r.activations(k));
                let (e, s) = other_exact(ty, &row, &act);
                // Q4_1 and Q5_1 round d * d8 and m * s8 to f16 (`__hmul2`): each
                // product within 2^-11 of itself or 2^-25 (half the f16 subnormal
                // step), scaled by what it multiplies.
                let f16_err = if matches!(ty, GgmlType::Q4_1 | GgmlType::Q5_1) {
                    let mut codes = vec![0.0f32; k];
                    dequantize(ty, &zero_scales_to_one(ty, &row), &mut codes).unwrap();
                    let q8: Vec<f64> =
                        act.iter().flat_map(|b| b.qs.map(|q| (q as i8 as f64).abs())).collect();
                    (0..k / QK)
                        .map(|b| {
                            let (d, m) = legacy_d_m(ty, &row, b);
                            let y = &act[b];
                            let sq: f64 = (0..QK)
                                .map(|j| (codes[b * QK + j] as f64).abs() * q8[b * QK + j])
                                .sum();
                            let dd8 = (d * y.d() as f64).abs();
                            let ms8 = (m * y.s() as f64).abs();
                            (dd8 * 2f64.powi(-11) + 2f64.powi(-25)) * sq
                                + ms8 * 2f64.powi(-11)
                                + 2f64.powi(-25)
                        })
                        .sum::<f64>()
                        * 1.01
                } else {
                    0.0
                };
                for (warp, nwarps, c) in configs {
                    let v = mmvq_gemv(ty, &row, &act, warp, nwarps, c).unwrap();
                    let calls = (k / qk).div_ceil(vdr * nwarps * warp / qi);
                    let n = depth + calls + (nwarps - 1) + warp.trailing_zeros() as usize;
                    let bound = gamma(n) * s * 1.01 + f16_err;
                    let err = (v as f64 - e).abs();
                    assert!(
                        err <= bound,
                        "{ty} k={k} {warp}x{nwarps} {c:?}: |{v:e} - {e:e}| = {err:e} > {bound:e}"
                    );
                }
            }
        }
    }
}

/// Q4_1 / Q5_1 block `b`'s scale and offset.
fn legacy_d_m(ty: GgmlType, row: &[u8], b: usize) -> (f64, f64) {
    use crate::blocks::{BlockQ4_1, BlockQ5_1};
    match ty {
        GgmlType::Q4_1 => {
            let x = &bytemuck::cast_slice::<u8, BlockQ4_1>(row)[b];
            (x.d() as f64, x.m() as f64)
        }
        _ => {
            let x = &bytemuck::cast_slice::<u8, BlockQ5_1>(row)[b];
            (x.d() as f64, x.m() as f64)
        }
    }
}

/// A Q4_1 / Q5_1 row with scale 1 and offset 0: its dequantized values are the codes.
fn zero_scales_to_one(ty: GgmlType, row: &[u8]) -> Vec<u8> {
    use crate::blocks::{BlockQ4_1, BlockQ5_1};
    let mut row = row.to_vec();
    let one = f32_to_f16_bits(1.0).to_le_bytes();
    for b in row.chunks_mut(ty.type_size()) {
        match ty {
            GgmlType::Q4_1 => {
                let x: &mut BlockQ4_1 = bytemuck::from_bytes_mut(b);
                (x.d, x.m) = (one, [0; 2]);
            }
            _ => {
                let x: &mut BlockQ5_1 = bytemuck::from_bytes_mut(b);
                (x.d, x.m) = (one, [0; 2]);
            }
        }
    }
    row
}

#[test]
fn gpu_q4_1_and_q5_1_round_their_scale_products_to_f16() {
    // `__hmul2(dm, ds8)`: d * d8 and m * s8 each rounded to f16 before the f32 close
    // `sumi * dd8 + ms8 * 0.5` (RDNA's fma). Hand-built: d = 1 + 2^-10, d8 = 1 + 3 *
    // 2^-10: d * d8 = 1 + 4 * 2^-10 + 3 * 2^-20, f16 1 + 4 * 2^-10. m = 3, s8 = 1 + 2^-10:
    // m * s8 = 3 + 3 * 2^-10, between the f16 neighbours 3 + 2^-9 and 3 + 2^-8 (step
    // 2^-9 in [2, 4)), a tie at 3 + 1.5 * 2^-9 rounded to even: 3 + 2^-8.
    use crate::blocks::{BlockQ4_1, BlockQ5_1};
    let h = |v: f32| f32_to_f16_bits(v).to_le_bytes();
    let (d, d8, m, s8) =
        (1.0 + 2f32.powi(-10), 1.0 + 3.0 * 2f32.powi(-10), 3.0f32, 1.0 + 2f32.powi(-10));
    assert_eq!(round_to_f16(d * d8), 1.0 + 4.0 * 2f32.powi(-10));
    assert_eq!(round_to_f16(m * s8), 3.0 + 2f32.powi(-8));
    let mut y: BlockQ8_1 = bytemuck::Zeroable::zeroed();
    (y.d, y.s) = (h(d8), h(s8));
    // Codes 1 everywhere (nibbles 0x11), q8 = 1 for the first 8 values of each half:
    // thread iqs = 0 covers ints 0, 1 (values 0..8) and 4, 5 (values 16..24).
    y.qs[..8].fill(1);
    y.qs[16..24].fill(1);
    let mut x4: BlockQ4_1 = bytemuck::Zeroable::zeroed();
    (x4.d, x4.m) = (h(d), h(m));
    x4.qs.fill(0x11);
    let mut x5: BlockQ5_1 = bytemuck::Zeroable::zeroed();
    (x5.d, x5.m) = (h(d), h(m));
    x5.qs.fill(0x11);
    // sumi = 16; fma(16, dd8, ms8 * 0.5) rounds once.
    let dd8 = 1.0 + 4.0 * 2f32.powi(-10);
    let ms8 = 3.0 + 2f32.powi(-8);
    let want = 16.0f32.mul_add(dd8, ms8 * 0.5);
    let unrounded = 16.0f32.mul_add(d * d8, (m * s8) * 0.5);
    assert_ne!(want, unrounded, "the case must tell the f16 products apart");
    let c = Contraction::HIP_CLANG;
    assert_eq!(super::vecdotq::q4_1_tail(&x4, &y, 0, c).value(), want);
    assert_eq!(super::vecdotq::q5_1_tail(&x5, &y, 0, c).value(), want);
}
