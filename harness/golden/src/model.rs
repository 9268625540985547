//! Model goldens: per lane, the embedded model's greedy tokens on every prompt and the
//! sha256 of every tap over all steps, checked bitwise (`golden/model/lanes/<lane>.json`).
//!
//! The goldens are produced by [`compute`] (the decoder in prompt mode, f32 residual,
//! llama.cpp's default attention: F16 K/V cache and flash attention; the prompts file's
//! step count) and refreshed by `tiercheck bless` together with the
//! kernel goldens. The check compares tokens first (reporting the first differing
//! generated token) and then tap digests (reporting the taps that differ, earliest
//! layer first).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use tiercheck_gguf::atomic_write::write_atomic;
use tiercheck_lanes::Chosen;
use tiercheck_model::embedded::{self, Prompts, Recipe};
use tiercheck_model::lane_run::{self, PromptIds, RunOptions};
use tiercheck_model::{Attention, Batching, Mode, Model, Residual};

/// One prompt's golden.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PromptGolden {
    /// Prompt name.
    pub name: String,
    /// Prompt ids.
    pub ids: Vec<u32>,
    /// Greedy tokens.
    pub generated: Vec<u32>,
    /// sha256 of each tap's bytes over all steps, by tap name.
    pub digests: BTreeMap<String, String>,
}

/// One lane's model golden file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelGolden {
    /// Lane.
    pub lane: String,
    /// sha256 of the model file.
    pub model_sha256: String,
    /// Batching mode.
    pub mode: Mode,
    /// Greedy steps per prompt.
    pub steps: usize,
    /// Who produced it (lane impl, host, git revision).
    pub provenance: BTreeMap<String, String>,
    /// Per prompt.
    pub prompts: Vec<PromptGolden>,
}

/// The golden file of `lane` under the golden root `root`.
pub fn path(root: &Path, lane: &str) -> PathBuf {
    root.join("model").join("lanes").join(format!("{lane}.json"))
}

/// The embedded model and the repository's prompts.
pub fn inputs() -> anyhow::Result<(Model, Vec<PromptIds>, usize)> {
    let recipe = Recipe::load(&Recipe::default_path())?;
    let prompts = Prompts::load(&Prompts::default_path(), &recipe)?;
    let model = Model::open(&embedded::ensure_model(None)?)?;
    let list = prompts
        .prompts
        .iter()
        .map(|p| PromptIds { name: p.name.clone(), ids: p.tokens.clone() })
        .collect();
    Ok((model, list, prompts.steps as usize))
}

/// Run `chosen` on `prompts` the way goldens are defined.
pub fn compute(
    model: &Model,
    chosen: &Chosen,
    prompts: &[PromptIds],
    steps: usize,
) -> anyhow::Result<ModelGolden> {
    let opts = RunOptions {
        steps,
        mode: Mode::Prompt,
        batching: Batching::LLAMA_CLI,
        residual: Residual::F32,
        threads: 1,
        n_ctx: 512,
        attn: Attention::LLAMA_DEFAULT,
        traces: None,
        state: None,
    };
    let r = lane_run::run_lane(model, chosen, prompts, &opts, |_| {})?;
    let mut prov = r.provenance.clone();
    prov.remove("model_path");
    Ok(ModelGolden {
        lane: r.lane,
        model_sha256: model.sha256.clone(),
        mode: Mode::Prompt,
        steps,
        provenance: prov,
        prompts: r
            .prompts
            .into_iter()
            .map(|p| PromptGolden {
                name: p.name,
                ids: p.ids,
                generated: p.generated,
                digests: p.digests,
            })
            .collect(),
    })
}

/// Read a golden file; errors name the file.
pub fn load(path: &Path) -> anyhow::Result<ModelGolden> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("{}: cannot read: {e}", path.display()))?;
    serde_json::from_str(&text)
        .map_err(|e| anyhow::anyhow!("{}: not a model golden: {e}", path.display()))
}

