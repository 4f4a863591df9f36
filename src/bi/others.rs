//! What the non-target rows of a batch hold (the case file's
//! `content.others`; `mxbi fuzz` draws it and shrinks it toward `drawn`).
//!
//! # Contract
//! - The target row is row id 0 ([`super::Rows::row`]); every other row
//!   has an id `other_id(set, j)` = `1 + (set << 40) + j` (set A = 0, set
//!   B = 1, `j` its index in the set). `others` never changes the target
//!   row, nor B: only rows with id != 0.
//! - Every row stays a function of the seed and its row id only, and every
//!   value stays exactly representable in the input type (finite where the
//!   drawn value is finite).
//! - Settings ([`Others`]):
//!   - `drawn` (the default; omitted from case files, so old case files and
//!     their bytes are unchanged): each row drawn by the content class, as
//!     before the key existed.
//!   - `zero`: every other row is all +0 (padding).
//!   - `duplicate`: every other row of set `s` is the drawn row
//!     `other_id(s, 0)`: all of a batch's other rows are one row, repeated
//!     (sets A and B still differ, so the content family still compares
//!     two different batches).
//!   - `target`: every other row is the target row (id 0): the batch is the
//!     target row repeated.
//!   - `tiny`, `huge`: the drawn row with every finite non-zero value
//!     multiplied by 2^-s (`tiny`) or 2^+s (`huge`), where `s` is the
//!     largest shift up to [`shift_cap`] (64 for f32 and bf16, 8 for f16
//!     and e5m2, 4 for e4m3) at which every value of that row stays exact
//!     and finite in the input type (0 when the row already holds the
//!     type's largest, or for `tiny` its smallest, magnitudes). Zeros, Inf
//!     and NaN are kept as drawn.
//!   - `zero-beside`: the drawn rows, except that the rows with an even
//!     index `j` in their set are all +0. In a batch built around a target
//!     at position `at` (the other rows `j = 0, 1, ...` in order, the
//!     target inserted at `at`), the rows above the target (positions
//!     `p < at`, `j = p`) are zero at even positions and the rows below it
//!     (`p > at`, `j = p - 1`) at odd positions: the rows beside the target
//!     alternate with padding, and exactly one of its two neighbours is
//!     zero (the row after it when `at` is even, the row before it when
//!     `at` is odd). In a batch of other rows only (permutation, repeat:
//!     `j` = position) the even positions are zero.

use super::row_ids::{other_id, set_and_index};
use crate::format::{encode_f32, CastPolicy};
use crate::order::InType;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What the non-target rows hold (see the module doc).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Others {
    #[default]
    Drawn,
    Zero,
    Duplicate,
    Target,
    Tiny,
    Huge,
    ZeroBeside,
}

impl Others {
    /// Simplest first (the order shrinking prefers: `drawn` first).
    pub const ALL: [Others; 7] = [
        Others::Drawn,
        Others::Zero,
        Others::Duplicate,
        Others::Target,
        Others::Tiny,
        Others::Huge,
        Others::ZeroBeside,
    ];

    pub const fn name(self) -> &'static str {
        match self {
            Others::Drawn => "drawn",
            Others::Zero => "zero",
            Others::Duplicate => "duplicate",
            Others::Target => "target",
            Others::Tiny => "tiny",
            Others::Huge => "huge",
            Others::ZeroBeside => "zero-beside",
        }
    }

    /// Whether this is the default (serde: omitted when it is).
    pub fn is_drawn(&self) -> bool {
        *self == Others::Drawn
    }

    /// Row `id` of A (`k` values) given `drawn(id)`, the row the content
    /// class draws for an id (`ty`: the input type).
    pub(super) fn row(self, id: u64, ty: InType, k: usize, drawn: &dyn Fn(u64) -> Vec<f32>) -> Vec<f32> {
        if id == 0 {
            return drawn(0);
        }
        let (set, j) = set_and_index(id);
        match self {
            Others::Drawn => drawn(id),
            Others::Zero => vec![0.0; k],
            Others::Duplicate => drawn(other_id(set, 0)),
            Others::Target => drawn(0),
            Others::Tiny => scaled(drawn(id), ty, -1),
            Others::Huge => scaled(drawn(id), ty, 1),
            Others::ZeroBeside if j % 2 == 0 => vec![0.0; k],
            Others::ZeroBeside => drawn(id),
        }
    }
}

impl std::str::FromStr for Others {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Others::ALL.into_iter().find(|c| c.name() == s).ok_or_else(|| {
            format!(
                "unknown others '{s}'; expected one of: {}",
                Others::ALL.map(|c| c.name()).join(", ")
            )
        })
    }
}

/// The largest shift `tiny` and `huge` use for `ty`: a quarter of the
/// type's exponent codes (2^(ebits - 2)).
pub fn shift_cap(ty: InType) -> i32 {
    let ebits = ty.params().map_or(8, |p| p.ebits);
    1 << (ebits - 2)
}

/// Whether `v * 2^shift` is exact and finite in `ty`.
fn exact(v: f32, ty: InType, shift: i32) -> bool {
    let w = v as f64 * 2f64.powi(shift);
    let x = w as f32;
    if !x.is_finite() || x as f64 != w {
        return false;
    }
    match ty.format() {
        None => true,
        Some(f) => encode_f32(x, f, &CastPolicy::ieee(f), 0).is_ok_and(|c| f.decode_f32(c).to_bits() == x.to_bits()),
    }
}

