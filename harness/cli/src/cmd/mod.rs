//! The subcommands.

pub mod delta;
pub mod matrix;
