//! The SVG heatmap of a report: one square per grid square (rows: knobs and
//! M; columns: family, K, N, target row, rank; see `grid`), coloured by
//! verdict, with a legend, the summary and a tooltip (`<title>`) per square
//! naming its cells.
//!
//! # Contract
//! - Deterministic: the same report gives the same bytes (integer
//!   coordinates; attributes written in sorted order by the `svg` crate).
//! - A square holding several cells (a matrix whose columns do not split
//!   them) shows the worst verdict: BI_FAIL, NON_DET, ERROR, VACUOUS,
//!   BI_PASS; its tooltip lists every cell.
//! - The legend ends with the report's explanations (`bi::explanation`,
//!   one text line each), so a failing heatmap says why it failed.

use super::grid::Grid;
use super::report::Report;
use super::verdict::{severity, Verdict};
use svg::node::element::{Group, Rectangle, Text, Title};
use svg::Document;

/// A verdict's fill colour.
pub fn colour(v: Verdict) -> &'static str {
    match v {
        Verdict::Pass => "#2e7d32",
        Verdict::Fail => "#c62828",
        Verdict::NonDet => "#ef6c00",
        Verdict::Vacuous => "#9e9e9e",
        Verdict::Error => "#6a1b9a",
    }
}

const SQUARE: usize = 12;
const GAP: usize = 2;
/// Approximate advance of one character at the label font size.
const CHAR_W: usize = 7;
/// Height of one legend line.
const LINE: usize = 14;
const FONT: &str = "font-family:monospace;font-size:11px";

fn text(x: usize, y: usize, s: &str) -> Text {
    Text::new(s).set("x", x).set("y", y).set("style", FONT)
}

/// The heatmap as SVG text.
pub fn heatmap(report: &Report) -> String {
    let grid = Grid::new(&report.cells);
    let step = SQUARE + GAP;
    let row_w = grid.rows.iter().map(|r| r.label().len()).max().unwrap_or(0) * CHAR_W + 10;
    let col_h = grid.cols.iter().map(|c| c.label().len()).max().unwrap_or(0) * CHAR_W + 10;
    let head = 44;
    let (x0, y0) = (row_w, head + col_h);
    let legend_y = y0 + grid.rows.len() * step + 20;
    let legend_w: usize = Verdict::ALL
        .iter()
        .map(|v| SQUARE + 18 + format!("{} ({})", v.name(), report.count(*v)).len() * CHAR_W)
        .sum();
    // the legend's explanation lines: why each failing family failed
    let why: Vec<String> = report.explanations.iter().flat_map(|e| e.lines()).collect();
    let why_w = why.iter().map(|l| l.chars().count()).max().unwrap_or(0) * CHAR_W + 8;
    let width = (x0 + grid.cols.len() * step + 20)
        .max(legend_w + 8)
        .max(report.summary_line().len() * CHAR_W + 8)
        .max(why_w);
    let height = legend_y + 30 + why.len() * LINE;

    let title = format!("Batch invariance: {}", report.subject);
    let mut doc = Document::new()
        .set("width", width)
        .set("height", height)
        .set("viewBox", (0, 0, width, height))
        .add(
            Rectangle::new()
                .set("width", width)
                .set("height", height)
                .set("fill", "#ffffff"),
        )
        .add(Title::new(title.clone()))
        .add(text(4, 16, &title))
        .add(text(4, 34, &report.summary_line()));

    let mut labels = Group::new();
    for (i, r) in grid.rows.iter().enumerate() {
        labels = labels.add(text(4, y0 + i * step + SQUARE - 2, &r.label()));
    }
    for (j, c) in grid.cols.iter().enumerate() {
        let (x, y) = (x0 + j * step + SQUARE - 2, y0 - 6);
        labels = labels.add(text(x, y, &c.label()).set("transform", format!("rotate(-90 {x} {y})")));
    }
    doc = doc.add(labels);

    let mut squares = Group::new();
    for (i, row) in grid.at.iter().enumerate() {
        for (j, idx) in row.iter().enumerate() {
            let Some(worst) = idx
                .iter()
                .map(|&k| report.cells[k].verdict)
                .max_by_key(|v| severity(*v))
            else {
                continue;
            };
            let tip: Vec<String> = idx
                .iter()
                .map(|&k| {
                    let c = &report.cells[k];
                    let mut t = format!("{}: {}", c.id, c.verdict);
                    if c.verdict == Verdict::Fail {
                        t.push_str(&format!(
                            " ({} bytes, {} columns, max {} ulp)",
                            c.diff.bytes_differing, c.diff.columns_differing, c.diff.max_ulp
                        ));
                    }
                    t
                })
                .collect();
            squares = squares.add(
                Rectangle::new()
                    .set("x", x0 + j * step)
                    .set("y", y0 + i * step)
                    .set("width", SQUARE)
                    .set("height", SQUARE)
                    .set("fill", colour(worst))
                    .add(Title::new(tip.join("\n"))),
            );
        }
    }
    doc = doc.add(squares);

    let mut legend = Group::new();
    let mut x = 4;
    for v in Verdict::ALL {
        let label = format!("{} ({})", v.name(), report.count(v));
        legend = legend
            .add(
                Rectangle::new()
                    .set("x", x)
                    .set("y", legend_y)
                    .set("width", SQUARE)
                    .set("height", SQUARE)
                    .set("fill", colour(v)),
            )
            .add(text(x + SQUARE + 4, legend_y + SQUARE - 2, &label));
        x += SQUARE + 4 + label.len() * CHAR_W + 14;
    }
    for (i, l) in why.iter().enumerate() {
        legend = legend.add(text(4, legend_y + SQUARE + 16 + i * LINE, l));
    }
    doc = doc.add(legend);
    let mut s = doc.to_string();
    s.push('\n');
    s
}
