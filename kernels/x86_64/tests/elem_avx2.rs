//! The native AVX2+FMA elementwise kernels (`tiercheck_x86_64::elem`) give the bits of
//! their portable twin (`tiercheck_core::elem::portable(ElemFlavour::Avx2)`) on edge
//! and random inputs: `ggml_v_expf` (through `soft_max` with `max = 0`, where
//! `x - 0 == x`), `ggml_v_silu` (through `swiglu`), softmax of every length 1..=70 (the
//! scalar tails) with and without a `-inf`-masked suffix, `ggml_vec_dot_f32` of every
//! length 0..=200 (the leftover loop) and the tinyBLAS dot. Results that are NaN on both
//! sides count as equal (NaN payloads are not part of the contract). The checks live
//! in `tiercheck_testkit::elem_conformance` (shared with the other architecture). On CPUs
//! without AVX2 and FMA each trial is reported ignored with the reason, and fails
//! instead when `TIERCHECK_REQUIRE_LANES` requires a lane of this flavour.

#[cfg(target_arch = "x86_64")]
tiercheck_testkit::elem_conformance_main!(
    tiercheck_core::elem::ElemFlavour::Avx2,
    tiercheck_x86_64::elem::kernels().map_err(|e| e.to_string())
);

/// Other architectures have no x86 kernels to compare: no trials.
#[cfg(not(target_arch = "x86_64"))]
fn main() {}
