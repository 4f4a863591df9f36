//! No allocation beyond a sane bound before validation: files whose headers
//! claim terabyte shapes (and requests for them) go through the `mxbi`
//! binary under a 2 GB address-space limit (`ulimit -v`), and each must be
//! exit 2 with one clear line, not an allocation abort. A control shows the
//! limit bites: a request that is valid but needs 4 GB aborts under it.

mod common;

use common::bad_input::{f32_npy, mxbi, npy, outputs};
use common::TempDir;

/// 2 GB of address space, in KiB.
const LIMIT_KIB: u64 = 2_000_000;

fn safetensors(shape: &str, offsets: &str, data: &[u8]) -> Vec<u8> {
    let mut h = format!(r#"{{"x": {{"dtype": "F32", "shape": {shape}, "data_offsets": {offsets}}}}}"#);
    while h.len() % 8 != 0 {
        h.push(' ');
    }
    let mut v = (h.len() as u64).to_le_bytes().to_vec();
    v.extend(h.as_bytes());
    v.extend(data);
    v
}

#[test]
fn terabyte_headers_are_refused_before_any_allocation() {
    let dir = TempDir::new("malformed-memory");
    let d = dir.path().display().to_string();
    let tb = f32_npy("(1048576, 1048576)", 4); // 4 TiB claimed, 16 bytes present
    let empty_huge = f32_npy("(0, 4611686018427387904)", 0); // zero-size, absurd other dimension
    let u8_tb = npy(
        "{'descr': '|u1', 'fortran_order': False, 'shape': (1099511627776,), }",
        &[0u8; 8],
    );
    let files: [(&str, Vec<u8>); 6] = [
        ("tb.npy", tb),
        ("empty.npy", empty_huge),
        ("u8tb.npy", u8_tb),
        ("b.npy", f32_npy("(3, 2)", 6)),
        (
            "tb.safetensors",
            safetensors("[1048576, 1048576]", "[0, 4398046511104]", &[0u8; 16]),
        ),
        ("x.npy", f32_npy("(2, 32)", 64)),
    ];
    for (name, bytes) in &files {
        std::fs::write(dir.join(name), bytes).unwrap();
    }
    let at = |s: &str| s.replace('@', &d);
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "gemm, A claims 4 TiB",
            at("gemm --a @/tb.npy --b @/b.npy --order fma --out @/out.npy"),
            "tb.npy",
        ),
        (
            "cast of a 4 TiB header",
            at("cast --to e4m3 @/tb.npy @/out.npy"),
            "tb.npy",
        ),
        (
            "quantize of a 4 TiB header",
            at("quantize --format mxfp8-e4m3 @/tb.npy --codes @/out.c.npy --scales @/out.s.npy"),
            "tb.npy",
        ),
        (
            "decode of a 1 TiB u8 header",
            at("decode --from e4m3 @/u8tb.npy @/out.npy"),
            "u8tb.npy",
        ),
        (
            "cast of an empty array with a 2^62 dimension",
            at("cast --to e4m3 @/empty.npy @/out.npy"),
            "empty.npy",
        ),
        (
            "gemm, A from a 4 TiB safetensors header",
            at("gemm --a @/tb.safetensors --b @/b.npy --order fma --out @/out.npy"),
            "tb.safetensors",
        ),
        (
            "bi run, K = 2^40",
            at("bi run --subject model:fma --family content --k 1099511627776 --n 4 --m 1 --json @/out.json"),
            "K",
        ),
        (
            "bi run, M x K beyond the element bound",
            at("bi run --subject model:fma --family content --k 1048576 --n 4 --m 65536 --json @/out.json"),
            "M*K",
        ),
        (
            "order tree for K = 2^40",
            "order fma --k 1099511627776".to_string(),
            "limit",
        ),
        (
            "gemm, order too large for K",
            at("gemm --a @/x.npy --b @/x.npy --b-layout nk --order fma;split=4000000000 --out @/out.npy"),
            "limit",
        ),
    ];
    let mut failures = Vec::new();
    for (name, args, want) in &cases {
        let args: Vec<&str> = args.split(' ').collect();
        let run = mxbi(&args, Some(LIMIT_KIB), dir.path());
        if let Some(p) = run.bad_input_problem(want) {
            failures.push(format!("{name}: {p}"));
        }
    }
    let left = outputs(dir.path());
    assert!(
        failures.is_empty() && left.is_empty(),
        "{}\nleft: {left:?}",
        failures.join("\n")
    );
}

/// The limit is real: a valid GEMM whose output needs 4 GB (C of
/// 32768 x 32768 f32, within `mxbi::limits::MAX_ELEMENTS`) aborts under
/// it, where the refusals above are clean; and a small valid run succeeds
/// under the same limit.
#[test]
fn the_address_space_limit_bites() {
    let dir = TempDir::new("malformed-memory-control");
    let d = dir.path().display().to_string();
    let small = format!("bi run --subject model:fma --family content --k 64 --n 4 --m 1,2 --json {d}/out.json");
    let run = mxbi(&small.split(' ').collect::<Vec<_>>(), Some(LIMIT_KIB), dir.path());
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    std::fs::write(dir.join("a.npy"), f32_npy("(32768, 1)", 32768)).unwrap();
    std::fs::write(dir.join("b.npy"), f32_npy("(1, 32768)", 32768)).unwrap();
    let big = format!("gemm --a {d}/a.npy --b {d}/b.npy --order fma --out {d}/big.npy");
    let run = mxbi(&big.split(' ').collect::<Vec<_>>(), Some(LIMIT_KIB), dir.path());
    assert_ne!(run.code, Some(0), "{}", run.stderr);
    assert!(
        run.bad_input_problem("").is_some(),
        "a 4 GB request should not be a clean refusal"
    );
    assert!(run.stderr.contains("memory allocation"), "{}", run.stderr);
    assert!(!dir.join("big.npy").exists());
}
