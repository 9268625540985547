//! Refreshing goldens ("bless").
//!
//! Rules: refused when `CI` is set; a lane's goldens come only from that lane's own
//! kernels (native where this host runs them, else the portable twin) and are written
//! only under that lane's folder, whose manifest names the lane; a lane whose output
//! fails its tolerance check against `ref` and the exact answer is refused with the
//! report; cases outside `filter` keep their old entries; writes are atomic (see
//! [`super::store`]). Unchanged outputs keep their old entries (and provenance), so a
//! refresh changes only what moved.

use std::collections::BTreeMap;

use tiercheck_core::Lane;

use super::cases::catalogue;
use super::check::check_tolerance;
use super::manifest::{Entry, Manifest, Provenance, Stats, FORMAT};
use super::output::Output;
use super::run::{applicable, run_case};
use super::store::{GoldenDir, GoldenError, Inputs};
use tiercheck_lanes::{self as lanes, Impl};
use tiercheck_lanes::{host, provenance};

/// What a refresh of one lane changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BlessSummary {
    /// Lane name.
    pub lane: String,
    /// `native` or `portable`.
    pub implementation: String,
    /// Cases whose output changed.
    pub changed: Vec<String>,
    /// Cases that had no entry before.
    pub added: Vec<String>,
    /// Entries removed (their case no longer exists).
    pub removed: Vec<String>,
    /// Cases recomputed with identical bits.
    pub unchanged: usize,
}

impl std::fmt::Display for BlessSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "lane {} ({}): {} changed, {} added, {} removed, {} unchanged",
            self.lane,
            self.implementation,
            self.changed.len(),
            self.added.len(),
            self.removed.len(),
            self.unchanged
        )?;
        for (tag, list) in
            [("changed", &self.changed), ("added", &self.added), ("removed", &self.removed)]
        {
            for c in list.iter().take(20) {
                writeln!(f, "  {tag}: {c}")?;
            }
            if list.len() > 20 {
                writeln!(f, "  ... and {} more {tag}", list.len() - 20)?;
            }
        }
        Ok(())
    }
}

/// Why a refresh did not happen.
#[derive(Debug, thiserror::Error)]
pub enum BlessError {
    /// `CI` is set.
    #[error("refusing to refresh goldens under CI (the CI environment variable is set)")]
    UnderCi,
    /// The golden store failed.
    #[error(transparent)]
    Store(#[from] GoldenError),
    /// A lane's outputs failed their tolerance check.
    #[error("refusing to bless lane `{lane}`: {count} case(s) fail the tolerance check against ref:\n{first}")]
    Tolerance {
        /// Lane.
        lane: String,
        /// How many cases failed.
        count: usize,
        /// The first failure's report.
        first: String,
    },
    /// Running a case failed.
    #[error("lane `{lane}`, case `{case}`: {problem}")]
    Run {
        /// Lane.
        lane: String,
        /// Case.
        case: String,
        /// What happened.
        problem: String,
    },
}

/// Whether refreshing is allowed here (`CI` unset or empty).
pub fn allowed() -> bool {
    tiercheck_model::golden_folder::refresh_allowed()
}

/// Refresh the goldens of `lane` for the cases whose name contains `filter` (all when
/// `None`).
pub fn bless_lane(
    dir: &GoldenDir,
    lane: &'static Lane,
    filter: Option<&str>,
    inputs: &Inputs,
) -> Result<BlessSummary, BlessError> {
    if !allowed() {
        return Err(BlessError::UnderCi);
    }
    let chosen = lanes::choose(lane, Impl::Auto).map_err(|problem| BlessError::Run {
        lane: lane.name.into(),
        case: String::new(),
        problem,
    })?;
    // Damaged goldens are replaced, not trusted: a corrupt manifest or entry counts as
    // absent (the summary then lists those cases as added).
    let old = match dir.load_lane(lane.name) {
        Ok(g) => Some(g),
        Err(GoldenError::MissingLane { .. } | GoldenError::Corrupt { .. }) => None,
        Err(e) => return Err(e.into()),
    };
    let prov = Provenance {
        lane: lane.name.to_string(),
        implementation: chosen.impl_name().to_string(),
        cpu_features: host::cpu_feature_string(),
        qemu_cpu: host::qemu_cpu(),
        tiercheck_version: provenance::VERSION.to_string(),
        git_revision: provenance::git_revision().to_string(),
    };
    let mut summary = BlessSummary {
        lane: lane.name.to_string(),
        implementation: chosen.impl_name().to_string(),
        ..Default::default()
    };
    let mut entries = BTreeMap::new();
    let mut outputs: BTreeMap<String, Output> = BTreeMap::new();
    let mut failures = Vec::new();
    let cases: Vec<_> = catalogue().into_iter().filter(|c| applicable(lane, c)).collect();
    for case in &cases {
        let selected = filter.is_none_or(|f| case.name.contains(f));
        let previous = old.as_ref().and_then(|g| g.expected(&case.name).ok().flatten());
        if !selected {
            if let Some((entry, out)) = previous {
                entries.insert(case.name.clone(), entry.clone());
                outputs.insert(case.name.clone(), out.clone());
            }
            continue;
        }
        let run_err = |problem: String| BlessError::Run {
            lane: lane.name.into(),
            case: case.name.clone(),
            problem,
        };
        let out = run_case(lane, chosen.kernels, case, inputs).map_err(run_err)?;
        let ref_out = crate::run::reference_output(case, inputs).map_err(run_err)?;
        if let Err(report) =
            check_tolerance(lane, chosen.kernels, case, &out, ref_out.as_ref(), inputs)
        {
            failures.push(report);
            continue;
        }
        let sha = out.sha256();
        match previous {
            Some((entry, _)) if entry.sha256 == sha => {
                summary.unchanged += 1;
                entries.insert(case.name.clone(), entry.clone());
            }
            prev => {
                if prev.is_some() {
                    summary.changed.push(case.name.clone());
                } else {
                    summary.added.push(case.name.clone());
                }
                let stored = out.stored_part();
                let entry = Entry {
                    sha256: sha,
                    shape: out.shape(),
                    dtype: out.dtype(),
                    stored: stored.len(),
                    stored_sha256: stored.sha256(),
                    stats: Stats::of(&out.values()),
                    provenance: prov.clone(),
                    check: String::new(),
                }
                .seal(&case.name);
                entries.insert(case.name.clone(), entry);
            }
        }
        outputs.insert(case.name.clone(), out.stored_part());
    }
    if !failures.is_empty() {
        return Err(BlessError::Tolerance {
            lane: lane.name.into(),
            count: failures.len(),
            first: failures.swap_remove(0),
        });
    }
    if let Some(old) = &old {
        for name in old.manifest.entries.keys() {
            if !entries.contains_key(name) {
                summary.removed.push(name.clone());
            }
        }
    }
    let manifest = Manifest {
        format: FORMAT,
        lane: lane.name.to_string(),
        outputs_file: String::new(),
        entries,
    };
    dir.write_lane(lane.name, manifest, &outputs)?;
    Ok(summary)
}
