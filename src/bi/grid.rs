//! How cells are arranged: their canonical order in a report, their knobs
//! (every setting beyond family, shape, row and rank, found generically in
//! a cell's JSON form, so fields added to [`Cell`] later are picked up),
//! and the rows and columns of the heatmap and the Markdown tables.
//!
//! # Contract
//! - The canonical order sorts by family, M, K, N, knobs (by name, numbers
//!   numerically), target row (indices, then mid, last, all), rank, id. A
//!   report's cells are always in this order, so a report merged from
//!   shards equals the unsharded one byte for byte.
//! - A grid row is one value of (knobs, M); a grid column one value of
//!   (family, K, N, row, rank).

use super::cell::Cell;
use super::verdict::{severity, RowDiff};
use serde_json::Value;
use std::cmp::Ordering;
use std::sync::OnceLock;

/// The fields of a cell's JSON form that are not knobs.
const BASE_FIELDS: [&str; 10] = [
    "id", "family", "subject", "m", "k", "n", "row", "rank", "verdict", "reason",
];

/// Fields beyond the base ones that say what a cell compares rather than
/// how the subject was set up (the paths of a rank cell): they go to grid
/// columns, not rows.
const COLUMN_FIELDS: [&str; 1] = ["path"];

/// Short names of common knobs in labels.
fn alias(name: &str) -> &str {
    match name {
        "world_size" => "ws",
        "x1_scales" => "x1",
        "x2_scales" => "x2",
        "deterministic_comm" => "det",
        other => other,
    }
}

fn diff_fields() -> &'static Vec<String> {
    static F: OnceLock<Vec<String>> = OnceLock::new();
    F.get_or_init(|| match serde_json::to_value(RowDiff::default()) {
        Ok(Value::Object(m)) => m.keys().cloned().collect(),
        _ => Vec::new(),
    })
}

/// The non-null scalar fields of a cell's JSON form beyond the base fields
/// and the byte diff, sorted by name: (knobs, column fields).
/// Named scalar fields of a cell, sorted by name.
type Fields = Vec<(String, Value)>;

fn extras(cell: &Cell) -> (Fields, Fields) {
    let Ok(Value::Object(map)) = serde_json::to_value(cell) else {
        return (Vec::new(), Vec::new());
    };
    let diff = diff_fields();
    map.into_iter()
        .filter(|(k, v)| {
            !BASE_FIELDS.contains(&k.as_str())
                && !diff.contains(k)
                && matches!(v, Value::Bool(_) | Value::Number(_) | Value::String(_))
        })
        .partition(|(k, _)| !COLUMN_FIELDS.contains(&k.as_str()))
}

/// A cell's knobs: how the subject was set up for it (world size, scale
/// kinds, ...): every non-null scalar field of its JSON form beyond the
/// base fields, the byte diff and the column fields, sorted by name.
pub fn knobs(cell: &Cell) -> Vec<(String, Value)> {
    extras(cell).0
}

/// A cell's knobs and column fields together, sorted by name (the extra
/// columns of a Markdown table).
pub fn settings(cell: &Cell) -> Vec<(String, Value)> {
    let (mut a, b) = extras(cell);
    a.extend(b);
    a.sort_by(|x, y| x.0.cmp(&y.0));
    a
}

/// A knob value as text (`true`, `4`, `ID`).
pub fn knob_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn cmp_value(a: &Value, b: &Value) -> Ordering {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            let (x, y) = (x.as_f64().unwrap_or(0.0), y.as_f64().unwrap_or(0.0));
            x.total_cmp(&y)
        }
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::String(x), Value::String(y)) => x.cmp(y),
        _ => knob_text(a).cmp(&knob_text(b)),
    }
}

fn cmp_knobs(a: &[(String, Value)], b: &[(String, Value)]) -> Ordering {
    for ((ka, va), (kb, vb)) in a.iter().zip(b) {
        let o = ka.cmp(kb).then_with(|| cmp_value(va, vb));
        if o != Ordering::Equal {
            return o;
        }
    }
    a.len().cmp(&b.len())
}

