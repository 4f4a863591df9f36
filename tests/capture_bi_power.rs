//! The H200 power and witness captures (`reference/captures/bi-power-*`,
//! made by `reference/device/bi_power.sh`): PyTorch bf16 GEMMs whose orders
//! differ between two batch sizes (torch.matmul and F.linear at K = N = 4096,
//! M = 1 vs 64; torch.matmul at K = 7168, N = 2048, M = 128 vs 256), batch
//! family, on the plain inputs, the separating inputs and the witness. CI
//! replays each on the CPU:
//! - every job's A row and B are the inputs mxbi draws today (SHA-256);
//! - the GPU's row at the smaller M is, bit for bit,
//!   `mma(k=16,f=25);split=2;out=bf16` and at the larger `mma(k=16,f=25);out=bf16`
//!   (the orders the report identified and built its witness from), on all
//!   three inputs;
//! - the powers recompute to the reports' (plain below 0.99, separating 1.0);
//!   the witness rebuilt from its seed is the one the GPU ran, and the
//!   kernel's two batch sizes differ on it in the reports' columns;
//! - a changed output digit fails the replay.

mod common;

use mxbi::bi::power;
use mxbi::bi::{Content, Rows};
use mxbi::device::capture::Capture;
use mxbi::explain::witness::{build, WitnessOptions};
use mxbi::format::Format;
use mxbi::gemm::{gemm, BLayout, Matrix, Problem};
use mxbi::io::sha256_hex;
use mxbi::order::{InType, Order};
use serde_json::Value;
use std::path::Path;

const SMALL_M: &str = "mma(k=16,f=25);split=2;out=bf16";
const LARGE_M: &str = "mma(k=16,f=25);out=bf16";

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The shape of a capture's check: K, N and the two batch sizes.
#[derive(Clone, Copy)]
struct Shape {
    k: usize,
    n: usize,
    ms: [u64; 2],
}

/// The model's output row (bf16 bits, 4 hex digits each) for `a` and `b`.
fn model_row(order: &str, a: &[f32], b: &[f32], s: Shape) -> String {
    let o: Order = order.parse().unwrap();
    let p = Problem {
        a: Matrix::F32(a),
        b: Matrix::F32(b),
        m: 1,
        n: s.n,
        k: s.k,
        b_layout: BLayout::Kn,
    };
    let out = gemm(&o, &p, None).unwrap();
    out.iter()
        .map(|x| {
            let bits = x.to_bits();
            assert_eq!(bits & 0xFFFF, 0, "{order}: not a bf16 value");
            format!("{:04x}", bits >> 16)
        })
        .collect()
}

/// Columns where two rows of 4-digit codes differ.
fn differing(x: &str, y: &str) -> usize {
    x.as_bytes()
        .chunks(4)
        .zip(y.as_bytes().chunks(4))
        .filter(|(p, q)| p != q)
        .count()
}

/// The rows of the jobs whose A row 0 and B are `a` and `b`, by M (the
/// smaller, the larger); every job of one M must agree (the check's repeats).
fn rows_of(jobs: &[Value], content: &str, a: &[f32], b: &[f32], s: Shape) -> Result<(String, String), String> {
    let (ha, hb) = (sha256_hex(&f32_bytes(a)), sha256_hex(&f32_bytes(b)));
    let mut by_m: [Option<String>; 2] = [None, None];
    for j in jobs.iter().filter(|j| j["content"] == content) {
        if j["a_row0_sha256"] != ha.as_str() || j["b_sha256"] != hb.as_str() {
            continue;
        }
        let slot = match j["m"].as_u64() {
            Some(m) if m == s.ms[0] => 0,
            Some(m) if m == s.ms[1] => 1,
            m => return Err(format!("{content}: a job with M = {m:?}")),
        };
        let row = j["out_row0"].as_str().ok_or("out_row0")?.to_string();
        match &by_m[slot] {
            Some(r) if *r != row => return Err(format!("{content}: two runs of one M differ")),
            _ => by_m[slot] = Some(row),
        }
    }
    match by_m {
        [Some(x), Some(y)] => Ok((x, y)),
        _ => Err(format!("{content}: no jobs of both M with today's inputs")),
    }
}

