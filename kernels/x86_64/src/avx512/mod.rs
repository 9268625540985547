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

#[cfg(test)]
mod tests {
    use tiercheck_core::arch::x86_64::avx512::vec_dot as twin;
    use tiercheck_core::blocks::{
        cast_blocks_mut, BlockQ4K, BlockQ4_0, BlockQ6K, BlockQ8K, BlockQ8_0,
    };
    use tiercheck_core::GgmlType;

    use super::{is_available, kernels, vec_dot};

    /// xorshift64* bytes.
    struct Bytes(u64);
    impl Bytes {
        fn next(&mut self) -> u8 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 56) as u8
        }
        /// The bytes of `nb` blocks of `ty`: random (`kind` 0) or every byte 0x80, 0x7f
        /// or 0xff (`kind` 1, 2, 3: the extreme codes).
        fn row(&mut self, ty: GgmlType, nb: usize, kind: u8) -> Vec<u8> {
            (0..nb * ty.type_size())
                .map(|_| match kind {
                    1 => 0x80,
                    2 => 0x7f,
                    3 => 0xff,
                    _ => self.next(),
                })
                .collect()
        }
        /// A finite f16 scale of either sign below 1 in magnitude.
        fn f16(&mut self) -> [u8; 2] {
            [self.next(), self.next() & 0xbb]
        }
    }

    fn skip() -> bool {
        if is_available() {
            return false;
        }
        eprintln!("skipped: {}", kernels().err().map(|e| e.to_string()).unwrap_or_default());
        true
    }

    #[test]
    fn legacy_native_equals_twin_odd_and_even_block_counts() {
        if skip() {
            return;
        }
        let mut g = Bytes(0x243f_6a88_85a3_08d3);
        for nb in [1usize, 2, 3, 4, 5, 7, 8, 33] {
            for kind in 0..4u8 {
                let mut x4b = g.row(GgmlType::Q4_0, nb, kind);
                let mut x8b = g.row(GgmlType::Q8_0, nb, kind);
                let mut yb = g.row(GgmlType::Q8_0, nb, kind);
                let x4: &mut [BlockQ4_0] = cast_blocks_mut(GgmlType::Q4_0, &mut x4b).unwrap();
                let x8: &mut [BlockQ8_0] = cast_blocks_mut(GgmlType::Q8_0, &mut x8b).unwrap();
                let y: &mut [BlockQ8_0] = cast_blocks_mut(GgmlType::Q8_0, &mut yb).unwrap();
                x4.iter_mut().for_each(|b| b.d = g.f16());
                x8.iter_mut().for_each(|b| b.d = g.f16());
                y.iter_mut().for_each(|b| b.d = g.f16());
                // SAFETY: `is_available()` held (checked by `skip`).
                let (n4, n8) = unsafe {
                    (vec_dot::vec_dot_q4_0_q8_0(x4, y), vec_dot::vec_dot_q8_0_q8_0(x8, y))
                };
                let (t4, t8) = (twin::vec_dot_q4_0_q8_0(x4, y), twin::vec_dot_q8_0_q8_0(x8, y));
                assert_eq!(n4.to_bits(), t4.to_bits(), "q4_0 nb={nb} kind={kind}: {n4} vs {t4}");
                assert_eq!(n8.to_bits(), t8.to_bits(), "q8_0 nb={nb} kind={kind}: {n8} vs {t8}");
            }
        }
    }

    #[test]
    fn k_quants_native_equals_twin() {
        if skip() {
            return;
        }
        let mut g = Bytes(0x1319_8a2e_0370_7344);
        for nb in [1usize, 2, 3, 6] {
            for kind in 0..4u8 {
                let mut x4b = g.row(GgmlType::Q4_K, nb, kind);
                let mut x6b = g.row(GgmlType::Q6_K, nb, kind);
                let mut yb = g.row(GgmlType::Q8_K, nb, kind);
                let x4: &mut [BlockQ4K] = cast_blocks_mut(GgmlType::Q4_K, &mut x4b).unwrap();
                let x6: &mut [BlockQ6K] = cast_blocks_mut(GgmlType::Q6_K, &mut x6b).unwrap();
                let y: &mut [BlockQ8K] = cast_blocks_mut(GgmlType::Q8_K, &mut yb).unwrap();
                x4.iter_mut().for_each(|b| {
                    b.d = g.f16();
                    b.dmin = g.f16();
                });
                x6.iter_mut().for_each(|b| b.d = g.f16());
                // bsums stay as generated (any i16): the kernels read them as they are.
                y.iter_mut().for_each(|b| b.d = (g.next() as f32 / 256.0 - 0.5).to_le_bytes());
                // SAFETY: `is_available()` held (checked by `skip`).
                let (n4, n6) = unsafe {
                    (vec_dot::vec_dot_q4_k_q8_k(x4, y), vec_dot::vec_dot_q6_k_q8_k(x6, y))
                };
                let (t4, t6) = (twin::vec_dot_q4_k_q8_k(x4, y), twin::vec_dot_q6_k_q8_k(x6, y));
                assert_eq!(n4.to_bits(), t4.to_bits(), "q4_K nb={nb} kind={kind}: {n4} vs {t4}");
                assert_eq!(n6.to_bits(), t6.to_bits(), "q6_K nb={nb} kind={kind}: {n6} vs {t6}");
            }
        }
    }
}
