//! tiercheck-gpu-testkit: the test tooling of the GPU lanes, kept out of the product
//! (`tiercheck-hip` and the harness take it as a dev-dependency only).
//!
//! - [`isa`]: the AMDGPU disassembly reader (the device code objects' float order read
//!   back from their instructions), the SASS reader for ggml's CUDA kernels, and the
//!   interpreter that evaluates a kernel's reduction symbolically ([`isa::exec`]);
//! - [`inspect`], [`mach_of`]: what an AMDGPU code object is (ELF checks);
//! - [`ggml_cases`]: the inputs and expected outputs the device checks run
//!   (`device/ggml_gpu_check.cu` via `ci/ggml-gpu-driver`), from the twins;
//! - [`inputs`]: the seeded generator and the atomic file writes those use.

// The readers index instruction fields with explicit counters, as the encodings are
// documented.
#![allow(clippy::needless_range_loop)]

mod elf;
pub mod ggml_cases;
pub mod inputs;
pub mod isa;

pub use elf::{inspect, mach_of, ElfInfo};
