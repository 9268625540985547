//! Every lane's recipe against what its portable kernels do.
//!
//! A [`Recipe`] names the components that decide a lane's bits; these tests check each
//! field of every lane in [`LANES`] against behaviour, so a recipe cannot describe a
//! lane that the kernels are not:
//!
//! - `act_k` / `act_legacy`: the rule the lane reports for each weight type it
//!   multiplies, and the bytes `quantize_act` produces, are the named rule's;
//! - `accumulation`: the lane's `vec_dot` gives the bits of the schedule the name
//!   stands for (one kernel module per schedule, or the MMVQ reduction of the named
//!   wave size);
//! - `contraction`: a q8_0 dot built so that two blocks meet in one float lane gives
//!   the fused accumulation exactly where the contraction says so (CPU schedules),
//!   and the HIP lanes' dots are those of the compiler's fusions, not unfused ones;
//! - `layout`: `prepare` keeps plain blocks, or repacks into the named interleave (the
//!   `<rows>x<bytes>` of every layout it makes appears in the layout's name), exactly
//!   for the types and row counts the layout names, and never for a GPU;
//! - `matmul`: `vec_dot-per-row` is row-by-row `vec_dot` for any row count; the
//!   repacked path runs groups of four rows through the gemm kernel with `gemm_act`
//!   activations and the rest through the gemv kernel, and is not row-by-row vec_dot;
//! - `plain_gemm`: weights that stay plain are multiplied row by row with `vec_dot`, or
//!   (`x86-tiled-kquant-m8`) Q4_K/Q6_K at 8 or more rows by the tiled formula written
//!   out here from ggml's microkernel (exact integer sums per superblock, then
//!   `fma(-dmin, s2, d*s1)` and `fma(r, d8, acc)`), which is not row-by-row vec_dot;
//! - `elem`: the flavour's fusion and vector width are those of the tier the lane's
//!   contraction and accumulation name (its `soft_max` gives `ggml_v_expf` fused or
//!   not on whole vectors and the C library's `expf` on the tail).
//!
//! Each comparison can fail: the tests first show that the inputs tell every pair of
//! rules, schedules and fusions apart.

use tiercheck_core::arch::aarch64::i8mm::ARM_I8MM_NRC2;
use tiercheck_core::arch::aarch64::i8mm_repack::group as i8mm_repack_group;
use tiercheck_core::arch::aarch64::neon::vec_dot as neon;
use tiercheck_core::arch::aarch64::neon::ARM_TINYBLAS_Q0;
use tiercheck_core::arch::aarch64::neon_repack::group as neon_repack_group;
use tiercheck_core::arch::aarch64::sve::vec_dot as sve;
use tiercheck_core::arch::aarch64::sve::{
    GCC_AARCH64_SVE, SVE128_ACCUMULATION, SVE256_ACCUMULATION,
};
use tiercheck_core::arch::aarch64::sve_repack::{group256 as sve256_repack_group, SVE256_REPACK};
use tiercheck_core::arch::generic::vec_dot as generic;
use tiercheck_core::arch::x86_64::avx2::vec_dot as avx2;
use tiercheck_core::arch::x86_64::avx2_repack::kernels as avx2_repack;
use tiercheck_core::blocks::{self, cast_blocks, BlockQ8_0, BlockQ8_1};
use tiercheck_core::elem::{self, ElemOps};
use tiercheck_core::gpu::{self, MmvqTable};
use tiercheck_core::lane::{
    Accumulation, Contraction, MatmulPath, PlainGemm, RowPath, WeightLayout,
};
use tiercheck_core::quant::{weights, ActRule};
use tiercheck_core::repack::{BlockQ4Kx8, BlockQ4_0x8, Prepared, RepackLayout, Target};
use tiercheck_core::{GgmlType, Lane, WeightMatrix, LANES};

/// Every activation rule (a new rule must be added here to be checked).
const RULES: [ActRule; 11] = [
    ActRule::Q8KRef,
    ActRule::Q8KFusedNearest,
    ActRule::Q8_0Ref,
    ActRule::Q8_1Ref,
    ActRule::Q8_0X86,
    ActRule::Q8_1X86,
    ActRule::Q8KX86x4,
    ActRule::Q8_1Neon,
    ActRule::Q8_0Neon,
    ActRule::Q8_1HipMmvq,
    ActRule::Q8_1CudaMmvq,
];

const TYPES: [GgmlType; 4] = [GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K];

const K: usize = 512;

/// splitmix64.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * ((self.next() >> 40) as f32 / (1u64 << 24) as f32)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One activation row of `k` values. Kinds: 0 smooth random; 1 exact rounding ties
/// (every 32 values share the maximum 127 * 2^-e, the others are (h + 1/2) * 2^-e);
/// 2 products with the scale a hair from a half (the maximum M random, the others the
/// nearest floats to (h + 1/2) * M / 127, nudged by a few ulps); 3 both signs of the
/// maximum, the negative first.
fn act_row(rng: &mut Rng, kind: usize, k: usize) -> Vec<f32> {
    let mut x = vec![0.0f32; k];
    for b in x.chunks_mut(32) {
        match kind {
            0 => b.iter_mut().for_each(|v| *v = rng.uniform(-3.0, 3.0)),
            1 => {
                let s = 2f32.powi(-(rng.below(6) as i32));
                b[0] = if rng.below(2) == 0 { 127.0 * s } else { -127.0 * s };
                for v in &mut b[1..] {
                    *v = (rng.below(253) as f32 - 126.0 + 0.5) * s;
                }
            }
            2 => {
                let m = rng.uniform(1.0, 2.0);
                b[0] = m;
                for v in &mut b[1..] {
                    let h = rng.below(253) as f64 - 126.0;
                    let t = ((h + 0.5) * m as f64 / 127.0) as f32;
                    let nudge = rng.below(7) as i32 - 3;
                    *v = f32::from_bits((t.to_bits() as i32 + nudge) as u32);
                }
            }
            _ => {
                let m = rng.uniform(2.0, 4.0);
                b.iter_mut().for_each(|v| *v = rng.uniform(-1.0, 1.0));
                b[0] = -m;
                b[7] = m;
            }
        }
    }
    x
}

/// `m` activation rows, cycling through the kinds from `first`.
fn act_rows(seed: u64, first: usize, m: usize) -> Vec<f32> {
    act_rows_k(seed, first, m, K)
}

/// [`act_rows`] of length `k`.
fn act_rows_k(seed: u64, first: usize, m: usize, k: usize) -> Vec<f32> {
    let mut rng = Rng(seed);
    (0..m).flat_map(|i| act_row(&mut rng, (first + i) % 4, k)).collect()
}

