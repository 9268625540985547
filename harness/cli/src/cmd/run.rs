//! `tiercheck run`: the decoder on one lane, with per-step, per-layer traces.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;

use tiercheck_core::Lane;
use tiercheck_lanes::{self as lanes, Impl};
use tiercheck_model::lane_run::{self, PromptIds};
use tiercheck_model::Model;

use crate::args::{Exec, LaneParser, Setup};
use crate::progress::Progress;

/// `tiercheck run`.
#[derive(Args, Clone, Debug)]
pub struct RunArgs {
    /// Lane name (see `tiercheck lanes`).
    #[arg(long, value_parser = LaneParser)]
    pub lane: &'static Lane,
    /// Which implementation to run.
    #[arg(long = "impl", value_enum, default_value_t = Impl::Auto)]
    pub imp: Impl,
    /// Evaluate these comma-separated ids instead of the prompts file (teacher forcing,
    /// the way an engine evaluates a prompt); no greedy steps unless --steps is given.
    #[arg(long = "teacher-force", value_name = "IDS")]
    pub teacher_force: Option<String>,
    /// Write the trace here: a safetensors file for one prompt, a folder (one file per
    /// prompt) for several.
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub setup: Setup,
    #[command(flatten)]
    pub exec: Exec,
}

fn parse_ids(s: &str) -> Result<Vec<u32>> {
    let ids: Result<Vec<u32>, _> =
        s.split(',').map(str::trim).filter(|t| !t.is_empty()).map(str::parse::<u32>).collect();
    let ids = ids.with_context(|| {
        format!("--teacher-force: '{s}' is not a comma-separated list of token ids")
    })?;
    if ids.is_empty() {
        bail!("--teacher-force: no ids given");
    }
    Ok(ids)
}

/// `tiercheck run`.
pub fn run(a: RunArgs) -> Result<()> {
    let lane = a.lane;
    let chosen = lanes::choose(lane, a.imp).map_err(anyhow::Error::msg)?;
    let path = a.setup.model_path()?;
    let model = Model::open(&path)?;
    let (prompts, steps) = match &a.teacher_force {
        Some(ids) => {
            if a.setup.prompt.is_some() || a.setup.prompts.is_some() {
                bail!("--teacher-force replaces the prompts file; drop --prompt/--prompts");
            }
            (
                vec![PromptIds { name: "teacher-forced".into(), ids: parse_ids(ids)? }],
                a.setup.steps.unwrap_or(0),
            )
        }
        None => {
            let (_, p, s) = a.setup.prompts(&model)?;
            (p, s)
        }
    };
    if let Some(out) = &a.out {
        if prompts.len() > 1 && out.extension().is_some_and(|e| e == "safetensors") {
            bail!(
                "{}: {} prompts need a folder for --out, not a .safetensors file",
                out.display(),
                prompts.len()
            );
        }
    }
    let opts = a.setup.run_options(&a.exec, steps, a.out.clone(), 1)?;
    let mut bar = Progress::new(prompts.len(), a.exec.quiet || a.exec.json);
    bar.show(&format!("{} ({})", lane.name, chosen.impl_name()));
    let result = lane_run::run_lane(&model, &chosen, &prompts, &opts, |i| {
        bar.tick(&format!("{} {}", lane.name, prompts[i].name))
    })?;
    bar.finish();
    if a.exec.json {
        println!("{}", serde_json::to_string(&result)?);
        return Ok(());
    }
    println!(
        "lane {} ({}), model {} ({}), mode {}, residual {}",
        result.lane,
        result.how,
        path.display(),
        &model.sha256[..12],
        opts.mode.name(),
        opts.residual.name()
    );
    for p in &result.prompts {
        let last = p.steps.last().expect("a step at least");
        println!(
            "  {:<16} {} ids, {} greedy: {:?}  (last gap {:.3}) {:.2}s",
            p.name,
            p.ids.len(),
            p.generated.len(),
            p.generated,
            last.gap,
            p.wall_s
        );
    }
    if let Some(out) = &a.out {
        println!("traces: {}", out.display());
    }
    Ok(())
}
