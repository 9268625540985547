//! `tiercheck_core::arch::aarch64::i8mm`.

pub(crate) mod vec_dot2;
