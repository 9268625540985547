//! Thread-count invariance: every lane's matmul split over 1, 2 and 3 threads (by
//! output columns only, `tiercheck_core::lane::parallel`) gives bitwise identical
//! results, for plain and repacked weights, portable and native implementations.
//! A native trial that cannot run here is ignored with the reason, and fails instead
//! when `TIERCHECK_REQUIRE_LANES` requires the lane (`tiercheck_testkit::require`).
//! Trials: `threads::<lane>/portable`, `threads::<lane>/native`.

use libtest_mimic::{Completion, Trial};
use tiercheck_core::lane::parallel::matmul_parallel;
use tiercheck_core::quant::weights;
use tiercheck_core::repack::Target;
use tiercheck_core::{GgmlType, Kernels, Lane, WeightMatrix};
use tiercheck_lanes as lanes;
use tiercheck_model::kernel_inputs::{Rng, RowKind};
use tiercheck_testkit::suites::{trial_name, Selection};

/// This suite's name, the first part of its trials' names.
pub const SUITE: &str = "threads";

/// The suite's trials, in the order they run.
pub fn trials(_selection: &Selection) -> Vec<Trial> {
    let required = tiercheck_testkit::require::required_lanes();
    let mut trials = Vec::new();
    for lane in lanes::all() {
        trials.push(Trial::test(trial_name(SUITE, format!("{}/portable", lane.name)), move || {
            check(lane, lane.portable)
        }));
        if lanes::has_native(lane) {
            let required = required.clone();
            trials.push(Trial::ignorable_test(
                trial_name(SUITE, format!("{}/native", lane.name)),
                move || match lanes::native(lane) {
                    Ok(k) => check(lane, k).map(|()| Completion::Completed),
                    Err(why) if required?.iter().any(|r| r == lane.name) => {
                        Err(format!("TIERCHECK_REQUIRE_LANES requires {}: {why}", lane.name).into())
                    }
                    Err(why) => Ok(Completion::ignored_with(why)),
                },
            ));
        }
    }
    trials
}

fn check(lane: &Lane, kernels: &dyn Kernels) -> Result<(), libtest_mimic::Failed> {
    let mut rng = Rng::new(3);
    for ty in [GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K] {
        if kernels.act_rule(ty).is_err() {
            continue; // the lane does not multiply this type (hip lanes: Q4_0)
        }
        for (k, n, m) in [(512usize, 40usize, 5usize), (256, 33, 4), (512, 24, 1)] {
            let w: Vec<f32> = (0..n).flat_map(|_| RowKind::Normal.row(&mut rng, k)).collect();
            let wq = weights::quantize(ty, &w, n, k)?;
            let x: Vec<f32> = (0..m).flat_map(|_| RowKind::Normal.row(&mut rng, k)).collect();
            let wm = WeightMatrix::new(ty, n, k, &wq)?;
            let prepared = kernels.prepare(wm, Target::Cpu)?;
            let one = kernels.matmul(&wm, &x, m)?;
            for threads in [1, 2, 3] {
                let got = matmul_parallel(
                    kernels,
                    &prepared,
                    &x,
                    m,
                    threads,
                    tiercheck_core::lane::TierPool::threads(1),
                )?;
                if got.iter().zip(&one).any(|(a, b)| a.to_bits() != b.to_bits())
                    || got.len() != one.len()
                {
                    return Err(format!(
                        "{} {ty} k={k} n={n} m={m}: {threads} threads differ",
                        lane.name
                    )
                    .into());
                }
            }
        }
    }
    Ok(())
}
