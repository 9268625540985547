//! The native `aarch64-sve128` and `aarch64-sve256` lanes: ggml's aarch64 `armv8.6_2` /
//! `armv8.6_1` variants on a CPU with 128-bit / 256-bit SVE vectors, repack off. Twins:
//! `tiercheck_core::arch::aarch64::sve::AARCH64_SVE128` / `AARCH64_SVE256`.
//!
//! What runs in which instruction set, and why:
//!
//! - **SVE assembly** ([`vec_dot`], [`mod@elem`]): every kernel whose result depends on the
//!   vector length: the Q4_0/Q8_0 `nrc == 1` vec_dot (how many lanes a block fills, the
//!   FADDV tree over them), Q2_K's float lanes (the integer lanes they consume by NEON)
//!   and the elementwise loops (predicated tails, 4- or 8-float
//!   accumulators, FADDV). Rust stable has no SVE intrinsics, so these are `asm!` blocks
//!   inside `#[target_feature(enable = "sve")]` functions, every register they write
//!   declared (the vector registers by their NEON names, which share the SVE registers'
//!   units; the predicates by name).
//! - **NEON and i8mm** (the native `aarch64-neon` / `aarch64-i8mm` kernels): the paths
//!   ggml's SVE build computes with the same float operations on the same lanes at every
//!   vector length: the K-quant `nrc == 1` vec_dot (NEON's order, the twin's docs), the
//!   Q4_0/Q8_0 2x2 tiles (the i8mm build's NEON code, compiled unchanged) and the fused
//!   Q4_K/Q6_K 2x2 tiles (ggml's `svmmla` tiles have exact integer parts and one fused
//!   `svmla` per output lane, which `vfmaq_f32` on the same lane performs bit for bit:
//!   both are the IEEE fused multiply-add).
//!
//! The lanes need NEON, dotprod, i8mm and SVE, and the vector length of their tier:
//! [`kernels128()`] on any other CPU answers why (a CPU with 256-bit SVE cannot run the
//! 128-bit lane, its FADDV trees and lane counts being other ones).

pub mod elem;
pub mod vec_dot;

use std::sync::OnceLock;

use tiercheck_core::arch::aarch64::i8mm::{matmul_nrc2, Tile};
use tiercheck_core::arch::aarch64::sve::{SveTwin, AARCH64_SVE128, AARCH64_SVE256};
use tiercheck_core::blocks::cast_blocks;
use tiercheck_core::detect::FeatureSet;
use tiercheck_core::lane::Unavailable;
use tiercheck_core::quant::ActRule;
use tiercheck_core::{GgmlType, KernelError, Kernels, WeightMatrix};

use crate::{i8mm, neon};

/// NEON, dotprod, i8mm and SVE, detected once.
pub(crate) static FEATURES: FeatureSet = FeatureSet::new(&["neon", "dotprod", "i8mm", "sve"]);

/// The SVE vector length in bits (`rdvl`).
///
/// # Safety
/// The CPU must support SVE.
#[target_feature(enable = "sve")]
unsafe fn rdvl_bits() -> usize {
    let bytes: usize;
    // SAFETY: SVE is guaranteed by the caller; `rdvl` only writes its register.
    unsafe {
        core::arch::asm!("rdvl {0}, #1", out(reg) bytes, options(pure, nomem, nostack));
    }
    bytes * 8
}

/// This CPU's SVE vector length in bits, or `None` without SVE (detected once).
pub fn vector_bits() -> Option<usize> {
    static BITS: OnceLock<Option<usize>> = OnceLock::new();
    *BITS.get_or_init(|| {
        if tiercheck_core::detect::cpu_has("sve") {
            // SAFETY: SVE was detected.
            Some(unsafe { rdvl_bits() })
        } else {
            None
        }
    })
}

/// `Ok(())` when the CPU has every feature of the SVE lanes and `bits`-bit vectors.
pub(crate) fn check(lane: &'static str, bits: usize) -> Result<(), Unavailable> {
    FEATURES.check()?;
    match vector_bits() {
        Some(has) if has == bits => Ok(()),
        Some(has) => Err(Unavailable::SveLength { lane, needs: bits, has }),
        None => Err(Unavailable::CpuLacks(vec!["sve"])),
    }
}

/// Native kernels of one SVE vector length; only [`kernels128()`] / [`kernels256()`]
/// hand them out, after checking the features and the length.
#[derive(Debug)]
pub struct SveNative {
    /// The lane's twin (activation rules, dequantization, path names).
    twin: &'static SveTwin,
    /// The Q4_0 `nrc == 1` kernel of this length.
    q4_0: unsafe fn(
        &[tiercheck_core::blocks::BlockQ4_0],
        &[tiercheck_core::blocks::BlockQ8_0],
    ) -> f32,
    /// The Q8_0 `nrc == 1` kernel of this length.
    q8_0: unsafe fn(
        &[tiercheck_core::blocks::BlockQ8_0],
        &[tiercheck_core::blocks::BlockQ8_0],
    ) -> f32,
    /// The Q2_K kernel of this length.
    q2_k:
        unsafe fn(&[tiercheck_core::blocks::BlockQ2K], &[tiercheck_core::blocks::BlockQ8K]) -> f32,
}

pub(crate) static KERNELS128: SveNative = SveNative {
    twin: &tiercheck_core::arch::aarch64::sve::SVE128_TWIN,
    q4_0: vec_dot::vec_dot_q4_0_q8_0_sve128,
    q8_0: vec_dot::vec_dot_q8_0_q8_0_sve128,
    q2_k: vec_dot::vec_dot_q2_k_q8_k_sve128,
};