/// Rows for the MMVQ schedules: long enough that every thread of a 128-thread block
/// holds a partial (with K = 512, a row has too few blocks for warps 1..3 of a
/// four-warp block to get any, and the schedules of 32 x 1, 64 x 2 and 32 x 4 threads
/// add the same partials in the same tree).
const K_MMVQ: usize = 8192;

/// `n` quantized weight rows of `ty`.
fn weight_rows(seed: u64, ty: GgmlType, n: usize) -> Vec<u8> {
    weight_rows_k(seed, ty, n, K)
}

/// [`weight_rows`] of length `k`.
fn weight_rows_k(seed: u64, ty: GgmlType, n: usize, k: usize) -> Vec<u8> {
    let mut rng = Rng(seed ^ 0x57E1_6475);
    let w: Vec<f32> = (0..n * k)
        .map(|i| {
            let scale = if (i / 256) % 3 == 2 { 8.0 } else { 1.0 };
            rng.uniform(-scale, scale)
        })
        .collect();
    weights::quantize(ty, &w, n, k).unwrap()
}

fn is_k_quant(ty: GgmlType) -> bool {
    matches!(ty, GgmlType::Q4_K | GgmlType::Q6_K)
}

/// The recipe's activation rule for weights of `ty`.
fn recipe_rule(lane: &Lane, ty: GgmlType) -> ActRule {
    if is_k_quant(ty) {
        lane.recipe.act_k
    } else {
        lane.recipe.act_legacy
    }
}

