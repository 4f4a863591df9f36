//! The exact rounding core: an exact input `sig * 2^exp` rounded to a quantum
//! `2^q` in integer arithmetic. No floating-point operation is involved.

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

/// Round the positive exact value `sig * 2^exp` (sig > 0) to an integer
/// multiple of `2^q`, returning the multiple (the rounded magnitude in units
/// of `2^q`). `negative` is the sign of the original value (for directed
/// modes); `random` is the stochastic draw (ignored for other modes).
#[inline]
pub fn round_to_quantum(sig: u64, exp: i32, q: i32, negative: bool, mode: Rounding, sr: Option<(u32, u64)>) -> u64 {
    debug_assert!(sig != 0);
    let shift = q as i64 - exp as i64;
    if shift <= 0 {
        // Exact: the value is already a multiple of 2^q. Callers guarantee the
        // result fits (they check the range before calling).
        let s = (-shift) as u32;
        debug_assert!(s < 64 && (sig.leading_zeros() >= s));
        return sig << s;
    }
    // kept = floor(v / 2^q); the discarded fraction is frac / 2^shift.
    let (kept, frac) = if shift >= 64 {
        (0u64, sig)
    } else {
        (sig >> shift, sig & ((1u64 << shift) - 1))
    };
    if frac == 0 {
        return kept;
    }
    // Compare the fraction with one half: frac vs 2^(shift-1).
    let cmp_half = if shift > 64 {
        std::cmp::Ordering::Less
    } else {
        frac.cmp(&(1u64 << (shift - 1)))
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
            let t = if shift >= 127 {
                0
            } else {
                ((frac as u128) << k) >> shift
            };
            t + r as u128 >= (1u128 << k)
        }
    };
    kept + up as u64
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
    fn stochastic_is_fair_on_average() {
        // 0.25 with 8 random bits rounds up about a quarter of the time.
        let sr = Stochastic { seed: 7, bits: 8 };
        let ups: u64 = (0..40_000u64)
            .map(|i| round_to_quantum(1, -2, 0, false, Rounding::Stochastic, Some((8, sr.draw(i)))))
            .sum();
        assert!((9_000..11_000).contains(&ups), "{ups}");
    }
}
