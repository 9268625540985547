//! The reader of saved K/V caches (llama.cpp's sequence state and session files) on
//! arbitrary bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = tiercheck_golden::fuzzing::state(data);
});
