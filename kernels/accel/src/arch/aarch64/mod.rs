//! The aarch64 lanes' twins (`tiercheck_core::arch::aarch64`).

pub(crate) mod i8mm;
pub(crate) mod i8mm_repack;
pub(crate) mod neon;
pub(crate) mod neon_repack;
pub(crate) mod sve;
pub(crate) mod sve_repack;
