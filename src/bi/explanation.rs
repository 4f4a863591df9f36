//! Why a family failed: the explanation a report carries for the first
//! failing cell of each failing family (and of each distinct pair of
//! orders within it). docs/BI.md, "Explanations in the report".
//!
//! # Contract
//! - **What it holds.** Each side's order and how it is known
//!   ([`Known`]: declared by the subject, identified from the bytes by the
//!   explainer's family, the op model's path, or not nameable with the
//!   closest order and its distance), the first diverging node in words
//!   (the k range, tile or split part, rank and path where the two
//!   computations first differ), the mechanism in words, and the fixes.
//! - **Who fills it.** The checker only carries explanations: they are
//!   computed at the edge, where the cell's two sides can be re-run on the
//!   subject (`mxbi bi run`, Python `mxbi.bi.check`), and skipped by
//!   `--no-explain`. A failure to explain is itself said ([`Explanation::note`]),
//!   never a failed run.
//! - **Versioned.** Each object names [`EXPLANATION_SCHEMA`]; a report
//!   holding explanations is `mxbi-bi-report/1` with the optional
//!   `explanations` array (older readers ignore it).
//! - **Words.** [`Explanation::lines`] is the one rendering every report
//!   format uses (terminal, Markdown, JUnit message, SVG legend, Python
//!   `str(report)`); no line exceeds [`MAX_LINE`] characters.

use super::family::Family;
use serde::{Deserialize, Serialize};

/// The version of the explanation objects.
pub const EXPLANATION_SCHEMA: &str = "mxbi-bi-explanation/1";

/// Longest line [`Explanation::lines`] writes (longer words are cut with
/// an ellipsis; the JSON keeps them whole).
pub const MAX_LINE: usize = 200;

/// How a side's order is known.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Known {
    /// The subject declares it (a model, a dispatch table's entry).
    Declared,
    /// An order of the explainer's family reproduces the side's bytes.
    Identified,
    /// No order of the family reproduces the side's bytes, but probing
    /// the subject (`reveal`) recovered a tree an order names.
    Revealed,
    /// The op model's record of the row (its path, order and scale point)
    /// reproduces the side's bytes.
    OpModel,
    /// No order of the family reproduces the bytes: `closest` says which
    /// comes nearest and how far it is.
    NotNameable,
}

impl Known {
    pub fn words(self) -> &'static str {
        match self {
            Known::Declared => "declared",
            Known::Identified => "identified from the bytes",
            Known::Revealed => "revealed by probing",
            Known::OpModel => "the op model's path",
            Known::NotNameable => "not nameable",
        }
    }
}

/// One side of the explained cell.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SideStory {
    /// Where the side's target row sits: `M = 1, row 0`, `rank 1 row 0 of
    /// M = 2 on the GATHER path`.
    pub side: String,
    /// An op's path for the side's row (`LOCAL`, `GATHER`); None for
    /// single-path subjects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The order (None when not nameable).
    pub order: Option<String>,
    pub known: Known,
    /// Not nameable: the closest order of the family and its distance, in
    /// words (`fma;split=4: 27 of 32 elements differ, at most 2436224 ulp`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closest: Option<String>,
}

impl SideStory {
    /// The side's order in words: the order, or the closest.
    pub fn order_words(&self) -> String {
        match (&self.order, &self.closest) {
            (Some(o), _) => format!("{o} ({})", self.known.words()),
            (None, Some(c)) => format!("not nameable; closest {c}"),
            (None, None) => "not nameable".to_string(),
        }
    }
}

