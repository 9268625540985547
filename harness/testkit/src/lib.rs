//! tiercheck-testkit: what the test suites share, kept out of the product (every crate
//! takes it as a dev-dependency only).
//!
//! - [`require`]: which lanes a run must run natively (`TIERCHECK_REQUIRE_LANES`);
//! - [`claims`]: a lane's status claims as trials that pass only when the trials proving
//!   them ran and passed in the same run;
//! - [`elem_conformance`]: a native elementwise implementation against its portable
//!   twin, bit for bit, shared by the architecture crates' tests;
//! - [`suites`]: the suites of one test binary (trial names `<suite>::<name>`) and
//!   libtest's command line with several filters.

pub mod claims;
pub mod elem_conformance;
pub mod require;
pub mod suites;
