//! The batch-invariance checker on CPU subjects: invariant subjects pass,
//! a shape-dispatched GEMM fails exactly across its boundary, vacuous cells
//! are flagged, and the positive controls fail as they must.

mod common;

use mxbi::bi::{check, edge_ms, CheckOptions, Family, RowPos, Verdict};
use mxbi::gemm::Problem;
use mxbi::order::InType;
use mxbi::subject::{Dispatch, Model, Subject, SubjectError};

fn opts(families: &[Family], ms: &[usize], k: usize, n: usize) -> CheckOptions {
    CheckOptions {
        families: families.to_vec(),
        ms: ms.to_vec(),
        k,
        n,
        positions: vec![],
        seed: 7,
        input: InType::F32,
        repeats: 3,
        confirm: 3,
    }
}

fn model(s: &str) -> Model {
    Model::new(s.parse().unwrap())
}

const ALL_BUT_SWITCH: [Family; 5] = [
    Family::Content,
    Family::Batch,
    Family::Position,
    Family::Permutation,
    Family::Repeat,
];

#[test]
fn a_fixed_order_passes_every_family() {
    for spec in ["fma", "fma;split=4;reduce=pairwise", "muladd;lanes=8"] {
        let r = check(
            &model(spec),
            None,
            &opts(&ALL_BUT_SWITCH, &[1, 2, 9, 33], 256, 16),
            &|_, _| {},
        )
        .unwrap();
        assert!(r.summary.valid, "{spec}: {}", r.text());
        assert_eq!(
            r.count(Verdict::Fail) + r.count(Verdict::NonDet) + r.count(Verdict::Error),
            0,
            "{spec}: {}",
            r.text()
        );
        assert!(r.count(Verdict::Pass) > 10, "{spec}: {}", r.text());
        assert_eq!(r.exit_code(true), 0);
    }
}

#[test]
fn a_dispatch_table_fails_exactly_across_its_boundary() {
    let d = Dispatch::parse(
        "t.json",
        r#"{"dispatch": [{"m_max": 16, "order": "fma"}, {"order": "fma;split=4"}]}"#,
    )
    .unwrap();
    let ms = edge_ms(&d.m_boundaries());
    assert!(ms.contains(&15) && ms.contains(&16) && ms.contains(&17));
    let ms: Vec<usize> = ms.into_iter().filter(|&m| m <= 64).collect();
    let r = check(&d, None, &opts(&[Family::Batch], &ms, 512, 8), &|_, _| {}).unwrap();
    assert!(r.summary.valid);
    for c in &r.cells {
        let want = if c.m > 16 { Verdict::Fail } else { Verdict::Pass };
        assert_eq!(c.verdict, want, "{}: {:?}", c.id, c.reason);
        if c.verdict == Verdict::Fail {
            assert!(c.diff.bytes_differing > 0 && c.diff.max_ulp > 0, "{}", c.id);
            assert!(!c.diff.first_offenders.is_empty());
        }
    }
    assert_eq!(r.exit_code(false), 1);
    // within one M the table is a fixed order: content/position/permutation hold
    let r = check(
        &d,
        None,
        &opts(
            &[Family::Content, Family::Position, Family::Permutation],
            &[4, 40],
            512,
            8,
        ),
        &|_, _| {},
    )
    .unwrap();
    assert_eq!(r.count(Verdict::Fail), 0, "{}", r.text());
}

#[test]
fn cells_where_no_order_change_can_show_are_vacuous() {
    // K = 1: one product, every order gives its rounding
    let r = check(
        &model("fma"),
        None,
        &opts(&[Family::Content, Family::Batch], &[1, 4], 1, 8),
        &|_, _| {},
    )
    .unwrap();
    assert!(r.count(Verdict::Vacuous) > 0, "{}", r.text());
    assert_eq!(r.count(Verdict::Pass), 0, "{}", r.text());
    // ... and a real failure is never hidden as vacuous
    let d = Dispatch::parse(
        "t",
        r#"{"dispatch": [{"m_max": 1, "order": "fma"}, {"order": "fma;out=bf16"}]}"#,
    )
    .unwrap();
    let r = check(&d, None, &opts(&[Family::Batch], &[1, 4], 1, 8), &|_, _| {}).unwrap();
    assert_eq!(r.count(Verdict::Fail), r.cells.len(), "{}", r.text());
}

