//! The explainer's words: every sentence it prints, as `Display` impls of
//! the data the other files compute. Nothing here decides anything.

use super::across::AcrossRows;
use super::divergence::{Location, Mechanism, TreeDiff};
use super::exactness::Reason;
use super::fix::{Fix, Varies};
use super::identify::RowIdentity;
use super::reveal::{Revealed, Scheme};
use super::shape::{Form, Part, Shape};
use std::fmt;

impl fmt::Display for Location {
    /// `k=256 (part 1 of 4, k 256..511)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "k={}", self.term)?;
        let mut bits = Vec::new();
        if let Some((p, of)) = self.part {
            match self.part_range {
                Some((a, b)) => bits.push(format!("split part {p} of {of}, k {a}..{b}")),
                None => bits.push(format!("split part {p} of {of}")),
            }
        }
        if let Some((t, (a, b))) = self.tile {
            bits.push(format!("k-tile {t}, k {a}..{b}"));
        }
        if let Some(l) = self.lane {
            bits.push(format!("lane {l}"));
        }
        if !bits.is_empty() {
            write!(f, " ({})", bits.join(", "))?;
        }
        Ok(())
    }
}

impl fmt::Display for Mechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mechanism::Family { left, right } => write!(
                f,
                "the step arithmetic changes ({left} -> {right}): products are rounded and added differently"
            ),
            Mechanism::Split { left, right } => write!(
                f,
                "the split-K changes ({left} -> {right}): the row's K is cut into different partial sums"
            ),
            Mechanism::Reduce { left, right } => {
                write!(f, "the partial sums are combined differently ({left} -> {right})")
            }
            Mechanism::Tiles { left, right } => write!(f, "the k-tiling changes ({left} -> {right})"),
            Mechanism::Lanes { left, right } => write!(f, "the GEMV lanes change ({left} -> {right})"),
            Mechanism::Promote { left, right } => write!(
                f,
                "the tensor-core partial is promoted to f32 at a different interval ({left} -> {right})"
            ),
            Mechanism::ScalePoint { left, right } => {
                write!(f, "the MX scales are applied at a different point ({left} -> {right})")
            }
            Mechanism::Output { left, right } => write!(f, "the output conversion changes ({left} -> {right})"),
        }
    }
}

impl fmt::Display for TreeDiff {
    /// A few lines: the verdict, the first divergent node, where, and why.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(d) = &self.divergence else {
            return write!(
                f,
                "{} and {} are the same tree for K = {}",
                self.left, self.right, self.k
            );
        };
        writeln!(f, "{} vs {} (K = {}):", self.left, self.right, self.k)?;
        writeln!(
            f,
            "  the first {} terms are summed identically; {}",
            self.common_terms,
            d.to_string().replace('\n', "\n  ")
        )?;
        match (&self.left_at, &self.right_at) {
            (Some(a), Some(b)) if a == b => writeln!(f, "  at {a} on both sides")?,
            (a, b) => {
                if let Some(a) = a {
                    writeln!(f, "  left continues with {a}")?;
                }
                if let Some(b) = b {
                    writeln!(f, "  right continues with {b}")?;
                }
            }
        }
        for m in &self.mechanisms {
            writeln!(f, "  mechanism: {m}")?;
        }
        Ok(())
    }
}

impl fmt::Display for Varies {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Varies::BatchSize { left, right } => write!(f, "M={left} vs M={right}"),
            Varies::Path { left, right } => write!(f, "path {left} vs {right}"),
            Varies::Unknown => f.write_str("two observations"),
        }
    }
}

