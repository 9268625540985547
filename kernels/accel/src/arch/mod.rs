//! The accelerated forms of the lanes' twins, at the twins' paths.

pub(crate) mod aarch64;
pub(crate) mod x86_64;

use crate::Host;

/// Fills every twin slot `host` serves.
pub(crate) fn install(host: Host) {
    x86_64::avx2::vec_dot::install(host);
    x86_64::avx2::tiled::install(host);
    x86_64::avx2_repack::kernels::install(host);
    aarch64::neon::vec_dot::install(host);
    aarch64::i8mm::vec_dot2::install(host);
    aarch64::sve::vec_dot::install(host);
    aarch64::neon_repack::kernels::install(host);
    aarch64::i8mm_repack::kernels::install(host);
    aarch64::sve_repack::kernels::install(host);
}
