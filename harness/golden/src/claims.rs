//! The checks of the lanes' status claims ([`tiercheck_core::lane::Status`]).
//!
//! Every [`tiercheck_core::lane::Proof`] names an integration test of this package and
//! trial-name prefixes in it. That test calls [`claim_checks`] with its own name and the
//! names of its trials and adds one trial per claim (`status/<lane>/<level>/<n>`), which
//! fails when a named prefix matches no trial: a claim can then not outlive the trials
//! that prove it. The proving trials fail when the lane differs from the real tier, and
//! under `TIERCHECK_REQUIRE_ORACLE=1` (CI) they cannot be ignored. The test
//! `lane_status` checks the other direction: every test a claim names exists and calls
//! this function.

use tiercheck_core::LANES;

/// One check per claim naming `test`: the trial name and its verdict.
pub fn claim_checks(test: &str, trial_names: &[&str]) -> Vec<(String, Result<(), String>)> {
    let mut out = Vec::new();
    for lane in LANES {
        for (i, proof) in lane.status.proofs().iter().enumerate() {
            if proof.test != test {
                continue;
            }
            let name = format!("status/{}/{}/{i}", lane.name, proof.level.name());
            let missing: Vec<&str> = proof
                .trials
                .iter()
                .copied()
                .filter(|prefix| !trial_names.iter().any(|t| t.starts_with(prefix)))
                .collect();
            let verdict = if proof.trials.is_empty() {
                Err(format!("`{}` claims a proof in `{test}` that names no trials", lane.name))
            } else if missing.is_empty() {
                Ok(())
            } else {
                Err(format!(
                    "`{}` claims {} vs {} proven by `{test}`, but no trial matches {}",
                    lane.name,
                    proof.level.name(),
                    proof.against,
                    missing.join(", ")
                ))
            };
            out.push((name, verdict));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_without_its_trials_fails() {
        let checks = claim_checks("oracle_x86_lanes", &["oracle/haswell/matmul-plain/q4_0/x"]);
        // x86_64-avx2 claims matmul-plain here (present), x86_64-avx2-repack matmul-repack
        // (absent).
        let avx2 = checks.iter().find(|(n, _)| n.starts_with("status/x86_64-avx2/"));
        let repack = checks.iter().find(|(n, _)| n.starts_with("status/x86_64-avx2-repack/"));
        assert!(matches!(avx2, Some((_, Ok(())))), "{checks:?}");
        assert!(matches!(repack, Some((_, Err(_)))), "{checks:?}");
        assert!(claim_checks("no_such_test", &[]).is_empty());
    }
}
