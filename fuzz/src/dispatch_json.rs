//! Dispatch tables (`dispatch:FILE`): any text parses to a table or to a
//! one-line error naming the file; a parsed table has 1 to
//! `MAX_DISPATCH_ENTRIES` entries and no zero bound, prints back (with
//! canonical orders) to JSON that parses to the same table, picks for any
//! shape the first entry whose bounds hold (or none), and lists as M
//! boundaries exactly its distinct `m_max` values, sorted.
//!
//! Input: a shape (M, N, K as 4 bytes each), then the table text.

use super::bytes::{one_line, Take};
use mxbi::subject::dispatch::{DispatchEntry, MAX_DISPATCH_ENTRIES};
use mxbi::subject::Dispatch;

/// True when the input got past parsing to the property checks.
pub fn run(data: &[u8]) -> bool {
    let mut r = Take(data);
    let (m, n, k) = (r.u32() as usize, r.u32() as usize, r.u32() as usize);
    let Ok(text) = std::str::from_utf8(r.rest()) else {
        return false;
    };
    let d = match Dispatch::parse("t.json", text) {
        Ok(d) => d,
        Err(e) => {
            one_line(&e);
            assert!(e.starts_with("t.json: "), "{e}");
            return false;
        }
    };
    assert!(!d.entries.is_empty() && d.entries.len() <= MAX_DISPATCH_ENTRIES);
    for e in &d.entries {
        assert!([e.m_max, e.n_max, e.k_max].iter().all(|b| *b != Some(0)), "{e:?}");
    }
    // print and parse back
    let printed = print(&d.entries);
    let back = Dispatch::parse("t.json", &printed).unwrap_or_else(|e| panic!("{printed}: {e}"));
    assert_eq!(back, d, "{printed}");
    // the first matching entry, by the documented rule
    let holds = |b: Option<usize>, v: usize| b.is_none_or(|b| v <= b);
    let want = d
        .entries
        .iter()
        .find(|e| holds(e.m_max, m) && holds(e.n_max, n) && holds(e.k_max, k));
    assert_eq!(d.pick(m, n, k), want, "M={m} N={n} K={k}");
    let mut bounds: Vec<usize> = d.entries.iter().filter_map(|e| e.m_max).collect();
    bounds.sort_unstable();
    bounds.dedup();
    assert_eq!(d.m_boundaries(), bounds);
    true
}

fn print(entries: &[DispatchEntry]) -> String {
    let rows: Vec<serde_json::Value> = entries
        .iter()
        .map(|e| {
            let mut o = serde_json::Map::new();
            for (name, b) in [("m_max", e.m_max), ("n_max", e.n_max), ("k_max", e.k_max)] {
                if let Some(b) = b {
                    o.insert(name.into(), b.into());
                }
            }
            o.insert("order".into(), e.order.to_string().into());
            serde_json::Value::Object(o)
        })
        .collect();
    serde_json::json!({ "dispatch": rows }).to_string()
}
