//! The native `aarch64-i8mm` lane: the i8mm build's plain matmul with 2x2 `smmla`
//! vec_dot tiles ([`vec_dot2`]) where both row counts are even, and the native
//! `aarch64-neon` kernels for everything else (activations, dequantization, `nrc == 1`).
//! Needs NEON, dotprod and i8mm: on CPUs without them [`kernels()`] hands out nothing.
//! Twin: `tiercheck_core::arch::aarch64::i8mm::AARCH64_I8MM`.

pub mod vec_dot2;

use tiercheck_core::arch::aarch64::i8mm::I8mmTwin;
use tiercheck_core::arch::aarch64::i8mm::{matmul_nrc2, Tile};
use tiercheck_core::blocks::cast_blocks;
use tiercheck_core::lane::Unavailable;
use tiercheck_core::quant::ActRule;
use tiercheck_core::{GgmlType, KernelError, Kernels, WeightMatrix};

use crate::neon;
use tiercheck_core::detect::FeatureSet;

/// NEON, dotprod and i8mm (`smmla`), detected once; the repacked i8mm lane needs the
/// same.
pub(crate) static FEATURES: FeatureSet = FeatureSet::new(&["neon", "dotprod", "i8mm"]);

/// Native kernels; only [`kernels()`] hands them out, after checking the features.
#[derive(Debug)]
pub struct I8mmNative {
    _proof: (),
}

pub(crate) static KERNELS: I8mmNative = I8mmNative { _proof: () };

/// The native kernels, or the CPU features this CPU lacks (NEON, dotprod, i8mm).
pub fn kernels() -> Result<&'static dyn Kernels, Unavailable> {
    FEATURES.check()?;
    Ok(&KERNELS)
}

/// One 2x2 tile by the native kernels. Reached only through [`KERNELS`].
pub(crate) fn tile(
    ty: GgmlType,
    atype: GgmlType,
    x: [&[u8]; 2],
    y: [&[u8]; 2],
) -> Result<Tile, KernelError> {
    Ok(match ty {
        // SAFETY: only `KERNELS` calls this, and only `kernels()` hands it out, after
        // checking NEON, dotprod and i8mm.
        GgmlType::Q4_0 => unsafe {
            vec_dot2::vec_dot2_q4_0_q8_0(
                [cast_blocks(ty, x[0])?, cast_blocks(ty, x[1])?],
                [cast_blocks(atype, y[0])?, cast_blocks(atype, y[1])?],
            )
        },
        // SAFETY: as above.
        GgmlType::Q8_0 => unsafe {
            vec_dot2::vec_dot2_q8_0_q8_0(
                [cast_blocks(ty, x[0])?, cast_blocks(ty, x[1])?],
                [cast_blocks(atype, y[0])?, cast_blocks(atype, y[1])?],
            )
        },
        // SAFETY: as above.
        GgmlType::Q4_K => unsafe {
            vec_dot2::vec_dot2_q4_k_q8_k::<false>(
                [cast_blocks(ty, x[0])?, cast_blocks(ty, x[1])?],
                [cast_blocks(atype, y[0])?, cast_blocks(atype, y[1])?],
            )
        },
        // SAFETY: as above.
        GgmlType::Q6_K => unsafe {
            vec_dot2::vec_dot2_q6_k_q8_k::<false>(
                [cast_blocks(ty, x[0])?, cast_blocks(ty, x[1])?],
                [cast_blocks(atype, y[0])?, cast_blocks(atype, y[1])?],
            )
        },
        // SAFETY: as above.
        GgmlType::Q4_1 => unsafe {
            vec_dot2::vec_dot2_q4_1_q8_1(
                [cast_blocks(ty, x[0])?, cast_blocks(ty, x[1])?],
                [cast_blocks(atype, y[0])?, cast_blocks(atype, y[1])?],
            )
        },
        // No other type has a tile (the twin refuses it with the precise error).
        _ => return tiercheck_core::arch::aarch64::i8mm::tile(ty, atype, x, y),
    })
}

impl Kernels for I8mmNative {
    fn act_rule(&self, wtype: GgmlType) -> Result<ActRule, KernelError> {
        I8mmTwin.act_rule(wtype)
    }

    fn quantize_act(&self, wtype: GgmlType, x: &[f32]) -> Result<Vec<u8>, KernelError> {
        neon::KERNELS.quantize_act(wtype, x)
    }

    fn dequantize(&self, ty: GgmlType, bytes: &[u8], out: &mut [f32]) -> Result<(), KernelError> {
        neon::KERNELS.dequantize(ty, bytes, out)
    }

    fn vec_dot(&self, wtype: GgmlType, w_row: &[u8], act: &[u8]) -> Result<f32, KernelError> {
        self.act_rule(wtype)?;
        neon::KERNELS.i8mm_build_vec_dot(wtype, w_row, act)
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

    fn plain_path(&self, wtype: GgmlType, m: usize) -> &'static str {
        I8mmTwin.plain_path(wtype, m)
    }

    fn plain_split(&self, wtype: GgmlType, n: usize, m: usize) -> Option<usize> {
        I8mmTwin.plain_split(wtype, n, m)
    }
}
