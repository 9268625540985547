//! The subcommands, one module each: its arguments beyond the shared ones
//! ([`crate::args`]) and what it does.

pub mod attribute;
pub mod bless;
pub mod delta;
pub mod gguf;
pub mod golden;
pub mod identify;
pub mod lanes;
pub mod matmul;
pub mod matrix;
pub mod run;
pub mod targets;
pub mod trace;
