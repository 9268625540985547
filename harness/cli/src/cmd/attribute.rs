//! `tiercheck attribute`: which recipe components account for the divergence of one
//! lane from another.

use std::path::Path;

use anyhow::{bail, Result};
use clap::Args;

use tiercheck_analysis::identify::{self, IdentifyOptions};
use tiercheck_analysis::{self as analysis};
use tiercheck_core::Lane;
use tiercheck_lanes::Impl;
use tiercheck_model::import::ImportOptions;
use tiercheck_model::{Attention, Batching, FlashAttn, KvType, Mode, Model};

use crate::args::{Setup, Threads};

/// `tiercheck attribute`.
#[derive(Args, Clone, Debug)]
pub struct AttributeArgs {
    /// Lane A (moved toward B one component at a time), or a trace or plain dump: then
    /// the lane `tiercheck identify` finds for it, on the dump's ids and mode.
    pub a: String,
    /// Lane B, or a trace or dump (as for A).
    pub b: String,
    #[command(flatten)]
    pub setup: Setup,
    #[command(flatten)]
    pub threads: Threads,
    /// A plain dump's token ids, where the file holds none (comma-separated).
    #[arg(long, value_name = "IDS")]
    pub ids: Option<String>,
    /// Refuse a plain dump's arrays that are neither taps nor token ids (by default they
    /// are ignored, with one warning).
    #[arg(long)]
    pub strict: bool,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
    /// No progress display (there is none either when stderr is not a terminal).
    #[arg(long)]
    pub quiet: bool,
    /// Layers to run the composites on, layer-locally (fed B's inputs):
    /// comma-separated layer indices, or `auto` for the layers a layer-local profile of
    /// A on B's inputs flags.
    #[arg(long, value_name = "LIST|auto", default_value = "auto", conflicts_with = "whole_model")]
    pub layers: String,
    /// Run every composite through the whole model, teacher-forced on B's tokens (16
    /// whole-model runs; tests the embedding dequantizer too).
    #[arg(long)]
    pub whole_model: bool,
}

/// `--layers 2,5` or `auto` (an empty list).
fn parse_layers(s: &str) -> Result<Vec<usize>> {
    if s.trim() == "auto" {
        return Ok(Vec::new());
    }
    let ls: Vec<usize> = s
        .split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(|x| {
            x.parse::<usize>()
                .map_err(|_| anyhow::anyhow!("--layers: '{x}' is not a layer index (or give auto)"))
        })
        .collect::<Result<_>>()?;
    if ls.is_empty() {
        bail!("--layers: no layer given (a comma-separated list, or auto)");
    }
    Ok(ls)
}

/// A side: a lane, or the lane identified for a trace with the trace's run.
struct Side {
    lane: &'static Lane,
    run: Option<(Vec<u32>, usize, Mode, Attention, Batching)>,
}

fn side(
    arg: &str,
    model: &Model,
    dump: &ImportOptions,
    setup: &Setup,
    threads: usize,
) -> Result<Side> {
    let p = Path::new(arg);
    if !p.is_file() {
        let lane = tiercheck_lanes::find(arg)
            .map_err(|e| anyhow::anyhow!("{e} (or give a trace or dump file)"))?;
        return Ok(Side { lane, run: None });
    }
    let o = IdentifyOptions {
        lanes: None,
        imp: Impl::Auto,
        residual: setup.residual,
        n_ctx: setup.n_ctx(),
        floor_seeds: 0,
        dump: dump.clone(),
        threads,
        state: setup.state()?,
    };
    let r = identify::identify(model, p, &o)?;
    if !r.explained {
        bail!("{arg}: no lane reproduces it, so attribute has no lane for it ({})", r.verdict);
    }
    let best = r
        .candidates
        .iter()
        .find(|c| c.name == r.best_candidate)
        .expect("the best candidate is a candidate");
    let lane = tiercheck_lanes::find(&best.lane).map_err(anyhow::Error::msg)?;
    let t = tiercheck_model::import::load(model, p, dump)?;
    let (prompt, mode, generated) = analysis::trace_prompt(p, &t)?;
    let batching = analysis::trace_batching(p, &t, setup.batching(), model.hp.n_layer)?;
    let mut attn = setup.attention();
    for part in best.attention.split_whitespace() {
        match part {
            "kv=f16" => attn.kv = KvType::F16,
            "kv=f32" => attn.kv = KvType::F32,
            "fa=on" => attn.fa = FlashAttn::On,
            "fa=off" => attn.fa = FlashAttn::Off,
            _ => {}
        }
    }
    eprintln!("{arg}: identified as {} ({})", best.lane, best.attention);
    Ok(Side { lane, run: Some((prompt, generated.len(), mode, attn, batching)) })
}

/// `tiercheck attribute`.
pub fn run(mut a: AttributeArgs) -> Result<()> {
    let layers = if a.whole_model { None } else { Some(parse_layers(&a.layers)?) };
    let files = [a.a.as_str(), a.b.as_str()].map(Path::new);
    let (model, setup) = a.setup.for_traces(files)?;
    a.setup = setup;
    let dump = ImportOptions {
        ids: a.ids.as_deref().map(crate::cmd::delta::parse_ids).transpose()?,
        mode: a.setup.mode,
        strict: a.strict,
    };
    let threads = a.threads.get(1);
    let sa = side(&a.a, &model, &dump, &a.setup, threads)?;
    let sb = side(&a.b, &model, &dump, &a.setup, threads)?;
    let (ids, steps, mode, attn, batching) = match (&sa.run, &sb.run) {
        (Some(x), Some(y)) if x.0 != y.0 || x.2 != y.2 => bail!(
            "{} and {} ran different ids or modes ({:?} {} vs {:?} {})",
            a.a,
            a.b,
            x.0,
            x.2.name(),
            y.0,
            y.2.name()
        ),
        (Some(x), _) | (None, Some(x)) => x.clone(),
        (None, None) => {
            let (ids, steps) = a.setup.prompt(&model)?;
            (ids, steps, a.setup.mode(), a.setup.attention(), a.setup.batching())
        }
    };
    let (residual, n_ctx) = (a.setup.residual, a.setup.n_ctx());
    let o = analysis::attribute::AttributeOptions {
        prompt: ids,
        steps,
        mode,
        batching,
        residual,
        n_ctx,
        attn,
        layers,
        threads,
        state: a.setup.state()?,
    };
    let bar = std::sync::Arc::new(std::sync::Mutex::new(crate::progress::Progress::new(
        analysis::attribute::ATTRIBUTE_RUNS,
        a.quiet,
    )));
    let hook = bar.clone();
    let on_run: analysis::OnResult = std::sync::Arc::new(move |n| {
        if let Ok(mut b) = hook.lock() {
            b.set(n, "attribute: B's run and the composites");
        }
    });
    let r = analysis::attribute::attribute_observed(&model, sa.lane, sb.lane, &o, Some(&on_run));
    if let Ok(b) = bar.lock() {
        b.finish();
    }
    let r = r?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        print!("{}", analysis::attribute::render(&r));
    }
    Ok(())
}
