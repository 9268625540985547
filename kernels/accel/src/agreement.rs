//! Every accelerated entry point not checked beside its own file, against its scalar
//! twin (`with_scalar`), bitwise, on random and extreme inputs: the x86 lanes' vec_dot
//! (accelerated, the scalar code compiled with AVX2+FMA, and the baseline build), the
//! i8mm two-row dots, the repacked kernels of every tier, the tiled matmul and the
//! elementwise loops. Each test first asserts that the slots it compares are filled
//! where the host serves them (an empty slot would compare the scalar twin with itself).

use tiercheck_core::accel::with_scalar;
use tiercheck_core::arch::aarch64::{i8mm, i8mm_repack, neon_repack, sve_repack};
use tiercheck_core::arch::x86_64::{avx2, avx2_repack};
use tiercheck_core::blocks::{cast_blocks, BlockQ4K, BlockQ4_0, BlockQ6K, BlockQ8K, BlockQ8_0};
use tiercheck_core::repack::{BlockQ4Kx8, BlockQ4_0x4, BlockQ6Kx8, BlockQ8_0x4};
use tiercheck_core::rng::Rng;
use tiercheck_core::GgmlType;

use crate::testing::{avx2_here, blocks, installed, same, same_int};

fn x86() -> bool {
    cfg!(target_arch = "x86_64") && avx2_here()
}

fn f16(rng: &mut Rng) -> [u8; 2] {
    (0x3000u16 + rng.below(0x1800) as u16).to_le_bytes()
}

/// A random `T` (every byte random) with its f16 scale fields set by `scales`.
fn random<T: bytemuck::Pod>(rng: &mut Rng, scales: impl Fn(&mut T, &mut Rng)) -> T {
    let mut t = T::zeroed();
    rng.fill_bytes(bytemuck::bytes_of_mut(&mut t));
    scales(&mut t, rng);
    t
}

fn q4kx8(rng: &mut Rng) -> BlockQ4Kx8 {
    random(rng, |b: &mut BlockQ4Kx8, r| {
        b.d = core::array::from_fn(|_| f16(r));
        b.dmin = core::array::from_fn(|_| f16(r));
    })
}

fn q6kx8(rng: &mut Rng) -> BlockQ6Kx8 {
    random(rng, |b: &mut BlockQ6Kx8, r| b.d = core::array::from_fn(|_| f16(r)))
}

fn q4_0x4(rng: &mut Rng) -> BlockQ4_0x4 {
    random(rng, |b: &mut BlockQ4_0x4, r| b.d = core::array::from_fn(|_| f16(r)))
}

fn q8_0x4(rng: &mut Rng) -> BlockQ8_0x4 {
    random(rng, |b: &mut BlockQ8_0x4, r| b.d = core::array::from_fn(|_| f16(r)))
}

fn cast<B: bytemuck::Pod>(ty: GgmlType, bytes: &[u8]) -> Vec<B> {
    cast_blocks::<B>(ty, bytes).unwrap().to_vec()
}

fn same8(what: &str, f: impl Fn() -> [f32; 8]) {
    for l in 0..8 {
        same(&format!("{what} lane {l}"), || f()[l]);
    }
}

fn same4(what: &str, f: impl Fn() -> [f32; 4]) {
    for l in 0..4 {
        same(&format!("{what} lane {l}"), || f()[l]);
    }
}

