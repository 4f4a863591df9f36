//! A fuzz case: one checker cell setting, the check options it runs as,
//! the case file (`mxbi-bi-case/1`) it is written as, and back.

use super::FuzzError;
use crate::bi::{
    check_cells, Case, CaseVersion, Cell, CheckOptions, Content, Family, Input, MSpec, Pos, RowPos, Verdict,
};
use crate::order::InType;
use crate::subject::{Knobs, Subject};

/// Runs of the repeat family (the case file's default).
const REPEATS: usize = 3;

/// One cell setting (see the module doc of `fuzz`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FuzzCase {
    pub family: Family,
    /// The cell's batch size.
    pub m: usize,
    /// The batch family's baseline batch size (other families: unused).
    pub base_m: usize,
    pub k: usize,
    pub n: usize,
    /// The target row (content, batch, position).
    pub row: RowPos,
    pub content: Content,
    pub knobs: Knobs,
    /// The seed the input values are drawn from.
    pub seed: u64,
    pub input: InType,
}

/// What running a case gave.
#[derive(Clone, Debug)]
pub enum Outcome {
    /// A cell failed: the first failing cell.
    Fail(Box<Cell>),
    /// Every cell held (pass or vacuous).
    Pass,
    /// No cell could run: the setting has none (e.g. M = 1 for content),
    /// or every cell was an ERROR (the first reason).
    Skip(Option<String>),
}

impl FuzzCase {
    /// Whether the family places a target row (content, batch, position).
    fn has_row(&self) -> bool {
        matches!(self.family, Family::Content | Family::Batch | Family::Position)
    }

    /// The batch sizes of the check: the batch family's baseline first.
    pub fn ms(&self) -> Vec<usize> {
        if self.family == Family::Batch {
            vec![self.base_m, self.m]
        } else {
            vec![self.m]
        }
    }

    /// The check options this case runs as.
    pub fn options(&self) -> CheckOptions {
        CheckOptions {
            families: vec![self.family],
            ms: self.ms(),
            k: self.k,
            n: self.n,
            positions: if self.has_row() { vec![self.row] } else { Vec::new() },
            seed: self.seed,
            input: self.input,
            repeats: REPEATS,
            // the fuzzer confirms a failure by replaying the whole case
            // (`--confirm`), not cell by cell
            confirm: 0,
        }
    }

    /// One line: `batch m=17 (baseline 1) k=65 n=1 row=0 content=plain seed=7`.
    pub fn describe(&self) -> String {
        let mut s = format!("{} m={}", self.family, self.m);
        if self.family == Family::Batch {
            s.push_str(&format!(" (baseline {})", self.base_m));
        }
        s.push_str(&format!(" k={} n={}", self.k, self.n));
        if self.has_row() {
            s.push_str(&format!(" row={}", self.row));
        }
        s.push_str(&format!(
            " input={} content={}",
            self.input.name(),
            self.content.describe()
        ));
        if !self.knobs.is_empty() {
            s.push_str(&format!(" knobs={}", self.knobs.id()));
        }
        s.push_str(&format!(" seed={}", self.seed));
        s
    }

    /// The case file: `spec` is the subject as `--subject` spells it,
    /// `subject_name` its report name (the case's name says which subject
    /// the corpus entry belongs to).
    pub fn to_case(&self, spec: &str, subject_name: &str) -> Case {
        Case {
            schema: CaseVersion::V1,
            name: Some(corpus_name(subject_name)),
            subject: spec.to_string(),
            vs: None,
            families: Some(vec![self.family]),
            m: Some(MSpec::List(self.ms())),
            k: self.k,
            n: self.n,
            positions: self.has_row().then(|| vec![Pos(self.row)]),
            seed: Some(self.seed),
            input: Some(Input(self.input)),
            repeats: None,
            confirm: None,
            standard: None,
            content: (self.content != Content::default()).then_some(self.content),
            knobs: (!self.knobs.is_empty()).then_some(self.knobs),
        }
    }

    /// The fuzz case a case file holds (one family; one M, or two for the
    /// batch family; at most one position). `input` is used when the file
    /// names none.
    pub fn from_case(c: &Case, input: InType) -> Result<FuzzCase, String> {
        let family = match c.families.as_deref() {
            Some([f]) => *f,
            _ => return Err("not a fuzz case: it needs exactly one family".into()),
        };
        let ms = match &c.m {
            Some(MSpec::List(v)) => v.clone(),
            _ => return Err("not a fuzz case: it needs an explicit list of M".into()),
        };
        let (base_m, m) = match (family, ms.as_slice()) {
            (Family::Batch, [b, m]) => (*b, *m),
            (f, [m]) if f != Family::Batch => (*m, *m),
            _ => return Err("not a fuzz case: one M (two for the batch family)".into()),
        };
        let row = match c.positions.as_deref() {
            None => RowPos::Index(0),
            Some([p]) => p.0,
            Some(_) => return Err("not a fuzz case: at most one position".into()),
        };
        Ok(FuzzCase {
            family,
            m,
            base_m,
            k: c.k,
            n: c.n,
            row,
            content: c.content.unwrap_or_default(),
            knobs: c.knobs.unwrap_or_default(),
            seed: c.seed.unwrap_or(1),
            input: c.input.map_or(input, |i| i.0),
        })
    }
}

/// The case name that ties a corpus entry to its subject.
pub(super) fn corpus_name(subject_name: &str) -> String {
    format!("mxbi fuzz: {subject_name}")
}

/// Runs a case's cells on `subject`. Err: the subject is broken (or the
/// options are out of bounds, which the strategy never draws).
pub(super) fn run(subject: &dyn Subject, fc: &FuzzCase) -> Result<Outcome, FuzzError> {
    let cells = check_cells(subject, None, &fc.options(), fc.content, &fc.knobs).map_err(FuzzError::Broken)?;
    if let Some(c) = cells.iter().find(|c| c.verdict == Verdict::Fail) {
        return Ok(Outcome::Fail(Box::new(c.clone())));
    }
    if cells.is_empty() {
        return Ok(Outcome::Skip(None));
    }
    if cells.iter().all(|c| c.verdict == Verdict::Error) {
        return Ok(Outcome::Skip(cells[0].reason.clone()));
    }
    Ok(Outcome::Pass)
}