/// Sort key of a target-row label: indices by value, then mid, last, all.
pub fn row_rank(row: &str) -> (u8, usize) {
    match row {
        "mid" => (1, 0),
        "last" => (2, 0),
        "all" => (3, 0),
        _ => row.parse::<usize>().map_or((4, 0), |i| (0, i)),
    }
}

fn cmp_keyed(ka: &[(String, Value)], a: &Cell, kb: &[(String, Value)], b: &Cell) -> Ordering {
    (a.family, a.m, a.k, a.n)
        .cmp(&(b.family, b.m, b.k, b.n))
        .then_with(|| cmp_knobs(ka, kb))
        .then_with(|| row_rank(&a.row).cmp(&row_rank(&b.row)))
        .then_with(|| a.rank.cmp(&b.rank))
        .then_with(|| a.id.cmp(&b.id))
}

/// Sorts cells into the canonical order (see the module doc).
pub fn sort_cells(cells: &mut Vec<Cell>) {
    let mut keyed: Vec<(Vec<(String, Value)>, Cell)> = cells.drain(..).map(|c| (knobs(&c), c)).collect();
    keyed.sort_by(|(ka, a), (kb, b)| cmp_keyed(ka, a, kb, b));
    cells.extend(keyed.into_iter().map(|(_, c)| c));
}

/// A grid row: knobs and M.
#[derive(Clone, Debug, PartialEq)]
pub struct RowKey {
    pub knobs: Vec<(String, Value)>,
    pub m: usize,
}

impl RowKey {
    pub fn of(cell: &Cell) -> RowKey {
        RowKey {
            knobs: knobs(cell),
            m: cell.m,
        }
    }

    pub fn label(&self) -> String {
        let mut parts: Vec<String> = self
            .knobs
            .iter()
            .map(|(k, v)| format!("{}={}", alias(k), knob_text(v)))
            .collect();
        parts.push(format!("m={}", self.m));
        parts.join(" ")
    }

    fn cmp(&self, o: &RowKey) -> Ordering {
        cmp_knobs(&self.knobs, &o.knobs).then(self.m.cmp(&o.m))
    }
}

/// A grid column: family, K, N, target row, rank and the column fields
/// (what a rank cell compares).
#[derive(Clone, Debug, PartialEq)]
pub struct ColKey {
    pub family: super::Family,
    pub k: usize,
    pub n: usize,
    pub row: String,
    pub rank: Option<usize>,
    pub extra: Vec<(String, Value)>,
}

impl ColKey {
    pub fn of(cell: &Cell) -> ColKey {
        ColKey {
            family: cell.family,
            k: cell.k,
            n: cell.n,
            row: cell.row.clone(),
            rank: cell.rank,
            extra: extras(cell).1,
        }
    }

    pub fn label(&self) -> String {
        let mut s = format!("{} k={} n={} row={}", self.family, self.k, self.n, self.row);
        if let Some(r) = self.rank {
            s.push_str(&format!(" rank={r}"));
        }
        for (k, v) in &self.extra {
            s.push_str(&format!(" {}={}", alias(k), knob_text(v)));
        }
        s
    }

    fn cmp(&self, o: &ColKey) -> Ordering {
        (self.family, self.k, self.n)
            .cmp(&(o.family, o.k, o.n))
            .then_with(|| row_rank(&self.row).cmp(&row_rank(&o.row)))
            .then_with(|| self.row.cmp(&o.row))
            .then_with(|| self.rank.cmp(&o.rank))
            .then_with(|| cmp_knobs(&self.extra, &o.extra))
    }
}

/// Cells laid out on rows (knobs, M) and columns (family, K, N, row, rank);
/// `at[r][c]` lists the indices of the cells in that square.
pub struct Grid {
    pub rows: Vec<RowKey>,
    pub cols: Vec<ColKey>,
    pub at: Vec<Vec<Vec<usize>>>,
}