#[test]
fn x86_vec_dot_forms_equal_the_baseline_build() {
    use avx2::vec_dot::{self as v, slots};
    let x = x86();
    installed("q4_0", &slots::VEC_DOT_Q4_0_Q8_0, x || cfg!(target_arch = "aarch64"));
    installed("q6_K", &slots::VEC_DOT_Q6_K_Q8_K, x || cfg!(target_arch = "aarch64"));
    let mut rng = Rng::new(41);
    for round in 0..300 {
        let extreme = round % 10 == 9;
        let (nb, nk) = (8 * (1 + round % 5), 1 + round % 4);
        let x4: Vec<BlockQ4_0> =
            cast(GgmlType::Q4_0, &blocks(&mut rng, GgmlType::Q4_0, nb, extreme));
        let x8: Vec<BlockQ8_0> =
            cast(GgmlType::Q8_0, &blocks(&mut rng, GgmlType::Q8_0, nb, extreme));
        let y8: Vec<BlockQ8_0> =
            cast(GgmlType::Q8_0, &blocks(&mut rng, GgmlType::Q8_0, nb, extreme));
        let xk: Vec<BlockQ4K> =
            cast(GgmlType::Q4_K, &blocks(&mut rng, GgmlType::Q4_K, nk, extreme));
        let x6: Vec<BlockQ6K> =
            cast(GgmlType::Q6_K, &blocks(&mut rng, GgmlType::Q6_K, nk, extreme));
        let yk: Vec<BlockQ8K> =
            cast(GgmlType::Q8_K, &blocks(&mut rng, GgmlType::Q8_K, nk, extreme));
        let checks: [(&str, f32, f32, f32); 4] = [
            (
                "q4_0",
                v::vec_dot_q4_0_q8_0(&x4, &y8),
                with_scalar(|| v::vec_dot_q4_0_q8_0(&x4, &y8)),
                v::vec_dot_q4_0_q8_0_in::<false>(&x4, &y8),
            ),
            (
                "q8_0",
                v::vec_dot_q8_0_q8_0(&x8, &y8),
                with_scalar(|| v::vec_dot_q8_0_q8_0(&x8, &y8)),
                v::vec_dot_q8_0_q8_0_in::<false>(&x8, &y8),
            ),
            (
                "q4_K",
                v::vec_dot_q4_k_q8_k(&xk, &yk),
                with_scalar(|| v::vec_dot_q4_k_q8_k(&xk, &yk)),
                v::vec_dot_q4_k_q8_k_in::<false>(&xk, &yk),
            ),
            (
                "q6_K",
                v::vec_dot_q6_k_q8_k(&x6, &yk),
                with_scalar(|| v::vec_dot_q6_k_q8_k(&x6, &yk)),
                v::vec_dot_q6_k_q8_k_in::<false>(&x6, &yk),
            ),
        ];
        for (what, fast, spec, base) in checks {
            assert_eq!(
                fast.to_bits(),
                base.to_bits(),
                "{what} round {round}: accelerated {fast} baseline {base}"
            );
            assert_eq!(
                spec.to_bits(),
                base.to_bits(),
                "{what} round {round}: scalar+FMA {spec} baseline {base}"
            );
        }
    }
}

/// The x86 lanes' vec_dot of Q2_K, Q3_K, Q5_K and IQ4_XS (IQ4_XS's `sign` wrap-around of
/// an activation byte of -128 included: the extreme rounds hold them): accelerated
/// against the scalar twin, bitwise.
#[test]
fn x86_kquant_vec_dots_equal_the_scalar_twin() {
    use avx2::vec_dot::{self as v, slots};
    let x = x86();
    installed("q2_K", &slots::VEC_DOT_Q2_K_Q8_K, x);
    installed("q3_K", &slots::VEC_DOT_Q3_K_Q8_K, x);
    installed("q5_K", &slots::VEC_DOT_Q5_K_Q8_K, x);
    installed("iq4_xs", &slots::VEC_DOT_IQ4_XS_Q8_K, x);
    let mut rng = Rng::new(53);
    for round in 0..300 {
        let (extreme, nb) = (round % 10 == 9, 1 + round % 5);
        let mut gen = |ty| blocks(&mut rng, ty, nb, extreme);
        let (x2, x3, x5, xs, yk) = (
            gen(GgmlType::Q2_K),
            gen(GgmlType::Q3_K),
            gen(GgmlType::Q5_K),
            gen(GgmlType::IQ4_XS),
            gen(GgmlType::Q8_K),
        );
        let y: &[BlockQ8K] = cast_blocks(GgmlType::Q8_K, &yk).unwrap();
        same("q2_K", || v::vec_dot_q2_k_q8_k(cast_blocks(GgmlType::Q2_K, &x2).unwrap(), y));
        same("q3_K", || v::vec_dot_q3_k_q8_k(cast_blocks(GgmlType::Q3_K, &x3).unwrap(), y));
        same("q5_K", || v::vec_dot_q5_k_q8_k(cast_blocks(GgmlType::Q5_K, &x5).unwrap(), y));
        same("iq4_xs", || v::vec_dot_iq4_xs_q8_k(cast_blocks(GgmlType::IQ4_XS, &xs).unwrap(), y));
    }
}

