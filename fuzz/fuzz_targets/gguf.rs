//! The GGUF reader on arbitrary bytes: any input is a value or an error, never a panic,
//! an out-of-bounds read or an allocation sized by an unchecked count from the file
//! (`ci/fuzz` runs with libFuzzer's `-malloc_limit_mb`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = tiercheck_golden::fuzzing::gguf(data);
});
