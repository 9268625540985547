//! `tiercheck matrix`: the decoder on every lane, each compared with `ref`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use anyhow::{bail, Result};
use clap::Args;

use tiercheck_lanes::{self as lanes, Impl};
use tiercheck_model::lane_run::{self, LaneResult, PromptIds};
use tiercheck_model::Model;

use crate::args::{Exec, LaneList, LaneListParser, Setup};
use crate::lane_plan::{self, Plan};
use crate::progress::Progress;

/// `tiercheck matrix`.
#[derive(Args, Clone, Debug)]
pub struct MatrixArgs {
    /// Comma-separated lanes (default: all).
    #[arg(long, value_parser = LaneListParser)]
    pub lanes: Option<LaneList>,
    /// The aarch64 build of tiercheck to run under qemu-aarch64 (default:
    /// target/aarch64-unknown-linux-gnu/{release,debug}/tiercheck when built).
    #[arg(long)]
    pub aarch64_bin: Option<PathBuf>,
    /// qemu CPU model for every aarch64 lane (default: each lane's own tier model from
    /// targets/aarch64-unknown-linux-gnu.toml).
    #[arg(long)]
    pub qemu_cpu: Option<String>,
    /// Run every lane as its portable twin in this process (no native kernels, no qemu).
    #[arg(long)]
    pub portable: bool,
    /// Write every lane's traces into this folder (`<lane>/<prompt>.safetensors`).
    #[arg(long)]
    pub traces: Option<PathBuf>,
    /// Lanes run at the same time (each lane's results do not depend on it; its wall
    /// time does).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    pub jobs: u16,
    #[command(flatten)]
    pub setup: Setup,
    #[command(flatten)]
    pub exec: Exec,
}

fn fmt_gap(g: Option<f32>) -> String {
    g.map(|g| format!("{g:.3}")).unwrap_or_else(|| "-".into())
}

