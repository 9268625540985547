//! The lanes this build knows, paired with their native implementations, and what the
//! harness records about the host they run on.
//!
//! - the crate root (from `lanes.rs`): [`find`], [`all`], [`choose`] and [`native`], the
//!   only place that links the architecture crates and the HIP crate;
//! - [`host`]: the CPU features detected at run time;
//! - [`provenance`]: the metadata every file tiercheck writes carries;
//! - [`check_target_lanes`]: the lanes a target table (`tiercheck_targets`) names are in
//!   the registry.

pub mod host;
mod lanes;
pub mod provenance;

pub use lanes::*;
