//! The native `aarch64-neon` lane. Twin: `tiercheck_core::arch::aarch64::neon::AARCH64_NEON`.

pub mod more;
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

impl NeonNative {
    /// The native forms of the eight types beside Q4_0, Q8_0, Q4_K and Q6_K ([`more`]);
    /// `i8mm_tail`: Q5_0's odd last block as the i8mm and SVE builds compile it. Lengths
    /// are checked by the caller; anything else is the twin's (its precise error).
    fn vec_dot_more(
        &self,
        wtype: GgmlType,
        w_row: &[u8],
        act: &[u8],
        i8mm_tail: bool,
    ) -> Result<f32, KernelError> {
        let atype = self.act_rule(wtype)?.format();
        let dot = has_dotprod();
        macro_rules! native {
            ($f:path $(, $extra:expr)?) => {{
                let (x, y) = (cast_blocks(wtype, w_row)?, cast_blocks(atype, act)?);
                // SAFETY: NEON is present (checked by `kernels`); `dot` was detected.
                unsafe { $f(x, y, dot $(, $extra)?) }
            }};
        }
        Ok(match wtype {
            GgmlType::Q4_1 => native!(more::vec_dot_q4_1_q8_1),
            GgmlType::Q5_0 => native!(more::vec_dot_q5_0_q8_0, i8mm_tail),
            GgmlType::Q5_1 => native!(more::vec_dot_q5_1_q8_1),
            GgmlType::IQ4_NL => native!(more::vec_dot_iq4_nl_q8_0),
            GgmlType::IQ4_XS => native!(more::vec_dot_iq4_xs_q8_k),
            GgmlType::Q2_K => native!(more::vec_dot_q2_k_q8_k),
            GgmlType::Q3_K => native!(more::vec_dot_q3_k_q8_k),
            GgmlType::Q5_K => native!(more::vec_dot_q5_k_q8_k),
            _ => return NeonTwin.vec_dot(wtype, w_row, act),
        })
    }

    /// The `nrc == 1` vec_dot of ggml's i8mm and SVE builds: the NEON kernels, with
    /// Q5_0's i8mm tail (`tiercheck_core::arch::aarch64::i8mm::i8mm_build_vec_dot`).
    pub(crate) fn i8mm_build_vec_dot(
        &self,
        wtype: GgmlType,
        w_row: &[u8],
        act: &[u8],
    ) -> Result<f32, KernelError> {
        if wtype != GgmlType::Q5_0 {
            return self.vec_dot(wtype, w_row, act);
        }
        let atype = self.act_rule(wtype)?.format();
        let k = w_row.len() / wtype.type_size() * wtype.block_size();
        if !w_row.len().is_multiple_of(wtype.type_size()) || atype.row_bytes(k) != Some(act.len()) {
            return NeonTwin.vec_dot(wtype, w_row, act); // the precise error
        }
        self.vec_dot_more(wtype, w_row, act, true)
    }
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
            _ => return self.vec_dot_more(wtype, w_row, act, false),
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
