//! Traces from plain dumps (`tiercheck trace import`, and `delta`'s trace sides): an
//! engine's safetensors or npz file with one array per tap name and no tiercheck
//! metadata becomes a [`Trace`], validated against the model.
//!
//! - **Tap names** are llama.cpp's: `NAME-L` for `NAME` in `attn_norm`, `Qcur`, `Kcur`,
//!   `Vcur`, `kqv_out`, `ffn_inp`, `ffn_norm`, `ffn_swiglu`, `ffn_out`, `l_out` and a layer
//!   `L` of the model, and `inp_embd`, `result_norm`, `result_output`. Any subset will do;
//!   `result_output` (the logits) is required, since it gives each step's greedy token.
//! - **Shapes**: `[rows, width]` with the tap's width for the model (`n_embd`, the Q or K/V
//!   width, `n_ff`, `n_vocab`). Decode mode (token by token): one row per id, step s being
//!   row s. Prompt mode (one batch): one row per id; the pruned taps (the last layer's
//!   `ffn_inp`, `ffn_norm`, `ffn_swiglu`, `ffn_out`, `l_out`, and `result_norm`,
//!   `result_output`) may hold the last row only, all of them alike: llama-cli and
//!   llama-server ask for the last row's logits, and llama.cpp then computes those taps
//!   for that row alone. The prompt's graphs are llama.cpp's ubatches of the metadata's
//!   `n_batch` and `n_ubatch` (default 2048 and 512, llama-cli's).
//! - **Token ids**: `--ids`, else an integer array `ids` (or `token_ids`, `tokens`,
//!   `input_ids`), else a metadata entry `ids` / `prompt_ids` (a JSON list); given twice
//!   they must agree.
//! - **Logits** may be named `logits` (as engines save them) instead of `result_output`;
//!   with both, they must be equal bitwise.
//! - **Other arrays** (an engine's own debug tensors) are ignored and listed in the
//!   metadata `tiercheck.ignored_arrays` and one warning; `--strict` refuses them.
//! - **Mode**: `--mode`, else the metadata entry `mode` (`decode` / `prompt`); a dump that
//!   says neither is an error (the two modes have the same shapes).
//!
//! Every problem is an error naming the file and, where there is one, the array.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{anyhow, bail, Result};

use tiercheck_gguf::dump::{self, Dump, Values};
use tiercheck_gguf::tensorfile::{self, Tensor};

use crate::sequence::{record, tap_key, Batching, Mode, StepRecord, Trace};
use crate::taps::{is_pruned, layer_taps};
use crate::Model;

/// The names under which a dump may hold its token ids.
const ID_ARRAYS: [&str; 4] = ["ids", "token_ids", "tokens", "input_ids"];

/// The name under which engines save the logits: `result_output`'s rows.
const LOGITS_ARRAY: &str = "logits";

/// What the user says about a dump (each `None`: from the file).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ImportOptions {
    /// The evaluated token ids.
    pub ids: Option<Vec<u32>>,
    /// The batching mode.
    pub mode: Option<Mode>,
    /// Refuse arrays that are neither taps nor ids (by default they are listed as
    /// ignored in the trace's metadata and one warning).
    pub strict: bool,
}

/// The width of tap `name` for `model`, or why the name is not a tap.
fn tap_width(model: &Model, name: &str) -> Result<usize, String> {
    let hp = &model.hp;
    match name {
        "inp_embd" | "result_norm" => return Ok(hp.n_embd),
        "result_output" => return Ok(hp.n_vocab),
        _ => {}
    }
    let known = || {
        format!(
            "not a tap name (expected NAME-L for NAME in {}, L in 0..{}, or inp_embd, result_norm, result_output)",
            layer_taps(hp).join(", "),
            hp.n_layer
        )
    };
    let (kind, layer) = name.rsplit_once('-').ok_or_else(known)?;
    let layer: usize = layer.parse().map_err(|_| known())?;
    if layer >= hp.n_layer {
        return Err(format!("layer {layer} is past the model's {} layers", hp.n_layer));
    }
    if !layer_taps(hp).contains(&kind) {
        return Err(known());
    }
    let (n_expert, used, ff_exp) =
        hp.moe.map_or((0, 0, 0), |m| (m.n_expert, m.n_expert_used, m.n_ff_exp));
    Ok(match kind {
        "attn_norm" | "kqv_out" | "ffn_inp" | "ffn_norm" | "ffn_out" | "l_out" | "ffn_moe_out" => {
            hp.n_embd
        }
        "Qcur" => hp.n_head * hp.head_dim,
        "Kcur" | "Vcur" => hp.n_head_kv * hp.head_dim,
        "ffn_swiglu" => hp.n_ff,
        "ffn_moe_logits" | "ffn_moe_probs" => n_expert,
        "ffn_moe_topk" | "ffn_moe_weights" | "ffn_moe_weights_norm" => used,
        "ffn_moe_weights_sum" => 1,
        "ffn_moe_up" | "ffn_moe_gate" | "ffn_moe_swiglu" => used * ff_exp,
        "ffn_moe_down" | "ffn_moe_weighted" => used * hp.n_embd,
        _ => return Err(known()),
    })
}

