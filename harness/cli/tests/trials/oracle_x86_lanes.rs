//! The x86 lanes' whole matmuls against ggml's haswell tier (the `mulmat` driver that
//! `ci/oracle` builds: one `ggml_mul_mat` node, weights plain or in the CPU repack
//! buffer, llama.cpp's defaults otherwise: the tiled K-quant path on), bitwise.
//!
//! - `oracle/haswell/matmul-repack/<type>/x86_64-avx2-repack`: Q4_K, Q4_0 and IQ4_NL with
//!   the repack buffer, at k in {256, 512, 1024}, n in {8, 16, 24}, m in {1, 2, 3, 4, 5, 7,
//!   8, 9, 12, 17} (gemm for groups of four rows, gemv for the rest) and four activation
//!   kinds; plus n = 12, which ggml does not repack, against its plain path (from 8 rows
//!   on the tiled K-quant matmul for Q4_K, tinyBLAS from 2 for IQ4_NL); every other type,
//!   which the haswell repack buffer does not take, against the plain path (tiled from 8
//!   rows for the K-quants and IQ4_XS);
//! - `oracle/haswell/matmul-plain/<type>/x86_64-avx2`: all twelve weight types at m in
//!   {1, 3, 4, 5, 7, 8, 9, 16, 17} (below and from the x86 tiled path's m >= 8; IQ4_NL by
//!   llamafile's tinyBLAS from two rows), same k/n grid.
//!
//! Both the portable twin and, where the CPU runs it, the native kernels are compared.
//! Ignored with the reason without the oracle or without AVX2; either is a failure
//! under `TIERCHECK_REQUIRE_ORACLE=1`.

use libtest_mimic::{Completion, Failed, Trial};
use tiercheck_core::quant::weights;
use tiercheck_core::{GgmlType, Kernels, WeightMatrix};
use tiercheck_lanes as lanes;
use tiercheck_model::kernel_inputs::{Rng, RowKind};
use tiercheck_oracle::{MulmatDriver, MulmatMode, OracleConfig, OracleError, Tier};
use tiercheck_testkit::suites::{trial_name, Selection};

/// This suite's name, the first part of its trials' names.
pub const SUITE: &str = "oracle_x86_lanes";

/// The suite's trials, in the order they run.
pub fn trials(selection: &Selection) -> Vec<Trial> {
    let mut trials = Vec::new();
    // Every type: the repacked ones (Q4_0, Q4_K, IQ4_NL) and the plain fallbacks.
    for &ty in weights::QUANTIZABLE {
        trials.push(trial(
            format!("oracle/haswell/matmul-repack/{}/x86_64-avx2-repack", ty.name()),
            move |d| {
                check(
                    d,
                    ty,
                    "x86_64-avx2-repack",
                    MulmatMode::Repack,
                    &[1, 2, 3, 4, 5, 7, 8, 9, 12, 17],
                )
            },
        ));
    }
    for &ty in weights::QUANTIZABLE {
        trials.push(trial(
            format!("oracle/haswell/matmul-plain/{}/x86_64-avx2", ty.name()),
            move |d| check(d, ty, "x86_64-avx2", MulmatMode::Plain, &[1, 3, 4, 5, 7, 8, 9, 16, 17]),
        ));
    }
    trials.sort_by(|a, b| a.name().cmp(b.name()));
    let claims = tiercheck_testkit::claims::claim_trials(SUITE, selection, &trials);
    trials.extend(claims);
    trials
}

