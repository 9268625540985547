//! Dot products of one quantized weight row with one quantized activation row.
//!
//! [`generic`] holds ggml's portable C kernels (`ggml-cpu/quants.c`, `*_generic`), the
//! `ref` lane's schedule. Lanes added later put their portable twins beside it, one
//! module per schedule, with the same function names.

pub mod avx2;
pub mod avx2_repack;
pub mod avx512;
pub mod generic;
pub mod i8mm_repack;
pub mod neon;
pub mod neon_repack;
