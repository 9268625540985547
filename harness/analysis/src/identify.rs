//! `tiercheck identify`: which lane reproduces a trace, and where does it stop.
//!
//! Every candidate (a lane with one attention setting: the trace's `kv`/`fa` where it
//! records them, else all four) replays the trace layer-locally: each layer is fed the
//! trace's own input at every step (`inp_embd`, else the ids' embedding rows by the
//! candidate; `l_out` of the layer before, else the candidate's own output where the
//! trace lacks it), the K/V cache is the candidate's own from those inputs, and every tap
//! the trace holds is compared bitwise as the candidate produces it, step by step in
//! graph order. A candidate stops at its first mismatch, so a wrong candidate costs a
//! layer or two, and only the best one runs through the whole trace.
//!
//! The **best** candidate reproduces the longest prefix of the trace's taps (ties: the
//! trace's own lane, then the first in `tiercheck lanes` order). If it reproduces every
//! tap the trace is *explained*; else its first mismatch is the first tap no candidate
//! reproduces (every other candidate stopped earlier or there), reported with its
//! relative error against the best candidate, the ratio to that candidate's layer-local
//! floor, and what kind of difference it is: a matmul whose input is bitwise equal but
//! whose output is not (a kernel-level difference), a matmul whose input the trace lacks
//! (a flipped activation code or a kernel-level difference), or an elementwise or
//! attention op. The kind of a stop always follows from the replay of the candidate that
//! stopped there: every tap before it, the matmul's input among them, was reproduced.
//!
//! A trace that names its lane (provenance `lane`) is diagnosed from that **claim**
//! first: the claimed lane is always a candidate; the report says whether it reproduces
//! the trace, where it stops and which candidates go further. Where another lane explains
//! the trace, the verdict is "explained by" that lane, "not by its own lane", with the
//! claimed lane's stop; where the claimed lane stops and another lane goes further
//! without explaining the trace either, it is "reproduced by neither", naming both stops,
//! each with its kind (a fault in the claimed lane's own kernel shows at the claimed
//! lane's stop, not at the later one of a lane that does not share the fault).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use tiercheck_lanes::{self as lanes, Chosen, Impl};
use tiercheck_model::import::ImportOptions;
use tiercheck_model::sequence::{graphs, Graph, Trace};
use tiercheck_model::{Attention, Batching, FlashAttn, KvType, Model, Residual, TapSink};

use crate::flips::matmul_input;
use crate::floor;
use crate::layer_local::NOISE_RATIO;
use crate::metrics::stat;
use crate::result_cache::{Cache, Ctx};
use crate::side::{decoder, DeltaOptions};
use crate::trace::{
    check_trace_state, tap_order, trace_batching, trace_ctx, trace_numa, trace_prompt,
};

/// One candidate's result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CandidateResult {
    /// `lane (kv=.. fa=..)`.
    pub name: String,
    /// The lane.
    pub lane: String,
    /// Native or portable.
    pub imp: String,
    /// Its attention setting.
    pub attention: String,
    /// The tier thread counts it stands for, when the trace records none (empty: the
    /// trace's own count).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tier_threads: Vec<usize>,
    /// Taps reproduced bitwise before the first mismatch.
    pub reproduced: usize,
    /// The first mismatch: step, tap, relative L2 (none: every tap reproduced).
    pub first_mismatch: Option<(usize, String, f64)>,
}

/// One tap of the trace: which candidates reproduce it (candidates that stopped earlier
/// did not reach it).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PerTap {
    /// Step.
    pub step: usize,
    /// Tap.
    pub tap: String,
    /// Candidates that reproduce it bitwise.
    pub lanes: Vec<String>,
}

/// The first tap no candidate reproduces.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Unexplained {
    /// Step.
    pub step: usize,
    /// Tap.
    pub tap: String,
    /// Relative L2 of the best candidate's tap against the trace's.
    pub rel_l2: f64,
    /// The best candidate's layer-local floor for this tap (relative L2), when measured.
    pub floor: Option<f64>,
    /// `rel_l2 / floor`.
    pub ratio: Option<f64>,
    /// `kernel`, `input-missing` or `elementwise`.
    pub kind: String,
    /// In words.
    pub what: String,
}

