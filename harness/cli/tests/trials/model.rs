//! Model goldens: every lane's decoder run on the embedded model (tokens and the digest
//! of every tap over all steps) checked bitwise against `golden/model/lanes/<lane>.json`.
//!
//! One trial per lane, implementation (`native`, `portable`) and prompt:
//! `model::<lane>/<impl>/<prompt>`. A native trial this host cannot run is reported
//! ignored with the reason (never passed); with `TIERCHECK_REQUIRE_LANES` naming the
//! lane (as CI sets it per CPU model) that is a failure instead. The portable trials run
//! everywhere, so x86 lanes are checked under qemu-aarch64 and aarch64 lanes on x86.
//!
//! `TIERCHECK_MODEL_PROMPTS=N` limits the run to the first N prompts (used under qemu,
//! where the decoder is slow): the other prompts' trials are reported ignored with that
//! reason, never left out.
//!
//! The path runs (`tiercheck_golden::model::path_runs`: several ubatches with tiled
//! flash attention, split-KV at two and four tier threads) have one trial each per lane
//! and implementation, `model::<lane>/<impl>/run/<name>`; `TIERCHECK_MODEL_RUNS=N`
//! limits them to the first N (the cheapest first), the others ignored with the reason.

use std::sync::{Arc, OnceLock};

use libtest_mimic::{Completion, Trial};
use tiercheck_testkit::suites::{trial_name, Selection};

use tiercheck_golden::model::{self as mg, ModelGolden};
use tiercheck_golden::GoldenDir;
use tiercheck_lanes::{self as lanes, Impl};
use tiercheck_model::lane_run::PromptIds;
use tiercheck_model::Model;

type Inputs = (Model, Vec<PromptIds>, usize);

fn inputs() -> Result<&'static Inputs, String> {
    static CELL: OnceLock<Result<Inputs, String>> = OnceLock::new();
    CELL.get_or_init(|| mg::inputs().map_err(|e| format!("{e:#}"))).as_ref().map_err(Clone::clone)
}

fn required_lanes() -> Vec<String> {
    tiercheck_testkit::require::required_lanes().unwrap_or_else(|e| panic!("{e}"))
}

/// A lane's implementation and the embedded model.
type Ready = (tiercheck_lanes::Chosen, &'static Model);

/// What a trial needs before it runs: the lane's implementation and its golden, made for
/// the embedded model; else how the trial ends (`Ok`: ignored with the reason; `Err`: a
/// required lane that cannot run natively, or a golden that does not fit).
fn ready<'g>(
    lane: &'static tiercheck_core::Lane,
    imp: Impl,
    must: bool,
    golden: &'g Result<ModelGolden, String>,
) -> Result<(Ready, &'g ModelGolden), Result<Completion, libtest_mimic::Failed>> {
    let chosen = match lanes::choose(lane, imp) {
        Ok(c) => c,
        Err(why) if must => {
            return Err(Err(format!("required lane cannot run natively: {why}").into()))
        }
        Err(why) => return Err(Ok(Completion::ignored_with(why))),
    };
    let golden = golden.as_ref().map_err(|e| Err(e.clone().into()))?;
    let (model, _, _) = inputs().map_err(|e| Err(e.into()))?;
    if golden.model_sha256 != model.sha256 {
        return Err(Err(format!(
            "golden was made for model {} but the embedded model is {}: run `tiercheck bless`",
            golden.model_sha256, model.sha256
        )
        .into()));
    }
    Ok(((chosen, model), golden))
}

/// This suite's name, the first part of its trials' names.
pub const SUITE: &str = "model";

/// The suite's trials, in the order they run.
pub fn trials(_selection: &Selection) -> Vec<Trial> {
    let dir = GoldenDir::from_env();
    let env_limit = |key: &str| -> usize {
        std::env::var(key).ok().and_then(|v| v.parse().ok()).unwrap_or(usize::MAX)
    };
    let limit = env_limit("TIERCHECK_MODEL_PROMPTS");
    let run_limit = env_limit("TIERCHECK_MODEL_RUNS");
    let required = required_lanes();
    let recipe =
        tiercheck_model::embedded::Recipe::load(&tiercheck_model::embedded::Recipe::default_path())
            .expect("golden/model/recipe.toml");
    let prompts = tiercheck_model::embedded::Prompts::load(
        &tiercheck_model::embedded::Prompts::default_path(),
        &recipe,
    )
    .expect("golden/prompts/prompts.toml");
    let mut trials = Vec::new();
    for lane in lanes::all() {
        let golden: Arc<Result<ModelGolden, String>> =
            Arc::new(mg::load(&mg::path(dir.root(), lane.name)).map_err(|e| format!("{e:#}")));
        for imp in [Impl::Native, Impl::Portable] {
            if imp == Impl::Native && !lanes::has_native(lane) {
                continue;
            }
            let imp_name = if imp == Impl::Native { "native" } else { "portable" };
            for (i, p) in prompts.prompts.iter().enumerate() {
                let name = format!("{}/{imp_name}/{}", lane.name, p.name);
                let golden = Arc::clone(&golden);
                let must = required.iter().any(|r| r == lane.name);
                trials.push(Trial::ignorable_test(trial_name(SUITE, name), move || {
                    if i >= limit {
                        return Ok(Completion::ignored_with(format!(
                            "TIERCHECK_MODEL_PROMPTS={limit}: only the first {limit} prompts run"
                        )));
                    }
                    let ((chosen, model), golden) = match ready(lane, imp, must, &golden) {
                        Ok(r) => r,
                        Err(done) => return done,
                    };
                    let (_, list, steps) = inputs()?;
                    if golden.steps != *steps {
                        return Err(format!(
                            "golden has {} steps, the prompts file {steps}",
                            golden.steps
                        )
                        .into());
                    }
                    let want = golden
                        .prompts
                        .iter()
                        .find(|g| g.name == list[i].name)
                        .ok_or_else(|| format!("no golden for prompt '{}'", list[i].name))?;
                    let got = mg::compute(model, &chosen, &list[i..i + 1], *steps)
                        .map_err(|e| format!("{e:#}"))?;
                    mg::check_prompt(want, &got.prompts[0])?;
                    Ok(Completion::Completed)
                }));
            }
            for (j, run) in mg::path_runs().into_iter().enumerate() {
                let name = format!("{}/{imp_name}/run/{}", lane.name, run.name);
                let golden = Arc::clone(&golden);
                let must = required.iter().any(|r| r == lane.name);
                trials.push(Trial::ignorable_test(trial_name(SUITE, name), move || {
                    if j >= run_limit {
                        return Ok(Completion::ignored_with(format!(
                            "TIERCHECK_MODEL_RUNS={run_limit}: only the first {run_limit} path runs run"
                        )));
                    }
                    let ((chosen, model), golden) = match ready(lane, imp, must, &golden) {
                        Ok(r) => r,
                        Err(done) => return done,
                    };
                    if let Some(why) =
                        mg::run_refused(model, &chosen, &run).map_err(|e| format!("{e:#}"))?
                    {
                        return Ok(Completion::ignored_with(format!("the lane refuses it: {why}")));
                    }
                    let want = golden.runs.iter().find(|g| g.name == run.name).ok_or_else(|| {
                        format!("no golden for path run '{}': run `tiercheck bless --lane {}`", run.name, lane.name)
                    })?;
                    let got = mg::compute_run(model, &chosen, &run).map_err(|e| format!("{e:#}"))?;
                    mg::check_prompt(want, &got)?;
                    Ok(Completion::Completed)
                }));
            }
        }
    }
    trials
}
