//! Model goldens: per lane, the embedded model's greedy tokens on every prompt and the
//! sha256 of every tap over all steps, checked bitwise (`golden/model/lanes/<lane>.json`);
//! and the same for the [`path_runs`]: runs made the way users make them that reach the
//! paths the short prompts do not (several ubatches, the tiled flash attention and
//! matmuls of 64 rows and more, split-KV flash attention at two and four tier threads).
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
    /// Per path run ([`path_runs`]), by name.
    #[serde(default)]
    pub runs: Vec<PromptGolden>,
}

/// A run of the embedded model on a path the prompts do not reach.
#[derive(Clone, Debug, PartialEq)]
pub struct PathRun {
    /// Name (`ubatches-136`, ...).
    pub name: &'static str,
    /// What it reaches, in words.
    pub what: &'static str,
    /// Prompt ids (`(37 i + 11) mod 3072`).
    pub ids: Vec<u32>,
    /// Greedy steps after the prompt.
    pub steps: usize,
    /// Batching (llama-cli's, but for the ubatch size).
    pub batching: Batching,
    /// Attention: llama.cpp's default (F16 cache, flash attention) at a tier thread count.
    pub attn: Attention,
    /// The model: the embedded qwen3 model (`None`), or the repository's recipe of
    /// another architecture (`golden/model/<arch>.toml`).
    pub arch: Option<&'static str>,
}

/// The path runs, cheapest first: a prompt of 136 ids in ubatches of 128 (the first graph
/// takes the tiled flash attention, its rows from 64 on over two KV tiles of 64, and for
/// the x86 lanes the tiled matmuls; the second has 8 rows), last-row logits, 2 greedy
/// steps; and a prompt of 260 ids (one graph) then
/// 2 greedy steps at 260 and 261 cells, which llama.cpp pads to 512: split-KV flash
/// attention at two and at four tier threads (the i8mm builds' chunk plan of the prompt's
/// matmuls depends on the count too).
pub fn path_runs() -> Vec<PathRun> {
    let ids = |n: u32| (0..n).map(|i| (37 * i + 11) % 3072).collect::<Vec<u32>>();
    let cli = Batching::LLAMA_CLI;
    let fa = |t: usize| Attention { tier_threads: t, ..Attention::LLAMA_DEFAULT };
    let mut runs = vec![
        PathRun {
            name: "ubatches-136",
            what: "two ubatches (128 + 8 rows): tiled flash attention over two KV tiles and tiled matmuls, last-row logits",
            ids: ids(136),
            steps: 2,
            batching: Batching { n_ubatch: 128, ..cli },
            attn: fa(1),
            arch: None,
        },
        PathRun {
            name: "split-kv-t2",
            what:
                "260 prompt rows, then one-row steps over 512 padded cells: split-KV at 2 threads",
            ids: ids(260),
            steps: 2,
            batching: cli,
            attn: fa(2),
            arch: None,
        },
        PathRun {
            name: "split-kv-t4",
            what: "the same at 4 threads",
            ids: ids(260),
            steps: 2,
            batching: cli,
            attn: fa(4),
            arch: None,
        },
    ];
    // The other architectures' models: 24 prompt rows, 4 greedy steps.
    for (name, arch, what) in [
        ("arch-qwen2", "qwen2", "the qwen2 model (golden/model/qwen2.toml): Q/K/V biases"),
        ("arch-llama", "llama", "the llama model: normal-mode RoPE with frequency factors"),
        ("arch-qwen3moe", "qwen3moe", "the qwen3moe model: 4 of 8 experts per token"),
    ] {
        runs.push(PathRun {
            name,
            what,
            ids: ids(24),
            steps: 4,
            batching: cli,
            attn: fa(1),
            arch: Some(arch),
        });
    }
    runs
}

