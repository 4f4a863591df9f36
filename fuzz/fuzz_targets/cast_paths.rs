//! cargo-fuzz entry point; the body and its properties: `fuzz/src/cast_paths.rs`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    mxbi_fuzz::cast_paths::run(data);
});