/// The dump's ids: `opts`, the file's integer array or metadata; both must agree.
fn dump_ids(path: &Path, d: &Dump, opts: &ImportOptions) -> Result<Vec<u32>> {
    let p = path.display();
    let mut from_file: Option<(String, Vec<i64>)> = None;
    for name in ID_ARRAYS {
        if let Some(a) = d.arrays.get(name) {
            match &a.values {
                Values::Int(v) if a.shape.len() == 1 => from_file = Some((name.into(), v.clone())),
                _ => bail!("{p}: array '{name}' must be a 1-D integer array of token ids"),
            }
            break;
        }
    }
    if from_file.is_none() {
        for key in ["ids", "prompt_ids"] {
            if let Some(s) = d.meta.get(key) {
                let v: Vec<i64> = serde_json::from_str(s)
                    .map_err(|e| anyhow!("{p}: metadata {key} is not a JSON list of ids: {e}"))?;
                from_file = Some((format!("metadata {key}"), v));
                break;
            }
        }
    }
    let to_u32 = |what: &str, v: &[i64]| -> Result<Vec<u32>> {
        v.iter()
            .map(|&x| u32::try_from(x).map_err(|_| anyhow!("{p}: {what}: {x} is not a token id")))
            .collect()
    };
    let ids = match (&opts.ids, from_file) {
        (Some(given), Some((what, v))) => {
            let file = to_u32(&what, &v)?;
            if &file != given {
                bail!("{p}: --ids {given:?} differ from the file's {what} {file:?}");
            }
            file
        }
        (Some(given), None) => given.clone(),
        (None, Some((what, v))) => to_u32(&what, &v)?,
        (None, None) => bail!(
            "{p}: the dump holds no token ids (no {} array, no ids metadata): pass --ids",
            ID_ARRAYS.join("/")
        ),
    };
    if ids.is_empty() {
        bail!("{p}: no token ids");
    }
    Ok(ids)
}

/// The dump's mode: `opts`, else its `mode` metadata.
fn dump_mode(path: &Path, d: &Dump, opts: &ImportOptions) -> Result<Mode> {
    let p = path.display();
    let file = match d.meta.get("mode").map(String::as_str) {
        Some("decode") => Some(Mode::Decode),
        Some("prompt") => Some(Mode::Prompt),
        Some(other) => bail!("{p}: metadata mode = '{other}' (known: decode, prompt)"),
        None => None,
    };
    match (opts.mode, file) {
        (Some(m), Some(f)) if m != f => {
            bail!("{p}: --mode {} differs from the file's mode {}", m.name(), f.name())
        }
        (Some(m), _) | (None, Some(m)) => Ok(m),
        (None, None) => bail!(
            "{p}: the dump does not say whether it ran token by token or as one batch: pass --mode decode or --mode prompt"
        ),
    }
}