/// The weight types `lane` multiplies.
fn types_of(lane: &Lane) -> Vec<GgmlType> {
    TYPES.into_iter().filter(|&t| lane.portable.act_rule(t).is_ok()).collect()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn every_pair_of_rules_of_one_format_differs_on_the_test_rows() {
    let rows: Vec<Vec<f32>> = (0..16).map(|s| act_rows(100 + s, s as usize, 1)).collect();
    for (i, a) in RULES.iter().enumerate() {
        for b in &RULES[i + 1..] {
            if a.format() != b.format() {
                continue;
            }
            let differ = rows.iter().any(|x| a.quantize(x).unwrap() != b.quantize(x).unwrap());
            assert!(differ, "{} and {} agree on every test row", a.name(), b.name());
        }
    }
}

#[test]
fn act_rules_are_the_ones_the_lane_quantizes_with() {
    for lane in LANES {
        let mut used = (false, false);
        for ty in types_of(lane) {
            let want = recipe_rule(lane, ty);
            let got = lane.portable.act_rule(ty).unwrap();
            assert_eq!(got, want, "{} {}: act_rule says {}", lane.name, ty.name(), got.name());
            for s in 0..8 {
                let x = act_rows(200 + s, s as usize, 1);
                assert!(
                    lane.portable.quantize_act(ty, &x).unwrap() == want.quantize(&x).unwrap(),
                    "{} {}: quantize_act is not {} (row kind {})",
                    lane.name,
                    ty.name(),
                    want.name(),
                    s % 4
                );
            }
            if is_k_quant(ty) {
                used.0 = true;
            } else {
                used.1 = true;
            }
        }
        assert!(used.0, "{}: act_k applies to no weight type the lane multiplies", lane.name);
        assert!(used.1, "{}: act_legacy applies to no weight type the lane multiplies", lane.name);
    }
}

/// The wave size and `calc_nwarps` table of a HIP MMVQ schedule.
fn mmvq_shape(acc: Accumulation) -> Option<(usize, MmvqTable)> {
    match acc {
        Accumulation::HipMmvqWave32 => Some((32, MmvqTable::Rdna2)),
        Accumulation::HipMmvqWave64 => Some((64, MmvqTable::Gcn)),
        Accumulation::CudaMmvq => Some((32, MmvqTable::Generic)),
        _ => None,
    }
}

/// The device compiler's fusions for a recipe contraction on a wave size.
fn gpu_contraction(c: Contraction, wave: usize) -> gpu::Contraction {
    match (c, wave) {
        (Contraction::HipClang, 32) => gpu::Contraction::HIP_CLANG,
        (Contraction::Nvcc, _) => gpu::Contraction::NVCC,
        (Contraction::HipClang, _) => gpu::Contraction::HIP_CLANG_GFX90A,
        (Contraction::None, _) => gpu::Contraction::OFF,
        (other, _) => panic!("no device fusions known for contraction {}", other.name()),
    }
}

/// The dot product of one weight row with quantized activations by the schedule
/// `acc` (and, for the HIP schedules, the device fusions of `contraction`).
fn schedule_dot(
    acc: Accumulation,
    contraction: Contraction,
    ty: GgmlType,
    w: &[u8],
    act: &[u8],
) -> f32 {
    if let Some((wave, table)) = mmvq_shape(acc) {
        let y: &[BlockQ8_1] = cast_blocks(GgmlType::Q8_1, act).unwrap();
        let nwarps = gpu::nwarps_one_column(table, ty);
        return gpu::mmvq_gemv(ty, w, y, wave, nwarps, gpu_contraction(contraction, wave)).unwrap();
    }
    let f = cpu_kernels(acc).unwrap_or_else(|| {
        panic!("no kernel known for accumulation {}: extend this test", acc.name())
    });
    let fmt = if is_k_quant(ty) { GgmlType::Q8_K } else { GgmlType::Q8_0 };
    match ty {
        GgmlType::Q4_0 => f.0(cast_blocks(ty, w).unwrap(), cast_blocks(fmt, act).unwrap()),
        GgmlType::Q8_0 => f.1(cast_blocks(ty, w).unwrap(), cast_blocks(fmt, act).unwrap()),
        GgmlType::Q4_K => f.2(cast_blocks(ty, w).unwrap(), cast_blocks(fmt, act).unwrap()),
        _ => f.3(cast_blocks(ty, w).unwrap(), cast_blocks(fmt, act).unwrap()),
    }
}

/// The `nrc == 1` vec_dot kernels of a CPU schedule: Q4_0, Q8_0, Q4_K, Q6_K.
type Fns = (
    fn(&[blocks::BlockQ4_0], &[BlockQ8_0]) -> f32,
    fn(&[BlockQ8_0], &[BlockQ8_0]) -> f32,
    fn(&[blocks::BlockQ4K], &[blocks::BlockQ8K]) -> f32,
    fn(&[blocks::BlockQ6K], &[blocks::BlockQ8K]) -> f32,
);

/// The twin kernels a CPU accumulation schedule names, if known.
fn cpu_kernels(acc: Accumulation) -> Option<Fns> {
    Some(match acc {
        Accumulation::GgmlGeneric => (
            generic::vec_dot_q4_0_q8_0,
            generic::vec_dot_q8_0_q8_0,
            generic::vec_dot_q4_k_q8_k,
            generic::vec_dot_q6_k_q8_k,
        ),
        Accumulation::X86Avx2 => (
            avx2::vec_dot_q4_0_q8_0,
            avx2::vec_dot_q8_0_q8_0,
            avx2::vec_dot_q4_k_q8_k,
            avx2::vec_dot_q6_k_q8_k,
        ),
        Accumulation::NeonSerial => (
            neon::vec_dot_q4_0_q8_0,
            neon::vec_dot_q8_0_q8_0,
            neon::vec_dot_q4_k_q8_k,
            neon::vec_dot_q6_k_q8_k,
        ),
        // ggml's SVE-128 kernels for the legacy types; the K-quants keep NEON's order.
        SVE128_ACCUMULATION => (
            sve::vec_dot_q4_0_q8_0_sve128,
            sve::vec_dot_q8_0_q8_0_sve128,
            neon::vec_dot_q4_k_q8_k,
            neon::vec_dot_q6_k_q8_k,
        ),
        SVE256_ACCUMULATION => (
            sve::vec_dot_q4_0_q8_0_sve256,
            sve::vec_dot_q8_0_q8_0_sve256,
            neon::vec_dot_q4_k_q8_k,
            neon::vec_dot_q6_k_q8_k,
        ),
        _ => return None,
    })
}

/// Whether two CPU schedules name the same twin kernel for `ty` (then they agree on it
/// by construction, and the pair is told apart by the other types).
fn shared_kernel(a: Accumulation, b: Accumulation, ty: GgmlType) -> bool {
    let (Some(fa), Some(fb)) = (cpu_kernels(a), cpu_kernels(b)) else { return false };
    match ty {
        GgmlType::Q4_0 => std::ptr::fn_addr_eq(fa.0, fb.0),
        GgmlType::Q8_0 => std::ptr::fn_addr_eq(fa.1, fb.1),
        GgmlType::Q4_K => std::ptr::fn_addr_eq(fa.2, fb.2),
        _ => std::ptr::fn_addr_eq(fa.3, fb.3),
    }
}

/// The schedules the lanes name, with the contraction of a lane naming each.
fn schedules() -> Vec<(Accumulation, Contraction)> {
    let mut v: Vec<(Accumulation, Contraction)> = Vec::new();
    for l in LANES {
        if !v.iter().any(|(a, _)| *a == l.recipe.accumulation) {
            v.push((l.recipe.accumulation, l.recipe.contraction));
        }
    }
    v
}

#[test]
fn every_pair_of_schedules_differs_on_the_test_rows() {
    let sched = schedules();
    // Pairs told apart on at least one type.
    let mut told_apart = std::collections::HashSet::new();
    for ty in TYPES {
        let w_short = weight_rows(7, ty, 6);
        let w_long = weight_rows_k(7, ty, 6, K_MMVQ);
        for (i, &(a, ca)) in sched.iter().enumerate() {
            for &(b, cb) in &sched[i + 1..] {
                // Both schedules read the same activation format (q8_1 for the HIP ones).
                if mmvq_shape(a).is_some() != mmvq_shape(b).is_some() {
                    continue;
                }
                if mmvq_shape(a).is_some() && ty == GgmlType::Q4_0 {
                    continue; // MMVQ has no q4_0 kernel here
                }
                if shared_kernel(a, b, ty) {
                    continue;
                }
                let rule = if mmvq_shape(a).is_some() {
                    ActRule::Q8_1HipMmvq
                } else if is_k_quant(ty) {
                    ActRule::Q8KRef
                } else {
                    ActRule::Q8_0Ref
                };
                let k = if mmvq_shape(a).is_some() { K_MMVQ } else { K };
                let w = if k == K { &w_short } else { &w_long };
                let row_bytes = ty.row_bytes(k).unwrap();
                let differ = (0..8).any(|s| {
                    let act = rule.quantize(&act_rows_k(300 + s, s as usize, 1, k)).unwrap();
                    w.chunks(row_bytes).any(|row| {
                        schedule_dot(a, ca, ty, row, &act).to_bits()
                            != schedule_dot(b, cb, ty, row, &act).to_bits()
                    })
                });
                assert!(differ, "{} and {} agree on every {} dot", a.name(), b.name(), ty.name());
                told_apart.insert((a.name(), b.name()));
            }
        }
    }
    for (i, &(a, _)) in sched.iter().enumerate() {
        for &(b, _) in &sched[i + 1..] {
            if mmvq_shape(a).is_some() == mmvq_shape(b).is_some() {
                assert!(
                    told_apart.contains(&(a.name(), b.name())),
                    "{} and {} share every kernel: one schedule, two names",
                    a.name(),
                    b.name()
                );
            }
        }
    }
}

#[test]
fn accumulation_names_the_schedule_of_vec_dot() {
    for lane in LANES {
        let r = &lane.recipe;
        for ty in types_of(lane) {
            let w = weight_rows(11, ty, 4);
            for s in 0..8 {
                let act =
                    recipe_rule(lane, ty).quantize(&act_rows(400 + s, s as usize, 1)).unwrap();
                for row in w.chunks(ty.row_bytes(K).unwrap()) {
                    let got = lane.portable.vec_dot(ty, row, &act).unwrap();
                    let want = schedule_dot(r.accumulation, r.contraction, ty, row, &act);
                    assert_eq!(
                        got.to_bits(),
                        want.to_bits(),
                        "{} {}: vec_dot {got:e} is not the {} schedule's {want:e}",
                        lane.name,
                        ty.name(),
                        r.accumulation.name()
                    );
                }
            }
        }
    }
}

/// A q8_0 weight row and activation row of four blocks in which only blocks 0 and 2
/// are non-zero, and only in bytes 0..4: every CPU schedule adds their two products
/// in one float lane (or one serial sum). Returns the two rows and the two ways that
/// lane can end: `fma(d2, s2, d0 * s0)` and `d0 * s0 + d2 * s2`, which differ.
fn two_block_q8_0() -> (Vec<u8>, Vec<u8>, f32, f32) {
    let mut rng = Rng(0xF05E_D000);
    loop {
        let f16 = |v: f32| half::f16::from_f32(v).to_bits().to_le_bytes();
        let mut w = vec![BlockQ8_0 { d: [0; 2], qs: [0; 32] }; 4];
        let mut y = w.clone();
        let mut d = [0.0f32; 4];
        let mut s = [0i32; 4];
        for b in [0, 2] {
            w[b].d = f16(rng.uniform(0.001, 0.1));
            y[b].d = f16(rng.uniform(0.001, 0.1));
            for j in 0..4 {
                w[b].qs[j] = (rng.below(255) as i32 - 127) as i8 as u8;
                y[b].qs[j] = (rng.below(255) as i32 - 127) as i8 as u8;
            }
            d[b] = w[b].d() * y[b].d();
            s[b] = (0..4).map(|j| w[b].q(j) as i32 * y[b].q(j) as i32).sum();
        }
        let fused = d[2].mul_add(s[2] as f32, d[0] * s[0] as f32);
        let unfused = d[0] * s[0] as f32 + d[2] * s[2] as f32;
        if fused.to_bits() != unfused.to_bits() {
            let bytes = |v: &[BlockQ8_0]| bytemuck::cast_slice::<BlockQ8_0, u8>(v).to_vec();
            return (bytes(&w), bytes(&y), fused, unfused);
        }
    }
}

#[test]
fn contraction_is_what_the_kernels_fuse() {
    let (w, y, fused, unfused) = two_block_q8_0();
    let x: Vec<f32> = act_rows(500, 0, 1);
    for lane in LANES {
        let r = &lane.recipe;
        if let Some((wave, _)) = mmvq_shape(r.accumulation) {
            // The device's fusions matter: the lane's dots are not the unfused ones.
            let act = ActRule::Q8_1HipMmvq.quantize(&x).unwrap();
            let y1: &[BlockQ8_1] = cast_blocks(GgmlType::Q8_1, &act).unwrap();
            let mut differs = false;
            for ty in types_of(lane) {
                let w = weight_rows(13, ty, 8);
                for row in w.chunks(ty.row_bytes(K).unwrap()) {
                    let got = lane.portable.vec_dot(ty, row, &act).unwrap();
                    let nw = gpu::nwarps_one_column(mmvq_shape(r.accumulation).unwrap().1, ty);
                    let off = gpu::mmvq_gemv(ty, row, y1, wave, nw, gpu::Contraction::OFF).unwrap();
                    differs |= got.to_bits() != off.to_bits();
                }
            }
            assert_eq!(
                differs,
                r.contraction != Contraction::None,
                "{}: contraction {} but the dots {} the unfused ones",
                lane.name,
                r.contraction.name(),
                if differs { "differ from" } else { "equal" }
            );
            continue;
        }
        let fuses_accumulation = match r.contraction {
            Contraction::None => false,
            Contraction::FusedAccumulate => true,
            // `vmlaq` intrinsics are not fused by GCC; only C expressions are.
            Contraction::GccAarch64 => false,
            // SVE's `svmla` is a fused multiply-add.
            GCC_AARCH64_SVE => true,
            other => panic!("{}: no CPU meaning known for {}", lane.name, other.name()),
        };
        let got = lane.portable.vec_dot(GgmlType::Q8_0, &w, &y).unwrap();
        let (want, other) = if fuses_accumulation { (fused, unfused) } else { (unfused, fused) };
        assert_eq!(
            got.to_bits(),
            want.to_bits(),
            "{}: contraction {}: the two-block q8_0 dot {got:e} should be {want:e}, not {other:e}",
            lane.name,
            r.contraction.name()
        );
    }
}

/// The layout `layout` makes of `n` rows of `ty`, if it repacks them.
fn expected_repack(layout: WeightLayout, ty: GgmlType, n: usize) -> Option<RepackLayout> {
    let (l, rows) = match (layout, ty) {
        (WeightLayout::Plain, _) => return None,
        // 256-bit SVE: q4_0_8x8 where the rows allow it, else the i8mm build's 4x8.
        (SVE256_REPACK, GgmlType::Q4_0) if n.is_multiple_of(8) => (RepackLayout::Q4_0_8x8, 8),
        (SVE256_REPACK, _) => return expected_repack(WeightLayout::ArmI8mmRepack, ty, n),
        (WeightLayout::X86Repack8x8, GgmlType::Q4_K) => (RepackLayout::Q4K8x8, 8),
        (WeightLayout::X86Repack8x8, GgmlType::Q4_0) => (RepackLayout::Q4_0_8x8, 8),
        (WeightLayout::ArmDotprodRepack, GgmlType::Q4_K) => (RepackLayout::Q4K8x4, 8),
        (WeightLayout::ArmDotprodRepack, GgmlType::Q6_K) => (RepackLayout::Q6K8x4, 8),
        (WeightLayout::ArmDotprodRepack, GgmlType::Q4_0) => (RepackLayout::Q4_0_4x4, 4),
        (WeightLayout::ArmDotprodRepack, GgmlType::Q8_0) => (RepackLayout::Q8_0_4x4, 4),
        (WeightLayout::ArmI8mmRepack, GgmlType::Q4_K) => (RepackLayout::Q4K8x8, 8),
        (WeightLayout::ArmI8mmRepack, GgmlType::Q6_K) => (RepackLayout::Q6K8x8, 8),
        (WeightLayout::ArmI8mmRepack, GgmlType::Q4_0) => (RepackLayout::Q4_0_4x8, 4),
        (WeightLayout::ArmI8mmRepack, GgmlType::Q8_0) => (RepackLayout::Q8_0_4x8, 4),
        (
            WeightLayout::X86Repack8x8
            | WeightLayout::ArmDotprodRepack
            | WeightLayout::ArmI8mmRepack,
            _,
        ) => return None,
        (other, _) => panic!("no expectation for layout {}: extend this test", other.name()),
    };
    n.is_multiple_of(rows).then_some(l)
}

#[test]
fn weight_layout_is_what_prepare_makes() {
    for lane in LANES {
        let layout = lane.recipe.layout;
        let mut repacked_any = false;
        for ty in types_of(lane) {
            for n in [3usize, 4, 8, 12, 16, 24] {
                let bytes = weight_rows(17 + n as u64, ty, n);
                let wm = WeightMatrix::new(ty, n, K, &bytes).unwrap();
                let gpu = lane.portable.prepare(wm, Target::Gpu).unwrap();
                assert!(matches!(gpu, Prepared::Plain(_)), "{}: repacked for a GPU", lane.name);
                let p = lane.portable.prepare(wm, Target::Cpu).unwrap();
                let made = match &p {
                    Prepared::Plain(w) => {
                        assert_eq!(w.data(), &bytes[..], "{}: plain weights changed", lane.name);
                        None
                    }
                    Prepared::Repacked(r) => {
                        assert_eq!(
                            r.to_plain(),
                            bytes,
                            "{} {}: not a repack",
                            lane.name,
                            r.layout().name()
                        );
                        assert_eq!((r.n(), r.k()), (n, K));
                        Some(r.layout())
                    }
                };
                assert_eq!(
                    made,
                    expected_repack(layout, ty, n),
                    "{}: layout {} with {} rows of {}",
                    lane.name,
                    layout.name(),
                    n,
                    ty.name()
                );
                if let Some(l) = made {
                    repacked_any = true;
                    // `q4_K_8x4`: 8 rows interleaved 4 bytes at a time.
                    let shape = l.name().rsplit('_').next().unwrap();
                    assert_eq!(shape, format!("{}x{}", l.cols(), l.interleave()), "{}", l.name());
                    assert!(
                        layout.name().contains(shape),
                        "{}: layout {} makes {}",
                        lane.name,
                        layout.name(),
                        l.name()
                    );
                    assert_eq!(l.source(), ty);
                }
                let x = act_rows(600, 1, 3);
                assert_eq!(
                    bits(&lane.portable.matmul_prepared(&p, &x, 3).unwrap()),
                    bits(&lane.portable.matmul(&wm, &x, 3).unwrap()),
                    "{}: matmul on the prepared weights is not matmul",
                    lane.name
                );
            }
        }
        assert_eq!(repacked_any, layout != WeightLayout::Plain, "{}: {}", lane.name, layout.name());
    }
}

/// The x86 repacked kernels (`dot::avx2_repack`): q4_K 8x8 gemm and gemv, q4_0 8x8 gemv
/// for every row.
fn x86_group(layout: RepackLayout, path: RowPath, group: &[u8], act: &[u8], out: &mut [f32]) {
    let cols = match layout {
        RepackLayout::Q4K8x8 => {
            let b: &[BlockQ4Kx8] = bytemuck::cast_slice(group);
            let y = cast_blocks(GgmlType::Q8_K, act).unwrap();
            match path {
                RowPath::Gemm => avx2_repack::gemm_q4_k_8x8(b, y),
                RowPath::Gemv => avx2_repack::gemv_q4_k_8x8(b, y),
            }
        }
        RepackLayout::Q4_0_8x8 => {
            let b: &[BlockQ4_0x8] = bytemuck::cast_slice(group);
            avx2_repack::gemv_q4_0_8x8(b, cast_blocks(GgmlType::Q8_0, act).unwrap())
        }
        other => panic!("{} is not an x86 layout", other.name()),
    };
    out.copy_from_slice(&cols);
}

/// The kernels of the layouts `layout` makes.
fn layout_kernel(
    layout: WeightLayout,
    l: RepackLayout,
    path: RowPath,
    group: &[u8],
    act: &[u8],
    out: &mut [f32],
) {
    match layout {
        WeightLayout::X86Repack8x8 => x86_group(l, path, group, act, out),
        WeightLayout::ArmDotprodRepack => neon_repack_group(l, path, group, act, out).unwrap(),
        WeightLayout::ArmI8mmRepack => i8mm_repack_group(l, path, group, act, out).unwrap(),
        SVE256_REPACK => sve256_repack_group(l, path, group, act, out).unwrap(),
        other => panic!("no kernels known for layout {}", other.name()),
    }
}

/// The exact integer sums of one Q4_K superblock against one Q8_K block, decoded from
/// the block layout here (not by the lane code): `(sum_s sc_s * dot_s, sum_s min_s *
/// (bsums[2s] + bsums[2s+1]))`, in i64.
fn q4_k_sums(
    w: &tiercheck_core::blocks::BlockQ4K,
    y: &tiercheck_core::blocks::BlockQ8K,
) -> (i64, i64) {
    use tiercheck_core::blocks::q4_k::scale_min_k4;
    let (mut isum, mut bias) = (0i64, 0i64);
    for s in 0..8 {
        let (sc, mn) = scale_min_k4(s, &w.scales);
        let mut dot = 0i64;
        for e in 32 * s..32 * s + 32 {
            let byte = w.qs[32 * (e / 64) + e % 32];
            let q = if e % 64 < 32 { byte & 15 } else { byte >> 4 };
            dot += q as i64 * y.q(e) as i64;
        }
        isum += sc as i64 * dot;
        bias += mn as i64 * (y.bsum(2 * s) as i64 + y.bsum(2 * s + 1) as i64);
    }
    (isum, bias)
}

/// ggml's x86 tiled K-quant matmul, written out independently of the lane code: per
/// superblock the exact integer sums (i64, checked to fit the microkernel's i32), then
/// `r = fma(-dmin, s2, d * s1)` (Q4_K) or `d * s1` (Q6_K) and `acc = fma(r, d8, acc)`.
fn x86_tiled_matmul(wm: &WeightMatrix<'_>, x: &[f32], rule: ActRule) -> Vec<f32> {
    use tiercheck_core::blocks::{BlockQ4K, BlockQ6K, BlockQ8K};
    let (n, k) = (wm.n(), wm.k());
    let m = x.len() / k;
    let acts: Vec<Vec<u8>> = x.chunks(k).map(|xi| rule.quantize(xi).unwrap()).collect();
    let mut out = vec![0.0f32; m * n];
    for (i, a) in acts.iter().enumerate() {
        let ys: &[BlockQ8K] = cast_blocks(GgmlType::Q8_K, a).unwrap();
        for j in 0..n {
            let mut acc = 0.0f32;
            for (b, y) in ys.iter().enumerate() {
                let r = match wm.ty() {
                    GgmlType::Q4_K => {
                        let w: &[BlockQ4K] = cast_blocks(GgmlType::Q4_K, wm.row(j)).unwrap();
                        let w = &w[b];
                        let (s1, s2) = q4_k_sums(w, y);
                        let (s1, s2) = (i32::try_from(s1).unwrap(), i32::try_from(s2).unwrap());
                        (-w.dmin()).mul_add(s2 as f32, w.d() * s1 as f32)
                    }
                    GgmlType::Q6_K => {
                        let w: &[BlockQ6K] = cast_blocks(GgmlType::Q6_K, wm.row(j)).unwrap();
                        let w = &w[b];
                        let q = w.quants();
                        let mut s1 = 0i64;
                        for s in 0..16 {
                            let dot: i64 =
                                (16 * s..16 * s + 16).map(|e| q[e] as i64 * y.q(e) as i64).sum();
                            s1 += w.scale(s) as i64 * dot;
                        }
                        w.d() * i32::try_from(s1).unwrap() as f32
                    }
                    other => panic!("no tiled path for {}", other.name()),
                };
                acc = r.mul_add(y.d(), acc);
            }
            out[i * n + j] = acc;
        }
    }
    out
}

/// The i8mm build's `nrc == 2` vec_dot tile, written out independently of the lane code
/// (each output of a tile is its own chain): per block or superblock the exact integer
/// sums (i64, checked to fit i32), then `acc = acc + round(isum * round(d_x * d_y))`,
/// preceded for Q4_K by `acc = acc - round(bias * round(dmin_x * d_y))`.
/// `fused`: the SVE + i8mm tiles of the K-quants (scale term first, every step one
/// fused multiply-add); otherwise the NEON i8mm ones (min term first, unfused).
fn arm_nrc2_matmul(wm: &WeightMatrix<'_>, x: &[f32], rule: ActRule, fused: bool) -> Vec<f32> {
    use tiercheck_core::blocks::{BlockQ4K, BlockQ4_0, BlockQ6K, BlockQ8K, BlockQ8_0};
    let (n, k) = (wm.n(), wm.k());
    let m = x.len() / k;
    let acts: Vec<Vec<u8>> = x.chunks(k).map(|xi| rule.quantize(xi).unwrap()).collect();
    let fit = |v: i64| i32::try_from(v).unwrap() as f32;
    let mut out = vec![0.0f32; m * n];
    for (i, a) in acts.iter().enumerate() {
        for j in 0..n {
            let mut acc = 0.0f32;
            match wm.ty() {
                GgmlType::Q4_0 | GgmlType::Q8_0 => {
                    let ys: &[BlockQ8_0] = cast_blocks(GgmlType::Q8_0, a).unwrap();
                    for (b, y) in ys.iter().enumerate() {
                        let (codes, d): (Vec<i64>, f32) = if wm.ty() == GgmlType::Q4_0 {
                            let w: &[BlockQ4_0] = cast_blocks(GgmlType::Q4_0, wm.row(j)).unwrap();
                            let c = (0..32)
                                .map(|e| {
                                    let q = w[b].qs[e % 16];
                                    (if e < 16 { q & 15 } else { q >> 4 }) as i64 - 8
                                })
                                .collect();
                            (c, w[b].d())
                        } else {
                            let w: &[BlockQ8_0] = cast_blocks(GgmlType::Q8_0, wm.row(j)).unwrap();
                            ((0..32).map(|e| w[b].q(e) as i64).collect(), w[b].d())
                        };
                        let isum: i64 = (0..32).map(|e| codes[e] * y.q(e) as i64).sum();
                        acc += fit(isum) * (d * y.d());
                    }
                }
                GgmlType::Q4_K => {
                    let ys: &[BlockQ8K] = cast_blocks(GgmlType::Q8_K, a).unwrap();
                    let w: &[BlockQ4K] = cast_blocks(GgmlType::Q4_K, wm.row(j)).unwrap();
                    for (w, y) in w.iter().zip(ys) {
                        let (isum, bias) = q4_k_sums(w, y);
                        if fused {
                            acc = fit(isum).mul_add(y.d() * w.d(), acc);
                            acc = (-(y.d() * w.dmin())).mul_add(fit(bias), acc);
                        } else {
                            acc -= fit(bias) * (w.dmin() * y.d());
                            acc += fit(isum) * (w.d() * y.d());
                        }
                    }
                }
                GgmlType::Q6_K => {
                    let ys: &[BlockQ8K] = cast_blocks(GgmlType::Q8_K, a).unwrap();
                    let w: &[BlockQ6K] = cast_blocks(GgmlType::Q6_K, wm.row(j)).unwrap();
                    for (w, y) in w.iter().zip(ys) {
                        let q = w.quants();
                        let isum: i64 = (0..256)
                            .map(|e| w.scale(e / 16) as i64 * q[e] as i64 * y.q(e) as i64)
                            .sum();
                        if fused {
                            acc = fit(isum).mul_add(y.d() * w.d(), acc);
                        } else {
                            acc += fit(isum) * (w.d() * y.d());
                        }
                    }
                }
                other => panic!("no nrc=2 path for {}", other.name()),
            }
            out[i * n + j] = acc;
        }
    }
    out
}

/// llamafile's `tinyBLAS_Q0_ARM`, written out independently of the lane code: per block
/// the four lane sums of the `sdot`s (lane t: values 4t..4t+4 and 16+4t..16+4t+4), each
/// accumulated unfused (`c_t = c_t + round(isum_t * round(d_x * d_y))`), then
/// `(c0 + c1) + (c2 + c3)`.
fn arm_tinyblas_matmul(wm: &WeightMatrix<'_>, x: &[f32], rule: ActRule) -> Vec<f32> {
    use tiercheck_core::blocks::{BlockQ4_0, BlockQ8_0};
    let (n, k) = (wm.n(), wm.k());
    let m = x.len() / k;
    let mut out = vec![0.0f32; m * n];
    for (i, xi) in x.chunks(k).enumerate() {
        let a = rule.quantize(xi).unwrap();
        let ys: &[BlockQ8_0] = cast_blocks(GgmlType::Q8_0, &a).unwrap();
        for j in 0..n {
            let mut c = [0.0f32; 4];
            for (b, y) in ys.iter().enumerate() {
                let (codes, d): ([i32; 32], f32) = if wm.ty() == GgmlType::Q4_0 {
                    let w: &[BlockQ4_0] = cast_blocks(GgmlType::Q4_0, wm.row(j)).unwrap();
                    let q = &w[b].qs;
                    let codes = core::array::from_fn(|e| {
                        (if e < 16 { q[e] & 15 } else { q[e - 16] >> 4 }) as i32 - 8
                    });
                    (codes, w[b].d())
                } else {
                    let w: &[BlockQ8_0] = cast_blocks(GgmlType::Q8_0, wm.row(j)).unwrap();
                    (core::array::from_fn(|e| w[b].q(e) as i32), w[b].d())
                };
                for (t, ct) in c.iter_mut().enumerate() {
                    let isum: i32 = [4 * t, 16 + 4 * t]
                        .iter()
                        .flat_map(|&o| o..o + 4)
                        .map(|e| codes[e] * y.q(e) as i32)
                        .sum();
                    *ct += isum as f32 * (d * y.d());
                }
            }
            out[i * n + j] = (c[0] + c[1]) + (c[2] + c[3]);
        }
    }
    out
}

#[test]
fn matmul_path_is_what_matmul_does() {
    for lane in LANES {
        let r = &lane.recipe;
        let (mut not_per_row, mut gemm_differs, mut tiled_differs) = (false, false, false);
        assert!(
            [PlainGemm::VecDot, PlainGemm::X86TiledK, ARM_I8MM_NRC2, ARM_TINYBLAS_Q0]
                .contains(&r.plain_gemm),
            "{}: no expectation for plain gemm {}",
            lane.name,
            r.plain_gemm.name()
        );
        for ty in types_of(lane) {
            for n in [8usize, 10, 12, 16] {
                let bytes = weight_rows(19 + n as u64, ty, n);
                let wm = WeightMatrix::new(ty, n, K, &bytes).unwrap();
                for m in [1usize, 2, 3, 4, 5, 8, 9] {
                    let x = act_rows(700 + m as u64, m, m);
                    let got = lane.portable.matmul(&wm, &x, m).unwrap();
                    assert_eq!(got.len(), m * n);
                    // Row by row: the lane's vec_dot on its own activation codes.
                    let per_row: Vec<f32> = x
                        .chunks(K)
                        .flat_map(|xi| {
                            let act = lane.portable.quantize_act(ty, xi).unwrap();
                            (0..n)
                                .map(|j| lane.portable.vec_dot(ty, wm.row(j), &act).unwrap())
                                .collect::<Vec<f32>>()
                        })
                        .collect();
                    let prepared = lane.portable.prepare(wm, Target::Cpu).unwrap();
                    let tiled = r.plain_gemm == PlainGemm::X86TiledK && is_k_quant(ty) && m >= 8;
                    let nrc2 = r.plain_gemm == ARM_I8MM_NRC2 && n % 2 == 0 && m % 2 == 0;
                    let tinyblas = r.plain_gemm == ARM_TINYBLAS_Q0 && !is_k_quant(ty) && m >= 2;
                    let want = match (r.matmul, &prepared) {
                        (_, Prepared::Plain(_)) if tiled => {
                            let want = x86_tiled_matmul(&wm, &x, recipe_rule(lane, ty));
                            tiled_differs |= bits(&want) != bits(&per_row);
                            want
                        }
                        (_, Prepared::Plain(_)) if tinyblas => {
                            let want = arm_tinyblas_matmul(&wm, &x, recipe_rule(lane, ty));
                            tiled_differs |= bits(&want) != bits(&per_row);
                            want
                        }
                        (_, Prepared::Plain(_)) if nrc2 => {
                            // The SVE builds' K-quant tiles are fused (svmla).
                            let fused = r.contraction == GCC_AARCH64_SVE;
                            let want = arm_nrc2_matmul(&wm, &x, recipe_rule(lane, ty), fused);
                            tiled_differs |= bits(&want) != bits(&per_row);
                            want
                        }
                        (MatmulPath::VecDotPerRow, _)
                        | (MatmulPath::RepackedGemmGemv { .. }, Prepared::Plain(_)) => {
                            per_row.clone()
                        }
                        (MatmulPath::RepackedGemmGemv { gemm_act }, Prepared::Repacked(rp)) => {
                            let cols = rp.layout().cols();
                            let mut want = vec![0.0f32; m * n];
                            // The gemm kernel on the gemm rows is not the gemv kernel.
                            for xi in x.chunks(K).take(m - m % 4) {
                                let rule = recipe_rule(lane, ty);
                                let gemm_rule = if is_k_quant(ty) { gemm_act } else { rule };
                                let (act, act_gemm) =
                                    (rule.quantize(xi).unwrap(), gemm_rule.quantize(xi).unwrap());
                                for g in 0..n / cols {
                                    let (mut a, mut b) = (vec![0.0f32; cols], vec![0.0f32; cols]);
                                    let group = rp.group(g);
                                    layout_kernel(
                                        r.layout,
                                        rp.layout(),
                                        RowPath::Gemv,
                                        group,
                                        &act,
                                        &mut a,
                                    );
                                    layout_kernel(
                                        r.layout,
                                        rp.layout(),
                                        RowPath::Gemm,
                                        group,
                                        &act_gemm,
                                        &mut b,
                                    );
                                    gemm_differs |= bits(&a) != bits(&b);
                                }
                            }
                            for (i, xi) in x.chunks(K).enumerate() {
                                let (path, rule) = if i < m - m % 4 {
                                    let rule = if is_k_quant(ty) {
                                        gemm_act
                                    } else {
                                        recipe_rule(lane, ty)
                                    };
                                    (RowPath::Gemm, rule)
                                } else {
                                    (RowPath::Gemv, recipe_rule(lane, ty))
                                };
                                let act = rule.quantize(xi).unwrap();
                                for g in 0..n / cols {
                                    let out = &mut want[i * n + g * cols..i * n + (g + 1) * cols];
                                    layout_kernel(
                                        r.layout,
                                        rp.layout(),
                                        path,
                                        rp.group(g),
                                        &act,
                                        out,
                                    );
                                }
                            }
                            want
                        }
                        (other, _) => panic!("{}: no expectation for {}", lane.name, other.name()),
                    };
                    assert_eq!(
                        bits(&got),
                        bits(&want),
                        "{} {} n={n} m={m}: matmul is not the {} path",
                        lane.name,
                        ty.name(),
                        r.matmul.name()
                    );
                    not_per_row |= bits(&got) != bits(&per_row);
                }
            }
        }
        assert_eq!(
            tiled_differs,
            r.plain_gemm != PlainGemm::VecDot,
            "{}: plain gemm {} but its formula {} row-by-row vec_dot",
            lane.name,
            r.plain_gemm.name(),
            if tiled_differs { "differs from" } else { "always equals" }
        );
        assert_eq!(
            not_per_row,
            r.matmul != MatmulPath::VecDotPerRow || r.plain_gemm != PlainGemm::VecDot,
            "{}: matmul path {} but matmul {} row-by-row vec_dot",
            lane.name,
            r.matmul.name(),
            if not_per_row { "differs from" } else { "always equals" }
        );
        if let MatmulPath::RepackedGemmGemv { .. } = r.matmul {
            assert!(gemm_differs, "{}: the gemm rows' kernel never differs from gemv", lane.name);
        }
    }
}

/// Seventeen inputs of `expf` on each of which the fused and the unfused `ggml_v_expf`
/// and the C library's `expf` give three different values, so one vector (up to
/// sixteen floats) and one more value tell every fusion and every vector width apart.
/// (The AVX-512 `ggml_v_expf` gives the fused eight-wide one's bits on all of them: its
/// lane is told apart by its sums, `llama_cpp/zen4/differs_from_haswell`.)
fn telling_exp_inputs() -> Vec<f32> {
    let mut x = Vec::new();
    let mut v = -20.0f32;
    while x.len() < 17 {
        let (f, u, e) = (elem::v_expf(v, true), elem::v_expf(v, false), v.exp());
        if f.to_bits() != u.to_bits() && e.to_bits() != f.to_bits() && e.to_bits() != u.to_bits() {
            x.push(v);
        }
        v += 0.00137;
        assert!(v < 20.0, "found only {} telling inputs", x.len());
    }
    x
}

#[test]
fn elem_flavour_is_the_tier_the_lane_names() {
    let inputs = telling_exp_inputs();
    for lane in LANES {
        let r = &lane.recipe;
        // Fusion: the tier's compiler fuses multiply-adds in these loops (GCC on
        // aarch64, the FMA tier on x86); ggml's x64 tier does not. The HIP lanes use the
        // x64 loops as a stand-in (the device's own elementwise kernels are not
        // reproduced).
        let fused = match r.contraction {
            Contraction::None | Contraction::HipClang | Contraction::Nvcc => false,
            Contraction::FusedAccumulate | Contraction::GccAarch64 | GCC_AARCH64_SVE => true,
            other => panic!("{}: no elementwise fusion known for {}", lane.name, other.name()),
        };
        // Vector width: sixteen floats on ggml's AVX-512 tier (its own expf), eight on
        // the haswell tier, four on SSE2 and NEON.
        let avx512 = lane.name == "x86_64-avx512";
        let width = match r.accumulation {
            _ if avx512 => 16,
            Accumulation::X86Avx2 | SVE256_ACCUMULATION => 8,
            _ => 4,
        };
        let ops = elem::portable(r.elem);
        assert_eq!(ops.flavour(), r.elem);
        // soft_max of one vector and one more value (max 0): ggml_v_expf on the vector,
        // the C library's expf on the tail.
        let x = &inputs[..=width];
        let mut y = vec![0.0f32; x.len()];
        ops.soft_max(&mut y, x, 0.0);
        let want: Vec<f32> = x
            .iter()
            .enumerate()
            .map(|(i, &v)| match i < width {
                true if avx512 => elem::v_expf_avx512(v),
                true => elem::v_expf(v, fused),
                // SVE: the tail is a predicated vector, not the C library's expf.
                false if r.elem.is_sve() => elem::v_expf(v, fused),
                false => v.exp(),
            })
            .collect();
        assert_eq!(
            bits(&y),
            bits(&want),
            "{}: elem {} is not the {}-wide, {} tier",
            lane.name,
            r.elem.name(),
            width,
            if fused { "fused" } else { "unfused" }
        );
    }
}

/// ggml's chunk plan (`ggml_compute_forward_mul_mat`), worked by hand: chunks of 16 (64
/// with a one-row side), `ceil(rows / chunks)` rows each, re-chunked by thread (along the
/// weight rows when they outnumber the activation rows) below four chunks per thread.
#[test]
fn i8mm_chunk_plan_by_hand() {
    use tiercheck_core::arch::aarch64::i8mm::ChunkPlan;
    let plan = |n, m, nth| {
        let p = ChunkPlan::new(n, m, nth);
        (p.dr0, p.dr1)
    };
    // 88 rows: 6 chunks of 15; 600 rows: 38 chunks of 16.
    assert_eq!(plan(128, 88, 1), (16, 15));
    assert_eq!(plan(128, 600, 2), (16, 16));
    // 8 x 1 chunks: kept for 1 and 2 threads, by thread from 3 (43, 43, 42 rows).
    assert_eq!(plan(128, 16, 2), (16, 16));
    assert_eq!(plan(128, 16, 3), (43, 16));
    assert_eq!(plan(128, 16, 14), (10, 16));
    // One activation row: chunks of 64, two of them, one thread takes the whole.
    assert_eq!(plan(128, 1, 1), (128, 1));
    // A tie goes along the activation rows.
    assert_eq!(plan(32, 32, 8), (32, 4));
    let p = ChunkPlan::new(128, 16, 3);
    assert!(!p.even(0, 0, 128, 16) && !p.even(85, 15, 128, 16) && p.even(86, 0, 128, 16));
    assert!((0..88).all(|i| !ChunkPlan::new(128, 88, 1).even(0, i, 128, 88)));
    // NUMA-aware ggml chunks by thread however many chunks there are: 8 x 4 chunks of 16
    // for 128 x 64 rows on 3 threads, but 43, 43 and 42 weight rows under NUMA.
    use tiercheck_core::lane::TierPool;
    let numa = |n, m, threads| {
        let p = ChunkPlan::with_pool(n, m, TierPool { threads, numa: true });
        (p.dr0, p.dr1)
    };
    assert_eq!(plan(128, 64, 3), (16, 16));
    assert_eq!(numa(128, 64, 3), (43, 64));
    assert_eq!(numa(16, 88, 4), (16, 22));
    assert_eq!(ChunkPlan::with_pool(128, 64, TierPool::threads(3)), ChunkPlan::new(128, 64, 3));
}

/// The i8mm-family lanes' plain matmul follows the chunk plan for the tier's thread
/// count: outputs of chunks with an odd span are the lane's vec_dot, one pair at a time
/// (the per-row product), the others the 2x2 tiles (written out independently above);
/// with 88 activation rows no output takes a tile, with 3 tier threads only the last
/// chunk of 42 weight rows does (and with 64 activation rows, only under NUMA).
#[test]
fn i8mm_tiles_follow_the_chunk_plan_of_the_tier_threads() {
    const KS: usize = 256;
    for lane in LANES.iter().filter(|l| l.recipe.plain_gemm == ARM_I8MM_NRC2) {
        let r = &lane.recipe;
        let fused = r.contraction == GCC_AARCH64_SVE;
        for ty in [GgmlType::Q4_K, GgmlType::Q8_0] {
            use tiercheck_core::lane::TierPool;
            let numa3 = TierPool { threads: 3, numa: true };
            for (n, m, nth, tiled_from) in [
                (128usize, 16usize, TierPool::threads(3), 86usize),
                (16, 88, TierPool::threads(1), 16),
                (128, 16, TierPool::threads(2), 0),
                (128, 64, TierPool::threads(3), 0),
                (128, 64, numa3, 86),
            ] {
                let bytes = weight_rows_k(91 + n as u64, ty, n, KS);
                let wm = WeightMatrix::new(ty, n, KS, &bytes).unwrap();
                let x = act_rows_k(17 + m as u64, 0, m, KS);
                let act: Vec<u8> = x
                    .chunks(KS)
                    .flat_map(|xi| lane.portable.quantize_act(ty, xi).unwrap())
                    .collect();
                let got = lane.portable.matmul_quantized_tier(&wm, &act, m, nth).unwrap();
                let tiles = arm_nrc2_matmul(&wm, &x, recipe_rule(lane, ty), fused);
                let row = act.len() / m;
                let mut differs = false;
                for i in 0..m {
                    for j in 0..n {
                        let one = lane
                            .portable
                            .vec_dot(ty, wm.row(j), &act[i * row..(i + 1) * row])
                            .unwrap();
                        let want = if j >= tiled_from { tiles[i * n + j] } else { one };
                        differs |= tiles[i * n + j].to_bits() != one.to_bits();
                        assert_eq!(
                            got[i * n + j].to_bits(),
                            want.to_bits(),
                            "{} {} n={n} m={m} {nth:?}: output ({i}, {j})",
                            lane.name,
                            ty.name()
                        );
                    }
                }
                assert!(differs, "{} {}: tiles and vec_dot agree everywhere", lane.name, ty.name());
            }
        }
    }
}
