//! Arguments several subcommands share: lane names, checked by clap and listed in
//! `--help`, and the model, prompt and run options of `run`, `matrix`, `delta` and
//! `attribute`.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Result};
use clap::builder::{PossibleValue, TypedValueParser};
use clap::error::ErrorKind;
use clap::Args;

use tiercheck_core::Lane;
use tiercheck_model::embedded::{self, Prompts, Recipe};
use tiercheck_model::lane_run::{PromptIds, RunOptions};
use tiercheck_model::state::KvState;
use tiercheck_model::{Attention, Batching, FlashAttn, KvType, Logits, Mode, Model, Residual};

use crate::replay::{self, Flag};

/// The context length where neither `--ctx` nor a trace gives one.
pub const DEFAULT_CTX: usize = 512;

/// The lane named `name`, or clap's error naming the known lanes.
fn lane(cmd: &clap::Command, name: &str) -> Result<&'static Lane, clap::Error> {
    tiercheck_lanes::find(name)
        .map_err(|e| clap::Error::raw(ErrorKind::InvalidValue, format!("{e}\n")).with_cmd(cmd))
}

/// The value as text, or clap's error.
fn text<'v>(cmd: &clap::Command, value: &'v OsStr) -> Result<&'v str, clap::Error> {
    value.to_str().ok_or_else(|| clap::Error::new(ErrorKind::InvalidUtf8).with_cmd(cmd))
}

/// Every lane name, for `--help`.
fn lane_names() -> Box<dyn Iterator<Item = PossibleValue>> {
    Box::new(tiercheck_lanes::all().iter().map(|l| PossibleValue::new(l.name)))
}

/// One lane name, parsed into its [`Lane`].
#[derive(Clone, Copy, Debug)]
pub struct LaneParser;

impl TypedValueParser for LaneParser {
    type Value = &'static Lane;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        _arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<Self::Value, clap::Error> {
        lane(cmd, text(cmd, value)?)
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(lane_names())
    }
}

/// Comma-separated lane names, in the order given (blanks around names and empty items
/// are ignored).
#[derive(Clone, Debug)]
pub struct LaneList(pub Vec<&'static Lane>);

/// Parses a [`LaneList`].
#[derive(Clone, Copy, Debug)]
pub struct LaneListParser;

impl TypedValueParser for LaneListParser {
    type Value = LaneList;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        _arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<Self::Value, clap::Error> {
        let list = text(cmd, value)?;
        let mut lanes = Vec::new();
        for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            lanes.push(lane(cmd, name)?);
        }
        Ok(LaneList(lanes))
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(lane_names())
    }
}

/// The model, prompt and run options `run`, `matrix`, `delta` and `attribute` share.
#[derive(Args, Clone, Debug)]
pub struct Setup {
    /// GGUF model (qwen3). Default: the embedded model, built into the cache on first use.
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Prompts file (TOML: `steps`, `[[prompt]] name, tokens`). Default:
    /// golden/prompts/prompts.toml.
    #[arg(long)]
    pub prompts: Option<PathBuf>,
    /// Only the prompt with this name (default: every prompt for `run` and `matrix`, the
    /// first one for `delta` and `attribute`). `delta` ignores it when a side is a trace
    /// file (the trace brings its prompt).
    #[arg(long)]
    pub prompt: Option<String>,
    /// Greedy tokens per prompt (default: the prompts file's `steps`).
    #[arg(long)]
    pub steps: Option<usize>,
    /// `prompt` (the default): the prompt as one batch (gemm paths), then token by
    /// token; `decode`: token by token throughout (gemv paths). For a plain dump given
    /// to `delta` (no tiercheck metadata), how the dump ran, where the file does not say.
    #[arg(long, value_enum)]
    pub mode: Option<Mode>,
    /// Residual stream type.
    #[arg(long, value_enum, default_value_t = Residual::F32)]
    pub residual: Residual,
    /// Context length (a multiple of 256; default 512). A trace brings its own: for
    /// `delta` and `attribute` the flag is then only a check.
    #[arg(long = "ctx")]
    pub n_ctx: Option<usize>,
    /// K/V cache type (llama.cpp's `--cache-type-k/-v`; default f16, llama.cpp's).
    #[arg(long, value_enum)]
    pub kv: Option<KvType>,
    /// Flash attention (llama.cpp's `--flash-attn`; default on: llama.cpp's auto is on for
    /// the CPU backend).
    #[arg(long, value_enum)]
    pub fa: Option<FlashAttn>,
    /// Threads the tier ran with (llama.cpp's `-t`; default 1). Only ggml's split-KV
    /// flash attention (one token attending 512 cells or more) depends on it;
    /// tiercheck's own `--threads` never changes a result.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub tier_threads: Option<u32>,
    /// The tier's ggml ran NUMA-aware (llama.cpp's `--numa` on a host with several NUMA
    /// nodes): the i8mm builds' matmul chunk plan then always chunks by thread.
    #[arg(long)]
    pub tier_numa: bool,
    /// Tokens per `llama_decode` of the prompt (llama-cli's `-b`; default 2048, capped at
    /// `--ctx`, as llama.cpp caps it).
    #[arg(long = "batch", value_parser = clap::value_parser!(u32).range(1..))]
    pub n_batch: Option<u32>,
    /// Tokens per graph (llama-cli's `-ub`; default 512, capped at the batch size): a
    /// longer prompt is evaluated as several graphs, each choosing its kernels by its own
    /// row count.
    #[arg(long = "ubatch", value_parser = clap::value_parser!(u32).range(1..))]
    pub n_ubatch: Option<u32>,
    /// Which prompt rows get logits: `last` (the default; llama-cli and llama-server: the
    /// last layer after its attention and the head run on that row alone) or `all` (the
    /// perplexity tool).
    #[arg(long, value_enum)]
    pub logits: Option<Logits>,
    /// Start from the K/V cache llama.cpp saved in this file (a sequence state, as
    /// `llama_state_seq_save_file` and llama-server's slot save write it, or a session,
    /// as `llama_state_save_file` and llama-completion's `--prompt-cache` write it): the ids
    /// continue after its cells. Its cache type and flash attention setting must be `--kv`
    /// and `--fa`.
    #[arg(long, value_name = "FILE")]
    pub state: Option<PathBuf>,
}

