//! The `tiercheck` command line: the arguments, parsed here, and one module per
//! subcommand under [`cmd`].

use std::process::ExitCode;

mod args;
mod cmd;
mod lane_plan;
mod progress;
mod replay;

use anyhow::Result;
use clap::{Parser, Subcommand};

use tiercheck_lanes::provenance::VERSION_LONG;

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
    Run(cmd::run::RunArgs),
    /// Where and why two lanes (or traces) diverge: free-running and teacher-forced
    /// comparisons, layer-local profile against the noise floor, near-ties, activation
    /// flips, and a per-layer plot.
    Delta(cmd::delta::DeltaArgs),
    /// Which recipe components (activation quantizer, kernels, embedding dequantizer,
    /// elementwise loops) account for the divergence of lane A from lane B: A is moved
    /// toward B one component at a time (portable twins; layer-locally on the layers a
    /// profile flags, or `--whole-model` teacher-forced on B's tokens).
    Attribute(cmd::attribute::AttributeArgs),
    /// Which lane reproduces a trace or an engine's dump bitwise, and the first tap no
    /// lane reproduces: every lane (with each attention setting the trace does not fix)
    /// replays it layer-locally, stopping at its first mismatch.
    Identify(cmd::identify::IdentifyArgs),
    /// List the known lanes, which ones this host runs natively, and its CPU features.
    Lanes {
        /// Print only the lane names, one per line.
        #[arg(long)]
        names: bool,
        /// Print the lane table of README.md and docs/LANES.md (Markdown, one row per
        /// lane: name, architecture, summary, status), as it goes between their
        /// `<!-- lanes:begin -->` and `<!-- lanes:end -->` lines.
        #[arg(long, conflicts_with = "names")]
        markdown: bool,
    },
    /// Inspect, dequantize and quantize GGUF files.
    #[command(subcommand)]
    Gguf(cmd::gguf::GgufCommand),
    /// Traces from other engines' dumps (`trace import`).
    #[command(subcommand)]
    Trace(cmd::trace::TraceCommand),
    /// Shared inputs and per-lane expected outputs under golden/.
    #[command(subcommand)]
    Golden(cmd::golden::GoldenCommand),
    /// Refresh ("bless") the goldens of one lane or all lanes.
    ///
    /// Refused when CI is set. Each lane's outputs come from its own kernels (native where
    /// this host runs them, else the portable twin) and must pass the tolerance check
    /// against ref. Without --filter, the lane's model golden (the embedded model's tokens
    /// and tap digests, golden/model/lanes/) is refreshed too, and only when the native
    /// kernels and the portable twin agree bitwise. Writes are atomic. Prints what changed
    /// per lane.
    Bless(cmd::bless::BlessArgs),
    /// Show a target table (targets/<triple>.toml): its lanes and CPU models.
    Targets(cmd::targets::TargetsArgs),
    /// Replay one matmul on a lane: activations from safetensors, weights from a GGUF.
    ///
    /// The lane quantizes the activations with its own rule and multiplies them by the
    /// quantized weight with its own kernel (gemv for one row, gemm for several, as the
    /// lane does). The output is one f32 tensor [m, n].
    Matmul(cmd::matmul::MatmulArgs),
}

fn main() -> ExitCode {
    tiercheck_lanes::install_accelerated();
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
        Command::Matrix(a) => cmd::matrix::run(a),
        Command::Run(a) => cmd::run::run(a),
        Command::Delta(a) => cmd::delta::run(a),
        Command::Attribute(a) => cmd::attribute::run(a),
        Command::Identify(a) => cmd::identify::run(a),
        Command::Lanes { names, markdown } => cmd::lanes::run(names, markdown),
        Command::Gguf(c) => cmd::gguf::run(c),
        Command::Trace(c) => cmd::trace::run(c),
        Command::Golden(c) => cmd::golden::run(c),
        Command::Bless(a) => cmd::bless::run(a),
        Command::Targets(a) => cmd::targets::run(a),
        Command::Matmul(a) => cmd::matmul::run(a),
    }
}