/// Write a golden file atomically.
pub fn store(path: &Path, g: &ModelGolden) -> anyhow::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| anyhow::anyhow!("{}: cannot create: {e}", dir.display()))?;
    }
    let text = serde_json::to_string_pretty(g)? + "\n";
    write_atomic(path, text.as_bytes()).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// Layer index of a tap name (`l_out-3` -> 3; global taps sort first or last).
fn tap_order(name: &str) -> (i64, String) {
    match name.rsplit_once('-').and_then(|(_, l)| l.parse::<i64>().ok()) {
        Some(l) => (l, name.to_string()),
        None if name == "inp_embd" => (-1, name.to_string()),
        None => (i64::MAX, name.to_string()),
    }
}

/// Compare one prompt's result with its golden: `Ok` when bitwise equal, else what
/// differs first.
pub fn check_prompt(golden: &PromptGolden, got: &PromptGolden) -> Result<(), String> {
    if golden.ids != got.ids {
        return Err(format!("prompt '{}': ids differ from the golden's", golden.name));
    }
    let mut msgs = Vec::new();
    if golden.generated != got.generated {
        let i = golden.generated.iter().zip(&got.generated).take_while(|(a, b)| a == b).count();
        msgs.push(format!(
            "generated tokens differ from token {i}: golden {:?}, got {:?}",
            golden.generated.get(i),
            got.generated.get(i)
        ));
    }
    let mut bad: Vec<&String> = golden
        .digests
        .iter()
        .filter(|(k, v)| got.digests.get(*k) != Some(v))
        .map(|(k, _)| k)
        .collect();
    bad.sort_by_key(|k| tap_order(k));
    let extra: Vec<&String> =
        got.digests.keys().filter(|k| !golden.digests.contains_key(*k)).collect();
    if !bad.is_empty() {
        let shown: Vec<&str> = bad.iter().take(6).map(|s| s.as_str()).collect();
        msgs.push(format!(
            "{} of {} tap digests differ, earliest: {}",
            bad.len(),
            golden.digests.len(),
            shown.join(", ")
        ));
    }
    if !extra.is_empty() {
        msgs.push(format!("taps not in the golden: {extra:?}"));
    }
    if msgs.is_empty() {
        Ok(())
    } else {
        Err(format!("prompt '{}': {}", golden.name, msgs.join("; ")))
    }
}

/// Refresh `lane`'s model golden under `root`. Runs the native kernels where this host
/// has them and the portable twin always; refuses when the two disagree (the twin must
/// be bitwise equal), so a golden can only come from an implementation pair that
/// agrees. Returns a one-line summary.
pub fn bless_lane(root: &Path, lane: &'static tiercheck_core::Lane) -> anyhow::Result<String> {
    let (model, prompts, steps) = inputs()?;
    let portable = tiercheck_lanes::choose(lane, tiercheck_lanes::Impl::Portable)
        .map_err(anyhow::Error::msg)?;
    let mut g = compute(&model, &portable, &prompts, steps)?;
    let mut how = "portable".to_string();
    if let Ok(native) = tiercheck_lanes::choose(lane, tiercheck_lanes::Impl::Native) {
        let n = compute(&model, &native, &prompts, steps)?;
        for (a, b) in n.prompts.iter().zip(&g.prompts) {
            check_prompt(b, a).map_err(|e| {
                anyhow::anyhow!(
                    "lane {}: native and portable disagree, not blessing: {e}",
                    lane.name
                )
            })?;
        }
        g.provenance = n.provenance;
        how = "native = portable".into();
    }
    let p = path(root, lane.name);
    let old = load(&p).ok();
    let changed = match &old {
        None => "new".to_string(),
        Some(o) if o.prompts == g.prompts && o.model_sha256 == g.model_sha256 => "unchanged".into(),
        Some(o) => {
            let n = o.prompts.iter().zip(&g.prompts).filter(|(a, b)| a != b).count();
            format!("{n} prompt(s) changed")
        }
    };
    // An unchanged golden is left as it is (its provenance names the build that made
    // it): a refresh that changes nothing writes nothing.
    if changed != "unchanged" {
        store(&p, &g)?;
    }
    Ok(format!("model golden {}: {changed} ({how}), {}\n", lane.name, p.display()))
}
