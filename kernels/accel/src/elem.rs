//! Accelerated forms of `tiercheck_core::elem`'s portable kernels ([`PortableElem`]):
//! the same bodies compiled with FMA on x86-64 CPUs with AVX2 and FMA.

use tiercheck_core::elem::slots;

use crate::Host;

/// Fills the elementwise slots where `host` serves them.
pub(crate) fn install(host: Host) {
    #[cfg(target_arch = "x86_64")]
    if host.avx2_fma {
        // SAFETY: installed only where the CPU has AVX2 and FMA.
        slots::SOFT_MAX.set_fast(|e, y, x, max| unsafe { fma::soft_max(e, y, x, max) });
        // SAFETY: as above.
        slots::SWIGLU.set_fast(|e, y, x, g| unsafe { fma::swiglu(e, y, x, g) });
        // SAFETY: as above.
        slots::DOT_F32.set_fast(|e, x, y| unsafe { fma::dot_f32(e, x, y) });
        // SAFETY: as above.
        slots::DOT_F16.set_fast(|e, x, y| unsafe { fma::dot_f16(e, x, y) });
        // SAFETY: as above.
        slots::SGEMM_DOT.set_fast(|e, a, b| unsafe { fma::sgemm_dot(e, a, b) });
    }
    let _ = (host, &slots::SOFT_MAX);
}

/// The portable kernels compiled a second time with FMA enabled: the same Rust, so the
/// same float operations in the same order (Rust neither contracts nor reassociates),
/// only `f32::mul_add` becomes one instruction. Off under
/// `with_scalar`, like the other accelerated forms.
#[cfg(target_arch = "x86_64")]
mod fma {
    use tiercheck_core::elem::PortableElem;

    #[target_feature(enable = "fma")]
    pub(super) fn soft_max(e: &PortableElem, y: &mut [f32], x: &[f32], max: f32) -> f64 {
        e.soft_max_in(y, x, max)
    }

    #[target_feature(enable = "fma")]
    pub(super) fn swiglu(e: &PortableElem, y: &mut [f32], x: &[f32], g: &[f32]) {
        e.swiglu_in(y, x, g)
    }

    #[target_feature(enable = "fma")]
    pub(super) fn dot_f32(e: &PortableElem, x: &[f32], y: &[f32]) -> f32 {
        e.dot_f32_in(x, y)
    }

    #[target_feature(enable = "fma")]
    pub(super) fn dot_f16(e: &PortableElem, x: &[f32], y: &[f32]) -> f32 {
        e.dot_f16_in(x, y)
    }

    #[target_feature(enable = "fma")]
    pub(super) fn sgemm_dot(e: &PortableElem, a: &[f32], b: &[f32]) -> f32 {
        e.sgemm_dot_in(a, b)
    }
}
