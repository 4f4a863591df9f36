//! `dispatch:FILE`: the CPU model with an order chosen by problem shape, as
//! cuBLAS heuristics and tuned-config tables choose a kernel.
//!
//! File format (JSON):
//! `{"dispatch": [{"m_max": 16, "order": "fma"}, {"m_max": 256, "n_max": 4096, "order": "fma;split=4"}, {"order": "fma;split=8;reduce=pairwise"}]}`.
//! An entry matches when `M <= m_max`, `N <= n_max` and `K <= k_max` (a bound
//! left out always holds); the first matching entry wins; a shape that no
//! entry matches is unsupported. `M` is the number of rows of the whole
//! batch, never the number of rows requested.
//!
//! Every entry must be reachable: an entry whose shapes an earlier entry
//! already matches entirely (every bound of the earlier entry at least this
//! entry's, a missing bound being unbounded) could never be picked, so the
//! table is refused with one line naming both entries. For tables bounded
//! by `m_max` only, this means: `m_max` strictly increasing, and nothing
//! after an entry without `m_max`.

use super::{Model, Subject, SubjectError};
use crate::gemm::Problem;
use crate::order::{InType, Order};
use serde::Deserialize;

/// One row of a dispatch table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DispatchEntry {
    pub m_max: Option<usize>,
    pub n_max: Option<usize>,
    pub k_max: Option<usize>,
    pub order: Order,
}

impl DispatchEntry {
    fn matches(&self, m: usize, n: usize, k: usize) -> bool {
        self.m_max.is_none_or(|b| m <= b) && self.n_max.is_none_or(|b| n <= b) && self.k_max.is_none_or(|b| k <= b)
    }
}

/// A dispatch table (see the module doc).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dispatch {
    /// Where the table came from (the file name), for the subject's name.
    pub source: String,
    pub entries: Vec<DispatchEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileEntry {
    m_max: Option<usize>,
    n_max: Option<usize>,
    k_max: Option<usize>,
    order: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileTable {
    dispatch: Vec<FileEntry>,
}

/// Most entries a table may hold.
pub const MAX_DISPATCH_ENTRIES: usize = 1024;

impl Dispatch {
    /// Parses a table; errors name the JSON path (`dispatch[2].order`).
    pub fn parse(source: &str, json: &str) -> Result<Dispatch, String> {
        let de = &mut serde_json::Deserializer::from_str(json);
        let table: FileTable = serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            format!("{source}: at {path}: {}", e.into_inner())
        })?;
        if table.dispatch.is_empty() {
            return Err(format!("{source}: at dispatch: the table has no entries"));
        }
        if table.dispatch.len() > MAX_DISPATCH_ENTRIES {
            return Err(format!(
                "{source}: at dispatch: {} entries (at most {MAX_DISPATCH_ENTRIES})",
                table.dispatch.len()
            ));
        }
        let mut entries = Vec::with_capacity(table.dispatch.len());
        for (i, e) in table.dispatch.into_iter().enumerate() {
            let order = e
                .order
                .parse::<Order>()
                .map_err(|err| format!("{source}: at dispatch[{i}].order: {err}"))?;
            for (name, v) in [("m_max", e.m_max), ("n_max", e.n_max), ("k_max", e.k_max)] {
                if v == Some(0) {
                    return Err(format!("{source}: at dispatch[{i}].{name}: must be at least 1"));
                }
            }
            entries.push(DispatchEntry {
                m_max: e.m_max,
                n_max: e.n_max,
                k_max: e.k_max,
                order,
            });
        }
        if let Some(msg) = unreachable_entry(&entries) {
            return Err(format!("{source}: {msg}"));
        }
        Ok(Dispatch {
            source: source.to_string(),
            entries,
        })
    }

    /// The order the table picks for a shape (None: no entry matches).
    pub fn pick(&self, m: usize, n: usize, k: usize) -> Option<&DispatchEntry> {
        self.entries.iter().find(|e| e.matches(m, n, k))
    }

    /// The M values where the table's choice can change: each `m_max` bound
    /// `b` gives `b` and `b + 1` (the last M of an entry and the first after).
    pub fn m_boundaries(&self) -> Vec<usize> {
        let mut v: Vec<usize> = self.entries.iter().filter_map(|e| e.m_max).collect();
        v.sort_unstable();
        v.dedup();
        v
    }
}

