//! cargo-fuzz entry point; the body and its properties: `fuzz/src/bi_case.rs`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    mxbi_fuzz::bi_case::run(data);
});
