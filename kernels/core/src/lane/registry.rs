//! The one contract every native lane offers, and the tables the harness loops over.
//!
//! Each architecture crate exports one `NATIVE: &[NativeLane]` (and one
//! `NATIVE_ELEM: &[NativeElem]` for its elementwise kernels): the lane name and the
//! entry point. An entry point returns the native kernels only where the CPU (or GPU)
//! has every feature they need, and otherwise an [`Unavailable`] that names what is
//! missing; it is the only way to reach `#[target_feature]` code from safe code, so
//! nothing can execute an instruction the hardware lacks.

use core::fmt;

use super::Kernels;
use crate::elem::{ElemFlavour, ElemOps};

/// Why a native implementation cannot run here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unavailable {
    /// The CPU lacks these features (`cpu lacks avx2, fma`).
    CpuLacks(Vec<&'static str>),
    /// The lane's native code is compiled for another architecture.
    OtherArch {
        /// The lane.
        lane: &'static str,
        /// Where its native code runs.
        arch: &'static str,
        /// This build's architecture.
        host: &'static str,
    },
    /// The lane is portable by definition (`ref`, the specification).
    PortableOnly(&'static str),
    /// No device, no runtime or no device code in this build (the runtime's or the
    /// build's own words).
    Device(String),
    /// This build has no native entry for the lane.
    NotInBuild(&'static str),
    /// The CPU has SVE, but not the vector length the lane's tier has (the kernels'
    /// lane layouts and reductions depend on it).
    SveLength {
        /// The lane.
        lane: &'static str,
        /// The vector length the lane needs, in bits.
        needs: usize,
        /// This CPU's vector length, in bits.
        has: usize,
    },
}

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unavailable::CpuLacks(missing) => write!(f, "cpu lacks {}", missing.join(", ")),
            Unavailable::OtherArch { lane, arch, host } => {
                write!(f, "`{lane}` is native on {arch} only (this is {host})")
            }
            Unavailable::PortableOnly(lane) => {
                write!(f, "`{lane}` is the specification: it has only the portable form")
            }
            Unavailable::Device(why) => f.write_str(why),
            Unavailable::NotInBuild(lane) => {
                write!(f, "no native implementation of `{lane}` in this build")
            }
            Unavailable::SveLength { lane, needs, has } => {
                write!(f, "`{lane}` needs {needs}-bit SVE vectors; this CPU's are {has}-bit")
            }
        }
    }
}

impl std::error::Error for Unavailable {}

impl From<Unavailable> for String {
    fn from(u: Unavailable) -> String {
        u.to_string()
    }
}

impl Unavailable {
    /// `Ok(())` when every `(feature, present)` pair is present, else the missing ones.
    pub fn check(features: &[(&'static str, bool)]) -> Result<(), Unavailable> {
        let missing: Vec<&'static str> =
            features.iter().filter(|(_, present)| !present).map(|(n, _)| *n).collect();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(Unavailable::CpuLacks(missing))
        }
    }
}

/// A native lane's entry point: its kernels, or why they cannot run here.
pub type NativeEntry = fn() -> Result<&'static dyn Kernels, Unavailable>;

/// One row of an architecture crate's table of native lanes.
#[derive(Clone, Copy)]
pub struct NativeLane {
    /// The lane's name (as in [`crate::LANES`]).
    pub lane: &'static str,
    /// Its entry point.
    pub kernels: NativeEntry,
}

impl fmt::Debug for NativeLane {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NativeLane").field("lane", &self.lane).finish_non_exhaustive()
    }
}

/// A native elementwise implementation's entry point.
pub type NativeElemEntry = fn() -> Result<&'static dyn ElemOps, Unavailable>;

/// One row of an architecture crate's table of native elementwise kernels.
#[derive(Clone, Copy)]
pub struct NativeElem {
    /// The flavour it implements.
    pub flavour: ElemFlavour,
    /// Its entry point.
    pub ops: NativeElemEntry,
}

impl fmt::Debug for NativeElem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NativeElem").field("flavour", &self.flavour).finish_non_exhaustive()
    }
}

/// The entry of `lane` in `tables`, if one of them has it.
pub fn native_entry(tables: &[&'static [NativeLane]], lane: &str) -> Option<NativeEntry> {
    tables.iter().flat_map(|t| t.iter()).find(|n| n.lane == lane).map(|n| n.kernels)
}
