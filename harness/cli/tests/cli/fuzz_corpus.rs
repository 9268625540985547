//! Replays the fuzzers' committed inputs (`fuzz/corpus/<target>/`: seeds, and
//! `fuzz/regressions/<target>/`: every input a fuzzer ever found to crash, kept as a
//! regression test) through the same entry points the fuzz targets call, on stable Rust:
//! each must return a value or an error that names the input, never panic.

use std::path::{Path, PathBuf};

use tiercheck_golden::fuzzing;

fn inputs(target: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join("fuzz");
    let mut out = Vec::new();
    for kind in ["corpus", "regressions"] {
        let dir = root.join(kind).join(target);
        let Ok(rd) = std::fs::read_dir(&dir) else { continue };
        for e in rd {
            let p = e.expect("read_dir entry").path();
            if p.is_file() {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

fn replay(target: &str, label: &str, f: fn(&[u8]) -> Result<(), String>) -> (usize, usize) {
    let files = inputs(target);
    assert!(!files.is_empty(), "no committed inputs for fuzz target {target}");
    let (mut ok, mut err) = (0, 0);
    for p in &files {
        let bytes = std::fs::read(p).unwrap();
        match std::panic::catch_unwind(|| f(&bytes)) {
            Err(_) => panic!("{target}: {} panicked", p.display()),
            Ok(Ok(())) => ok += 1,
            Ok(Err(e)) => {
                assert!(
                    e.contains(label),
                    "{target}: {}: error does not name the input: {e}",
                    p.display()
                );
                err += 1;
            }
        }
    }
    (ok, err)
}

#[test]
fn gguf_inputs() {
    let (ok, err) = replay("gguf", fuzzing::GGUF_NAME, fuzzing::gguf);
    eprintln!("gguf: {ok} ok, {err} errors");
}

#[test]
fn npz_inputs() {
    let (ok, _) = replay("npz", fuzzing::NPZ_NAME, fuzzing::npz);
    assert!(ok >= 7, "the npz seeds are valid dumps");
}

#[test]
fn state_inputs() {
    let (ok, _) = replay("state", fuzzing::STATE_NAME, fuzzing::state);
    assert!(ok >= 2, "the state seeds are valid saved caches");
}

#[test]
fn trace_inputs() {
    let (ok, _) = replay("trace", fuzzing::TRACE_NAME, fuzzing::trace);
    assert!(ok >= 2, "the trace seeds are valid traces");
}

#[test]
fn manifest_inputs() {
    let (ok, _) = replay("manifest", fuzzing::MANIFEST_NAME, fuzzing::manifest);
    assert!(ok >= 2, "the manifest seeds are valid manifests");
}

#[test]
fn seeds_fail_clearly_when_damaged() {
    // Every truncation of each seed is an error naming the input, or (for a prefix that
    // happens to be complete) a value: never a panic.
    for (target, label, f) in [
        ("gguf", fuzzing::GGUF_NAME, fuzzing::gguf as fn(&[u8]) -> Result<(), String>),
        ("trace", fuzzing::TRACE_NAME, fuzzing::trace),
        ("manifest", fuzzing::MANIFEST_NAME, fuzzing::manifest),
    ] {
        for p in inputs(target) {
            let bytes = std::fs::read(&p).unwrap();
            for cut in (0..bytes.len()).step_by(7) {
                if let Err(e) = f(&bytes[..cut]) {
                    assert!(e.contains(label), "{target} {} cut {cut}: {e}", p.display());
                }
            }
        }
    }
}

#[test]
fn a_claimed_block_count_beyond_the_tensor_table_is_an_error_not_an_allocation() {
    // Found by the gguf fuzzer: block_count 2^24 made the tensor check list 184M names.
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/regressions/gguf/oom-block-count-2pow24.gguf");
    let e = fuzzing::gguf(&std::fs::read(p).unwrap()).unwrap_err();
    assert!(e.contains("block_count") && e.contains("tensors"), "{e}");
}