/// The replay (see the module doc); Err names what does not hold.
fn replay(dir: &Path) -> Result<(), String> {
    let cap = Capture::open(dir).map_err(|e| e.to_string())?;
    let rows: Value = cap.read_json("rows.json").map_err(|e| e.to_string())?;
    let jobs = rows["jobs"].as_array().ok_or("rows.json: jobs")?;
    let report: Value = cap.read_json("separating.json").map_err(|e| e.to_string())?;
    let o = &report["options"];
    let shape = Shape {
        k: o["k"].as_u64().ok_or("options.k")? as usize,
        n: o["n"].as_u64().ok_or("options.n")? as usize,
        ms: [
            o["ms"][0].as_u64().ok_or("options.ms")?,
            o["ms"][1].as_u64().ok_or("options.ms")?,
        ],
    };
    let (k, n) = (shape.k, shape.n);
    let w = &report["witnesses"][0];
    if (w["base"]["order"].as_str(), w["var"]["order"].as_str()) != (Some(SMALL_M), Some(LARGE_M)) {
        return Err(format!(
            "the report's orders are {} and {}",
            w["base"]["order"], w["var"]["order"]
        ));
    }
    // every job's inputs, as (A row 0, B) digests, once recognised
    let mut known: Vec<(String, String)> = Vec::new();
    let digests = |a: &[f32], b: &[f32]| (sha256_hex(&f32_bytes(a)), sha256_hex(&f32_bytes(b)));
    // the drawn inputs: the GPU's rows are the two orders' rows
    for (content, name) in [(Content::plain(), "plain"), (Content::default(), "separating")] {
        let r = Rows::with_content(1, k, n, InType::Bf16, content);
        let a = r.row(0);
        known.push(digests(&a, &r.b));
        // the input-dependence probe's batch: the smaller M's batch negated
        let neg: Vec<f32> = a.iter().map(|x| -x).collect();
        let (hn, hb) = digests(&neg, &r.b);
        let expected = model_row(SMALL_M, &neg, &r.b, shape);
        for j in jobs
            .iter()
            .filter(|j| j["content"] == name && j["a_row0_sha256"] == hn.as_str())
        {
            if j["b_sha256"] != hb.as_str()
                || j["m"].as_u64() != Some(shape.ms[0])
                || j["out_row0"] != expected.as_str()
            {
                return Err(format!("{name}: the negated probe batch is not {SMALL_M} on -A"));
            }
        }
        known.push((hn, hb));
        let (small, large) = rows_of(jobs, name, &a, &r.b, shape)?;
        if small != model_row(SMALL_M, &a, &r.b, shape) {
            return Err(format!("{name}: the smaller M's row is not {SMALL_M}"));
        }
        if large != model_row(LARGE_M, &a, &r.b, shape) {
            return Err(format!("{name}: the larger M's row is not {LARGE_M}"));
        }
        let rep: Value = cap.read_json(&format!("{name}.json")).map_err(|e| e.to_string())?;
        let cell = &rep["cells"][0];
        if cell["verdict"] != "BI_FAIL" || cell["columns_differing"].as_u64() != Some(differing(&small, &large) as u64)
        {
            return Err(format!("{name}: the report's cell is not the rows' difference: {cell}"));
        }
        // the power the report gave, recomputed (bf16: the narrowest format
        // the bytes allow, and the weakest)
        let p = power::measure(&a, &r.b, k, n, InType::Bf16, &[Some(Format::BF16)], 1);
        if approx::abs_diff_ne!(
            p.value,
            cell["power"]["value"].as_f64().unwrap_or(-1.0),
            epsilon = 1e-12
        ) {
            return Err(format!("{name}: power {} vs the report's {}", p.value, cell["power"]));
        }
    }
    // the witness, rebuilt from its seed
    let search = build(
        &SMALL_M.parse().unwrap(),
        &LARGE_M.parse().unwrap(),
        InType::Bf16,
        k,
        n,
        WitnessOptions { seed: 1, tries: 64 },
    )?;
    let wit = search.witness().ok_or("no witness rebuilt")?;
    if format!("{:016x}", wit.digest()) != w["witness"]["digest"].as_str().unwrap_or("") {
        return Err("the rebuilt witness is not the report's".into());
    }
    known.push(digests(&wit.a, &wit.b));
    let (small, large) = rows_of(jobs, "separating", &wit.a, &wit.b, shape)?;
    if small != model_row(SMALL_M, &wit.a, &wit.b, shape) || large != model_row(LARGE_M, &wit.a, &wit.b, shape) {
        return Err("on the witness the GPU's rows are not the two orders' rows".into());
    }
    let cols = differing(&small, &large);
    if Some(cols as u64) != w["diff"]["columns_differing"].as_u64() {
        return Err(format!("witness: {cols} columns differ, the report says {}", w["diff"]));
    }
    // nothing in the capture goes unchecked
    for j in jobs {
        let pair = (
            j["a_row0_sha256"].as_str().unwrap_or(""),
            j["b_sha256"].as_str().unwrap_or(""),
        );
        if !known.iter().any(|(a, b)| (a.as_str(), b.as_str()) == pair) {
            return Err(format!("{}: inputs the replay does not know", j["job"]));
        }
    }
    Ok(())
}

