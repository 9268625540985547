//! Quantizers of the `ref` lane: ggml's reference functions (`ggml-quants.c`).
//!
//! - [`act`]: activation quantizers, each a named rule ([`ActRule`]): q8_K, q8_0, q8_1.
//! - [`weights`]: weight quantizers for Q4_0, Q8_0, Q4_K, Q6_K, byte-identical to
//!   `ggml_quantize_chunk` without an importance matrix.
//!
//! Rounding primitives are in [`round`]. Every float operation below is a single
//! IEEE-754 binary32 operation in the order the C source evaluates it, never fused:
//! ggml-base on x86-64 is compiled without FMA, so GCC cannot contract.

pub mod act;
pub mod round;
pub mod weights;

pub use act::ActRule;
