//! A real Qwen3 decoder that runs any lane, with llama.cpp's per-layer taps, and the
//! model it runs by default.
//!
//! - [`hparams`]: hyper-parameters from the GGUF metadata, checked against the tensors;
//! - [`decoder`]: the forward pass (ggml's CPU graph for qwen3, op by op);
//! - [`attention`]: the KV cache and attention, per cache type and attention path;
//! - [`taps`]: the per-layer tensors of a step and the sink they go to;
//! - [`run`]: teacher-forced and greedy runs, step records, traces;
//! - [`tapdiff`]: two traces compared tap by tap;
//! - [`runner`]: one lane over a set of prompts, with provenance and trace files;
//! - [`embedded`]: the embedded model, generated from `golden/model/recipe.toml`, and the
//!   prompts;
//! - [`shaped`]: large models of real Qwen3 shapes, written directly as random quantized
//!   blocks;
//! - [`model_quant`]: quantizing a model's weights with the reference quantizers;
//! - [`gen`]: the seeded generator;
//! - [`repo`]: where the golden folder is, and whether it may be rewritten here.
//!
//! The forward pass follows llama.cpp's qwen3 graph, with an F32 or F16 KV cache and
//! flash attention on or off ([`attention`]; llama.cpp's defaults are F16 and on), and
//! each op the way ggml's CPU backend computes it (see [`decoder`] for the float order
//! of every step). Matmuls go through the lane's
//! kernels (its activation quantizer, its repack decision, its gemv or gemm path); the
//! elementwise and attention loops through the lane's [`tiercheck_core::elem`]
//! flavour.

pub mod attention;
pub mod decoder;
pub mod embedded;
pub mod gen;
pub mod hparams;
pub mod import;
pub mod model_quant;
pub mod repo;
pub mod run;
pub mod runner;
pub mod shaped;
pub mod tapdiff;
pub mod taps;

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

pub use attention::{Attention, FlashAttn, KvCache, KvType};
pub use decoder::{Arith, Decoder, Residual};
pub use hparams::HParams;
pub use run::{Mode, RunOutput, RunSpec, StepRecord};
pub use taps::{Tap, TapSink};

use tiercheck_gguf::{GgufError, GgufFile};

/// Errors of the model and the decoder.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The GGUF file could not be read.
    #[error(transparent)]
    Gguf(#[from] GgufError),
    /// The model is not one the decoder can run.
    #[error("{path}: {problem}")]
    Invalid {
        /// The model file.
        path: String,
        /// What is wrong.
        problem: String,
    },
    /// A request does not fit the model (token id, context length, ...).
    #[error("{0}")]
    Request(String),
    /// A kernel refused its input.
    #[error("{what}: {source}")]
    Kernel {
        /// Which op.
        what: String,
        /// The kernel's error.
        source: tiercheck_core::KernelError,
    },
}

/// A model file, opened and validated.
pub struct Model {
    /// The GGUF file.
    pub file: GgufFile,
    /// Its hyper-parameters.
    pub hp: HParams,
    /// sha256 of the file's bytes (lowercase hex).
    pub sha256: String,
    /// Where it was read from.
    pub path: PathBuf,
}

impl Model {
    /// Open and validate a qwen3 GGUF model.
    pub fn open(path: &Path) -> Result<Model, ModelError> {
        let file = GgufFile::open(path)?;
        let hp = HParams::from_gguf(&file)?;
        let sha256 = hex(&Sha256::digest(file.as_bytes()));
        Ok(Model { file, hp, sha256, path: path.to_owned() })
    }
}

/// Lowercase hex of bytes.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
