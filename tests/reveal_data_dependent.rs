//! Data-dependent orders (docs/EXPLAIN.md, "Data-dependent orders"): a
//! subject whose order is chosen from its inputs is refused by `reveal`
//! (`RevealError::DataDependent`, naming the probes whose repeated answers
//! changed), never reported as a tree; through `mxbi reveal gen|solve` it
//! exits 1 with a one-line headline and the changed answers. Static orders
//! still reveal, with the repeats counted among the launches.

mod common;

use common::reveal_runner::pending_jobs;
use common::TempDir;
use mxbi::explain::{self, RevealError, RevealOptions};
use mxbi::gemm::{gemm_array, BLayout, Matrix, Problem};
use mxbi::io::{load_tensor, write_tensor, TensorData};
use mxbi::order::{InType, Order};
use mxbi::subject::{Subject, SubjectError};
use ndarray::{Array2, ArrayView2, Axis};
use std::path::Path;
use std::process::{Command, Output};

fn order(s: &str) -> Order {
    s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
}

fn opts(m: usize, k: usize, n: usize) -> RevealOptions {
    RevealOptions {
        m,
        k,
        n,
        input: InType::F32,
        seed: 7,
        verify_rows: 4,
    }
}

fn opts_f16(m: usize, k: usize, n: usize) -> RevealOptions {
    RevealOptions {
        input: InType::F16,
        ..opts(m, k, n)
    }
}

/// Which input decides the order.
#[derive(Clone, Copy)]
enum Rule {
    /// Row i of C: `large` when the sum of |A[i, :]| exceeds the threshold
    /// (a kernel that switches to split-K for large rows).
    RowMagnitude(f64),
    /// Column j of C: `large` when column j of B holds an exact zero (a
    /// kernel that takes a sparse path).
    ZeroInColumn,
}

/// A subject whose order depends on the data (one of two orders per
/// output element, chosen by `rule`).
struct DataDependent {
    small: Order,
    large: Order,
    rule: Rule,
}

impl DataDependent {
    /// `small` below the rule's line, `large` above it.
    fn new(small: &str, large: &str, rule: Rule) -> DataDependent {
        DataDependent {
            small: order(small),
            large: order(large),
            rule,
        }
    }

    /// C for f32 operands A [M, K], B [K, N].
    fn c(&self, a: ArrayView2<f32>, b: ArrayView2<f32>) -> Array2<f32> {
        let p = Problem::from_arrays(a, b, BLayout::Kn).unwrap();
        let s = gemm_array(&self.small, &p, None).unwrap();
        let l = gemm_array(&self.large, &p, None).unwrap();
        Array2::from_shape_fn(s.dim(), |(i, j)| {
            let large = match self.rule {
                Rule::RowMagnitude(t) => a.row(i).iter().map(|x| x.abs() as f64).sum::<f64>() > t,
                Rule::ZeroInColumn => b.column(j).iter().any(|&x| x == 0.0),
            };
            if large {
                l[(i, j)]
            } else {
                s[(i, j)]
            }
        })
    }
}

impl Subject for DataDependent {
    fn name(&self) -> String {
        "data-dependent".into()
    }
    fn run(&self, p: &Problem, rows: Option<&[usize]>) -> Result<Vec<f32>, SubjectError> {
        let (Matrix::F32(a), Matrix::F32(b)) = (p.a, p.b) else {
            unreachable!("reveal of f32 inputs passes f32 operands")
        };
        let a = ArrayView2::from_shape((p.m, p.k), a).unwrap();
        let b = ArrayView2::from_shape((p.k, p.n), b).unwrap();
        let c = self.c(a, b);
        Ok(match rows {
            None => c.into_iter().collect(),
            Some(r) => c.select(Axis(0), r).into_iter().collect(),
        })
    }
}

fn refused(s: &DataDependent, o: RevealOptions) -> Box<explain::Repeats> {
    match explain::reveal(s, o) {
        Err(RevealError::DataDependent(rep)) => rep,
        Ok(r) => panic!("a data-dependent subject reported as a tree:\n{r}"),
        Err(e) => panic!("refused for another reason: {e}"),
    }
}

/// Rows of all units (the probes') give a row sum of K = 64 under the
/// threshold of 128, so the probes alone see one static tree (`fma`);
/// the repeat that scales the other operand (A) by 2^4 crosses the
/// threshold and the counts change to `fma;split=4`'s.
#[test]
fn reveal_refuses_an_order_chosen_by_row_magnitude() {
    let s = DataDependent::new("fma", "fma;split=4", Rule::RowMagnitude(128.0));
    let rep = refused(&s, opts(4, 64, 32));
    assert!(
        rep.changed_probes > 0 && rep.changed_count >= rep.changed_probes,
        "{rep:?}"
    );
    assert!(!rep.changed.is_empty() && rep.changed.len() <= 16, "{rep:?}");
    // only the repeat that makes the rows large changes the answers
    assert!(rep.changed.iter().all(|c| c.repeat == "rescaled down"), "{rep:?}");
    for c in &rep.changed {
        // the counts are fma;split=4's: the static tree would have kept them
        assert_ne!(c.after, Some(c.before), "{c:?}");
        assert!(c.after.is_some(), "{c:?}");
    }
    let e = RevealError::DataDependent(rep).to_string();
    assert!(e.starts_with("the order depends on the data"), "{e}");
    assert!(!e.contains('\n'), "one line: {e}");
}