/// The first entry that an earlier entry shadows (see the module doc), as
/// the error's text, or `None` when every entry can be picked.
fn unreachable_entry(entries: &[DispatchEntry]) -> Option<String> {
    // an earlier bound covers a later one when it is absent or at least as large
    let covers = |early: Option<usize>, late: Option<usize>| match (early, late) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(e), Some(l)) => e >= l,
    };
    let bounds = |e: &DispatchEntry| {
        let shown: Vec<String> = [("m_max", e.m_max), ("n_max", e.n_max), ("k_max", e.k_max)]
            .into_iter()
            .filter_map(|(name, v)| v.map(|v| format!("{name} {v}")))
            .collect();
        if shown.is_empty() {
            "no bound: it matches every shape".to_string()
        } else {
            shown.join(", ")
        }
    };
    for (j, late) in entries.iter().enumerate() {
        for (i, early) in entries[..j].iter().enumerate() {
            if covers(early.m_max, late.m_max) && covers(early.n_max, late.n_max) && covers(early.k_max, late.k_max) {
                return Some(format!(
                    "at dispatch[{j}]: the entry can never be picked: dispatch[{i}] ({}) already matches every shape it matches (the first match wins); list entries by increasing m_max, the one without m_max last",
                    bounds(early)
                ));
            }
        }
    }
    None
}

impl Subject for Dispatch {
    fn name(&self) -> String {
        format!("dispatch:{}", self.source)
    }

    fn m_boundaries(&self) -> Vec<usize> {
        Dispatch::m_boundaries(self)
    }

    /// The input type every entry's order reads, when they agree.
    fn input(&self) -> Option<InType> {
        let first = Model::new(self.entries.first()?.order).input();
        self.entries
            .iter()
            .all(|e| Model::new(e.order).input() == first)
            .then_some(first?)
    }

    /// The order of the entry that matches the whole batch's shape.
    fn declared_order(&self, m: usize, k: usize, n: usize) -> Option<Order> {
        self.pick(m, n, k).map(|e| e.order)
    }

