//! cargo-fuzz entry point; the body and its properties: `fuzz/src/dispatch_json.rs`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    mxbi_fuzz::dispatch_json::run(data);
});
