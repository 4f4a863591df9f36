//! OCP MX block quantization: blocks of `B` elements (a power of two, 32 by
//! default) along one axis share an E8M0 scale `X = 2^E`; element `i` is
//! stored as `P_i = round(V_i / X)` in the element format.
//!
//! Contract:
//! * the block exponent is computed from the bits of `amax` (never from a
//!   float `log2`), by the [`ScaleMode`];
//! * `V_i / X` is exact (a power-of-two rescale of the decomposed input), and
//!   is rounded once, by the element [`CastPolicy`];
//! * Inf/NaN inside a block, all-zero blocks, f32-subnormal inputs and scale
//!   overflow follow explicit policies; presets name real implementations.

mod dot;
mod layout;
mod policy;
mod quantize;

pub use dot::{block_dot, BlockDot, DotError};
pub use layout::{swizzle_128x4, swizzled_len, unswizzle_128x4, ScaleLayout};
pub use policy::{MxFormat, MxPolicy, MxPreset, NanBlockCodes, NonFiniteBlock, ScaleMode, ScaleOverflow, ZeroBlock};
pub use quantize::{
    block_scale, dequantize, dequantize_f64, quantize, quantize_block, quantize_into, AxisLayout, MxError, QuantStats,
    Quantized,
};
