//! Bindings to the independent oracle: the real ggml, built per CPU tier by `ci/oracle`.
//!
//! tiercheck reproduces ggml's quantized kernels per tier bit-exactly; these bindings are
//! how its tests check that claim against ggml itself. `ci/oracle` builds ggml's CPU
//! backend from the llama.cpp sources vendored in the llama-cpp-python 0.3.36 sdist
//! (ggml 0.25.3), once per x86 tier, as shared libraries:
//!
//! - `x64`: no SIMD at all, so every kernel is ggml's generic C (compiled without FMA,
//!   which makes it the `ref` lane's oracle);
//! - `haswell`: AVX2 + FMA + F16C + BMI2, ggml's `x86_64-avx2` tier.
//!
//! [`GgmlLib`] loads one tier (`libggml-base.so` + `libggml-cpu.so`) with `libloading`
//! and exposes its quantizers, dequantizers and dot products as safe methods that check
//! every length before calling into C. Both tiers can be loaded into one process; see
//! [`GgmlLib::load`] for how symbol clashes between them are avoided.
//! [`OracleConfig::from_env`] finds the builds (environment variables, or the
//! `oracle.env` file `ci/oracle` writes) and says what is missing when they are not
//! there. [`MulmatDriver`] runs one `ggml_mul_mat` node through ggml's CPU backend, with
//! the weight in the plain CPU buffer or repacked (`CPU_REPACK`), using the small C driver
//! `ci/oracle` builds per tier (`ci/oracle-driver/mulmat.c`). The venv that `ci/oracle`
//! also builds holds gguf-py, llama.cpp's own numpy codecs, a second independent
//! reference for the Q4_0..Q8_0 formats.
//!
//! Type arguments are ggml type ids (`enum ggml_type`, e.g.
//! [`GgmlType::Q4_K`](tiercheck_core::GgmlType::Q4_K)`.id()`).

mod arm;
mod config;
mod error;
mod ggml;
mod mulmat;

pub use arm::{ArmDriver, ArmFeatures, ArmTier, ArmTraits, MulmatJob};
pub use config::{
    llama_driver_env, llama_env, parse_env_file, x86_tier, OracleConfig, Tier, CACHE_ENV,
    ENV_FILE_NAME, PYTHON_ENV,
};
pub use error::OracleError;
pub use ggml::{CpuFeatures, GgmlLib};
pub use mulmat::{MulmatDriver, MulmatMode, MulmatResult};

/// Loads the library of `tier` named by `config`.
pub fn load_tier(config: &OracleConfig, tier: Tier) -> Result<GgmlLib, OracleError> {
    GgmlLib::load(config.require_tier(tier)?)
}
