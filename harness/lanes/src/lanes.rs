//! The lanes this build knows, paired with their native implementations.
//!
//! Portable implementations come from `tiercheck-core` ([`tiercheck_core::LANES`]);
//! native ones from the architecture crates, and for the HIP lanes the device kernels
//! of `tiercheck-hip` (built with the `hip` feature, run where a device exists). A
//! native implementation is offered only when the running CPU (or GPU) has every
//! feature it needs (runtime detection), so nothing here can execute an instruction
//! the hardware lacks.

use tiercheck_core::{Kernels, Lane, LANES};

/// Which implementation of a lane to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Impl {
    /// Native where this host can run it, else the portable twin.
    Auto,
    /// The native kernel; an error where this host cannot run it.
    Native,
    /// The portable twin (runs everywhere, same bits).
    Portable,
}

/// A lane implementation chosen to run.
pub struct Chosen {
    /// The lane.
    pub lane: &'static Lane,
    /// The kernels.
    pub kernels: &'static dyn Kernels,
    /// Whether they are the native ones.
    pub native: bool,
}

impl Chosen {
    /// `native` or `portable`.
    pub fn impl_name(&self) -> &'static str {
        if self.native {
            "native"
        } else {
            "portable"
        }
    }
}

/// The native implementation of `lane` on this host, or why there is none.
pub fn native(lane: &Lane) -> Result<&'static dyn Kernels, String> {
    match lane.name {
        "ref" => Err("`ref` is the specification: it has only the portable form".to_string()),
        #[cfg(target_arch = "x86_64")]
        "x86_64-avx2" => match tiercheck_x86_64::avx2::kernels() {
            Some(k) => Ok(k),
            None => Err(tiercheck_x86_64::avx2::unavailable_reason()
                .unwrap_or_else(|| "cpu lacks avx2".to_string())),
        },
        #[cfg(target_arch = "x86_64")]
        "x86_64-avx2-repack" => match tiercheck_x86_64::avx2_repack::kernels() {
            Some(k) => Ok(k),
            None => Err(tiercheck_x86_64::avx2::unavailable_reason()
                .unwrap_or_else(|| "cpu lacks avx2".to_string())),
        },
        #[cfg(target_arch = "x86_64")]
        "x86_64-avx512" => match tiercheck_x86_64::avx512::kernels() {
            Some(k) => Ok(k),
            None => Err(tiercheck_x86_64::avx512::unavailable_reason()
                .unwrap_or_else(|| "cpu lacks avx512f, avx512bw, avx512vnni".to_string())),
        },
        #[cfg(target_arch = "aarch64")]
        "aarch64-neon" => match tiercheck_aarch64::neon::kernels() {
            Some(k) => Ok(k),
            None => Err("cpu lacks neon".to_string()),
        },
        #[cfg(target_arch = "aarch64")]
        "aarch64-neon-repack" => match tiercheck_aarch64::neon_repack::kernels() {
            Some(k) => Ok(k),
            None => Err(tiercheck_aarch64::neon_repack::unavailable_reason()
                .unwrap_or_else(|| "cpu lacks dotprod".to_string())),
        },
        #[cfg(target_arch = "aarch64")]
        "aarch64-i8mm-repack" => match tiercheck_aarch64::i8mm_repack::kernels() {
            Some(k) => Ok(k),
            None => Err(tiercheck_aarch64::i8mm_repack::unavailable_reason()
                .unwrap_or_else(|| "cpu lacks i8mm".to_string())),
        },
        other if other.starts_with("hip-") => tiercheck_hip::kernels(other),
        other if other.starts_with("aarch64-") && !cfg!(target_arch = "aarch64") => {
            Err(format!("`{other}` is native on aarch64 only (this is {})", std::env::consts::ARCH))
        }
        other if other.starts_with("x86_64-") && !cfg!(target_arch = "x86_64") => {
            Err(format!("`{other}` is native on x86_64 only (this is {})", std::env::consts::ARCH))
        }
        other => Err(format!("no native implementation of `{other}` in this build")),
    }
}

/// Whether `lane` has a native implementation in some build (on some target), so
/// that the harness owes it native trials: ignored with the reason where this host
/// cannot run them. `ref` is portable by definition.
pub fn has_native(lane: &Lane) -> bool {
    lane.name != "ref"
}

/// All known lanes.
pub fn all() -> &'static [&'static Lane] {
    LANES
}

/// Look up a lane by name, with a helpful error.
pub fn find(name: &str) -> Result<&'static Lane, String> {
    tiercheck_core::lane(name).ok_or_else(|| {
        let names: Vec<&str> = LANES.iter().map(|l| l.name).collect();
        format!("unknown lane `{name}`; known lanes: {}", names.join(", "))
    })
}

/// Choose the implementation of `lane` to run.
pub fn choose(lane: &'static Lane, imp: Impl) -> Result<Chosen, String> {
    match imp {
        Impl::Portable => Ok(Chosen { lane, kernels: lane.portable, native: false }),
        Impl::Native => native(lane)
            .map(|kernels| Chosen { lane, kernels, native: true })
            .map_err(|why| format!("--impl native: {why}")),
        Impl::Auto => Ok(match native(lane) {
            Ok(kernels) => Chosen { lane, kernels, native: true },
            Err(_) => Chosen { lane, kernels: lane.portable, native: false },
        }),
    }
}

/// The elementwise and attention kernels of a chosen lane implementation: the portable
/// form of the lane's [`tiercheck_core::elem::ElemFlavour`], or its native SIMD form
/// where the architecture crate has one and the CPU runs it.
pub fn elem_ops(chosen: &Chosen) -> &'static dyn tiercheck_core::elem::ElemOps {
    let flavour = chosen.lane.recipe.elem;
    if chosen.native {
        if let Some(n) = native_elem(flavour) {
            return n;
        }
    }
    tiercheck_core::elem::portable(flavour)
}

/// The native elementwise kernels of `flavour` where this build has them and the CPU
/// runs them (runtime detection in the architecture crate).
fn native_elem(
    flavour: tiercheck_core::elem::ElemFlavour,
) -> Option<&'static dyn tiercheck_core::elem::ElemOps> {
    use tiercheck_core::elem::{ElemFlavour, ElemOps};
    match flavour {
        #[cfg(target_arch = "x86_64")]
        ElemFlavour::Avx2 => tiercheck_x86_64::elem::kernels().map(|k| k as &'static dyn ElemOps),
        #[cfg(target_arch = "aarch64")]
        ElemFlavour::Neon => tiercheck_aarch64::elem::kernels().map(|k| k as &'static dyn ElemOps),
        _ => None,
    }
}
