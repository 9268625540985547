//! The GPU lanes' twins (`tiercheck_core::gpu`).

pub(crate) mod mmvq;

use crate::Host;

/// Fills every GPU twin slot `host` serves.
pub(crate) fn install(host: Host) {
    mmvq::install(host);
}
