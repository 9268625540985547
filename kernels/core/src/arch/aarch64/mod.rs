//! Portable twins of the aarch64 lanes (native forms: the `tiercheck-aarch64` crate,
//! same paths).

pub mod i8mm;
pub mod i8mm_repack;
pub mod neon;
pub mod neon_repack;
pub mod sve;
pub mod sve_repack;
