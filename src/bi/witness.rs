//! The witness check: when the orders on the two sides of a cell are known
//! and differ, run the subject on an input built to separate them
//! ([`crate::explain::witness`]) and report what its bytes did.
//!
//! # Contract
//! - **Sides.** A cell compares one target row in a baseline batch with the
//!   same row in a variant batch ([`CellSides`]: each side's M and row
//!   index, and which set the other rows come from). Cells that compare
//!   several rows (`permutation`, `repeat`, `position=all`), `switch` and
//!   `rank` cells have no sides here.
//! - **Orders.** Each side's order is *declared*
//!   ([`Subject::declared_order`] for the side's whole batch shape: a
//!   model's order, a dispatch table's matching entry) or, when
//!   [`WitnessMode::Identify`] allows it and nothing is declared,
//!   *identified*: the subject's bytes for the target row on the cell's own
//!   inputs ([`Rows`]) matched against the explainer's family
//!   (`explain::candidates::family` for the input type and K) with
//!   `explain::identify`. An identification is used only when the matches
//!   form one tree class, or when the two sides' match sets are disjoint
//!   (then the simplest match of each side); otherwise the side is
//!   `unknown`.
//! - **Check.** Two orders that are the same computation for K: outcome
//!   `same-order`, nothing run. Otherwise a witness is built for (baseline
//!   order, variant order); the witness row goes to the target position of
//!   both batches, the other rows are the cell's (from [`Rows`]), B is the
//!   witness's B; the subject runs both batches. Outcome `fail` when the
//!   two target rows differ in any byte (the cell is `BI_FAIL`, with the
//!   witness), `held` when they agree (a finding: the orders differ but the
//!   subject's bytes did not on the witness; `matches` says which of the two
//!   orders the bytes equal, if either), `no-witness` when the search found
//!   none, `error` when the subject could not run the witness.
//! - Deterministic: the witness comes from the seed; results are cached per
//!   order pair and per side within one [`Witnesser`].

use super::cell::Cell;
use super::family::{Family, RowPos};
use super::inputs::Rows;
use super::options::CheckOptions;
use super::report::Report;
use super::row_ids::other_id;
use super::verdict::{compare_rows, Verdict};
use crate::explain::candidates::{family, order_key, Candidate, Inputs};
use crate::explain::identify::{identify, IdentifyOptions};
use crate::explain::witness::{build, Search, Witness, WitnessOptions};
use crate::gemm::{BLayout, Matrix, Problem};
use crate::order::Order;
use crate::subject::{Subject, SubjectError};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

pub use super::cell_witness::{CellWitness, Known, Outcome, SideOrder, WitnessInfo};

/// Which orders the check may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WitnessMode {
    /// No witness check.
    Off,
    /// Declared orders only (cheap: no identification).
    Declared,
    /// Declared orders, else orders identified from the subject's bytes.
    Identify,
}

impl std::str::FromStr for WitnessMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "off" => Ok(WitnessMode::Off),
            "declared" | "auto" => Ok(WitnessMode::Declared),
            "on" | "identify" => Ok(WitnessMode::Identify),
            _ => Err(format!("unknown witness mode '{s}'; expected on, auto or off")),
        }
    }
}

/// One side of a cell: the batch's M, the target row's index in it, and
/// the set its other rows come from (`row_ids::other_id`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Side {
    pub m: usize,
    pub row: usize,
    pub set: u64,
}

/// The two sides of a one-row cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CellSides {
    pub family: Family,
    pub base: Side,
    pub var: Side,
    pub k: usize,
    pub n: usize,
}

impl CellSides {
    /// The sides of a report cell checked with `opts` (the same planning as
    /// the checker's: `batch` at the same index in both, resolved in the
    /// smaller batch, baseline the first M; `anchor` row 0 of the first M
    /// vs the position in this M; `position` 0 vs p; `content` the same
    /// position with other rows from set B). None: no single-row sides.
    pub fn of(cell: &Cell, opts: &CheckOptions) -> Option<CellSides> {
        if cell.rank.is_some() {
            return None;
        }
        let pos: RowPos = cell.row.parse().ok()?;
        let (m, m0) = (cell.m, *opts.ms.first()?);
        let side = |m: usize, row: usize, set: u64| Side { m, row, set };
        let (base, var) = match cell.family {
            Family::Batch => {
                let i = pos.resolve(m.min(m0))?;
                (side(m0, i, 0), side(m, i, 0))
            }
            Family::Anchor => (side(m0, 0, 0), side(m, pos.resolve(m)?, 0)),
            Family::Position => (side(m, 0, 0), side(m, pos.resolve(m)?, 0)),
            Family::Content => {
                let i = pos.resolve(m)?;
                (side(m, i, 0), side(m, i, 1))
            }
            _ => return None,
        };
        Some(CellSides {
            family: cell.family,
            base,
            var,
            k: cell.k,
            n: cell.n,
        })
    }
}

