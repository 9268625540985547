//! tiercheck: GGUF I/O, comparisons, the golden store, the harness and the CLI.

pub mod analysis;
pub mod atomic_write;
pub mod claims;
pub mod compare;
pub mod embedded;
pub mod fuzzing;
pub mod gen;
pub mod gguf;
pub mod golden;
pub mod host;
pub mod lanes;
pub mod matrix;
pub mod model;
pub mod model_quant;
pub mod oracle;
pub mod provenance;
pub mod targets;
pub mod tensorfile;
