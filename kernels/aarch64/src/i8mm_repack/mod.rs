//! The native `aarch64-i8mm-repack` lane: repacked q4_K 8x8, q5_K 8x8, q6_K 8x8, q4_0
//! 4x8 and q8_0 4x8 (and the dotprod build's iq4_nl 4x4) gemv and gemm with NEON, `sdot` and `smmla` ([`mod@kernels`]); plain weights take the
//! native `aarch64-i8mm` path (`smmla` tiles for even row counts). The repack itself, the row
//! split and the row rules are the shared portable [`RepackedLane`]; only the row-group
//! kernels differ. Needs
//! dotprod and i8mm (the tier is ggml's i8mm build): on CPUs without them [`kernels()`]
//! hands out nothing. Twin: `tiercheck_core::arch::aarch64::i8mm_repack::AARCH64_I8MM_REPACK`.

pub mod kernels;

use tiercheck_core::arch::aarch64::i8mm_repack::scheme;
use tiercheck_core::blocks::cast_blocks;
use tiercheck_core::lane::{unsupported_layout, RepackedLane, RowPath, Unavailable};
use tiercheck_core::repack::{
    BlockQ4Kx8, BlockQ4_0x4, BlockQ5Kx8, BlockQ6Kx8, BlockQ8_0x4, RepackLayout,
};
use tiercheck_core::{GgmlType, KernelError, Kernels};

use crate::i8mm::{self, FEATURES};

/// The native lane: the shared repacked matmul over the native `aarch64-i8mm` kernels,
/// with the NEON, `sdot` and `smmla` row-group kernels. Only [`kernels()`] hands it out.
static KERNELS: RepackedLane = RepackedLane { plain: &i8mm::KERNELS, scheme: scheme(group) };

/// The native kernels, or the CPU features this CPU lacks (NEON, dotprod, i8mm).
pub fn kernels() -> Result<&'static dyn Kernels, Unavailable> {
    FEATURES.check()?;
    Ok(&KERNELS)
}

/// One row group by the native kernels. Reached only through [`KERNELS`].
pub(crate) fn group(
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
            // SAFETY: only `KERNELS` calls this, and only `kernels()` hands it out, after
            // checking NEON, dotprod and i8mm.
            out.copy_from_slice(&unsafe {
                match path {
                    RowPath::Gemm => kernels::gemm_q4_k_8x8::<false>(blocks, y),
                    RowPath::Gemv => kernels::gemv_q4_k_8x8(blocks, y),
                }
            });
        }
        RepackLayout::Q6K8x8 => {
            let blocks: &[BlockQ6Kx8] = bytemuck::cast_slice(bytes);
            let y = cast_blocks(GgmlType::Q8_K, act)?;
            // gemv and gemm share one float order (the twin's module docs); the integer
            // sums by `sdot` (ggml's gemv) equal the gemm's `smmla` ones exactly.
            let _ = path;
            // SAFETY: as above.
            out.copy_from_slice(&unsafe {
                crate::neon_repack::kernels::q6_k_unfused::<8>(blocks, y)
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
        RepackLayout::Q5K8x8 => {
            let blocks: &[BlockQ5Kx8] = bytemuck::cast_slice(bytes);
            let y = cast_blocks(GgmlType::Q8_K, act)?;
            // SAFETY: as above.
            out.copy_from_slice(&unsafe {
                match path {
                    RowPath::Gemm => kernels::gemm_q5_k_8x8(blocks, y),
                    RowPath::Gemv => kernels::gemv_q5_k_8x8(blocks, y),
                }
            });
        }
        // The dotprod layout, as ggml's i8mm build chooses it.
        RepackLayout::Iq4Nl4x4 => crate::neon_repack::iq4_nl_4x4(bytes, act, out)?,
        other => return Err(unsupported_layout("aarch64-i8mm-repack matmul", other)),
    }
    Ok(())
}
