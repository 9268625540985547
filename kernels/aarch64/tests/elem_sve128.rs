//! The native SVE elementwise kernels at 128 bits (`tiercheck_aarch64::sve::elem`) give
//! the bits of their portable twin (`tiercheck_core::elem::portable(ElemFlavour::Sve128)`)
//! on edge and random inputs: `ggml_v_expf`, `ggml_v_silu`, softmax and swiglu of every
//! length 0..=70 (the predicated last vector), `ggml_vec_dot_f32` of every length
//! 0..=200 and `ggml_vec_dot_f16` of every length 0..=300 (steps, whole-vector leftovers,
//! the remainder), and that they differ from every other flavour's twin. The checks live
//! in `tiercheck_testkit::elem_conformance`. On a CPU without SVE, or with another vector
//! length, each trial is ignored with the reason, and fails instead when
//! `TIERCHECK_REQUIRE_LANES` requires an `aarch64-sve128` lane. Runs under qemu-user
//! (`QEMU_CPU=max,sve128=on`) when cross-built.

#[cfg(target_arch = "aarch64")]
tiercheck_testkit::elem_conformance_main!(
    tiercheck_core::elem::ElemFlavour::Sve128,
    tiercheck_aarch64::sve::elem::kernels128().map_err(|e| e.to_string())
);

/// Other architectures have no aarch64 kernels to compare: no trials.
#[cfg(not(target_arch = "aarch64"))]
fn main() {}
