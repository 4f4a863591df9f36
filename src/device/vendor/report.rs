//! The Markdown rendering of a vendor report (anchor tables, algorithm
//! choices, pins, timings) and its statistics.

use super::*;

fn cell_text(cells: &[&TableCell]) -> String {
    if cells.is_empty() {
        return " ".into();
    }
    if cells.iter().all(|c| c.diff_bytes == Some(0)) {
        return "=".into();
    }
    if cells
        .iter()
        .all(|c| c.diff_bytes.is_none() && c.status == cells[0].status)
    {
        return cells[0].status.clone();
    }
    cells
        .iter()
        .map(|c| match c.diff_elems {
            Some(0) => "=".to_string(),
            Some(e) => e.to_string(),
            None => c.status.clone(),
        })
        .collect::<Vec<_>>()
        .join(" / ")
}

/// The report as markdown: per shape, a matrix of M × (case, variant) with
/// `=` where the anchor row is byte-identical to the reference at every
/// position and otherwise the number of differing output elements per
/// position; then the heuristic's choices, the pins and the timings.
pub fn render_markdown(report: &VendorReport) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let o = &report.options;
    let _ = writeln!(
        s,
        "## Vendor GEMM anchor-row probe\n\nSeed {:#x}; positions {}; pinned at M={}; workspace {} MiB. \
Cells: `=` the anchor output row is byte-identical to the reference row (smallest M that ran, \
position first) at every position; otherwise differing output elements per position \
({}), `unsupported` (no algorithm), `refused` (pinned algorithm refused by AlgoCheck, not replaced), \
`failed`.\n",
        o.seed,
        if o.all_positions { "first/mid/last" } else { "mid" },
        o.pin_m,
        report.workspace_bytes >> 20,
        if o.all_positions {
            "first / mid / last, merged where they coincide"
        } else {
            "mid"
        },
    );
    for shape in &o.shapes {
        shape_table(&mut s, report, shape);
    }
    algorithm_choices(&mut s, report);
    timing_table(&mut s, report);
    reference_checks(&mut s, report);
    s
}

/// One shape's matrix: M x (case, variant), then the invariance and the
/// reference rows.
fn shape_table(s: &mut String, report: &VendorReport, shape: &Shape) {
    use std::fmt::Write;
    let o = &report.options;
    let tables: Vec<&CaseTable> = report.tables.iter().filter(|t| t.shape == shape.name).collect();
    if tables.is_empty() {
        return;
    }
    let _ = writeln!(s, "### N={} K={}\n", shape.n, shape.k);
    let mut head = "| M |".to_string();
    let mut rule = "|---:|".to_string();
    for t in &tables {
        let _ = write!(head, " {} {} |", t.case.name(), t.variant.name());
        rule.push_str(":---:|");
    }
    let _ = writeln!(s, "{head}\n{rule}");
    for &m in &o.m_list {
        let _ = write!(s, "| {m} |");
        for t in &tables {
            let cells: Vec<&TableCell> = t.cells.iter().filter(|c| c.m == m).collect();
            let _ = write!(s, " {} |", cell_text(&cells));
        }
        s.push('\n');
    }
    let _ = write!(s, "| **invariant** |");
    for t in &tables {
        let v = match t.invariant {
            Some(true) => "**yes**".to_string(),
            Some(false) => format!("no ({}/{})", t.differing_cells, t.ok_cells),
            None => "n/a".into(),
        };
        let _ = write!(s, " {v} |");
    }
    let _ = write!(s, "\n| reference M |");
    for t in &tables {
        let v = t.reference_m.map(|m| m.to_string()).unwrap_or_else(|| "-".into());
        let extra = match t.reference_equals_heuristic {
            Some(true) => " (= heuristic)",
            Some(false) => " (≠ heuristic)",
            None => "",
        };
        let _ = write!(s, " {v}{extra} |");
    }
    s.push_str("\n\n");
}

