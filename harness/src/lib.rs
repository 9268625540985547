//! tiercheck: GGUF I/O, comparisons, the golden store, the harness and the CLI.

pub mod gen;
pub mod gguf;
pub mod oracle;
