//! The plain-dump reader (npz archives as numpy writes them) on arbitrary bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = tiercheck_golden::fuzzing::npz(data);
});
