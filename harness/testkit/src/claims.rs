//! The checks of the lanes' status claims ([`tiercheck_core::lane::Status`]).
//!
//! Every [`tiercheck_core::lane::Proof`] names a suite of the cli package's `trials` test
//! binary ([`crate::suites`]) and trial-name prefixes in it (names within the suite). That
//! suite builds its trials with [`tracked`] (each records its outcome in this process's
//! ledger) and appends [`claim_trials`]: one trial per claim
//! (`<suite>::status/<lane>/<level>/<n>`), queued after every proving trial, which waits for
//! the trials its proof names and passes only when every one of them ran in this suite
//! run and passed. A named prefix that matches no trial, a proving trial that was
//! filtered out, failed or panicked, fails the claim; proving trials ignored because
//! this host cannot run them (the reason is theirs) make the claim ignored with `proven
//! against <build>; not checked on this host: <reason>`, and a failure where the lane is
//! required (`TIERCHECK_REQUIRE_LANES`). A claim can then not outlive the trials that
//! prove it, nor pass where they did not run. The tests of `lane_status` (a module of the
//! `cli` test binary) check the other direction: every suite a claim names exists and
//! calls [`claim_trials`].

use std::collections::HashMap;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::{Condvar, Mutex, OnceLock};

use libtest_mimic::{Completion, Failed, Trial};
use tiercheck_core::LANES;

use crate::suites::{trial_name, within, Selection};

/// What became of a trial of this process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// It ran and passed.
    Passed,
    /// It was ignored, with this reason.
    Ignored(String),
    /// It failed or panicked.
    Failed,
}

struct Ledger {
    done: Mutex<HashMap<String, Outcome>>,
    changed: Condvar,
}

fn ledger() -> &'static Ledger {
    static LEDGER: OnceLock<Ledger> = OnceLock::new();
    LEDGER.get_or_init(|| Ledger { done: Mutex::new(HashMap::new()), changed: Condvar::new() })
}

/// Record `name`'s outcome (what [`tracked`] does when its trial ends).
pub fn record(name: &str, outcome: Outcome) {
    let l = ledger();
    l.done.lock().unwrap_or_else(|e| e.into_inner()).insert(name.to_string(), outcome);
    l.changed.notify_all();
}

/// A trial as `Trial::ignorable_test` makes it, whose outcome (a panic included) goes to
/// this process's ledger for the claim checks.
pub fn tracked(
    name: impl Into<String>,
    f: impl FnOnce() -> Result<Completion, Failed> + Send + 'static,
) -> Trial {
    let name = name.into();
    let key = name.clone();
    Trial::ignorable_test(name, move || {
        let r = catch_unwind(AssertUnwindSafe(f));
        let outcome = match &r {
            Ok(Ok(Completion::Completed)) => Outcome::Passed,
            Ok(Ok(Completion::Ignored { reason })) => {
                Outcome::Ignored(reason.clone().unwrap_or_else(|| "no reason given".into()))
            }
            _ => Outcome::Failed,
        };
        record(&key, outcome);
        match r {
            Ok(x) => x,
            Err(p) => resume_unwind(p),
        }
    })
}

/// Wait until every trial in `names` has an outcome; return them in order.
fn wait_for(names: &[String]) -> Vec<Outcome> {
    let l = ledger();
    let mut done = l.done.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        if names.iter().all(|n| done.contains_key(n)) {
            return names.iter().map(|n| done[n].clone()).collect();
        }
        done = l.changed.wait(done).unwrap_or_else(|e| e.into_inner());
    }
}

