//! Element formats: exact decode of every code, and encoding from f32/f64 under
//! an explicit [`CastPolicy`] (rounding, overflow, NaN handling).
//!
//! Codes are carried as `u16`: 8-bit formats use the low byte, FP6 the low 6
//! bits, FP4 the low 4 bits, bf16/f16 all 16 bits. Every decode is exact in
//! f32 (E8M0 byte 0x00 is 2^-127, the f32 subnormal 0x0040_0000).
//!
//! Exponents are always taken from the bits of the input, never from a float
//! `log2`.
//!
//! # Files (imports point down this list only; `tests/layering.rs` checks it)
//!
//! | file | concern |
//! |---|---|
//! | `pow2` | exact powers of two ([`pow2`], [`pow2_f32`]) and the exponent of an E8M0 scale byte ([`e8m0_exponent`]) |
//! | `elem` | the element-type vocabulary: [`Format`], [`MiniFloat`] parameters derived from three inputs |
//! | `round` | rounding directions, the one exact value [`Exact`], decomposed inputs [`Input`], the one reference rounding [`round_to_quantum`] |
//! | `policy` | cast policies (E8M0 rules included) |
//! | `preset` | the named cast presets and the library release each reproduces |
//! | `e8m0` | the E8M0 scale encoder |
//! | `fp8_rne` | the FP8 round-to-nearest-even fast path |
//! | `encode` | the exact encoders and the slice paths (table, fast path) |
//!
//! This file only declares and re-exports.

mod e8m0;
mod elem;
mod encode;
mod fp8_rne;
mod policy;
mod pow2;
mod preset;
mod round;

pub use e8m0::{encode_e8m0_f32, encode_e8m0_f64};
pub use elem::{Format, MiniFloat, Specials, UnknownFormat, BF16, E2M1, E2M3, E3M2, E4M3, E5M2, F16};
pub use encode::{
    cast_f32_slice, cast_f64_slice, encode_f32, encode_f64, encode_input, CastError, CastTable, CodesMut,
};
pub use fp8_rne::{Fp8Rne, Simd};
pub use policy::{default_nan_out, CastPolicy, E8m0Negative, E8m0Rule, E8m0Zero, NanOut, NanPolicy, Overflow};
pub use pow2::{e8m0_exponent, pow2, pow2_f32};
pub use preset::{CastPreset, Release};
pub use round::{round_to_quantum, Exact, Input, Rounding, Stochastic};
