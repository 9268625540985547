//! tiercheck-accel: the accelerated forms of tiercheck-core's portable twins — the same
//! bits, computed with the host's SIMD.
//!
//! A twin's contract is its bits, not its scalar code. The scalar twins in tiercheck-core
//! stay the readable specification; where a twin's cost lies in an exact integer stage
//! (the byte products and sums of a quantized dot product), this crate computes that
//! stage with the host's vector instructions and keeps the twin's float operations, in
//! its order, around it. What makes this exact:
//!
//! - **Integer stages**: every sum here is a sum of integer products that fits in i32
//!   (the bounds are stated per function), so any grouping and order of the additions
//!   gives the same integer. The byte instructions used cannot saturate or wrap on the
//!   operands they get: `_mm256_maddubs_epi16` takes 4- or 6-bit unsigned values against
//!   signed bytes (a pair sum at most 2 * 63 * 128 = 16128 in magnitude), signed-by-signed
//!   products are widened to i16 first (`_mm256_cvtepi8_epi16`, `_mm256_madd_epi16`).
//! - **Float stages**: the accelerated functions perform the scalar twin's IEEE
//!   operations one for one (a separate multiply and add stay separate, a fused one is an
//!   FMA3 instruction, a lane-wise 4-float accumulation is one SSE register); Rust never
//!   contracts or reassociates float arithmetic, whatever the target features.
//!
//! **Layout.** Each file accelerates the twin file at the same path in tiercheck-core
//! (`src/arch/x86_64/avx2/vec_dot.rs` here, `kernels/core/src/arch/x86_64/avx2/vec_dot.rs`
//! there); the shared integer primitives are [`x86`] (AVX2) and `neon` (aarch64).
//!
//! **Dispatch.** Every accelerated entry point has one slot in tiercheck-core
//! (`tiercheck_core::accel::Slot`, read by the twin's first line). [`install`] detects
//! the CPU's features once ([`Host`]) and fills the slots the host can serve; each file
//! here has one `install` function that names its slots. Nothing in this crate runs
//! before [`install`] chose it, so no instruction the CPU lacks is ever executed. The
//! twins run their scalar code where a slot is empty or the thread is inside
//! `tiercheck_core::accel::with_scalar`.
//!
//! Where the accelerated forms are used:
//!
//! - the aarch64 twins' `nrc == 1` vec_dot kernels of all twelve weight types
//!   (`arch::aarch64::neon::vec_dot`, which the i8mm and SVE lanes share for their
//!   single-row dots; for Q4_1, Q5_0 and Q5_1 the pair loop, the scalar tails staying
//!   in the twin; the SVE lanes' own Q4_0/Q8_0 kernels and Q2_K kernel at 128 and 256
//!   bits, `arch::aarch64::sve::vec_dot`) and the Q6_K integer sum every aarch64 twin
//!   shares (`q6_k_isum`);
//! - the aarch64 repacked twins' integer stages: Q4_K, Q5_K and Q6_K eight rows at a
//!   time (`x86::q4kx8_dots`, `x86::q5kx8_dots`, `x86::q6kx8_isums`), Q8_0, Q4_0 and
//!   IQ4_NL four rows at a time (`x86::q8_0x4_isums`, `x86::nib4x4_isums`, 4- and
//!   8-byte interleaves), and the float sides of their Q4_0/Q8_0/IQ4_NL, Q5_K and Q6_K
//!   gemv and Q5_K and Q6_K gemm (the rows in SSE/AVX lanes, the f16 scales by F16C,
//!   or the scalar float code compiled with FMA), as `x86_64-avx2-repack`'s Q4_K, Q4_0
//!   and IQ4_NL 8x8 gemv (`x86::b32x8_isums`);
//! - the x86 lanes' vec_dot twins (`arch::x86_64::avx2::vec_dot`): the tier's own
//!   integer lanes (for Q4_0/Q8_0, Q5_0, IQ4_NL and IQ4_XS its `sign`/`maddubs`/`madd`
//!   sequence, `x86::mul_sum_i8_lanes`; for Q4_1, Q5_1, Q2_K, Q3_K and Q5_K
//!   `maddubs`/`madd` on the unsigned codes, `x86::q2k_lanes` and its siblings scaling
//!   each 32-byte run per sub-block) and its eight-lane FMA accumulation (the eight
//!   types beside Q4_0, Q8_0, Q4_K and Q6_K on x86-64 hosts only); on aarch64 hosts the
//!   same lanes from NEON widening products (`neon::q4k_lanes`, `neon::q6k_lanes`,
//!   `neon::bsums_lanes`, `neon::mul_sum_i8_lanes`) and the accumulation as two
//!   four-float `fmla` vectors; with the scalar twins asked for, the same scalar code
//!   compiled with AVX2 and FMA (the slots' `spec` entry);
//! - the portable elementwise loops (`elem`): the same Rust compiled with FMA;
//! - the GPU lanes' MMVQ warp emulation (`gpu::mmvq`: every thread of one weight block
//!   at once in AVX2 lanes, compiled with FMA so each fused multiply-add is one
//!   instruction; the warps' additions and the butterfly eight lanes at a time; in a
//!   matmul, each activation column's scales and group sums once for all rows; all
//!   eleven weight types, the eight besides Q4_K, Q6_K and Q8_0 through
//!   `BlockForms::other_block`, their Q4_1/Q5_1 f16 scale products by `vcvtps2ph`); on
//!   aarch64 hosts the same forms with NEON, four threads per vector (the eight other
//!   types through the twin's generic block forms with NEON group dots).
//!
//! Those of the forms that read f16 scales directly need F16C as well (every CPU with
//! AVX2 has it; it is detected all the same, and without it the scalar form runs).
//! The other twins run their scalar form everywhere (docs/PERFORMANCE.md has the
//! figures).

