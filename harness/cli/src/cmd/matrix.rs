//! `tiercheck run` and `tiercheck matrix`: the decoder from the command line.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;

use tiercheck_lanes::{self as lanes, Impl};
use tiercheck_model::embedded::{self, Prompts, Recipe};
use tiercheck_model::runner::{self, LaneResult, PromptIds, RunOptions};
use tiercheck_model::{Mode, Model, Residual};

use crate::matrix::{self, Plan, Progress};

/// Options shared by `run` and `matrix`.
#[derive(Args, Clone, Debug)]
pub struct Common {
    /// GGUF model (qwen3). Default: the embedded model, built into the cache on first use.
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Prompts file (TOML: `steps`, `[[prompt]] name, tokens`). Default:
    /// golden/prompts/prompts.toml.
    #[arg(long)]
    pub prompts: Option<PathBuf>,
    /// Only the prompt with this name.
    #[arg(long)]
    pub prompt: Option<String>,
    /// Greedy tokens per prompt (default: the prompts file's `steps`).
    #[arg(long)]
    pub steps: Option<usize>,
    /// `prompt`: the prompt as one batch (gemm paths), then token by token; `decode`:
    /// token by token throughout (gemv paths).
    #[arg(long, value_enum, default_value_t = Mode::Prompt)]
    pub mode: Mode,
    /// Residual stream type.
    #[arg(long, value_enum, default_value_t = Residual::F32)]
    pub residual: Residual,
    /// Threads per matmul (results do not depend on it).
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Context length (a multiple of 256).
    #[arg(long = "ctx", default_value_t = 512)]
    pub n_ctx: usize,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// No progress display.
    #[arg(long)]
    pub quiet: bool,
}

/// `tiercheck run`.
#[derive(Args, Clone, Debug)]
pub struct RunArgs {
    /// Lane name (see `tiercheck lanes`).
    #[arg(long)]
    pub lane: String,
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
    pub common: Common,
}

