//! CPU replay of a vendor capture: there is no CPU model of cuBLAS, so this
//! checks the capture's consistency (tables re-derived from the stored rows,
//! anchor rows against the reference).

use super::*;
use crate::device::suite_replay::{wrong_suite, Replay, ReplayOptions, ReplayOutcome};

/// The vendor suite's replay: the capture's consistency (there is no CPU
/// model of cuBLAS).
pub struct Suite;

impl Replay for Suite {
    fn suite(&self) -> &'static str {
        SUITE
    }

    /// Fails on every table or anchor row inconsistent with the stored bytes.
    fn replay(&self, capture: &Capture, _: &ReplayOptions) -> Result<ReplayOutcome> {
        let r = replay(capture)?;
        Ok(ReplayOutcome {
            summary: format!(
                "{} tables and {} anchor rows consistent with the stored bytes{} (no CPU model of cuBLAS yet)",
                r.tables_checked,
                r.rows_checked,
                if r.consistent() { "" } else { " -- INCONSISTENT" }
            ),
            details: Vec::new(),
            problems: Vec::new(),
            failed: r.mismatches.len(),
        })
    }
}

/// What [`replay`] found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VendorReplayReport {
    pub rows_checked: usize,
    pub tables_checked: usize,
    /// Every inconsistency found (empty when the capture is consistent).
    pub mismatches: Vec<String>,
    /// One line per table: case, shape, variant, invariant or not.
    pub summary: Vec<String>,
}

impl VendorReplayReport {
    pub fn consistent(&self) -> bool {
        self.mismatches.is_empty()
    }
}

/// Re-derives the anchor tables from the stored rows and checks them
/// against the stored tables. File integrity (manifest SHA-256) is checked
/// on read and is an error; inconsistencies are listed in the report.
/// There is no CPU model of cuBLAS: this checks the capture, not the GPU.
pub fn replay(capture: &Capture) -> Result<VendorReplayReport> {
    if capture.manifest.suite != SUITE {
        return Err(wrong_suite(capture, SUITE));
    }
    let report: VendorReport = capture.read_json("report.json")?;
    let data = capture.read("rows.bin")?;
    let mut mismatches = Vec::new();
    if report.schema != SCHEMA {
        mismatches.push(format!("schema {} (this build reads {SCHEMA})", report.schema));
    }
    for e in &report.rows {
        let b = row_bytes(e, &data)?;
        match (b, &e.sha256) {
            (Some(b), Some(h)) if &sha256_hex(b) != h => mismatches.push(format!(
                "{} {} {} M={} {}: row digest differs",
                e.shape,
                e.case.name(),
                e.variant.name(),
                e.m,
                e.position
            )),
            (Some(_), None) | (None, Some(_)) => mismatches.push(format!(
                "{} {} M={} {}: digest without row or row without digest",
                e.shape,
                e.case.name(),
                e.m,
                e.position
            )),
            _ => {}
        }
        if (e.status == RowStatus::Ok) != b.is_some() {
            mismatches.push(format!(
                "{} {} M={} {}: status {} but {} row",
                e.shape,
                e.case.name(),
                e.m,
                e.position,
                e.status.short(),
                if b.is_some() { "a" } else { "no" }
            ));
        }
    }
    let tables = derive_tables(&report.rows, &data, &report.options.shapes)?;
    if tables.len() != report.tables.len() {
        mismatches.push(format!(
            "{} tables derived, {} stored",
            tables.len(),
            report.tables.len()
        ));
    }
    for (d, t) in tables.iter().zip(&report.tables) {
        if d != t {
            mismatches.push(format!(
                "table {} {} {}: stored cells differ from the rows",
                t.shape,
                t.case.name(),
                t.variant.name()
            ));
        }
    }
    let summary = tables
        .iter()
        .map(|t| {
            format!(
                "{} {} {}: {}",
                t.shape,
                t.case.name(),
                t.variant.name(),
                match t.invariant {
                    Some(true) => format!("invariant ({} rows)", t.ok_cells),
                    Some(false) => format!("{} of {} rows differ", t.differing_cells, t.ok_cells),
                    None => "nothing ran".into(),
                }
            )
        })
        .collect();
    Ok(VendorReplayReport {
        rows_checked: report.rows.len(),
        tables_checked: tables.len(),
        mismatches,
        summary,
    })
}