/// Random blocks of the 32-value types beside Q4_0/Q8_0 and their activations.
struct Legacy {
    x41: Vec<tiercheck_core::blocks::BlockQ4_1>,
    x50: Vec<tiercheck_core::blocks::BlockQ5_0>,
    x51: Vec<tiercheck_core::blocks::BlockQ5_1>,
    xnl: Vec<tiercheck_core::blocks::BlockIq4Nl>,
    y80: Vec<BlockQ8_0>,
    y81: Vec<tiercheck_core::blocks::BlockQ8_1>,
}

impl Legacy {
    fn random(rng: &mut Rng, nb: usize, extreme: bool) -> Self {
        let mut gen = |ty| blocks(rng, ty, nb, extreme);
        Legacy {
            x41: cast(GgmlType::Q4_1, &gen(GgmlType::Q4_1)),
            x50: cast(GgmlType::Q5_0, &gen(GgmlType::Q5_0)),
            x51: cast(GgmlType::Q5_1, &gen(GgmlType::Q5_1)),
            xnl: cast(GgmlType::IQ4_NL, &gen(GgmlType::IQ4_NL)),
            y80: cast(GgmlType::Q8_0, &gen(GgmlType::Q8_0)),
            y81: cast(GgmlType::Q8_1, &gen(GgmlType::Q8_1)),
        }
    }
}

/// The aarch64 twins' `nrc == 1` vec_dot of the eight types beside Q4_0, Q8_0, Q4_K and
/// Q6_K (the Q4_1/Q5_0/Q5_1 pair loops, i8mm's Q5_0 tail, odd block counts for every
/// scalar tail): accelerated against the scalar twin, bitwise.
#[test]
fn neon_vec_dots_of_the_other_types_equal_the_scalar_twin() {
    use tiercheck_core::arch::aarch64::neon::vec_dot::{self as v, slots};
    use tiercheck_core::blocks::{BlockIq4Xs, BlockQ2K, BlockQ3K, BlockQ5K};
    let x = x86();
    let f16c = x && crate::Host::detect().f16c;
    installed("q4_1 pairs", &slots::Q4_1_PAIRS, f16c);
    installed("q5_0 pairs", &slots::Q5_0_PAIRS, f16c);
    installed("q5_1 pairs", &slots::Q5_1_PAIRS, f16c);
    installed("iq4_nl", &slots::VEC_DOT_IQ4_NL_Q8_0, f16c);
    installed("iq4_xs", &slots::VEC_DOT_IQ4_XS_Q8_K, x);
    installed("q2_K", &slots::VEC_DOT_Q2_K_Q8_K, x);
    installed("q3_K", &slots::VEC_DOT_Q3_K_Q8_K, x);
    installed("q5_K", &slots::VEC_DOT_Q5_K_Q8_K, x);
    let mut rng = Rng::new(59);
    for round in 0..300 {
        let (extreme, nb) = (round % 10 == 9, 1 + round % 7);
        let Legacy { x41, x50, x51, xnl, y80, y81 } = Legacy::random(&mut rng, nb, extreme);
        let mut gen = |ty| blocks(&mut rng, ty, nb, extreme);
        let x2: Vec<BlockQ2K> = cast(GgmlType::Q2_K, &gen(GgmlType::Q2_K));
        let x3: Vec<BlockQ3K> = cast(GgmlType::Q3_K, &gen(GgmlType::Q3_K));
        let x5: Vec<BlockQ5K> = cast(GgmlType::Q5_K, &gen(GgmlType::Q5_K));
        let xs: Vec<BlockIq4Xs> = cast(GgmlType::IQ4_XS, &gen(GgmlType::IQ4_XS));
        let yk: Vec<BlockQ8K> = cast(GgmlType::Q8_K, &gen(GgmlType::Q8_K));
        same("q4_1", || v::vec_dot_q4_1_q8_1(&x41, &y81));
        same("q5_0", || v::vec_dot_q5_0_q8_0(&x50, &y80));
        same("q5_0 i8mm", || v::vec_dot_q5_0_q8_0_i8mm(&x50, &y80));
        same("q5_1", || v::vec_dot_q5_1_q8_1(&x51, &y81));
        same("iq4_nl", || v::vec_dot_iq4_nl_q8_0(&xnl, &y80));
        same("iq4_xs", || v::vec_dot_iq4_xs_q8_k(&xs, &yk));
        same("q2_K", || v::vec_dot_q2_k_q8_k(&x2, &yk));
        same("q3_K", || v::vec_dot_q3_k_q8_k(&x3, &yk));
        same("q5_K", || v::vec_dot_q5_k_q8_k(&x5, &yk));
    }
}

