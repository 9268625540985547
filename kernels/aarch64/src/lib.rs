//! Native aarch64 lanes of tiercheck.
//!
//! Same conventions as `tiercheck-x86_64`: one entry point `kernels()` per lane
//! ([`tiercheck_core::lane::NativeEntry`]), runtime detection cached once, kernels handed
//! out only where the CPU has every feature, `unsafe` `#[target_feature]` kernels, a
//! portable twin at the same path in `tiercheck-core` (`arch::aarch64::neon::vec_dot`
//! beside `neon::vec_dot`, ...), and one table of entry points, `NATIVE`. The dotprod
//! instruction (`sdot`) is reached through stable inline assembly, since its intrinsic
//! is still unstable; CPUs without dotprod compute the same integer sums with plain NEON
//! widening multiplies, so the bits do not depend on the path.
//!
//! On other architectures this crate is empty.

#![cfg(target_arch = "aarch64")]

pub mod elem;
pub mod i8mm;
pub mod i8mm_repack;
pub mod neon;
pub mod neon_repack;
mod simd;
pub mod sve;
pub mod sve_repack;

use tiercheck_core::elem::ElemFlavour;
use tiercheck_core::lane::{NativeElem, NativeLane};

/// The native lanes of this crate.
pub static NATIVE: &[NativeLane] = &[
    NativeLane { lane: "aarch64-neon", kernels: neon::kernels },
    NativeLane { lane: "aarch64-neon-repack", kernels: neon_repack::kernels },
    NativeLane { lane: "aarch64-i8mm", kernels: i8mm::kernels },
    NativeLane { lane: "aarch64-i8mm-repack", kernels: i8mm_repack::kernels },
    NativeLane { lane: "aarch64-sve128", kernels: sve::kernels128 },
    NativeLane { lane: "aarch64-sve128-repack", kernels: sve_repack::kernels128 },
    NativeLane { lane: "aarch64-sve256", kernels: sve::kernels256 },
    NativeLane { lane: "aarch64-sve256-repack", kernels: sve_repack::kernels256 },
];

/// The native elementwise kernels of this crate.
pub static NATIVE_ELEM: &[NativeElem] = &[
    NativeElem { flavour: ElemFlavour::Neon, ops: elem::kernels },
    NativeElem { flavour: ElemFlavour::NeonNoLlamafile, ops: elem::kernels_no_llamafile },
    NativeElem { flavour: ElemFlavour::Sve128, ops: sve::elem::kernels128 },
    NativeElem { flavour: ElemFlavour::Sve256, ops: sve::elem::kernels256 },
];