/// What the trace's own lane (its provenance) reproduces.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Claim {
    /// The lane the trace names.
    pub lane: String,
    /// Its candidate that reproduces the most taps (`lane (kv=.. fa=..)`).
    pub candidate: String,
    /// Taps it reproduces before its first mismatch.
    pub reproduced: usize,
    /// Whether it reproduces every tap.
    pub reproduces: bool,
    /// Where it stops, and what kind of difference that is.
    pub stop: Option<Unexplained>,
    /// The candidates that reproduce more taps than it does.
    pub further: Vec<String>,
}

/// The report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IdentifyReport {
    /// The trace file.
    pub trace: String,
    /// Model sha256.
    pub model_sha256: String,
    /// Steps and taps of the trace.
    pub steps: usize,
    /// Taps the trace holds (over all steps).
    pub taps: usize,
    /// The best candidate's lane, exactly as `tiercheck lanes` names it.
    pub best_lane: String,
    /// The best candidate (`lane (kv=.. fa=..[ threads=..])`).
    pub best_candidate: String,
    /// Its K/V cache type (`f16`, `f32`).
    pub best_kv: String,
    /// Its flash attention setting (`on`, `off`).
    pub best_fa: String,
    /// The tier thread counts it stands for (empty: the trace's own count).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub best_tier_threads: Vec<usize>,
    /// Every candidate that reproduces as many taps as the best.
    pub best_lanes: Vec<String>,
    /// Whether the best candidate reproduces every tap.
    pub explained: bool,
    /// Whether several candidates (lanes, attention settings or thread counts) reproduce
    /// every tap: the trace does not tell them apart ([`IdentifyReport::ambiguity`]).
    pub ambiguous: bool,
    /// Why the tied candidates coincide on this trace, where that is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ambiguity: Option<String>,
    /// The first tap no candidate reproduces.
    pub first_unexplained: Option<Unexplained>,
    /// What the lane the trace names in its provenance (`lane`) reproduces, when it names
    /// one: the diagnosis starts from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim: Option<Claim>,
    /// The verdict in words.
    pub verdict: String,
    /// Every candidate.
    pub candidates: Vec<CandidateResult>,
    /// Per tap, graph order, the candidates reproducing it.
    pub per_tap: Vec<PerTap>,
    /// The lanes that cannot run this model, each with the reason (not candidates).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_candidates: Vec<String>,
}

/// Options of an identify run.
#[derive(Clone, Debug)]
pub struct IdentifyOptions {
    /// Only these lanes (default: every lane).
    pub lanes: Option<Vec<&'static tiercheck_core::Lane>>,
    /// Implementation of the candidates.
    pub imp: Impl,
    /// Residual stream type.
    pub residual: Residual,
    /// Context length.
    pub n_ctx: usize,
    /// Dither seeds of the floor measured at the first unexplained tap (0: none).
    pub floor_seeds: u64,
    /// How a plain dump is imported.
    pub dump: ImportOptions,
    /// Threads per matmul of the candidates' decoders (results do not depend on it).
    pub threads: usize,
    /// The saved K/V cache the trace's run continued from (its cache type and attention
    /// setting are then the only candidates).
    pub state: Option<std::sync::Arc<tiercheck_model::state::KvState>>,
}

/// Thread counts `identify` tries when a trace does not record its own: every count up
/// to 16 and the usual larger pool sizes, one per class of counts that give the same
/// arithmetic ([`thread_classes`]).
pub const THREAD_CANDIDATES: [usize; 22] =
    [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 24, 32, 48, 64, 96, 128];

