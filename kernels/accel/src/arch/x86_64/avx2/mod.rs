//! `tiercheck_core::arch::x86_64::avx2`.

pub(crate) mod tiled;
pub(crate) mod vec_dot;
