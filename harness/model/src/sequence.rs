//! One token sequence through the decoder: the teacher-forced prompt, the greedy steps,
//! their step records and taps, and trace files (the layout is documented in
//! `docs/TRACES.md`).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::decoder::Decoder;
pub use super::taps::is_pruned;
use super::taps::{Tap, TapSink};
use super::ModelError;
use tiercheck_gguf::tensorfile::{self, Tensor, TensorFileError};

/// How a sequence of ids goes through the decoder.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// The teacher-forced ids as one batch (the gemm paths where the lane has them),
    /// then one token per greedy step.
    Prompt,
    /// One token per step throughout (the gemv paths).
    Decode,
}

impl Mode {
    /// Stable name.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Prompt => "prompt",
            Mode::Decode => "decode",
        }
    }
}

/// Which rows of the prompt get logits (llama.cpp's per-token `logits` flags).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, clap::ValueEnum, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Logits {
    /// Only the prompt's last row, as llama-cli and llama-server ask: llama.cpp then
    /// computes the last layer after its attention output projection (`ffn_inp` on) and
    /// the head for that row alone (the graph's `inp_out_ids`).
    #[default]
    Last,
    /// Every row, as the perplexity tool asks.
    All,
}

impl Logits {
    /// Stable name.
    pub fn name(self) -> &'static str {
        match self {
            Logits::Last => "last",
            Logits::All => "all",
        }
    }
}

/// How the prompt is cut into graphs and which of its rows are outputs, as llama.cpp
/// does it: the prompt goes to `llama_decode` in batches of `n_batch` tokens (the server
/// and llama-cli submit it so), and `llama_decode` evaluates each batch as ubatches of
/// `n_ubatch` tokens, one graph each, in order, the K/V cache carried between them. Each
/// graph's row count chooses its kernels (gemv or gemm, tiled paths, tiled flash
/// attention). llama.cpp caps `n_batch` at the context length and `n_ubatch` at
/// `n_batch` ([`Batching::effective`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Batching {
    /// Tokens per `llama_decode` (llama-cli's `-b`).
    pub n_batch: usize,
    /// Tokens per graph (llama-cli's `-ub`).
    pub n_ubatch: usize,
    /// Which prompt rows get logits.
    pub logits: Logits,
}

impl Batching {
    /// llama-cli's and llama-server's defaults: `-b 2048 -ub 512`, the last row's logits.
    pub const LLAMA_CLI: Batching = Batching { n_batch: 2048, n_ubatch: 512, logits: Logits::Last };
    /// One graph of up to 512 rows with every row's logits (what the capture tool did
    /// before it took batching options, and what the oracle trials of short prompts use).
    pub const EVERY_ROW: Batching = Batching { n_batch: 512, n_ubatch: 512, logits: Logits::All };

    /// Both sizes at least 1.
    pub fn validate(&self) -> Result<(), ModelError> {
        if self.n_batch == 0 || self.n_ubatch == 0 {
            return Err(ModelError::Request(format!(
                "batch size {} and ubatch size {} must be at least 1",
                self.n_batch, self.n_ubatch
            )));
        }
        Ok(())
    }

    /// The sizes llama.cpp runs with in a context of `n_ctx` cells: `n_batch` capped at
    /// `n_ctx` (causal attention), `n_ubatch` at that `n_batch`.
    pub fn effective(&self, n_ctx: usize) -> Batching {
        let n_batch = self.n_batch.min(n_ctx).max(1);
        Batching { n_batch, n_ubatch: self.n_ubatch.min(n_batch).max(1), logits: self.logits }
    }

    /// The row counts of the graphs a prompt of `n` rows is evaluated as: batches of
    /// `n_batch`, each cut into ubatches of `n_ubatch` (the last of each batch shorter).
    /// Call on [`Batching::effective`] sizes.
    pub fn ubatches(&self, n: usize) -> Vec<usize> {
        let mut out = Vec::new();
        let mut left = n;
        while left > 0 {
            let mut batch = left.min(self.n_batch.max(1));
            left -= batch;
            while batch > 0 {
                let u = batch.min(self.n_ubatch.max(1));
                out.push(u);
                batch -= u;
            }
        }
        out
    }
}

