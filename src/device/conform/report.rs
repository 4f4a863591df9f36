//! The conformance summary table (one line per family and instruction).

use super::*;

impl ConformReport {
    pub fn total_mismatches(&self) -> usize {
        self.records.iter().map(|r| r.mismatches + r.unwritten).sum()
    }

    /// Cases on which at least one foil misses some of the GPU's bytes:
    /// the cases whose 0 mismatches name the claimed order (target: all).
    pub fn discriminating(&self) -> usize {
        self.records.iter().filter(|r| r.foils.iter().any(|f| f.1 > 0)).count()
    }

    /// Cases whose GPU outputs are all NaN (the generator rejects them).
    pub fn all_nan(&self) -> usize {
        self.records.iter().filter(|r| r.all_nan).count()
    }

    /// A short table: one line per family/instruction.
    pub fn summary(&self) -> String {
        use std::collections::BTreeMap;
        let mut by: BTreeMap<String, (usize, usize, usize, usize)> = BTreeMap::new();
        for r in &self.records {
            let fam = family_label(&r.case);
            let e = by.entry(fam).or_default();
            e.0 += 1;
            e.1 += r.elements;
            e.2 += r.mismatches + r.unwritten;
            e.3 += r.foils.iter().map(|f| f.1).sum::<usize>();
        }
        let mut s = String::from(
            "| family / kernel | cases | elements | mismatches | foil mismatches |\n|---|---:|---:|---:|---:|\n",
        );
        for (k, (c, e, m, f)) in by {
            s.push_str(&format!("| {k} | {c} | {e} | {m} | {f} |\n"));
        }
        s.push_str(&format!(
            "| **all** | {} | {} | {} | {} |\n",
            self.records.len(),
            self.records.iter().map(|r| r.elements).sum::<usize>(),
            self.total_mismatches(),
            self.records
                .iter()
                .flat_map(|r| r.foils.iter().map(|f| f.1))
                .sum::<usize>()
        ));
        s.push_str(&format!(
            "\ndiscriminating cases (some foil misses GPU bytes): {} of {}; all-NaN cases: {}\n",
            self.discriminating(),
            self.records.len(),
            self.all_nan()
        ));
        if !self.failed.is_empty() {
            s.push_str(&format!("\n{} case(s) failed to build or run:\n", self.failed.len()));
            for (id, order, why) in &self.failed {
                s.push_str(&format!(
                    "- case {id} `{order}`: {}\n",
                    why.lines().next().unwrap_or("")
                ));
            }
        }
        s
    }
}

fn family_label(c: &ConformCase) -> String {
    let order: Order = match c.order.parse() {
        Ok(o) => o,
        Err(_) => return c.order.clone(),
    };
    let fam = match order.family {
        Family::Fma => "fma".to_string(),
        Family::MulAdd => "muladd".to_string(),
        Family::Mma(m) => {
            let instr = match (m.k, m.f, m.input) {
                (16, _, InType::Bf16) => format!(
                    "{} bf16",
                    if c.backend16 == Backend16::Wgmma {
                        "wgmma"
                    } else {
                        "mma.sync"
                    }
                ),
                (16, _, _) => format!(
                    "{} f16",
                    if c.backend16 == Backend16::Wgmma {
                        "wgmma"
                    } else {
                        "mma.sync"
                    }
                ),
                (32, 25, t) => format!("mma.sync {}", t.name()),
                (_, _, t) => format!("wgmma {}", t.name()),
            };
            if order.promote.is_some() {
                format!("{instr} promote")
            } else {
                instr
            }
        }
    };
    let mx = if c.mx {
        let term = c.plan().map(|p| p.term).ok();
        match term {
            Some(TermKind::MxBlock) => " (MX scale=block)",
            Some(TermKind::MxPromote) => " (MX promote)",
            _ => " (MX dequant)",
        }
    } else {
        ""
    };
    let structure = if order.lanes > 1 {
        " lanes"
    } else if order.split > 1 {
        if order.interleave {
            " split/interleave"
        } else {
            " split"
        }
    } else if order.tile == crate::order::Tile::Fresh {
        " ktile fresh"
    } else {
        ""
    };
    format!("{fam}{mx}{structure}")
}
