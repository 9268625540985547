//! The `tiercheck` command line.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

mod cmd;
mod matrix;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};

use tiercheck_core::{blocks, WeightMatrix};
use tiercheck_gguf::tensorfile::{self, Tensor};
use tiercheck_gguf::{GgufFile, MetaValue};
use tiercheck_golden::{self as golden, GoldenDir};
use tiercheck_lanes::provenance::VERSION_LONG;
use tiercheck_lanes::{self as lanes, host, provenance, Impl};
use tiercheck_model::embedded;
use tiercheck_model::model_quant::{quantize_file, Scheme};

/// Cross-tier numerics checks for quantized inference kernels.
///
/// tiercheck reproduces each inference tier's exact arithmetic (x86-64, aarch64 with
/// and without repacking, GPU) as named lanes, and compares them bitwise and per layer.
#[derive(Parser)]
#[command(name = "tiercheck", version = VERSION_LONG, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The main job: run the decoder on every lane and print how each agrees with `ref`.
    ///
    /// Every lane runs natively where this host can, under qemu-aarch64 for aarch64 lanes
    /// when qemu and the cross-built binary are there, else as its portable twin (the
    /// table says which). One row per lane: per prompt, the greedy tokens agreeing with
    /// `ref`, the first divergent step and ref's top-1/top-2 gap there; wall time.
    Matrix(cmd::matrix::MatrixArgs),
    /// Run the decoder on one lane and write per-step, per-layer traces.
    Run(cmd::matrix::RunArgs),
    /// Where and why two lanes (or traces) diverge: free-running and teacher-forced
    /// comparisons, layer-local profile against the noise floor, near-ties, activation
    /// flips, and a per-layer plot.
    Delta(cmd::delta::DeltaArgs),
    /// Which recipe components (activation quantizer, kernels, embedding dequantizer,
    /// elementwise loops) account for the divergence of lane A from lane B: A is moved
    /// toward B one component at a time (portable twins, teacher-forced on B's tokens).
    Attribute(cmd::delta::AttributeArgs),
    /// List the known lanes, which ones this host runs natively, and its CPU features.
    Lanes,
    /// Inspect, dequantize and quantize GGUF files.
    #[command(subcommand)]
    Gguf(GgufCommand),
    /// Shared inputs and per-lane expected outputs under golden/.
    #[command(subcommand)]
    Golden(GoldenCommand),
    /// Refresh ("bless") the goldens of one lane or all lanes.
    ///
    /// Refused when CI is set. Each lane's outputs come from its own kernels (native where
    /// this host runs them, else the portable twin) and must pass the tolerance check
    /// against ref. Without --filter, the lane's model golden (the embedded model's tokens
    /// and tap digests, golden/model/lanes/) is refreshed too, and only when the native
    /// kernels and the portable twin agree bitwise. Writes are atomic. Prints what changed
    /// per lane.
    Bless {
        /// Only this lane (default: every lane).
        #[arg(long)]
        lane: Option<String>,
        /// Only cases whose name contains this text.
        #[arg(long)]
        filter: Option<String>,
    },
    /// Show a target table (targets/<triple>.toml): its lanes and CPU models.
    Targets {
        /// Target triple (default: the one this binary was built for).
        #[arg(long)]
        triple: Option<String>,
        /// One line per model, `name|QEMU_CPU|required lanes` (for scripts).
        #[arg(long)]
        shell: bool,
    },
    /// Replay one matmul on a lane: activations from safetensors, weights from a GGUF.
    ///
    /// The lane quantizes the activations with its own rule and multiplies them by the
    /// quantized weight with its own kernel (gemv for one row, gemm for several, as the
    /// lane does). The output is one f32 tensor [m, n].
    Matmul {
        /// Lane name (see `tiercheck lanes`).
        #[arg(long)]
        lane: String,
        /// Which implementation to run.
        #[arg(long = "impl", value_enum, default_value_t = Impl::Auto)]
        imp: Impl,
        /// GGUF file holding the weight.
        #[arg(long)]
        gguf: PathBuf,
        /// Weight tensor name (2-D: n rows of k values).
        #[arg(long)]
        tensor: String,
        /// safetensors file with one f32 tensor [m, k] (or [k]).
        #[arg(long)]
        input: PathBuf,
        /// Output safetensors file, one f32 tensor "output" [m, n].
        #[arg(long)]
        out: PathBuf,
        /// Threads (work split by output columns only: never changes a bit).
        #[arg(long, default_value_t = 1)]
        threads: usize,
    },
}