/// A subject whose output row depends on the other rows (a per-batch
/// scale): the content family must catch it.
struct BatchScaled;

impl Subject for BatchScaled {
    fn name(&self) -> String {
        "test:batch-scaled".into()
    }
    fn run(&self, p: &Problem, rows: Option<&[usize]>) -> Result<Vec<f32>, SubjectError> {
        let mxbi::gemm::Matrix::F32(a) = p.a else {
            unreachable!()
        };
        // a scale from the whole batch (a mean of magnitudes)
        let scale = a.iter().map(|x| x.abs()).sum::<f32>() / a.len() as f32;
        let out = model("fma").run(p, rows)?;
        Ok(out.iter().map(|x| x * scale).collect())
    }
}

#[test]
fn content_coupling_fails_content_and_the_switch_family_compares_two_subjects() {
    let r = check(&BatchScaled, None, &opts(&[Family::Content], &[8], 64, 8), &|_, _| {}).unwrap();
    assert_eq!(r.count(Verdict::Fail), r.cells.len(), "{}", r.text());
    let fallback = model("fma;split=2");
    let r = check(
        &model("fma"),
        Some(&fallback),
        &opts(&[Family::Switch], &[3], 300, 8),
        &|_, _| {},
    )
    .unwrap();
    assert_eq!(r.count(Verdict::Fail), 1, "{}", r.text());
    let same = model("fma");
    let r = check(
        &model("fma"),
        Some(&same),
        &opts(&[Family::Switch], &[3], 300, 8),
        &|_, _| {},
    )
    .unwrap();
    assert_eq!(r.count(Verdict::Pass), 1, "{}", r.text());
}

/// A subject that answers differently on every call.
struct Flaky(std::sync::atomic::AtomicU32);

impl Subject for Flaky {
    fn name(&self) -> String {
        "test:flaky".into()
    }
    fn run(&self, p: &Problem, rows: Option<&[usize]>) -> Result<Vec<f32>, SubjectError> {
        let i = self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let order = if i.is_multiple_of(2) { "fma" } else { "fma;split=3" };
        model(order).run(p, rows)
    }
}

#[test]
fn a_nondeterministic_subject_is_non_det_not_fail() {
    let r = check(
        &Flaky(0.into()),
        None,
        &opts(&[Family::Content, Family::Repeat], &[4], 300, 8),
        &|_, _| {},
    )
    .unwrap();
    assert_eq!(r.count(Verdict::NonDet), r.cells.len(), "{}", r.text());
    assert_eq!(r.exit_code(false), 0);
    assert_eq!(r.exit_code(true), 1);
}

/// A subject that works for a few calls, then breaks for good.
struct DiesAfter(std::sync::atomic::AtomicU32, u32);

impl Subject for DiesAfter {
    fn name(&self) -> String {
        "test:dies".into()
    }
    fn run(&self, p: &Problem, rows: Option<&[usize]>) -> Result<Vec<f32>, SubjectError> {
        if self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed) >= self.1 {
            return Err(SubjectError::Broken {
                subject: self.name(),
                why: "the runner exited".into(),
            });
        }
        model("fma").run(p, rows)
    }
}

#[test]
fn a_broken_subject_stops_the_check() {
    let calls = std::sync::atomic::AtomicU32::new(0);
    let s = DiesAfter(calls, 4);
    let err = check(&s, None, &opts(&[Family::Content], &[4, 8, 16], 64, 8), &|_, _| {}).unwrap_err();
    assert_eq!(err, "test:dies is broken: the runner exited");
    // it stopped at the first broken call: no cell after it ran
    assert_eq!(s.0.load(std::sync::atomic::Ordering::Relaxed), 5);
    // Unsupported stays a per-cell ERROR
    let s = DiesAfter(std::sync::atomic::AtomicU32::new(0), u32::MAX);
    assert!(check(&s, None, &opts(&[Family::Content], &[4], 64, 8), &|_, _| {}).is_ok());
}

