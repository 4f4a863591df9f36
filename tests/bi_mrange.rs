//! M ranges (bi::mrange): a range is sampled and each run of failing M is
//! narrowed to its exact ends by bisection: `fma` up to M = 16 and
//! `fma;split=4` above fails from 17 to the range's end; an M window
//! 40..=60 is found exactly.

use mxbi::bi::{bisect_ranges, check, expand, parse_ms, CheckOptions, Content, Family, Verdict};
use mxbi::order::InType;
use mxbi::subject::Dispatch;
use std::process::Command;

fn table(json: &str) -> Dispatch {
    Dispatch::parse("t.json", json).unwrap()
}

const STEP: &str = r#"{"dispatch": [{"m_max": 16, "order": "fma"}, {"order": "fma;split=4"}]}"#;
const WINDOW: &str =
    r#"{"dispatch": [{"m_max": 39, "order": "fma"}, {"m_max": 60, "order": "fma;split=4"}, {"order": "fma"}]}"#;

fn run(d: &Dispatch, m: &str) -> mxbi::bi::Report {
    let (ms, ranges) = expand(&parse_ms(m).unwrap()).unwrap();
    let opts = CheckOptions {
        families: vec![Family::Batch],
        ms,
        k: 256,
        n: 16,
        positions: vec![],
        seed: 1,
        input: InType::F32,
        repeats: 3,
        confirm: 3,
    };
    let mut r = check(d, None, &opts, &|_, _| {}).unwrap();
    bisect_ranges(d, None, &opts, Content::default(), &ranges, &mut r).unwrap();
    r
}

#[test]
fn a_step_is_found_from_its_first_failing_m() {
    let r = run(&table(STEP), "1..512");
    assert_eq!(r.m_ranges.len(), 1);
    let mr = &r.m_ranges[0];
    assert_eq!(mr.range, "1..=512");
    assert_eq!(mr.runs.len(), 1, "{}", mr.line());
    assert_eq!((mr.runs[0].first, mr.runs[0].last, mr.runs[0].exact), (17, 512, true));
    assert!(r.text().contains("first failing M = 17, last = 512"), "{}", r.text());
    assert!(r.markdown().contains(&format!("{}.", mr.line())));
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["m_ranges"][0]["runs"][0]["first"], 17);
    // every cell agrees with the table
    for c in &r.cells {
        assert_eq!(c.verdict == Verdict::Fail, c.m > 16, "{}", c.id);
    }
}

#[test]
fn an_m_window_is_found_exactly() {
    let r = run(&table(WINDOW), "1,8,20..200");
    let mr = &r.m_ranges[0];
    assert_eq!(mr.range, "20..=200");
    assert_eq!(mr.runs.len(), 1, "{}", mr.line());
    assert_eq!((mr.runs[0].first, mr.runs[0].last), (40, 60), "{}", mr.line());
    // bisection checked the M on each side of both ends
    for m in [39, 40, 60, 61] {
        let at: Vec<_> = r.cells.iter().filter(|c| c.m == m).collect();
        assert!(!at.is_empty(), "M = {m} was not checked");
        assert!(at
            .iter()
            .all(|c| (c.verdict == Verdict::Fail) == (40..=60).contains(&m)));
    }
    // the bound: samples and bisection steps only
    assert!(mr.sampled + mr.bisected < 60, "{}", mr.line());
}

#[test]
fn a_passing_range_says_so() {
    let r = run(&table(STEP), "1..16");
    assert_eq!(
        r.m_ranges[0].line(),
        format!(
            "M range 1..=16 ({} sampled, 0 bisected): no failing M",
            r.m_ranges[0].sampled
        )
    );
}

#[test]
fn the_cli_takes_ranges_and_prints_the_ends() {
    let dir = std::env::temp_dir().join(format!("mxbi-mrange-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let t = dir.join("t.json");
    std::fs::write(&t, STEP).unwrap();
    let json = dir.join("r.json");
    let out = Command::new(env!("CARGO_BIN_EXE_mxbi"))
        .args(["bi", "run", "--subject", &format!("dispatch:{}", t.display())])
        .args([
            "--family",
            "batch",
            "--m",
            "1,4..=100",
            "--k",
            "64",
            "--n",
            "8",
            "--json",
        ])
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("first failing M = 17, last = 100"), "{stdout}");
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(r["m_ranges"][0]["range"], "4..=100");
    for (bad, want) in [
        ("5..3", "--m: range '5..3' is empty (5 > 3)"),
        ("1..x", "--m: '1..x' is not a batch size"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_mxbi"))
            .args([
                "bi",
                "run",
                "--subject",
                "model:fma",
                "--family",
                "batch",
                "--k",
                "8",
                "--n",
                "4",
                "--m",
                bad,
            ])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(want) && err.lines().count() == 1, "{err}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
