//! `tiercheck_core::arch::aarch64::sve`.

pub(crate) mod vec_dot;
