//! The witness check (`bi::witness`): dispatch tables whose bf16-output
//! orders change at an M boundary fail from that M with a witness even on
//! the plain inputs, which cannot show it (power below the threshold), and
//! cells below never fail; a subject whose declared orders differ but whose
//! bytes do not is a finding naming the order it matches; undeclared
//! orders are identified from bytes; `mxbi bi run --witness`.

use mxbi::bi::witness::{apply, CellSides, Known, Outcome, WitnessCheck, WitnessMode, Witnesser};
use mxbi::bi::{check_shard, check_shard_content, CheckOptions, Content, Family, Report, RowPos, Rows, Verdict};
use mxbi::gemm::Problem;
use mxbi::order::{InType, Order};
use mxbi::subject::{Dispatch, Model, Subject, SubjectError};
use std::process::Command;

const TABLE_1: &str = r#"{"dispatch": [{"m_max": 16, "order": "fma;out=bf16"}, {"order": "fma;split=4;out=bf16"}]}"#;
const TABLE_2: &str = r#"{"dispatch": [{"m_max": 31, "order": "fma;split=8;reduce=pairwise;out=bf16"}, {"order": "fma;split=32;out=bf16"}]}"#;

fn opts(ms: &[usize], k: usize, n: usize) -> CheckOptions {
    CheckOptions {
        families: vec![Family::Batch, Family::Position, Family::Content],
        ms: ms.to_vec(),
        k,
        n,
        positions: vec![],
        seed: 1,
        input: InType::F32,
        repeats: 2,
        confirm: 3,
    }
}

/// The check on the plain inputs (the drawing before `separating`: the
/// tables' order changes do not show on them, so any failure is the
/// witness's), then the witness check.
fn checked(subject: &dyn Subject, o: &CheckOptions, mode: WitnessMode) -> Report {
    let mut r = check_shard_content(subject, None, o, None, Content::plain(), &|_, _| {}).unwrap();
    let rows = Rows::with_content(o.seed, o.k, o.n, o.input, Content::plain());
    let check = WitnessCheck {
        mode,
        search: Default::default(),
    };
    apply(&mut r, subject, o, &rows, check).unwrap();
    r
}

/// Batch cells from `first` on fail with a witness; every other cell passes.
fn fails_exactly_from(r: &Report, first: usize) {
    assert!(r.summary.valid);
    for c in &r.cells {
        let w = r.witnesses.iter().find(|w| w.cell == c.id);
        if c.family == Family::Batch && c.m >= first {
            assert_eq!(c.verdict, Verdict::Fail, "{}", c.id);
            let w = w.unwrap_or_else(|| panic!("{}: no witness", c.id));
            assert_eq!(w.outcome, Outcome::Fail, "{}: {}", c.id, w.finding);
            assert_eq!(w.base.as_ref().unwrap().known, Known::Declared);
            let info = w.witness.as_ref().unwrap();
            assert!(info.subject_columns.unwrap() > 0);
            assert_eq!(
                info.base_bits.as_deref(),
                Some(info.base_order_bits.as_str()),
                "{}",
                c.id
            );
            assert_eq!(info.var_bits.as_deref(), Some(info.var_order_bits.as_str()), "{}", c.id);
            assert!(c.reason.as_deref().unwrap_or("").starts_with("witness: "), "{}", c.id);
            // the cell's diff is the subject's rows on the witness
            assert_eq!(Some(&c.diff), w.diff.as_ref(), "{}", c.id);
            assert!(
                c.diff.bytes_differing > 0 && !c.diff.first_offenders.is_empty(),
                "{}",
                c.id
            );
        } else {
            // no power on plain inputs: VACUOUS, never a failure
            assert!(
                matches!(c.verdict, Verdict::Pass | Verdict::Vacuous),
                "{}: {:?}",
                c.id,
                c.reason
            );
            assert!(w.is_none(), "{}: {w:?}", c.id);
        }
    }
}

#[test]
fn table_1_fails_from_m17_with_a_witness() {
    let d = Dispatch::parse("t1.json", TABLE_1).unwrap();
    let r = checked(
        &d,
        &opts(&[1, 2, 8, 9, 15, 16, 17, 18, 32, 33, 64, 65], 1024, 64),
        WitnessMode::Declared,
    );
    fails_exactly_from(&r, 17);
    // baseline M = 1: the three positions are one row, one cell per M
    assert_eq!(r.count(Verdict::Fail), 6);
}

#[test]
fn table_2_fails_from_m32_with_a_witness() {
    let d = Dispatch::parse("t2.json", TABLE_2).unwrap();
    let r = checked(&d, &opts(&[1, 2, 30, 31, 32, 33, 40], 4096, 256), WitnessMode::Declared);
    fails_exactly_from(&r, 32);
    assert_eq!(r.count(Verdict::Fail), 3);
}

/// Declares the table's orders but always computes `fma;out=bf16`.
struct Liar(Dispatch);

impl Subject for Liar {
    fn name(&self) -> String {
        "liar".into()
    }
    fn run(&self, p: &Problem, rows: Option<&[usize]>) -> Result<Vec<f32>, SubjectError> {
        Model::new("fma;out=bf16".parse().unwrap()).run(p, rows)
    }
    fn declared_order(&self, m: usize, k: usize, n: usize) -> Option<Order> {
        self.0.declared_order(m, k, n)
    }
}

