//! cargo-fuzz entry point; the body and its properties: `fuzz/src/exec_reply.rs`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    mxbi_fuzz::exec_reply::run(data);
});
