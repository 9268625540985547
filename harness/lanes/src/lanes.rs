//! The lanes this build knows, paired with their native implementations.
//!
//! Portable implementations come from `tiercheck-core` ([`tiercheck_core::LANES`]);
//! native ones from the architecture crates, and for the HIP lanes the device kernels
//! of `tiercheck-hip` (built with the `hip` feature, run where a device exists). Each
//! architecture crate exports one table (`NATIVE`, `NATIVE_ELEM`) of entry points with
//! one contract; this module loops over the tables and never matches lane names. A
//! native implementation is offered only when the running CPU (or GPU) has every
//! feature it needs (runtime detection), so nothing here can execute an instruction
//! the hardware lacks. Every function here that hands out a lane or its kernels first
//! installs the accelerated forms of the portable twins (`tiercheck_accel::install`,
//! once per process), so a twin runs at the host's speed wherever it came from.

use tiercheck_core::elem::{ElemFlavour, ElemOps};
use tiercheck_core::lane::{native_entry, Arch, NativeElem, NativeLane, Unavailable};
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

/// A lane implementation chosen to run: its matmul kernels and its elementwise loops.
#[derive(Clone, Copy)]
pub struct Chosen {
    /// The lane.
    pub lane: &'static Lane,
    /// The matmul and dequantization kernels.
    pub kernels: &'static dyn Kernels,
    /// The elementwise and attention kernels: the portable form of the lane's
    /// [`ElemFlavour`], or its native SIMD form where the kernels are native, the
    /// architecture crate has one and the CPU runs it.
    pub elem: &'static dyn ElemOps,
    /// Whether the kernels are the native ones.
    pub native: bool,
}

impl Chosen {
    /// The portable twin of `lane`: its portable kernels and elementwise loops.
    pub fn portable(lane: &'static Lane) -> Chosen {
        tiercheck_accel::install();
        Chosen {
            lane,
            kernels: lane.portable,
            elem: tiercheck_core::elem::portable(lane.recipe.elem),
            native: false,
        }
    }

    /// The native kernels of `lane`, with its native elementwise loops where this build
    /// and CPU have them (else the portable ones).
    fn with_native(lane: &'static Lane, kernels: &'static dyn Kernels) -> Chosen {
        let flavour = lane.recipe.elem;
        let elem = native_elem(flavour).unwrap_or_else(|| tiercheck_core::elem::portable(flavour));
        Chosen { lane, kernels, elem, native: true }
    }

    /// `native` or `portable`.
    pub fn impl_name(&self) -> &'static str {
        if self.native {
            "native"
        } else {
            "portable"
        }
    }
}

/// The architecture crates' tables of native lanes compiled into this build: the HIP
/// device lanes everywhere (they report their own reason where there is no device or
/// no device code), the CPU crate of this build's architecture.
pub fn native_tables() -> Vec<&'static [NativeLane]> {
    let mut tables: Vec<&'static [NativeLane]> = vec![tiercheck_hip::NATIVE];
    #[cfg(target_arch = "x86_64")]
    tables.push(tiercheck_x86_64::NATIVE);
    #[cfg(target_arch = "aarch64")]
    tables.push(tiercheck_aarch64::NATIVE);
    tables
}

/// The native tables of this build against the lane registry: every row names a lane of
/// [`tiercheck_core::LANES`] of the table's architecture, no lane has two rows, and every
/// registered lane of an architecture compiled into this build (this CPU's, and the GPU
/// lanes of `tiercheck-hip`) has exactly one. The error lists every mismatch, so a
/// misspelt row can never turn a lane into "not in build".
pub fn check_native_tables() -> Result<(), String> {
    let mut problems = Vec::new();
    let mut rows: Vec<&'static str> = Vec::new();
    for table in native_tables() {
        for row in table {
            match tiercheck_core::lane(row.lane) {
                None => {
                    problems.push(format!("native row `{}` names no registered lane", row.lane))
                }
                Some(lane) if lane.arch == Arch::Portable => {
                    problems.push(format!("native row `{}` names a portable lane", row.lane))
                }
                Some(_) => {}
            }
            if rows.contains(&row.lane) {
                problems.push(format!("lane `{}` has two native rows", row.lane));
            }
            rows.push(row.lane);
        }
    }
    for lane in LANES {
        let here = match lane.arch {
            Arch::Portable => false,
            Arch::AmdGpu | Arch::NvidiaGpu => true,
            a => a.cpu_target_arch() == Some(std::env::consts::ARCH),
        };
        if here && !rows.contains(&lane.name) {
            problems.push(format!(
                "lane `{}` ({}) has no native row in this build's tables",
                lane.name,
                lane.arch.name()
            ));
        }
        if !here && rows.contains(&lane.name) {
            problems.push(format!(
                "lane `{}` ({}) has a native row in a table of another architecture",
                lane.name,
                lane.arch.name()
            ));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

/// The native implementation of `lane` on this host, or why there is none: a portable
/// lane has none, a CPU lane of another architecture is not in this build, and
/// otherwise the lane's entry point decides (runtime detection).
pub fn native(lane: &Lane) -> Result<&'static dyn Kernels, Unavailable> {
    tiercheck_accel::install();
    if lane.arch == Arch::Portable {
        return Err(Unavailable::PortableOnly(lane.name));
    }
    if let Some(arch) = lane.arch.cpu_target_arch() {
        if arch != std::env::consts::ARCH {
            return Err(Unavailable::OtherArch {
                lane: lane.name,
                arch,
                host: std::env::consts::ARCH,
            });
        }
    }
    match native_entry(&native_tables(), lane.name) {
        Some(entry) => entry(),
        None => Err(Unavailable::NotInBuild(lane.name)),
    }
}

/// Whether `lane` has a native implementation in some build (on some target), so
/// that the harness owes it native trials: ignored with the reason where this host
/// cannot run them. Portable lanes (`ref`) have none by definition.
pub fn has_native(lane: &Lane) -> bool {
    lane.arch != Arch::Portable
}

/// Installs the accelerated forms of the portable twins where this CPU serves them
/// (`tiercheck_accel::install`; once per process). Every function of this module that
/// hands out a lane calls it; a program that takes twins straight from
/// `tiercheck_core` calls it first.
pub fn install_accelerated() {
    tiercheck_accel::install();
}

/// All known lanes.
pub fn all() -> &'static [&'static Lane] {
    tiercheck_accel::install();
    LANES
}

/// Look up a lane by name, with a helpful error.
pub fn find(name: &str) -> Result<&'static Lane, String> {
    tiercheck_accel::install();
    tiercheck_core::lane(name).ok_or_else(|| {
        let names: Vec<&str> = LANES.iter().map(|l| l.name).collect();
        format!("unknown lane `{name}`; known lanes: {}", names.join(", "))
    })
}

