//! CPU replay of a conformance capture: every case regenerated from its seed,
//! its rows recomputed under the order and under each foil, and compared with
//! the stored GPU row digests and foil counts.

use super::*;
use crate::device::suite_replay::{list_or_none, Replay, ReplayOptions, ReplayOutcome};

/// The conformance suite's CPU replay: every row and every foil.
pub struct Suite;

impl Replay for Suite {
    fn suite(&self) -> &'static str {
        SUITE
    }

    /// Fails on a row whose model digest differs from the GPU's and on a
    /// foil count that disagrees with the capture (each foil disagreement
    /// is also a problem line).
    fn replay(&self, capture: &Capture, _: &ReplayOptions) -> Result<ReplayOutcome> {
        let r = replay(capture, RowSelection::All)?;
        let problems: Vec<String> = r.foil_disagreements().iter().map(|d| format!("foil {d}")).collect();
        let nd: Vec<String> = r.non_discriminating().iter().map(|c| c.id.to_string()).collect();
        Ok(ReplayOutcome {
            summary: format!("{}; not discriminating: {}", r.totals(), list_or_none(&nd, " ")),
            details: r.case_replays.iter().map(CaseReplay::line).collect(),
            failed: r.row_mismatches.len() + problems.len(),
            problems,
        })
    }
}

/// One foil of a case recomputed on the CPU against the case's GPU rows.
#[derive(Clone, Debug, PartialEq)]
pub struct FoilReplay {
    /// Canonical spelling of the foil order.
    pub order: String,
    /// The count the capture stores for this foil (GPU outputs it misses),
    /// when the capture lists it.
    pub stored: Option<usize>,
    /// Replayed rows whose GPU digest the foil does not reproduce.
    pub rows_differing: usize,
    /// Outputs where the foil differs from the GPU bytes (NaN as a class),
    /// counted on the replayed rows whose model digest equals the GPU's
    /// (there the model *is* the GPU output, so the foil is compared with the
    /// model element by element).
    pub elements: usize,
    /// `elements` counts every output of the case: all rows were replayed
    /// and reproduced, and the kernel left none unwritten. Only then is it
    /// comparable with `stored`.
    pub exact: bool,
    /// Set when the CPU model refuses the foil (the GPU run then stores no
    /// count for it either).
    pub error: Option<String>,
}

impl FoilReplay {
    /// Why this foil's recomputation disagrees with the capture, if it does:
    /// a stored count that differs from the exact recomputed one, a foil the
    /// model now refuses although a count is stored, or a foil the model
    /// computes that the capture does not list.
    pub fn disagreement(&self) -> Option<String> {
        match (self.stored, &self.error) {
            (Some(s), None) if self.exact && s != self.elements => Some(format!(
                "`{}`: stored {s} mismatching outputs, recomputed {}",
                self.order, self.elements
            )),
            (Some(s), Some(e)) => Some(format!("`{}`: stored {s}, the model now refuses it: {e}", self.order)),
            (None, None) => Some(format!(
                "`{}`: recomputed {} mismatching outputs, the capture lists no count",
                self.order, self.elements
            )),
            _ => None,
        }
    }
}

/// Replay of one case.
#[derive(Clone, Debug, PartialEq)]
pub struct CaseReplay {
    pub id: usize,
    pub order: String,
    /// Rows in the capture (M).
    pub rows: usize,
    pub rows_checked: usize,
    /// Replayed rows whose model digest differs from the GPU's.
    pub rows_differing: Vec<usize>,
    /// Every foil of the order ([`foils`]), recomputed.
    pub foils: Vec<FoilReplay>,
    /// Foils the capture lists that [`foils`] no longer produces (order,
    /// stored count).
    pub stored_only: Vec<(String, usize)>,
}

impl CaseReplay {
    /// Whether some foil fails to reproduce the GPU bytes on a replayed row:
    /// the case tells its order from at least one wrong one.
    pub fn discriminates(&self) -> bool {
        self.foils.iter().any(|f| f.error.is_none() && f.rows_differing > 0)
    }

