//! cargo-fuzz entry point; the body and its properties: `fuzz/src/order_parser.rs`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    mxbi_fuzz::order_parser::run(data);
});
