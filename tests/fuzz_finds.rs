//! What the default fuzz run must find (issue 22, "no blind spots" and
//! "flakes are flakes"), on Rust subjects defined here and run through the
//! fuzz library with `FuzzConfig::default()` (seed 1, a 60 s budget):
//!
//! - a padding kernel (order `fma;split=4` for row i when row i + 1 exists
//!   and is all zero, else `fma`): found and shrunk within 60 s; the
//!   drawn rows are never all zero, so only `others` = `zero` or
//!   `zero-beside` shows it;
//! - an M-window kernel (a dispatch table: `fma` up to M = 39,
//!   `fma;split=4` for 40..=60, `fma` above) that does not declare its M
//!   boundaries (an opaque kernel, as an `exec:` runner): found within
//!   60 s, because M is drawn across the whole range, not only at edges;
//! - a flaky kernel (`fma;split=4` on one call in five, by a call counter,
//!   else `fma`): its failures are `NON_DET` with a rate (`k of 3 replays
//!   failed`), and no minimal case is written.
//!
//! The tests take a lock so that each one's 60 s is its own.

mod common;

use common::fresh_dir;
use mxbi::bi::Others;
use mxbi::fuzz::{fuzz, FuzzConfig, FuzzOutcome};
use mxbi::gemm::{Matrix, Problem};
use mxbi::order::InType;
use mxbi::subject::{Dispatch, Model, Subject, SubjectError};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn model(order: &str) -> Model {
    Model::new(order.parse().expect("the order parses"))
}

/// `fma;split=4` for row i when row i + 1 exists and is all zero, else `fma`.
struct Padding;

impl Subject for Padding {
    fn name(&self) -> String {
        "test:padding".into()
    }

    fn input(&self) -> Option<InType> {
        Some(InType::F32)
    }

    fn run(&self, p: &Problem, rows: Option<&[usize]>) -> Result<Vec<f32>, SubjectError> {
        let all: Vec<usize> = (0..p.m).collect();
        let sel = rows.unwrap_or(&all);
        let Matrix::F32(a) = p.a else {
            return Err(SubjectError::Unsupported {
                subject: self.name(),
                why: "f32 inputs only".into(),
            });
        };
        let plain = model("fma").run(p, Some(sel))?;
        let split = model("fma;split=4").run(p, Some(sel))?;
        let mut out = plain;
        for (ri, &i) in sel.iter().enumerate() {
            let next_is_padding = i + 1 < p.m && a[(i + 1) * p.k..(i + 2) * p.k].iter().all(|&v| v == 0.0);
            if next_is_padding {
                out[ri * p.n..(ri + 1) * p.n].copy_from_slice(&split[ri * p.n..(ri + 1) * p.n]);
            }
        }
        Ok(out)
    }
}

/// A dispatch table that does not tell the checker where it switches.
struct Opaque(Dispatch);

impl Subject for Opaque {
    fn name(&self) -> String {
        "test:m-window".into()
    }

    fn input(&self) -> Option<InType> {
        self.0.input()
    }

    fn run(&self, p: &Problem, rows: Option<&[usize]>) -> Result<Vec<f32>, SubjectError> {
        self.0.run(p, rows)
    }
}

/// `fma;split=4` on every fifth call (a call counter), else `fma`.
struct Flaky {
    calls: AtomicU64,
}

impl Subject for Flaky {
    fn name(&self) -> String {
        "test:flaky".into()
    }

    fn input(&self) -> Option<InType> {
        Some(InType::F32)
    }

    fn run(&self, p: &Problem, rows: Option<&[usize]>) -> Result<Vec<f32>, SubjectError> {
        let order = if self.calls.fetch_add(1, Ordering::Relaxed) % 5 == 4 {
            "fma;split=4"
        } else {
            "fma"
        };
        model(order).run(p, rows)
    }
}

/// The default fuzz run on `s`, timed.
fn default_fuzz(s: &dyn Subject) -> (FuzzOutcome, Duration) {
    let start = Instant::now();
    let o = fuzz(s, &FuzzConfig::default()).expect("the fuzz run runs");
    let t = start.elapsed();
    if let Some(f) = &o.failure {
        eprintln!(
            "{}: found after {} cases in {t:?}: {}; shrunk ({} runs) to: {}",
            s.name(),
            o.cases_tried,
            f.found.describe(),
            f.shrink_runs,
            f.case.describe()
        );
    }
    (o, t)
}

