//! What a trace records (its prompt, mode, attention options, batching and saved
//! cache), read with the file named in every error, and the order of its tap names.

use std::collections::BTreeMap;
use std::path::Path;

use tiercheck_gguf::tensorfile::Tensor;
use tiercheck_model::sequence::{self, RunOutput, Trace};
use tiercheck_model::state::KvState;
use tiercheck_model::{Attention, Batching, FlashAttn, KvType, Logits, Mode};

/// Convert a run into the in-memory form of a trace.
pub fn trace_of(out: RunOutput) -> Trace {
    let mut taps = BTreeMap::new();
    for t in out.taps {
        let width = t.data.len() / t.rows.max(1);
        taps.insert(
            (t.step, t.name.clone()),
            Tensor {
                name: sequence::tap_key(t.step, &t.name),
                shape: vec![t.rows, width],
                data: t.data,
            },
        );
    }
    Trace { taps, steps: out.steps, meta: BTreeMap::new() }
}

/// A trace and the saved cache a replay of it starts from agree: a trace that records
/// `state_sha256` needs that very file; a trace that records none starts where the given
/// cache ends (at position 0 without one).
pub fn check_trace_state(path: &Path, t: &Trace, state: Option<&KvState>) -> anyhow::Result<()> {
    let first = t.steps.first().and_then(|s| s.positions.first()).copied().unwrap_or(0);
    let p = path.display();
    match (t.meta.get("state_sha256"), state) {
        (Some(want), Some(s)) if *want != s.sha256 => anyhow::bail!(
            "{p} continued from a saved cache with sha256 {want}; {} has sha256 {}",
            s.path.display(),
            s.sha256
        ),
        (Some(want), None) => {
            let cells = t.meta.get("state_cells").map_or("?", String::as_str);
            anyhow::bail!(
                "{p} continued from a saved cache of {cells} cells (sha256 {want}{}): pass it with --state",
                t.meta.get("state_path").map(|q| format!(", saved as {q}")).unwrap_or_default()
            )
        }
        _ => {}
    }
    let start = state.map_or(0, |s| s.cells);
    if first != start {
        match state {
            Some(s) => anyhow::bail!(
                "{p} starts at position {first}; the saved cache {} ends at {start}",
                s.path.display()
            ),
            None => anyhow::bail!(
                "{p} starts at position {first}: pass the saved cache it continued with --state"
            ),
        }
    }
    Ok(())
}

/// Whether a trace's tier ran NUMA-aware: tiercheck's `tier_numa = on`, or the capture
/// tool's `numa` naming a strategy (`distribute`, `isolate`, `numactl`: ggml found
/// several nodes; `off` where it found one).
pub fn trace_numa(t: &Trace) -> bool {
    t.meta.get("tier_numa").is_some_and(|v| v == "on")
        || t.meta.get("numa").is_some_and(|v| !v.is_empty() && v != "off")
}

/// The attention options a trace records (`kv`, `fa`, `tier_threads` metadata; a trace
/// of llama.cpp records its `threads`), each one it lacks taken from `default`.
pub(crate) fn trace_attention(
    path: &Path,
    t: &Trace,
    default: Attention,
) -> anyhow::Result<Attention> {
    let mut a = default;
    match t.meta.get("kv").map(String::as_str) {
        Some("f16") => a.kv = KvType::F16,
        Some("f32") => a.kv = KvType::F32,
        Some(other) => {
            anyhow::bail!("{}: metadata kv = '{other}' (known: f16, f32)", path.display())
        }
        None => {}
    }
    match t.meta.get("fa").map(String::as_str) {
        Some("on") => a.fa = FlashAttn::On,
        Some("off") => a.fa = FlashAttn::Off,
        Some(other) => {
            anyhow::bail!("{}: metadata fa = '{other}' (known: on, off)", path.display())
        }
        None => {}
    }
    let threads = t.meta.get("tier_threads").or_else(|| t.meta.get("threads"));
    if let Some(v) = threads {
        a.tier_threads = match v.parse::<usize>() {
            Ok(n) if n >= 1 => n,
            _ => {
                anyhow::bail!("{}: metadata threads = '{v}' is not a thread count", path.display())
            }
        };
    }
    if t.meta.contains_key("tier_numa") || t.meta.contains_key("numa") {
        a.tier_numa = trace_numa(t);
    }
    Ok(a)
}

/// The context a trace ran in (`n_ctx` metadata; tiercheck and the capture tool record
/// it), else `default`.
pub fn trace_ctx(path: &Path, t: &Trace, default: usize) -> anyhow::Result<usize> {
    match t.meta.get("n_ctx") {
        None => Ok(default),
        Some(v) => match v.parse::<usize>() {
            Ok(n) if n >= 1 => Ok(n),
            _ => {
                anyhow::bail!("{}: metadata n_ctx = '{v}' is not a context length", path.display())
            }
        },
    }
}

