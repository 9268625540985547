//! The native `aarch64-neon-repack` lane: repacked q4_K 8x4, q5_K 8x4, q6_K 8x4, q4_0
//! 4x4, q8_0 4x4 and iq4_nl 4x4 gemv and gemm with NEON and `sdot` ([`mod@kernels`]); plain weights take the native
//! `aarch64-neon` path. The repack itself, the row
//! split and the row rules are the shared portable [`RepackedLane`]; only the row-group
//! kernels differ. Needs dotprod
//! (the tier is ggml's dotprod build): on CPUs without it [`kernels()`] hands out
//! nothing. Twin: `tiercheck_core::arch::aarch64::neon_repack::AARCH64_NEON_REPACK`.

pub mod kernels;

use tiercheck_core::arch::aarch64::neon_repack::scheme;
use tiercheck_core::blocks::cast_blocks;
use tiercheck_core::lane::{unsupported_layout, RepackedLane, RowPath, Unavailable};
use tiercheck_core::repack::{
    BlockIq4Nlx4, BlockQ4Kx8, BlockQ4_0x4, BlockQ5Kx8, BlockQ6Kx8, BlockQ8_0x4, RepackLayout,
};
use tiercheck_core::{GgmlType, KernelError, Kernels};

use crate::neon;

/// The native lane: the shared repacked matmul over the native `aarch64-neon` kernels,
/// with the NEON + `sdot` row-group kernels. Only [`kernels()`] hands it out.
static KERNELS: RepackedLane = RepackedLane { plain: &neon::KERNELS, scheme: scheme(group) };

/// The native kernels, or the CPU features this CPU lacks (NEON, dotprod).
pub fn kernels() -> Result<&'static dyn Kernels, Unavailable> {
    neon::DOTPROD.check()?;
    Ok(&KERNELS)
}

/// One `iq4_nl_4x4` row group (gemv and, per row, gemm) by the native kernel; the
/// i8mm and SVE builds take this dotprod layout too. Reached only through lanes whose
/// `kernels()` checked NEON and dotprod.
pub(crate) fn iq4_nl_4x4(bytes: &[u8], act: &[u8], out: &mut [f32]) -> Result<(), KernelError> {
    let blocks: &[BlockIq4Nlx4] = bytemuck::cast_slice(bytes);
    let y = cast_blocks(GgmlType::Q8_0, act)?;
    // SAFETY: every caller's lane checked NEON and dotprod before handing out kernels.
    out.copy_from_slice(&unsafe { kernels::gemv_iq4_nl_4x4(blocks, y) });
    Ok(())
}

/// One row group by the native kernels. Reached only through [`KERNELS`].
fn group(
    layout: RepackLayout,
    path: RowPath,
    bytes: &[u8],
    act: &[u8],
    out: &mut [f32],
) -> Result<(), KernelError> {
    match layout {
        RepackLayout::Q4K8x4 => {
            let blocks: &[BlockQ4Kx8] = bytemuck::cast_slice(bytes);
            let y = cast_blocks(GgmlType::Q8_K, act)?;
            // SAFETY: only `KERNELS` calls this, and only `kernels()` hands it out, after
            // checking NEON and dotprod.
            out.copy_from_slice(&unsafe { kernels::gemv_q4_k_8x4(blocks, y) });
        }
        RepackLayout::Q6K8x4 => {
            let blocks: &[BlockQ6Kx8] = bytemuck::cast_slice(bytes);
            let y = cast_blocks(GgmlType::Q8_K, act)?;
            // SAFETY: as above.
            out.copy_from_slice(&unsafe {
                match path {
                    RowPath::Gemm => kernels::gemm_q6_k_8x4(blocks, y),
                    RowPath::Gemv => kernels::gemv_q6_k_8x4(blocks, y),
                }
            });
        }
        RepackLayout::Q4_0_4x4 => {
            let blocks: &[BlockQ4_0x4] = bytemuck::cast_slice(bytes);
            let y = cast_blocks(GgmlType::Q8_0, act)?;
            // SAFETY: as above.
            out.copy_from_slice(&unsafe { kernels::gemv_q4_0_4x4(blocks, y) });
        }
        RepackLayout::Q8_0_4x4 => {
            let blocks: &[BlockQ8_0x4] = bytemuck::cast_slice(bytes);
            let y = cast_blocks(GgmlType::Q8_0, act)?;
            // SAFETY: as above.
            out.copy_from_slice(&unsafe {
                match path {
                    RowPath::Gemm => kernels::gemm_q8_0_4x4(blocks, y),
                    RowPath::Gemv => kernels::gemv_q8_0_4x4(blocks, y),
                }
            });
        }
        RepackLayout::Iq4Nl4x4 => iq4_nl_4x4(bytes, act, out)?,
        RepackLayout::Q5K8x4 => {
            let blocks: &[BlockQ5Kx8] = bytemuck::cast_slice(bytes);
            let y = cast_blocks(GgmlType::Q8_K, act)?;
            // gemv and gemm share one order per row (the twin's module docs).
            // SAFETY: as above.
            out.copy_from_slice(&unsafe { kernels::gemv_q5_k_8x4(blocks, y) });
        }
        other => return Err(unsupported_layout("aarch64-neon-repack matmul", other)),
    }
    Ok(())
}