/// `tiercheck matrix`.
#[derive(Args, Clone, Debug)]
pub struct MatrixArgs {
    /// Comma-separated lanes (default: all).
    #[arg(long)]
    pub lanes: Option<String>,
    /// The aarch64 build of tiercheck to run under qemu-aarch64 (default:
    /// target/aarch64-unknown-linux-gnu/{release,debug}/tiercheck when built).
    #[arg(long)]
    pub aarch64_bin: Option<PathBuf>,
    /// qemu CPU model for the aarch64 lanes (dotprod and i8mm, no SVE).
    #[arg(long, default_value = "max,sve=off")]
    pub qemu_cpu: String,
    /// Run every lane as its portable twin in this process (no native kernels, no qemu).
    #[arg(long)]
    pub portable: bool,
    /// Write every lane's traces into this folder (`<lane>/<prompt>.safetensors`).
    #[arg(long)]
    pub traces: Option<PathBuf>,
    #[command(flatten)]
    pub common: Common,
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

/// The model path (building the embedded one when none is given).
fn model_path(common: &Common) -> Result<PathBuf> {
    match &common.model {
        Some(p) => Ok(p.clone()),
        None => Ok(embedded::ensure_model(None)?),
    }
}

/// Prompts and the step count from the prompts file, checked against the model.
fn load_prompts(common: &Common, model: &Model) -> Result<(PathBuf, Vec<PromptIds>, usize)> {
    let path = common.prompts.clone().unwrap_or_else(Prompts::default_path);
    let recipe = Recipe::load(&Recipe::default_path())?;
    let mut limits = recipe.clone();
    limits.n_vocab = model.hp.n_vocab as u32;
    limits.context_length = common.n_ctx as u32;
    let prompts = Prompts::load(&path, &limits)?;
    let mut list: Vec<PromptIds> = prompts
        .prompts
        .iter()
        .map(|p| PromptIds { name: p.name.clone(), ids: p.tokens.clone() })
        .collect();
    if let Some(name) = &common.prompt {
        list.retain(|p| &p.name == name);
        if list.is_empty() {
            bail!("{}: no prompt named '{name}'", path.display());
        }
    }
    Ok((path, list, common.steps.unwrap_or(prompts.steps as usize)))
}

fn options(common: &Common, steps: usize, traces: Option<PathBuf>) -> RunOptions {
    RunOptions {
        steps,
        mode: common.mode,
        residual: common.residual,
        threads: common.threads,
        n_ctx: common.n_ctx,
        traces,
    }
}

/// `tiercheck run`.
pub fn cmd_run(a: RunArgs) -> Result<()> {
    let lane = lanes::find(&a.lane).map_err(anyhow::Error::msg)?;
    let chosen = lanes::choose(lane, a.imp).map_err(anyhow::Error::msg)?;
    let path = model_path(&a.common)?;
    let model = Model::open(&path)?;
    let (prompts, steps) = match &a.teacher_force {
        Some(ids) => {
            if a.common.prompt.is_some() || a.common.prompts.is_some() {
                bail!("--teacher-force replaces the prompts file; drop --prompt/--prompts");
            }
            (
                vec![PromptIds { name: "teacher-forced".into(), ids: parse_ids(ids)? }],
                a.common.steps.unwrap_or(0),
            )
        }
        None => {
            let (_, p, s) = load_prompts(&a.common, &model)?;
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
    let opts = options(&a.common, steps, a.out.clone());
    let mut bar = Progress::new(prompts.len(), a.common.quiet || a.common.json);
    bar.show(&format!("{} ({})", lane.name, chosen.impl_name()));
    let result = runner::run_lane(&model, &chosen, &prompts, &opts, |i| {
        bar.tick(&format!("{} {}", lane.name, prompts[i].name))
    })?;
    bar.finish();
    if a.common.json {
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

fn fmt_gap(g: Option<f32>) -> String {
    g.map(|g| format!("{g:.3}")).unwrap_or_else(|| "-".into())
}

/// `tiercheck matrix`.
pub fn cmd_matrix(a: MatrixArgs) -> Result<()> {
    let t0 = Instant::now();
    let all = lanes::all();
    let selected: Vec<&'static tiercheck_core::Lane> = match &a.lanes {
        None => all.to_vec(),
        Some(list) => {
            let mut v = Vec::new();
            for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                v.push(lanes::find(name).map_err(anyhow::Error::msg)?);
            }
            if !v.iter().any(|l| l.name == "ref") {
                v.insert(0, lanes::find("ref").map_err(anyhow::Error::msg)?);
            }
            v
        }
    };
    let path = model_path(&a.common)?;
    let model = Model::open(&path)?;
    let (prompts_file, prompts, steps) = load_prompts(&a.common, &model)?;
    let aarch64_bin = a.aarch64_bin.clone().or_else(matrix::default_aarch64_binary);
    if let Some(b) = &a.aarch64_bin {
        if !b.is_file() {
            bail!("--aarch64-bin {}: no such file", b.display());
        }
    }
    let mut bar = Progress::new(selected.len() * prompts.len(), a.common.quiet || a.common.json);
    let mut results: Vec<(LaneResult, String)> = Vec::new();
    for lane in &selected {
        let mut plan = if a.portable {
            Plan::Portable("--portable".into())
        } else {
            matrix::plan(lane, aarch64_bin.as_deref(), &a.qemu_cpu)
        };
        if matches!(plan, Plan::Qemu { .. }) {
            // A build of another revision would compute other bits: use the twin.
            let ours = lanes::provenance::git_revision();
            match matrix::probe_revision(&plan) {
                Ok(rev) if rev == ours => {}
                Ok(rev) => {
                    plan = Plan::Portable(format!(
                        "the aarch64 build is from revision {rev}, this tiercheck from {ours}: \
                         cargo build --release --target aarch64-unknown-linux-gnu -p tiercheck"
                    ))
                }
                Err(why) => plan = Plan::Portable(why),
            }
        }
        let traces = a.traces.as_ref().map(|d| d.join(lane.name));
        let opts = options(&a.common, steps, traces);
        bar.show(&format!("{} ...", lane.name));
        let (result, note) = match &plan {
            Plan::Qemu { .. } => {
                let mut r = LaneResult {
                    lane: lane.name.into(),
                    how: String::new(),
                    provenance: Default::default(),
                    prompts: Vec::new(),
                    wall_s: 0.0,
                };
                let t = Instant::now();
                for p in &prompts {
                    let one = matrix::run_under_qemu(
                        &plan,
                        lane.name,
                        &path,
                        &prompts_file,
                        &opts,
                        Some(&p.name),
                    )?;
                    r.how = one.how;
                    r.provenance = one.provenance;
                    r.prompts.extend(one.prompts);
                    bar.tick(&format!("{} {}", lane.name, p.name));
                }
                r.wall_s = t.elapsed().as_secs_f64();
                (r, String::new())
            }
            Plan::Native | Plan::Portable(_) => {
                let imp = if plan == Plan::Native { Impl::Native } else { Impl::Portable };
                let chosen = lanes::choose(lane, imp).map_err(anyhow::Error::msg)?;
                let r = runner::run_lane(&model, &chosen, &prompts, &opts, |i| {
                    bar.tick(&format!("{} {}", lane.name, prompts[i].name))
                })?;
                let note = match &plan {
                    Plan::Portable(why) => why.clone(),
                    _ => String::new(),
                };
                (r, note)
            }
        };
        results.push((result, note));
    }
    bar.finish();
    let reference = results
        .iter()
        .find(|(r, _)| r.lane == "ref")
        .map(|(r, _)| r.clone())
        .expect("ref always runs");
    if a.common.json {
        let rows: Vec<serde_json::Value> = results
            .iter()
            .map(|(r, note)| {
                serde_json::json!({
                    "lane": r.lane,
                    "how": r.how,
                    "note": note,
                    "wall_s": r.wall_s,
                    "provenance": r.provenance,
                    "agreement": matrix::agreement(&reference, r),
                    "prompts": r.prompts,
                })
            })
            .collect();
        let doc = serde_json::json!({
            "model": path.display().to_string(),
            "model_sha256": model.sha256,
            "mode": a.common.mode.name(),
            "residual": a.common.residual.name(),
            "steps": steps,
            "wall_s": t0.elapsed().as_secs_f64(),
            "lanes": rows,
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(());
    }
    print_table(&results, &reference, &prompts, &model, &path, &a.common, steps);
    println!("total wall time {:.1}s", t0.elapsed().as_secs_f64());
    Ok(())
}

fn print_table(
    results: &[(LaneResult, String)],
    reference: &LaneResult,
    prompts: &[PromptIds],
    model: &Model,
    path: &Path,
    common: &Common,
    steps: usize,
) {
    println!(
        "model {} (sha256 {}), {} prompts x {steps} greedy tokens, mode {}, residual {}",
        path.display(),
        &model.sha256[..12],
        prompts.len(),
        common.mode.name(),
        common.residual.name()
    );
    println!("cells: tokens agreeing with ref / generated; at the first divergence: step and ref's top-1/top-2 gap");
    let mut header = format!("{:<22} {:<40}", "lane", "how");
    for p in prompts {
        header += &format!(" {:>18}", truncate(&p.name, 18));
    }
    header += &format!(" {:>8}", "wall");
    println!("{header}");
    for (r, note) in results {
        let agree = matrix::agreement(reference, r);
        let how = truncate(&r.how, 40);
        let mut line = format!("{:<22} {:<40}", r.lane, how);
        for p in prompts {
            let cell = match agree.iter().find(|x| x.name == p.name) {
                Some(x) => match x.first_divergence {
                    None => format!("{}/{}", x.agree, x.of),
                    Some(s) => format!("{}/{} @{} gap {}", x.agree, x.of, s, fmt_gap(x.ref_gap)),
                },
                None => "-".into(),
            };
            line += &format!(" {cell:>18}");
        }
        line += &format!(" {:>7.1}s", r.wall_s);
        println!("{line}");
        if !note.is_empty() && r.lane != "ref" {
            println!("{:<22} ({note})", "");
        }
    }
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        s.chars().take(n - 1).collect::<String>() + "…"
    }
}