/// One graph (llama.cpp ubatch) of a recorded step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Graph {
    /// Its first row in the step.
    pub start: usize,
    /// Its rows.
    pub rows: usize,
    /// Its output rows, as indices into the graph.
    pub outputs: Vec<usize>,
    /// How many of the step's output rows come before its own: where its rows begin in
    /// a pruned tap of the step.
    pub out_start: usize,
}

impl Graph {
    /// Where this graph's rows begin in tap `name` of its step, and how many it has
    /// there (the output rows for a pruned tap).
    pub fn rows_in(&self, name: &str, n_layer: usize) -> (usize, usize) {
        if is_pruned(name, n_layer) {
            (self.out_start, self.outputs.len())
        } else {
            (self.start, self.rows)
        }
    }
}

/// The graphs a step was evaluated as, from its record.
pub fn graphs(rec: &StepRecord) -> Vec<Graph> {
    let outputs = rec.output_rows();
    let mut out = Vec::new();
    let mut start = 0;
    let mut out_start = 0;
    for rows in rec.ubatch_rows() {
        let local: Vec<usize> = outputs
            .iter()
            .filter(|&&r| r >= start && r < start + rows)
            .map(|&r| r - start)
            .collect();
        let n = local.len();
        out.push(Graph { start, rows, outputs: local, out_start });
        start += rows;
        out_start += n;
    }
    out
}

/// What to run.
#[derive(Clone, Debug)]
pub struct RunSpec {
    /// Teacher-forced ids (the prompt).
    pub ids: Vec<u32>,
    /// Greedy tokens to emit after the prompt (0: teacher-forced evaluation only, the
    /// prompt's last step still records its greedy choice).
    pub steps: usize,
    /// Batching of the teacher-forced ids.
    pub mode: Mode,
    /// How a prompt step is cut into graphs and which rows get logits (prompt mode; a
    /// decode step is one row, which is its own output).
    pub batching: Batching,
    /// Tokens to feed after the prompt instead of the greedy choices (teacher forcing
    /// a continuation, e.g. another lane's output); empty for greedy decoding. Step `k`
    /// after the prompt feeds `forced[k-1]`; the greedy choices are still recorded.
    pub forced: Vec<u32>,
}

/// What one step did.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    /// Step number.
    pub step: usize,
    /// Positions evaluated.
    pub positions: Vec<usize>,
    /// Ids evaluated.
    pub input_ids: Vec<u32>,
    /// The greedy choice after the step's last row (argmax, ties to the lowest id).
    pub emitted: u32,
    /// The five best `[id, logit]`, best first.
    pub top: Vec<(u32, f32)>,
    /// Top-1 minus top-2 logit.
    pub gap: f32,
    /// Row counts of the graphs (llama.cpp's ubatches) the step was evaluated as, in
    /// order; empty in traces written before ubatches were recorded: one graph.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ubatches: Vec<usize>,
    /// The rows (indices into the step) that are outputs: the pruned taps of the last
    /// layer and the head hold these rows only. Absent: every row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outputs: Option<Vec<usize>>,
}

impl StepRecord {
    /// Rows of the step.
    pub fn rows(&self) -> usize {
        self.positions.len()
    }

    /// The output rows (every row when the record does not say).
    pub fn output_rows(&self) -> Vec<usize> {
        self.outputs.clone().unwrap_or_else(|| (0..self.rows()).collect())
    }

    /// The graphs' row counts (one graph of every row when the record does not say).
    pub fn ubatch_rows(&self) -> Vec<usize> {
        if self.ubatches.is_empty() {
            vec![self.rows()]
        } else {
            self.ubatches.clone()
        }
    }
}

/// The result of a run.
#[derive(Clone, Debug)]
pub struct RunOutput {
    /// Step records.
    pub steps: Vec<StepRecord>,
    /// The greedy tokens emitted after the prompt (`spec.steps` of them).
    pub generated: Vec<u32>,
    /// Kept taps (empty unless asked for).
    pub taps: Vec<Tap>,
    /// sha256 per tap name over all steps (empty unless asked for).
    pub digests: BTreeMap<String, String>,
}