#[derive(Subcommand)]
enum GoldenCommand {
    /// Regenerate the shared kernel inputs (golden/inputs) from their fixed seeds.
    /// The result is byte-identical to what is committed unless the generator changed.
    GenInputs,
    /// Check every golden file against its manifest and report any corruption.
    Verify,
    /// Build the embedded model (golden/model/recipe.toml) into the cache and print its path.
    ///
    /// The file goes to <cache>/model/<sha256>.gguf and must have the sha256 the recipe
    /// records; a verified cached file is reused. Writes are atomic.
    Model {
        /// Cache folder (default: $TIERCHECK_CACHE, else ~/.cache/tiercheck).
        #[arg(long)]
        cache: Option<PathBuf>,
        /// Recipe file (default: golden/model/recipe.toml).
        #[arg(long)]
        recipe: Option<PathBuf>,
        /// Regenerate even when a verified file is cached.
        #[arg(long)]
        force: bool,
        /// Record the generated file's sha256 in the recipe (refused when CI is set).
        #[arg(long)]
        bless: bool,
    },
}

#[derive(Subcommand)]
enum GgufCommand {
    /// Print metadata and a tensor table (name, type, shape, bytes).
    Info {
        /// The GGUF file.
        file: PathBuf,
        /// Print arrays in full instead of their first few elements.
        #[arg(long)]
        full: bool,
    },
    /// Dequantize one tensor to f32 and write it as safetensors.
    Dequant {
        /// The GGUF file.
        file: PathBuf,
        /// Tensor name.
        tensor: String,
        /// Output safetensors file.
        #[arg(long)]
        out: PathBuf,
    },
    /// Quantize a model's f32/f16/bf16 weights with the reference quantizers.
    Quantize {
        /// Input GGUF.
        input: PathBuf,
        /// Output GGUF (written atomically).
        output: PathBuf,
        /// q4_0, q8_0, q4_k, q6_k (uniform) or q4_k_m (llama.cpp's mix).
        #[arg(long = "type")]
        scheme: String,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Matrix(a) => cmd::matrix::cmd_matrix(a),
        Command::Run(a) => cmd::matrix::cmd_run(a),
        Command::Delta(a) => cmd::delta::cmd_delta(a),
        Command::Attribute(a) => cmd::delta::cmd_attribute(a),
        Command::Lanes => cmd_lanes(),
        Command::Gguf(GgufCommand::Info { file, full }) => cmd_info(&file, full),
        Command::Gguf(GgufCommand::Dequant { file, tensor, out }) => {
            cmd_dequant(&file, &tensor, &out)
        }
        Command::Gguf(GgufCommand::Quantize { input, output, scheme }) => {
            cmd_quantize(&input, &output, &scheme)
        }
        Command::Golden(GoldenCommand::GenInputs) => cmd_gen_inputs(),
        Command::Golden(GoldenCommand::Verify) => cmd_verify(),
        Command::Golden(GoldenCommand::Model { cache, recipe, force, bless }) => {
            cmd_model(embedded::BuildOptions { recipe, cache, force, bless })
        }
        Command::Bless { lane, filter } => cmd_bless(lane.as_deref(), filter.as_deref()),
        Command::Targets { triple, shell } => cmd_targets(triple.as_deref(), shell),
        Command::Matmul { lane, imp, gguf, tensor, input, out, threads } => {
            cmd_matmul(&lane, imp, &gguf, &tensor, &input, &out, threads)
        }
    }
}