#[test]
fn the_padding_kernel_is_found_and_shrunk_within_60_s() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (o, t) = default_fuzz(&Padding);
    let f = o.failure.as_ref().unwrap_or_else(|| {
        panic!(
            "not found in {} cases ({t:?}); NON_DET: {}",
            o.cases_tried, o.non_det_count
        )
    });
    assert!(t < Duration::from_secs(60), "{t:?}");
    // the cause is padding: the minimal case's other rows are zero rows
    let others = f.case.content.others;
    assert!(
        matches!(others, Others::Zero | Others::ZeroBeside),
        "{}",
        f.case.describe()
    );
    assert!(f.shrink_runs > 0 && f.confirmed == 3, "{}", f.case.describe());
    // shrunk: the smallest batch that has a padding row beside the target
    assert!(f.case.m <= 2 || f.case.k <= 8, "{}", f.case.describe());
    // the same case with drawn rows holds
    let mut drawn = f.case.clone();
    drawn.content.others = Others::Drawn;
    let cells =
        mxbi::bi::check_cells(&Padding, None, &drawn.options(), drawn.content, &drawn.knobs).expect("the check runs");
    assert!(
        cells.iter().all(|c| c.verdict != mxbi::bi::Verdict::Fail),
        "{}",
        drawn.describe()
    );
}

#[test]
fn the_m_window_kernel_is_found_within_60_s() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let table = r#"{"dispatch":[{"m_max":39,"order":"fma"},{"m_max":60,"order":"fma;split=4"},{"order":"fma"}]}"#;
    let s = Opaque(Dispatch::parse("window.json", table).expect("the table parses"));
    assert!(s.m_boundaries().is_empty());
    let (o, t) = default_fuzz(&s);
    let f = o
        .failure
        .as_ref()
        .unwrap_or_else(|| panic!("not found in {} cases ({t:?})", o.cases_tried));
    assert!(t < Duration::from_secs(60), "{t:?}");
    // one side of the batch family inside the window, the other outside;
    // shrinking finds the window's first M against a baseline of 1
    let c = &f.case;
    assert_eq!(c.family, mxbi::bi::Family::Batch, "{}", c.describe());
    assert_eq!((c.base_m, c.m), (1, 40), "{}", c.describe());
}

#[test]
fn a_flaky_kernel_is_non_det_with_a_rate_and_no_minimal_case() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let s = Flaky {
        calls: AtomicU64::new(0),
    };
    let cfg = FuzzConfig {
        max_cases: Some(400),
        ..FuzzConfig::default()
    };
    let start = Instant::now();
    let o = fuzz(&s, &cfg).expect("the fuzz run runs");
    assert!(start.elapsed() < Duration::from_secs(60), "{:?}", start.elapsed());
    assert!(o.failure.is_none(), "{}", o.failure.as_ref().unwrap().case.describe());
    assert!(o.non_det_count > 0 && !o.non_det.is_empty(), "{} cases", o.cases_tried);
    eprintln!(
        "{}: {} cases, {} NON_DET, first: {} ({})",
        s.name(),
        o.cases_tried,
        o.non_det_count,
        o.non_det[0].case.describe(),
        o.non_det[0].rate()
    );
    for d in &o.non_det {
        assert_eq!(d.replays, 3);
        assert!(d.failed < 3, "{}", d.rate());
        assert_eq!(d.rate(), format!("{} of 3 replays failed", d.failed));
    }
    // the files: fuzz.json lists them with their rate; no minimal.json
    let dir = fresh_dir("fuzz-flaky");
    mxbi::fuzz::write_files(&dir, &s.name(), &o).expect("the files are written");
    assert!(!dir.join("minimal.json").exists());
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("fuzz.json")).unwrap()).unwrap();
    assert_eq!(summary["failure"], serde_json::Value::Null);
    let first = &summary["non_det"][0];
    assert_eq!(first["verdict"], "NON_DET", "{summary}");
    assert_eq!(first["replays"], 3, "{summary}");
    assert!(
        first["rate"].as_str().unwrap().ends_with(" of 3 replays failed"),
        "{summary}"
    );
    assert_eq!(summary["non_det_count"], o.non_det_count, "{summary}");
}