/// `--threads`: the decoder's threads per matmul.
#[derive(Args, Clone, Debug)]
pub struct Threads {
    /// Threads per matmul (default: the available cores, shared among `matrix --jobs`;
    /// results do not depend on it).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub threads: Option<u32>,
}

impl Threads {
    /// The thread count: `--threads`, else the available cores over `jobs` (at least 1).
    pub fn get(&self, jobs: usize) -> usize {
        match self.threads {
            Some(n) => n as usize,
            None => {
                let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
                (cores / jobs.max(1)).max(1)
            }
        }
    }
}

/// The options `run` and `matrix` add: threads, and how the result is shown.
#[derive(Args, Clone, Debug)]
pub struct Exec {
    #[command(flatten)]
    pub threads: Threads,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// No progress display.
    #[arg(long)]
    pub quiet: bool,
}

impl Setup {
    /// The batching mode of lane runs (`--mode`, default `prompt`).
    pub fn mode(&self) -> Mode {
        self.mode.unwrap_or(Mode::Prompt)
    }

    /// The model path (building the embedded one when none is given).
    pub fn model_path(&self) -> Result<PathBuf> {
        match &self.model {
            Some(p) => Ok(p.clone()),
            None => Ok(embedded::ensure_model(None)?),
        }
    }

    /// The prompts file, checked against `model` (vocabulary, context length).
    fn prompts_file(&self, model: &Model) -> Result<(PathBuf, Prompts)> {
        let path = self.prompts.clone().unwrap_or_else(Prompts::default_path);
        let mut limits = Recipe::load(&Recipe::default_path())?;
        limits.n_vocab = model.hp.n_vocab as u32;
        limits.context_length = self.n_ctx() as u32;
        let prompts = Prompts::load(&path, &limits)?;
        Ok((path, prompts))
    }

    /// Every prompt (or only `--prompt`), and the step count.
    pub fn prompts(&self, model: &Model) -> Result<(PathBuf, Vec<PromptIds>, usize)> {
        let (path, prompts) = self.prompts_file(model)?;
        let mut list: Vec<PromptIds> = prompts
            .prompts
            .iter()
            .map(|p| PromptIds { name: p.name.clone(), ids: p.tokens.clone() })
            .collect();
        if let Some(name) = &self.prompt {
            list.retain(|p| &p.name == name);
            if list.is_empty() {
                bail!("{}: no prompt named '{name}'", path.display());
            }
        }
        Ok((path, list, self.steps.unwrap_or(prompts.steps as usize)))
    }