    /// Disagreements between the recomputed foils and the stored counts.
    pub fn foil_disagreements(&self) -> Vec<String> {
        let mut v: Vec<String> = self.foils.iter().filter_map(FoilReplay::disagreement).collect();
        for (order, n) in &self.stored_only {
            v.push(format!("`{order}`: stored {n}, not a foil of this order any more"));
        }
        v
    }

    /// One line: id, order, rows, and per foil `stored -> recomputed`.
    pub fn line(&self) -> String {
        let foils: Vec<String> = self
            .foils
            .iter()
            .map(|f| {
                let stored = f.stored.map_or("-".to_string(), |s| s.to_string());
                match &f.error {
                    Some(_) => format!("{} {stored}->refused", f.order),
                    None => format!(
                        "{} {stored}->{}{} ({} rows)",
                        f.order,
                        f.elements,
                        if f.exact { "" } else { "+" },
                        f.rows_differing
                    ),
                }
            })
            .collect();
        format!(
            "case {:3} {:<48} rows {:>3}/{:<3} {}{}",
            self.id,
            self.order,
            self.rows_checked,
            self.rows,
            if self.discriminates() {
                ""
            } else {
                "[NOT DISCRIMINATING] "
            },
            foils.join("; ")
        )
    }
}

/// Replay result.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ConformReplayReport {
    pub cases: usize,
    pub rows_checked: usize,
    /// Rows the capture holds (the sum of M over its cases).
    pub rows_in_capture: usize,
    /// (case id, row) pairs whose model digest differs from the GPU's.
    pub row_mismatches: Vec<(usize, usize)>,
    /// Cases whose capture recorded GPU-vs-model mismatches.
    pub recorded_mismatches: usize,
    /// Per case, in capture order.
    pub case_replays: Vec<CaseReplay>,
}

impl ConformReplayReport {
    /// Foils recomputed (those the model refuses not counted).
    pub fn foils_recomputed(&self) -> usize {
        self.case_replays
            .iter()
            .flat_map(|c| &c.foils)
            .filter(|f| f.error.is_none())
            .count()
    }

    /// Cases where every foil reproduces the GPU bytes on every replayed
    /// row: they cannot tell the claimed order from a wrong one.
    pub fn non_discriminating(&self) -> Vec<&CaseReplay> {
        self.case_replays.iter().filter(|c| !c.discriminates()).collect()
    }

    /// Every foil disagreement, prefixed with its case id.
    pub fn foil_disagreements(&self) -> Vec<String> {
        self.case_replays
            .iter()
            .flat_map(|c| {
                c.foil_disagreements()
                    .into_iter()
                    .map(move |d| format!("case {}: {d}", c.id))
            })
            .collect()
    }

    /// The totals in one line.
    pub fn totals(&self) -> String {
        format!(
            "{} cases; {} of {} rows replayed, {} differ from the GPU bytes; {} foils recomputed, {} disagree with the stored counts; {} of {} cases discriminate (a foil misses the GPU bytes)",
            self.cases,
            self.rows_checked,
            self.rows_in_capture,
            self.row_mismatches.len(),
            self.foils_recomputed(),
            self.foil_disagreements().len(),
            self.cases - self.non_discriminating().len(),
            self.cases
        )
    }
}

/// Which rows of each case a replay recomputes.
#[derive(Clone, Copy, Debug)]
pub enum RowSelection {
    /// First, middle and last row.
    Sample,
    All,
}

