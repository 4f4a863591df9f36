//! Dump folders (`dump:DIR`, manifest `mxbi-bi-dump/1`): a folder whose
//! manifest is any text opens or gives a one-line error; a folder recorded
//! by `Recorder` for a small job, then damaged (bytes of the manifest
//! changed, the runner's `out.npy` any bytes or missing, an input file
//! changed), either answers the job with exactly the values of its
//! `out.npy` (the rows asked, `rows * N` values, every bit kept) or fails
//! with a one-line error; never a panic.
//!
//! Input: a mode byte; with bit 0 clear the rest is the manifest text;
//! with bit 0 set: M, K, N (1 to 4, 1 to 8, 1 to 4), up to two manifest
//! edits (position, byte), then the bytes of `out.npy`.

use super::bytes::{one_line, Scratch, Take};
use mxbi::gemm::{BLayout, Matrix, Problem};
use mxbi::order::InType;
use mxbi::subject::exec::read_output_bytes;
use mxbi::subject::{Dump, Recorder, Subject};

/// True when the input got past parsing to the property checks.
pub fn run(data: &[u8]) -> bool {
    let mut r = Take(data);
    let mode = r.u8();
    let dir = Scratch::new("dump");
    let d = dir.path();
    if mode & 1 == 0 {
        std::fs::write(d.join("manifest.json"), r.rest()).unwrap();
        return match Dump::open(d.to_str().unwrap()) {
            Ok(dump) => {
                let (a, b) = ([1.0f32, 2.0], [3.0f32, 4.0]);
                let p = problem(&a, &b, 1, 2, 1);
                if let Err(e) = dump.run(&p, None) {
                    one_line(&e.to_string());
                }
                true
            }
            Err(e) => {
                one_line(&e);
                false
            }
        };
    }
    let (m, k, n) = (
        1 + r.u8() as usize % 4,
        1 + r.u8() as usize % 8,
        1 + r.u8() as usize % 4,
    );
    let edits = [(r.u16() as usize, r.u8()), (r.u16() as usize, r.u8())];
    let out_bytes = r.rest();
    let a: Vec<f32> = (0..m * k).map(|i| (i as f32) * 0.5 - 1.0).collect();
    let b: Vec<f32> = (0..k * n).map(|i| 2.0 - (i as f32) * 0.25).collect();
    let p = problem(&a, &b, m, k, n);
    let rec = Recorder::new(d, InType::F32).unwrap();
    rec.run(&p, None).unwrap();
    rec.finish(serde_json::json!({"k": k, "n": n}), vec![m]).unwrap();
    let manifest = d.join("manifest.json");
    let mut text = std::fs::read(&manifest).unwrap();
    for (at, byte) in edits {
        if mode & 2 != 0 && !text.is_empty() {
            let i = at % text.len();
            text[i] = byte;
        }
    }
    std::fs::write(&manifest, &text).unwrap();
    let job = d.join("job-000001");
    if mode & 4 == 0 {
        std::fs::write(job.join("out.npy"), out_bytes).unwrap();
    }
    if mode & 8 != 0 {
        std::fs::write(job.join("a.npy"), b"changed").unwrap();
    }
    let rows: Option<Vec<usize>> = (mode & 16 != 0).then(|| vec![m - 1, 0]);
    let dump = match Dump::open(d.to_str().unwrap()) {
        Ok(x) => x,
        Err(e) => {
            one_line(&e);
            return false;
        }
    };
    match dump.run(&p, rows.as_deref()) {
        Ok(v) => {
            // the answer is the file's values, rows as asked
            let all = read_output_bytes(out_bytes, None, m, n)
                .unwrap_or_else(|e| panic!("answered from an output that does not check: {e}"));
            let want: Vec<f32> = match &rows {
                None => all,
                Some(rs) => rs.iter().flat_map(|&r| all[r * n..(r + 1) * n].to_vec()).collect(),
            };
            assert_eq!(v.len(), want.len(), "M={m} N={n} rows {rows:?}");
            for (x, y) in v.iter().zip(&want) {
                assert_eq!(x.to_bits(), y.to_bits());
            }
        }
        Err(e) => one_line(&e.to_string()),
    }
    true
}

fn problem<'a>(a: &'a [f32], b: &'a [f32], m: usize, k: usize, n: usize) -> Problem<'a> {
    Problem {
        a: Matrix::F32(a),
        b: Matrix::F32(b),
        m,
        k,
        n,
        b_layout: BLayout::Kn,
    }
}
