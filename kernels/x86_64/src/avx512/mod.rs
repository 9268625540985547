//! The native `x86_64-avx512` lane: ggml's zen4 tier. Its quantized matmuls are
//! haswell's bit for bit (see `tiercheck_core::arch::x86_64::avx512`), so its native
//! kernels are the AVX2 ones of [`crate::avx2`]; what the tier changes is the
//! elementwise flavour (`ElemFlavour::Avx512`, sixteen-wide loops: [`crate::elem512`]).
//! The lane is native only where the CPU has what ggml's AVX-512 loops need (AVX-512 F
//! and DQ, with AVX2, FMA and F16C), so a native run is a run on the tier's hardware;
//! elsewhere it runs as its twin.

use tiercheck_core::detect::FeatureSet;
use tiercheck_core::lane::Unavailable;
use tiercheck_core::Kernels;

/// The CPU features of ggml's AVX-512 tier that the lane needs, detected once.
static FEATURES: FeatureSet = FeatureSet::new(&["avx512f", "avx512dq", "avx2", "fma", "f16c"]);

/// Whether this CPU has AVX-512 F and DQ, AVX2, FMA and F16C (detected once).
pub fn is_available() -> bool {
    FEATURES.available()
}

/// The native `x86_64-avx512` kernels (the AVX2 ones), or the CPU features this CPU
/// lacks.
pub fn kernels() -> Result<&'static dyn Kernels, Unavailable> {
    FEATURES.check()?;
    crate::avx2::kernels()
}
