//! Portable twins of the x86-64 lanes (native forms: the `tiercheck-x86_64` crate, same
//! paths).

pub mod avx2;
pub mod avx2_repack;
pub mod avx512;