/// The model of a run naming another architecture: its recipe's model, built into the
/// cache (verified by its sha256) and opened; `None` for the embedded model.
fn arch_model(run: &PathRun) -> anyhow::Result<Option<Model>> {
    let Some(arch) = run.arch else { return Ok(None) };
    let recipe = match arch {
        "qwen2" => Recipe::qwen2_path(),
        "llama" => Recipe::llama_path(),
        "qwen3moe" => Recipe::qwen3moe_path(),
        other => anyhow::bail!("no recipe for architecture {other}"),
    };
    let built =
        embedded::build(&embedded::BuildOptions { recipe: Some(recipe), ..Default::default() })?;
    Ok(Some(Model::open(&built.path)?))
}

/// Why `chosen` does not run `run`'s model (a GPU lane on a model with RoPE frequency
/// factors or experts), or `None` where it does.
pub fn run_refused(
    embedded: &Model,
    chosen: &Chosen,
    run: &PathRun,
) -> anyhow::Result<Option<String>> {
    let own = arch_model(run)?;
    let model = own.as_ref().unwrap_or(embedded);
    Ok(tiercheck_model::unsupported(model, chosen.elem.flavour()))
}

/// Run `chosen` on a path run (context 512, f32 residual, prompt mode) on its model
/// (`model`, the embedded model, unless the run names another architecture's).
pub fn compute_run(model: &Model, chosen: &Chosen, run: &PathRun) -> anyhow::Result<PromptGolden> {
    let own = arch_model(run)?;
    let model = own.as_ref().unwrap_or(model);
    let opts = RunOptions {
        steps: run.steps,
        mode: Mode::Prompt,
        batching: run.batching,
        residual: Residual::F32,
        threads: 1,
        n_ctx: 512,
        attn: run.attn,
        traces: None,
        state: None,
    };
    let list = [PromptIds { name: run.name.into(), ids: run.ids.clone() }];
    let r = lane_run::run_lane(model, chosen, &list, &opts, |_| {})?;
    let p = r.prompts.into_iter().next().expect("one prompt");
    Ok(PromptGolden { name: p.name, ids: p.ids, generated: p.generated, digests: p.digests })
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
        runs: Vec::new(),
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
    // One value per line, not indented (the digests of 15 lanes stay within golden/'s
    // budget; a refresh's diff is still one line per tap that moved).
    let mut buf = Vec::new();
    let fmt = serde_json::ser::PrettyFormatter::with_indent(b"");
    serde::Serialize::serialize(g, &mut serde_json::Serializer::with_formatter(&mut buf, fmt))?;
    let text = String::from_utf8(buf)? + "\n";
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
    let runs = |c: &Chosen| -> anyhow::Result<Vec<PromptGolden>> {
        let mut out = Vec::new();
        for run in path_runs() {
            if run_refused(&model, c, &run)?.is_none() {
                out.push(compute_run(&model, c, &run)?);
            }
        }
        Ok(out)
    };
    let mut g = compute(&model, &portable, &prompts, steps)?;
    g.runs = runs(&portable)?;
    let mut how = "portable".to_string();
    if let Ok(native) = tiercheck_lanes::choose(lane, tiercheck_lanes::Impl::Native) {
        let mut n = compute(&model, &native, &prompts, steps)?;
        n.runs = runs(&native)?;
        for (a, b) in n.prompts.iter().zip(&g.prompts).chain(n.runs.iter().zip(&g.runs)) {
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
        Some(o)
            if o.prompts == g.prompts && o.runs == g.runs && o.model_sha256 == g.model_sha256 =>
        {
            "unchanged".into()
        }
        Some(o) => {
            let n = o.prompts.iter().zip(&g.prompts).filter(|(a, b)| a != b).count();
            let r = g.runs.iter().filter(|x| !o.runs.contains(x)).count();
            format!("{n} prompt(s) and {r} path run(s) changed")
        }
    };
    // An unchanged golden is left as it is (its provenance names the build that made
    // it): a refresh that changes nothing writes nothing.
    if changed != "unchanged" {
        store(&p, &g)?;
    }
    Ok(format!("model golden {}: {changed} ({how}), {}\n", lane.name, p.display()))
}