#[test]
fn positions_and_permutations_move_rows() {
    let mut o = opts(&[Family::Position], &[40], 64, 4);
    let r = check(&model("fma"), None, &o, &|_, _| {}).unwrap();
    let rows: Vec<&str> = r.cells.iter().map(|c| c.row.as_str()).collect();
    assert_eq!(rows, ["1", "2", "3", "7", "15", "31", "mid", "last"]);
    o.positions = vec![RowPos::Last];
    o.families = vec![Family::Permutation];
    let r = check(&model("fma"), None, &o, &|_, _| {}).unwrap();
    assert_eq!(r.cells.len(), 1);
    assert_eq!(r.cells[0].diff.rows, 40);
    // a subject that depends on the position is caught by both
    struct PositionBiased;
    impl Subject for PositionBiased {
        fn name(&self) -> String {
            "test:position".into()
        }
        fn run(&self, p: &Problem, rows: Option<&[usize]>) -> Result<Vec<f32>, SubjectError> {
            let all: Vec<usize> = (0..p.m).collect();
            let sel = rows.unwrap_or(&all).to_vec();
            let out = model("fma").run(p, Some(&sel))?;
            Ok(out
                .chunks(p.n)
                .zip(&sel)
                .flat_map(|(r, &i)| r.iter().map(move |x| if i % 2 == 1 { x * 1.5 } else { *x }))
                .collect())
        }
    }
    let r = check(
        &PositionBiased,
        None,
        &opts(&[Family::Position, Family::Permutation], &[40], 64, 4),
        &|_, _| {},
    )
    .unwrap();
    assert!(r
        .cells
        .iter()
        .filter(|c| c.family == Family::Permutation)
        .all(|c| c.verdict == Verdict::Fail));
    assert!(r
        .cells
        .iter()
        .any(|c| c.verdict == Verdict::Fail && c.family == Family::Position));
}

#[test]
fn every_positive_control_fails_as_it_must() {
    let fallback = model("fma");
    let fams = Family::ALL;
    for n in [1usize, 8] {
        let r = check(&model("fma"), Some(&fallback), &opts(&fams, &[1, 5], 32, n), &|_, _| {}).unwrap();
        // a one-device subject has no rank cells, hence no rank control
        // (the rank control runs on op subjects: tests/bi_matrix.rs)
        assert_eq!(r.controls.len(), fams.len() - 1, "{}", r.markdown());
        assert!(r.controls.iter().all(|c| c.family != Family::Rank));
        assert!(r.controls.iter().all(|c| c.held), "{}", r.markdown());
        assert!(r.summary.valid);
    }
}

#[test]
fn reports_are_deterministic_and_carry_the_schema() {
    let o = opts(&ALL_BUT_SWITCH, &[2, 17], 100, 8);
    let a = serde_json::to_string(&check(&model("fma;split=2"), None, &o, &|_, _| {}).unwrap()).unwrap();
    let b = serde_json::to_string(&check(&model("fma;split=2"), None, &o, &|_, _| {}).unwrap()).unwrap();
    assert_eq!(a, b);
    let v: serde_json::Value = serde_json::from_str(&a).unwrap();
    assert_eq!(v["schema"], "mxbi-bi-report/1");
    let cell = &v["cells"][0];
    for key in [
        "id",
        "family",
        "m",
        "row",
        "rank",
        "verdict",
        "bytes_differing",
        "first_offenders",
    ] {
        assert!(cell.get(key).is_some(), "missing {key} in {cell}");
    }
}

