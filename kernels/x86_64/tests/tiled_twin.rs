//! The native tiled K-quant matmul (`tiercheck_x86_64::avx2::tiled`) gives the bits of
//! its portable twin (`tiercheck_core::arch::x86_64::avx2::tiled`) on Q4_K, Q6_K, Q2_K,
//! Q3_K, Q5_K and IQ4_XS weights: row counts that are and are not multiples of eight
//! (the native Q4_K/Q6_K code runs eight activation rows per vector and the rest one at
//! a time; the other four types one row at a time), one to several
//! superblocks, random blocks and extreme codes and scales; and the lane's `matmul`
//! takes the tiled path exactly from 8 rows. Without AVX2, FMA and F16C each trial is
//! reported ignored with the reason, and fails instead when `TIERCHECK_REQUIRE_LANES`
//! requires `x86_64-avx2`.

#[cfg(target_arch = "x86_64")]
mod common;

#[cfg(target_arch = "x86_64")]
mod x86 {
    use libtest_mimic::{Completion, Failed, Trial};
    use tiercheck_core::arch::x86_64::avx2::tiled as twin;
    use tiercheck_core::arch::x86_64::avx2::Avx2Twin;
    use tiercheck_core::lane::vec_dot_rows;
    use tiercheck_core::quant::ActRule;
    use tiercheck_core::rng::Rng;
    use tiercheck_core::{GgmlType, Kernels, WeightMatrix};
    use tiercheck_x86_64::avx2::{is_available, kernels, tiled};

    const LANE: &str = "x86_64-avx2";

    type Check = fn() -> Result<(), Failed>;

    /// The weight types the tiled path takes.
    const TYPES: [GgmlType; 6] = [
        GgmlType::Q4_K,
        GgmlType::Q6_K,
        GgmlType::Q2_K,
        GgmlType::Q3_K,
        GgmlType::Q5_K,
        GgmlType::IQ4_XS,
    ];

    /// `n` rows of `nb` blocks of `ty`: random bytes with small finite f16 scales
    /// (`kind` 0), or every quant byte 0xff / 0x00 / 0x80 with the largest scales
    /// (`kind` 1..=3: the extreme codes, 6-bit scales 63, Q6_K scales -128).
    fn weights(g: &mut Rng, ty: GgmlType, n: usize, nb: usize, kind: u8) -> Vec<u8> {
        let size = ty.type_size();
        let mut out: Vec<u8> = (0..n * nb * size)
            .map(|_| match kind {
                1 => 0xff,
                2 => 0x00,
                3 => 0x80,
                _ => g.next_u8(),
            })
            .collect();
        for blk in out.chunks_exact_mut(size) {
            // Finite f16 scales below 1 in magnitude, either sign.
            let mut f16 = || [g.next_u8(), g.next_u8() & 0xbb];
            match ty {
                GgmlType::Q4_K | GgmlType::Q5_K => {
                    blk[0..2].copy_from_slice(&f16());
                    blk[2..4].copy_from_slice(&f16());
                }
                GgmlType::Q6_K => blk[208..210].copy_from_slice(&f16()),
                GgmlType::Q2_K => {
                    blk[80..82].copy_from_slice(&f16());
                    blk[82..84].copy_from_slice(&f16());
                }
                GgmlType::Q3_K => blk[108..110].copy_from_slice(&f16()),
                GgmlType::IQ4_XS => blk[0..2].copy_from_slice(&f16()),
                _ => unreachable!(),
            }
        }
        out
    }

