//! The report of a check: cells, positive controls and the summary, as
//! JSON (`mxbi-bi-report/1`), a Markdown table and a terminal summary.

use super::case::Standard;
use super::cell::Cell;
use super::cell_witness::CellWitness;
use super::control::Control;
use super::explanation::Explanation;
use super::family::Family;
use super::grid::{knob_text, settings, sort_cells};
use super::mrange::MRangeResult;
use super::options::CheckOptions;
use super::verdict::Verdict;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write;

pub const REPORT_SCHEMA: &str = "mxbi-bi-report/1";

/// Counts per verdict, and whether the run is valid.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub cells: usize,
    pub verdicts: BTreeMap<String, usize>,
    /// Every positive control failed as it must.
    pub valid: bool,
}

/// What the check was asked (two reports merge only when these agree).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Options {
    pub families: Vec<Family>,
    pub ms: Vec<usize>,
    pub k: usize,
    pub n: usize,
    /// Target-row positions as given (empty: each family's default).
    pub positions: Vec<String>,
    pub repeats: usize,
}

/// Where a check came from when it was a case file: its name and its
/// standards (`acc` and `perf` carried unevaluated).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CaseInfo {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub standard: Option<Standard>,
}

/// How a matrix's cells were counted: what it lists, what merged, what
/// ran. `listed = merged + skipped + cells`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MatrixInfo {
    /// The built-in matrix (null: jobs given by a program).
    pub name: Option<String>,
    /// Cells as the matrix lists them: for each setting, family and M,
    /// every target position listed (seed000: 8,640), vacuity probes included.
    pub listed: usize,
    /// Of those, the vacuity probes (inputs drawn `unit`).
    pub probes: usize,
    /// Listed cells that are another cell because two positions name one
    /// row (at M = 2, `mid` and `last` are both row 1): run once.
    pub merged: usize,
    /// Listed cells with nothing to compare (a position beyond M, row 0
    /// of `position`, M = 1 of `content`).
    pub skipped: usize,
    /// Distinct cells of the whole matrix (a shard runs some of them).
    pub cells: usize,
}

impl MatrixInfo {
    /// One line with the arithmetic, e.g. `matrix seed000: 8,664 cells
    /// listed (24 of them vacuity probes) - 164 merged (two positions
    /// naming one row, e.g. mid = last at M = 2) - 0 skipped = 8,500 distinct cells`.
    pub fn line(&self) -> String {
        let probes = if self.probes > 0 {
            format!(" ({} of them vacuity probes)", thousands(self.probes))
        } else {
            String::new()
        };
        format!(
            "matrix {}: {} cells listed{probes} - {} merged (two positions naming one row, e.g. mid = last at M = 2) - {} skipped (nothing to compare) = {} distinct cells",
            self.name.as_deref().unwrap_or("(jobs)"),
            thousands(self.listed),
            thousands(self.merged),
            thousands(self.skipped),
            thousands(self.cells)
        )
    }
}

/// `8640` -> `8,640`.
fn thousands(n: usize) -> String {
    let d = n.to_string();
    let mut s = String::new();
    for (i, ch) in d.chars().enumerate() {
        if i > 0 && (d.len() - i).is_multiple_of(3) {
            s.push(',');
        }
        s.push(ch);
    }
    s
}

/// A whole check.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub schema: String,
    pub subject: String,
    pub vs: Option<String>,
    pub seed: u64,
    pub input: String,
    pub options: Options,
    /// Set when the check came from a case file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub case: Option<CaseInfo>,
    /// The case's `standard.acc` verdict, evaluated beside the cells
    /// (docs/ACCURACY.md); a failing one fails the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accuracy: Option<crate::accuracy::CaseAccuracy>,
    /// Set for matrix runs: how the matrix's cells were counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matrix: Option<MatrixInfo>,
    /// M ranges (`--m 1..512`): each range's runs of failing M, their
    /// ends found by bisection (bi::mrange).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub m_ranges: Vec<MRangeResult>,
    /// Cells in the canonical order (`grid`'s module doc).
    pub cells: Vec<Cell>,
    pub controls: Vec<Control>,
    /// `--witness`: the witness checks of cells whose two sides' orders
    /// are known and differ (`bi::witness`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub witnesses: Vec<CellWitness>,
    /// Why each failing family failed: its first failing cell explained
    /// (one per distinct pair of declared orders; `bi::explanation`,
    /// docs/BI.md "Explanations in the report"). Empty when no cell failed
    /// or with `--no-explain`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub explanations: Vec<Explanation>,
    pub summary: Summary,
}