#[test]
fn bad_options_are_refused_before_any_work() {
    let base = opts(&[Family::Batch], &[1, 2], 16, 4);
    let bad = |f: &dyn Fn(&mut CheckOptions)| {
        let mut o = base.clone();
        f(&mut o);
        check(&model("fma"), None, &o, &|_, _| {}).unwrap_err()
    };
    assert!(bad(&|o| o.k = 0).contains("K = 0"));
    assert!(bad(&|o| o.ms = vec![1 << 20]).contains("out of range"));
    assert!(bad(&|o| {
        o.ms = vec![1 << 16];
        o.k = 1 << 20
    })
    .contains("M*K"));
    assert!(bad(&|o| o.families = vec![Family::Switch]).contains("--vs"));
    assert!(bad(&|o| o.repeats = 1).contains("repeats"));
    assert!(bad(&|o| o.ms = vec![1]).contains("no cell"));
    // the bf16 model refuses f32 inputs: an ERROR cell, with the reason;
    // a run where no cell could run cannot pass (exit 2)
    let r = check(&model("hopper-bf16"), None, &base, &|_, _| {}).unwrap();
    assert_eq!(r.count(Verdict::Error), r.cells.len());
    assert_eq!(r.exit_code(false), 2);
    assert!(r.cells[0]
        .reason
        .as_deref()
        .unwrap()
        .contains("not exactly representable"));
    let mut o = base.clone();
    o.input = InType::Bf16;
    let r = check(&model("hopper-bf16"), None, &o, &|_, _| {}).unwrap();
    assert_eq!(r.count(Verdict::Error), 0, "{}", r.text());
}

mod cli {
    use super::common;
    use std::process::Command;

