//! Native x86-64 lanes of tiercheck.
//!
//! Each lane module (`avx2`, ...) offers one entry point, `kernels() ->
//! Result<&'static dyn Kernels, Unavailable>` ([`tiercheck_core::lane::NativeEntry`]),
//! which hands out the lane's kernels only when the CPU has every feature they need
//! (runtime detection, cached once per process) and otherwise names the missing ones.
//! Nothing here can execute an instruction the CPU lacks: the only way to reach a
//! `#[target_feature]` function from safe code is through `kernels()`. [`NATIVE`] and
//! [`NATIVE_ELEM`] list the entry points; the harness loops over them.
//!
//! Every kernel has a portable twin at the same path in `tiercheck-core`
//! (`tiercheck_core::arch::x86_64::avx2::vec_dot` beside [`avx2::vec_dot`], ...) that
//! performs the same float operations in the same order; the test harness checks that
//! the two agree bitwise on every golden case.
//!
//! On other architectures this crate is empty.

#![cfg(target_arch = "x86_64")]

pub mod avx2;
pub mod avx2_repack;
pub mod avx512;
pub mod elem;
pub mod elem512;

use tiercheck_core::elem::ElemFlavour;
use tiercheck_core::lane::{NativeElem, NativeLane};

/// The native lanes of this crate.
pub static NATIVE: &[NativeLane] = &[
    NativeLane { lane: "x86_64-avx2", kernels: avx2::kernels },
    NativeLane { lane: "x86_64-avx2-repack", kernels: avx2_repack::kernels },
    NativeLane { lane: "x86_64-avx512", kernels: avx512::kernels },
];

/// The native elementwise kernels of this crate.
pub static NATIVE_ELEM: &[NativeElem] = &[
    NativeElem { flavour: ElemFlavour::Avx2, ops: elem::kernels },
    NativeElem { flavour: ElemFlavour::Avx512, ops: elem512::kernels },
];
