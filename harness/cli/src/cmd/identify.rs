//! `tiercheck identify`: which lane reproduces a trace or dump, and where it stops.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use tiercheck_analysis::identify::{self, IdentifyOptions};
use tiercheck_lanes::Impl;
use tiercheck_model::import::ImportOptions;
use tiercheck_model::{Mode, Residual};

use crate::args::{LaneList, LaneListParser, DEFAULT_CTX};
use crate::cmd::delta::parse_ids;
use crate::replay::{self, Flag};

/// `tiercheck identify`.
#[derive(Args, Clone, Debug)]
pub struct IdentifyArgs {
    /// The trace (tiercheck's, an oracle's) or a plain dump (docs/TRACES.md).
    pub trace: PathBuf,
    /// GGUF model (qwen3) the trace ran. Default: the model the trace records (its path,
    /// then `$TIERCHECK_MODELS`, its sha256 checked), else the embedded model.
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Only these lanes (comma-separated; default: every lane).
    #[arg(long, value_parser = LaneListParser)]
    pub lanes: Option<LaneList>,
    /// Which implementation of the lanes to run.
    #[arg(long = "impl", value_enum, default_value_t = Impl::Auto)]
    pub imp: Impl,
    /// Residual stream type.
    #[arg(long, value_enum, default_value_t = Residual::F32)]
    pub residual: Residual,
    /// Context length (a multiple of 256). Default: the trace's, else 512; given, it must
    /// be the trace's.
    #[arg(long = "ctx")]
    pub n_ctx: Option<usize>,
    /// Dither seeds of the floor measured at the first unexplained tap (0: none).
    #[arg(long, default_value_t = 1)]
    pub floor_seeds: u64,
    #[command(flatten)]
    pub threads: crate::args::Threads,
    /// A plain dump's token ids, where the file holds none (comma-separated).
    #[arg(long, value_name = "IDS")]
    pub ids: Option<String>,
    /// Refuse a plain dump's arrays that are neither taps nor token ids (by default they
    /// are ignored, with one warning).
    #[arg(long)]
    pub strict: bool,
    /// A plain dump's mode, where the file does not say.
    #[arg(long, value_enum)]
    pub mode: Option<Mode>,
    /// The K/V cache llama.cpp saved that the trace's run continued from (a sequence
    /// state or session file; see `run --state`). A trace that records one needs it.
    #[arg(long, value_name = "FILE")]
    pub state: Option<PathBuf>,
    /// Print the report as JSON (`best_lane`, `first_unexplained`, `per_tap`, ...).
    #[arg(long)]
    pub json: bool,
}

/// `tiercheck identify`.
pub fn run(a: IdentifyArgs) -> Result<()> {
    let traces = replay::recorded([a.trace.as_path()]);
    let n_ctx = match a.n_ctx {
        Some(n) => n,
        None => replay::recorded_ctx(&traces)?.unwrap_or(DEFAULT_CTX),
    };
    let mut given = Vec::new();
    if let Some(n) = a.n_ctx {
        given.push(Flag { flag: "--ctx", keys: &["n_ctx"], value: n.to_string() });
    }
    if let Some(m) = a.mode {
        given.push(Flag { flag: "--mode", keys: &["mode"], value: m.name().to_string() });
    }
    replay::check_flags(&traces, &given)?;
    let model = replay::model(&traces, a.model.as_deref())?;
    let o = IdentifyOptions {
        lanes: a.lanes.map(|l| l.0),
        imp: a.imp,
        residual: a.residual,
        n_ctx,
        floor_seeds: a.floor_seeds,
        threads: a.threads.get(1),
        dump: ImportOptions {
            ids: a.ids.as_deref().map(parse_ids).transpose()?,
            mode: a.mode,
            strict: a.strict,
        },
        state: match &a.state {
            Some(p) => Some(std::sync::Arc::new(tiercheck_model::state::KvState::read(p)?)),
            None => None,
        },
    };
    let r = identify::identify(&model, &a.trace, &o)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        print!("{}", identify::render(&r));
    }
    Ok(())
}
