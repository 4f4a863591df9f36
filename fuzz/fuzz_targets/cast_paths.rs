//! The table path and the exact scalar path of a cast agree on any input
//! bits, for every format and preset.
#![no_main]
use libfuzzer_sys::fuzz_target;
use mxbi::format::{cast_f32_slice, encode_f32, CastPreset, CodesMut, Format};

fuzz_target!(|data: &[u8]| {
    let xs: Vec<f32> = data.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    for f in [Format::E4M3, Format::E5M2, Format::E3M2, Format::E2M3, Format::E2M1, Format::E8M0] {
        for preset in CastPreset::ALL {
            let p = preset.policy(f);
            let mut out = vec![0u8; xs.len()];
            if cast_f32_slice(&xs, CodesMut::U8(&mut out), f, &p, 0).is_ok() {
                for (x, c) in xs.iter().zip(&out) {
                    assert_eq!(encode_f32(*x, f, &p, 0).ok(), Some(*c as u16));
                }
            }
        }
    }
});
