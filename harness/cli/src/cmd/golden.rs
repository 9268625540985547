//! `tiercheck golden`: the shared inputs, the integrity of every golden file, and the
//! embedded model.

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Subcommand;

use tiercheck_golden::{self as golden, GoldenDir};
use tiercheck_model::embedded;

#[derive(Subcommand)]
pub enum GoldenCommand {
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

/// `tiercheck golden ...`.
pub fn run(command: GoldenCommand) -> Result<()> {
    match command {
        GoldenCommand::GenInputs => cmd_gen_inputs(),
        GoldenCommand::Verify => cmd_verify(),
        GoldenCommand::Model { cache, recipe, force, bless } => {
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