/// The five best logits, best first, ties to the lowest id.
pub(crate) fn top5(logits: &[f32]) -> Vec<(u32, f32)> {
    let mut best: Vec<(u32, f32)> = Vec::with_capacity(6);
    for (i, &v) in logits.iter().enumerate() {
        // NaN never enters; equal values keep the earlier (lower) id first.
        let pos = best.iter().position(|&(_, b)| v > b).unwrap_or(best.len());
        if pos < 5 {
            best.insert(pos, (i as u32, v));
            best.truncate(5);
        }
    }
    best
}

pub(crate) fn record(
    step: usize,
    positions: Vec<usize>,
    ids: &[u32],
    last_logits: &[f32],
) -> StepRecord {
    let top = top5(last_logits);
    let emitted = top.first().map(|t| t.0).unwrap_or(0);
    let gap = if top.len() >= 2 { top[0].1 - top[1].1 } else { f32::INFINITY };
    StepRecord {
        step,
        positions,
        input_ids: ids.to_vec(),
        emitted,
        top,
        gap,
        ubatches: Vec::new(),
        outputs: None,
    }
}

/// Run `spec` on `dec`, collecting taps into `sink`.
pub fn run(dec: &Decoder<'_>, spec: &RunSpec, mut sink: TapSink) -> Result<RunOutput, ModelError> {
    if spec.ids.is_empty() {
        return Err(ModelError::Request("the prompt has no ids".into()));
    }
    // A run from a saved cache continues after its cells.
    let start = dec.state().map_or(0, |s| s.cells);
    let total = start + spec.ids.len() + spec.steps.saturating_sub(1);
    if total > dec.n_ctx() {
        let saved = if start > 0 { format!("{start} saved cells + ") } else { String::new() };
        return Err(ModelError::Request(format!(
            "{saved}{} prompt ids + {} greedy steps need {total} positions; the context has {}",
            spec.ids.len(),
            spec.steps,
            dec.n_ctx()
        )));
    }
    spec.batching.validate()?;
    let nv = dec.hp.n_vocab;
    let mut cache = dec.new_cache()?;
    let mut steps = Vec::new();
    let mut pos = start;
    let chunks: Vec<&[u32]> = match spec.mode {
        Mode::Prompt => vec![&spec.ids[..]],
        Mode::Decode => spec.ids.chunks(1).collect(),
    };
    let batching = spec.batching.effective(dec.n_ctx());
    for ids in chunks {
        sink.set_step(steps.len());
        let n = ids.len();
        let outputs: Vec<usize> = match batching.logits {
            Logits::Last => vec![n - 1],
            Logits::All => (0..n).collect(),
        };
        let mut r = record(steps.len(), (pos..pos + n).collect(), ids, &[]);
        r.ubatches = batching.ubatches(n);
        if outputs.len() < n {
            r.outputs = Some(outputs);
        }
        let mut last = Vec::new();
        for g in graphs(&r) {
            let rows = &ids[g.start..g.start + g.rows];
            let logits = dec.eval(&mut cache, rows, pos + g.start, &mut sink, &g.outputs)?;
            if !g.outputs.is_empty() {
                last = logits[(g.outputs.len() - 1) * nv..].to_vec();
            }
        }
        let full = record(r.step, r.positions.clone(), ids, &last);
        (r.emitted, r.top, r.gap) = (full.emitted, full.top, full.gap);
        steps.push(r);
        pos += n;
    }
    let mut generated = Vec::with_capacity(spec.steps);
    if spec.steps > 0 {
        generated.push(steps.last().expect("one step at least").emitted);
    }
    if !spec.forced.is_empty() && spec.forced.len() + 1 < spec.steps {
        return Err(ModelError::Request(format!(
            "{} forced tokens cannot drive {} steps",
            spec.forced.len(),
            spec.steps
        )));
    }
    while generated.len() < spec.steps {
        let tok = match spec.forced.get(generated.len() - 1) {
            Some(&t) => [t],
            None => [*generated.last().expect("nonempty")],
        };
        sink.set_step(steps.len());
        let logits = dec.eval(&mut cache, &tok, pos, &mut sink, &[0])?;
        let mut r = record(steps.len(), vec![pos], &tok, &logits);
        r.ubatches = vec![1];
        steps.push(r);
        generated.push(steps.last().expect("pushed").emitted);
        pos += 1;
    }
    let (taps, digests) = sink.into_taps();
    Ok(RunOutput { steps, generated, taps, digests })
}