/// Replays `conform/cases.json` of a capture on the CPU model: the selected
/// rows of every case under its order (digests compared with the GPU's) and
/// under each of its [`foils`] (how many GPU rows and outputs each foil
/// misses, compared with the counts the capture stores). Cases run in
/// parallel; the report is in capture order whatever the thread count.
pub fn replay(capture: &Capture, rows: RowSelection) -> Result<ConformReplayReport> {
    use rayon::prelude::*;
    let report: ConformReport = capture.read_json("cases.json")?;
    let cases: Vec<CaseReplay> = report
        .records
        .par_iter()
        .map(|rec| replay_case(rec, rows))
        .collect::<Result<_>>()?;
    let mut out = ConformReplayReport::default();
    for (rec, c) in report.records.iter().zip(cases) {
        out.cases += 1;
        out.rows_checked += c.rows_checked;
        out.rows_in_capture += c.rows;
        out.row_mismatches.extend(c.rows_differing.iter().map(|&r| (c.id, r)));
        out.recorded_mismatches += rec.mismatches + rec.unwritten;
        out.case_replays.push(c);
    }
    Ok(out)
}

pub(super) fn replay_case(rec: &CaseRecord, rows: RowSelection) -> Result<CaseReplay> {
    let c = &rec.case;
    if c.m == 0 || c.n == 0 {
        return Err(DeviceError::Capture(format!(
            "case {}: empty output {}x{}",
            c.id, c.m, c.n
        )));
    }
    let digests = parse_digests(&rec.gpu_row_digests, c.m)?;
    let sel: Vec<usize> = match rows {
        RowSelection::All => (0..c.m).collect(),
        RowSelection::Sample => {
            let mut v = vec![0, c.m / 2, c.m - 1];
            v.dedup();
            v
        }
    };
    let inputs = c.inputs();
    let model = c.model(&inputs, Some(&sel))?;
    let reproduced: Vec<bool> = (0..sel.len())
        .map(|ri| row_digest(&model[ri * c.n..(ri + 1) * c.n]) == digests[sel[ri]])
        .collect();
    let rows_differing: Vec<usize> = (0..sel.len()).filter(|&ri| !reproduced[ri]).map(|ri| sel[ri]).collect();
    let complete = sel.len() == c.m && rows_differing.is_empty() && rec.unwritten == 0;
    let mut foil_replays = Vec::new();
    for foil in foils(&c.parsed_order()?) {
        let fc = ConformCase {
            order: foil.to_string(),
            ..c.clone()
        };
        let stored = rec.foils.iter().find(|f| f.0 == fc.order).map(|f| f.1);
        let mut fr = FoilReplay {
            order: fc.order.clone(),
            stored,
            rows_differing: 0,
            elements: 0,
            exact: complete,
            error: None,
        };
        match fc.model(&inputs, Some(&sel)) {
            Err(e) => fr.error = Some(e.to_string()),
            Ok(fm) => {
                for ri in 0..sel.len() {
                    let f_row = &fm[ri * c.n..(ri + 1) * c.n];
                    if row_digest(f_row) != digests[sel[ri]] {
                        fr.rows_differing += 1;
                    }
                    if reproduced[ri] {
                        let m_row = &model[ri * c.n..(ri + 1) * c.n];
                        fr.elements += f_row
                            .iter()
                            .zip(m_row)
                            .filter(|(f, m)| canonical_bits(**f) != canonical_bits(**m))
                            .count();
                    }
                }
            }
        }
        foil_replays.push(fr);
    }
    let stored_only = rec
        .foils
        .iter()
        .filter(|(o, _)| !foil_replays.iter().any(|f| &f.order == o))
        .cloned()
        .collect();
    Ok(CaseReplay {
        id: c.id,
        order: c.order.clone(),
        rows: c.m,
        rows_checked: sel.len(),
        rows_differing,
        foils: foil_replays,
        stored_only,
    })
}

fn parse_digests(s: &str, m: usize) -> Result<Vec<u64>> {
    if s.len() != 16 * m {
        return Err(DeviceError::Capture(format!(
            "expected {m} row digests, found {} hex digits",
            s.len()
        )));
    }
    (0..m)
        .map(|i| u64::from_str_radix(&s[16 * i..16 * i + 16], 16).map_err(|e| DeviceError::Capture(e.to_string())))
        .collect()
}
