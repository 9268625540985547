//! The x86 lanes' twins (`tiercheck_core::arch::x86_64`).

pub(crate) mod avx2;
pub(crate) mod avx2_repack;
