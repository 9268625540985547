//! `tiercheck trace`: traces from other engines' dumps.

use std::path::PathBuf;

use anyhow::Result;
use clap::Subcommand;

use tiercheck_model::import::{self, ImportOptions};
use tiercheck_model::Mode;

use crate::cmd::delta::parse_ids;

#[derive(Subcommand)]
pub enum TraceCommand {
    /// Turn a plain dump (safetensors or numpy .npz, one array per llama.cpp tap name,
    /// `[rows, width]`, perhaps an integer `ids` array) into a tiercheck trace,
    /// validating every array against the model. Any subset of taps will do, with the
    /// logits (`result_output`). `delta` also accepts such a dump directly.
    Import {
        /// The dump.
        dump: PathBuf,
        /// GGUF model (qwen3) the dump ran. Default: the model its metadata records
        /// (`model_sha256`, `model_path`; looked up as `delta` looks it up), else the
        /// embedded model.
        #[arg(long)]
        model: Option<PathBuf>,
        /// The evaluated token ids (comma-separated), where the dump holds none.
        #[arg(long, value_name = "IDS")]
        ids: Option<String>,
        /// `decode` (token by token: row s is step s) or `prompt` (one batch: row r is
        /// position r), where the dump does not say.
        #[arg(long, value_enum)]
        mode: Option<Mode>,
        /// The trace to write (atomically).
        #[arg(long)]
        out: PathBuf,
        /// Refuse arrays that are neither taps nor token ids (by default they are
        /// ignored, with one warning).
        #[arg(long)]
        strict: bool,
    },
}

/// `tiercheck trace`.
pub fn run(c: TraceCommand) -> Result<()> {
    match c {
        TraceCommand::Import { dump, model, ids, mode, out, strict } => {
            let model =
                crate::replay::model(&crate::replay::recorded([dump.as_path()]), model.as_deref())?;
            let opts =
                ImportOptions { ids: ids.as_deref().map(parse_ids).transpose()?, mode, strict };
            let t = import::load(&model, &dump, &opts)?;
            import::write(&out, &t)?;
            let names: std::collections::BTreeSet<&str> =
                t.taps.keys().map(|(_, n)| n.as_str()).collect();
            eprintln!(
                "wrote {}: {} steps ({} mode), {} taps per step at most, {} tensors",
                out.display(),
                t.steps.len(),
                t.meta.get("mode").map_or("?", String::as_str),
                names.len(),
                t.taps.len()
            );
            Ok(())
        }
    }
}
