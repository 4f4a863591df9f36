//! Element types known to the tensor file layer.

use std::fmt;
use std::str::FromStr;

/// Element type of a tensor as stored on disk (always little-endian): the
/// on-disk dtype of `.npy` and `.safetensors` files, integers and f64
/// included. A distinct concept from the element types a GEMM reads
/// (`order::InType`, whose values come from `format::Format`): a file's
/// dtype says how its bytes are laid out, not which values a kernel's step
/// can represent; the layers that read files map one onto the other.
///
/// The FP8 types follow the OCP 8-bit floating point specification:
/// `F8E4M3` is the "FN" variant (no infinities, NaN = `S.1111.111`, as
/// `torch.float8_e4m3fn` and safetensors `F8_E4M3`), `F8E5M2` is IEEE-like
/// (with infinities and NaNs, as `torch.float8_e5m2` and safetensors `F8_E5M2`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    F32,
    F64,
    F16,
    BF16,
    U8,
    U16,
    I8,
    I32,
    I64,
    F8E4M3,
    F8E5M2,
}

impl DType {
    /// Every supported dtype, in declaration order.
    pub const ALL: [DType; 11] = [
        DType::F32,
        DType::F64,
        DType::F16,
        DType::BF16,
        DType::U8,
        DType::U16,
        DType::I8,
        DType::I32,
        DType::I64,
        DType::F8E4M3,
        DType::F8E5M2,
    ];

    /// Size of one element in bytes.
    pub const fn size(self) -> usize {
        match self {
            DType::F64 | DType::I64 => 8,
            DType::F32 | DType::I32 => 4,
            DType::F16 | DType::BF16 | DType::U16 => 2,
            DType::U8 | DType::I8 | DType::F8E4M3 | DType::F8E5M2 => 1,
        }
    }

    /// The element format of a narrow float storage type, in the one
    /// element vocabulary ([`Format`](crate::format::Format)); None for
    /// f32, f64 and the integer types.
    pub const fn format(self) -> Option<crate::format::Format> {
        use crate::format::Format;
        match self {
            DType::F16 => Some(Format::F16),
            DType::BF16 => Some(Format::BF16),
            DType::F8E4M3 => Some(Format::E4M3),
            DType::F8E5M2 => Some(Format::E5M2),
            _ => None,
        }
    }

    /// Canonical lower-case name: `f32`, `f64`, `f16`, `bf16`, `u8`, `u16`,
    /// `i8`, `i32`, `i64`, `f8e4m3`, `f8e5m2`.
    pub const fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::U8 => "u8",
            DType::U16 => "u16",
            DType::I8 => "i8",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::F8E4M3 => "f8e4m3",
            DType::F8E5M2 => "f8e5m2",
        }
    }

    /// Parse a dtype name. Accepts the canonical names, the safetensors names
    /// (`F32`, `BF16`, `F8_E4M3`, ...) and common aliases (`float32`, `fp16`,
    /// `bfloat16`, `e4m3`, `float8_e4m3fn`, `uint8`, `int32`, ...),
    /// case-insensitively.
    pub fn from_name(name: &str) -> Option<DType> {
        let lower = name.trim().to_ascii_lowercase().replace(['_', '-'], "");
        let dt = match lower.as_str() {
            "f32" | "float32" | "fp32" | "float" => DType::F32,
            "f64" | "float64" | "fp64" | "double" => DType::F64,
            "f16" | "float16" | "fp16" | "half" => DType::F16,
            "bf16" | "bfloat16" => DType::BF16,
            "u8" | "uint8" => DType::U8,
            "u16" | "uint16" => DType::U16,
            "i8" | "int8" => DType::I8,
            "i32" | "int32" => DType::I32,
            "i64" | "int64" => DType::I64,
            "f8e4m3" | "f8e4m3fn" | "fp8e4m3" | "float8e4m3" | "float8e4m3fn" | "e4m3" => DType::F8E4M3,
            "f8e5m2" | "fp8e5m2" | "float8e5m2" | "e5m2" => DType::F8E5M2,
            _ => return None,
        };
        Some(dt)
    }

    /// The `.npy` descr string for this dtype, or `None` when NumPy has no
    /// native equivalent (BF16 and the FP8 types).
    pub const fn npy_descr(self) -> Option<&'static str> {
        match self {
            DType::F32 => Some("<f4"),
            DType::F64 => Some("<f8"),
            DType::F16 => Some("<f2"),
            DType::U8 => Some("|u1"),
            DType::U16 => Some("<u2"),
            DType::I8 => Some("|i1"),
            DType::I32 => Some("<i4"),
            DType::I64 => Some("<i8"),
            DType::BF16 | DType::F8E4M3 | DType::F8E5M2 => None,
        }
    }

    /// The safetensors dtype name (`F32`, `BF16`, `F8_E4M3`, ...).
    pub const fn safetensors_name(self) -> &'static str {
        match self {
            DType::F32 => "F32",
            DType::F64 => "F64",
            DType::F16 => "F16",
            DType::BF16 => "BF16",
            DType::U8 => "U8",
            DType::U16 => "U16",
            DType::I8 => "I8",
            DType::I32 => "I32",
            DType::I64 => "I64",
            DType::F8E4M3 => "F8_E4M3",
            DType::F8E5M2 => "F8_E5M2",
        }
    }

    /// Map an exact safetensors dtype name to a `DType`.
    pub fn from_safetensors_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.safetensors_name() == name)
    }

    /// True for floating-point dtypes (including BF16 and FP8).
    pub const fn is_float(self) -> bool {
        matches!(
            self,
            DType::F32 | DType::F64 | DType::F16 | DType::BF16 | DType::F8E4M3 | DType::F8E5M2
        )
    }

    pub(crate) fn to_st(self) -> ::safetensors::Dtype {
        use ::safetensors::Dtype as S;
        match self {
            DType::F32 => S::F32,
            DType::F64 => S::F64,
            DType::F16 => S::F16,
            DType::BF16 => S::BF16,
            DType::U8 => S::U8,
            DType::U16 => S::U16,
            DType::I8 => S::I8,
            DType::I32 => S::I32,
            DType::I64 => S::I64,
            DType::F8E4M3 => S::F8_E4M3,
            DType::F8E5M2 => S::F8_E5M2,
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DType {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        DType::from_name(s).ok_or_else(|| {
            let names: Vec<&str> = DType::ALL.iter().map(|d| d.name()).collect();
            format!("unknown dtype '{s}'; expected one of: {}", names.join(", "))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The storage types that carry element codes name their format, and
    /// the format's code width is the stored element size.
    #[test]
    fn narrow_float_types_name_their_format() {
        let narrow: Vec<DType> = DType::ALL.into_iter().filter(|d| d.format().is_some()).collect();
        assert_eq!(narrow, [DType::F16, DType::BF16, DType::F8E4M3, DType::F8E5M2]);
        for d in narrow {
            assert_eq!(d.format().unwrap().bits() as usize, 8 * d.size(), "{}", d.name());
        }
    }
}