#[test]
fn declared_orders_that_the_bytes_do_not_follow_are_a_finding() {
    let liar = Liar(Dispatch::parse("t1.json", TABLE_1).unwrap());
    let r = checked(&liar, &opts(&[4, 16, 17], 1024, 64), WitnessMode::Declared);
    assert_eq!(r.count(Verdict::Fail), 0);
    let held: Vec<_> = r.witnesses.iter().filter(|w| w.cell.starts_with("batch/")).collect();
    assert_eq!(held.len(), 3, "{:?}", r.witnesses);
    for w in held {
        assert_eq!(w.outcome, Outcome::Held, "{w:?}");
        assert_eq!(w.matches.as_deref(), Some("baseline"));
        assert!(w.finding.ends_with("they match order fma;out=bf16"), "{}", w.finding);
        assert_eq!(w.witness.as_ref().unwrap().subject_columns, Some(0));
    }
}

/// A dispatch table that declares nothing: its orders must be identified.
struct Hidden(Dispatch);

impl Subject for Hidden {
    fn name(&self) -> String {
        "hidden".into()
    }
    fn run(&self, p: &Problem, rows: Option<&[usize]>) -> Result<Vec<f32>, SubjectError> {
        self.0.run(p, rows)
    }
}

#[test]
fn undeclared_orders_are_identified_from_bytes() {
    let t = r#"{"dispatch": [{"m_max": 16, "order": "fma"}, {"order": "fma;split=4"}]}"#;
    let hidden = Hidden(Dispatch::parse("t.json", t).unwrap());
    let o = opts(&[1, 16, 17], 256, 16);
    // declared only: nothing is known, nothing is checked
    assert!(checked(&hidden, &o, WitnessMode::Declared).witnesses.is_empty());
    let r = checked(&hidden, &o, WitnessMode::Identify);
    let w = r
        .witnesses
        .iter()
        .find(|w| w.cell == "batch/m=17/k=256/n=16/row=0")
        .unwrap_or_else(|| panic!("{:?}", r.witnesses));
    assert_eq!(w.outcome, Outcome::Fail);
    let (b, v) = (w.base.as_ref().unwrap(), w.var.as_ref().unwrap());
    assert_eq!((b.order.as_str(), b.known), ("fma", Known::Identified));
    assert_eq!((v.order.as_str(), v.known), ("fma;split=4", Known::Identified));
    // the model declares one order at every M: nothing to witness
    let model = Model::new("fma;split=4;out=bf16".parse().unwrap());
    let r = checked(&model, &o, WitnessMode::Identify);
    assert!(r.witnesses.is_empty() && r.count(Verdict::Fail) == 0);
}

#[test]
fn sides_follow_the_checkers_planning() {
    let o = opts(&[4, 9], 64, 8);
    let d = Dispatch::parse("t1.json", TABLE_1).unwrap();
    let r = check_shard(&d, None, &o, None, &|_, _| {}).unwrap();
    let sides = |id: &str| CellSides::of(r.cells.iter().find(|c| c.id == id).unwrap(), &o).unwrap();
    let s = sides("batch/m=9/k=64/n=8/row=last");
    assert_eq!((s.base.m, s.base.row, s.var.m, s.var.row), (4, 3, 9, 3));
    let s = sides("position/m=9/k=64/n=8/row=7");
    assert_eq!((s.base.m, s.base.row, s.var.m, s.var.row), (9, 0, 9, 7));
    let s = sides("content/m=9/k=64/n=8/row=mid");
    assert_eq!((s.base.row, s.base.set, s.var.row, s.var.set), (4, 0, 4, 1));
    let _ = RowPos::Mid;
    // one witnesser answers a cell directly
    let rows = Rows::new(1, 64, 8, InType::F32);
    let check = WitnessCheck {
        mode: WitnessMode::Declared,
        search: Default::default(),
    };
    let mut w = Witnesser::new(&d, &rows, check);
    let s = sides("position/m=9/k=64/n=8/row=7");
    assert_eq!(w.check_cell("x", &s).unwrap().outcome, Outcome::SameOrder);
}

fn mxbi(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_mxbi")).args(args).output().unwrap()
}

#[test]
fn cli_witness_flag() {
    let dir = std::env::temp_dir().join(format!("mxbi-bi-witness-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let table = dir.join("t1.json");
    std::fs::write(&table, TABLE_1).unwrap();
    let json = dir.join("r.json");
    let subject = format!("dispatch:{}", table.display());
    let args = |w: &'static str| -> Vec<String> {
        let mut v: Vec<String> = ["bi", "run", "--subject", &subject, "--family", "batch,position,content"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        v.extend(["--m", "1,16,17,33", "--k", "1024", "--n", "64", "--json"].map(String::from));
        v.push(json.display().to_string());
        if !w.is_empty() {
            v.push(w.to_string());
        }
        v
    };
    let run = |w| {
        let a = args(w);
        mxbi(&a.iter().map(|s| s.as_str()).collect::<Vec<_>>())
    };
    // the default (auto) checks declared orders
    for w in ["", "--witness", "--witness=auto"] {
        let o = run(w);
        assert_eq!(o.status.code(), Some(1), "{w}: {}", String::from_utf8_lossy(&o.stderr));
        let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let ws = r["witnesses"].as_array().unwrap();
        assert_eq!(ws.len(), 2, "{w}");
        assert!(ws
            .iter()
            .all(|x| x["outcome"] == "fail" && x["base"]["known"] == "declared"));
        assert_eq!(r["summary"]["verdicts"]["BI_FAIL"], 2);
    }
    let o = run("--witness=off");
    assert_ne!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert!(r.get("witnesses").is_none());
    let o = run("--witness=maybe");
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("--witness: unknown witness mode 'maybe'"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
