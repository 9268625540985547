//! The native NEON elementwise kernels (`tiercheck_aarch64::elem`) give the bits of
//! their portable twin (`tiercheck_core::elem::portable(ElemFlavour::Neon)`) on edge
//! and random inputs: `ggml_v_expf` (through `soft_max` with `max = 0`, where
//! `x - 0 == x`), `ggml_v_silu` (through `swiglu`), softmax of every length 1..=70 (the
//! scalar tails) with and without a `-inf`-masked suffix, `ggml_vec_dot_f32` of every
//! length 0..=200 (the leftover loop) and the tinyBLAS dot. Results that are NaN on both
//! sides count as equal (NaN payloads are not part of the contract). The checks live
//! in `tiercheck_core::elem_conformance` (shared with the other architecture). Skipped,
//! with the reason printed, on CPUs without NEON. Runs under qemu-user when
//! cross-built.

#![cfg(target_arch = "aarch64")]

use tiercheck_core::elem::{ElemFlavour, ElemOps};
use tiercheck_core::elem_conformance as conformance;

const FLAVOUR: ElemFlavour = ElemFlavour::Neon;

fn native() -> Option<&'static dyn ElemOps> {
    match tiercheck_aarch64::elem::kernels() {
        Some(k) => Some(k),
        None => {
            eprintln!(
                "skipped: {}",
                tiercheck_aarch64::elem::unavailable_reason().unwrap_or_default()
            );
            None
        }
    }
}

/// Run one conformance check where this CPU has the native kernels.
fn check(f: fn(&dyn ElemOps, ElemFlavour) -> String) {
    if let Some(n) = native() {
        eprintln!("{}", f(n, FLAVOUR));
    }
}

#[test]
fn expf_and_silu_match_the_twin() {
    check(conformance::expf_and_silu);
}

#[test]
fn soft_max_every_length_matches_the_twin() {
    check(conformance::soft_max_every_length);
}

#[test]
fn swiglu_every_length_matches_the_twin() {
    check(conformance::swiglu_every_length);
}

#[test]
fn dot_f32_every_length_matches_the_twin() {
    check(conformance::dot_f32_every_length);
}

#[test]
fn sgemm_dot_matches_the_twin() {
    check(conformance::sgemm_dot);
}

/// The comparison can fail: the native kernels differ from another flavour's twin.
#[test]
fn native_differs_from_other_flavours() {
    check(conformance::differs_from_other_flavours);
}