/// Checks that every lane a target table names (`lanes`, and through it the models'
/// `require` and the builds' `proves`, which `tiercheck_targets` keeps within `lanes`) is
/// a lane of this registry; an unknown one is an error naming the table's file.
pub fn check_target_lanes(
    table: &tiercheck_targets::TargetTable,
) -> Result<(), tiercheck_targets::TargetError> {
    table.check_lanes(|name| tiercheck_core::lane(name).is_some())
}

/// Choose the implementation of `lane` to run.
pub fn choose(lane: &'static Lane, imp: Impl) -> Result<Chosen, String> {
    tiercheck_accel::install();
    match imp {
        Impl::Portable => Ok(Chosen::portable(lane)),
        Impl::Native => native(lane)
            .map(|kernels| Chosen::with_native(lane, kernels))
            .map_err(|why| format!("--impl native: {why}")),
        Impl::Auto => Ok(match native(lane) {
            Ok(kernels) => Chosen::with_native(lane, kernels),
            Err(_) => Chosen::portable(lane),
        }),
    }
}

/// The native elementwise kernels of `lane`'s flavour, or why this build or CPU has none.
pub fn native_elem_ops(lane: &Lane) -> Result<&'static dyn ElemOps, String> {
    tiercheck_accel::install();
    let flavour = lane.recipe.elem;
    #[cfg(target_arch = "x86_64")]
    let tables: &[&'static [NativeElem]] = &[tiercheck_x86_64::NATIVE_ELEM];
    #[cfg(target_arch = "aarch64")]
    let tables: &[&'static [NativeElem]] = &[tiercheck_aarch64::NATIVE_ELEM];
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    let tables: &[&'static [NativeElem]] = &[];
    let entry =
        tables.iter().flat_map(|t| t.iter()).find(|e| e.flavour == flavour).ok_or_else(|| {
            format!(
                "elementwise flavour {} has no native kernels on {}",
                flavour.name(),
                std::env::consts::ARCH
            )
        })?;
    (entry.ops)().map_err(|e| e.to_string())
}

/// Whether any architecture crate has native kernels of `flavour` (the x64 flavour has
/// none: ggml's baseline x86-64 loops are reproduced only portably; nor have the GPU
/// flavours, whose native form is a device).
pub fn flavour_has_native(flavour: ElemFlavour) -> bool {
    flavour != ElemFlavour::X64 && flavour.gpu_math().is_none()
}

/// The native elementwise kernels of `flavour` where this build has them and the CPU
/// runs them (runtime detection in the architecture crate).
fn native_elem(flavour: ElemFlavour) -> Option<&'static dyn ElemOps> {
    #[cfg(target_arch = "x86_64")]
    let tables: &[&'static [NativeElem]] = &[tiercheck_x86_64::NATIVE_ELEM];
    #[cfg(target_arch = "aarch64")]
    let tables: &[&'static [NativeElem]] = &[tiercheck_aarch64::NATIVE_ELEM];
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    let tables: &[&'static [NativeElem]] = &[];
    let entry = tables.iter().flat_map(|t| t.iter()).find(|e| e.flavour == flavour)?;
    (entry.ops)().ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_native_row_names_a_registered_lane_and_every_lane_has_its_row() {
        super::check_native_tables().unwrap();
    }
}