/// The claim trials of `suite` (module doc), to be appended after `trials`, the suite's
/// whole list as the binary runs it with `selection` (whose filters decide which proving
/// trials run).
pub fn claim_trials(suite: &str, selection: &Selection, trials: &[Trial]) -> Vec<Trial> {
    let required = crate::require::required_lanes().unwrap_or_default();
    let mut out = Vec::new();
    for (name, verdict) in claim_checks(suite, &trials.iter().map(|t| t.name()).collect::<Vec<_>>())
    {
        let Some((lane, proof)) = within(suite, &name).and_then(proof_of) else { continue };
        if let Err(e) = verdict {
            out.push(Trial::test(name, move || Err(e.into())));
            continue;
        }
        let mut run = Vec::new();
        let mut filtered = Vec::new();
        let proves = |t: &&Trial| {
            within(suite, t.name()).is_some_and(|n| proof.trials.iter().any(|p| n.starts_with(p)))
        };
        for t in trials.iter().filter(proves) {
            if selection.is_filtered_out(t) || selection.is_ignored(t) {
                filtered.push(t.name().to_string());
            } else {
                run.push(t.name().to_string());
            }
        }
        let must = required.iter().any(|r| r == lane);
        out.push(Trial::ignorable_test(name, move || {
            if let Some(f) = filtered.first() {
                return Err(format!(
                    "`{lane}` claims {} against {}, but its trial {f} did not run in this suite run (filtered out){}",
                    proof.level.name(),
                    proof.against,
                    if filtered.len() > 1 { format!(", nor {} more", filtered.len() - 1) } else { String::new() }
                )
                .into());
            }
            let outcomes = wait_for(&run);
            if let Some((t, _)) = run.iter().zip(&outcomes).find(|(_, o)| **o == Outcome::Failed) {
                return Err(format!(
                    "`{lane}` claims {} against {}, but its trial {t} failed",
                    proof.level.name(),
                    proof.against
                )
                .into());
            }
            if let Some((t, Outcome::Ignored(why))) =
                run.iter().zip(&outcomes).find(|(_, o)| matches!(o, Outcome::Ignored(_)))
            {
                let what = format!(
                    "proven against {}; not checked on this host: {why} ({t} ignored)",
                    proof.against
                );
                if must {
                    return Err(format!("`{lane}` is required here, but {what}").into());
                }
                return Ok(Completion::ignored_with(what));
            }
            Ok(Completion::Completed)
        }));
    }
    out
}

/// The lane and proof a claim check's name (`status/<lane>/<level>/<n>`) stands for.
fn proof_of(name: &str) -> Option<(&'static str, &'static tiercheck_core::lane::Proof)> {
    let mut parts = name.strip_prefix("status/")?.rsplitn(3, '/');
    let i: usize = parts.next()?.parse().ok()?;
    let _level = parts.next()?;
    let lane = parts.next()?;
    let l = LANES.iter().find(|l| l.name == lane)?;
    Some((l.name, l.status.proofs().get(i)?))
}

/// One check per claim naming `suite`: the trial name and whether every trial-name prefix
/// its proof names matches a trial of `trial_names` (full names, `<suite>::...`).
pub fn claim_checks(suite: &str, trial_names: &[&str]) -> Vec<(String, Result<(), String>)> {
    let mut out = Vec::new();
    let in_suite: Vec<&str> = trial_names.iter().filter_map(|t| within(suite, t)).collect();
    for lane in LANES {
        for (i, proof) in lane.status.proofs().iter().enumerate() {
            if proof.suite != suite {
                continue;
            }
            let name =
                trial_name(suite, format!("status/{}/{}/{i}", lane.name, proof.level.name()));
            let missing: Vec<&str> = proof
                .trials
                .iter()
                .copied()
                .filter(|prefix| !in_suite.iter().any(|t| t.starts_with(prefix)))
                .collect();
            let verdict = if proof.trials.is_empty() {
                Err(format!("`{}` claims a proof in `{suite}` that names no trials", lane.name))
            } else if missing.is_empty() {
                Ok(())
            } else {
                Err(format!(
                    "`{}` claims {} vs {} proven by `{suite}`, but no trial matches {}",
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
        let names = [
            "oracle_x86_lanes::oracle/haswell/matmul-plain/q4_0/x",
            // Another suite's trial does not prove this suite's claims.
            "oracle_mulmat::oracle/haswell/matmul-repack/q4_0/x86_64-avx2-repack",
        ];
        let checks = claim_checks("oracle_x86_lanes", &names);
        // x86_64-avx2 claims matmul-plain here (present), x86_64-avx2-repack matmul-repack
        // (absent from this suite).
        let avx2 =
            checks.iter().find(|(n, _)| n.starts_with("oracle_x86_lanes::status/x86_64-avx2/"));
        let repack = checks
            .iter()
            .find(|(n, _)| n.starts_with("oracle_x86_lanes::status/x86_64-avx2-repack/"));
        assert!(matches!(avx2, Some((_, Ok(())))), "{checks:?}");
        assert!(matches!(repack, Some((_, Err(_)))), "{checks:?}");
        assert!(claim_checks("no_such_suite", &[]).is_empty());
    }
}