/// The thread counts of [`THREAD_CANDIDATES`] grouped by what they decide for `t`'s run
/// on `model` in a context of `n_ctx` cells: the split-KV chunk size of every one-row
/// step attending 512 cells or more (flash attention), and, for a lane whose plain
/// matmul follows ggml's chunk plan (`chunk_plan`: the i8mm builds' tiles), the plan of
/// every weight shape against every graph's row count. Counts in one class give the lane
/// the same bits; the first of each class stands for it.
pub fn thread_classes(t: &Trace, model: &Model, n_ctx: usize, chunk_plan: bool) -> Vec<Vec<usize>> {
    let hp = &model.hp;
    let widths =
        [hp.n_head * hp.head_dim, hp.n_head_kv * hp.head_dim, hp.n_embd, hp.n_ff, hp.n_vocab];
    let mut rows = std::collections::BTreeSet::new();
    let mut cells = std::collections::BTreeSet::new();
    for rec in &t.steps {
        for g in graphs(rec) {
            rows.insert(g.rows);
            rows.insert(g.outputs.len());
            if g.rows == 1 {
                let used = rec.positions[g.start] + 1;
                cells.insert(tiercheck_model::attention::padded_n_kv(used, n_ctx));
            }
        }
    }
    rows.remove(&0);
    let mut classes: Vec<(Vec<usize>, Vec<usize>)> = Vec::new();
    for &nth in &THREAD_CANDIDATES {
        let mut sig: Vec<usize> = cells
            .iter()
            .filter(|&&c| c >= tiercheck_model::attention::FA_SPLIT_KV_MIN)
            .map(|&c| c.div_ceil(nth))
            .collect();
        if chunk_plan {
            for &m in &rows {
                for &n in &widths {
                    let p = tiercheck_core::arch::aarch64::i8mm::ChunkPlan::new(n, m, nth);
                    sig.extend([p.dr0, p.dr1]);
                }
            }
        }
        match classes.iter_mut().find(|(s, _)| *s == sig) {
            Some((_, counts)) => counts.push(nth),
            None => classes.push((sig, vec![nth])),
        }
    }
    classes.into_iter().map(|(_, c)| c).collect()
}

/// The attention settings to try: the trace's where it records them, else all four.
fn attentions(t: &Trace) -> Vec<Attention> {
    let kvs = match t.meta.get("kv").map(String::as_str) {
        Some("f16") => vec![KvType::F16],
        Some("f32") => vec![KvType::F32],
        _ => vec![KvType::F16, KvType::F32],
    };
    let fas = match t.meta.get("fa").map(String::as_str) {
        Some("on") => vec![FlashAttn::On],
        Some("off") => vec![FlashAttn::Off],
        _ => vec![FlashAttn::On, FlashAttn::Off],
    };
    let threads = t
        .meta
        .get("tier_threads")
        .or_else(|| t.meta.get("threads"))
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let mut out = Vec::new();
    for &kv in &kvs {
        for &fa in &fas {
            out.push(Attention { kv, fa, tier_threads: threads, tier_numa: trace_numa(t) });
        }
    }
    out
}

/// A first mismatch: step, tap, relative L2.
pub(crate) type Mismatch = (usize, String, f64);

/// What one candidate's replay reproduced (`(step, tap)`, graph order) and where it
/// stopped.
pub(crate) type Replayed = (Vec<(usize, String)>, Option<Mismatch>);

