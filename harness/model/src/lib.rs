//! A real Qwen3 decoder that runs any lane, with llama.cpp's per-layer taps, and the
//! model it runs by default.
//!
//! - [`hparams`]: hyper-parameters from the GGUF metadata, checked against the tensors;
//! - [`decoder`]: the forward pass (ggml's CPU graph for qwen3, op by op);
//! - [`attention`]: the KV cache and attention, per cache type and attention path;
//! - [`taps`]: the per-layer tensors of a step and the sink they go to;
//! - [`sequence`]: one token sequence through the decoder (teacher-forced prompt, greedy
//!   steps), its step records and trace files;
//! - [`tapdiff`]: two traces compared tap by tap;
//! - [`lane_run`]: one lane over a set of prompts, with provenance and trace files;
//! - [`embedded`]: the embedded model, generated from `golden/model/recipe.toml`, and the
//!   prompts;
//! - [`shaped`]: large models of real Qwen3 shapes, written directly as random quantized
//!   blocks;
//! - [`model_quant`]: quantizing a model's weights with the reference quantizers;
//! - [`state`]: llama.cpp's saved K/V cache, to start a run from;
//! - [`kernel_inputs`]: the seeded inputs of the kernel cases;
//! - [`golden_folder`]: where the golden folder is, and whether it may be rewritten here.
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
pub mod golden_folder;
pub mod hparams;
pub mod import;
pub mod kernel_inputs;
pub mod lane_run;
pub mod model_quant;
pub mod moe;
pub mod sequence;
pub mod shaped;
pub mod state;
pub mod tapdiff;
pub mod taps;

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

pub use attention::{Attention, FlashAttn, KvCache, KvType};
pub use decoder::{unsupported, Arith, Decoder, Residual};
pub use hparams::HParams;
pub use sequence::{Batching, Logits, Mode, RunOutput, RunSpec, StepRecord};
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
        let sha256 = file_sha256(path, &file)?;
        Ok(Model { file, hp, sha256, path: path.to_owned() })
    }
}

/// Files at least this large have their sha256 remembered in the cache.
pub const SHA_CACHE_MIN_BYTES: u64 = 256 << 20;

/// The sha256 of a model file (lowercase hex).
///
/// Hashing a 16 GB model takes about ten seconds, so for files of at least
/// [`SHA_CACHE_MIN_BYTES`] the digest is remembered under `<cache>/sha256/`, keyed by
/// the file's canonical path and checked against its size, modification time (to the
/// nanosecond), device and inode: a file that was replaced or rewritten has another
/// identity and is hashed again. The file is hashed by `read` in 8 MiB pieces, not
/// through the memory map, so the hash does not make the whole file resident. The cache
/// is an optimisation only: when it cannot be read or written the digest is computed.
pub fn file_sha256(path: &Path, file: &GgufFile) -> Result<String, ModelError> {
    let bytes = file.as_bytes();
    if (bytes.len() as u64) < SHA_CACHE_MIN_BYTES {
        return Ok(hex(&Sha256::digest(bytes)));
    }
    let identity = || -> Option<String> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(path).ok()?;
        let canon = std::fs::canonicalize(path).ok()?;
        Some(format!(
            "{} {} {} {} {} {}",
            m.len(),
            m.mtime(),
            m.mtime_nsec(),
            m.dev(),
            m.ino(),
            canon.display()
        ))
    };
    let entry = embedded::default_cache_dir().ok().zip(identity()).map(|(dir, id)| {
        let key = hex(&Sha256::digest(id.as_bytes()));
        (dir.join("sha256").join(format!("{}.txt", &key[..32])), id)
    });
    if let Some((entry, id)) = &entry {
        if let Ok(text) = std::fs::read_to_string(entry) {
            if let Some((sha, rest)) = text.trim_end().split_once(' ') {
                if rest == id && sha.len() == 64 && sha.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Ok(sha.to_string());
                }
            }
        }
    }
    let sha = hash_by_reading(path)?;
    if let Some((entry, id)) = entry {
        // Remember it only if the file did not change while it was hashed.
        if identity().as_ref() == Some(&id) {
            if let Some(dir) = entry.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            let _ = tiercheck_gguf::atomic_write::write_atomic(
                &entry,
                format!("{sha} {id}\n").as_bytes(),
            );
        }
    }
    Ok(sha)
}

/// sha256 of a file read in 8 MiB pieces.
fn hash_by_reading(path: &Path) -> Result<String, ModelError> {
    use std::io::Read;
    let io = |source| {
        ModelError::Gguf(GgufError::Io { path: path.display().to_string(), op: "read", source })
    };
    let mut f = std::fs::File::open(path).map_err(io)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 8 << 20];
    loop {
        let n = f.read(&mut buf).map_err(io)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex(&h.finalize()))
}

/// Lowercase hex of bytes.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