impl Report {
    pub fn new(
        subject: String,
        vs: Option<String>,
        opts: &CheckOptions,
        cells: Vec<Cell>,
        controls: Vec<Control>,
    ) -> Report {
        let mut r = Report {
            schema: REPORT_SCHEMA.into(),
            subject,
            vs,
            seed: opts.seed,
            input: opts.input.name().to_string(),
            options: Options {
                families: opts.families.clone(),
                ms: opts.ms.clone(),
                k: opts.k,
                n: opts.n,
                positions: opts.positions.iter().map(|p| p.to_string()).collect(),
                repeats: opts.repeats,
            },
            case: None,
            accuracy: None,
            matrix: None,
            m_ranges: Vec::new(),
            summary: Summary {
                cells: 0,
                verdicts: BTreeMap::new(),
                valid: false,
            },
            cells,
            controls,
            witnesses: Vec::new(),
            explanations: Vec::new(),
        };
        r.finish();
        r
    }

    /// Puts cells and controls in the canonical order (controls by family,
    /// stable) and recomputes the summary from them.
    pub fn finish(&mut self) {
        sort_cells(&mut self.cells);
        self.controls.sort_by_key(|c| c.family);
        let mut verdicts: BTreeMap<String, usize> = Verdict::ALL.iter().map(|v| (v.name().to_string(), 0)).collect();
        for c in &self.cells {
            *verdicts.entry(c.verdict.name().to_string()).or_default() += 1;
        }
        self.summary = Summary {
            cells: self.cells.len(),
            verdicts,
            valid: self.controls.iter().all(|c| c.held),
        };
    }

    pub fn count(&self, v: Verdict) -> usize {
        self.cells.iter().filter(|c| c.verdict == v).count()
    }

    /// 0 when no cell failed, 1 on a BI_FAIL or a failing accuracy verdict
    /// (or, when `strict`, on a NON_DET or ERROR cell), 2 when a positive control did not fail (the
    /// run cannot tell) or no cell could run at all.
    pub fn exit_code(&self, strict: bool) -> i32 {
        if !self.summary.valid || self.count(Verdict::Error) == self.cells.len() {
            2
        } else if self.count(Verdict::Fail) > 0
            || (strict && self.count(Verdict::NonDet) + self.count(Verdict::Error) > 0)
            || self
                .accuracy
                .as_ref()
                .is_some_and(|a| a.status == crate::accuracy::Status::Fail)
        {
            1
        } else {
            0
        }
    }