    fn mxbi(args: &[&str]) -> (i32, String, String) {
        let out = Command::new(env!("CARGO_BIN_EXE_mxbi")).args(args).output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// The cell count of the summary line (`N cells: ...`).
    fn cells(out: &str) -> usize {
        let line = out.lines().last().unwrap();
        line.split_whitespace().next().unwrap().parse().unwrap()
    }

    #[test]
    fn exit_codes_follow_the_verdicts() {
        let d = common::TempDir::new("bi-codes");
        let json = d.join("r.json");
        let md = d.join("r.md");
        let (code, out, err) = mxbi(&[
            "bi",
            "run",
            "--subject",
            "model:fma;split=2",
            "--family",
            "batch,content,repeat",
            "--m",
            "1,9,33",
            "--k",
            "128",
            "--n",
            "8",
            "--json",
            json.to_str().unwrap(),
            "--markdown",
            md.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{out}{err}");
        assert!(out.contains("0 BI_FAIL"), "{out}");
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        assert_eq!(v["schema"], "mxbi-bi-report/1");
        assert!(std::fs::read_to_string(&md).unwrap().contains("| control |"));

        let table = d.join("t.json");
        std::fs::write(
            &table,
            r#"{"dispatch": [{"m_max": 16, "order": "fma"}, {"order": "fma;split=4"}]}"#,
        )
        .unwrap();
        let subject = format!("dispatch:{}", table.display());
        let junit = d.join("r.xml");
        let (code, out, _) = mxbi(&[
            "bi",
            "run",
            "--subject",
            &subject,
            "--family",
            "batch",
            "--k",
            "256",
            "--n",
            "8",
            "--junit",
            junit.to_str().unwrap(),
        ]);
        assert_eq!(code, 1, "{out}");
        assert!(out.contains("BI_FAIL  batch/m=17/"), "{out}");
        // JUnit: one test case per cell plus the control, a failure per BI_FAIL
        let xml = std::fs::read_to_string(&junit).unwrap();
        let fails = out.lines().filter(|l| l.starts_with("BI_FAIL")).count();
        assert!(fails > 0);
        assert_eq!(xml.matches("<testcase ").count(), cells(&out) + 1, "{xml}");
        assert_eq!(xml.matches("<failure ").count(), fails, "{xml}");
        assert!(
            xml.contains(r#"testsuite name="bi.batch""#) && xml.contains("bi.positive-controls"),
            "{xml}"
        );
        assert!(
            !out.contains("batch/m=16/"),
            "M = 16 still takes the first entry: {out}"
        );
    }

    #[test]
    fn a_run_where_no_cell_can_run_exits_2_and_strict_fails_on_errors() {
        let (code, _, err) = mxbi(&[
            "bi",
            "run",
            "--subject",
            "model:mma(k=4294967295,f=25)",
            "--family",
            "batch",
            "--m",
            "1,2",
            "--k",
            "16",
            "--n",
            "4",
        ]);
        assert_eq!(code, 2, "{err}");
        assert!(err.contains("no cell could run") && err.contains("MAX_TREE"), "{err}");
        // no entry matches M = 3: those cells are errors, the M = 2 ones run
        let d = common::TempDir::new("bi-strict");
        let table = d.join("t.json");
        std::fs::write(&table, r#"{"dispatch": [{"m_max": 2, "order": "hopper-bf16"}]}"#).unwrap();
        let subject = format!("dispatch:{}", table.display());
        let args = [
            "bi",
            "run",
            "--subject",
            &subject,
            "--family",
            "content",
            "--m",
            "1,2,3",
            "--k",
            "32",
            "--n",
            "4",
        ];
        let (code, out, _) = mxbi(&args);
        assert_eq!(code, 0, "{out}");
        assert!(out.contains("ERROR"), "{out}");
        let mut strict = args.to_vec();
        strict.push("--strict");
        assert_eq!(mxbi(&strict).0, 1);
    }

    #[test]
    fn bad_input_is_one_line_and_exit_2_with_nothing_written() {
        let d = common::TempDir::new("bi-bad");
        let json = d.join("r.json");
        let j = json.to_str().unwrap();
        let missing = d.join("missing.json");
        let missing_subject = format!("dispatch:{}", missing.display());
        let bad_table = d.join("bad.json");
        std::fs::write(&bad_table, r#"{"dispatch": [{"order": "fma;split=0"}]}"#).unwrap();
        let bad_subject = format!("dispatch:{}", bad_table.display());
        for (args, needle) in [
            (vec!["--subject", "model:fma", "--family", "ranks"], "unknown family"),
            (
                vec!["--subject", "model:fma", "--family", "rank"],
                "needs a subject with world size 2",
            ),
            (vec!["--subject", "op:rmsnorm", "--family", "batch"], "not a GEMM"),
            (vec!["--subject", "model:fma", "--matrix", "seed000"], "takes no knobs"),
            (
                vec!["--subject", "model:fma", "--family", "batch", "--shard", "2/2"],
                "--shard",
            ),
            (vec!["--subject", "fma", "--family", "batch"], "KIND:ARG"),
            (vec!["--subject", "gpu:fma", "--family", "batch"], "unknown kind"),
            // a GPU kind on a machine without one (or a build without the feature)
            (vec!["--subject", "cuda:fma", "--family", "batch"], "GPU"),
            (
                vec!["--subject", "cublaslt:f16", "--family", "batch"],
                "cublaslt:f32|bf16",
            ),
            (vec!["--subject", "model:fma;split=0", "--family", "batch"], "split"),
            (vec!["--subject", &missing_subject, "--family", "batch"], "missing.json"),
            (
                vec!["--subject", &bad_subject, "--family", "batch"],
                "dispatch[0].order",
            ),
            (vec!["--subject", "model:fma", "--family", "batch", "--m", "1,x"], "--m"),
            (
                vec!["--subject", "model:fma", "--family", "batch", "--m", "99999999"],
                "out of range",
            ),
            (vec!["--subject", "model:fma", "--family", "switch"], "--vs"),
            (
                vec!["--subject", "model:fma", "--family", "batch", "--rows", "middle"],
                "--rows",
            ),
            (
                vec!["--subject", "model:fma", "--family", "batch", "--input", "e9m9"],
                "input type",
            ),
        ] {
            let mut full = vec!["bi", "run", "--json", j];
            if !args.contains(&"--matrix") {
                full.extend(["--k", "16", "--n", "4"]);
            }
            full.extend(args.iter().copied());
            let (code, out, err) = mxbi(&full);
            assert_eq!(code, 2, "{full:?}: {out}{err}");
            assert_eq!(err.lines().count(), 1, "{full:?}: {err}");
            assert!(err.contains(needle), "{full:?}: {err}");
            assert!(!err.contains("panicked"));
            assert!(!json.exists(), "{full:?} wrote a report");
        }
    }
}
