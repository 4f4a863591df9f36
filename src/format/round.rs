//! The exact rounding core (a leaf: it imports nothing from the crate): the
//! rounding directions, the one exact value type [`Exact`], and the one
//! reference rounding [`round_to_quantum`] of an exact `sig * 2^exp` to a
//! quantum `2^q` in integer arithmetic. No floating-point operation is
//! involved except the final, exact, assembly of an f64.

use std::fmt;
use std::str::FromStr;

/// Rounding direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rounding {
    /// Round to nearest, ties to even (IEEE roundTiesToEven).
    NearestEven,
    /// Round to nearest, ties away from zero (IEEE roundTiesToAway).
    NearestAway,
    /// Truncate toward zero.
    TowardZero,
    /// Toward +Inf.
    Up,
    /// Toward -Inf.
    Down,
    /// Stochastic: see [`Stochastic`].
    Stochastic,
}

impl Rounding {
    pub const ALL: [Rounding; 6] = [
        Rounding::NearestEven,
        Rounding::NearestAway,
        Rounding::TowardZero,
        Rounding::Up,
        Rounding::Down,
        Rounding::Stochastic,
    ];
    pub const fn name(self) -> &'static str {
        match self {
            Rounding::NearestEven => "nearest-even",
            Rounding::NearestAway => "nearest-away",
            Rounding::TowardZero => "toward-zero",
            Rounding::Up => "up",
            Rounding::Down => "down",
            Rounding::Stochastic => "stochastic",
        }
    }
    /// Whether an overflowing value under this mode and sign goes to the
    /// largest finite value rather than to infinity (IEEE 754 §7.4).
    pub const fn overflow_to_max(self, negative: bool) -> bool {
        match self {
            Rounding::TowardZero => true,
            Rounding::Up => negative,
            Rounding::Down => !negative,
            _ => false,
        }
    }
}

impl fmt::Display for Rounding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Rounding {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Rounding::ALL.into_iter().find(|r| r.name() == s).ok_or_else(|| {
            format!("unknown rounding '{s}'; expected nearest-even, nearest-away, toward-zero, up, down, stochastic")
        })
    }
}

/// Stochastic rounding parameters.
///
/// Contract: with `bits = k`, the top `k` discarded bits (below the kept LSB)
/// form an integer `t`; a uniform `r` in `[0, 2^k)` is drawn from
/// `(seed, element index)` by a counter-based generator; the kept magnitude is
/// incremented iff `t + r >= 2^k`. Discarded bits below the top `k` are
/// ignored (as a hardware adder of `k` random bits does). Results depend only
/// on seed and element index, never on thread count.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Stochastic {
    pub seed: u64,
    pub bits: u32,
}

impl Default for Stochastic {
    fn default() -> Self {
        Stochastic { seed: 0, bits: 16 }
    }
}

impl Stochastic {
    /// The random integer in `[0, 2^bits)` for element `index`.
    #[inline]
    pub fn draw(&self, index: u64) -> u64 {
        let r = splitmix64(self.seed ^ splitmix64(index.wrapping_add(0x6A09_E667_F3BC_C909)));
        if self.bits >= 64 {
            r
        } else {
            r >> (64 - self.bits)
        }
    }
}

#[inline]
fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// An input value decomposed exactly from its bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Input {
    Zero {
        negative: bool,
    },
    /// |x| = sig * 2^exp, sig > 0.
    Finite {
        negative: bool,
        sig: u64,
        exp: i32,
    },
    Inf {
        negative: bool,
    },
    /// NaN with its payload left-aligned in 64 bits (quiet bit first).
    Nan {
        negative: bool,
        payload: u64,
    },
}

impl Input {
    pub fn from_f32(x: f32) -> Input {
        let b = x.to_bits();
        let negative = b >> 31 != 0;
        let e = (b >> 23) & 0xFF;
        let m = (b & 0x7F_FFFF) as u64;
        match (e, m) {
            (0, 0) => Input::Zero { negative },
            (0, m) => Input::Finite {
                negative,
                sig: m,
                exp: -149,
            },
            (0xFF, 0) => Input::Inf { negative },
            (0xFF, m) => Input::Nan {
                negative,
                payload: m << 41,
            },
            (e, m) => Input::Finite {
                negative,
                sig: m | 1 << 23,
                exp: e as i32 - 150,
            },
        }
    }

    pub fn from_f64(x: f64) -> Input {
        let b = x.to_bits();
        let negative = b >> 63 != 0;
        let e = (b >> 52) & 0x7FF;
        let m = b & ((1 << 52) - 1);
        match (e, m) {
            (0, 0) => Input::Zero { negative },
            (0, m) => Input::Finite {
                negative,
                sig: m,
                exp: -1074,
            },
            (0x7FF, 0) => Input::Inf { negative },
            (0x7FF, m) => Input::Nan {
                negative,
                payload: m << 12,
            },
            (e, m) => Input::Finite {
                negative,
                sig: m | 1 << 52,
                exp: e as i32 - 1075,
            },
        }
    }