pub(crate) static KERNELS256: SveNative = SveNative {
    twin: &tiercheck_core::arch::aarch64::sve::SVE256_TWIN,
    q4_0: vec_dot::vec_dot_q4_0_q8_0_sve256,
    q8_0: vec_dot::vec_dot_q8_0_q8_0_sve256,
    q2_k: vec_dot::vec_dot_q2_k_q8_k_sve256,
};

/// The native `aarch64-sve128` kernels, or why this CPU cannot run them.
pub fn kernels128() -> Result<&'static dyn Kernels, Unavailable> {
    check(AARCH64_SVE128.name, 128)?;
    Ok(&KERNELS128)
}

/// The native `aarch64-sve256` kernels, or why this CPU cannot run them.
pub fn kernels256() -> Result<&'static dyn Kernels, Unavailable> {
    check(AARCH64_SVE256.name, 256)?;
    Ok(&KERNELS256)
}

/// One 2x2 tile by the native kernels of the SVE builds: Q4_K and Q6_K fused (the SVE +
/// i8mm branch), Q4_0 and Q8_0 the i8mm build's. Reached only through [`SveNative`].
pub(crate) fn tile(
    ty: GgmlType,
    atype: GgmlType,
    x: [&[u8]; 2],
    y: [&[u8]; 2],
) -> Result<Tile, KernelError> {
    Ok(match ty {
        // SAFETY: only `SveNative` calls this, and only `kernels128()` / `kernels256()`
        // hand one out, after checking NEON, dotprod, i8mm and SVE.
        GgmlType::Q4_K => unsafe {
            i8mm::vec_dot2::vec_dot2_q4_k_q8_k::<true>(
                [cast_blocks(ty, x[0])?, cast_blocks(ty, x[1])?],
                [cast_blocks(atype, y[0])?, cast_blocks(atype, y[1])?],
            )
        },
        // SAFETY: as above.
        GgmlType::Q6_K => unsafe {
            i8mm::vec_dot2::vec_dot2_q6_k_q8_k::<true>(
                [cast_blocks(ty, x[0])?, cast_blocks(ty, x[1])?],
                [cast_blocks(atype, y[0])?, cast_blocks(atype, y[1])?],
            )
        },
        _ => i8mm::tile(ty, atype, x, y)?,
    })
}

impl Kernels for SveNative {
    fn act_rule(&self, wtype: GgmlType) -> Result<ActRule, KernelError> {
        self.twin.act_rule(wtype)
    }

    fn quantize_act(&self, wtype: GgmlType, x: &[f32]) -> Result<Vec<u8>, KernelError> {
        neon::KERNELS.quantize_act(wtype, x)
    }

    fn dequantize(&self, ty: GgmlType, bytes: &[u8], out: &mut [f32]) -> Result<(), KernelError> {
        neon::KERNELS.dequantize(ty, bytes, out)
    }

    fn vec_dot(&self, wtype: GgmlType, w_row: &[u8], act: &[u8]) -> Result<f32, KernelError> {
        let atype = self.act_rule(wtype)?.format();
        let k = w_row.len() / wtype.type_size() * wtype.block_size();
        if !w_row.len().is_multiple_of(wtype.type_size()) || atype.row_bytes(k) != Some(act.len()) {
            return self.twin.vec_dot(wtype, w_row, act); // the precise error
        }
        match wtype {
            GgmlType::Q4_0 => {
                let (x, y) = (cast_blocks(wtype, w_row)?, cast_blocks(atype, act)?);
                // SAFETY: SVE at this kernel's length was checked by `kernels128/256`.
                Ok(unsafe { (self.q4_0)(x, y) })
            }
            GgmlType::Q8_0 => {
                let (x, y) = (cast_blocks(wtype, w_row)?, cast_blocks(atype, act)?);
                // SAFETY: as above.
                Ok(unsafe { (self.q8_0)(x, y) })
            }
            GgmlType::Q2_K => {
                let (x, y) = (cast_blocks(wtype, w_row)?, cast_blocks(atype, act)?);
                // SAFETY: as above (NEON and dotprod were checked with SVE).
                Ok(unsafe { (self.q2_k)(x, y) })
            }
            // The K-quants' `nrc == 1` order is NEON's (module doc).
            _ => neon::KERNELS.i8mm_build_vec_dot(wtype, w_row, act),
        }
    }

    fn matmul_quantized(
        &self,
        w: &WeightMatrix<'_>,
        act: &[u8],
        m: usize,
    ) -> Result<Vec<f32>, KernelError> {
        matmul_nrc2(self, w, act, m, tiercheck_core::lane::TierPool::threads(1), tile)
    }

    fn matmul_quantized_tier(
        &self,
        w: &WeightMatrix<'_>,
        act: &[u8],
        m: usize,
        tier: tiercheck_core::lane::TierPool,
    ) -> Result<Vec<f32>, KernelError> {
        matmul_nrc2(self, w, act, m, tier, tile)
    }

    fn plain_split(&self, wtype: GgmlType, n: usize, m: usize) -> Option<usize> {
        self.twin.plain_split(wtype, n, m)
    }

    fn plain_path(&self, wtype: GgmlType, m: usize) -> &'static str {
        self.twin.plain_path(wtype, m)
    }
}
