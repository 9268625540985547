//! The native AVX-512 elementwise kernels (`tiercheck_x86_64::elem512`) give the bits of
//! their portable twin (`tiercheck_core::elem::portable(ElemFlavour::Avx512)`) on the edge
//! and random inputs of `tiercheck_testkit::elem_conformance` (the AVX-512 `ggml_v_expf`
//! through `soft_max` with `max = 0`, SiLU through `swiglu`, softmax tails with and
//! without a masked suffix, `ggml_vec_dot_f32` of every length 0..=200, the tinyBLAS
//! dot). On CPUs without AVX-512 F/DQ each trial is reported ignored with the reason, and
//! fails instead when `TIERCHECK_REQUIRE_LANES` requires `x86_64-avx512`.

#[cfg(target_arch = "x86_64")]
tiercheck_testkit::elem_conformance_main!(
    tiercheck_core::elem::ElemFlavour::Avx512,
    tiercheck_x86_64::elem512::kernels().map_err(|e| e.to_string())
);

/// Other architectures have no x86 kernels to compare: no trials.
#[cfg(not(target_arch = "x86_64"))]
fn main() {}
