//! Verdicts and the byte comparison of output rows (contract: the module
//! doc of `bi`).

use serde::{Deserialize, Serialize};
use std::fmt;

/// The verdict of one cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Verdict {
    #[serde(rename = "BI_PASS")]
    Pass,
    #[serde(rename = "BI_FAIL")]
    Fail,
    #[serde(rename = "NON_DET")]
    NonDet,
    #[serde(rename = "VACUOUS")]
    Vacuous,
    #[serde(rename = "ERROR")]
    Error,
}

impl Verdict {
    pub const ALL: [Verdict; 5] = [
        Verdict::Pass,
        Verdict::Fail,
        Verdict::NonDet,
        Verdict::Vacuous,
        Verdict::Error,
    ];

    pub const fn name(self) -> &'static str {
        match self {
            Verdict::Pass => "BI_PASS",
            Verdict::Fail => "BI_FAIL",
            Verdict::NonDet => "NON_DET",
            Verdict::Vacuous => "VACUOUS",
            Verdict::Error => "ERROR",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One differing output element.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Offender {
    /// The row's label in the cell (its position in the baseline batch).
    pub row: usize,
    pub col: usize,
    /// f32 bits, 8 hex digits.
    pub baseline: String,
    pub variant: String,
    /// ULP distance (None when either side is NaN).
    pub ulp: Option<u64>,
}

/// How two sets of rows differ, byte for byte.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RowDiff {
    /// Rows compared.
    pub rows: usize,
    /// Rows with at least one differing element.
    pub rows_differing: usize,
    /// Elements whose bits differ.
    pub elements_differing: usize,
    /// Bytes that differ (of 4 per element).
    pub bytes_differing: usize,
    /// Columns with at least one differing element.
    pub columns_differing: usize,
    /// Largest ULP distance among differing non-NaN pairs.
    pub max_ulp: u64,
    /// Differing pairs where one side is NaN (no ULP distance).
    pub nan_differing: usize,
    /// The first differing elements (row-major, at most 8).
    pub first_offenders: Vec<Offender>,
}

impl RowDiff {
    pub fn identical(&self) -> bool {
        self.elements_differing == 0
    }
}

/// Position of a finite or infinite f32 on the ordered integer line
/// (-0 and +0 are one apart: they are different bytes).
fn ordinal(x: f32) -> i64 {
    let b = x.to_bits();
    if b >> 31 == 1 {
        -((b & 0x7FFF_FFFF) as i64) - 1
    } else {
        b as i64
    }
}

const MAX_OFFENDERS: usize = 8;

/// Compares rows `[rows, n]` of a baseline and a variant; `labels[i]` names
/// row i in offenders.
pub fn compare_rows(baseline: &[f32], variant: &[f32], n: usize, labels: &[usize]) -> RowDiff {
    assert_eq!(baseline.len(), variant.len(), "compare_rows: lengths differ");
    let rows = baseline.len().checked_div(n).unwrap_or(0);
    let mut d = RowDiff {
        rows,
        ..Default::default()
    };
    let mut cols = vec![false; n];
    for r in 0..rows {
        let mut row_differs = false;
        for c in 0..n {
            let (x, y) = (baseline[r * n + c], variant[r * n + c]);
            if x.to_bits() == y.to_bits() {
                continue;
            }
            row_differs = true;
            cols[c] = true;
            d.elements_differing += 1;
            let (bx, by) = (x.to_bits().to_le_bytes(), y.to_bits().to_le_bytes());
            d.bytes_differing += bx.iter().zip(by).filter(|(p, q)| *p != q).count();
            let ulp = (!x.is_nan() && !y.is_nan()).then(|| ordinal(x).abs_diff(ordinal(y)));
            match ulp {
                Some(u) => d.max_ulp = d.max_ulp.max(u),
                None => d.nan_differing += 1,
            }
            if d.first_offenders.len() < MAX_OFFENDERS {
                d.first_offenders.push(Offender {
                    row: labels.get(r).copied().unwrap_or(r),
                    col: c,
                    baseline: format!("{:08x}", x.to_bits()),
                    variant: format!("{:08x}", y.to_bits()),
                    ulp,
                });
            }
        }
        d.rows_differing += row_differs as usize;
    }
    d.columns_differing = cols.iter().filter(|&&c| c).count();
    d
}

/// How bad a verdict is, for squares holding several cells.
pub(super) fn severity(v: Verdict) -> u8 {
    match v {
        Verdict::Fail => 4,
        Verdict::NonDet => 3,
        Verdict::Error => 2,
        Verdict::Vacuous => 1,
        Verdict::Pass => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_not_values() {
        // -0 vs +0 and two NaN payloads are different bytes
        let base = [0.0f32, f32::from_bits(0x7FC0_0000), 1.0, 2.0];
        let var = [
            -0.0f32,
            f32::from_bits(0x7FC0_0001),
            1.0,
            f32::from_bits(2.0f32.to_bits() + 3),
        ];
        let d = compare_rows(&base, &var, 2, &[10, 11]);
        assert_eq!(d.rows, 2);
        assert_eq!(d.rows_differing, 2);
        assert_eq!(d.elements_differing, 3);
        assert_eq!(d.columns_differing, 2);
        assert_eq!(d.nan_differing, 1);
        assert_eq!(d.max_ulp, 3);
        assert_eq!(d.bytes_differing, 1 + 1 + 1);
        assert_eq!(d.first_offenders[0].row, 10);
        assert_eq!(d.first_offenders[0].ulp, Some(1));
        assert!(compare_rows(&base, &base, 2, &[0, 1]).identical());
    }
}