/// The replay of one candidate: per tap reproduced `(step, tap)`, and the first mismatch.
pub(crate) fn replay(
    model: &Model,
    c: &Chosen,
    o: &DeltaOptions,
    t: &Trace,
) -> anyhow::Result<Replayed> {
    let dec = decoder(model, c, o)?;
    let hp = &model.hp;
    let n_layer = hp.n_layer;
    let mut cache = dec.new_cache()?;
    let mut sink = TapSink::new(true, false);
    let mut matched = Vec::new();
    // Compare what the candidate produced since the last check (one graph's rows of each
    // tap) with the same rows of the trace, in graph order; a tap counts as reproduced
    // once its last graph's rows are.
    let check =
        |sink: &mut TapSink, matched: &mut Vec<(usize, String)>, g: &Graph, last_graph: bool| {
            let mut taps = sink.take();
            taps.sort_by_key(|x| tap_order(&x.name));
            for tap in taps {
                let Some(theirs) = t.taps.get(&(tap.step, tap.name.clone())) else { continue };
                let width = tap.data.len() / tap.rows.max(1);
                let (row0, rows) = g.rows_in(&tap.name, n_layer);
                let y = theirs.data.get(row0 * width..(row0 + rows) * width);
                let same = theirs.shape.last() == Some(&width)
                    && y.is_some_and(|y| {
                        y.len() == tap.data.len()
                            && y.iter().zip(&tap.data).all(|(p, q)| p.to_bits() == q.to_bits())
                    });
                if !same {
                    let rel = match y {
                        Some(y) if y.len() == tap.data.len() => stat(&tap.data, y).rel_l2,
                        _ => f64::INFINITY,
                    };
                    return Some((tap.step, tap.name, rel));
                }
                if last_graph {
                    matched.push((tap.step, tap.name));
                }
            }
            None
        };
    // The trace's rows of this graph of a tap, where it has them whole.
    let theirs = |step: usize, name: &str, g: &Graph, len: usize| -> Option<Vec<f32>> {
        let x = t.taps.get(&(step, name.to_string()))?;
        let width = x.shape.last().copied()?;
        let (row0, rows) = g.rows_in(name, n_layer);
        let y = x.data.get(row0 * width..(row0 + rows) * width)?;
        (y.len() == len).then(|| y.to_vec())
    };
    for (step, rec) in t.steps.iter().enumerate() {
        let pos0 = rec.positions[0];
        sink.set_step(step);
        let gs = graphs(rec);
        for (gi, g) in gs.iter().enumerate() {
            let last_graph = gi + 1 == gs.len();
            let ids = &rec.input_ids[g.start..g.start + g.rows];
            let own = dec.embed(ids)?;
            sink.put("inp_embd", g.rows, &own);
            if let Some(bad) = check(&mut sink, &mut matched, g, last_graph) {
                return Ok((matched, Some(bad)));
            }
            let mut x = theirs(step, "inp_embd", g, own.len()).unwrap_or(own);
            for il in 0..n_layer {
                let outputs = (il + 1 == n_layer).then_some(&g.outputs[..]);
                let out = dec.eval_layer_out(
                    il,
                    &mut cache,
                    &x,
                    pos0 + g.start,
                    g.rows,
                    outputs,
                    &mut sink,
                )?;
                if let Some(bad) = check(&mut sink, &mut matched, g, last_graph) {
                    return Ok((matched, Some(bad)));
                }
                x = theirs(step, &format!("l_out-{il}"), g, out.len()).unwrap_or(out);
            }
            if !g.outputs.is_empty() {
                dec.head(&x, g.outputs.len(), &mut sink)?;
            }
            if let Some(bad) = check(&mut sink, &mut matched, g, last_graph) {
                return Ok((matched, Some(bad)));
            }
        }
    }
    Ok((matched, None))
}