/// Knobs of the check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WitnessCheck {
    pub mode: WitnessMode,
    pub search: WitnessOptions,
}

/// Each side's order as reported, and the pair when both are known.
type Sides = (Option<SideOrder>, Option<SideOrder>, Option<(Order, Order)>);

/// A side's match classes (each a list of orders with one tree) and how
/// they are known.
type Classes = (Vec<Vec<Order>>, Known);

/// Caches of one check: candidate families, side identities, witnesses.
pub struct Witnesser<'a> {
    subject: &'a dyn Subject,
    rows: &'a Rows,
    check: WitnessCheck,
    family: Option<Vec<Candidate>>,
    identified: HashMap<Side, Option<Vec<Vec<Order>>>>,
    witnesses: HashMap<(Order, Order), Result<Search, String>>,
}

fn hex(x: f32) -> String {
    format!("{:08x}", x.to_bits())
}

impl<'a> Witnesser<'a> {
    /// A check of `subject` on the cells whose inputs `rows` holds (the
    /// seed, K, N, input type and content of the check).
    pub fn new(subject: &'a dyn Subject, rows: &'a Rows, check: WitnessCheck) -> Witnesser<'a> {
        Witnesser {
            subject,
            rows,
            check,
            family: None,
            identified: HashMap::new(),
            witnesses: HashMap::new(),
        }
    }

    /// A side's batch: the target row (`target`, K values) at its index,
    /// the other rows from the side's set.
    fn batch(&self, s: &Side, target: &[f32]) -> Vec<f32> {
        let k = self.rows.k;
        let mut a = Vec::with_capacity(s.m * k);
        let mut j = 0;
        for i in 0..s.m {
            if i == s.row {
                a.extend_from_slice(target);
            } else {
                a.extend(self.rows.row(other_id(s.set, j)));
                j += 1;
            }
        }
        a
    }

    /// The subject's target row of a side, on A's `target` row and `b`.
    fn run_side(&self, s: &Side, target: &[f32], b: &[f32]) -> Result<Vec<f32>, SubjectError> {
        let (k, n) = (self.rows.k, b.len() / self.rows.k);
        let a = self.batch(s, target);
        let p = Problem {
            a: Matrix::F32(&a),
            b: Matrix::F32(b),
            m: s.m,
            n,
            k,
            b_layout: BLayout::Kn,
        };
        let out = self.subject.run(&p, Some(&[s.row]))?;
        if out.len() != n {
            return Err(SubjectError::Failed {
                subject: self.subject.name(),
                why: format!("returned {} values for one row of N = {n}", out.len()),
            });
        }
        Ok(out)
    }

    /// The match classes of a side on the cell's own inputs (None: the
    /// subject could not run it, or nothing matched).
    fn identify_side(&mut self, s: &Side) -> Result<Option<Vec<Vec<Order>>>, String> {
        if let Some(v) = self.identified.get(s) {
            return Ok(v.clone());
        }
        let target = self.rows.row(0);
        let got = match self.run_side(s, &target, &self.rows.b) {
            Ok(x) => x,
            Err(e @ SubjectError::Broken { .. }) => return Err(e.to_string()),
            Err(_) => {
                self.identified.insert(*s, None);
                return Ok(None);
            }
        };
        let (k, n) = (self.rows.k, self.rows.n);
        let fam = self
            .family
            .get_or_insert_with(|| family(Inputs::of_type(self.rows.ty), k));
        let p = Problem {
            a: Matrix::F32(&target),
            b: Matrix::F32(&self.rows.b),
            m: 1,
            n,
            k,
            b_layout: BLayout::Kn,
        };
        let id = identify(&p, &[0], &got, fam, IdentifyOptions::default())?;
        let classes = id.into_iter().next().map(|r| r.classes).filter(|c| !c.is_empty());
        self.identified.insert(*s, classes.clone());
        Ok(classes)
    }

    /// Both sides' orders (declared, else identified when allowed).
    fn orders(&mut self, c: &CellSides) -> Result<Sides, String> {
        let decl = |s: &Side| self.subject.declared_order(s.m, c.k, c.n);
        let (db, dv) = (decl(&c.base), decl(&c.var));
        let side = |o: Order, known| SideOrder {
            order: o.to_string(),
            known,
        };
        if let (Some(b), Some(v)) = (db, dv) {
            return Ok((
                Some(side(b, Known::Declared)),
                Some(side(v, Known::Declared)),
                Some((b, v)),
            ));
        }
        if self.check.mode != WitnessMode::Identify {
            return Ok((
                db.map(|o| side(o, Known::Declared)),
                dv.map(|o| side(o, Known::Declared)),
                None,
            ));
        }
        // a declared side is one class of one order
        let mut classes = |s: &Side, d: Option<Order>| -> Result<Option<Classes>, String> {
            match d {
                Some(o) => Ok(Some((vec![vec![o]], Known::Declared))),
                None => Ok(self.identify_side(s)?.map(|c| (c, Known::Identified))),
            }
        };
        let cb = classes(&c.base, db)?;
        let cv = classes(&c.var, dv)?;
        let one = |x: &Option<Classes>| match x {
            Some((c, kn)) if c.len() == 1 => Some((c[0][0], *kn)),
            _ => None,
        };
        let (ob, ov) = match (one(&cb), one(&cv)) {
            (Some(b), Some(v)) => (Some(b), Some(v)),
            _ => match (&cb, &cv) {
                // ambiguous: usable only when no order reproduces both sides
                (Some((b, kb)), Some((v, kv))) => {
                    let keys =
                        |x: &Vec<Vec<Order>>| -> Vec<u64> { x.iter().map(|cl| order_key(&cl[0], c.k)).collect() };
                    let (bk, vk) = (keys(b), keys(v));
                    if bk.iter().any(|x| vk.contains(x)) {
                        (None, None)
                    } else {
                        (Some((b[0][0], *kb)), Some((v[0][0], *kv)))
                    }
                }
                _ => (None, None),
            },
        };
        let pair = ob.zip(ov).map(|(b, v)| (b.0, v.0));
        Ok((ob.map(|(o, kn)| side(o, kn)), ov.map(|(o, kn)| side(o, kn)), pair))
    }

    /// The witness check of one cell (`id`: the report cell's id). Err
    /// only when the subject is broken.
    pub fn check_cell(&mut self, id: &str, c: &CellSides) -> Result<CellWitness, String> {
        let (base, var, pair) = self.orders(c)?;
        let mut out = CellWitness {
            cell: id.to_string(),
            base,
            var,
            outcome: Outcome::Unknown,
            matches: None,
            finding: String::new(),
            witness: None,
            diff: None,
        };
        let Some((lo, ro)) = pair else {
            out.finding = "the order of a side is not known: no witness".into();
            return Ok(out);
        };
        if (c.k, c.n) != (self.rows.k, self.rows.n) {
            out.outcome = Outcome::Error;
            out.finding = format!(
                "the cell's K = {}, N = {} are not the inputs' K = {}, N = {}",
                c.k, c.n, self.rows.k, self.rows.n
            );
            return Ok(out);
        }
        if order_key(&lo, c.k) == order_key(&ro, c.k) {
            out.outcome = Outcome::SameOrder;
            out.finding = format!("both sides run {lo} (the same computation for K = {})", c.k);
            return Ok(out);
        }
        let search = self
            .witnesses
            .entry((lo, ro))
            .or_insert_with(|| build(&lo, &ro, self.rows.ty, c.k, c.n, self.check.search))
            .clone();
        let w: &Witness = match &search {
            Ok(Search::Found(w)) => w,
            Ok(Search::Equivalent) => {
                out.outcome = Outcome::SameOrder;
                out.finding = format!("{lo} and {ro} are the same computation for K = {}", c.k);
                return Ok(out);
            }
            Ok(Search::NotFound { tries }) => {
                out.outcome = Outcome::NoWitness;
                out.finding = format!("the orders differ ({lo} vs {ro}), but no witness found in {tries} tries");
                return Ok(out);
            }
            Err(e) => {
                out.outcome = Outcome::NoWitness;
                out.finding = format!("the orders differ ({lo} vs {ro}), but no witness can be built: {e}");
                return Ok(out);
            }
        };
        let col = w.columns[0];
        let mut info = WitnessInfo {
            seed: w.seed,
            tries: self.check.search.tries,
            attempt: w.attempt,
            probe: w.probe.name().to_string(),
            input: w.input.name().to_string(),
            digest: format!("{:016x}", w.digest()),
            columns: w.columns.len(),
            column: col,
            base_order_bits: hex(w.left_out[col]),
            var_order_bits: hex(w.right_out[col]),
            base_bits: None,
            var_bits: None,
            subject_columns: None,
        };
        let run = |s: &Side| self.run_side(s, &w.a, &w.b);
        let (xb, xv) = match (run(&c.base), run(&c.var)) {
            (Ok(x), Ok(y)) => (x, y),
            (Err(e @ SubjectError::Broken { .. }), _) | (_, Err(e @ SubjectError::Broken { .. })) => {
                return Err(e.to_string())
            }
            (Err(e), _) | (_, Err(e)) => {
                out.outcome = Outcome::Error;
                out.finding = format!("the subject could not run the witness: {e}");
                out.witness = Some(info);
                return Ok(out);
            }
        };
        let bits = |v: &[f32]| -> Vec<u32> { v.iter().map(|x| x.to_bits()).collect() };
        let (bb, bv) = (bits(&xb), bits(&xv));
        let differ = (0..c.n).filter(|&j| bb[j] != bv[j]).count();
        out.diff = Some(compare_rows(&xb, &xv, c.n, &[c.var.row]));
        info.base_bits = Some(hex(xb[col]));
        info.var_bits = Some(hex(xv[col]));
        info.subject_columns = Some(differ);
        if differ > 0 {
            out.outcome = Outcome::Fail;
            out.finding = format!(
                "on a witness that separates {lo} (M = {}) from {ro} (M = {}), the subject's rows differ in {differ} of {} columns",
                c.base.m, c.var.m, c.n
            );
        } else {
            out.outcome = Outcome::Held;
            let matched = if bb == bits(&w.left_out) {
                Some(("baseline", lo))
            } else if bb == bits(&w.right_out) {
                Some(("variant", ro))
            } else {
                None
            };
            out.matches = matched.map(|(s, _)| s.to_string());
            out.finding = match matched {
                Some((_, o)) => format!(
                    "the orders differ ({lo} vs {ro}) but the subject's bytes did not on the witness; they match order {o}"
                ),
                None => format!(
                    "the orders differ ({lo} vs {ro}) but the subject's bytes did not on the witness; they match neither order"
                ),
            };
        }
        out.witness = Some(info);
        Ok(out)
    }
}