/// The x86 lanes' vec_dot of the 32-value types beside Q4_0/Q8_0 (Q4_1, Q5_0, Q5_1 and
/// IQ4_NL, with odd block counts for IQ4_NL's scalar tail): accelerated against the scalar
/// twin, bitwise.
#[test]
fn x86_legacy_vec_dots_equal_the_scalar_twin() {
    use avx2::vec_dot::{self as v, slots};
    let x = x86();
    let f16c = x && crate::Host::detect().f16c;
    installed("q4_1", &slots::VEC_DOT_Q4_1_Q8_1, f16c);
    installed("q5_0", &slots::VEC_DOT_Q5_0_Q8_0, x);
    installed("q5_1", &slots::VEC_DOT_Q5_1_Q8_1, f16c);
    installed("iq4_nl", &slots::VEC_DOT_IQ4_NL_Q8_0, f16c);
    let mut rng = Rng::new(47);
    for round in 0..400 {
        let extreme = round % 10 == 9;
        let nb = 1 + round % 9;
        let Legacy { x41, x50, x51, xnl, y80, y81 } = Legacy::random(&mut rng, nb, extreme);
        let checks: [(&str, f32, f32); 4] = [
            (
                "q4_1",
                v::vec_dot_q4_1_q8_1(&x41, &y81),
                with_scalar(|| v::vec_dot_q4_1_q8_1(&x41, &y81)),
            ),
            (
                "q5_0",
                v::vec_dot_q5_0_q8_0(&x50, &y80),
                with_scalar(|| v::vec_dot_q5_0_q8_0(&x50, &y80)),
            ),
            (
                "q5_1",
                v::vec_dot_q5_1_q8_1(&x51, &y81),
                with_scalar(|| v::vec_dot_q5_1_q8_1(&x51, &y81)),
            ),
            (
                "iq4_nl",
                v::vec_dot_iq4_nl_q8_0(&xnl, &y80),
                with_scalar(|| v::vec_dot_iq4_nl_q8_0(&xnl, &y80)),
            ),
        ];
        for (what, fast, scalar) in checks {
            assert_eq!(
                fast.to_bits(),
                scalar.to_bits(),
                "{what} round {round} ({nb} blocks): accelerated {fast} scalar {scalar}"
            );
        }
    }
}

#[test]
fn i8mm_two_row_integer_sums_equal_the_scalar_twin() {
    use i8mm::vec_dot2::{self as v, slots};
    installed("q4_0 isum", &slots::Q4_0_ISUM, x86());
    installed("q4_K isum", &slots::Q4_K_ISUM_BIAS, x86());
    let mut rng = Rng::new(43);
    for round in 0..300 {
        let extreme = round % 10 == 9;
        let x4: Vec<BlockQ4_0> =
            cast(GgmlType::Q4_0, &blocks(&mut rng, GgmlType::Q4_0, 1, extreme));
        let x8: Vec<BlockQ8_0> =
            cast(GgmlType::Q8_0, &blocks(&mut rng, GgmlType::Q8_0, 1, extreme));
        let y8: Vec<BlockQ8_0> =
            cast(GgmlType::Q8_0, &blocks(&mut rng, GgmlType::Q8_0, 1, extreme));
        let xk: Vec<BlockQ4K> = cast(GgmlType::Q4_K, &blocks(&mut rng, GgmlType::Q4_K, 1, extreme));
        let yk: Vec<BlockQ8K> = cast(GgmlType::Q8_K, &blocks(&mut rng, GgmlType::Q8_K, 1, extreme));
        same_int("q4_0 isum", || v::q4_0_isum(&x4[0], &y8[0]));
        same_int("q8_0 isum", || v::q8_0_isum(&x8[0], &y8[0]));
        same_int("q4_K isum", || v::q4_k_isum_bias(&xk[0], &yk[0]).0);
        same_int("q4_K bias", || v::q4_k_isum_bias(&xk[0], &yk[0]).1);
    }
}