/// Identify `path` (a trace or a plain dump) among the lanes (module doc).
pub fn identify(model: &Model, path: &Path, o: &IdentifyOptions) -> anyhow::Result<IdentifyReport> {
    let t = tiercheck_model::import::load(model, path, &o.dump)?;
    check_trace_state(path, &t, o.state.as_deref())?;
    let (prompt, mode, generated) = trace_prompt(path, &t)?;
    let batching = trace_batching(path, &t, Batching::LLAMA_CLI, model.hp.n_layer)?;
    let n_ctx = trace_ctx(path, &t, o.n_ctx)?;
    let mut lanes_list: Vec<&'static tiercheck_core::Lane> = match &o.lanes {
        Some(l) => l.clone(),
        None => lanes::all().to_vec(),
    };
    // The lane the trace says it is (its provenance): always a candidate, and the one a
    // diagnosis starts from.
    let claimed = t.meta.get("lane").and_then(|l| lanes::find(l).ok());
    if let Some(c) = claimed {
        if !lanes_list.iter().any(|l| l.name == c.name) {
            lanes_list.push(c);
        }
    }
    let is_claimed = |name: &str| claimed.is_some_and(|c| c.name == name);
    let mut candidates: Vec<CandidateResult> = Vec::new();
    let mut runs: Vec<(Chosen, DeltaOptions)> = Vec::new();
    let mut per: BTreeMap<(usize, String), Vec<String>> = BTreeMap::new();
    let mut best: Option<(usize, usize)> = None;
    // Without a recorded thread count, every class of counts that changes the arithmetic
    // is a candidate of its own.
    let recorded = t.meta.contains_key("tier_threads") || t.meta.contains_key("threads");
    let mut not_candidates = Vec::new();
    for lane in lanes_list {
        let c = lanes::choose(lane, o.imp).map_err(anyhow::Error::msg)?;
        if let Some(why) = tiercheck_model::unsupported(model, c.elem.flavour()) {
            not_candidates.push(format!("{}: {why}", lane.name));
            continue;
        }
        let plan = lane.recipe.plain_gemm == tiercheck_core::arch::aarch64::i8mm::ARM_I8MM_NRC2;
        let classes =
            if recorded { vec![Vec::new()] } else { thread_classes(&t, model, n_ctx, plan) };
        // A saved cache fixes the cache type and the attention path.
        let settings = attentions(&t)
            .into_iter()
            .filter(|a| o.state.as_ref().is_none_or(|s| (s.kv, s.fa()) == (a.kv, a.fa)));
        for (attn, counts) in settings.flat_map(|a| classes.iter().map(move |cl| (a, cl.clone()))) {
            let attn = match counts.first() {
                Some(&n) => Attention { tier_threads: n, ..attn },
                None => attn,
            };
            let opts = DeltaOptions {
                ids: prompt.clone(),
                steps: generated.len(),
                mode,
                batching,
                residual: o.residual,
                n_ctx,
                attn,
                threshold: 0.0,
                floor_seeds: o.floor_seeds,
                dump: o.dump.clone(),
                threads: o.threads,
                state: o.state.clone(),
            };
            let (matched, first) = replay(model, &c, &opts, &t)?;
            let name = if counts.is_empty() {
                format!("{} ({})", lane.name, attn.label())
            } else {
                format!("{} ({} threads={})", lane.name, attn.label(), list(&counts))
            };
            for key in &matched {
                per.entry(key.clone()).or_default().push(name.clone());
            }
            let i = candidates.len();
            // The most taps; on a tie, the claimed lane before the others.
            let better = |b: &(usize, usize)| {
                matched.len() > b.0
                    || (matched.len() == b.0
                        && is_claimed(lane.name)
                        && !is_claimed(&candidates[b.1].lane))
            };
            if best.as_ref().is_none_or(better) {
                best = Some((matched.len(), i));
            }
            runs.push((c, opts.clone()));
            candidates.push(CandidateResult {
                name,
                lane: lane.name.into(),
                imp: c.impl_name().into(),
                attention: attn.label(),
                tier_threads: counts,
                reproduced: matched.len(),
                first_mismatch: first,
            });
        }
    }
    let (best_n, best_i) = best.ok_or_else(|| anyhow::anyhow!("identify: no candidate lanes"))?;
    let best_o = runs[best_i].1.clone();
    let best_lanes: Vec<String> =
        candidates.iter().filter(|c| c.reproduced == best_n).map(|c| c.name.clone()).collect();
    let best_cand = &candidates[best_i];
    let explained = best_cand.first_mismatch.is_none();
    // Where a candidate stops, what kind of difference it is (measured against that
    // candidate's own floor).
    let stop_of = |i: usize| -> anyhow::Result<Option<Unexplained>> {
        let Some((step, tap, rel)) = &candidates[i].first_mismatch else { return Ok(None) };
        let floor = if o.floor_seeds > 0 {
            let cache = Cache::new();
            let ctx = Ctx::new(&cache);
            let (c, opts) = &runs[i];
            let f = floor::measure(&ctx, model, c, opts, &prompt, mode, &generated)?;
            f.layer_local.get(tap).copied()
        } else {
            None
        };
        Ok(Some(difference(&t, *step, tap, *rel, floor)))
    };
    let first_unexplained = stop_of(best_i)?;
    // The claimed lane's best candidate (the claimed lane may stand for several settings
    // where the trace records none), and the candidates that reproduce more than it.
    let claim = match claimed {
        None => None,
        Some(l) => {
            let i = (0..candidates.len())
                .filter(|&i| candidates[i].lane == l.name)
                .max_by_key(|&i| (candidates[i].reproduced, std::cmp::Reverse(i)))
                .expect("the claimed lane is a candidate");
            let further: Vec<String> = candidates
                .iter()
                .filter(|c| c.reproduced > candidates[i].reproduced)
                .map(|c| c.name.clone())
                .collect();
            let stop = if i == best_i { first_unexplained.clone() } else { stop_of(i)? };
            Some(Claim {
                lane: l.name.into(),
                candidate: candidates[i].name.clone(),
                reproduced: candidates[i].reproduced,
                reproduces: stop.is_none(),
                stop,
                further,
            })
        }
    };
    let tied: Vec<&CandidateResult> =
        candidates.iter().filter(|c| explained && c.reproduced == best_n).collect();
    let ambiguous = tied.len() > 1;
    let ambiguity = ambiguous.then(|| ambiguity_reason(&tied, &t));
    let stop_text = |u: &Unexplained| format!("step {} tap {} ({})", u.step, u.tap, u.what);
    let claim_verdict = claim.as_ref().and_then(|c| {
        let stop = c.stop.as_ref()?;
        Some(match &first_unexplained {
            None => format!(
                "explained by {}, not by its own lane {}: {} stops at {}",
                best_cand.name,
                c.lane,
                c.candidate,
                stop_text(stop)
            ),
            Some(u) if c.further.is_empty() => format!(
                "unexplained from step {} tap {}: its lane {} stops there and no lane goes further; {}",
                u.step, u.tap, c.candidate, u.what
            ),
            Some(u) => format!(
                "reproduced by neither: its lane {} stops at {}; {} goes further ({} taps) and stops at {}",
                c.candidate,
                stop_text(stop),
                best_cand.name,
                best_n,
                stop_text(u)
            ),
        })
    });
    let verdict = match &first_unexplained {
        _ if claim_verdict.is_some() => claim_verdict.expect("some"),
        None if ambiguous => format!(
            "explained, ambiguously: {} candidates reproduce every tap bitwise ({}): {}",
            tied.len(),
            tied.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(", "),
            ambiguity.as_deref().unwrap_or("")
        ),
        None if claim.is_some() => {
            format!("explained: its lane {} reproduces every tap bitwise", best_cand.name)
        }
        None => format!("explained: {} reproduces every tap bitwise", best_cand.name),
        Some(u) => format!(
            "unexplained from step {} tap {}: no lane reproduces it (best: {}, {} taps before it); {}",
            u.step, u.tap, best_cand.name, best_n, u.what
        ),
    };
    let mut per_tap: Vec<PerTap> =
        per.into_iter().map(|((step, tap), lanes)| PerTap { step, tap, lanes }).collect();
    per_tap.sort_by_key(|p| (p.step, tap_order(&p.tap)));
    Ok(IdentifyReport {
        trace: path.display().to_string(),
        model_sha256: model.sha256.clone(),
        steps: t.steps.len(),
        taps: t.taps.len(),
        best_lane: best_cand.lane.clone(),
        best_candidate: best_cand.name.clone(),
        best_kv: best_o.attn.kv.name().into(),
        best_fa: best_o.attn.fa.name().into(),
        best_tier_threads: best_cand.tier_threads.clone(),
        best_lanes,
        explained,
        ambiguous,
        ambiguity,
        first_unexplained,
        claim,
        verdict,
        candidates,
        per_tap,
        not_candidates,
    })
}