// Kernels index with explicit loop counters on purpose: each loop mirrors the twin it
// accelerates, so a reader can check one against the other line by line.
#![allow(clippy::needless_range_loop)]

mod arch;
mod elem;
mod gpu;
#[cfg(target_arch = "aarch64")]
mod neon;
#[cfg(target_arch = "x86_64")]
pub mod x86;

use std::sync::Once;

/// What this CPU offers the accelerated forms, detected once (the only feature
/// detection of this crate).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Host {
    /// x86-64 AVX2 and FMA.
    pub avx2_fma: bool,
    /// x86-64 F16C (with `avx2_fma`: the forms that convert f16 scales by `vcvtph2ps`).
    pub f16c: bool,
    /// aarch64 NEON (part of every aarch64 CPU).
    pub neon: bool,
}

impl Host {
    /// This CPU's answer, through tiercheck-core's one detection cache.
    pub fn detect() -> Host {
        use tiercheck_core::detect::cpu_has;
        let x86 = cfg!(target_arch = "x86_64");
        let arm = cfg!(target_arch = "aarch64");
        Host {
            avx2_fma: x86 && cpu_has("avx2") && cpu_has("fma"),
            f16c: x86 && cpu_has("f16c"),
            neon: arm && cpu_has("neon"),
        }
    }
}

/// Fills every slot of tiercheck-core this host can serve (once per process; later
/// calls return at once). Called by `tiercheck-lanes` before it hands out a lane; a
/// program using tiercheck-core's twins directly calls it itself.
pub fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let host = Host::detect();
        arch::install(host);
        elem::install(host);
        gpu::install(host);
        if host.avx2_fma {
            tiercheck_core::accel::set_description("avx2+fma");
        } else if host.neon {
            tiercheck_core::accel::set_description("neon");
        }
    });
}

/// An f16 scale field (little-endian bytes) as f32, exactly as the twins convert it.
#[allow(dead_code)]
#[inline]
pub(crate) fn f16(b: [u8; 2]) -> f32 {
    tiercheck_core::fp16::f16_bits_to_f32(u16::from_le_bytes(b))
}

/// The eight (scale, min) pairs of a Q4_K superblock's 12 scale bytes at once, as
/// ggml's kernels unpack them (`utmp` with `kmask1..3`): `scales[j], mins[j]` equal
/// `tiercheck_core::blocks::q4_k::scale_min_k4(j)` for every j (checked exhaustively
/// over the bytes that matter in the tests).
#[inline]
pub fn q4k_scales_mins(q: &[u8; 12]) -> ([u8; 8], [u8; 8]) {
    const KMASK1: u32 = 0x3f3f_3f3f;
    const KMASK2: u32 = 0x0f0f_0f0f;
    const KMASK3: u32 = 0x0303_0303;
    let w = |i: usize| u32::from_le_bytes([q[4 * i], q[4 * i + 1], q[4 * i + 2], q[4 * i + 3]]);
    let (u0, u1, u2) = (w(0), w(1), w(2));
    let u3 = ((u2 >> 4) & KMASK2) | (((u1 >> 6) & KMASK3) << 4);
    let m_lo = u1 & KMASK1;
    let s_hi = (u2 & KMASK2) | (((u0 >> 6) & KMASK3) << 4);
    let s_lo = u0 & KMASK1;
    let mut sc = [0u8; 8];
    let mut mn = [0u8; 8];
    sc[..4].copy_from_slice(&s_lo.to_le_bytes());
    sc[4..].copy_from_slice(&s_hi.to_le_bytes());
    mn[..4].copy_from_slice(&m_lo.to_le_bytes());
    mn[4..].copy_from_slice(&u3.to_le_bytes());
    (sc, mn)
}

/// The (scale, min) pairs of all eight rows of a `block_q4_Kx8` or `block_q5_Kx8` from
/// its 96 scale bytes, by sub-block then row: `.0[s][r], .1[s][r]` equal
/// `BlockQ4Kx8::scale_min(r, s)`.
#[inline]
pub fn q4kx8_scales_mins(scales: &[u8; 96]) -> ([[u8; 8]; 8], [[u8; 8]; 8]) {
    let mut sc = [[0u8; 8]; 8];
    let mut mn = [[0u8; 8]; 8];
    for s in 0..8 {
        let q: &[u8; 12] = scales[12 * s..12 * s + 12].try_into().expect("12 bytes");
        (sc[s], mn[s]) = q4k_scales_mins(q);
    }
    (sc, mn)
}

#[cfg(test)]
mod agreement;
#[cfg(test)]
mod testing;
#[cfg(test)]
mod tests;
