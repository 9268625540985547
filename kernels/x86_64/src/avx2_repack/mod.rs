//! The native `x86_64-avx2-repack` lane: repacked q4_K / q4_0 8x8 gemv and gemm with
//! AVX2 intrinsics ([`mod@kernels`]); plain weights take the native `x86_64-avx2` path.
//! The repack itself, the row split and the gemm rows' q8_K quantizer
//! (`ActRule::Q8KX86x4`) are the shared portable [`RepackedLane`] in both
//! implementations; only the row-group kernels differ. Twin:
//! `tiercheck_core::arch::x86_64::avx2_repack::X86_64_AVX2_REPACK`.

pub mod kernels;

use tiercheck_core::arch::x86_64::avx2_repack::scheme;
use tiercheck_core::blocks::cast_blocks;
use tiercheck_core::lane::{unsupported_layout, RepackedLane, RowPath, Unavailable};
use tiercheck_core::repack::{BlockIq4Nlx8, BlockQ4Kx8, BlockQ4_0x8, RepackLayout};
use tiercheck_core::{GgmlType, KernelError, Kernels};

use crate::avx2;

/// The native lane: the shared repacked matmul over the native `x86_64-avx2` kernels,
/// with the AVX2 row-group kernels. Only [`kernels()`] hands it out.
static KERNELS: RepackedLane = RepackedLane { plain: &avx2::KERNELS, scheme: scheme(group) };

/// The native kernels, or the CPU features this CPU lacks (AVX2, FMA, F16C).
pub fn kernels() -> Result<&'static dyn Kernels, Unavailable> {
    avx2::kernels()?;
    Ok(&KERNELS)
}

/// One row group by the AVX2 kernels. Reached only through [`KERNELS`], which
/// [`kernels()`] hands out only where AVX2, FMA and F16C are present.
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
            // SAFETY: only `KERNELS` calls this, and only `kernels()` hands it out, after
            // checking AVX2, FMA and F16C.
            out.copy_from_slice(&unsafe {
                match path {
                    RowPath::Gemm => kernels::gemm_q4_k_8x8(blocks, y),
                    RowPath::Gemv => kernels::gemv_q4_k_8x8(blocks, y),
                }
            });
        }
        RepackLayout::Q4_0_8x8 => {
            let blocks: &[BlockQ4_0x8] = bytemuck::cast_slice(bytes);
            let y = cast_blocks(GgmlType::Q8_0, act)?;
            // SAFETY: as above.
            out.copy_from_slice(&unsafe { kernels::gemv_q4_0_8x8(blocks, y) });
        }
        RepackLayout::Iq4Nl8x8 => {
            let blocks: &[BlockIq4Nlx8] = bytemuck::cast_slice(bytes);
            let y = cast_blocks(GgmlType::Q8_0, act)?;
            // SAFETY: as above.
            out.copy_from_slice(&unsafe { kernels::gemv_iq4_nl_8x8(blocks, y) });
        }
        other => return Err(unsupported_layout("x86_64-avx2-repack matmul", other)),
    }
    Ok(())
}