fn trial(
    name: String,
    f: impl FnOnce(&MulmatDriver) -> Result<usize, String> + Send + 'static,
) -> Trial {
    tiercheck_testkit::claims::tracked(trial_name(SUITE, name), move || {
        let required = std::env::var("TIERCHECK_REQUIRE_ORACLE").is_ok_and(|v| v == "1");
        if !tiercheck_lanes::host::x86_has("avx2") {
            let why = "cpu lacks avx2: the haswell tier cannot run here";
            if required {
                return Err(Failed::from(format!("TIERCHECK_REQUIRE_ORACLE=1 but {why}")));
            }
            return Ok(Completion::ignored_with(why));
        }
        let driver = match MulmatDriver::for_tier(&OracleConfig::from_env(), Tier::Haswell) {
            Ok(d) => d,
            Err(e) if required => {
                return Err(Failed::from(format!("TIERCHECK_REQUIRE_ORACLE=1 but {e}")))
            }
            Err(e) => {
                return Ok(Completion::ignored_with(format!(
                    "oracle unavailable ({e}); run ci/oracle"
                )))
            }
        };
        let n = f(&driver)?;
        if n < 180 {
            return Err(format!("only {n} cases ran").into());
        }
        Ok(Completion::Completed)
    })
}

fn check(
    driver: &MulmatDriver,
    ty: GgmlType,
    lane_name: &str,
    mode: MulmatMode,
    ms: &[usize],
) -> Result<usize, String> {
    let lane = lanes::find(lane_name)?;
    let mut impls: Vec<(&str, &dyn Kernels)> = vec![("portable", lane.portable)];
    if let Ok(native) = lanes::native(lane) {
        impls.push(("native", native));
    }
    let kinds = [RowKind::Normal, RowKind::Ties, RowKind::BothSignsMax, RowKind::WideRange];
    let mut rng = Rng::new(0x5EED ^ ty.id() as u64);
    let (mut cases, mut bad) = (0usize, Vec::new());
    let mut shapes: Vec<(usize, usize)> = Vec::new();
    for k in [256usize, 512, 1024] {
        for n in [8usize, 16, 24] {
            shapes.push((k, n));
        }
    }
    if mode == MulmatMode::Repack {
        shapes.push((512, 12)); // not repacked by ggml: the lane must take the plain path
    }
    for (k, n) in shapes {
        for &m in ms {
            for (ki, kind) in kinds.iter().enumerate() {
                let w: Vec<f32> = (0..n).flat_map(|_| RowKind::Normal.row(&mut rng, k)).collect();
                let wq = weights::quantize(ty, &w, n, k).map_err(|e| e.to_string())?;
                let x: Vec<f32> =
                    (0..m).flat_map(|r| kinds[(ki + r) % 4].row(&mut rng, k)).collect();
                let _ = kind;
                let want = match driver.run(mode, ty.id(), k, n, m, 2, &wq, &x) {
                    Ok(r) => r.out,
                    Err(OracleError::NoRepackLayout { .. }) => {
                        driver
                            .run(MulmatMode::Plain, ty.id(), k, n, m, 2, &wq, &x)
                            .map_err(|e| e.to_string())?
                            .out
                    }
                    Err(e) => return Err(e.to_string()),
                };
                let wm = WeightMatrix::new(ty, n, k, &wq).map_err(|e| e.to_string())?;
                for (name, kernels) in &impls {
                    let got = kernels.matmul(&wm, &x, m).map_err(|e| e.to_string())?;
                    cases += 1;
                    if got.len() != want.len() || got.len() != m * n {
                        bad.push(format!(
                            "{name} k={k} n={n} m={m} kinds#{ki}: {} values, ggml gave {} \
                             (want m*n = {})",
                            got.len(),
                            want.len(),
                            m * n
                        ));
                        continue;
                    }
                    let diff = got.iter().zip(&want).position(|(a, b)| a.to_bits() != b.to_bits());
                    if let Some(i) = diff {
                        bad.push(format!(
                            "{name} k={k} n={n} m={m} kinds#{ki}: [{i}] got {:e}, want {:e}",
                            got[i], want[i]
                        ));
                    }
                }
            }
        }
    }
    if bad.is_empty() {
        Ok(cases)
    } else {
        let mut msg = format!("{} of {cases} cases differ from ggml:\n", bad.len());
        for b in bad.iter().take(8) {
            msg.push_str(&format!("  {b}\n"));
        }
        Err(msg)
    }
}
