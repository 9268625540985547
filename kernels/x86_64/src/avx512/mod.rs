//! The native `x86_64-avx512` lane: our own schedule with AVX-512 F/BW/VNNI, FMA and
//! F16C intrinsics (16 float lanes, exact `dpbusd` integer lanes). Portable twin:
//! `tiercheck_core::lane::X86_64_AVX512`.
//!
//! VNNI is required, not optional: the integer lanes come from `_mm512_dpbusd_epi32`
//! only, so there is one native path and one set of integer semantics (four u8 x i8
//! products summed exactly into i32). A `maddubs` + `madd` fallback is not offered:
//! with the q8_0 weight bias (codes q + 128, up to 255) a `maddubs` pair sum reaches
//! 2 * 255 * 127, beyond i16, and would saturate where dpbusd does not. Activations:
//! q8_0 by the AVX2 quantizer of [`crate::avx2::quantize`], q8_K by the reference
//! quantizer, as on the AVX2 lane.

pub mod vec_dot;

use tiercheck_core::blocks::cast_blocks;
use tiercheck_core::lane::Avx512Twin;
use tiercheck_core::quant::ActRule;
use tiercheck_core::{GgmlType, KernelError, Kernels};

use tiercheck_core::detect::FeatureSet;
use tiercheck_core::lane::Unavailable;

/// The CPU features the lane's kernels use, detected once.
static FEATURES: FeatureSet = FeatureSet::new(features);

/// The CPU features the lane's kernels use, with their detection results.
fn features() -> Vec<(&'static str, bool)> {
    vec![
        ("avx512f", std::arch::is_x86_feature_detected!("avx512f")),
        ("avx512bw", std::arch::is_x86_feature_detected!("avx512bw")),
        ("avx512vnni", std::arch::is_x86_feature_detected!("avx512vnni")),
        ("avx2", std::arch::is_x86_feature_detected!("avx2")),
        ("fma", std::arch::is_x86_feature_detected!("fma")),
        ("f16c", std::arch::is_x86_feature_detected!("f16c")),
    ]
}

/// Whether this CPU has AVX-512 F, BW and VNNI, AVX2, FMA and F16C (detected once).
pub fn is_available() -> bool {
    FEATURES.available()
}

/// The native kernels. Only [`kernels`] hands one out, and only where the CPU has the
/// features, so holding one proves the instructions are legal.
#[derive(Debug)]
pub struct Avx512Native {
    _proof: (),
}

static NATIVE: Avx512Native = Avx512Native { _proof: () };

/// The native `x86_64-avx512` kernels, or the CPU features this CPU lacks.
pub fn kernels() -> Result<&'static dyn Kernels, Unavailable> {
    FEATURES.check()?;
    Ok(&NATIVE)
}

impl Kernels for Avx512Native {
    fn act_rule(&self, wtype: GgmlType) -> Result<ActRule, KernelError> {
        Avx512Twin.act_rule(wtype)
    }

    fn quantize_act(&self, wtype: GgmlType, x: &[f32]) -> Result<Vec<u8>, KernelError> {
        let rule = self.act_rule(wtype)?;
        if rule != ActRule::Q8_0X86 {
            // q8_K: the reference quantizer, as on the AVX2 lane.
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
        // SAFETY: an `Avx512Native` exists only when `is_available()` held, which
        // includes AVX2, FMA and F16C.
        unsafe { crate::avx2::quantize::quantize_row_q8_0(x, blocks) };
        Ok(out)
    }

    fn vec_dot(&self, wtype: GgmlType, w_row: &[u8], act: &[u8]) -> Result<f32, KernelError> {
        // Validate exactly as the twin does (lengths, types).
        let atype = self.act_rule(wtype)?.format();
        let k = w_row.len() / wtype.type_size() * wtype.block_size();
        if !w_row.len().is_multiple_of(wtype.type_size()) || atype.row_bytes(k) != Some(act.len()) {
            return Avx512Twin.vec_dot(wtype, w_row, act); // returns the precise error
        }
        let (w, a) = (w_row, act);
        Ok(match wtype {
            GgmlType::Q4_0 => {
                let (x, y) = (cast_blocks(wtype, w)?, cast_blocks(atype, a)?);
                // SAFETY: an `Avx512Native` exists only when `is_available()` held.
                unsafe { vec_dot::vec_dot_q4_0_q8_0(x, y) }
            }
            GgmlType::Q8_0 => {
                let (x, y) = (cast_blocks(wtype, w)?, cast_blocks(atype, a)?);
                // SAFETY: an `Avx512Native` exists only when `is_available()` held.
                unsafe { vec_dot::vec_dot_q8_0_q8_0(x, y) }
            }
            GgmlType::Q4_K => {
                let (x, y) = (cast_blocks(wtype, w)?, cast_blocks(atype, a)?);
                // SAFETY: an `Avx512Native` exists only when `is_available()` held.
                unsafe { vec_dot::vec_dot_q4_k_q8_k(x, y) }
            }
            GgmlType::Q6_K => {
                let (x, y) = (cast_blocks(wtype, w)?, cast_blocks(atype, a)?);
                // SAFETY: an `Avx512Native` exists only when `is_available()` held.
                unsafe { vec_dot::vec_dot_q6_k_q8_k(x, y) }
            }
            other => {
                return Err(KernelError::Unsupported {
                    op: "x86_64-avx512 vec_dot",
                    ty: other.name(),
                })
            }
        })
    }
}

// The native-versus-twin tests of these kernels: `tests/avx512_twin.rs` (trials that
// are ignored with the reason on CPUs without AVX-512, and fail when the lane is
// required).