#[test]
fn the_h200_power_captures_replay_on_the_cpu() {
    // capture, then columns that differ between the two M: plain inputs,
    // separating inputs, witness
    for (name, plain_cols, sep_cols, witness_cols) in [
        ("bi-power-torch-bf16", 4, 2711, 837),
        ("bi-power-torch-linear-bf16", 4, 2711, 837),
        ("bi-power-torch-matmul-bf16-k7168", 15, 1373, 404),
    ] {
        let dir = common::committed_capture(name);
        let cap = Capture::open_anchored(&dir).unwrap();
        cap.verify_all().unwrap();
        replay(&dir).unwrap_or_else(|e| panic!("{name}: {e}"));
        // what the reports say, in numbers
        let plain: Value = cap.read_json("plain.json").unwrap();
        let sep: Value = cap.read_json("separating.json").unwrap();
        let (p, s) = (&plain["cells"][0], &sep["cells"][0]);
        assert_eq!(
            (p["columns_differing"].as_u64(), s["columns_differing"].as_u64()),
            (Some(plain_cols), Some(sep_cols)),
            "{name}"
        );
        assert!(p["power"]["value"].as_f64().unwrap() < power::THRESHOLD, "{name}");
        assert_eq!(s["power"]["value"].as_f64(), Some(1.0), "{name}");
        assert_eq!(sep["witnesses"][0]["outcome"], "fail", "{name}");
        assert_eq!(
            sep["witnesses"][0]["diff"]["columns_differing"].as_u64(),
            Some(witness_cols),
            "{name}"
        );
    }
}

#[test]
fn a_changed_output_digit_fails_the_replay() {
    let tmp = common::TempDir::new("capture-bi-power");
    let dir = common::copy_capture("bi-power-torch-bf16", tmp.path());
    let path = dir.join("rows.json");
    let mut rows: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    // the separating M = 64 row (every run of it: repeats, confirmation):
    // column 1 changed in its
    // last bit
    let jobs = rows["jobs"].as_array_mut().unwrap();
    let b = jobs
        .iter()
        .find(|j| j["content"] == "separating" && j["m"] == 64)
        .unwrap()["b_sha256"]
        .clone();
    let mut changed = 0;
    for job in jobs
        .iter_mut()
        .filter(|j| j["content"] == "separating" && j["m"] == 64 && j["b_sha256"] == b)
    {
        let mut row = job["out_row0"].as_str().unwrap().to_string();
        let code = u16::from_str_radix(&row[4..8], 16).unwrap() ^ 1;
        row.replace_range(4..8, &format!("{code:04x}"));
        job["out_row0"] = Value::String(row);
        changed += 1;
    }
    assert!(changed >= 2, "{changed}");
    std::fs::write(&path, serde_json::to_vec(&rows).unwrap()).unwrap();
    common::reseal_manifest(&dir);
    let err = replay(&dir).unwrap_err();
    assert_eq!(err, format!("separating: the larger M's row is not {LARGE_M}"));
}
