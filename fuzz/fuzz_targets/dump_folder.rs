//! cargo-fuzz entry point; the body and its properties: `fuzz/src/dump_folder.rs`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    mxbi_fuzz::dump_folder::run(data);
});