/// Runs the witness check on every one-row cell of a report whose verdict
/// is `BI_PASS`, `VACUOUS` or `BI_FAIL`; a `fail` outcome makes a passing
/// or vacuous cell `BI_FAIL` (its reason names the witness, its diff is
/// the subject's two rows on the witness). The results go
/// to `report.witnesses`: one per cell whose sides' orders are known and
/// differ (outcomes `fail`, `held`, `no-witness`, `error`). `rows` must be the inputs the report's cells were run on. Err:
/// the subject is broken.
pub fn apply(
    report: &mut Report,
    subject: &dyn Subject,
    opts: &CheckOptions,
    rows: &Rows,
    check: WitnessCheck,
) -> Result<(), String> {
    if check.mode == WitnessMode::Off {
        return Ok(());
    }
    let mut w = Witnesser::new(subject, rows, check);
    let mut found = Vec::new();
    for cell in report.cells.iter_mut() {
        if !matches!(cell.verdict, Verdict::Pass | Verdict::Vacuous | Verdict::Fail) || !cell.knobs.is_empty() {
            continue;
        }
        let Some(sides) = CellSides::of(cell, opts) else {
            continue;
        };
        let r = w.check_cell(&cell.id, &sides)?;
        if r.outcome == Outcome::Fail && cell.verdict != Verdict::Fail {
            cell.verdict = Verdict::Fail;
            cell.reason = Some(format!("witness: {}", r.finding));
            if let Some(d) = &r.diff {
                cell.diff = d.clone();
            }
        }
        if !matches!(r.outcome, Outcome::SameOrder | Outcome::Unknown) {
            found.push(r);
        }
    }
    report.witnesses = found;
    report.finish();
    Ok(())
}