impl fmt::Display for Fix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fix::SplitFromKN { order, dispatch } => write!(
                f,
                "choose the split from (K, N) only: run {order} for every M (dispatch table: {dispatch})"
            ),
            Fix::OnePath { order } => write!(f, "compute every row through one path, with {order}"),
            Fix::PinAlgorithm { split, reduce } => write!(
                f,
                "cuBLASLt: pin one algorithm for every M (fixed algo id, split-K = {split}, {reduce} reduction) instead of the heuristic's per-shape choice"
            ),
            Fix::TritonConfig { block_k, split_k } => match block_k {
                Some(b) => write!(f, "Triton: BLOCK_K = {b} and SPLIT_K = {split_k} for every M (no autotune key on M)"),
                None => write!(f, "Triton: SPLIT_K = {split_k} and one BLOCK_K for every M (no autotune key on M)"),
            },
            Fix::SameNumerics { order } => write!(
                f,
                "use the same step arithmetic, scale point and output conversion on both sides ({order})"
            ),
            Fix::FixedRankOrder { ranks } => write!(
                f,
                "add the ranks' partial sums in one fixed order ({}) for every chunk and every run, not in an order that depends on the chunk's owner or the run",
                ranks.iter().map(|r| format!("r{r}")).collect::<Vec<_>>().join(", ")
            ),
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::ExactSums { grain, bits, capacity } => write!(
                f,
                "all partial sums exact: every product is a multiple of 2^{grain} and they sum below 2^{} ({bits} bits, the accumulators keep {capacity})",
                grain + *bits as i32
            ),
            Reason::AtMostTwoTerms { nonzero } => write!(
                f,
                "a {nonzero}-term sum of exact products: every order rounds the same sum once"
            ),
        }
    }
}

impl fmt::Display for RowIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.matches.first(), &self.closest) {
            (Some(o), _) => {
                write!(f, "row {}: {o}", self.row)?;
                // at most 6 listed, so the line stays short (JSON lists all)
                let others: Vec<String> = self.matches[1..].iter().take(6).map(|o| o.to_string()).collect();
                let more = self.matches.len().saturating_sub(1 + others.len());
                if !others.is_empty() {
                    write!(f, " (also reproduced by: {}", others.join(", "))?;
                    if more > 0 {
                        write!(f, " and {more} more")?;
                    }
                    f.write_str(")")?;
                }
                Ok(())
            }
            (None, Some(c)) => write!(
                f,
                "row {}: no order in the family reproduces it ({} candidates); the closest, {}, differs in {} elements ({} bytes), at most {} ulp",
                self.row,
                self.evaluated,
                c.order,
                c.elements_differ,
                c.bytes_differ,
                if c.max_ulp == u64::MAX {
                    "NaN".to_string()
                } else {
                    c.max_ulp.to_string()
                }
            ),
            (None, None) => write!(f, "row {}: no candidate could run these inputs", self.row),
        }
    }
}

