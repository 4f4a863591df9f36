//! Any bytes: the .npy reader returns a tensor or an error, never panics.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(t) = mxbi::io::read_npy_bytes(data) {
        let _ = t.to_f32_vec();
    }
});
