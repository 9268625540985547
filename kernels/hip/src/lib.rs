//! The device side of tiercheck's `hip-wave32` and `hip-wave64` lanes: HIP kernels
//! for ggml's matrix-vector path with q8_1 activations (MMVQ), and a host that loads,
//! launches and reads them back.
//!
//! `device/tiercheck_mmvq.hip` holds `quantize_q8_1` (activations) and
//! `mul_mat_vec_q` for the eleven weight types of [`TYPES`] (Q4_1, Q5_0, Q5_1, Q8_0,
//! Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS), one column, written from the float
//! order that [`tiercheck_core::gpu`] documents (upstream: `ggml-cuda/quantize.cu`,
//! `vecdotq.cuh`, `mmvq.cu`, `common.cuh`). Warp size (32 or 64) and warps per block
//! (1, 2, 4, 8) are template parameters; each instance is an `extern "C"` kernel
//! `tc_mmvq_<type>_w<warp>_n<nwarps>` ([`kernel_names`]). `device/compat.h` maps the
//! few primitives to HIP or CUDA, so the same source also builds with nvcc
//! (`ci/gpu-check` on an NVIDIA machine).
//!
//! # Build
//! - Default: no device code; [`BUILD_NOTE`] says so and [`kernels`] reports it.
//! - `--features hip`: `build.rs` runs hipcc once per offload target
//!   (`TIERCHECK_HIP_TARGETS`, default `gfx90a,gfx1030`) into AMDGPU code objects
//!   ([`CODE_OBJECTS`]), and the host side (the `hip-sys` crate) is
//!   compiled in. Without hipcc the crate still builds, with no code objects, and
//!   says so (a cargo warning and [`BUILD_NOTE`]); hip-sys itself needs HIP's headers
//!   and `libamdhip64`.
//!
//! # ggml's own CUDA kernels on a device
//! `tiercheck_gpu_testkit::ggml_cases` (a dev-dependency) builds the cases `device/ggml_gpu_check.cu` (linked by
//! `ci/ggml-gpu-driver` with ggml's unchanged CUDA units) runs on an NVIDIA GPU: the
//! inputs and the `cuda-sm90` twin's outputs, compared there bit for bit.
//!
//! # Device trials
//! [`kernels`] gives the device implementation of a lane as
//! [`tiercheck_core::Kernels`], so every golden case the harness runs on the portable
//! twin also runs on the device, bit for bit. Where there is no device (HIP's
//! `hipGetDeviceCount` answers `hipErrorNoDevice`, as on every CI machine), it returns
//! that reason and the trials are reported ignored with it. A device whose ISA has no
//! code object in this build, or a 32-wide device asked for the wave64 lane, is
//! likewise a reason, never a launch.

use tiercheck_core::arch::hip::{HipTwin, HIP_WAVE32_TWIN, HIP_WAVE64_TWIN};
use tiercheck_core::gpu::{MmvqConfig, WAVE32, WAVE64};
use tiercheck_core::lane::{NativeLane, Unavailable};
use tiercheck_core::Kernels;

#[cfg(feature = "hip")]
mod device;

/// One embedded code object.
#[derive(Clone, Copy, Debug)]
pub struct CodeObject {
    /// The offload target (`gfx90a`, `gfx1030`, ...).
    pub target: &'static str,
    /// The AMDGPU ELF image.
    pub bytes: &'static [u8],
}

include!(concat!(env!("OUT_DIR"), "/code_objects.rs"));

/// The embedded code object for `target`, if this build has one.
pub fn code_object(target: &str) -> Option<&'static CodeObject> {
    CODE_OBJECTS.iter().find(|c| c.target == target)
}

/// The hardware wavefront size of an AMD offload target: 64 on GCN and CDNA (gfx8,
/// gfx9), 32 by default on RDNA (gfx10 and later). `None` for a name that is not a
/// `gfx` target.
pub fn wave_size(target: &str) -> Option<usize> {
    let digits = target.strip_prefix("gfx")?;
    // The last two characters are minor and stepping (hex); the rest is the major.
    if digits.len() < 3 || !digits.is_char_boundary(digits.len() - 2) {
        return None;
    }
    let major: u32 = digits[..digits.len() - 2].parse().ok()?;
    Some(if major <= 9 { 64 } else { 32 })
}

/// The weight types the device kernels cover, with their kernel-name spelling.
pub const TYPES: [(tiercheck_core::GgmlType, &str); 11] = [
    (tiercheck_core::GgmlType::Q4_K, "q4_K"),
    (tiercheck_core::GgmlType::Q6_K, "q6_K"),
    (tiercheck_core::GgmlType::Q8_0, "q8_0"),
    (tiercheck_core::GgmlType::Q4_1, "q4_1"),
    (tiercheck_core::GgmlType::Q5_0, "q5_0"),
    (tiercheck_core::GgmlType::Q5_1, "q5_1"),
    (tiercheck_core::GgmlType::Q2_K, "q2_K"),
    (tiercheck_core::GgmlType::Q3_K, "q3_K"),
    (tiercheck_core::GgmlType::Q5_K, "q5_K"),
    (tiercheck_core::GgmlType::IQ4_NL, "iq4_nl"),
    (tiercheck_core::GgmlType::IQ4_XS, "iq4_xs"),
];

/// The warps-per-block values the device source instantiates.
pub const NWARPS: [usize; 4] = [1, 2, 4, 8];

/// The activation quantizer's kernel name.
pub const QUANTIZE_KERNEL: &str = "tc_quantize_q8_1";

/// The name of the MMVQ kernel for weights of kernel-name spelling `ty` (see
/// [`TYPES`]), `warp` lanes per warp and `nwarps` warps per block.
pub fn mmvq_kernel(ty: &str, warp: usize, nwarps: usize) -> String {
    format!("tc_mmvq_{ty}_w{warp}_n{nwarps}")
}

