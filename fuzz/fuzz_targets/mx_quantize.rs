//! cargo-fuzz entry point; the body and its properties: `fuzz/src/mx_quantize.rs`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    mxbi_fuzz::mx_quantize::run(data);
});
