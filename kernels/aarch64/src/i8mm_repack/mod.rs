//! The native `aarch64-i8mm-repack` lane: repacked q4_K 8x8, q4_0 4x8 and q8_0 4x8 gemv
//! and gemm with NEON, `sdot` and `smmla` ([`mod@kernels`]); plain weights take the
//! native `aarch64-neon` path. The repack itself is the shared portable code. Needs
//! dotprod and i8mm (the tier is ggml's i8mm build): on CPUs without them [`kernels()`]
//! hands out nothing. Twin: `tiercheck_core::lane::AARCH64_I8MM_REPACK`.

pub mod kernels;

use tiercheck_core::blocks::cast_blocks;
use tiercheck_core::lane::{neon_repack_matmul, prepare_arm_i8mm, I8mmRepackTwin, RowPath};
use tiercheck_core::quant::ActRule;
use tiercheck_core::repack::{
    BlockQ4Kx8, BlockQ4_0x4, BlockQ8_0x4, Prepared, RepackLayout, Target,
};
use tiercheck_core::{GgmlType, KernelError, Kernels, WeightMatrix};

use crate::neon;

/// Native kernels of the i8mm repack lane; only [`kernels()`] hands one out.
#[derive(Debug)]
pub struct I8mmRepackNative {
    _proof: (),
}

static NATIVE: I8mmRepackNative = I8mmRepackNative { _proof: () };

/// Whether this CPU has i8mm (`smmla`).
pub fn has_i8mm() -> bool {
    std::arch::is_aarch64_feature_detected!("i8mm")
}

/// The native kernels, if this CPU has NEON, dotprod and i8mm.
pub fn kernels() -> Option<&'static I8mmRepackNative> {
    unavailable_reason().is_none().then_some(&NATIVE)
}

/// Why [`kernels()`] hands out nothing on this CPU, if it does not.
pub fn unavailable_reason() -> Option<String> {
    if neon::kernels().is_none() {
        Some("cpu lacks neon".to_string())
    } else if !neon::has_dotprod() {
        Some("cpu lacks dotprod".to_string())
    } else if !has_i8mm() {
        Some("cpu lacks i8mm".to_string())
    } else {
        None
    }
}

impl I8mmRepackNative {
    fn plain(&self) -> &'static neon::NeonNative {
        neon::kernels().expect("an I8mmRepackNative exists only when NEON is available")
    }
}

fn group(
    layout: RepackLayout,
    path: RowPath,
    bytes: &[u8],
    act: &[u8],
    out: &mut [f32],
) -> Result<(), KernelError> {
    match layout {
        RepackLayout::Q4K8x8 => {
            let blocks: &[BlockQ4Kx8] = bytemuck::cast_slice(bytes);
            let y = cast_blocks(GgmlType::Q8_K, act)?;
            // SAFETY: this runs only through I8mmRepackNative (NEON, dotprod, i8mm present).
            out.copy_from_slice(&unsafe {
                match path {
                    RowPath::Gemm => kernels::gemm_q4_k_8x8(blocks, y),
                    RowPath::Gemv => kernels::gemv_q4_k_8x8(blocks, y),
                }
            });
        }
        RepackLayout::Q4_0_4x8 => {
            let blocks: &[BlockQ4_0x4] = bytemuck::cast_slice(bytes);
            let y = cast_blocks(GgmlType::Q8_0, act)?;
            // SAFETY: as above.
            out.copy_from_slice(&unsafe { kernels::gemv_q4_0_4x8(blocks, y) });
        }
        RepackLayout::Q8_0_4x8 => {
            let blocks: &[BlockQ8_0x4] = bytemuck::cast_slice(bytes);
            let y = cast_blocks(GgmlType::Q8_0, act)?;
            // SAFETY: as above.
            out.copy_from_slice(&unsafe { kernels::gemv_q8_0_4x8(blocks, y) });
        }
        other => {
            return Err(KernelError::Unsupported {
                op: "aarch64-i8mm-repack matmul",
                ty: other.name(),
            })
        }
    }
    Ok(())
}

impl Kernels for I8mmRepackNative {
    fn act_rule(&self, wtype: GgmlType) -> Result<ActRule, KernelError> {
        I8mmRepackTwin.act_rule(wtype)
    }

    fn quantize_act(&self, wtype: GgmlType, x: &[f32]) -> Result<Vec<u8>, KernelError> {
        self.plain().quantize_act(wtype, x)
    }

    fn dequantize(&self, ty: GgmlType, bytes: &[u8], out: &mut [f32]) -> Result<(), KernelError> {
        self.plain().dequantize(ty, bytes, out)
    }

    fn vec_dot(&self, wtype: GgmlType, w_row: &[u8], act: &[u8]) -> Result<f32, KernelError> {
        self.plain().vec_dot(wtype, w_row, act)
    }

    fn prepare<'a>(
        &self,
        w: WeightMatrix<'a>,
        target: Target,
    ) -> Result<Prepared<'a>, KernelError> {
        prepare_arm_i8mm(w, target)
    }

    fn matmul_prepared(
        &self,
        w: &Prepared<'_>,
        x: &[f32],
        m: usize,
    ) -> Result<Vec<f32>, KernelError> {
        match w {
            Prepared::Plain(w) => self.plain().matmul(w, x, m),
            Prepared::Repacked(r) => {
                let ty = r.layout().source();
                neon_repack_matmul(r, x, m, &|xi| self.quantize_act(ty, xi), &group)
            }
        }
    }

    fn matmul(&self, w: &WeightMatrix<'_>, x: &[f32], m: usize) -> Result<Vec<f32>, KernelError> {
        let prepared = self.prepare(*w, Target::Cpu)?;
        self.matmul_prepared(&prepared, x, m)
    }
}