#[test]
fn repacked_kernels_equal_the_scalar_twin() {
    let f16c = x86() && crate::Host::detect().f16c;
    installed("q4_K 8x4", &neon_repack::kernels::slots::GEMV_Q4_K_8X4, x86());
    installed("q4_0x4 gemv", &neon_repack::kernels::slots::GEMV_Q4_0_4XIL, f16c);
    installed("q6_K gemm", &neon_repack::kernels::slots::GEMM_Q6_K_8XIL, f16c);
    installed("q4_K 8x8", &i8mm_repack::kernels::slots::GEMM_Q4_K_8X8, x86());
    installed("sve256 gemm", &sve_repack::kernels::slots::GEMM_Q4_K_8X8_SVE256, x86());
    installed("avx2 q4_K gemv", &avx2_repack::kernels::slots::GEMV_Q4_K_8X8, f16c);
    let mut rng = Rng::new(47);
    for round in 0..40 {
        let n = 1 + round % 3;
        let extreme = round % 5 == 4;
        let k4: Vec<BlockQ4Kx8> = (0..n).map(|_| q4kx8(&mut rng)).collect();
        let k6: Vec<BlockQ6Kx8> = (0..n).map(|_| q6kx8(&mut rng)).collect();
        let l4: Vec<BlockQ4_0x4> = (0..4 * n).map(|_| q4_0x4(&mut rng)).collect();
        let l8: Vec<BlockQ8_0x4> = (0..4 * n).map(|_| q8_0x4(&mut rng)).collect();
        let yk: Vec<BlockQ8K> = cast(GgmlType::Q8_K, &blocks(&mut rng, GgmlType::Q8_K, n, extreme));
        let y8: Vec<BlockQ8_0> =
            cast(GgmlType::Q8_0, &blocks(&mut rng, GgmlType::Q8_0, 4 * n, extreme));
        use neon_repack::kernels as nr;
        same8("neon q4_K 8x4 gemv", || nr::gemv_q4_k_8x4(&k4, &yk));
        same4("neon q4_0 4x4 gemv", || nr::gemv_q4_0_4x4(&l4, &y8));
        same4("neon q8_0 4x4 gemv", || nr::gemv_q8_0_4x4(&l8, &y8));
        same4("neon q8_0 4x4 gemm", || nr::gemm_q8_0_4x4(&l8, &y8));
        same8("neon q6_K 8x4 gemv", || nr::gemv_q6_k_8x4(&k6, &yk));
        same8("neon q6_K 8x4 gemm", || nr::gemm_q6_k_8x4(&k6, &yk));
        for il in [4, 8] {
            same_int("q4_0x4 isums", || nr::q4_0x4_isums(&l4[0], il, &y8[0]).iter().sum());
            same_int("q8_0x4 isums", || nr::q8_0x4_isums(&l8[0], il, &y8[0]).iter().sum());
            for j in 0..8 {
                same_int("q6_K x8 isums", || nr::q6_k_x8_isums(&k6[0], il, &yk[0])[j]);
            }
            same8("q6_K 8xil gemm", || nr::gemm_q6_k_8xil(&k6, il, &yk));
        }
        use i8mm_repack::kernels as ir;
        same8("i8mm q4_K 8x8 gemv", || ir::gemv_q4_k_8x8(&k4, &yk));
        same8("i8mm q4_K 8x8 gemm", || ir::gemm_q4_k_8x8(&k4, &yk));
        same4("i8mm q4_0 4x8 gemv", || ir::gemv_q4_0_4x8(&l4, &y8));
        same4("i8mm q8_0 4x8 gemv", || ir::gemv_q8_0_4x8(&l8, &y8));
        same8("sve256 q4_K 8x8 gemm", || sve_repack::kernels::gemm_q4_k_8x8_sve256(&k4, &yk));
        use avx2_repack::kernels as ar;
        same8("avx2 q4_K 8x8 gemv", || ar::gemv_q4_k_8x8(&k4, &yk));
        for j in 0..8 {
            for s in 0..8 {
                same_int("avx2 q4_K x8 dots", || ar::q4_kx8_dots(&k4[0], &yk[0])[j][s]);
            }
        }
    }
}