impl fmt::Display for Revealed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = match self.scheme {
            Scheme::Lines => "one probe per column or row",
            Scheme::Diagonal => "diagonal probes",
        };
        let inputs = match self.mx {
            Some(f) => format!(
                "{} inputs, one unit per block of 32, the large values in the scales",
                f.name()
            ),
            None => format!("{} inputs", self.input.name()),
        };
        let leaves = if self.mx.is_some() {
            self.k / crate::gemm::MX_BLOCK
        } else {
            self.k
        };
        let counted = if self.window < leaves {
            format!(
                "at most {} units counted exactly per probe, so leaves are ranked in stages",
                self.window
            )
        } else {
            format!("{} units counted per probe", self.window)
        };
        writeln!(
            f,
            "revealed at M={} K={} N={} ({inputs}): {} launches, {} probe answers of {} distinct probes ({scheme}, {counted})",
            self.m,
            self.k,
            self.n,
            self.launches,
            self.probes,
            self.distinct_probes,
        )?;
        if self.grid_launches > 0 {
            writeln!(
                f,
                "{} of the launches were grid launches (a pair at every element: +B on a row, -B on a column)",
                self.grid_launches
            )?;
        }
        let pairs = self.shape.sibling_pairs();
        if pairs > 0 {
            let widest = self.shape.nodes.iter().map(Vec::len).max().unwrap_or(0);
            writeln!(
                f,
                "the tree has nodes of up to {widest} children: proving them takes at least {pairs} probe answers (one for every two children of a node; docs/EXPLAIN.md, \"What a wide node costs\")"
            )?;
        }
        if self.disagreement_count == 0 {
            writeln!(
                f,
                "every probe answer ({}, at every position of every launch) agrees with one tree: the positions of a launch share it",
                self.checked
            )?;
        } else {
            writeln!(
                f,
                "{} of {} probe answers contradict the recovered tree: the kernel does not reduce every position of a launch the same way",
                self.disagreement_count, self.checked
            )?;
            for d in &self.disagreements {
                writeln!(
                    f,
                    "  launch {} C[{}, {}]: probe (k={}, k={}) measured {} terms under the ancestor, the tree says {}",
                    d.launch, d.row, d.col, d.p, d.q, d.measured, d.expected
                )?;
            }
        }
        if self.repeats.probes > 0 {
            writeln!(
                f,
                "{} probes repeated with other values ({} launches: {}): all {} answers the same, the order does not depend on the data",
                self.repeats.probes,
                self.repeats.launches,
                self.repeats
                    .repeats
                    .iter()
                    .map(|r| r.split(':').next().unwrap_or(r))
                    .collect::<Vec<_>>()
                    .join(", "),
                self.repeats.answers
            )?;
        }
        match &self.order {
            Some(o) => {
                let preset = o.preset_name().map(|p| format!(", preset {p}")).unwrap_or_default();
                writeln!(
                    f,
                    "order: {o}{preset} (tree and bytes: {} elements of random inputs reproduced)",
                    self.verified_elements
                )?;
                if !self.equivalent.is_empty() {
                    let e: Vec<String> = self.equivalent.iter().map(|o| o.to_string()).collect();
                    writeln!(f, "equivalent on those inputs: {}", e.join(", "))?;
                }
                if !self.same_parts.is_empty() {
                    let e: Vec<String> = self.same_parts.iter().map(|o| o.to_string()).collect();
                    writeln!(
                        f,
                        "the same tree at K={}: {} (split parts that start elsewhere cut the same parts here; neither tree nor bytes tell them apart)",
                        self.k,
                        e.join(", ")
                    )?;
                }
                Ok(())
            }
            None => {
                if self.disagreement_count > 0 {
                    writeln!(
                        f,
                        "no order named: the answers above contradict the recovered tree; that tree (of each probe's first answer) in words:"
                    )?;
                } else if self.shape_matches.is_empty() {
                    writeln!(f, "no order of the family has this tree; the recovered tree in words:")?;
                } else {
                    let e: Vec<String> = self.shape_matches.iter().take(8).map(|o| o.to_string()).collect();
                    writeln!(
                        f,
                        "the tree is that of {} but none of them reproduces the bytes (the step arithmetic is not in the family); the tree in words:",
                        e.join(", ")
                    )?;
                }
                for l in self.shape.describe() {
                    writeln!(f, "  {l}")?;
                }
                if let Some(c) = &self.closest {
                    let mut w = format!(
                        "  nearest family order by tree: {} ({} of the tree's edges differ",
                        c.order, c.edges_differ
                    );
                    if let Some([l, n, pl, pn]) = c.first {
                        w.push_str(&format!(
                            "; first departure: {} joins the addition over {}",
                            span(l, n),
                            span(pl, pn)
                        ));
                    }
                    writeln!(f, "{w})")?;
                }
                writeln!(
                    f,
                    "  the full tree: mxbi reveal --tree (JSON: \"tree\"; Python: revealed.shape)"
                )
            }
        }
    }
}

/// `k 12` (one term) or `k 0..255` (a node's smallest term and count).
fn span(lo: u32, n: u32) -> String {
    if n <= 1 {
        format!("k {lo}")
    } else if lo == u32::MAX {
        "the root".to_string()
    } else {
        format!("the node of k {lo}.. ({n} terms)")
    }
}