/// The difference at a candidate's first mismatch (`step`, `tap`, relative L2 `rel`,
/// that candidate's layer-local `floor` there). The candidate replayed every tap before
/// this one bitwise, the layer's inputs being the trace's own: so where the tap is a
/// matmul output whose input the trace holds, that input was reproduced and the matmul
/// itself differs (kernel-level); where the trace lacks the input, a flipped activation
/// code is as possible as a kernel difference; any other tap is an elementwise or
/// attention op.
fn difference(t: &Trace, step: usize, tap: &str, rel: f64, floor: Option<f64>) -> Unexplained {
    let ratio = floor.filter(|f| *f > 0.0).map(|f| rel / f);
    let (kind, what) = match matmul_input(tap) {
        Some(input) if t.taps.contains_key(&(step, input.clone())) => (
            "kernel",
            format!(
                "a kernel-level difference: the matmul's input {input} is reproduced bitwise, its output {tap} is not"
            ),
        ),
        Some(input) => (
            "input-missing",
            format!(
                "the trace lacks the matmul's input {input}: a flipped activation code there or a kernel-level difference"
            ),
        ),
        None => (
            "elementwise",
            format!("an elementwise or attention difference ({tap} is not a matmul output)"),
        ),
    };
    let size = match ratio {
        Some(q) if q <= NOISE_RATIO => format!("x{q:.1} the layer-local floor: noise-sized"),
        Some(q) => format!("x{q:.0} the layer-local floor: beyond the floor"),
        None => "no floor measured".into(),
    };
    Unexplained {
        step,
        tap: tap.into(),
        rel_l2: rel,
        floor,
        ratio,
        kind: kind.into(),
        what: format!("{what}; relative L2 {rel:.1e}, {size}"),
    }
}