/// A trace from a plain dump (module doc).
pub fn import(model: &Model, path: &Path, d: &Dump, opts: &ImportOptions) -> Result<Trace> {
    let p = path.display();
    check_model(model, path, &d.meta)?;
    let ids = dump_ids(path, d, opts)?;
    if let Some(bad) = ids.iter().find(|&&i| i as usize >= model.hp.n_vocab) {
        bail!("{p}: token id {bad} is outside the model's vocabulary of {}", model.hp.n_vocab);
    }
    let mode = dump_mode(path, d, opts)?;
    let n = ids.len();
    let mut taps: BTreeMap<(usize, String), Tensor> = BTreeMap::new();
    // Pruned taps holding the last row only, and holding every row.
    let (mut last_rows, mut all_rows) = (Vec::new(), Vec::new());
    let mut ignored = Vec::new();
    if let (Some(a), Some(b)) = (d.arrays.get(LOGITS_ARRAY), d.arrays.get("result_output")) {
        if a != b {
            bail!("{p}: arrays 'logits' and 'result_output' both hold logits, and they differ");
        }
    }
    for (name, a) in &d.arrays {
        if ID_ARRAYS.contains(&name.as_str()) {
            continue;
        }
        if name == LOGITS_ARRAY && d.arrays.contains_key("result_output") {
            continue;
        }
        let name = if name == LOGITS_ARRAY { &"result_output".to_string() } else { name };
        let width = match tap_width(model, name) {
            Ok(w) => w,
            Err(why) if opts.strict || !why.starts_with("not a tap name") => {
                bail!("{p}: array '{name}': {why}")
            }
            Err(_) => {
                ignored.push(name.clone());
                continue;
            }
        };
        let data = match &a.values {
            Values::Float(data) => data,
            Values::Int(_) => bail!("{p}: array '{name}' holds integers; a tap holds floats"),
            Values::Other(dtype) => bail!(
                "{p}: array '{name}' is of dtype {dtype}; a tap is f32, f16 or bf16 (npz: f4, f2)"
            ),
        };
        let (rows, w) = match a.shape.as_slice() {
            [r, w] => (*r, *w),
            [w] => (1, *w),
            other => bail!("{p}: array '{name}' has shape {other:?}; expected [rows, {width}]"),
        };
        if w != width {
            bail!("{p}: array '{name}' is {w} wide; the model's {name} is {width} wide");
        }
        let pruned = is_pruned(name, model.hp.n_layer);
        let last_only = mode == Mode::Prompt && rows == 1 && n > 1 && pruned;
        if pruned && mode == Mode::Prompt && n > 1 {
            if last_only { &mut last_rows } else { &mut all_rows }.push(name.clone());
        }
        if rows != n && !last_only {
            bail!(
                "{p}: array '{name}' has {rows} rows for {n} ids ({} mode: one row per id)",
                mode.name()
            );
        }
        match mode {
            Mode::Decode => {
                for s in 0..n {
                    taps.insert(
                        (s, name.clone()),
                        Tensor {
                            name: tap_key(s, name),
                            shape: vec![1, w],
                            data: data[s * w..(s + 1) * w].to_vec(),
                        },
                    );
                }
            }
            Mode::Prompt => {
                taps.insert(
                    (0, name.clone()),
                    Tensor { name: tap_key(0, name), shape: vec![rows, w], data: data.clone() },
                );
            }
        }
    }
    let logits = |s: usize| -> Result<&[f32]> {
        let t = taps.get(&(s, "result_output".to_string())).ok_or_else(|| {
            anyhow!("{p}: the dump has no result_output (the logits give each step's token)")
        })?;
        Ok(&t.data[t.data.len() - model.hp.n_vocab..])
    };
    if let (Some(a), Some(b)) = (last_rows.first(), all_rows.first()) {
        bail!(
            "{p}: array '{a}' holds the last row only but '{b}' holds every row: llama.cpp prunes all of the last layer's taps from ffn_inp on, and the head, alike"
        );
    }
    let size = |key: &str, default: usize| -> Result<usize> {
        match d.meta.get(key) {
            None => Ok(default),
            Some(v) => match v.parse::<usize>() {
                Ok(x) if x >= 1 => Ok(x),
                _ => bail!("{p}: metadata {key} = '{v}' is not a size"),
            },
        }
    };
    let defaults = Batching::LLAMA_CLI;
    let batching = Batching {
        n_batch: size("n_batch", defaults.n_batch)?,
        n_ubatch: size("n_ubatch", defaults.n_ubatch)?,
        logits: defaults.logits,
    };
    let steps: Vec<StepRecord> = match mode {
        Mode::Decode => (0..n)
            .map(|s| {
                let mut r = record(s, vec![s], &ids[s..s + 1], logits(s)?);
                r.ubatches = vec![1];
                Ok(r)
            })
            .collect::<Result<_>>()?,
        Mode::Prompt => {
            let mut r = record(0, (0..n).collect(), &ids, logits(0)?);
            r.ubatches = batching.ubatches(n);
            if !last_rows.is_empty() {
                r.outputs = Some(vec![n - 1]);
            }
            vec![r]
        }
    };
    let mut meta = d.meta.clone();
    meta.insert("mode".into(), mode.name().into());
    meta.insert("prompt_ids".into(), serde_json::to_string(&ids).expect("ids serialize"));
    meta.insert("tiercheck.imported_from".into(), path.display().to_string());
    if !ignored.is_empty() {
        meta.insert(
            "tiercheck.ignored_arrays".into(),
            serde_json::to_string(&ignored).expect("names serialize"),
        );
    }
    Ok(Trace { taps, steps, meta })
}