fn cmd_gen_inputs() -> Result<()> {
    let dir = GoldenDir::from_env();
    let inputs = golden::cases::generate();
    let bytes: usize = inputs.iter().map(|(_, i)| golden::store::input_bytes(i).len()).sum();
    dir.write_inputs(&inputs)?;
    eprintln!(
        "wrote {} input tensors ({:.1} MB) to {}",
        inputs.len(),
        bytes as f64 / 1e6,
        dir.root().join("inputs").display()
    );
    Ok(())
}

fn cmd_verify() -> Result<()> {
    let dir = GoldenDir::from_env();
    let report = golden::verify(&dir);
    print!("{report}");
    if !report.problems.is_empty() {
        bail!("{} problem(s) in {}", report.problems.len(), dir.root().display());
    }
    Ok(())
}

fn cmd_model(opts: embedded::BuildOptions) -> Result<()> {
    let bless = opts.bless;
    let built = embedded::build(&opts)?;
    if built.generated {
        eprintln!(
            "generated {} ({:.1} MB) in {:.1} s",
            built.path.display(),
            built.bytes as f64 / 1e6,
            built.seconds
        );
    } else {
        eprintln!("reused {} (sha256 verified)", built.path.display());
    }
    match &built.blessed_from {
        Some(Some(old)) => eprintln!("recipe sha256: {old} -> {}", built.sha256),
        Some(None) => eprintln!("recipe sha256 recorded: {}", built.sha256),
        None if bless => eprintln!("recipe sha256 already up to date"),
        None => {}
    }
    println!("{}", built.path.display());
    Ok(())
}

fn cmd_bless(lane: Option<&str>, filter: Option<&str>) -> Result<()> {
    if !golden::bless::allowed() {
        bail!("refusing to refresh goldens under CI (the CI environment variable is set)");
    }
    let dir = GoldenDir::from_env();
    let inputs = dir.load_inputs()?;
    let selected: Vec<&'static tiercheck_core::Lane> = match lane {
        Some(name) => vec![lanes::find(name).map_err(anyhow::Error::msg)?],
        None => lanes::all().to_vec(),
    };
    for lane in selected {
        let summary = golden::bless::bless_lane(&dir, lane, filter, &inputs)?;
        print!("{summary}");
        if filter.is_none() {
            print!("{}", golden::model::bless_lane(dir.root(), lane)?);
        }
    }
    Ok(())
}

fn cmd_targets(triple: Option<&str>, shell: bool) -> Result<()> {
    let triple = triple.unwrap_or(lanes::targets::TRIPLE);
    let t = lanes::targets::load(&lanes::targets::targets_dir(), triple)?;
    if shell {
        for m in &t.models {
            println!("{}|{}|{}", m.name, m.qemu_cpu, m.require.join(","));
        }
        return Ok(());
    }
    println!("target {}", t.triple);
    if let Some(r) = &t.runner {
        println!("runner: {r}");
    }
    println!("lanes: {}", t.lanes.join(", "));
    for m in &t.models {
        let cpu = if m.qemu_cpu.is_empty() { "host" } else { m.qemu_cpu.as_str() };
        println!(
            "  model {:<10} QEMU_CPU={:<16} requires: {}",
            m.name,
            cpu,
            if m.require.is_empty() { "-".to_string() } else { m.require.join(", ") }
        );
        if let Some(n) = &m.note {
            println!("  {:<16} {n}", "");
        }
    }
    Ok(())
}

fn cmd_lanes() -> Result<()> {
    println!("host: {} ({})", host::arch(), std::env::consts::OS);
    let feats = host::cpu_features();
    let line: Vec<String> =
        feats.iter().map(|(n, on)| format!("{}{n}", if *on { "+" } else { "-" })).collect();
    println!("cpu features: {}", line.join(" "));
    if let Some(q) = host::qemu_cpu() {
        println!("qemu cpu model: {q}");
    }
    println!();
    println!("lanes:");
    for lane in lanes::all() {
        let native = match lanes::native(lane) {
            Ok(_) => "native here: yes".to_string(),
            Err(why) => format!("native here: no ({why})"),
        };
        println!("  {:<22} {}", lane.name, lane.summary);
        println!("  {:<22} {native}; portable twin: yes", "");
        let recipe: Vec<String> =
            lane.recipe.components().iter().map(|(k, v)| format!("{k}={v}")).collect();
        println!("  {:<22} {}", "", recipe.join(" "));
    }
    Ok(())
}

