//! tiercheck-core: ggml's block formats, the lane model, the `ref` lane and the
//! portable schedules of every lane.
//!
//! - [`accel`]: the slots where the `tiercheck-accel` crate installs the twins'
//!   accelerated forms (this crate has no host-specific code);
//! - [`detect`]: the one runtime CPU-feature detection of the workspace;
//! - [`blocks`]: the quantized block formats, byte for byte, and their dequantizers;
//! - [`quant`]: activation quantizers (named rules) and weight quantizers;
//! - [`arch`]: the portable twin of every lane, one folder per tier at the native crates'
//!   paths (`arch/x86_64/avx2/vec_dot.rs`, ...);
//! - [`mod@lane`]: lanes, their recipes and the [`lane::Kernels`] trait;
//! - [`weight_matrix`]: weight matrices and matmul shapes;
//! - [`gpu`]: portable twins of ggml's CUDA/HIP MMVQ path (q8_1 activations, wave32/wave64);
//! - [`elem`]: the decoder's elementwise and attention float kernels per tier;
//! - [`fp16`]: half and bfloat16 conversions exactly as ggml performs them;
//!
//! See the [`mod@lane`] module for the model that ties these together.

// Kernels index with explicit loop counters on purpose: each loop mirrors the C
// source it reproduces, so a reader can check one against the other line by line.
#![allow(clippy::needless_range_loop)]

pub mod accel;
pub mod arch;
pub mod blocks;
pub mod detect;
pub mod elem;
pub mod error;
pub mod fp16;
pub mod ggml_type;
pub mod gpu;
pub mod interleave;
pub mod lane;
pub mod quant;
pub mod repack;
pub mod rng;
pub mod weight_matrix;

pub use arch::{lane, LANES};
pub use error::KernelError;
pub use ggml_type::GgmlType;
pub use lane::{Kernels, Lane};
pub use weight_matrix::WeightMatrix;
