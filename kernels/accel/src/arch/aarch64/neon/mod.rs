//! `tiercheck_core::arch::aarch64::neon`.

pub(crate) mod vec_dot;