/// Every kernel a code object for a target with hardware wavefront `wave` must hold:
/// the quantizer and the warp-32 MMVQ instances, plus the warp-64 ones where the
/// wavefront is 64 wide.
pub fn kernel_names(wave: usize) -> Vec<String> {
    let mut names = vec![QUANTIZE_KERNEL.to_string()];
    for warp in [32, 64].into_iter().filter(|&w| w <= wave) {
        for (_, ty) in TYPES {
            for n in NWARPS {
                names.push(mmvq_kernel(ty, warp, n));
            }
        }
    }
    names
}

/// The MMVQ configurations the device source is built for (`device/tiercheck_mmvq.hip`:
/// warp 32 and 64, HIP's contraction); a twin of another configuration has no device form.
pub const DEVICE_CONFIGS: [MmvqConfig; 2] = [WAVE32, WAVE64];

/// The device implementation of the HIP twin `twin` (its MMVQ configuration is the
/// device description: warp size, warps-per-block table, contraction), or why this
/// build or this machine has none (a configuration the device source does not build, no
/// `hip` feature, no code objects, no device, no code object for the device's ISA, a
/// wavefront too narrow).
pub fn kernels(twin: &'static HipTwin) -> Result<&'static dyn Kernels, String> {
    let name = twin.0.name;
    if !DEVICE_CONFIGS.contains(&twin.0) {
        return Err(format!("`{name}` has no device form: the device source builds {}", {
            let names: Vec<&str> = DEVICE_CONFIGS.iter().map(|c| c.name).collect();
            names.join(" and ")
        }));
    }
    #[cfg(feature = "hip")]
    {
        if CODE_OBJECTS.is_empty() {
            return Err(format!("`{name}` has no device code in this build: {BUILD_NOTE}"));
        }
        device::kernels(twin)
    }
    #[cfg(not(feature = "hip"))]
    {
        Err(format!("`{name}` runs on an AMD GPU: {BUILD_NOTE}"))
    }
}

/// The native lanes of this crate: the device implementations, each an entry point of
/// the one native contract ([`tiercheck_core::lane::NativeEntry`]); where there is no
/// device (or no device code in this build) the reason is the runtime's or the build's.
pub static NATIVE: &[NativeLane] = &[
    NativeLane { lane: "hip-wave32", kernels: wave32 },
    NativeLane { lane: "hip-wave64", kernels: wave64 },
    NativeLane { lane: "cuda-sm90", kernels: cuda_sm90 },
];

/// `cuda-sm90` has no device form in this build: the host here is HIP's. (ggml's own
/// CUDA kernels are read from their SASS by the `ggml` tests; `ci/gpu-check` runs the
/// project's device source with nvcc on an NVIDIA machine.)
pub fn cuda_sm90() -> Result<&'static dyn Kernels, Unavailable> {
    Err(Unavailable::Device(
        "`cuda-sm90` runs on an NVIDIA GPU: this build has no CUDA host (twin only)".into(),
    ))
}

/// The device implementation of `hip-wave32`, or why there is none here.
pub fn wave32() -> Result<&'static dyn Kernels, Unavailable> {
    kernels(&HIP_WAVE32_TWIN).map_err(Unavailable::Device)
}

/// The device implementation of `hip-wave64`, or why there is none here.
pub fn wave64() -> Result<&'static dyn Kernels, Unavailable> {
    kernels(&HIP_WAVE64_TWIN).map_err(Unavailable::Device)
}

/// What this build can say about the device: its ISA and wavefront, or why there is
/// none. Probes the runtime once (without the `hip` feature: the build note).
pub fn device_summary() -> Result<String, String> {
    #[cfg(feature = "hip")]
    {
        if CODE_OBJECTS.is_empty() {
            return Err(BUILD_NOTE.to_string());
        }
        device::summary()
    }
    #[cfg(not(feature = "hip"))]
    {
        Err(BUILD_NOTE.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wave_sizes() {
        assert_eq!(wave_size("gfx90a"), Some(64));
        assert_eq!(wave_size("gfx906"), Some(64));
        assert_eq!(wave_size("gfx942"), Some(64));
        assert_eq!(wave_size("gfx803"), Some(64));
        assert_eq!(wave_size("gfx1030"), Some(32));
        assert_eq!(wave_size("gfx1100"), Some(32));
        assert_eq!(wave_size("gfx1151"), Some(32));
        assert_eq!(wave_size("gfx1201"), Some(32));
        assert_eq!(wave_size("sm_90"), None);
        assert_eq!(wave_size("gfx"), None);
        assert_eq!(wave_size("gfxzz1"), None);
    }

    #[test]
    fn kernel_name_sets() {
        assert_eq!(kernel_names(32).len(), 1 + 44);
        assert_eq!(kernel_names(64).len(), 1 + 88);
        assert!(kernel_names(64).contains(&"tc_mmvq_q4_K_w64_n2".to_string()));
        assert!(kernel_names(32).contains(&"tc_mmvq_iq4_xs_w32_n8".to_string()));
        assert!(!kernel_names(32).iter().any(|n| n.contains("_w64_")));
    }

    #[test]
    fn a_configuration_the_device_source_does_not_build_is_refused() {
        let cuda = &tiercheck_core::arch::hip::CUDA_SM90_TWIN;
        let Err(why) = kernels(cuda) else { panic!("cuda-sm90 accepted") };
        assert!(why.contains("no device form"), "{why}");
        for twin in [&HIP_WAVE32_TWIN, &HIP_WAVE64_TWIN] {
            if let Err(why) = kernels(twin) {
                assert!(!why.contains("no device form"), "{why}");
            }
        }
    }
}
