//! The native `x86_64-avx2` lane: ggml's haswell-tier kernels with AVX2, FMA and F16C
//! intrinsics. Portable twin: `tiercheck_core::arch::x86_64::avx2::X86_64_AVX2`.

pub mod quantize;
pub mod tiled;
pub mod vec_dot;

use tiercheck_core::arch::x86_64::avx2::tiled as tiled_path;
use tiercheck_core::arch::x86_64::avx2::{tinyblas_applies, tinyblas_rows, Avx2Twin};
use tiercheck_core::blocks::cast_blocks;
use tiercheck_core::lane::{act_rows, vec_dot_rows};
use tiercheck_core::quant::ActRule;
use tiercheck_core::{GgmlType, KernelError, Kernels, WeightMatrix};

use tiercheck_core::detect::FeatureSet;
use tiercheck_core::lane::Unavailable;

/// AVX2, FMA and F16C, detected once.
static FEATURES: FeatureSet = FeatureSet::new(&["avx2", "fma", "f16c"]);

/// Whether this CPU has AVX2, FMA and F16C (detected once).
pub fn is_available() -> bool {
    FEATURES.available()
}

/// The native kernels. Only [`kernels`] hands one out, and only where the CPU has the
/// features, so holding one proves the instructions are legal.
#[derive(Debug)]
pub struct Avx2Native {
    _proof: (),
}

pub(crate) static KERNELS: Avx2Native = Avx2Native { _proof: () };

/// The native `x86_64-avx2` kernels, or the CPU features this CPU lacks.
pub fn kernels() -> Result<&'static dyn Kernels, Unavailable> {
    FEATURES.check()?;
    Ok(&KERNELS)
}

impl Kernels for Avx2Native {
    fn act_rule(&self, wtype: GgmlType) -> Result<ActRule, KernelError> {
        Avx2Twin.act_rule(wtype)
    }

    fn quantize_act(&self, wtype: GgmlType, x: &[f32]) -> Result<Vec<u8>, KernelError> {
        let rule = self.act_rule(wtype)?;
        if rule != ActRule::Q8_0X86 {
            // q8_K: the x86 tier calls the scalar reference quantizer.
            return rule.quantize(x);
        }
        let ty = rule.format();
        let bytes = ty.row_bytes(x.len()).ok_or(KernelError::BadRowLength {
            ty: ty.name(),
            k: x.len(),
            block: ty.block_size(),
        })?;
        let mut out = vec![0u8; bytes];
        let blocks = tiercheck_core::blocks::cast_blocks_mut(ty, &mut out)?;
        // SAFETY: an `Avx2Native` exists only when `is_available()` held.
        unsafe { quantize::quantize_row_q8_0(x, blocks) };
        Ok(out)
    }

