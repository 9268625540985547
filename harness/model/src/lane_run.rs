//! Running the decoder on one lane over a set of prompts, in this process: what
//! `tiercheck run`, the matrix and the model goldens share.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use tiercheck_lanes::{provenance, Chosen};

use crate::sequence::{self, RunSpec, StepRecord};
use crate::state::KvState;
use crate::{Arith, Attention, Batching, Decoder, Mode, Model, Residual, TapSink};

/// One named sequence of ids.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptIds {
    /// Name.
    pub name: String,
    /// Ids.
    pub ids: Vec<u32>,
}

/// Options shared by every prompt of a run.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Greedy steps after each prompt.
    pub steps: usize,
    /// Batching of the prompt.
    pub mode: Mode,
    /// Batch and ubatch sizes and output rows of a prompt step.
    pub batching: Batching,
    /// Residual stream type.
    pub residual: Residual,
    /// Threads per matmul.
    pub threads: usize,
    /// Context length.
    pub n_ctx: usize,
    /// K/V cache type and attention path.
    pub attn: Attention,
    /// Write one trace per prompt here (a file for one prompt, else a folder).
    pub traces: Option<PathBuf>,
    /// Start every prompt from this saved K/V cache (llama.cpp's sequence state).
    pub state: Option<Arc<KvState>>,
}

/// The result of one prompt on one lane.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PromptResult {
    /// Prompt name.
    pub name: String,
    /// Prompt ids.
    pub ids: Vec<u32>,
    /// Greedy tokens emitted.
    pub generated: Vec<u32>,
    /// Step records.
    pub steps: Vec<StepRecord>,
    /// sha256 per tap name over all steps.
    pub digests: BTreeMap<String, String>,
    /// Seconds.
    pub wall_s: f64,
}

/// The result of one lane over all prompts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LaneResult {
    /// Lane name.
    pub lane: String,
    /// How it ran: `native`, `portable`, or `native under qemu-aarch64 (CPU)`.
    pub how: String,
    /// Provenance (lane, impl, CPU features, repack, matmul paths, threads, ...).
    pub provenance: BTreeMap<String, String>,
    /// Per prompt.
    pub prompts: Vec<PromptResult>,
    /// Seconds for the whole lane (weight preparation included).
    pub wall_s: f64,
}

/// Provenance of a decoder run.
pub(crate) fn provenance_for(
    chosen: &Chosen,
    dec: &Decoder<'_>,
    model: &Model,
    opts: &RunOptions,
) -> BTreeMap<String, String> {
    let mut m = provenance::base();
    m.insert("producer".into(), "tiercheck".into());
    m.insert("lane".into(), chosen.lane.name.into());
    m.insert("impl".into(), chosen.impl_name().into());
    m.insert("elem".into(), dec.elem_flavour().name().into());
    m.insert("repack".into(), if dec.repacked() { "on" } else { "off" }.into());
    m.insert(
        "matmul_paths".into(),
        serde_json::to_string(&dec.matmul_paths()).expect("strings serialize"),
    );
    m.insert("threads".into(), opts.threads.to_string());
    m.insert("residual".into(), opts.residual.name().into());
    m.insert("mode".into(), opts.mode.name().into());
    m.insert("n_ctx".into(), opts.n_ctx.to_string());
    insert_batching(&mut m, &opts.batching.effective(opts.n_ctx));
    insert_attention(&mut m, &opts.attn);
    m.insert("model_sha256".into(), model.sha256.clone());
    // The absolute path, so that an analysis run from another folder finds the model.
    let path = std::fs::canonicalize(&model.path).unwrap_or_else(|_| model.path.clone());
    m.insert("model_path".into(), path.display().to_string());
    if let Some(s) = dec.state() {
        s.provenance(&mut m);
    }
    m
}

/// Record the attention options in provenance: `kv`, `fa` (the keys the oracle's traces
/// use too) and `tier_threads`.
pub fn insert_attention(m: &mut BTreeMap<String, String>, a: &Attention) {
    m.insert("kv".into(), a.kv.name().into());
    m.insert("fa".into(), a.fa.name().into());
    m.insert("tier_threads".into(), a.tier_threads.to_string());
    m.insert("tier_numa".into(), if a.tier_numa { "on" } else { "off" }.into());
}

/// Record the batching in provenance: `n_batch`, `n_ubatch` (as llama.cpp runs them:
/// [`Batching::effective`]) and `logits` (`last` or `all`).
pub fn insert_batching(m: &mut BTreeMap<String, String>, b: &Batching) {
    m.insert("n_batch".into(), b.n_batch.to_string());
    m.insert("n_ubatch".into(), b.n_ubatch.to_string());
    m.insert("logits".into(), b.logits.name().into());
}

/// Run `prompts` on one chosen lane in this process. `progress` is called after each
/// prompt with its index.
pub fn run_lane(
    model: &Model,
    chosen: &Chosen,
    prompts: &[PromptIds],
    opts: &RunOptions,
    mut progress: impl FnMut(usize),
) -> anyhow::Result<LaneResult> {
    let t0 = Instant::now();
    let arith = Arith::from_chosen(chosen, opts.threads.max(1));
    let mut dec = Decoder::new(model, arith, opts.residual, opts.n_ctx, opts.attn)?;
    dec.set_state(opts.state.clone())?;
    let mut results = Vec::with_capacity(prompts.len());
    let mut traces = Vec::new();
    for (i, p) in prompts.iter().enumerate() {
        let t = Instant::now();
        let spec = RunSpec {
            ids: p.ids.clone(),
            steps: opts.steps,
            mode: opts.mode,
            batching: opts.batching,
            forced: Vec::new(),
        };
        let sink = TapSink::new(opts.traces.is_some(), true);
        let out = sequence::run(&dec, &spec, sink)?;
        let wall_s = t.elapsed().as_secs_f64();
        if opts.traces.is_some() {
            traces.push((p.clone(), out.clone()));
        }
        results.push(PromptResult {
            name: p.name.clone(),
            ids: p.ids.clone(),
            generated: out.generated,
            steps: out.steps,
            digests: out.digests,
            wall_s,
        });
        progress(i);
    }
    let prov = provenance_for(chosen, &dec, model, opts);
    if let Some(dest) = &opts.traces {
        let one = prompts.len() == 1;
        if !one {
            std::fs::create_dir_all(dest)
                .map_err(|e| anyhow::anyhow!("{}: cannot create folder: {e}", dest.display()))?;
        }
        for (p, out) in &traces {
            let path =
                if one { dest.clone() } else { dest.join(format!("{}.safetensors", p.name)) };
            let mut meta = prov.clone();
            meta.insert("prompt_ids".into(), serde_json::to_string(&p.ids).expect("ids"));
            meta.insert("prompt_name".into(), p.name.clone());
            sequence::write_trace(&path, out, meta)?;
        }
    }
    Ok(LaneResult {
        lane: chosen.lane.name.into(),
        how: chosen.impl_name().into(),
        provenance: prov,
        prompts: results,
        wall_s: t0.elapsed().as_secs_f64(),
    })
}
