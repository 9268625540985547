//! One side of a comparison (a lane or a trace file), the options its lane runs with,
//! and a lane's decoder and runs.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tiercheck_lanes::{self as lanes, Chosen, Impl};
use tiercheck_model::sequence::{self, RunOutput, RunSpec, Trace};
use tiercheck_model::state::KvState;
use tiercheck_model::{Arith, Attention, Batching, Decoder, Mode, Model, Residual, TapSink};

use crate::results::Run;
use crate::trace::trace_of;

/// One side of a comparison.
#[derive(Clone)]
pub enum Source {
    /// A lane, run on the fly.
    Lane(Chosen),
    /// A trace file (tiercheck's, an oracle's, another engine's dump with the same tap
    /// names).
    Trace(PathBuf),
}

impl Source {
    /// A trace file when `arg` names an existing file, else a lane name.
    pub fn parse(arg: &str, imp: Impl) -> anyhow::Result<Source> {
        let p = Path::new(arg);
        if p.is_file() {
            return Ok(Source::Trace(p.to_owned()));
        }
        if arg.ends_with(".safetensors") || arg.contains('/') {
            anyhow::bail!("{arg}: no such trace file");
        }
        let lane = lanes::find(arg).map_err(|e| anyhow::anyhow!("{e} (or give a trace file)"))?;
        Ok(Source::Lane(lanes::choose(lane, imp).map_err(anyhow::Error::msg)?))
    }

    /// A short label.
    pub fn label(&self) -> String {
        match self {
            Source::Lane(c) => format!("{} ({})", c.lane.name, c.impl_name()),
            Source::Trace(p) => p.display().to_string(),
        }
    }

    pub(crate) fn chosen(&self) -> Option<&Chosen> {
        match self {
            Source::Lane(c) => Some(c),
            Source::Trace(_) => None,
        }
    }
}

/// Options of a delta run.
#[derive(Clone, Debug)]
pub struct DeltaOptions {
    /// Prompt ids (for lanes; a trace brings its own).
    pub ids: Vec<u32>,
    /// Greedy steps (for lanes).
    pub steps: usize,
    /// Batching mode (for lanes).
    pub mode: Mode,
    /// Batch and ubatch sizes and output rows of a prompt step (for lanes; a trace's
    /// own, where it records them, for a lane that follows it).
    pub batching: Batching,
    /// Residual stream type.
    pub residual: Residual,
    /// Context length.
    pub n_ctx: usize,
    /// K/V cache type and attention path (for lanes).
    pub attn: Attention,
    /// Near-tie threshold on the top-1/top-2 gap, in nats (logit units).
    pub threshold: f32,
    /// Dither seeds for the floor (0: no floor).
    pub floor_seeds: u64,
    /// Threads per matmul of the lanes' decoders (results do not depend on it).
    pub threads: usize,
    /// How a trace side that is a plain dump (no tiercheck metadata) is imported: its
    /// ids and mode where the file does not say them.
    pub dump: tiercheck_model::import::ImportOptions,
    /// The saved K/V cache the runs start from (a trace side that continued from one
    /// needs it: [`check_trace_state`](crate::trace::check_trace_state)).
    pub state: Option<Arc<KvState>>,
}

/// A side's run: its trace, prompt, mode and greedy tokens.
pub(crate) struct SideRun {
    pub(crate) run: Arc<Run>,
    pub(crate) prompt: Vec<u32>,
    pub(crate) mode: Mode,
    pub(crate) generated: Vec<u32>,
    /// The run's cache key (a lane's run; `None` for a trace file).
    pub(crate) key: Option<String>,
}

impl SideRun {
    pub(crate) fn trace(&self) -> &Trace {
        &self.run.trace
    }
}

/// A decoder running lane `c` with `o.threads` threads per matmul.
pub(crate) fn decoder<'m>(
    model: &'m Model,
    c: &Chosen,
    o: &DeltaOptions,
) -> anyhow::Result<Decoder<'m>> {
    let threads = o.threads.max(1);
    let arith = Arith::from_chosen(c, threads);
    let mut dec = Decoder::new(model, arith, o.residual, o.n_ctx, o.attn)?;
    dec.set_state(o.state.clone())?;
    Ok(dec)
}

/// Run `spec` keeping every tap.
pub(crate) fn run_spec(dec: &Decoder<'_>, spec: &RunSpec) -> anyhow::Result<RunOutput> {
    Ok(sequence::run(dec, spec, TapSink::new(true, false))?)
}

/// A lane's run of `spec` as a cached [`Run`].
pub(crate) fn lane_run(dec: &Decoder<'_>, spec: &RunSpec) -> anyhow::Result<Run> {
    let out = run_spec(dec, spec)?;
    let generated = out.generated.clone();
    Ok(Run { trace: trace_of(out), generated })
}
