//! Reports of a probe run: the summary table and the dump of a failed
//! layout self-check.

use super::*;

/// The result of a probe run (GPU or synthetic): per probe comparisons, and
/// probes that could not run (compile error, failed layout check).
#[derive(Clone, Debug, Default)]
pub struct ProbeReport {
    pub results: Vec<ProbeResult>,
    pub failures: Vec<(String, String)>,
}

impl ProbeReport {
    /// The summary table.
    pub fn table(&self) -> String {
        let mut s = format!(
            "{:<26} {:>9} {:>10} {:>9}  {}\n",
            "probe", "cases", "mismatches", "gpu NaNs", "NaN payloads seen"
        );
        for r in &self.results {
            let p = &r.record;
            let payloads: Vec<String> = p.nan_payloads.iter().map(|(k, v)| format!("{k} x{v}")).collect();
            s += &format!(
                "{:<26} {:>9} {:>10} {:>9}  {}\n",
                p.name,
                p.cases,
                p.mismatches,
                p.nan_outputs,
                if payloads.is_empty() {
                    "-".into()
                } else {
                    payloads.join(", ")
                }
            );
        }
        for (name, why) in &self.failures {
            s += &format!("{name:<26} FAILED: {}\n", why.lines().next().unwrap_or(""));
        }
        s
    }
}
/// Human-readable dump of a failed layout self-check: per wrong output, the
/// GPU value, the expected value, and where in the tile the expected
/// values contain the GPU value (a permutation shows up there), then the
/// raw GPU tile.
pub fn layout_report(cases: &Cases, gpu: &[f32], model: &[f32]) -> Option<String> {
    let tc = cases.spec.tile_cases();
    let mut out = String::new();
    let mut bad_tiles = 0;
    let what = [
        "A one-hot at k = r mod K, B distinct: D[r][n] = B[n][r mod K]",
        "A one-hot at k = (r + K/2) mod K: D[r][n] = B[n][(r + K/2) mod K]",
        "B one-hot at k = n, A distinct: D[r][n] = A[r][n]",
        "B one-hot at k = n + K - 8: D[r][n] = A[r][n + K - 8]",
        "A = B = 0, C[r][n] = 8r + n + 1: D = C",
    ];
    for t in 0..cases.tiles {
        let range = t * tc..(t + 1) * tc;
        let wrong: Vec<usize> = range.clone().filter(|&i| !same(gpu[i], model[i])).collect();
        if wrong.is_empty() {
            continue;
        }
        bad_tiles += 1;
        out += &format!(
            "  check tile {t} ({}): {} of {tc} outputs wrong\n",
            what.get(t).unwrap_or(&"?"),
            wrong.len()
        );
        for &i in wrong.iter().take(24) {
            let (_, r, n) = cases.position(i);
            let at: Vec<String> = range
                .clone()
                .filter(|&j| same(gpu[i], model[j]))
                .take(3)
                .map(|j| {
                    let (_, r2, n2) = cases.position(j);
                    format!("({r2},{n2})")
                })
                .collect();
            out += &format!(
                "    (r={r},n={n}) gpu {} [{}] expected {} [{}]; gpu value expected at {}\n",
                gpu[i],
                hex32(gpu[i].to_bits()),
                model[i],
                hex32(model[i].to_bits()),
                if at.is_empty() { "nowhere".into() } else { at.join(" ") }
            );
        }
        if bad_tiles == 1 {
            out += "    raw GPU tile (rows r, columns n = 0..7):\n";
            for r in 0..cases.spec.rows {
                let row: Vec<String> = (0..COLS).map(|n| format!("{}", gpu[t * tc + r * COLS + n])).collect();
                out += &format!("      r={r:2}: {}\n", row.join(" "));
            }
        }
    }
    (bad_tiles > 0).then_some(out)
}