/// The explanation of one failing family (or one pair of orders in it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Explanation {
    /// [`EXPLANATION_SCHEMA`].
    pub schema: String,
    pub family: Family,
    /// The cell explained: the first failing cell of the family with this
    /// pair of orders.
    pub cell: String,
    /// Failing cells of the family this explanation covers (the same pair
    /// of declared orders; every failing cell of the family when the
    /// orders are not declared).
    pub failing_cells: usize,
    /// The baseline side and the variant side.
    pub base: Option<SideStory>,
    pub variant: Option<SideStory>,
    /// The first diverging node, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_node: Option<String>,
    /// The mechanism(s), in words.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mechanism: Vec<String>,
    /// The fixes, in words.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fixes: Vec<String>,
    /// What could not be explained, or a caveat (None: fully explained).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl Explanation {
    /// An explanation of `cell` with nothing known yet.
    pub fn new(family: Family, cell: &str, failing_cells: usize) -> Explanation {
        Explanation {
            schema: EXPLANATION_SCHEMA.to_string(),
            family,
            cell: cell.to_string(),
            failing_cells,
            base: None,
            variant: None,
            first_node: None,
            mechanism: Vec::new(),
            fixes: Vec::new(),
            note: None,
        }
    }

    /// The headline: `batch: fma vs fma;split=4 (11 failing cells; first
    /// batch/m=17/...)`.
    pub fn headline(&self) -> String {
        // an op's two paths are named with their orders
        let paths = match (&self.base, &self.variant) {
            (Some(a), Some(b)) => a.path.is_some() && b.path.is_some(),
            _ => false,
        };
        let order = |s: &Option<SideStory>| {
            let o = s
                .as_ref()
                .and_then(|s| s.order.clone())
                .unwrap_or_else(|| "(not nameable)".to_string());
            match s.as_ref().and_then(|s| s.path.as_ref()) {
                Some(p) if paths => format!("{p} path ({o})"),
                _ => o,
            }
        };
        let pair = if self.base.is_some() || self.variant.is_some() {
            format!("{} vs {}", order(&self.base), order(&self.variant))
        } else {
            "not explained".to_string()
        };
        let cells = if self.failing_cells == 1 {
            "1 failing cell".to_string()
        } else {
            format!("{} failing cells", self.failing_cells)
        };
        cut(&format!("{}: {pair} ({cells}; first {})", self.family, self.cell))
    }

    /// A few lines: the headline, each side, the first diverging node, the
    /// mechanism, the fixes and the note; each at most [`MAX_LINE`]
    /// characters.
    pub fn lines(&self) -> Vec<String> {
        let mut v = vec![self.headline()];
        for (label, s) in [("baseline", &self.base), ("variant ", &self.variant)] {
            if let Some(s) = s {
                v.push(cut(&format!("  {label} {}: {}", s.side, s.order_words())));
            }
        }
        if let Some(n) = &self.first_node {
            v.push(cut(&format!("  first diverging node: {n}")));
        }
        for m in &self.mechanism {
            v.push(cut(&format!("  mechanism: {m}")));
        }
        for f in &self.fixes {
            v.push(cut(&format!("  fix: {f}")));
        }
        if let Some(n) = &self.note {
            v.push(cut(&format!("  note: {n}")));
        }
        v
    }
}

/// `s` cut to [`MAX_LINE`] characters (an ellipsis marks the cut).
pub fn cut(s: &str) -> String {
    if s.chars().count() <= MAX_LINE {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(MAX_LINE - 1).collect();
        t.push('…');
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side(order: Option<&str>, known: Known, closest: Option<&str>) -> SideStory {
        SideStory {
            side: "M = 1, row 0".into(),
            path: None,
            order: order.map(str::to_string),
            known,
            closest: closest.map(str::to_string),
        }
    }

    #[test]
    fn lines_name_both_orders_the_node_and_the_fix() {
        let mut e = Explanation::new(Family::Batch, "batch/m=17/k=1024/n=64/row=0", 11);
        e.base = Some(side(Some("fma"), Known::Declared, None));
        e.variant = Some(side(
            None,
            Known::NotNameable,
            Some("fma;split=4: 3 of 64 elements differ"),
        ));
        e.first_node = Some("node 257 at k=256 (split part 1 of 4)".into());
        e.fixes = vec!["run fma;split=4 for every M".into()];
        let l = e.lines();
        assert_eq!(
            l[0],
            "batch: fma vs (not nameable) (11 failing cells; first batch/m=17/k=1024/n=64/row=0)"
        );
        assert_eq!(l[1], "  baseline M = 1, row 0: fma (declared)");
        assert_eq!(
            l[2],
            "  variant  M = 1, row 0: not nameable; closest fma;split=4: 3 of 64 elements differ"
        );
        assert_eq!(l[3], "  first diverging node: node 257 at k=256 (split part 1 of 4)");
        assert_eq!(l[4], "  fix: run fma;split=4 for every M");
        assert_eq!(l.len(), 5);
    }

    #[test]
    fn an_ops_two_paths_are_named_in_the_headline() {
        let mut e = Explanation::new(Family::Rank, "rank/m=2", 3);
        let mut s = side(Some("fma"), Known::OpModel, None);
        s.path = Some("LOCAL".into());
        e.base = Some(s.clone());
        s.path = Some("GATHER".into());
        e.variant = Some(s);
        assert_eq!(
            e.headline(),
            "rank: LOCAL path (fma) vs GATHER path (fma) (3 failing cells; first rank/m=2)"
        );
    }

    #[test]
    fn no_line_is_longer_than_the_limit() {
        let mut e = Explanation::new(Family::Content, "c", 1);
        e.mechanism = vec!["x".repeat(5000)];
        let l = e.lines();
        assert!(l.iter().all(|x| x.chars().count() <= MAX_LINE));
        assert!(l[1].ends_with('…'));
        assert_eq!(cut("short"), "short");
    }
}