    /// Markdown: one table per family (rows sorted by M, knobs, target
    /// row; knob and rank columns only when some cell has them), then the
    /// positive controls and the summary.
    pub fn markdown(&self) -> String {
        let mut s = format!("# Batch invariance: `{}`\n\n", self.subject);
        if let Some(vs) = &self.vs {
            let _ = writeln!(s, "Switch partner: `{vs}`.\n");
        }
        let _ = writeln!(
            s,
            "Seed {}, input {}.\n\n{}\n",
            self.seed,
            self.input,
            self.summary_line()
        );
        if let Some(m) = &self.matrix {
            let _ = writeln!(s, "{}.\n", m.line());
        }
        for r in &self.m_ranges {
            let _ = writeln!(s, "{}.\n", r.line());
        }
        if !self.explanations.is_empty() {
            let _ = writeln!(s, "## Why it failed\n");
            for e in &self.explanations {
                let l = e.lines();
                let _ = writeln!(s, "- **{}**", l[0].replace('|', "\\|"));
                for x in &l[1..] {
                    let _ = writeln!(s, "  - {}", x.trim_start());
                }
            }
            s.push('\n');
        }
        let mut families: Vec<Family> = self.cells.iter().map(|c| c.family).collect();
        families.dedup();
        for f in families {
            let cells: Vec<&Cell> = self.cells.iter().filter(|c| c.family == f).collect();
            let counts: Vec<String> = Verdict::ALL
                .iter()
                .filter_map(|v| {
                    let n = cells.iter().filter(|c| c.verdict == *v).count();
                    (n > 0).then(|| format!("{n} {v}"))
                })
                .collect();
            let _ = writeln!(s, "## {f} ({} cells: {})\n", cells.len(), counts.join(", "));
            let knob_names: Vec<String> = {
                let mut v: Vec<String> = cells
                    .iter()
                    .flat_map(|c| settings(c).into_iter().map(|(k, _)| k))
                    .collect();
                v.sort();
                v.dedup();
                v
            };
            let ranked = cells.iter().any(|c| c.rank.is_some());
            let mut head = String::from("| M | K | N |");
            let mut rule = String::from("|---:|---:|---:|");
            for k in &knob_names {
                head.push_str(&format!(" {k} |"));
                rule.push_str("---|");
            }
            head.push_str(" row |");
            rule.push_str("---|");
            if ranked {
                head.push_str(" rank |");
                rule.push_str("---:|");
            }
            head.push_str(" verdict | power | rows differing | bytes differing | columns | max ULP | note |");
            rule.push_str("---|---:|---:|---:|---:|---:|---|");
            let _ = writeln!(s, "{head}\n{rule}");
            for c in cells {
                let kv = settings(c);
                let _ = write!(s, "| {} | {} | {} |", c.m, c.k, c.n);
                for k in &knob_names {
                    let v = kv
                        .iter()
                        .find(|(n, _)| n == k)
                        .map_or(String::new(), |(_, v)| knob_text(v));
                    let _ = write!(s, " {v} |");
                }
                let _ = write!(s, " {} |", c.row);
                if ranked {
                    let _ = write!(s, " {} |", c.rank.map_or(String::new(), |r| r.to_string()));
                }
                let verdict = if c.verdict == Verdict::Fail {
                    format!("**{}**", c.verdict)
                } else {
                    c.verdict.to_string()
                };
                let _ = writeln!(
                    s,
                    " {verdict} | {} | {} | {} | {} | {} | {} |",
                    c.power
                        .as_ref()
                        .map_or("-".to_string(), |p| format!("{:.3} ({})", p.value, p.output)),
                    c.diff.rows_differing,
                    c.diff.bytes_differing,
                    c.diff.columns_differing,
                    c.diff.max_ulp,
                    c.reason.as_deref().unwrap_or("").replace('|', "\\|")
                );
            }
            s.push('\n');
        }
        let _ = writeln!(
            s,
            "## Positive controls\n\n| control | cell | verdict | expected | held |\n|---|---|---|---|---|"
        );
        for c in &self.controls {
            let _ = writeln!(
                s,
                "| `{}` | `{}` | {} | {} | {} |",
                c.subject,
                c.cell,
                c.verdict,
                c.expected,
                if c.held { "yes" } else { "**no**" }
            );
        }
        s
    }

    /// JUnit XML: one test suite per family (one test case per cell) and
    /// one for the positive controls. `BI_FAIL` is a failure, `ERROR` an
    /// error, `VACUOUS` skipped; `NON_DET` is a failure when `strict`,
    /// else skipped. No timestamps: the same report gives the same bytes.
    pub fn junit(&self, strict: bool) -> String {
        use quick_junit::{NonSuccessKind, Report as JReport, TestCase, TestCaseStatus, TestSuite};
        let non_success = |kind: Option<NonSuccessKind>, ty: &str, message: String| {
            let mut s = kind.map_or_else(TestCaseStatus::skipped, TestCaseStatus::non_success);
            s.set_type(ty).set_message(message);
            s
        };
        let mut r = JReport::new(format!("mxbi bi {}", self.subject));
        let mut families: Vec<Family> = self.cells.iter().map(|c| c.family).collect();
        families.dedup();
        for f in families {
            let mut suite = TestSuite::new(format!("bi.{f}"));
            for c in self.cells.iter().filter(|c| c.family == f) {
                let reason = c.reason.clone().unwrap_or_default();
                let status = match c.verdict {
                    Verdict::Pass => TestCaseStatus::success(),
                    Verdict::Fail => non_success(
                        Some(NonSuccessKind::Failure),
                        "BI_FAIL",
                        format!(
                            "{} of {} rows, {} bytes, {} columns differ, max {} ulp{}",
                            c.diff.rows_differing,
                            c.diff.rows,
                            c.diff.bytes_differing,
                            c.diff.columns_differing,
                            c.diff.max_ulp,
                            self.explanation_of(c)
                                .map_or(String::new(), |e| format!("\n{}", e.lines().join("\n")))
                        ),
                    ),
                    Verdict::NonDet if strict => non_success(Some(NonSuccessKind::Failure), "NON_DET", reason),
                    Verdict::Error => non_success(Some(NonSuccessKind::Error), "ERROR", reason),
                    Verdict::NonDet | Verdict::Vacuous => non_success(None, c.verdict.name(), reason),
                };
                let mut tc = TestCase::new(c.id.clone(), status);
                tc.set_classname(format!("bi.{f}"));
                if let Some(p) = &c.power {
                    tc.add_property(quick_junit::Property::new("power", format!("{:.6}", p.value)));
                    tc.add_property(quick_junit::Property::new("power_output", p.output.clone()));
                }
                if let Some(e) = self.explanation_of(c).filter(|_| c.verdict == Verdict::Fail) {
                    let prop = |k: &str, v: String| quick_junit::Property::new(k, v);
                    tc.add_property(prop("explanation", e.headline()));
                    for (k, s) in [("explanation.base", &e.base), ("explanation.variant", &e.variant)] {
                        if let Some(s) = s {
                            tc.add_property(prop(k, s.order_words()));
                        }
                    }
                    if let Some(n) = &e.first_node {
                        tc.add_property(prop("explanation.first_node", n.clone()));
                    }
                    for f in &e.fixes {
                        tc.add_property(prop("explanation.fix", f.clone()));
                    }
                }
                suite.add_test_case(tc);
            }
            r.add_test_suite(suite);
        }
        let mut suite = TestSuite::new("bi.positive-controls");
        for c in &self.controls {
            let status = if c.held {
                TestCaseStatus::success()
            } else {
                non_success(
                    Some(NonSuccessKind::Failure),
                    "CONTROL_PASSED",
                    format!(
                        "{} gave {} on {}, expected {}: the run cannot tell",
                        c.subject, c.verdict, c.cell, c.expected
                    ),
                )
            };
            let mut tc = TestCase::new(format!("{} on {}", c.subject, c.cell), status);
            tc.set_classname("bi.positive-controls");
            suite.add_test_case(tc);
        }
        r.add_test_suite(suite);
        r.to_string()
            .unwrap_or_else(|e| format!("<!-- junit serialisation failed: {e} -->"))
    }