/// `row` with its finite non-zero values multiplied by 2^(dir * s), `s`
/// the largest shift up to [`shift_cap`] keeping every value exact.
fn scaled(mut row: Vec<f32>, ty: InType, dir: i32) -> Vec<f32> {
    let live = |v: &f32| v.is_finite() && *v != 0.0;
    let ok = |s: i32| row.iter().filter(|v| live(v)).all(|&v| exact(v, ty, dir * s));
    // exactness is monotone in the shift: binary search for the largest
    let (mut lo, mut hi) = (0, shift_cap(ty) + 1);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if ok(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let f = 2f64.powi(dir * lo);
    for v in row.iter_mut().filter(|v| live(v)) {
        *v = (*v as f64 * f) as f32;
    }
    row
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bi::{Content, ContentClass, Rows};

    fn rows(ty: InType, class: ContentClass, others: Others) -> Rows {
        let c = Content {
            class,
            others,
            ..Content::default()
        };
        Rows::with_content(3, 64, 2, ty, c)
    }

    #[test]
    fn the_target_row_and_b_are_never_changed() {
        for ty in InType::ALL {
            for class in ContentClass::ALL {
                let d = rows(ty, class, Others::Drawn);
                for o in Others::ALL {
                    let r = rows(ty, class, o);
                    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&r.row(0)), bits(&d.row(0)), "{ty:?} {class:?} {o:?}");
                    assert_eq!(bits(&r.b), bits(&d.b), "{ty:?} {class:?} {o:?}");
                }
            }
        }
    }

    #[test]
    fn each_setting_holds_what_it_says() {
        let ty = InType::F32;
        let d = rows(ty, ContentClass::Plain, Others::Drawn);
        let zero = |v: &[f32]| v.iter().all(|x| x.to_bits() == 0);
        let r = rows(ty, ContentClass::Plain, Others::Zero);
        assert!(zero(&r.row(other_id(0, 0))) && zero(&r.row(other_id(1, 7))));
        let r = rows(ty, ContentClass::Plain, Others::Duplicate);
        assert_eq!(r.row(other_id(0, 5)), d.row(other_id(0, 0)));
        assert_eq!(r.row(other_id(1, 5)), d.row(other_id(1, 0)));
        assert_ne!(r.row(other_id(0, 5)), r.row(other_id(1, 5)));
        let r = rows(ty, ContentClass::Plain, Others::Target);
        assert_eq!(r.row(other_id(1, 3)), d.row(0));
        let r = rows(ty, ContentClass::Plain, Others::ZeroBeside);
        for j in 0..6 {
            let row = r.row(other_id(0, j));
            if j % 2 == 0 {
                assert!(zero(&row), "{j}");
            } else {
                assert_eq!(row, d.row(other_id(0, j)));
            }
        }
        // plain f32 rows have room for the whole shift
        for (o, f) in [(Others::Tiny, 2f32.powi(-64)), (Others::Huge, 2f32.powi(64))] {
            let r = rows(ty, ContentClass::Plain, o);
            let want: Vec<f32> = d.row(other_id(0, 2)).iter().map(|v| v * f).collect();
            assert_eq!(r.row(other_id(0, 2)), want, "{o:?}");
        }
    }

    #[test]
    fn scaled_rows_stay_exact_and_finite_in_every_type() {
        for ty in InType::ALL {
            for class in ContentClass::ALL {
                for o in [Others::Tiny, Others::Huge] {
                    let d = rows(ty, class, Others::Drawn);
                    let r = rows(ty, class, o);
                    for j in 0..4 {
                        let (x, y) = (d.row(other_id(0, j)), r.row(other_id(0, j)));
                        for (a, b) in x.iter().zip(&y) {
                            if a.is_finite() {
                                assert!(b.is_finite() && exact(*b, ty, 0), "{ty:?} {class:?} {o:?} {a} -> {b}");
                                assert_eq!(*a == 0.0, *b == 0.0);
                            } else {
                                assert_eq!(a.to_bits(), b.to_bits());
                            }
                        }
                    }
                }
            }
        }
        // the shift is as large as the type allows
        assert_eq!(shift_cap(InType::F32), 64);
        assert_eq!(shift_cap(InType::E4M3), 4);
        assert_eq!(scaled(vec![1.0, 0.0], InType::F16, 1), vec![256.0, 0.0]);
        assert_eq!(scaled(vec![f32::MAX], InType::F32, 1), vec![f32::MAX]);
        // f16's smallest normal is 2^-14: 2^-10 keeps its 10 bits down to 2^-24 only when they are zero
        assert_eq!(scaled(vec![2f32.powi(-10)], InType::F16, -1), vec![2f32.powi(-18)]);
    }

    #[test]
    fn names_round_trip_and_the_default_is_omitted() {
        for o in Others::ALL {
            assert_eq!(o.name().parse::<Others>(), Ok(o));
            assert_eq!(serde_json::to_string(&o).unwrap(), format!("\"{}\"", o.name()));
        }
        assert!("padding".parse::<Others>().unwrap_err().contains("zero-beside"));
        let c = Content {
            others: Others::ZeroBeside,
            ..Content::default()
        };
        assert_eq!(
            serde_json::to_string(&c).unwrap(),
            r#"{"class":"separating","others":"zero-beside"}"#
        );
        // the default is omitted: old case files keep their bytes
        assert_eq!(
            serde_json::to_string(&Content::default()).unwrap(),
            r#"{"class":"separating"}"#
        );
        let back: Content = serde_json::from_str(r#"{"class":"plain"}"#).unwrap();
        assert_eq!(back.others, Others::Drawn);
    }
}