/// The repacked layouts of the other weight types: the x86 lane's `q4_0_8x8` and
/// `iq4_nl_8x8` gemv, the aarch64 lanes' `iq4_nl_4x4` and the Q5_K 8-row layouts.
#[test]
fn repacked_kernels_of_the_other_types_equal_the_scalar_twin() {
    use tiercheck_core::repack::{BlockIq4Nlx4, BlockIq4Nlx8, BlockQ4_0x8, BlockQ5Kx8};
    let f16c = x86() && crate::Host::detect().f16c;
    installed("iq4_nl x4 isums", &neon_repack::kernels::slots::IQ4_NLX4_ISUMS, x86());
    installed("q5_K x8 dots", &neon_repack::kernels::slots::Q5_KX8_DOTS, x86());
    installed("iq4_nl 4x4 gemv", &neon_repack::kernels::slots::GEMV_IQ4_NL_4X4, f16c);
    installed("q5_K 8x4 gemv", &neon_repack::kernels::slots::GEMV_Q5_K_8X4, x86());
    installed("q5_K 8x8 gemv", &i8mm_repack::kernels::slots::GEMV_Q5_K_8X8, x86());
    installed("q5_K 8x8 gemm", &i8mm_repack::kernels::slots::GEMM_Q5_K_8X8, x86());
    installed("avx2 q4_0 8x8 gemv", &avx2_repack::kernels::slots::GEMV_Q4_0_8X8, f16c);
    installed("avx2 iq4_nl 8x8 gemv", &avx2_repack::kernels::slots::GEMV_IQ4_NL_8X8, f16c);
    let mut rng = Rng::new(61);
    for round in 0..40 {
        let n = 1 + round % 3;
        let extreme = round % 5 == 4;
        let scaled = |b: &mut [[u8; 2]; 8], r: &mut Rng| *b = core::array::from_fn(|_| f16(r));
        let q8x8: Vec<BlockQ4_0x8> = (0..n)
            .map(|_| random(&mut rng, |b: &mut BlockQ4_0x8, r| scaled(&mut b.d, r)))
            .collect();
        let nlx8: Vec<BlockIq4Nlx8> = (0..n)
            .map(|_| random(&mut rng, |b: &mut BlockIq4Nlx8, r| scaled(&mut b.d, r)))
            .collect();
        let y8: Vec<BlockQ8_0> =
            cast(GgmlType::Q8_0, &blocks(&mut rng, GgmlType::Q8_0, n, extreme));
        use avx2_repack::kernels as ar;
        same8("avx2 q4_0 8x8 gemv", || ar::gemv_q4_0_8x8(&q8x8, &y8));
        same8("avx2 iq4_nl 8x8 gemv", || ar::gemv_iq4_nl_8x8(&nlx8, &y8));
        let nlx4: Vec<BlockIq4Nlx4> = (0..2 * n)
            .map(|_| {
                random(&mut rng, |b: &mut BlockIq4Nlx4, r| b.d = core::array::from_fn(|_| f16(r)))
            })
            .collect();
        let y8: Vec<BlockQ8_0> =
            cast(GgmlType::Q8_0, &blocks(&mut rng, GgmlType::Q8_0, 2 * n, extreme));
        same4("iq4_nl 4x4 gemv", || neon_repack::kernels::gemv_iq4_nl_4x4(&nlx4, &y8));
        for c in 0..4 {
            let isums = || neon_repack::kernels::iq4_nlx4_isums(&nlx4[0], &y8[0])[c];
            same_int("iq4_nl x4 isums", isums);
        }
        let k5: Vec<BlockQ5Kx8> = (0..n)
            .map(|_| {
                random(&mut rng, |b: &mut BlockQ5Kx8, r| {
                    b.d = core::array::from_fn(|_| f16(r));
                    b.dmin = core::array::from_fn(|_| f16(r));
                })
            })
            .collect();
        let yk: Vec<BlockQ8K> = cast(GgmlType::Q8_K, &blocks(&mut rng, GgmlType::Q8_K, n, extreme));
        for il in [4, 8] {
            for s in 0..8 {
                for j in 0..8 {
                    let dots = || neon_repack::kernels::q5_kx8_dots(&k5[0], il, &yk[0])[s][j];
                    same_int("q5_K x8 dots", dots);
                }
            }
        }
        same8("q5_K 8x4 gemv", || neon_repack::kernels::gemv_q5_k_8x4(&k5, &yk));
        same8("q5_K 8x8 gemv", || i8mm_repack::kernels::gemv_q5_k_8x8(&k5, &yk));
        same8("q5_K 8x8 gemm", || i8mm_repack::kernels::gemm_q5_k_8x8(&k5, &yk));
    }
}