/// Tensor name of a tap in a trace file.
pub fn tap_key(step: usize, name: &str) -> String {
    format!("{step:03}/{name}")
}

/// Write a trace file: every kept tap as `NNN/NAME` (rows x width), the step records
/// and `meta` (provenance) in the metadata. Atomic.
pub fn write_trace(
    path: &Path,
    out: &RunOutput,
    mut meta: BTreeMap<String, String>,
) -> Result<(), TensorFileError> {
    let tensors: Vec<Tensor> = out
        .taps
        .iter()
        .map(|t| Tensor {
            name: tap_key(t.step, &t.name),
            shape: vec![t.rows, t.data.len() / t.rows.max(1)],
            data: t.data.clone(),
        })
        .collect();
    meta.insert("tiercheck.format".into(), "trace-1".into());
    meta.insert(
        "tiercheck.steps".into(),
        serde_json::to_string(&out.steps).expect("step records serialize"),
    );
    tensorfile::write(path, &tensors, &meta)
}

#[derive(Clone, Debug)]
/// A trace read back: taps by `(step, name)` and the step records.
pub struct Trace {
    /// Taps keyed by `(step, name)`.
    pub taps: BTreeMap<(usize, String), Tensor>,
    /// Step records.
    pub steps: Vec<StepRecord>,
    /// All metadata.
    pub meta: BTreeMap<String, String>,
}

/// Read a trace file written by tiercheck or an oracle script.
pub fn read_trace(path: &Path) -> Result<Trace, TensorFileError> {
    let bytes = std::fs::read(path)
        .map_err(|source| TensorFileError::Io { path: path.to_owned(), source })?;
    parse_trace(path, &bytes)
}

/// [`read_trace`] on a file's bytes already in memory; `path` names it in errors.
pub fn parse_trace(path: &Path, bytes: &[u8]) -> Result<Trace, TensorFileError> {
    let (tensors, meta) = tensorfile::read_bytes(path, bytes)?;
    let content = |problem: String| TensorFileError::Content { path: path.to_owned(), problem };
    if meta.get("tiercheck.format").map(String::as_str) != Some("trace-1") {
        return Err(content("not a tiercheck trace (metadata tiercheck.format != trace-1)".into()));
    }
    let steps: Vec<StepRecord> = match meta.get("tiercheck.steps") {
        Some(s) => serde_json::from_str(s)
            .map_err(|e| content(format!("metadata tiercheck.steps: {e}")))?,
        None => return Err(content("metadata tiercheck.steps is missing".into())),
    };
    let mut taps = BTreeMap::new();
    for t in tensors {
        let Some((s, name)) = t.name.split_once('/') else {
            return Err(content(format!("tensor '{}' is not named NNN/TAP", t.name)));
        };
        let step: usize =
            s.parse().map_err(|_| content(format!("tensor '{}': bad step number", t.name)))?;
        if t.shape.len() != 2 {
            return Err(content(format!("tensor '{}' is not 2-D", t.name)));
        }
        taps.insert((step, name.to_string()), t);
    }
    Ok(Trace { taps, steps, meta })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top5_orders_and_breaks_ties_low() {
        let l = [1.0, 5.0, 3.0, 5.0, 4.0, -1.0, 4.5];
        let t = top5(&l);
        assert_eq!(t.iter().map(|x| x.0).collect::<Vec<_>>(), vec![1, 3, 6, 4, 2]);
        let r = record(0, vec![0], &[7], &l);
        assert_eq!(r.emitted, 1);
        assert_eq!(r.gap, 0.0);
    }
}
