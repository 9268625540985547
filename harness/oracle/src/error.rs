//! Errors of the oracle bindings.

use std::path::PathBuf;

/// Why an oracle call or load failed. Every wrong-size or unsupported request is caught
/// here before any foreign call is made.
#[derive(Debug, thiserror::Error)]
pub enum OracleError {
    /// The oracle (or a part of it) is not configured or not built.
    #[error("{0}")]
    Unavailable(String),

    /// A shared library could not be opened.
    #[error("cannot load {path}: {source}")]
    Load {
        /// The library file.
        path: PathBuf,
        /// The loader's message.
        source: libloading::Error,
    },

    /// A symbol the bindings need (or that was asked for) is not exported.
    #[error("symbol `{symbol}` not found in {lib_dir}: {source}")]
    MissingSymbol {
        /// The library folder of the tier.
        lib_dir: PathBuf,
        /// The symbol name.
        symbol: String,
        /// The loader's message.
        source: libloading::Error,
    },

    /// The loaded library does not match the ggml version these bindings were written for.
    #[error("ggml library in {lib_dir} does not match the expected ggml 0.25.3: {detail}")]
    VersionMismatch {
        /// The library folder of the tier.
        lib_dir: PathBuf,
        /// What differs.
        detail: String,
    },

    /// Another tier with a different `libggml-base.so` is already loaded in this process.
    ///
    /// The dynamic loader matches every `libggml-cpu.so`'s dependency `libggml-base.so.0`
    /// by its SONAME, so all tiers in one process share the first `libggml-base.so`
    /// loaded. That is only sound when every tier's `libggml-base.so` is the same file
    /// content, which `ci/oracle` checks and this error enforces.
    #[error(
        "libggml-base.so in {lib_dir} differs from the one already loaded from {loaded}; \
         tiers whose ggml-base builds differ cannot share one process"
    )]
    BaseMismatch {
        /// The library folder that was being loaded.
        lib_dir: PathBuf,
        /// The library folder whose ggml-base is already in the process.
        loaded: PathBuf,
    },

    /// The tier library uses instructions this CPU does not have.
    #[error("{lib_dir} was built with {feature}, which this CPU lacks")]
    HostLacksFeature {
        /// The library folder of the tier.
        lib_dir: PathBuf,
        /// The instruction-set extension.
        feature: &'static str,
    },

    /// The type id is not a ggml type (removed, out of range).
    #[error("unknown ggml type id {0}")]
    UnknownType(u32),

    /// The type exists but ggml offers no such operation for it.
    #[error("ggml type {ty} has no {what}")]
    Unsupported {
        /// The type name.
        ty: &'static str,
        /// The missing operation.
        what: String,
    },

    /// A length, count or value that does not fit the request.
    #[error("invalid input: {0}")]
    InvalidInput(String),

    /// ggml reported a result size other than the one computed beforehand.
    #[error("ggml wrote {got} bytes where {expected} were expected")]
    SizeMismatch {
        /// The byte count computed from the type table.
        expected: usize,
        /// The byte count ggml returned.
        got: usize,
    },

    /// The `mulmat` driver found no repack layout for this weight type and row count in its
    /// tier's build, so ggml would not place such a weight in the `CPU_REPACK` buffer
    /// (driver exit code 3).
    #[error("no repack layout for {ty} with n = {n} in this build: {detail}")]
    NoRepackLayout {
        /// The weight type name.
        ty: &'static str,
        /// The number of weight rows (output features).
        n: usize,
        /// The driver's message.
        detail: String,
    },

    /// An oracle driver program failed (any exit other than success and the outcomes
    /// that have their own variant).
    #[error("{driver} failed ({status}): {stderr}")]
    Driver {
        /// The driver program.
        driver: PathBuf,
        /// How it ended: an exit code or a signal.
        status: String,
        /// What it wrote to stderr.
        stderr: String,
    },

    /// The target table that describes the oracle's builds
    /// (`targets/<triple>.toml`, `[[tier]]`) could not be read or lacks an entry.
    #[error("{0}")]
    TargetTable(String),

    /// An I/O error while reading configuration or library files.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        source: std::io::Error,
    },
}
