//! Power (docs/BI.md, "Power"): the default inputs separate the orders of
//! the explainer's family in every output format, the plain drawing does
//! not in bf16, narrow-output dispatch tables fail exactly at their
//! boundary, and cells whose inputs cannot separate orders are `VACUOUS`,
//! multi-row cells included.

use mxbi::bi::power::{self, THRESHOLD};
use mxbi::bi::{check, check_content, CheckOptions, Content, ContentClass, Family, Report, RowPos, Rows, Verdict};
use mxbi::format::Format;
use mxbi::order::InType;
use mxbi::subject::{Dispatch, Model};

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

/// The power of the target row of `content` in format `f`.
fn target_power(content: Content, ty: InType, k: usize, n: usize, f: Option<Format>) -> f64 {
    let rows = Rows::with_content(7, k, n, ty, content);
    let outs = power::evaluate(&power::orders(ty, k, 7), &rows.row(0), &rows.b, k, n);
    power::power_of(&outs, f).value
}

const OUTPUTS: [Option<Format>; 5] = [
    None,
    Some(Format::BF16),
    Some(Format::F16),
    Some(Format::E4M3),
    Some(Format::E5M2),
];

#[test]
fn the_default_inputs_have_power_in_every_output_format() {
    for ty in InType::ALL {
        for k in [64, 1024, 4096] {
            for f in OUTPUTS {
                let p = target_power(Content::default(), ty, k, 64, f);
                assert!(p >= THRESHOLD, "{} inputs, K = {k}, {f:?} output: power {p}", ty.name());
            }
        }
    }
    // the top of the range, once
    let p = target_power(Content::default(), InType::Bf16, 16384, 64, Some(Format::BF16));
    assert!(p >= THRESHOLD, "bf16 K = 16384: {p}");
}

#[test]
fn plain_inputs_have_no_power_in_bf16() {
    // what the checker drew before: random values whose sums differ in the
    // last f32 bits only
    for k in [256, 4096] {
        let p = target_power(Content::plain(), InType::F32, k, 64, Some(Format::BF16));
        assert!(p < 0.5, "K = {k}: {p}");
        assert!(target_power(Content::plain(), InType::F32, k, 64, None) > 0.9);
    }
}

#[test]
fn equivalent_spellings_are_one_order() {
    // empty split parts (+0) and commuted additions compute the same value
    let key = |s: &str, k: usize| power::computation_key(&s.parse::<mxbi::order::Order>().unwrap().compile(k), true);
    assert_eq!(key("fma;split=40", 64), key("fma;split=47", 64));
    assert_eq!(key("fma;split=2;reduce=pairwise", 64), key("fma;split=2", 64));
    assert_ne!(key("fma;split=4", 64), key("fma;split=4;reduce=pairwise", 64));
    assert_ne!(key("fma;split=32", 64), key("fma;split=33", 64) ^ 1);
    // muladd is fma only when products are exact
    let order = |s: &str| s.parse::<mxbi::order::Order>().unwrap().compile(64);
    assert_eq!(
        power::computation_key(&order("muladd;split=4"), true),
        power::computation_key(&order("fma;split=4"), true)
    );
    assert_ne!(
        power::computation_key(&order("muladd;split=4"), false),
        power::computation_key(&order("fma;split=4"), false)
    );
}

fn table(json: &str) -> Dispatch {
    Dispatch::parse("table", json).unwrap()
}

/// The M values of the failing cells of a report.
fn failing_ms(r: &Report) -> Vec<usize> {
    let mut v: Vec<usize> = r
        .cells
        .iter()
        .filter(|c| c.verdict == Verdict::Fail)
        .map(|c| c.m)
        .collect();
    v.dedup();
    v
}

#[test]
fn narrow_output_tables_fail_exactly_from_their_boundary() {
    let fams = [Family::Batch, Family::Position, Family::Content];
    let ms = mxbi::bi::edge_ms(&[]);
    for (json, k, n, first) in [
        (
            r#"{"dispatch": [{"m_max": 16, "order": "fma;out=bf16"}, {"order": "fma;split=4;out=bf16"}]}"#,
            1024,
            64,
            17,
        ),
        (
            r#"{"dispatch": [{"m_max": 31, "order": "fma;split=8;reduce=pairwise;out=bf16"}, {"order": "fma;split=32;out=bf16"}]}"#,
            4096,
            256,
            32,
        ),
    ] {
        let r = check(&table(json), None, &opts(&fams, &ms, k, n), &|_, _| {}).unwrap();
        let expected: Vec<usize> = ms.iter().copied().filter(|&m| m >= first).collect();
        assert_eq!(failing_ms(&r), expected, "{json}");
        // every failure is a batch cell: rows never depend on their neighbours
        assert!(r
            .cells
            .iter()
            .filter(|c| c.verdict == Verdict::Fail)
            .all(|c| c.family == Family::Batch));
        assert_eq!(r.count(Verdict::Vacuous), 0, "{json}");
        assert!(r
            .cells
            .iter()
            .all(|c| c.power.as_ref().is_some_and(|p| p.output == "bf16")));
    }
}