/// The zero-in-column rule: probes hold no zeros, the rescaled repeats
/// neither, only the refill (swamped units set to 0 or half a unit)
/// reaches the other order.
#[test]
fn reveal_refuses_an_order_chosen_by_zeros_in_b() {
    let s = DataDependent::new("fma", "fma;split=2", Rule::ZeroInColumn);
    let rep = refused(&s, opts(4, 64, 32));
    assert!(rep.changed_probes > 0, "{rep:?}");
    assert!(rep.changed.iter().all(|c| c.repeat == "refilled"), "{rep:?}");
}

/// The controls: the same rules choosing between one order twice reveal the
/// order, with the repeats run (at most 3 launches more) and every
/// repeated answer the same.
#[test]
fn static_orders_pass_the_repeats() {
    for rule in [Rule::RowMagnitude(128.0), Rule::ZeroInColumn] {
        let s = DataDependent::new("fma;split=2", "fma;split=2", rule);
        let r = explain::reveal(&s, opts(4, 64, 32)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.order, Some(order("fma;split=2")), "{r}");
        assert_eq!(r.repeats.probes, 32, "one launch of 32 columns holds 32 probes");
        assert_eq!(r.repeats.repeats.len(), 3, "{:?}", r.repeats);
        assert_eq!(r.repeats.answers, 3 * 4 * 32);
        assert_eq!(r.repeats.changed_count, 0);
        assert!(r.to_string().contains("the order does not depend on the data"), "{r}");
    }
}

/// Where a launch has room for two sets of the sampled probes (N = 128,
/// 64 probes), the refill shares the launch of *rescaled up* (its units,
/// fills and `+-B` x2^4 against the other operand's x2^-4): two repeat
/// launches, three variants, and each rule still caught by its variant.
#[test]
fn the_refill_sharing_a_launch_still_refuses_and_passes() {
    let s = DataDependent::new("fma", "fma;split=2", Rule::ZeroInColumn);
    let rep = refused(&s, opts(4, 64, 128));
    assert!(rep.changed_probes > 0, "{rep:?}");
    assert!(rep.changed.iter().all(|c| c.repeat == "refilled"), "{rep:?}");
    // the other order still sums whole units, read with the refill's unit
    // (1: f32 lines' units of 1 x2^4 against the other operand's 1 x2^-4)
    assert!(
        rep.changed.iter().all(|c| c.after.map(|x| x as f32) == Some(c.value)),
        "{rep:?}"
    );
    // every listed probe is counted among the changed ones
    let listed: std::collections::HashSet<(u32, u32)> = rep.changed.iter().map(|c| (c.p, c.q)).collect();
    assert!(listed.len() > 2 && rep.changed_probes >= listed.len(), "{rep:?}");
    assert!(
        rep.repeats[1].starts_with("refilled") && rep.repeats[1].contains("in the launch of rescaled up"),
        "{:?}",
        rep.repeats
    );
    let s = DataDependent::new("fma", "fma;split=4", Rule::RowMagnitude(128.0));
    let rep = refused(&s, opts(4, 64, 128));
    assert!(rep.changed.iter().all(|c| c.repeat == "rescaled down"), "{rep:?}");
    for rule in [Rule::RowMagnitude(128.0), Rule::ZeroInColumn] {
        let s = DataDependent::new("fma;split=2", "fma;split=2", rule);
        let r = explain::reveal(&s, opts(4, 64, 128)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.order, Some(order("fma;split=2")), "{r}");
        assert_eq!(r.repeats.probes, 64, "{:?}", r.repeats);
        assert_eq!(r.repeats.repeats.len(), 3, "{:?}", r.repeats);
        assert_eq!(r.repeats.answers, 2 * 4 * 128, "two launches");
        assert_eq!(r.repeats.changed_count, 0);
    }
}

/// f16 lines never share a launch: their *rescaled up* doubles the other
/// operand, so the refill would need units of half f16's least subnormal
/// (not an f16); three launches even where a launch holds the sample twice.
#[test]
fn f16_repeats_keep_a_launch_each() {
    let s = DataDependent::new("fma;split=2", "fma;split=2", Rule::ZeroInColumn);
    let r = explain::reveal(&s, opts_f16(4, 64, 128)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.order, Some(order("fma;split=2")), "{r}");
    assert_eq!((r.repeats.probes, r.repeats.launches), (64, 3), "{:?}", r.repeats);
    assert_eq!(r.repeats.changed_count, 0, "{:?}", r.repeats);
}