fn cmd_info(path: &Path, full: bool) -> Result<()> {
    let f = GgufFile::open(path)?;
    println!("file: {}", path.display());
    println!(
        "version: {}  alignment: {}  data offset: {}",
        f.version(),
        f.alignment(),
        f.data_offset()
    );
    println!("metadata ({} keys):", f.metadata().len());
    for (k, v) in f.metadata() {
        println!("  {k} = {}", show(v, if full { usize::MAX } else { 8 }));
    }
    println!("tensors ({}):", f.tensors().len());
    println!("  {:<40} {:<8} {:<24} {:>14}", "name", "type", "shape (ne0 first)", "bytes");
    let mut total = 0u64;
    for t in f.tensors() {
        let shape: Vec<String> = t.dims.iter().map(|d| d.to_string()).collect();
        println!(
            "  {:<40} {:<8} {:<24} {:>14}",
            t.name,
            t.ty.name(),
            format!("[{}]", shape.join(", ")),
            t.n_bytes
        );
        total += t.n_bytes;
    }
    println!("  total tensor bytes: {total}");
    Ok(())
}

fn cmd_dequant(path: &Path, name: &str, out: &Path) -> Result<()> {
    let f = GgufFile::open(path)?;
    let t =
        f.tensor(name).with_context(|| format!("{}: no tensor named '{name}'", path.display()))?;
    let n = usize::try_from(t.n_elements()).context("tensor too large for this machine")?;
    let mut values = vec![0.0f32; n];
    blocks::dequantize(t.ty, f.tensor_data(t), &mut values)
        .with_context(|| format!("{}: tensor '{name}'", path.display()))?;
    // safetensors shapes are outermost first: reverse ggml's ne order.
    let shape: Vec<usize> = t.dims.iter().rev().map(|&d| d as usize).collect();
    let mut meta = provenance::base();
    meta.insert("source".into(), path.display().to_string());
    meta.insert("source_tensor".into(), name.to_string());
    meta.insert("source_type".into(), t.ty.name().to_string());
    tensorfile::write(out, &[Tensor { name: name.to_string(), shape, data: values }], &meta)?;
    eprintln!("wrote {} ({} values of {name}, from {})", out.display(), n, t.ty.name());
    Ok(())
}

fn cmd_quantize(input: &Path, output: &Path, scheme: &str) -> Result<()> {
    let Some(scheme) = Scheme::parse(scheme) else {
        bail!("unknown --type '{scheme}'; expected q4_0, q8_0, q4_k, q6_k or q4_k_m");
    };
    if input == output {
        bail!("output must differ from input ({})", input.display());
    }
    let f = GgufFile::open(input)?;
    let plans = quantize_file(&f, output, scheme)?;
    for p in &plans {
        let change =
            if p.from == p.to { "kept".to_string() } else { format!("{} -> {}", p.from, p.to) };
        println!("  {:<40} {:<16} {}", p.name, change, p.reason);
    }
    let n = plans.iter().filter(|p| p.from != p.to).count();
    eprintln!("wrote {} ({n} tensors quantized, {} kept)", output.display(), plans.len() - n);
    Ok(())
}

