//! The native AVX-512 kernels of `x86_64-avx512` (`tiercheck_x86_64::avx512::vec_dot`)
//! give the bits of their portable twins (`tiercheck_core::arch::x86_64::avx512::vec_dot`) on random and
//! extreme-code blocks, odd and even block counts. On CPUs without AVX-512 F/BW/VNNI
//! (and AVX2, FMA, F16C) each trial is reported ignored with the reason, and fails
//! instead when `TIERCHECK_REQUIRE_LANES` requires `x86_64-avx512`.

#[cfg(target_arch = "x86_64")]
mod common;

#[cfg(target_arch = "x86_64")]
mod x86 {
    use libtest_mimic::{Completion, Failed, Trial};
    use tiercheck_core::arch::x86_64::avx512::vec_dot as twin;
    use tiercheck_core::blocks::{
        cast_blocks_mut, BlockQ4K, BlockQ4_0, BlockQ6K, BlockQ8K, BlockQ8_0,
    };
    use tiercheck_core::GgmlType;
    use tiercheck_x86_64::avx512::{is_available, kernels, vec_dot};

    const LANE: &str = "x86_64-avx512";

    /// One native-versus-twin comparison.
    type Check = fn() -> Result<(), Failed>;

    /// Test bytes from the project's seeded generator.
    struct Bytes {
        g: tiercheck_core::rng::Rng,
    }

    #[allow(non_snake_case)]
    fn Bytes(seed: u64) -> Bytes {
        Bytes { g: tiercheck_core::rng::Rng::new(seed) }
    }

    impl Bytes {
        fn next(&mut self) -> u8 {
            self.g.next_u8()
        }

        /// The bytes of `nb` blocks of `ty`: random (`kind` 0) or every byte 0x80, 0x7f
        /// or 0xff (`kind` 1, 2, 3: the extreme codes).
        fn row(&mut self, ty: GgmlType, nb: usize, kind: u8) -> Vec<u8> {
            (0..nb * ty.type_size())
                .map(|_| match kind {
                    1 => 0x80,
                    2 => 0x7f,
                    3 => 0xff,
                    _ => self.next(),
                })
                .collect()
        }

        /// A finite f16 scale of either sign below 1 in magnitude.
        fn f16(&mut self) -> [u8; 2] {
            [self.next(), self.next() & 0xbb]
        }
    }

    fn legacy_native_equals_twin_odd_and_even_block_counts() -> Result<(), Failed> {
        let mut g = Bytes(0x243f_6a88_85a3_08d3);
        for nb in [1usize, 2, 3, 4, 5, 7, 8, 33] {
            for kind in 0..4u8 {
                let mut x4b = g.row(GgmlType::Q4_0, nb, kind);
                let mut x8b = g.row(GgmlType::Q8_0, nb, kind);
                let mut yb = g.row(GgmlType::Q8_0, nb, kind);
                let x4: &mut [BlockQ4_0] = cast_blocks_mut(GgmlType::Q4_0, &mut x4b)?;
                let x8: &mut [BlockQ8_0] = cast_blocks_mut(GgmlType::Q8_0, &mut x8b)?;
                let y: &mut [BlockQ8_0] = cast_blocks_mut(GgmlType::Q8_0, &mut yb)?;
                x4.iter_mut().for_each(|b| b.d = g.f16());
                x8.iter_mut().for_each(|b| b.d = g.f16());
                y.iter_mut().for_each(|b| b.d = g.f16());
                // SAFETY: `is_available()` held (checked by `run` before calling).
                let (n4, n8) = unsafe {
                    (vec_dot::vec_dot_q4_0_q8_0(x4, y), vec_dot::vec_dot_q8_0_q8_0(x8, y))
                };
                let (t4, t8) = (twin::vec_dot_q4_0_q8_0(x4, y), twin::vec_dot_q8_0_q8_0(x8, y));
                if n4.to_bits() != t4.to_bits() || n8.to_bits() != t8.to_bits() {
                    return Err(format!(
                        "nb={nb} kind={kind}: q4_0 native {n4:e} vs twin {t4:e}, \
                         q8_0 native {n8:e} vs twin {t8:e}"
                    )
                    .into());
                }
            }
        }
        Ok(())
    }

    fn k_quants_native_equals_twin() -> Result<(), Failed> {
        let mut g = Bytes(0x1319_8a2e_0370_7344);
        for nb in [1usize, 2, 3, 6] {
            for kind in 0..4u8 {
                let mut x4b = g.row(GgmlType::Q4_K, nb, kind);
                let mut x6b = g.row(GgmlType::Q6_K, nb, kind);
                let mut yb = g.row(GgmlType::Q8_K, nb, kind);
                let x4: &mut [BlockQ4K] = cast_blocks_mut(GgmlType::Q4_K, &mut x4b)?;
                let x6: &mut [BlockQ6K] = cast_blocks_mut(GgmlType::Q6_K, &mut x6b)?;
                let y: &mut [BlockQ8K] = cast_blocks_mut(GgmlType::Q8_K, &mut yb)?;
                x4.iter_mut().for_each(|b| {
                    b.d = g.f16();
                    b.dmin = g.f16();
                });
                x6.iter_mut().for_each(|b| b.d = g.f16());
                // bsums stay as generated (any i16): the kernels read them as they are.
                y.iter_mut().for_each(|b| b.d = (g.next() as f32 / 256.0 - 0.5).to_le_bytes());
                // SAFETY: `is_available()` held (checked by `run` before calling).
                let (n4, n6) = unsafe {
                    (vec_dot::vec_dot_q4_k_q8_k(x4, y), vec_dot::vec_dot_q6_k_q8_k(x6, y))
                };
                let (t4, t6) = (twin::vec_dot_q4_k_q8_k(x4, y), twin::vec_dot_q6_k_q8_k(x6, y));
                if n4.to_bits() != t4.to_bits() || n6.to_bits() != t6.to_bits() {
                    return Err(format!(
                        "nb={nb} kind={kind}: q4_K native {n4:e} vs twin {t4:e}, \
                         q6_K native {n6:e} vs twin {t6:e}"
                    )
                    .into());
                }
            }
        }
        Ok(())
    }

    /// Run `check` where the CPU has the lane's features; else ignored with the
    /// reason, or a failure when the lane is required.
    fn run(check: Check) -> Result<Completion, Failed> {
        crate::common::run_where_available(LANE, is_available(), kernels, check)
    }

    pub fn trials() -> Vec<Trial> {
        let checks: [(&str, Check); 2] = [
            (
                "legacy_native_equals_twin_odd_and_even_block_counts",
                legacy_native_equals_twin_odd_and_even_block_counts,
            ),
            ("k_quants_native_equals_twin", k_quants_native_equals_twin),
        ];
        checks
            .into_iter()
            .map(|(name, check)| {
                Trial::ignorable_test(format!("avx512/{name}"), move || run(check))
            })
            .collect()
    }
}

fn main() -> std::process::ExitCode {
    let args = libtest_mimic::Arguments::from_args();
    #[cfg(target_arch = "x86_64")]
    let trials = x86::trials();
    #[cfg(not(target_arch = "x86_64"))]
    let trials = Vec::new();
    libtest_mimic::run(&args, trials).exit_code()
}
