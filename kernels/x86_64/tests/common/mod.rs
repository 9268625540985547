//! What the native-versus-twin tests of this crate share.

use libtest_mimic::{Completion, Failed};
use tiercheck_core::lane::Unavailable;

/// Run `check` where the CPU has the lane's features (`available`); else the trial is
/// ignored with the reason `kernels` gives, or fails when `TIERCHECK_REQUIRE_LANES`
/// requires `lane`.
pub fn run_where_available<T>(
    lane: &str,
    available: bool,
    kernels: impl FnOnce() -> Result<T, Unavailable>,
    check: fn() -> Result<(), Failed>,
) -> Result<Completion, Failed> {
    if available {
        check()?;
        return Ok(Completion::Completed);
    }
    let why = kernels().err().map(|e| e.to_string()).unwrap_or_default();
    if tiercheck_testkit::require::lane_required(lane)? {
        return Err(format!("TIERCHECK_REQUIRE_LANES requires {lane}: {why}").into());
    }
    Ok(Completion::ignored_with(why))
}
