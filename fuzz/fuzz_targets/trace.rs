//! The trace loader (safetensors with tiercheck metadata) on arbitrary bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = tiercheck_golden::fuzzing::trace(data);
});