impl Grid {
    pub fn new(cells: &[Cell]) -> Grid {
        let keys: Vec<(RowKey, ColKey)> = cells.iter().map(|c| (RowKey::of(c), ColKey::of(c))).collect();
        let mut rows: Vec<RowKey> = Vec::new();
        let mut cols: Vec<ColKey> = Vec::new();
        for (r, c) in &keys {
            if !rows.contains(r) {
                rows.push(r.clone());
            }
            if !cols.contains(c) {
                cols.push(c.clone());
            }
        }
        rows.sort_by(RowKey::cmp);
        cols.sort_by(ColKey::cmp);
        let mut at = vec![vec![Vec::new(); cols.len()]; rows.len()];
        for (i, (r, c)) in keys.iter().enumerate() {
            let ri = rows.binary_search_by(|x| x.cmp(r)).expect("row key present");
            let ci = cols.binary_search_by(|x| x.cmp(c)).expect("column key present");
            at[ri][ci].push(i);
        }
        Grid { rows, cols, at }
    }
}

/// A column field's value in a terminal header: `A vs B` as `AvB` (their
/// initials), anything else its first 6 characters.
fn short(v: &str) -> String {
    match v.split_once(" vs ") {
        Some((a, b)) => format!(
            "{}v{}",
            a.chars().next().unwrap_or('?'),
            b.chars().next().unwrap_or('?')
        ),
        None => v.chars().take(6).collect(),
    }
}

/// One character per verdict, for grids on a terminal.
pub fn symbol(v: super::Verdict) -> char {
    use super::Verdict;
    match v {
        Verdict::Pass => '.',
        Verdict::Fail => 'X',
        Verdict::NonDet => '~',
        Verdict::Vacuous => 'o',
        Verdict::Error => 'E',
    }
}

impl Grid {
    /// The grid as text: two header lines (family, with K and N when they
    /// vary; then the target row, with the rank when there is one), then
    /// one line per row: its label and one [`symbol`] per column (the
    /// worst verdict of the square, as in the heatmap; blank: no cell).
    pub fn text(&self, cells: &[Cell]) -> String {
        use std::fmt::Write;
        let kn_vary = self.cols.iter().any(|c| (c.k, c.n) != (self.cols[0].k, self.cols[0].n));
        let group = |c: &ColKey| {
            let f = match c.family.name() {
                "permutation" => "perm",
                "repeat" => "rep",
                other => other,
            };
            if kn_vary {
                format!("{f} k={} n={}", c.k, c.n)
            } else {
                f.to_string()
            }
        };
        let sub = |c: &ColKey| {
            let mut t = c.row.clone();
            if let Some(r) = c.rank {
                t.push_str(&format!("/r{r}"));
            }
            for (_, v) in &c.extra {
                t.push('/');
                t.push_str(&short(&knob_text(v)));
            }
            t
        };
        // per column: its sub-header plus a space, at least 6 wide
        let widths: Vec<usize> = self.cols.iter().map(|c| (sub(c).len() + 1).max(6)).collect();
        let lw = self.rows.iter().map(|r| r.label().len()).max().unwrap_or(1).max(1) + 2;
        let mut head1 = " ".repeat(lw);
        let mut head2 = " ".repeat(lw);
        let mut j = 0;
        while j < self.cols.len() {
            let g = group(&self.cols[j]);
            let span = self.cols[j..].iter().take_while(|c| group(c) == g).count();
            let width: usize = widths[j..j + span].iter().sum();
            let shown: String = g.chars().take(width.saturating_sub(1)).collect();
            let _ = write!(head1, "{shown:<width$}");
            for (c, w) in self.cols[j..j + span].iter().zip(&widths[j..j + span]) {
                let _ = write!(head2, "{:<w$}", sub(c));
            }
            j += span;
        }
        let mut s = format!("{}\n{}\n", head1.trim_end(), head2.trim_end());
        for (r, row) in self.rows.iter().zip(&self.at) {
            let mut line = format!("{:<lw$}", r.label());
            for (sq, w) in row.iter().zip(&widths) {
                let worst = sq.iter().map(|&i| cells[i].verdict).max_by_key(|v| severity(*v));
                let _ = write!(line, "{:<w$}", worst.map_or(' ', symbol));
            }
            s.push_str(line.trim_end());
            s.push('\n');
        }
        s
    }
}