/// The model a file's metadata records (`model_sha256`, perhaps `model_path`) is `model`.
fn check_model(model: &Model, path: &Path, meta: &BTreeMap<String, String>) -> Result<()> {
    if let Some(want) = meta.get("model_sha256") {
        if *want != model.sha256 {
            let at = meta.get("model_path").map(|m| format!(" (at {m})")).unwrap_or_default();
            bail!(
                "{} ran the model with sha256 {want}{at}; the model given, {}, has sha256 {}",
                path.display(),
                model.path.display(),
                model.sha256
            );
        }
    }
    Ok(())
}

/// A trace file fits `model`: the model it records (`model_sha256`) is this one, and its
/// step records and taps have the model's shapes (ids inside the vocabulary, each known
/// tap of a layer the model has, as wide as the model's tap, with a row per row of its
/// step, or per output row for the pruned taps). An analysis indexes taps by these
/// shapes, so a trace of another model is an error here, naming the file and what
/// differs, never an out-of-bounds index later. Tap names that are not the decoder's
/// (an engine's own tensors) are left alone.
pub fn check_trace(model: &Model, path: &Path, t: &Trace) -> Result<()> {
    let p = path.display();
    let hp = &model.hp;
    check_model(model, path, &t.meta)?;
    let mut by_step = BTreeMap::new();
    for (i, s) in t.steps.iter().enumerate() {
        let rows = s.rows();
        if rows == 0 || s.input_ids.len() != rows {
            bail!(
                "{p}: step record {i} has {rows} positions and {} ids (one id per position, at least one)",
                s.input_ids.len()
            );
        }
        for &id in s.input_ids.iter().chain(std::iter::once(&s.emitted)) {
            if id as usize >= hp.n_vocab {
                bail!(
                    "{p}: step {}: token id {id} is outside the model's vocabulary of {}",
                    s.step,
                    hp.n_vocab
                );
            }
        }
        if let Some(bad) = s.outputs.iter().flatten().find(|&&r| r >= rows) {
            bail!("{p}: step {}: output row {bad} is past its {rows} rows", s.step);
        }
        if !s.ubatches.is_empty() && s.ubatches.iter().sum::<usize>() != rows {
            bail!(
                "{p}: step {}: graphs of {:?} rows do not add up to its {rows} rows",
                s.step,
                s.ubatches
            );
        }
        if by_step.insert(s.step, s).is_some() {
            bail!("{p}: step {} has two records", s.step);
        }
    }
    for ((step, name), x) in &t.taps {
        let width = match tap_width(model, name) {
            Ok(w) => w,
            Err(why) if why.starts_with("not a tap name") => continue,
            Err(why) => bail!("{p}: tap '{}': {why}", x.name),
        };
        let Some(s) = by_step.get(step) else {
            bail!("{p}: tap '{}' belongs to step {step}, which has no step record", x.name)
        };
        let (rows, w) = (x.shape[0], x.shape[1]);
        if w != width {
            bail!("{p}: tap '{}' is {w} wide; the model's {name} is {width} wide", x.name);
        }
        let outputs = s.output_rows().len();
        if rows != s.rows() && !(is_pruned(name, hp.n_layer) && rows == outputs) {
            bail!(
                "{p}: tap '{}' has {rows} rows; its step has {} rows ({outputs} of them outputs)",
                x.name,
                s.rows()
            );
        }
    }
    Ok(())
}

/// A trace file (tiercheck's own) or a plain dump, imported with `opts`.
pub fn load(model: &Model, path: &Path, opts: &ImportOptions) -> Result<Trace> {
    let bytes = std::fs::read(path).map_err(|e| anyhow!("{}: {e}", path.display()))?;
    if let Ok((_, meta)) = tensorfile::read_bytes(path, &bytes) {
        if meta.contains_key("tiercheck.format") {
            let t = crate::sequence::parse_trace(path, &bytes)?;
            check_trace(model, path, &t)?;
            return Ok(t);
        }
    }
    let d = dump::read(path)?;
    let t = import(model, path, &d, opts)?;
    if let Some(list) = t.meta.get("tiercheck.ignored_arrays") {
        eprintln!(
            "warning: {}: arrays that are neither taps nor token ids were ignored: {list} (--strict refuses them)",
            path.display()
        );
    }
    Ok(t)
}

/// Write a trace (taps, step records, metadata) as a tiercheck trace file, atomically.
pub fn write(path: &Path, t: &Trace) -> Result<()> {
    let tensors: Vec<Tensor> = t.taps.values().cloned().collect();
    let mut meta = t.meta.clone();
    meta.insert("tiercheck.format".into(), "trace-1".into());
    meta.insert("tiercheck.steps".into(), serde_json::to_string(&t.steps)?);
    tensorfile::write(path, &tensors, &meta)?;
    Ok(())
}