    /// One prompt's ids (`--prompt`, else the first) and the greedy step count.
    pub fn prompt(&self, model: &Model) -> Result<(Vec<u32>, usize)> {
        let (path, prompts) = self.prompts_file(model)?;
        let p = match &self.prompt {
            None => prompts
                .prompts
                .first()
                .ok_or_else(|| anyhow::anyhow!("{}: no prompts", path.display()))?,
            Some(n) => prompts
                .prompts
                .iter()
                .find(|p| &p.name == n)
                .ok_or_else(|| anyhow::anyhow!("{}: no prompt named '{n}'", path.display()))?,
        };
        let steps = self.steps.unwrap_or(prompts.steps as usize);
        if steps == 0 {
            bail!("--steps must be at least 1");
        }
        Ok((p.tokens.clone(), steps))
    }

    /// The decoder options of a run of `steps` greedy tokens per prompt.
    /// `jobs`: lanes run at the same time (they share the default thread count).
    pub fn run_options(
        &self,
        exec: &Exec,
        steps: usize,
        traces: Option<PathBuf>,
        jobs: usize,
    ) -> Result<RunOptions> {
        Ok(RunOptions {
            steps,
            mode: self.mode(),
            batching: self.batching(),
            residual: self.residual,
            threads: exec.threads.get(jobs),
            n_ctx: self.n_ctx(),
            attn: self.attention(),
            traces,
            state: self.state()?,
        })
    }

    /// The saved K/V cache of `--state`, read and checked on its own (against the model
    /// and the run when a decoder takes it).
    pub fn state(&self) -> Result<Option<Arc<KvState>>> {
        match &self.state {
            None => Ok(None),
            Some(p) => Ok(Some(Arc::new(KvState::read(p)?))),
        }
    }

    /// The context length (`--ctx`, default 512).
    pub fn n_ctx(&self) -> usize {
        self.n_ctx.unwrap_or(DEFAULT_CTX)
    }

    /// The batching options (llama-cli's where not given).
    pub fn batching(&self) -> Batching {
        let d = Batching::LLAMA_CLI;
        Batching {
            n_batch: self.n_batch.map_or(d.n_batch, |n| n as usize),
            n_ubatch: self.n_ubatch.map_or(d.n_ubatch, |n| n as usize),
            logits: self.logits.unwrap_or(d.logits),
        }
    }

    /// The attention options (llama.cpp's defaults on the CPU where not given).
    pub fn attention(&self) -> Attention {
        Attention {
            kv: self.kv.unwrap_or(KvType::F16),
            fa: self.fa.unwrap_or(FlashAttn::On),
            tier_threads: self.tier_threads.map_or(1, |n| n as usize),
            tier_numa: self.tier_numa,
        }
    }

    /// The flags given, as a trace records their settings (batch sizes capped by the
    /// context as llama.cpp caps them).
    fn given(&self, n_ctx: usize) -> Vec<Flag> {
        let eff = self.batching().effective(n_ctx);
        let mut f = Vec::new();
        let mut add = |flag, keys, value: Option<String>| {
            if let Some(value) = value {
                f.push(Flag { flag, keys, value });
            }
        };
        add("--ctx", &["n_ctx"][..], self.n_ctx.map(|n| n.to_string()));
        add("--kv", &["kv"], self.kv.map(|k| k.name().to_string()));
        add("--fa", &["fa"], self.fa.map(|x| x.name().to_string()));
        add(
            "--tier-threads",
            &["tier_threads", "threads"],
            self.tier_threads.map(|n| n.to_string()),
        );
        add("--batch", &["n_batch"], self.n_batch.map(|_| eff.n_batch.to_string()));
        add("--ubatch", &["n_ubatch"], self.n_ubatch.map(|_| eff.n_ubatch.to_string()));
        add("--logits", &["logits"], self.logits.map(|l| l.name().to_string()));
        add("--mode", &["mode"], self.mode.map(|m| m.name().to_string()));
        f
    }

    /// For a command reading trace files among `args` (the others are lane names): the
    /// model they ran and this setup with the context they ran in where `--ctx` is not
    /// given ([`crate::replay`]); a flag contradicting a trace is an error.
    pub fn for_traces<'a>(
        &self,
        args: impl IntoIterator<Item = &'a Path>,
    ) -> Result<(Model, Setup)> {
        let traces = replay::recorded(args);
        let mut setup = self.clone();
        if setup.n_ctx.is_none() {
            setup.n_ctx = replay::recorded_ctx(&traces)?;
        }
        replay::check_flags(&traces, &self.given(setup.n_ctx()))?;
        let model = replay::model(&traces, self.model.as_deref())?;
        Ok((model, setup))
    }
}
