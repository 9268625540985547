//! The native `aarch64-sve128-repack` and `aarch64-sve256-repack` lanes: the shared
//! repacked matmul ([`RepackedLane`]) over the native SVE lanes' plain kernels
//! ([`crate::sve`]), with the layouts of the twins' schemes and native group kernels.
//! Twins: `tiercheck_core::arch::aarch64::sve_repack::AARCH64_SVE128_REPACK` / `AARCH64_SVE256_REPACK`.
//!
//! - At 128 bits ggml runs the i8mm build's NEON + i8mm group kernels: the native
//!   `aarch64-i8mm-repack` ones.
//! - At 256 bits it runs its SVE `q4_0_8x8` kernels and the fused SVE
//!   `ggml_gemm_q4_K_8x8_q8_K`; everything else as at 128 bits. Both are one fused
//!   multiply-add per output column and block (`fmla` after an `fmul` of the two
//!   scales; for q4_K `fmls` then `fmla`) on lanes that are output columns, so no result
//!   depends on how many columns one vector holds: natively they are NEON `vfmaq_f32` on
//!   the same columns ([`kernels`]), bit for bit the same IEEE operations. Their integer
//!   sums are exact in any order.
//!
//! Needs what the plain SVE lanes need (NEON, dotprod, i8mm, SVE at the lane's vector
//! length).

pub mod kernels;

use tiercheck_core::arch::aarch64::sve_repack::{AARCH64_SVE128_REPACK, AARCH64_SVE256_REPACK};
use tiercheck_core::arch::aarch64::sve_repack::{SCHEME, SCHEME256};
use tiercheck_core::blocks::cast_blocks;
use tiercheck_core::lane::{RepackScheme, RepackedLane, RowPath, Unavailable};
use tiercheck_core::repack::{BlockQ4Kx8, BlockQ4_0x8, RepackLayout};
use tiercheck_core::{GgmlType, KernelError, Kernels};

use crate::{i8mm_repack, sve};

/// The 128-bit lane: the twin's scheme with the native i8mm group kernels.
static KERNELS128: RepackedLane = RepackedLane {
    plain: &sve::KERNELS128,
    scheme: RepackScheme { group: i8mm_repack::group, ..SCHEME },
};

/// The 256-bit lane: the twin's scheme with [`group256`].
static KERNELS256: RepackedLane =
    RepackedLane { plain: &sve::KERNELS256, scheme: RepackScheme { group: group256, ..SCHEME256 } };

/// The native `aarch64-sve128-repack` kernels, or why this CPU cannot run them.
pub fn kernels128() -> Result<&'static dyn Kernels, Unavailable> {
    sve::check(AARCH64_SVE128_REPACK.name, 128)?;
    Ok(&KERNELS128)
}

/// The native `aarch64-sve256-repack` kernels, or why this CPU cannot run them.
pub fn kernels256() -> Result<&'static dyn Kernels, Unavailable> {
    sve::check(AARCH64_SVE256_REPACK.name, 256)?;
    Ok(&KERNELS256)
}

/// One row group of the 256-bit build by the native kernels. Reached only through
/// [`KERNELS256`].
fn group256(
    layout: RepackLayout,
    path: RowPath,
    bytes: &[u8],
    act: &[u8],
    out: &mut [f32],
) -> Result<(), KernelError> {
    match (layout, path) {
        (RepackLayout::Q4_0_8x8, _) => {
            let blocks: &[BlockQ4_0x8] = bytemuck::cast_slice(bytes);
            let y = cast_blocks(GgmlType::Q8_0, act)?;
            // SAFETY: only `KERNELS256` calls this, and only `kernels256()` hands it out,
            // after checking NEON, dotprod, i8mm and SVE.
            out.copy_from_slice(&unsafe { kernels::gemv_q4_0_8x8(blocks, y) });
        }
        (RepackLayout::Q4K8x8, RowPath::Gemm) => {
            let blocks: &[BlockQ4Kx8] = bytemuck::cast_slice(bytes);
            let y = cast_blocks(GgmlType::Q8_K, act)?;
            // SAFETY: as above.
            out.copy_from_slice(&unsafe { i8mm_repack::kernels::gemm_q4_k_8x8::<true>(blocks, y) });
        }
        _ => return i8mm_repack::group(layout, path, bytes, act, out),
    }
    Ok(())
}
