//! The integration tests of the `tiercheck` package that run under libtest's own
//! harness, one module per suite, in one binary: each test binary links the whole
//! harness, so one binary links it once. Run one suite by its module path, as in
//! `cargo test -p tiercheck --test cli analysis::`. The suites with trials of their own
//! (`golden`, `model`, the oracle suites, ...) are the modules of the other test binary,
//! `trials` (libtest-mimic, `tests/trials/main.rs`).

mod analysis;
mod architecture;
mod cli;
mod fault_injection;
mod fuzz_corpus;
mod gguf_malformed;
mod golden_controls;
mod identify_claims;
mod lane_status;
mod malformed_inputs;
mod model_determinism;
mod mutants_doc;
mod partial_traces;
mod replay;
mod require_lanes;
