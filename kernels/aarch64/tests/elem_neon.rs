//! The native NEON elementwise kernels (`tiercheck_aarch64::elem`) give the bits of
//! their portable twin (`tiercheck_core::elem::portable(ElemFlavour::Neon)`) on edge
//! and random inputs: `ggml_v_expf` (through `soft_max` with `max = 0`, where
//! `x - 0 == x`), `ggml_v_silu` (through `swiglu`), softmax of every length 1..=70 (the
//! scalar tails) with and without a `-inf`-masked suffix, `ggml_vec_dot_f32` of every
//! length 0..=200 (the leftover loop) and the tinyBLAS dot. Results that are NaN on both
//! sides count as equal (NaN payloads are not part of the contract). The checks live
//! in `tiercheck_testkit::elem_conformance` (shared with the other architecture). On CPUs
//! without NEON each trial is reported ignored with the reason, and fails instead when
//! `TIERCHECK_REQUIRE_LANES` requires a lane of this flavour. Runs under qemu-user when
//! cross-built.

#[cfg(target_arch = "aarch64")]
tiercheck_testkit::elem_conformance_main!(
    tiercheck_core::elem::ElemFlavour::Neon,
    tiercheck_aarch64::elem::kernels().map_err(|e| e.to_string())
);

/// Other architectures have no aarch64 kernels to compare: no trials.
#[cfg(not(target_arch = "aarch64"))]
fn main() {}
