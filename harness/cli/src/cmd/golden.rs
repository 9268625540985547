//! `tiercheck golden`: the shared inputs, the integrity of every golden file, and the
//! embedded model.

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Subcommand;

use tiercheck_golden::{self as golden, GoldenDir};
use tiercheck_model::embedded;
use tiercheck_model::shaped::{self, ShapeOptions};

#[derive(Subcommand)]
pub enum GoldenCommand {
    /// Regenerate the shared kernel inputs (golden/inputs) from their fixed seeds.
    /// The result is byte-identical to what is committed unless the generator changed.
    GenInputs,
    /// Check every golden file against its manifest and report any corruption.
    Verify,
    /// Build the embedded model (golden/model/recipe.toml) into the cache and print its path;
    /// with --shape, a large random model of a real Qwen3, Qwen3 MoE, Qwen2.5 or Llama 3.1
    /// shape instead.
    ///
    /// The embedded model goes to <cache>/model/<sha256>.gguf and must have the sha256 the
    /// recipe records; a verified cached file is reused (`--recipe golden/model/qwen2.toml`
    /// builds the qwen2 model). A shaped model (qwen3-0.6b, qwen3-1.7b, qwen3-4b,
    /// qwen3-8b, qwen3-14b, qwen3-32b, qwen2.5-1.5b, qwen2.5-3b, qwen2.5-7b, qwen2.5-14b,
    /// qwen2.5-32b, llama3.1-8b, qwen3-30b-a3b) is written directly as random quantized blocks, streaming, to --out or <cache>/model/shape-<name>-...gguf, and
    /// reused when a file of the same options exists. Writes are atomic.
    Model {
        /// Cache folder (default: $TIERCHECK_CACHE, else ~/.cache/tiercheck).
        #[arg(long)]
        cache: Option<PathBuf>,
        /// Recipe file (default: golden/model/recipe.toml).
        #[arg(long, conflicts_with = "shape")]
        recipe: Option<PathBuf>,
        /// Regenerate even when a verified file is cached.
        #[arg(long)]
        force: bool,
        /// Record the generated file's sha256 in the recipe (refused when CI is set).
        #[arg(long, conflicts_with = "shape")]
        bless: bool,
        /// Generate a model of this real shape (e.g. qwen3-8b, or 8b).
        #[arg(long)]
        shape: Option<String>,
        /// With --shape: keep only the first N layers.
        #[arg(long, requires = "shape")]
        layers: Option<u32>,
        /// With --shape: another vocabulary size.
        #[arg(long, requires = "shape")]
        vocab: Option<u32>,
        /// With --shape: the quantization (q4_k_m, q4_k, q6_k, q8_0, q4_0).
        #[arg(long, requires = "shape", default_value = "q4_k_m")]
        quantization: String,
        /// With --shape: the seed.
        #[arg(long, requires = "shape", default_value_t = tiercheck_model::shaped::DEFAULT_SEED)]
        seed: u64,
        /// With --shape: the file to write (default: in the cache).
        #[arg(long, requires = "shape")]
        out: Option<PathBuf>,
        #[command(flatten)]
        threads: crate::args::Threads,
        /// No progress bar.
        #[arg(long)]
        quiet: bool,
    },
}

/// `tiercheck golden ...`.
pub fn run(command: GoldenCommand) -> Result<()> {
    match command {
        GoldenCommand::GenInputs => cmd_gen_inputs(),
        GoldenCommand::Verify => cmd_verify(),
        GoldenCommand::Model {
            cache,
            recipe,
            force,
            bless,
            shape: Some(shape),
            layers,
            vocab,
            quantization,
            seed,
            out,
            threads,
            quiet,
        } => {
            let _ = (recipe, bless); // refused with --shape by clap
            cmd_shaped(
                ShapeOptions {
                    shape,
                    layers,
                    vocab,
                    quantization,
                    seed,
                    out,
                    cache,
                    force,
                    threads: threads.get(1),
                },
                quiet,
            )
        }
        GoldenCommand::Model { cache, recipe, force, bless, .. } => {
            cmd_model(embedded::BuildOptions { recipe, cache, force, bless })
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

fn cmd_shaped(opts: ShapeOptions, quiet: bool) -> Result<()> {
    const MB: u64 = 1 << 20;
    let mut bar: Option<crate::progress::Progress> = None;
    let built = shaped::build_shaped(&opts, &mut |done, total| {
        let bar =
            bar.get_or_insert_with(|| crate::progress::Progress::new((total / MB) as usize, quiet));
        bar.set((done / MB) as usize, "MiB of blocks");
    })?;
    if let Some(bar) = &bar {
        bar.finish();
    }
    if built.generated {
        eprintln!(
            "generated {} ({:.2} GB) in {:.1} s ({:.0} MB/s)",
            built.path.display(),
            built.bytes as f64 / 1e9,
            built.seconds,
            built.bytes as f64 / 1e6 / built.seconds.max(1e-9)
        );
    } else {
        eprintln!("reused {} (same generator and options)", built.path.display());
    }
    println!("{}", built.path.display());
    Ok(())
}