    /// `m` activation rows of `k` values, q8_K by the lane's rule; row kinds vary.
    fn acts(g: &mut Rng, m: usize, k: usize) -> Vec<Vec<u8>> {
        (0..m)
            .map(|i| {
                let x: Vec<f32> = (0..k)
                    .map(|e| match i % 3 {
                        0 => (g.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0,
                        1 => {
                            if e % 2 == 0 {
                                3.5
                            } else {
                                -2.25
                            }
                        }
                        _ => ((g.next_u64() >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 1e4,
                    })
                    .collect();
                ActRule::Q8KRef.quantize(&x).unwrap()
            })
            .collect()
    }

    fn native_equals_twin() -> Result<(), Failed> {
        let mut g = Rng::new(0x7115_d000_2026_1201);
        let mut cases = 0;
        for ty in TYPES {
            for (nb, n) in [(1usize, 1usize), (2, 7), (3, 16), (8, 5)] {
                for m in [8usize, 9, 15, 16, 17, 33] {
                    for kind in 0..4u8 {
                        let k = 256 * nb;
                        let w = weights(&mut g, ty, n, nb, kind);
                        let wm = WeightMatrix::new(ty, n, k, &w).unwrap();
                        let a = acts(&mut g, m, k);
                        let rows: Vec<&[u8]> = a.iter().map(|r| r.as_slice()).collect();
                        let want = twin::matmul(&wm, &rows).unwrap();
                        // SAFETY: `is_available()` held (see `run`).
                        let got = unsafe { tiled::matmul(&wm, &rows) }.unwrap();
                        let (wb, gb): (Vec<u32>, Vec<u32>) = (
                            want.iter().map(|v| v.to_bits()).collect(),
                            got.iter().map(|v| v.to_bits()).collect(),
                        );
                        if wb != gb {
                            let i = wb.iter().zip(&gb).position(|(a, b)| a != b).unwrap();
                            return Err(format!(
                                "{} nb={nb} n={n} m={m} kind={kind}: output {i} native {:e} vs twin {:e}",
                                ty.name(),
                                got[i],
                                want[i]
                            )
                            .into());
                        }
                        cases += 1;
                    }
                }
            }
        }
        if cases != TYPES.len() * 4 * 6 * 4 {
            return Err(format!("only {cases} cases ran").into());
        }
        Ok(())
    }

    /// The lane's matmul: vec_dot per row below 8 rows, the tiled kernel from 8, native
    /// and twin alike; and the tiled result is not simply vec_dot's.
    fn lane_takes_tiled_from_8_rows() -> Result<(), Failed> {
        let native = kernels().map_err(|e| e.to_string())?;
        let mut g = Rng::new(0x51ab_0008);
        let mut tiled_differs = false;
        for ty in TYPES {
            let (n, k) = (12usize, 512usize);
            let w = weights(&mut g, ty, n, k / 256, 0);
            let wm = WeightMatrix::new(ty, n, k, &w).unwrap();
            for m in [1usize, 7, 8, 9] {
                let a = acts(&mut g, m, k);
                let flat: Vec<u8> = a.concat();
                let rows: Vec<&[u8]> = a.iter().map(|r| r.as_slice()).collect();
                let per_row = vec_dot_rows(&Avx2Twin, &wm, &flat, m).unwrap();
                let want = if m >= 8 { twin::matmul(&wm, &rows).unwrap() } else { per_row.clone() };
                for (name, k) in [("native", native), ("portable", &Avx2Twin as &dyn Kernels)] {
                    let got = k.matmul_quantized(&wm, &flat, m).map_err(|e| e.to_string())?;
                    if got.iter().map(|v| v.to_bits()).ne(want.iter().map(|v| v.to_bits())) {
                        return Err(
                            format!("{name} {} m={m}: not the expected path", ty.name()).into()
                        );
                    }
                    let path = k.plain_path(ty, m);
                    if path != if m >= 8 { "tiled" } else { "vec_dot" } {
                        return Err(
                            format!("{name} {} m={m}: plain_path says {path}", ty.name()).into()
                        );
                    }
                }
                tiled_differs |=
                    m >= 8 && want.iter().zip(&per_row).any(|(a, b)| a.to_bits() != b.to_bits());
            }
        }
        if !tiled_differs {
            return Err(
                "the tiled path never differed from vec_dot: the test cannot tell them apart"
                    .into(),
            );
        }
        Ok(())
    }

    fn run(check: Check) -> Result<Completion, Failed> {
        crate::common::run_where_available(LANE, is_available(), kernels, check)
    }

    pub fn trials() -> Vec<Trial> {
        let checks: [(&str, Check); 2] = [
            ("native_equals_twin", native_equals_twin),
            ("lane_takes_tiled_from_8_rows", lane_takes_tiled_from_8_rows),
        ];
        checks
            .into_iter()
            .map(|(name, check)| Trial::ignorable_test(format!("tiled/{name}"), move || run(check)))
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