impl fmt::Display for Form {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Form::Term => f.write_str("one term"),
            Form::Chain { fan_in, ascending } => {
                match fan_in {
                    2 => f.write_str("serial (one term per addition")?,
                    _ => write!(f, "a chain of fused {}-term sums (", fan_in - 1)?,
                }
                f.write_str(match ascending {
                    Some(true) => ", terms joining in increasing k)",
                    Some(false) => ", terms joining in DECREASING k)",
                    None => ", terms joining out of k order)",
                })
            }
            Form::Pairwise => f.write_str("pairwise"),
            Form::Mixed { depth, fan_in } => write!(f, "nested (depth {depth}, widest addition {fan_in} operands)"),
        }
    }
}

impl fmt::Display for Part {
    /// `k 0..255 (256 terms, contiguous), serial`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let spacing = match self.step {
            _ if self.terms == 1 => String::new(),
            Some(1) => ", contiguous".to_string(),
            Some(s) => format!(", every {s}th term"),
            None => ", irregular".to_string(),
        };
        write!(
            f,
            "k {}..{} ({} terms{spacing}), {}",
            self.lo, self.hi, self.terms, self.form
        )
    }
}

impl Shape {
    /// The tree in a few lines: terms, additions, how the root combines
    /// its parts (at most 8 listed, with how the rest look).
    pub fn describe(&self) -> Vec<String> {
        let parts = self.root_parts();
        let mut v = vec![format!(
            "{} terms, {} additions; {}",
            self.leaves(),
            self.nodes.len(),
            match parts.len() {
                0 => "an empty sum (+0)".to_string(),
                1 => format!("one part: {}", parts[0]),
                p => format!("the root adds {p} parts:"),
            }
        )];
        if parts.len() > 1 {
            for (i, p) in parts.iter().take(8).enumerate() {
                v.push(format!("  part {}: {p}", i + 1));
            }
            if parts.len() > 8 {
                let rest = &parts[8..];
                let same = rest.iter().all(|p| p.form == rest[0].form && p.terms == rest[0].terms);
                v.push(if same {
                    format!(
                        "  and {} more parts of {} terms, {}",
                        rest.len(),
                        rest[0].terms,
                        rest[0].form
                    )
                } else {
                    format!("  and {} more parts", rest.len())
                });
            }
        }
        v
    }
}

/// `rows 0, 1, 2` (at most 16 listed, then how many more).
fn row_list(rows: &[usize]) -> String {
    let shown: Vec<String> = rows.iter().take(16).map(|r| r.to_string()).collect();
    let more = if rows.len() > 16 {
        format!(" and {} more", rows.len() - 16)
    } else {
        String::new()
    };
    format!(
        "{} {}{more}",
        if rows.len() == 1 { "row" } else { "rows" },
        shown.join(", ")
    )
}

impl fmt::Display for AcrossRows {
    /// One line: the order that reproduces every row, or that none does
    /// and which order reproduces which rows.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "across {}: ", row_list(&self.rows))?;
        if let Some(o) = self.order() {
            write!(f, "{o} reproduces every row")?;
            let same: Vec<String> = self.classes[0].iter().skip(1).take(8).map(|o| o.to_string()).collect();
            if !same.is_empty() {
                write!(f, " (same tree: {})", same.join(", "))?;
            }
            if self.classes.len() > 1 {
                let other: Vec<String> = self.classes[1..].iter().take(8).map(|c| c[0].to_string()).collect();
                let more = self.classes.len() - 1 - other.len();
                let more = if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                };
                write!(f, "; other trees with the same bytes: {}{more}", other.join(", "))?;
            }
            return writeln!(f);
        }
        write!(f, "no order reproduces every row")?;
        let parts: Vec<String> = self
            .groups
            .iter()
            .map(|g| format!("{} reproduces {}", g.order, row_list(&g.rows)))
            .collect();
        if !parts.is_empty() {
            write!(f, ": {}", parts.join("; "))?;
        }
        if !self.unmatched.is_empty() {
            write!(f, "; no order reproduces {}", row_list(&self.unmatched))?;
        }
        writeln!(f)
    }
}