/// The batching a trace records: `n_batch`, `n_ubatch` and `logits` metadata, each one
/// it lacks taken from its step records (a prompt step's recorded graphs and output
/// rows; a trace whose records say neither ran its prompt as one graph, and its pruned
/// taps tell whether every row was an output), else from `default`.
pub fn trace_batching(
    path: &Path,
    t: &Trace,
    default: Batching,
    n_layer: usize,
) -> anyhow::Result<Batching> {
    let mut b = default;
    let num = |key: &str| -> anyhow::Result<Option<usize>> {
        match t.meta.get(key) {
            None => Ok(None),
            Some(v) => match v.parse::<usize>() {
                Ok(n) if n >= 1 => Ok(Some(n)),
                _ => anyhow::bail!("{}: metadata {key} = '{v}' is not a size", path.display()),
            },
        }
    };
    let first = t.steps.first();
    let rows = first.map_or(1, |s| s.rows().max(1));
    // Without metadata: the first step's graphs (their largest is the ubatch size, the
    // whole step one batch), or one graph of the whole step.
    let graphs = first.map(|s| s.ubatch_rows()).unwrap_or_default();
    let widest = graphs.iter().copied().max().unwrap_or(rows).max(1);
    b.n_batch = num("n_batch")?.unwrap_or(rows.max(widest));
    b.n_ubatch = num("n_ubatch")?.unwrap_or(widest);
    b.logits = match t.meta.get("logits").map(String::as_str) {
        Some("last") => Logits::Last,
        Some("all") => Logits::All,
        Some(other) => {
            anyhow::bail!("{}: metadata logits = '{other}' (known: last, all)", path.display())
        }
        None => match first {
            Some(s) if s.outputs.is_some() => Logits::Last,
            Some(s) => {
                let pruned = t.taps.iter().find(|((step, name), _)| {
                    *step == s.step && sequence::is_pruned(name, n_layer)
                });
                match pruned {
                    Some((_, tensor)) if tensor.shape[0] < s.rows() => Logits::Last,
                    Some(_) => Logits::All,
                    None => default.logits,
                }
            }
            None => default.logits,
        },
    };
    Ok(b)
}

/// The prompt, mode and greedy tokens a trace records (`path` names it in errors).
pub fn trace_prompt(path: &Path, t: &Trace) -> anyhow::Result<(Vec<u32>, Mode, Vec<u32>)> {
    let first = t
        .steps
        .first()
        .ok_or_else(|| anyhow::anyhow!("{}: the trace has no steps", path.display()))?;
    let mode = match t.meta.get("mode").map(String::as_str) {
        Some("decode") => Mode::Decode,
        Some("prompt") => Mode::Prompt,
        Some(other) => anyhow::bail!("{}: unknown mode '{other}'", path.display()),
        None if first.input_ids.len() > 1 => Mode::Prompt,
        None => Mode::Decode,
    };
    let prompt: Vec<u32> = match t.meta.get("prompt_ids") {
        Some(s) => serde_json::from_str(s)
            .map_err(|e| anyhow::anyhow!("{}: metadata prompt_ids: {e}", path.display()))?,
        None => first.input_ids.clone(),
    };
    let prompt_steps = match mode {
        Mode::Prompt => 1,
        Mode::Decode => prompt.len(),
    };
    if prompt_steps == 0 || prompt_steps > t.steps.len() {
        anyhow::bail!(
            "{}: {} steps do not cover a prompt of {} ids",
            path.display(),
            t.steps.len(),
            prompt.len()
        );
    }
    let generated = t.steps[prompt_steps - 1..].iter().map(|s| s.emitted).collect();
    Ok((prompt, mode, generated))
}

/// Position of a tap name in the graph (for "first divergent tap" and plots).
pub(crate) fn tap_order(name: &str) -> (i64, usize) {
    use tiercheck_model::taps::ALL_LAYER_TAPS as KINDS;
    match name {
        "inp_embd" => (-1, 0),
        "result_norm" => (i64::MAX, 0),
        "result_output" => (i64::MAX, 1),
        _ => {
            let (kind, l) = name.rsplit_once('-').unwrap_or((name, "0"));
            let l: i64 = l.parse().unwrap_or(0);
            (l, KINDS.iter().position(|k| *k == kind).unwrap_or(KINDS.len()))
        }
    }
}

/// Layer of a tap (`None` for the embedding and the head).
pub(crate) fn tap_layer(name: &str) -> Option<usize> {
    name.rsplit_once('-').and_then(|(_, l)| l.parse().ok())
}

/// The tap names of `x` that `y` lacks (at any step), summarised by kind in graph
/// order: `Kcur (28 layers)`, `inp_embd`, `attn_norm (layers 3, 5)`.
pub(crate) fn taps_lacking(x: &Trace, y: &Trace) -> Vec<String> {
    let names = |t: &Trace| -> std::collections::BTreeSet<String> {
        t.taps.keys().map(|(_, n)| n.clone()).collect()
    };
    let ny = names(y);
    let mut missing: Vec<String> = names(x).into_iter().filter(|n| !ny.contains(n)).collect();
    missing.sort_by_key(|n| tap_order(n));
    let mut kinds: Vec<(String, Vec<usize>)> = Vec::new();
    for n in &missing {
        let (kind, layer) = match tap_layer(n) {
            Some(l) => (n.rsplit_once('-').map_or(n.as_str(), |(k, _)| k).to_string(), Some(l)),
            None => (n.clone(), None),
        };
        match kinds.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, ls)) => ls.extend(layer),
            None => kinds.push((kind, layer.into_iter().collect())),
        }
    }
    kinds.sort_by_key(|(k, _)| match k.as_str() {
        "inp_embd" | "result_norm" | "result_output" => tap_order(k),
        _ => tap_order(&format!("{k}-0")),
    });
    kinds
        .into_iter()
        .map(|(k, ls)| match ls.len() {
            0 => k,
            1 => format!("{k} (layer {})", ls[0]),
            n => format!("{k} ({n} layers)"),
        })
        .collect()
}