    /// The explanation covering a failing cell: the one that explains it,
    /// else the first of its family (None: its family has none).
    pub fn explanation_of(&self, c: &Cell) -> Option<&Explanation> {
        self.explanations
            .iter()
            .find(|e| e.cell == c.id)
            .or_else(|| self.explanations.iter().find(|e| e.family == c.family))
    }

    /// One line: counts per verdict and validity.
    pub fn summary_line(&self) -> String {
        let counts: Vec<String> = Verdict::ALL
            .iter()
            .map(|v| format!("{} {}", self.count(*v), v))
            .collect();
        format!(
            "{} cells: {}; positive controls: {}",
            self.cells.len(),
            counts.join(", "),
            if self.summary.valid {
                format!("{} of {} failed as they must", self.controls.len(), self.controls.len())
            } else {
                "a control did NOT fail: this run cannot tell, it is invalid".to_string()
            }
        )
    }

    /// The terminal view: failing and non-passing cells, then the summary.
    pub fn text(&self) -> String {
        let mut s = String::new();
        for c in &self.cells {
            if matches!(c.verdict, Verdict::Pass) {
                continue;
            }
            let _ = write!(s, "{:<8} {}", c.verdict.name(), c.id);
            if c.verdict == Verdict::Fail {
                let _ = write!(
                    s,
                    ": {} of {} rows, {} bytes, {} columns differ, max {} ulp",
                    c.diff.rows_differing,
                    c.diff.rows,
                    c.diff.bytes_differing,
                    c.diff.columns_differing,
                    c.diff.max_ulp
                );
                if let Some(o) = c.diff.first_offenders.first() {
                    let _ = write!(
                        s,
                        "; first: row {} col {}: {} vs {}",
                        o.row, o.col, o.baseline, o.variant
                    );
                }
            } else if let Some(r) = &c.reason {
                let _ = write!(s, ": {r}");
            }
            s.push('\n');
        }
        if !self.explanations.is_empty() {
            s.push_str("why:\n");
            for e in &self.explanations {
                for l in e.lines() {
                    let _ = writeln!(s, "  {l}");
                }
            }
        }
        if let Some(a) = &self.accuracy {
            s.push_str(&a.line());
            s.push('\n');
        }
        if let Some(m) = &self.matrix {
            s.push_str(&m.line());
            if m.cells != self.cells.len() {
                let _ = write!(s, "; this shard ran {}", thousands(self.cells.len()));
            }
            s.push('\n');
        }
        for r in &self.m_ranges {
            s.push_str(&r.line());
            s.push('\n');
        }
        s.push_str(&self.summary_line());
        s.push('\n');
        s
    }
}