#[test]
fn tiled_matmul_equals_the_scalar_twin() {
    use tiercheck_core::WeightMatrix;
    installed("tiled", &avx2::tiled::slots::MATMUL, x86());
    let mut rng = Rng::new(53);
    for ty in [GgmlType::Q4_K, GgmlType::Q6_K] {
        let (n, k, m) = (5usize, 512usize, 3usize);
        let w = blocks(&mut rng, ty, n * k / 256, false);
        let acts: Vec<Vec<u8>> =
            (0..m).map(|_| blocks(&mut rng, GgmlType::Q8_K, k / 256, false)).collect();
        let act: Vec<&[u8]> = acts.iter().map(|a| a.as_slice()).collect();
        let wm = WeightMatrix::new(ty, n, k, &w).unwrap();
        let fast = avx2::tiled::matmul(&wm, &act).unwrap();
        let scalar = with_scalar(|| avx2::tiled::matmul(&wm, &act)).unwrap();
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&fast), bits(&scalar), "{ty}");
    }
}

#[test]
fn elementwise_loops_compiled_with_fma_equal_the_scalar_twin() {
    use tiercheck_core::elem::{slots, ElemFlavour, ElemOps, PortableElem};
    installed("soft_max", &slots::SOFT_MAX, x86());
    installed("dot_f32", &slots::DOT_F32, x86());
    let mut rng = Rng::new(59);
    for flavour in [ElemFlavour::Avx2, ElemFlavour::Neon, ElemFlavour::Avx512, ElemFlavour::Sve256]
    {
        let e = PortableElem(flavour);
        for n in [16usize, 64, 100, 512] {
            let x = rng.normals(n, 3.0);
            let y = rng.normals(n, 3.0);
            let w = if n % 16 == 0 { n } else { 16 * (n / 16) };
            same("dot_f32", || e.dot_f32(&x, &y));
            same("dot_f16", || e.dot_f16(&x, &y));
            same("sgemm_dot", || e.sgemm_dot(&x[..w], &y[..w]));
            let max = x.iter().cloned().fold(f32::MIN, f32::max);
            let soft = |scalar: bool| {
                let mut out = vec![0.0f32; n];
                let s = if scalar {
                    with_scalar(|| e.soft_max(&mut out, &x, max))
                } else {
                    e.soft_max(&mut out, &x, max)
                };
                (s.to_bits(), out.iter().map(|v| v.to_bits()).collect::<Vec<_>>())
            };
            assert_eq!(soft(false), soft(true), "{flavour:?} soft_max n={n}");
            let glu = |scalar: bool| {
                let mut out = vec![0.0f32; n];
                if scalar {
                    with_scalar(|| e.swiglu(&mut out, &x, &y))
                } else {
                    e.swiglu(&mut out, &x, &y)
                };
                out.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
            };
            assert_eq!(glu(false), glu(true), "{flavour:?} swiglu n={n}");
        }
    }
}