/// Lines in rows of A (M > N): the repeats' rows are copied from lines
/// built once; a static order passes all three variants in two launches.
#[test]
fn repeats_on_rows_pass_a_static_order() {
    for rule in [Rule::RowMagnitude(128.0), Rule::ZeroInColumn] {
        let s = DataDependent::new("fma;split=2", "fma;split=2", rule);
        let r = explain::reveal(&s, opts(128, 64, 4)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.order, Some(order("fma;split=2")), "{r}");
        assert_eq!((r.repeats.probes, r.repeats.launches), (64, 2), "{:?}", r.repeats);
        assert_eq!(r.repeats.answers, 2 * 128 * 4);
        assert_eq!(r.repeats.changed_count, 0, "{:?}", r.repeats);
    }
}

/// f16 inputs are probed on lines too (units of 2^-24 against 2^15, the
/// other operand all ones), with their own rescales (`+-B` halved, the
/// other operand x2 or not): the probes' rows of ones sum to K = 64, under
/// the threshold of 100; only *rescaled up* (rows of twos, 128) crosses it.
/// Zeros in B are reached by the refill, and the static controls pass
/// every repeat.
#[test]
fn f16_lines_refuse_data_dependent_orders_and_pass_static_ones() {
    let s = DataDependent::new("fma", "fma;split=4", Rule::RowMagnitude(100.0));
    let rep = refused(&s, opts_f16(4, 64, 32));
    assert!(rep.changed_probes > 0, "{rep:?}");
    assert!(rep.changed.iter().all(|c| c.repeat == "rescaled up"), "{rep:?}");
    // of the probes, only (0, 32) counts otherwise under `fma;split=2`
    // once its swamped units are zeros (the others lose the same units,
    // or zeros in their place); N = 64 asks the whole first level in one
    // launch and repeats every probe (N = 32 asks 32 of the first level,
    // then part 1's neighbour pairs, and repeats a sample of 32 of them)
    let s = DataDependent::new("fma", "fma;split=2", Rule::ZeroInColumn);
    let rep = refused(&s, opts_f16(4, 64, 64));
    assert!(rep.changed.iter().all(|c| c.repeat == "refilled"), "{rep:?}");
    for rule in [Rule::RowMagnitude(100.0), Rule::ZeroInColumn] {
        let s = DataDependent::new("fma;split=2", "fma;split=2", rule);
        let r = explain::reveal(&s, opts_f16(4, 64, 32)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.scheme, explain::reveal::Scheme::Lines);
        assert_eq!(r.order, Some(order("fma;split=2")), "{r}");
        assert_eq!(r.repeats.repeats.len(), 3, "{:?}", r.repeats);
        assert_eq!(r.repeats.changed_count, 0);
    }
}

fn mxbi(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mxbi")).args(args).output().unwrap()
}

/// Answers every pending job of a `reveal gen` folder with the subject.
fn answer(dir: &Path, s: &DataDependent) -> usize {
    let jobs = pending_jobs(dir);
    for job in &jobs {
        let a = load_tensor(job.join("a.npy"), None).unwrap();
        let b = load_tensor(job.join("b.npy"), None).unwrap();
        let c = s.c(a.view().unwrap().view(), b.view().unwrap().view());
        write_tensor(job.join("out.npy"), "data", &TensorData::from_array(&c)).unwrap();
    }
    jobs.len()
}

/// Through files (an external runner): `reveal solve` exits 1 with the
/// headline and the changed answers (bounded), text and JSON.
#[test]
fn reveal_solve_exits_1_on_a_data_dependent_runner() {
    let t = TempDir::new("reveal-data-dependent");
    let s = DataDependent::new("fma", "fma;split=4", Rule::RowMagnitude(128.0));
    let dir = t.join("probe");
    let ds = dir.display().to_string();
    let g = mxbi(&["reveal", "gen", "--dir", &ds, "--m", "4", "--k", "64", "--n", "32"]);
    assert_eq!(g.status.code(), Some(0), "{}", String::from_utf8_lossy(&g.stderr));
    let mut last = None;
    for _ in 0..64 {
        assert!(answer(&dir, &s) > 0);
        let o = mxbi(&["reveal", "solve", "--dir", &ds]);
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        if o.status.code() == Some(0) && text.contains("launches to run") {
            continue;
        }
        last = Some((o, text));
        break;
    }
    let (o, text) = last.expect("the reveal finished");
    assert_eq!(
        o.status.code(),
        Some(1),
        "{text}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("the order depends on the data"), "{text}");
    assert!(text.contains("rescaled down launch"), "{text}");
    assert!(!text.contains("order:"), "no tree, no order: {text}");
    assert!(lines.len() <= 1 + 3 + 16 + 1, "bounded: {text}");
    let j = mxbi(&["reveal", "solve", "--dir", &ds, "--json"]);
    assert_eq!(j.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&j.stdout).unwrap();
    assert_eq!(v["data_dependent"], true);
    assert!(v["order"].is_null());
    assert!(v["changed_probes"].as_u64().unwrap() > 0);
}
