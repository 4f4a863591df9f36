//! cargo-fuzz entry point; the body and its properties: `fuzz/src/npy_reader.rs`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    mxbi_fuzz::npy_reader::run(data);
});