    fn run(&self, problem: &Problem, rows: Option<&[usize]>) -> Result<Vec<f32>, SubjectError> {
        let (m, n, k) = (problem.m, problem.n, problem.k);
        let entry = self.pick(m, n, k).ok_or_else(|| SubjectError::Unsupported {
            subject: self.name(),
            why: format!("no dispatch entry matches M={m} N={n} K={k}"),
        })?;
        Model::new(entry.order).run(problem, rows).map_err(|e| match e {
            SubjectError::Unsupported { why, .. } => SubjectError::Unsupported {
                subject: self.name(),
                why: format!("order {}: {why}", entry.order),
            },
            other => other,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = r#"{"dispatch": [{"m_max": 16, "order": "fma"}, {"m_max": 256, "order": "fma;split=4"}, {"order": "fma;split=8;reduce=pairwise"}]}"#;

    #[test]
    fn first_matching_entry_wins() {
        let d = Dispatch::parse("t.json", TABLE).unwrap();
        let pick = |m| d.pick(m, 64, 1024).unwrap().order.to_string();
        assert_eq!(pick(1), "fma");
        assert_eq!(pick(16), "fma");
        assert_eq!(pick(17), "fma;split=4");
        assert_eq!(pick(256), "fma;split=4");
        assert_eq!(pick(257), "fma;split=8;reduce=pairwise");
        assert_eq!(d.m_boundaries(), vec![16, 256]);
        assert_eq!(d.name(), "dispatch:t.json");
        // the declared order is the picked entry's, by the whole shape
        assert_eq!(
            d.declared_order(17, 1024, 64).map(|o| o.to_string()).as_deref(),
            Some("fma;split=4")
        );
        assert_eq!(
            d.declared_order(16, 1024, 64).map(|o| o.to_string()).as_deref(),
            Some("fma")
        );
        let bounded = Dispatch::parse("t", r#"{"dispatch": [{"k_max": 512, "order": "muladd"}]}"#).unwrap();
        assert_eq!(bounded.declared_order(1, 513, 8), None);
    }

    #[test]
    fn other_bounds_and_no_match() {
        let d = Dispatch::parse("t", r#"{"dispatch": [{"k_max": 512, "n_max": 8, "order": "muladd"}]}"#).unwrap();
        assert!(d.pick(1, 8, 512).is_some());
        assert!(d.pick(1, 9, 512).is_none());
        assert!(d.pick(1, 8, 513).is_none());
    }

    #[test]
    fn errors_name_the_json_path() {
        let err = |s: &str| Dispatch::parse("t.json", s).unwrap_err();
        assert!(err(r#"{"dispatch": [{"order": "fma"}, {"order": "fma;split=0"}]}"#).contains("dispatch[1].order"));
        assert!(err(r#"{"dispatch": [{"m_max": "x", "order": "fma"}]}"#).contains("dispatch[0].m_max"));
        assert!(err(r#"{"dispatch": [{"m_max": 4, "order": "fma", "mmax": 3}]}"#).contains("dispatch[0]"));
        assert!(err(r#"{"dispatch": []}"#).contains("no entries"));
        assert!(err(r#"{"dispatch": [{"m_max": 0, "order": "fma"}]}"#).contains("dispatch[0].m_max"));
        assert!(err("not json").starts_with("t.json: at"));
    }

    /// An entry an earlier one shadows is refused: `m_max` out of order,
    /// repeated, or after an entry without `m_max`; entries that other
    /// bounds keep reachable are accepted.
    #[test]
    fn unreachable_entries_are_refused() {
        let err = |s: &str| Dispatch::parse("t.json", s).unwrap_err();
        let e = err(r#"{"dispatch": [{"m_max": 256, "order": "fma"}, {"m_max": 16, "order": "fma;split=4"}]}"#);
        assert_eq!(
            e,
            "t.json: at dispatch[1]: the entry can never be picked: dispatch[0] (m_max 256) already matches every shape it matches (the first match wins); list entries by increasing m_max, the one without m_max last"
        );
        let e = err(r#"{"dispatch": [{"m_max": 16, "order": "fma"}, {"m_max": 16, "order": "fma;split=4"}]}"#);
        assert!(
            e.contains("at dispatch[1]") && e.contains("dispatch[0] (m_max 16)"),
            "{e}"
        );
        let e = err(r#"{"dispatch": [{"order": "fma"}, {"m_max": 16, "order": "fma;split=4"}]}"#);
        assert!(e.contains("at dispatch[1]") && e.contains("no bound"), "{e}");
        let e = err(r#"{"dispatch": [{"m_max": 8, "order": "fma"}, {"order": "fma"}, {"order": "fma;split=2"}]}"#);
        assert!(e.contains("at dispatch[2]") && e.contains("dispatch[1]"), "{e}");
        let e = err(
            r#"{"dispatch": [{"m_max": 64, "n_max": 128, "order": "fma"}, {"m_max": 32, "n_max": 64, "order": "fma"}]}"#,
        );
        assert!(e.contains("(m_max 64, n_max 128)"), "{e}");
        assert!(!e.contains('\n'));
        for ok in [
            TABLE,
            r#"{"dispatch": [{"m_max": 16, "order": "fma"}, {"k_max": 64, "order": "fma"}, {"order": "fma;split=4"}]}"#,
            r#"{"dispatch": [{"n_max": 64, "order": "fma"}, {"order": "fma;split=4"}]}"#,
            r#"{"dispatch": [{"m_max": 256, "n_max": 64, "order": "fma"}, {"m_max": 16, "order": "fma;split=4"}]}"#,
            r#"{"dispatch": [{"m_max": 16, "n_max": 64, "order": "fma"}, {"m_max": 16, "order": "fma;split=4"}]}"#,
        ] {
            assert!(Dispatch::parse("t", ok).is_ok(), "{ok}");
        }
    }
}