    /// The value as f64 (exact: significands have at most 53 bits), for
    /// messages.
    pub fn value(&self) -> f64 {
        match *self {
            Input::Zero { negative } => {
                if negative {
                    -0.0
                } else {
                    0.0
                }
            }
            Input::Finite { negative, sig, exp } => {
                let v = sig as f64 * 2f64.powi(exp);
                if negative {
                    -v
                } else {
                    v
                }
            }
            Input::Inf { negative } => {
                if negative {
                    f64::NEG_INFINITY
                } else {
                    f64::INFINITY
                }
            }
            Input::Nan { .. } => f64::NAN,
        }
    }

    /// The same value multiplied by 2^k (exact; NaN/Inf/zero unchanged).
    pub fn scaled(self, k: i32) -> Input {
        match self {
            Input::Finite { negative, sig, exp } => Input::Finite {
                negative,
                sig,
                exp: exp + k,
            },
            other => other,
        }
    }
}

/// An exact finite value `(-1)^neg * mag * 2^exp`: the one exact value type
/// of the crate (fused sums, block dots and rounded steps all produce it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exact {
    pub neg: bool,
    pub mag: u128,
    pub exp: i32,
}

impl Exact {
    /// The exact value of a finite f32 (Inf and NaN are not exact values;
    /// their bits are read as if they were finite).
    pub fn from_f32(x: f32) -> Exact {
        let b = x.to_bits();
        let neg = b >> 31 != 0;
        let e = ((b >> 23) & 0xFF) as i32;
        let m = (b & 0x7F_FFFF) as u128;
        if e == 0 {
            Exact { neg, mag: m, exp: -149 }
        } else {
            Exact {
                neg,
                mag: m | 1 << 23,
                exp: e - 150,
            }
        }
    }

    /// `sum * 2^exp`.
    pub fn from_i128(sum: i128, exp: i32) -> Exact {
        Exact {
            neg: sum < 0,
            mag: sum.unsigned_abs(),
            exp,
        }
    }

    /// The reference rounding of `|self|` (nonzero) to a binary format with
    /// `frac` fraction bits and smallest normal exponent `emin` (subnormals
    /// at the quantum `2^(emin - frac)`), unbounded above: `(m, q)` with
    /// `|result| = m * 2^q` and `m < 2^(frac + 1)` (a carry out of the
    /// significand moves into `q`). Range checks are the caller's.
    pub fn round(self, frac: u32, emin: i32, mode: Rounding, sr: Option<(u32, u64)>) -> (u128, i32) {
        debug_assert!(self.mag != 0);
        let lead = (127 - self.mag.leading_zeros()) as i32 + self.exp;
        let mut q = lead.max(emin) - frac as i32;
        let mut m = round_to_quantum(self.mag, self.exp, q, self.neg, mode, sr);
        if m >> (frac + 1) != 0 {
            m >>= 1;
            q += 1;
        }
        (m, q)
    }

    /// The value rounded to nearest-even binary64 (Inf beyond its range).
    pub fn to_f64(self) -> f64 {
        if self.mag == 0 {
            return if self.neg { -0.0 } else { 0.0 };
        }
        let (m, q) = self.round(52, -1022, Rounding::NearestEven, None);
        // m has at most 53 bits and q >= -1074: both products are exact (the
        // power is applied in two halves so that neither factor underflows),
        // or overflow to Inf exactly when the rounded value exceeds f64::MAX
        let q = q.min(1100);
        let v = m as f64 * 2f64.powi(q / 2) * 2f64.powi(q - q / 2);
        if self.neg {
            -v
        } else {
            v
        }
    }
}

