//! The explanations a `bi run` report carries (docs/BI.md, "Explanations
//! in the report"): for each failing family, its first failing cell
//! explained ([`super::cell`]); where the subject declares its
//! orders, one explanation per distinct pair of declared orders, each
//! counting the failing cells it covers.

use super::cell::{explain_cell, CellSetup};
use crate::bi::witness::CellSides;
use crate::bi::{Cell, Explanation, Family, Report, Verdict};
use crate::order::Order;

/// Most explanations per family (distinct pairs of declared orders beyond
/// it are counted in the last one's note).
pub const MAX_PER_FAMILY: usize = 4;

/// A family's failing cells sharing one pair of declared orders (None:
/// not declared).
type Group<'a> = (Option<(Order, Order)>, Vec<&'a Cell>);

/// The pair of declared orders of a cell's two sides, when both are declared.
fn declared_pair(c: &Cell, setup: &CellSetup) -> Option<(Order, Order)> {
    let s = CellSides::of(c, setup.opts)?;
    let d = |m: usize| setup.subject.declared_order(m, s.k, s.n);
    Some((d(s.base.m)?, d(s.var.m)?))
}

/// Fills `report.explanations` (replacing any).
pub fn explain_failures(report: &mut Report, setup: &CellSetup) {
    let mut out: Vec<Explanation> = Vec::new();
    let mut families: Vec<Family> = Vec::new();
    for c in report.cells.iter().filter(|c| c.verdict == Verdict::Fail) {
        if !families.contains(&c.family) {
            families.push(c.family);
        }
    }
    for f in families {
        // the family's failing cells grouped by declared pair, in report order
        let mut groups: Vec<Group> = Vec::new();
        for c in report
            .cells
            .iter()
            .filter(|c| c.family == f && c.verdict == Verdict::Fail)
        {
            let key = declared_pair(c, setup);
            match groups.iter_mut().find(|(k, _)| *k == key) {
                Some((_, v)) => v.push(c),
                None => groups.push((key, vec![c])),
            }
        }
        let beyond: usize = groups.iter().skip(MAX_PER_FAMILY).map(|(_, v)| v.len()).sum();
        for (i, (_, cells)) in groups.iter().take(MAX_PER_FAMILY).enumerate() {
            let first = cells[0];
            let mut e = match explain_cell(setup, &first.id, (64, 64, false)) {
                Ok(x) => x.story,
                Err(err) => {
                    let mut e = Explanation::new(f, &first.id, cells.len());
                    e.note = Some(format!("could not explain: {}", crate::message::one_line(&err.0)));
                    e
                }
            };
            e.failing_cells = cells.len();
            if i + 1 == MAX_PER_FAMILY && beyond > 0 {
                let more = format!("{beyond} more failing cells have other pairs of declared orders");
                e.note = Some(match e.note.take() {
                    Some(n) => format!("{n}; {more}"),
                    None => more,
                });
            }
            out.push(e);
        }
    }
    report.explanations = out;
}

/// The explanations of `report` (as `mxbi bi run` adds them) for callers
/// outside the CLI (the Python binding): `spec` / `vs_spec` name the
/// subjects as given (an `op:` or `dispatch:` spec adds the op's paths or
/// the table's orders; any other name explains by identification).
#[allow(clippy::too_many_arguments)]
pub fn explain_report(
    report: &mut Report,
    subject: &dyn crate::subject::Subject,
    vs: Option<&dyn crate::subject::Subject>,
    spec: &str,
    vs_spec: Option<&str>,
    knobs: &crate::subject::Knobs,
    opts: &crate::bi::CheckOptions,
    content: crate::bi::Content,
) {
    let setup = CellSetup {
        subject,
        vs,
        spec,
        vs_spec,
        knobs,
        opts,
        content,
    };
    explain_failures(report, &setup);
}