#[test]
fn cells_on_inputs_without_power_are_vacuous_multi_row_cells_too() {
    // +-1 everywhere: every product and partial sum is an exact integer, so
    // every order gives the same bytes
    let ones = Content {
        class: ContentClass::Plain,
        exp_span: Some(0),
        mant_bits: Some(0),
        ..Content::default()
    };
    let fams = [Family::Content, Family::Permutation, Family::Repeat];
    let subject = Model::new("fma;split=4".parse().unwrap());
    let r = check_content(&subject, None, &opts(&fams, &[2, 9], 64, 16), ones, &|_, _| {}).unwrap();
    assert!(!r.cells.is_empty());
    for c in &r.cells {
        assert_eq!(c.verdict, Verdict::Vacuous, "{}", c.id);
        assert!(c.power.as_ref().unwrap().value < THRESHOLD);
        assert!(c.reason.as_deref().unwrap().starts_with("power "), "{:?}", c.reason);
    }
    // position=all compares every row of one batch with the row before it
    let mut o = opts(&[Family::Position], &[9], 64, 16);
    o.positions = vec![RowPos::All];
    let r = check_content(&subject, None, &o, ones, &|_, _| {}).unwrap();
    let all = r.cells.iter().find(|c| c.row == "all").unwrap();
    assert_eq!(all.verdict, Verdict::Vacuous);
    // the same cells on the default inputs pass
    let r = check(&subject, None, &opts(&fams, &[2, 9], 64, 16), &|_, _| {}).unwrap();
    assert!(
        r.cells.iter().all(|c| c.verdict == Verdict::Pass),
        "{}",
        r.summary_line()
    );
}

#[test]
fn power_is_in_every_report_format() {
    let subject = Model::new("fma;out=bf16".parse().unwrap());
    let r = check(&subject, None, &opts(&[Family::Batch], &[1, 8], 256, 16), &|_, _| {}).unwrap();
    let cell = &r.cells[0];
    let p = cell.power.as_ref().unwrap();
    assert_eq!(p.output, "bf16");
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["cells"][0]["power"]["output"], "bf16");
    assert!(json["cells"][0]["power"]["value"].as_f64().unwrap() >= THRESHOLD);
    let md = r.markdown();
    assert!(md.contains("| power |"), "{md}");
    assert!(md.contains(&format!("{:.3} (bf16)", p.value)), "{md}");
    let junit = r.junit(false);
    assert!(junit.contains(r#"<property name="power""#), "{junit}");
    assert!(
        junit.contains(r#"<property name="power_output" value="bf16"/>"#),
        "{junit}"
    );
}

/// An FP8-style kernel: A scaled by 448 / the batch's amax, rounded to f16,
/// multiplied, scaled back. Its rows depend on the other rows' largest
/// value.
struct AmaxScaled;

impl mxbi::subject::Subject for AmaxScaled {
    fn name(&self) -> String {
        "test:amax-scaled".into()
    }

    fn run(&self, p: &mxbi::gemm::Problem, rows: Option<&[usize]>) -> Result<Vec<f32>, mxbi::subject::SubjectError> {
        let mxbi::gemm::Matrix::F32(a) = p.a else {
            unreachable!("the checker hands f32 values")
        };
        let amax = a.iter().fold(0f32, |m, x| m.max(x.abs()));
        let s = 448.0 / amax;
        let q: Vec<f32> = a.iter().map(|x| half::f16::from_f32(x * s).to_f32()).collect();
        let scaled = mxbi::gemm::Problem {
            a: mxbi::gemm::Matrix::F32(&q),
            ..*p
        };
        let out = Model::new("fma".parse().unwrap()).run(&scaled, rows)?;
        Ok(out.iter().map(|x| x / s).collect())
    }
}

#[test]
fn a_kernel_scaled_by_the_batch_amax_fails_the_content_family() {
    // the separating content's big values are shared powers of two times a
    // factor per row: other rows move the batch's amax
    let r = check(
        &AmaxScaled,
        None,
        &opts(&[Family::Content], &[2, 9], 1024, 64),
        &|_, _| {},
    )
    .unwrap();
    assert!(r.count(Verdict::Fail) >= 4, "{}", r.summary_line());
}