/// The cuBLASLt runs' heuristic choices, pins and pin checks.
fn algorithm_choices(s: &mut String, report: &VendorReport) {
    use std::fmt::Write;
    let _ = writeln!(
        s,
        "### cuBLASLt algorithm choices\n\nConfig as `id/t tile/s stages/k splitK/r reduction/w swizzle/c custom/i inner shape/g cluster shape`; \
`*` marks M where the heuristic's config equals the pinned one.\n"
    );
    for run in report.runs.iter().filter(|r| r.api == Api::CublasLt) {
        let _ = writeln!(s, "**{} ({})**\n", run.case.name(), run.shape);
        match (&run.pin, &run.pin_error) {
            (Some(p), _) => {
                let _ = writeln!(
                    s,
                    "Pinned at M={}: heuristic {} → pinned {} (re-initialised bytes {} the heuristic's; numerical flags {}).\n",
                    p.pin_m,
                    p.heuristic_at_pin.short(),
                    p.pinned.short(),
                    if p.reinit_bytes_equal_heuristic { "equal" } else { "differ from" },
                    p.pinned
                        .numerical_impl_flags
                        .map(|f| format!("{f:#x}"))
                        .unwrap_or_else(|| "?".into())
                );
            }
            (None, Some(e)) => {
                let _ = writeln!(s, "No pinned algorithm: {e}\n");
            }
            _ => {}
        }
        let _ = writeln!(
            s,
            "| M | heuristic | ws KiB | waves | pinned check |\n|---:|---|---:|---:|---|"
        );
        for h in &run.heuristic {
            let same = match (&h.config, &run.pin) {
                (Some(c), Some(p)) if c.same_config(&p.pinned) => "*",
                _ => "",
            };
            let cfg = h
                .config
                .as_ref()
                .map(|c| format!("{}{same}", c.short()))
                .unwrap_or_else(|| h.status.clone());
            let check = run
                .pin
                .as_ref()
                .and_then(|p| p.checks.iter().find(|c| c.m == h.m))
                .map(|c| c.status.clone())
                .unwrap_or_else(|| "-".into());
            let _ = writeln!(
                s,
                "| {} | {}{} | {} | {} | {} |",
                h.m,
                cfg,
                if h.same_at_all_positions {
                    ""
                } else {
                    " (differs by position!)"
                },
                h.workspace_bytes
                    .map(|w| (w >> 10).to_string())
                    .unwrap_or_else(|| "-".into()),
                h.waves_count.map(|w| format!("{w:.2}")).unwrap_or_else(|| "-".into()),
                check
            );
        }
        s.push('\n');
    }
}

/// The timing table.
fn timing_table(s: &mut String, report: &VendorReport) {
    use std::fmt::Write;
    let o = &report.options;
    let _ = writeln!(
        s,
        "### Timing (median of {} samples × {} launches, CUDA events, µs per GEMM)\n\n\
`pinned speed` = heuristic time / pinned time (below 1: the pin is slower).\n\n\
| case | shape | M | heuristic µs | pinned µs | pinned speed |\n|---|---|---:|---:|---:|---:|",
        o.timing_reps, o.timing_inner
    );
    let f = |v: Option<f64>, d: usize| v.map(|x| format!("{x:.d$}")).unwrap_or_else(|| "-".into());
    for run in &report.runs {
        for t in &run.timings {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {}{} |",
                run.case.name(),
                run.shape,
                t.m,
                f(t.heuristic_us, 1),
                f(t.pinned_us, 1),
                f(t.pinned_speed, 3),
                t.note.as_ref().map(|n| format!(" ({n})")).unwrap_or_default()
            );
        }
    }
}

/// The reference check of every run, then the notes.
fn reference_checks(s: &mut String, report: &VendorReport) {
    use std::fmt::Write;
    s.push_str("\n### Reference check (anchor row vs f64 from the generated inputs)\n\n| case | shape | M | max rel err | tolerance | plausible |\n|---|---|---:|---:|---:|---|\n");
    for run in &report.runs {
        if let Some(c) = &run.reference_check {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {:.2e} | {:.0e} | {} |",
                run.case.name(),
                run.shape,
                c.m,
                c.rel,
                c.tolerance,
                if c.plausible { "yes" } else { "**NO**" }
            );
        }
    }
    if !report.notes.is_empty() {
        s.push_str("\n### Notes\n\n");
        for n in &report.notes {
            let _ = writeln!(s, "- {n}");
        }
    }
}

/// Median of the samples (mean of the two middle ones for an even count).
pub fn median(samples: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let h = v.len() / 2;
    Some(if v.len() % 2 == 1 {
        v[h]
    } else {
        (v[h - 1] + v[h]) / 2.0
    })
}

/// The pinned-vs-heuristic speed ratios, one line per (case, shape, M), for
/// docs/PERFORMANCE.md.
pub fn pinned_ratios(report: &VendorReport) -> Vec<(CaseId, String, usize, f64)> {
    let mut out = Vec::new();
    for run in &report.runs {
        for t in &run.timings {
            if let Some(r) = t.pinned_speed {
                out.push((run.case, run.shape.clone(), t.m, r));
            }
        }
    }
    out
}