    fn vec_dot(&self, wtype: GgmlType, w_row: &[u8], act: &[u8]) -> Result<f32, KernelError> {
        // Validate exactly as the twin does (lengths, types).
        let atype = self.act_rule(wtype)?.format();
        let k = w_row.len() / wtype.type_size() * wtype.block_size();
        if !w_row.len().is_multiple_of(wtype.type_size()) || atype.row_bytes(k) != Some(act.len()) {
            return Avx2Twin.vec_dot(wtype, w_row, act); // returns the precise error
        }
        let (w, a) = (w_row, act);
        Ok(match wtype {
            GgmlType::Q4_0 => {
                let (x, y) = (cast_blocks(wtype, w)?, cast_blocks(atype, a)?);
                // SAFETY: an `Avx2Native` exists only when `is_available()` held.
                unsafe { vec_dot::vec_dot_q4_0_q8_0(x, y) }
            }
            GgmlType::Q8_0 => {
                let (x, y) = (cast_blocks(wtype, w)?, cast_blocks(atype, a)?);
                // SAFETY: an `Avx2Native` exists only when `is_available()` held.
                unsafe { vec_dot::vec_dot_q8_0_q8_0(x, y) }
            }
            GgmlType::Q4_K => {
                let (x, y) = (cast_blocks(wtype, w)?, cast_blocks(atype, a)?);
                // SAFETY: an `Avx2Native` exists only when `is_available()` held.
                unsafe { vec_dot::vec_dot_q4_k_q8_k(x, y) }
            }
            GgmlType::Q6_K => {
                let (x, y) = (cast_blocks(wtype, w)?, cast_blocks(atype, a)?);
                // SAFETY: an `Avx2Native` exists only when `is_available()` held.
                unsafe { vec_dot::vec_dot_q6_k_q8_k(x, y) }
            }
            GgmlType::Q4_1 => {
                let (x, y) = (cast_blocks(wtype, w)?, cast_blocks(atype, a)?);
                // SAFETY: an `Avx2Native` exists only when `is_available()` held.
                unsafe { vec_dot::vec_dot_q4_1_q8_1(x, y) }
            }
            GgmlType::Q5_0 => {
                let (x, y) = (cast_blocks(wtype, w)?, cast_blocks(atype, a)?);
                // SAFETY: an `Avx2Native` exists only when `is_available()` held.
                unsafe { vec_dot::vec_dot_q5_0_q8_0(x, y) }
            }
            GgmlType::Q5_1 => {
                let (x, y) = (cast_blocks(wtype, w)?, cast_blocks(atype, a)?);
                // SAFETY: an `Avx2Native` exists only when `is_available()` held.
                unsafe { vec_dot::vec_dot_q5_1_q8_1(x, y) }
            }
            GgmlType::IQ4_NL => {
                let (x, y) = (cast_blocks(wtype, w)?, cast_blocks(atype, a)?);
                // SAFETY: an `Avx2Native` exists only when `is_available()` held.
                unsafe { vec_dot::vec_dot_iq4_nl_q8_0(x, y) }
            }
            GgmlType::Q2_K => {
                let (x, y) = (cast_blocks(wtype, w)?, cast_blocks(atype, a)?);
                // SAFETY: an `Avx2Native` exists only when `is_available()` held.
                unsafe { vec_dot::vec_dot_q2_k_q8_k(x, y) }
            }
            GgmlType::Q3_K => {
                let (x, y) = (cast_blocks(wtype, w)?, cast_blocks(atype, a)?);
                // SAFETY: an `Avx2Native` exists only when `is_available()` held.
                unsafe { vec_dot::vec_dot_q3_k_q8_k(x, y) }
            }
            GgmlType::Q5_K => {
                let (x, y) = (cast_blocks(wtype, w)?, cast_blocks(atype, a)?);
                // SAFETY: an `Avx2Native` exists only when `is_available()` held.
                unsafe { vec_dot::vec_dot_q5_k_q8_k(x, y) }
            }
            GgmlType::IQ4_XS => {
                let (x, y) = (cast_blocks(wtype, w)?, cast_blocks(atype, a)?);
                // SAFETY: an `Avx2Native` exists only when `is_available()` held.
                unsafe { vec_dot::vec_dot_iq4_xs_q8_k(x, y) }
            }
            other => {
                return Err(KernelError::Unsupported {
                    op: "x86_64-avx2 vec_dot",
                    ty: other.name(),
                })
            }
        })
    }

    fn matmul_quantized(
        &self,
        w: &WeightMatrix<'_>,
        act: &[u8],
        m: usize,
    ) -> Result<Vec<f32>, KernelError> {
        if tiled_path::applies(w.ty(), m) {
            let rows = act_rows(self, w, act, m)?;
            // SAFETY: an `Avx2Native` exists only when `is_available()` held.
            unsafe { tiled::matmul(w, &rows) }
        } else if tinyblas_applies(w.ty(), m) {
            let rows = act_rows(self, w, act, m)?;
            // SAFETY: an `Avx2Native` exists only when `is_available()` held.
            tinyblas_rows(w, &rows, |x, y| unsafe { vec_dot::tinyblas_iq4_nl_q8_0(x, y) })
        } else {
            vec_dot_rows(self, w, act, m)
        }
    }

    fn plain_path(&self, wtype: GgmlType, m: usize) -> &'static str {
        Avx2Twin.plain_path(wtype, m)
    }

    fn id_takes_plain_gemm(&self, wtype: GgmlType, m: usize) -> bool {
        Avx2Twin.id_takes_plain_gemm(wtype, m)
    }
}