/// Why the `tied` candidates (each reproducing every tap of `t`) coincide: the lanes'
/// recipes differ only in the batched matmul where every step has one row; the settings
/// (attention, thread count) the trace does not record give the same bits on it.
fn ambiguity_reason(tied: &[&CandidateResult], t: &Trace) -> String {
    let mut lanes: Vec<&str> = Vec::new();
    for c in tied {
        if !lanes.contains(&c.lane.as_str()) {
            lanes.push(&c.lane);
        }
    }
    let mut attn: Vec<&str> = tied.iter().map(|c| c.attention.as_str()).collect();
    attn.sort();
    attn.dedup();
    let mut parts = Vec::new();
    if lanes.len() > 1 {
        // The recipe components in which the tied lanes differ, by name.
        let recipes: Vec<tiercheck_core::lane::Recipe> =
            lanes.iter().filter_map(|l| lanes::find(l).ok()).map(|l| l.recipe).collect();
        let mut differ = Vec::new();
        for w in recipes.windows(2) {
            let (a, b) = (&w[0], &w[1]);
            for (name, d) in [
                ("activation quantizers", a.act_k != b.act_k || a.act_legacy != b.act_legacy),
                ("accumulation", a.accumulation != b.accumulation),
                ("contraction", a.contraction != b.contraction),
                ("weight layout", a.layout != b.layout),
                ("matmul path", a.matmul != b.matmul),
                ("plain gemm (several rows by plain weights)", a.plain_gemm != b.plain_gemm),
                ("elementwise flavour", a.elem != b.elem),
            ] {
                if d && !differ.contains(&name) {
                    differ.push(name);
                }
            }
        }
        let one_row = t.steps.iter().all(|s| s.rows() == 1);
        let rows = if one_row { " (every step of the trace has one row)" } else { "" };
        parts.push(if differ.is_empty() {
            format!("{} have the same recipe", lanes.join(" and "))
        } else {
            format!(
                "{} differ in {}, where this trace does not tell them apart{rows}",
                lanes.join(" and "),
                differ.join(", ")
            )
        });
    }
    if attn.len() > 1 {
        parts.push(format!(
            "the trace does not record its K/V cache type and flash attention, and {} give the same bits on it",
            attn.join(" and ")
        ));
    }
    let classes = tied.iter().filter(|c| !c.tier_threads.is_empty()).count();
    if classes > 1 {
        parts.push(
            "the trace does not record its thread count, and the classes of counts listed give the same bits on it"
                .into(),
        );
    }
    parts.join("; ")
}

/// The report as text.
pub fn render(r: &IdentifyReport) -> String {
    let mut s = format!(
        "identify {} ({} steps, {} taps), model {}\n",
        r.trace,
        r.steps,
        r.taps,
        &r.model_sha256[..12]
    );
    s += &format!("verdict: {}\n", r.verdict);
    if let Some(c) = &r.claim {
        let how = match &c.stop {
            None => "reproduces every tap".to_string(),
            Some(u) => format!(
                "stops at step {} {} after {} taps ({})",
                u.step, u.tap, c.reproduced, u.kind
            ),
        };
        s += &format!("its lane: {} {how}", c.candidate);
        if !c.further.is_empty() {
            s += &format!("; further: {}", c.further.join(", "));
        }
        s.push('\n');
    }
    if r.best_lanes.len() > 1 && !r.ambiguous {
        s += &format!("equally good: {}\n", r.best_lanes.join(", "));
    }
    for n in &r.not_candidates {
        s += &format!("not a candidate: {n}\n");
    }
    s += "candidates (taps reproduced before the first mismatch):\n";
    let mut cs: Vec<&CandidateResult> = r.candidates.iter().collect();
    cs.sort_by_key(|c| std::cmp::Reverse(c.reproduced));
    for c in cs {
        let stop = match &c.first_mismatch {
            None => "every tap".into(),
            Some((st, tap, rel)) => format!("stops at step {st} {tap} (rel {rel:.1e})"),
        };
        s += &format!("  {:<48} {:>6}  {stop}\n", format!("{} [{}]", c.name, c.imp), c.reproduced);
    }
    s
}

/// `1,2,5-8` style list of ascending counts.
fn list(counts: &[usize]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < counts.len() {
        let mut j = i;
        while j + 1 < counts.len() && counts[j + 1] == counts[j] + 1 {
            j += 1;
        }
        parts.push(if j > i + 1 {
            format!("{}-{}", counts[i], counts[j])
        } else if j == i + 1 {
            format!("{},{}", counts[i], counts[j])
        } else {
            counts[i].to_string()
        });
        i = j + 1;
    }
    parts.join(",")
}