fn cmd_matmul(
    lane: &str,
    imp: Impl,
    gguf: &Path,
    tensor: &str,
    input: &Path,
    out: &Path,
    threads: usize,
) -> Result<()> {
    let lane = lanes::find(lane).map_err(anyhow::Error::msg)?;
    let chosen = lanes::choose(lane, imp).map_err(anyhow::Error::msg)?;
    let f = GgufFile::open(gguf)?;
    let t = f
        .tensor(tensor)
        .with_context(|| format!("{}: no tensor named '{tensor}'", gguf.display()))?;
    if t.dims.len() != 2 {
        bail!(
            "{}: tensor '{tensor}' has {} dimensions; matmul needs a 2-D weight",
            gguf.display(),
            t.dims.len()
        );
    }
    if !tiercheck_core::lane::WEIGHT_TYPES.contains(&t.ty) {
        bail!(
            "{}: tensor '{tensor}' is {}; lanes multiply q4_0, q8_0, q4_K and q6_K weights",
            gguf.display(),
            t.ty.name()
        );
    }
    let (k, n) = (t.dims[0] as usize, t.dims[1] as usize);
    let w = WeightMatrix::new(t.ty, n, k, f.tensor_data(t))
        .with_context(|| format!("{}: tensor '{tensor}'", gguf.display()))?;
    let (x, m, xk) = tensorfile::read_matrix(input)?;
    if xk != k {
        bail!(
            "{}: input has {xk} columns but weight '{tensor}' has rows of {k} values",
            input.display()
        );
    }
    if m == 0 {
        bail!("{}: input has no rows", input.display());
    }
    eprintln!(
        "lane {} ({}): {} x [{m}, {k}] -> [{m}, {n}] ({})",
        lane.name,
        chosen.impl_name(),
        t.ty.name(),
        if m == 1 { "gemv" } else { "gemm" }
    );
    let prepared = chosen.kernels.prepare(w, tiercheck_core::repack::Target::Cpu)?;
    let layout = match &prepared {
        tiercheck_core::repack::Prepared::Plain(_) => "plain".to_string(),
        tiercheck_core::repack::Prepared::Repacked(r) => r.layout().name().to_string(),
    };
    let y = tiercheck_core::lane::parallel::matmul_parallel(
        chosen.kernels,
        &prepared,
        &x.data,
        m,
        threads,
    )?;
    let mut meta = provenance::base();
    meta.insert("lane".into(), lane.name.to_string());
    meta.insert("impl".into(), chosen.impl_name().to_string());
    meta.insert("weight_file".into(), gguf.display().to_string());
    meta.insert("weight_tensor".into(), tensor.to_string());
    meta.insert("weight_type".into(), t.ty.name().to_string());
    meta.insert("input_file".into(), input.display().to_string());
    meta.insert("path".into(), if m == 1 { "gemv" } else { "gemm" }.to_string());
    meta.insert("weight_layout".into(), layout);
    meta.insert("threads".into(), threads.to_string());
    tensorfile::write(out, &[Tensor { name: "output".into(), shape: vec![m, n], data: y }], &meta)?;
    eprintln!("wrote {}", out.display());
    Ok(())
}

/// A metadata value for people: strings quoted, arrays as `[a, b, ... (N items)]`.
fn show(v: &MetaValue, max_items: usize) -> String {
    match v {
        MetaValue::String(s) => format!("{s:?}"),
        MetaValue::Array(a) => {
            let mut parts: Vec<String> =
                a.iter().take(max_items).map(|x| show(&x, max_items)).collect();
            if a.len() > max_items {
                parts.push(format!("... ({} items of {})", a.len(), a.elem_type().name()));
            }
            format!("[{}]", parts.join(", "))
        }
        MetaValue::U8(x) => x.to_string(),
        MetaValue::I8(x) => x.to_string(),
        MetaValue::U16(x) => x.to_string(),
        MetaValue::I16(x) => x.to_string(),
        MetaValue::U32(x) => x.to_string(),
        MetaValue::I32(x) => x.to_string(),
        MetaValue::U64(x) => x.to_string(),
        MetaValue::I64(x) => x.to_string(),
        MetaValue::F32(x) => x.to_string(),
        MetaValue::F64(x) => x.to_string(),
        MetaValue::Bool(x) => x.to_string(),
    }
}