/// `tiercheck matrix`.
pub fn run(a: MatrixArgs) -> Result<()> {
    let t0 = Instant::now();
    let all = lanes::all();
    let listed: Vec<&'static tiercheck_core::Lane> = match &a.lanes {
        None => all.to_vec(),
        Some(LaneList(list)) => {
            let mut v = list.clone();
            if !v.iter().any(|l| l.name == "ref") {
                v.insert(0, lanes::find("ref").map_err(anyhow::Error::msg)?);
            }
            v
        }
    };
    let path = a.setup.model_path()?;
    let model = Model::open(&path)?;
    // Lanes that cannot run this model (the reason printed with the table), not run.
    let mut selected = Vec::new();
    let mut not_run: Vec<String> = Vec::new();
    for lane in listed {
        let fl = lanes::choose(lane, Impl::Portable).map_err(anyhow::Error::msg)?.elem.flavour();
        match tiercheck_model::unsupported(&model, fl) {
            Some(why) => not_run.push(format!("{}: {why}", lane.name)),
            None => selected.push(lane),
        }
    }
    let (prompts_file, prompts, steps) = a.setup.prompts(&model)?;
    let aarch64_bin = a.aarch64_bin.clone().or_else(lane_plan::default_aarch64_binary);
    if let Some(b) = &a.aarch64_bin {
        if !b.is_file() {
            bail!("--aarch64-bin {}: no such file", b.display());
        }
    }
    let bar =
        Mutex::new(Progress::new(selected.len() * prompts.len(), a.exec.quiet || a.exec.json));
    let tick = |label: &str| {
        if let Ok(mut b) = bar.lock() {
            b.tick(label);
        }
    };
    let run_one = |lane: &'static tiercheck_core::Lane| -> Result<(LaneResult, String)> {
        let mut plan = if a.portable {
            Plan::Portable("--portable".into())
        } else {
            lane_plan::plan(lane, aarch64_bin.as_deref(), a.qemu_cpu.as_deref())
        };
        if matches!(plan, Plan::Qemu { .. }) {
            // A build of another revision would compute other bits: use the twin.
            let ours = lanes::provenance::git_revision();
            match lane_plan::probe_revision(&plan) {
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
        let opts = a.setup.run_options(&a.exec, steps, traces, usize::from(a.jobs))?;
        if let Ok(b) = bar.lock() {
            b.show(&format!("{} ...", lane.name));
        }
        Ok(match &plan {
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
                    let one = lane_plan::run_under_qemu(
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
                    tick(&format!("{} {}", lane.name, p.name));
                }
                r.wall_s = t.elapsed().as_secs_f64();
                (r, String::new())
            }
            Plan::Native | Plan::Portable(_) => {
                let imp = if plan == Plan::Native { Impl::Native } else { Impl::Portable };
                let chosen = lanes::choose(lane, imp).map_err(anyhow::Error::msg)?;
                let r = lane_run::run_lane(&model, &chosen, &prompts, &opts, |i| {
                    tick(&format!("{} {}", lane.name, prompts[i].name))
                })?;
                let note = match &plan {
                    Plan::Portable(why) => why.clone(),
                    _ => String::new(),
                };
                (r, note)
            }
        })
    };
    // `jobs` workers take the lanes in order; the table keeps the lane order.
    let next = AtomicUsize::new(0);
    type Slot = Mutex<Option<Result<(LaneResult, String)>>>;
    let slots: Vec<Slot> = selected.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..usize::from(a.jobs).min(selected.len()) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(lane) = selected.get(i) else { break };
                let r = run_one(lane);
                let failed = r.is_err();
                if let Ok(mut slot) = slots[i].lock() {
                    *slot = Some(r);
                }
                if failed {
                    // Stop handing out lanes; the first error in lane order is reported.
                    next.store(selected.len(), Ordering::Relaxed);
                }
            });
        }
    });
    let mut results: Vec<(LaneResult, String)> = Vec::new();
    let mut first_err = None;
    for slot in slots {
        match slot.into_inner().map_err(|_| anyhow::anyhow!("a matrix worker panicked"))? {
            Some(Ok(r)) => results.push(r),
            Some(Err(e)) => {
                first_err.get_or_insert(e);
            }
            None => {}
        }
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    if results.len() != selected.len() {
        bail!("the matrix stopped after {} of {} lanes", results.len(), selected.len());
    }
    let bar = bar.into_inner().map_err(|_| anyhow::anyhow!("a matrix worker panicked"))?;
    bar.finish();
    let reference = results
        .iter()
        .find(|(r, _)| r.lane == "ref")
        .map(|(r, _)| r.clone())
        .expect("ref always runs");
    if a.exec.json {
        let rows: Vec<serde_json::Value> = results
            .iter()
            .map(|(r, note)| {
                serde_json::json!({
                    "lane": r.lane,
                    "status": lanes::find(&r.lane).map(|l| l.status.to_string()).unwrap_or_default(),
                    "not_checked_here": lanes::find(&r.lane).ok().and_then(crate::cmd::lanes::not_checkable_here),
                    "how": r.how,
                    "note": note,
                    "wall_s": r.wall_s,
                    "provenance": r.provenance,
                    "agreement": lane_plan::agreement(&reference, r),
                    "prompts": r.prompts,
                })
            })
            .collect();
        let doc = serde_json::json!({
            "model": path.display().to_string(),
            "model_sha256": model.sha256,
            "mode": a.setup.mode().name(),
            "residual": a.setup.residual.name(),
            "kv": a.setup.attention().kv.name(),
            "fa": a.setup.attention().fa.name(),
            "tier_threads": a.setup.attention().tier_threads,
            "steps": steps,
            "wall_s": t0.elapsed().as_secs_f64(),
            "lanes": rows,
            "not_run": not_run,
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(());
    }
    print_table(&results, &reference, &prompts, &model, &path, &a.setup, steps);
    for n in &not_run {
        println!("not run: {n}");
    }
    println!("total wall time {:.1}s", t0.elapsed().as_secs_f64());
    Ok(())
}

fn print_table(
    results: &[(LaneResult, String)],
    reference: &LaneResult,
    prompts: &[PromptIds],
    model: &Model,
    path: &Path,
    setup: &Setup,
    steps: usize,
) {
    println!(
        "model {} (sha256 {}), {} prompts x {steps} greedy tokens, mode {}, residual {}, {}",
        path.display(),
        &model.sha256[..12],
        prompts.len(),
        setup.mode().name(),
        setup.residual.name(),
        setup.attention().label()
    );
    println!("cells: tokens agreeing with ref / generated; at the first divergence: step and ref's top-1/top-2 gap");
    println!("status: the highest level proven against the lane's real tier (+: higher under a stated setting; `tiercheck lanes` says which build and setting), or modelled / synthetic");
    let mut header = format!("{:<22} {:<14} {:<40}", "lane", "status", "how");
    for p in prompts {
        header += &format!(" {:>18}", truncate(&p.name, 18));
    }
    header += &format!(" {:>8}", "wall");
    println!("{header}");
    for (r, note) in results {
        let agree = lane_plan::agreement(reference, r);
        let how = truncate(&r.how, 40);
        let lane = lanes::find(&r.lane).ok();
        let mut status = lane.map(|l| l.status.tag()).unwrap_or_default();
        let unchecked = lane.and_then(crate::cmd::lanes::not_checkable_here);
        if unchecked.is_some() {
            status += "*";
        }
        let mut line = format!("{:<22} {status:<14} {:<40}", r.lane, how);
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
        if let Some(why) = unchecked {
            println!("{:<22} (*: proven, but not checked on this host: {why})", "");
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
