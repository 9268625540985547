//! tiercheck: GGUF I/O, comparisons, the golden store, the harness and the CLI.

pub mod atomic_write;
pub mod gen;
pub mod gguf;
pub mod host;
pub mod oracle;
pub mod tensorfile;