/// Round the positive exact value `sig * 2^exp` (sig > 0) to an integer
/// multiple of `2^q`, returning the multiple (the rounded magnitude in units
/// of `2^q`). `negative` is the sign of the original value (for directed
/// modes); `sr` is the stochastic (bits, draw) (ignored for other modes).
/// This is the one reference rounding: the element encoders, [`Exact::round`]
/// and through it every rounded step of the GEMM model use it; fast paths
/// (the FP8 RNE kernel, the f32 table path, the tensor-core kernels' RZ) are
/// tested against it.
#[inline]
pub fn round_to_quantum(sig: u128, exp: i32, q: i32, negative: bool, mode: Rounding, sr: Option<(u32, u64)>) -> u128 {
    debug_assert!(sig != 0);
    let shift = q as i64 - exp as i64;
    if shift <= 0 {
        // Exact: the value is already a multiple of 2^q. Callers guarantee the
        // result fits (they check the range before calling).
        let s = (-shift) as u32;
        debug_assert!(s < 128 && (sig.leading_zeros() >= s));
        return sig << s;
    }
    // kept = floor(v / 2^q); the discarded fraction is frac / 2^shift.
    let (kept, frac) = if shift >= 128 {
        (0u128, sig)
    } else {
        (sig >> shift, sig & ((1u128 << shift) - 1))
    };
    if frac == 0 {
        return kept;
    }
    // Compare the fraction with one half: frac vs 2^(shift-1).
    let cmp_half = if shift > 128 {
        std::cmp::Ordering::Less
    } else {
        frac.cmp(&(1u128 << (shift - 1)))
    };
    use std::cmp::Ordering::*;
    let up = match mode {
        Rounding::NearestEven => cmp_half == Greater || (cmp_half == Equal && kept & 1 == 1),
        Rounding::NearestAway => cmp_half != Less,
        Rounding::TowardZero => false,
        Rounding::Up => !negative,
        Rounding::Down => negative,
        Rounding::Stochastic => {
            let (k, r) = sr.unwrap_or((16, 0));
            // top k bits of the fraction: floor(frac * 2^k / 2^shift)
            let t = if shift >= k as i64 + 128 {
                0
            } else if shift >= k as i64 {
                frac >> (shift - k as i64)
            } else {
                frac << (k as i64 - shift)
            };
            t + r as u128 >= (1u128 << k)
        }
    };
    kept + up as u128
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ties_and_directions() {
        // 2.5 = 5 * 2^-1 rounded to integers.
        let r = |m, neg| round_to_quantum(5, -1, 0, neg, m, None);
        assert_eq!(r(Rounding::NearestEven, false), 2);
        assert_eq!(r(Rounding::NearestAway, false), 3);
        assert_eq!(r(Rounding::TowardZero, false), 2);
        assert_eq!(r(Rounding::Up, false), 3);
        assert_eq!(r(Rounding::Up, true), 2);
        assert_eq!(r(Rounding::Down, true), 3);
        // 3.5 ties to 4 (even)
        assert_eq!(round_to_quantum(7, -1, 0, false, Rounding::NearestEven, None), 4);
        // tiny value far below the quantum
        assert_eq!(round_to_quantum(1, -200, 0, false, Rounding::NearestEven, None), 0);
        assert_eq!(round_to_quantum(1, -200, 0, false, Rounding::Up, None), 1);
        assert_eq!(round_to_quantum(1, -200, 0, true, Rounding::Up, None), 0);
        // exactly half with shift 64
        assert_eq!(round_to_quantum(1 << 63, -64, 0, false, Rounding::NearestAway, None), 1);
        assert_eq!(round_to_quantum(1 << 63, -64, 0, false, Rounding::NearestEven, None), 0);
        assert_eq!(
            round_to_quantum((1 << 63) + 1, -64, 0, false, Rounding::NearestEven, None),
            1
        );
    }

    #[test]
    fn exact_to_f64_rounds_once_over_the_whole_range() {
        let x = |sum: i128, exp: i32| Exact::from_i128(sum, exp).to_f64();
        assert_eq!(x(1, -1074), f64::from_bits(1));
        assert_eq!(x(3, -1075), f64::from_bits(2), "1.5 quanta: tie to even");
        assert_eq!(x(5, -1075), f64::from_bits(2), "2.5 quanta: tie to even");
        assert_eq!(x(1, -1076), 0.0, "a quarter quantum");
        assert_eq!(x((1 << 53) + 1, 0), 9007199254740992.0);
        assert_eq!(x((1 << 53) + 3, 0), 9007199254740996.0);
        assert_eq!(x(-(1 << 60), 963), -(2f64.powi(1023)));
        assert_eq!(x(-(1 << 60), 964), f64::NEG_INFINITY);
        assert_eq!(x((1 << 53) - 1, 971), f64::MAX);
        assert_eq!(x(0, 5).to_bits(), 0);
        assert_eq!(Exact::from_f32(-1.5).to_f64(), -1.5);
    }

    #[test]
    fn stochastic_is_fair_on_average() {
        // 0.25 with 8 random bits rounds up about a quarter of the time.
        let sr = Stochastic { seed: 7, bits: 8 };
        let ups: u64 = (0..40_000u64)
            .map(|i| round_to_quantum(1, -2, 0, false, Rounding::Stochastic, Some((8, sr.draw(i)))) as u64)
            .sum();
        assert!((9_000..11_000).contains(&ups), "{ups}");
    }
}
