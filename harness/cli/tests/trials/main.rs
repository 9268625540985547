//! The cli package's libtest-mimic suites, one module each, in one test binary (the
//! product links once for all of them).
//!
//! A trial's name is `<suite>::<name in the suite>` (`tiercheck_testkit::suites`; no
//! suite's `<name>::` occurs in another's names): `cargo test -p tiercheck --test trials
//! -- golden::` runs the goldens, `-- golden:: threads::` two suites, `-- native --skip
//! model::` the native trials of all but one (libtest's syntax: a trial runs when its
//! name contains any filter and no `--skip` string).
//! Suites whose trials need an oracle build (`oracle_*`, `model_oracle`,
//! `gguf_pyroundtrip`) ignore them with the reason where it is missing, and fail instead
//! under `TIERCHECK_REQUIRE_ORACLE=1`.
//!
//! The suites, in the order their trials are listed and queued:
//! - [`golden`]: every lane's kernels against its goldens, natively and as twins;
//! - [`threads`]: thread-count invariance of every lane's matmul;
//! - [`model`]: every lane's decoder on the embedded model against its golden;
//! - [`oracle_smoke`], [`oracle_ref`], [`oracle_mulmat`], [`oracle_x86_lanes`]: the x86
//!   ggml builds (reference, `x64`, `haswell`, `zen4`) against the twins;
//! - [`oracle_arm`], [`oracle_arm_lanes`]: the aarch64 ggml builds under qemu;
//! - [`model_oracle`]: the decoder against llama.cpp's own builds, tap by tap;
//! - [`gguf_pyroundtrip`]: the GGUF reader and writer against gguf-py.

use std::process::ExitCode;

use libtest_mimic::Trial;
use tiercheck_testkit::suites::{within, Selection};

mod gguf_pyroundtrip;
mod golden;
mod model;
mod model_oracle;
mod oracle_arm;
mod oracle_arm_lanes;
mod oracle_mulmat;
mod oracle_ref;
mod oracle_smoke;
mod oracle_x86_lanes;
mod threads;

/// A suite's name and its trials (names `<name>::...`).
type Suite = (&'static str, fn(&Selection) -> Vec<Trial>);

/// Every suite of the binary (each module's `SUITE` and `trials`).
const SUITES: &[Suite] = &[
    (golden::SUITE, golden::trials),
    (threads::SUITE, threads::trials),
    (model::SUITE, model::trials),
    (oracle_smoke::SUITE, oracle_smoke::trials),
    (oracle_ref::SUITE, oracle_ref::trials),
    (oracle_mulmat::SUITE, oracle_mulmat::trials),
    (oracle_x86_lanes::SUITE, oracle_x86_lanes::trials),
    (oracle_arm::SUITE, oracle_arm::trials),
    (oracle_arm_lanes::SUITE, oracle_arm_lanes::trials),
    (model_oracle::SUITE, model_oracle::trials),
    (gguf_pyroundtrip::SUITE, gguf_pyroundtrip::trials),
];

fn main() -> ExitCode {
    tiercheck_lanes::install_accelerated();
    let selection = Selection::from_env();
    if let Err(e) = golden::bless_if_asked() {
        eprintln!("{e}");
        return ExitCode::FAILURE;
    }
    let mut trials = Vec::new();
    for (name, suite) in SUITES {
        let theirs = suite(&selection);
        // `golden::` must select the goldens only: no other suite's `<name>::` in its names.
        let stray = theirs.iter().find(|t| {
            within(name, t.name()).is_none()
                || SUITES.iter().any(|(o, _)| o != name && t.name().contains(&format!("{o}::")))
        });
        if let Some(stray) = stray {
            eprintln!("suite {name} made a trial outside its name space: {}", stray.name());
            return ExitCode::FAILURE;
        }
        trials.extend(theirs);
    }
    selection.run(trials)
}
