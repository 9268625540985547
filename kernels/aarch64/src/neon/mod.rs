//! The native `aarch64-neon` lane. Twin: `tiercheck_core::arch::aarch64::neon::AARCH64_NEON`.

pub mod tinyblas;
pub mod vec_dot;

use tiercheck_core::arch::aarch64::neon::matmul_tinyblas;
use tiercheck_core::arch::aarch64::neon::NeonTwin;
use tiercheck_core::blocks::cast_blocks;
use tiercheck_core::quant::ActRule;
use tiercheck_core::{GgmlType, KernelError, Kernels, WeightMatrix};

use tiercheck_core::detect::FeatureSet;
use tiercheck_core::lane::Unavailable;

/// NEON, detected once.
pub(crate) static FEATURES: FeatureSet = FeatureSet::new(&["neon"]);

/// NEON and dotprod, detected once.
pub(crate) static DOTPROD: FeatureSet = FeatureSet::new(&["neon", "dotprod"]);

/// Whether the CPU has the dotprod extension (detected once).
pub fn has_dotprod() -> bool {
    DOTPROD.available()
}

/// Native kernels; only [`kernels`] hands them out. NEON is part of every aarch64 CPU
/// that Rust targets, so they are always available; `dotprod` selects the integer path.
#[derive(Debug)]
pub struct NeonNative {
    _proof: (),
}

pub(crate) static KERNELS: NeonNative = NeonNative { _proof: () };

/// The native `aarch64-neon` kernels (every aarch64 CPU Rust targets has NEON; the check
/// stays so the contract is the same as everywhere).
pub fn kernels() -> Result<&'static dyn Kernels, Unavailable> {
    FEATURES.check()?;
    Ok(&KERNELS)
}

impl Kernels for NeonNative {
    fn act_rule(&self, wtype: GgmlType) -> Result<ActRule, KernelError> {
        NeonTwin.act_rule(wtype)
    }

    fn dequantize(&self, ty: GgmlType, bytes: &[u8], out: &mut [f32]) -> Result<(), KernelError> {
        NeonTwin.dequantize(ty, bytes, out)
    }

    fn vec_dot(&self, wtype: GgmlType, w_row: &[u8], act: &[u8]) -> Result<f32, KernelError> {
        let atype = self.act_rule(wtype)?.format();
        let k = w_row.len() / wtype.type_size() * wtype.block_size();
        if !w_row.len().is_multiple_of(wtype.type_size()) || atype.row_bytes(k) != Some(act.len()) {
            return NeonTwin.vec_dot(wtype, w_row, act); // the precise error
        }
        let dot = has_dotprod();
        Ok(match wtype {
            GgmlType::Q4_0 => {
                let (x, y) = (cast_blocks(wtype, w_row)?, cast_blocks(atype, act)?);
                // SAFETY: NEON is present (checked by `kernels`); `dot` was detected.
                unsafe { vec_dot::vec_dot_q4_0_q8_0(x, y, dot) }
            }
            GgmlType::Q8_0 => {
                let (x, y) = (cast_blocks(wtype, w_row)?, cast_blocks(atype, act)?);
                // SAFETY: as above.
                unsafe { vec_dot::vec_dot_q8_0_q8_0(x, y, dot) }
            }
            GgmlType::Q4_K => {
                let (x, y) = (cast_blocks(wtype, w_row)?, cast_blocks(atype, act)?);
                // SAFETY: as above.
                unsafe { vec_dot::vec_dot_q4_k_q8_k(x, y, dot) }
            }
            GgmlType::Q6_K => {
                let (x, y) = (cast_blocks(wtype, w_row)?, cast_blocks(atype, act)?);
                // SAFETY: as above.
                unsafe { vec_dot::vec_dot_q6_k_q8_k(x, y, dot) }
            }
            // Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q5_K, IQ4_NL, IQ4_XS: the twin's code (the
            // same bits; no NEON form yet).
            _ => return NeonTwin.vec_dot(wtype, w_row, act),
        })
    }

    fn matmul_quantized(
        &self,
        w: &WeightMatrix<'_>,
        act: &[u8],
        m: usize,
    ) -> Result<Vec<f32>, KernelError> {
        let dot = has_dotprod();
        matmul_tinyblas(self, w, act, m, |ty, wr, a| {
            let y = cast_blocks(GgmlType::Q8_0, a)?;
            Ok(match ty {
                // SAFETY: NEON is present (checked by `kernels`); `dot` was detected.
                GgmlType::Q4_0 => unsafe { tinyblas::dot_q4_0(cast_blocks(ty, wr)?, y, dot) },
                // SAFETY: as above.
                GgmlType::Q8_0 => unsafe { tinyblas::dot_q8_0(cast_blocks(ty, wr)?, y, dot) },
                other => {
                    return Err(KernelError::Unsupported {
                        op: "tinyBLAS_Q0_ARM",
                        ty: other.name(),
                    })
                }
            })
        })
    }

    fn plain_path(&self, wtype: GgmlType, m: usize) -> &'static str {
        NeonTwin.plain_path(wtype, m)
    }
}
