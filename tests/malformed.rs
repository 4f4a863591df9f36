//! The malformed-input battery: crafted bad inputs through the `mxbi`
//! binary (truncated and lying `.npy` headers, wrong dtypes, shapes that
//! would need terabytes, invalid JSON and schema violations in case,
//! dispatch and op spec files, bad orders and batch lists, missing dump
//! folders, unknown subjects, runners that crash, hang or answer garbage).
//! Each must exit 2 with exactly one line on stderr, never a panic, and
//! leave no output file behind.

mod common;

use common::bad_input::{f32_npy, f32s, npy, outputs};
use common::TempDir;
use std::process::Command;

const CASE_HEAD: &str = r#""schema": "mxbi-bi-case/1", "subject": "model:fma""#;

/// One bad input: files written into the case folder, then the arguments
/// (`@` stands for the case folder). Output paths are `@/out*`.
struct Bad {
    name: &'static str,
    files: Vec<(&'static str, Vec<u8>)>,
    args: Vec<String>,
}

fn bad(name: &'static str, files: Vec<(&'static str, Vec<u8>)>, args: &str) -> Bad {
    Bad {
        name,
        files,
        args: shell_words(args),
    }
}

/// Splits on spaces; a `'...'` group is one argument.
fn shell_words(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for c in s.chars() {
        match c {
            '\'' => quoted = !quoted,
            ' ' if !quoted => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
            }
            c => cur.push(c),
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

fn t(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

const GEMM: &str = "gemm --a @/a.npy --b @/b.npy --order fma --out @/out.npy";
const BI: &str = "bi run --family content,batch --k 8 --n 4 --json @/out.json --junit @/out.xml";
const CASE: &str = "bi run @/case.json --json @/out.json --junit @/out.xml";

fn gemm_a(name: &'static str, a: Vec<u8>) -> Bad {
    bad(name, vec![("a.npy", a), ("b.npy", f32_npy("(3, 2)", 6))], GEMM)
}

fn case(name: &'static str, json: &str) -> Bad {
    bad(name, vec![("case.json", t(json))], CASE)
}

fn dispatch(name: &'static str, json: &str) -> Bad {
    bad(
        name,
        vec![("t.json", t(json))],
        &format!("{BI} --subject dispatch:@/t.json --m 1,2"),
    )
}

fn subject(name: &'static str, spec: &str) -> Bad {
    bad(name, vec![], &format!("{BI} --m 1,2 --subject {spec}"))
}

fn battery() -> Vec<Bad> {
    let b = || f32_npy("(3, 2)", 6);
    let good_a = || f32_npy("(2, 3)", 6);
    let mut v = vec![
        // .npy headers and payloads (gemm)
        gemm_a("npy: empty file", vec![]),
        gemm_a("npy: magic only", t("\u{93}NUMPY").into_iter().collect()),
        gemm_a("npy: wrong magic", {
            let mut x = f32_npy("(2, 3)", 6);
            x[1] = b'X';
            x
        }),
        gemm_a("npy: unknown version 9.0", {
            let mut x = f32_npy("(2, 3)", 6);
            x[6] = 9;
            x
        }),
        gemm_a("npy: header length past the end", {
            let mut x = f32_npy("(2, 3)", 6);
            x[8] = 0xff;
            x[9] = 0xff;
            x
        }),
        gemm_a("npy: header length zero", {
            let mut x = f32_npy("(2, 3)", 6);
            x[8] = 0;
            x[9] = 0;
            x
        }),
        gemm_a("npy: header not a dict", npy("[1, 2, 3]", &f32s(6))),
        gemm_a("npy: header not UTF-8", npy("{'descr': '<f4\u{fffd}'", &f32s(6))),
        gemm_a(
            "npy: header without shape",
            npy("{'descr': '<f4', 'fortran_order': False, }", &f32s(6)),
        ),
        gemm_a(
            "npy: header without descr",
            npy("{'fortran_order': False, 'shape': (2, 3), }", &f32s(6)),
        ),
        gemm_a(
            "npy: complex dtype",
            npy("{'descr': '<c8', 'fortran_order': False, 'shape': (2, 3), }", &f32s(12)),
        ),
        gemm_a(
            "npy: object dtype",
            npy("{'descr': '|O', 'fortran_order': False, 'shape': (2, 3), }", &f32s(12)),
        ),
        gemm_a(
            "npy: unknown dtype string",
            npy("{'descr': 'zz', 'fortran_order': False, 'shape': (2, 3), }", &f32s(6)),
        ),
        gemm_a(
            "npy: negative dimension",
            npy("{'descr': '<f4', 'fortran_order': False, 'shape': (-2, 3), }", &f32s(6)),
        ),
        gemm_a("npy: terabyte shape", f32_npy("(1000000, 1000000)", 6)),
        gemm_a(
            "npy: shape overflowing usize",
            f32_npy("(4294967296, 4294967296, 16)", 6),
        ),
        gemm_a("npy: payload truncated", f32_npy("(2, 3)", 4)),
        gemm_a("npy: one-dimensional A", f32_npy("(6,)", 6)),
        gemm_a(
            "npy: int32 A",
            npy("{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }", &f32s(6)),
        ),
        gemm_a(
            "npy: bool A",
            npy("{'descr': '|b1', 'fortran_order': False, 'shape': (2, 3), }", &[1u8; 6]),
        ),
        gemm_a("npy: K mismatch", f32_npy("(2, 5)", 10)),
        gemm_a(
            "npy: f64 not exact in f32",
            npy(
                "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }",
                &[0.1f64; 6].iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>(),
            ),
        ),
        bad("npy: missing file", vec![("b.npy", b())], GEMM),
        bad(
            "npy: a folder, not a file",
            vec![("a.npy/x", vec![]), ("b.npy", b())],
            GEMM,
        ),
        bad(
            "gemm: invalid order",
            vec![("a.npy", good_a()), ("b.npy", b())],
            "gemm --a @/a.npy --b @/b.npy --order fma;split=0 --out @/out.npy",
        ),
        bad(
            "gemm: unknown order",
            vec![("a.npy", good_a()), ("b.npy", b())],
            "gemm --a @/a.npy --b @/b.npy --order bogus --out @/out.npy",
        ),
        bad(
            "gemm: unknown b layout",
            vec![("a.npy", good_a()), ("b.npy", b())],
            "gemm --a @/a.npy --b @/b.npy --b-layout xy --order fma --out @/out.npy",
        ),
        bad(
            "gemm: row out of range",
            vec![("a.npy", good_a()), ("b.npy", b())],
            "gemm --a @/a.npy --b @/b.npy --order fma --rows 7 --out @/out.npy",
        ),
        bad(
            "gemm: output folder missing",
            vec![("a.npy", good_a()), ("b.npy", b())],
            "gemm --a @/a.npy --b @/b.npy --order fma --out @/nope/out.npy",
        ),
        // casts and decodes
        bad(
            "decode: f32 is not codes",
            vec![("a.npy", good_a())],
            "decode --from e4m3 @/a.npy @/out.npy",
        ),
        bad(
            "cast: int32 input",
            vec![(
                "a.npy",
                npy("{'descr': '<i4', 'fortran_order': False, 'shape': (6,), }", &f32s(6)),
            )],
            "cast --to e4m3 @/a.npy @/out.npy",
        ),
        bad(
            "cast: seed without stochastic",
            vec![("a.npy", good_a())],
            "cast --to e4m3 --seed 3 @/a.npy @/out.npy",
        ),
        bad(
            "cast: NaN-laden data, --nan error",
            vec![(
                "a.npy",
                npy(
                    "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }",
                    &[1.0f32, f32::NAN, 2.0]
                        .iter()
                        .flat_map(|x| x.to_le_bytes())
                        .collect::<Vec<u8>>(),
                ),
            )],
            "cast --to int8 --nan error @/a.npy @/out.npy",
        ),
        bad(
            "quantize: axis not a multiple of the block",
            vec![("a.npy", good_a())],
            "quantize --format mxfp8-e4m3 @/a.npy --codes @/out.c.npy --scales @/out.s.npy",
        ),
        // bi run flags
        bad(
            "bi: --m not a number",
            vec![],
            &format!("{BI} --subject model:fma --m 1,x"),
        ),
        bad("bi: --m zero", vec![], &format!("{BI} --subject model:fma --m 0")),
        bad(
            "bi: --m empty item",
            vec![],
            &format!("{BI} --subject model:fma --m 1,,2"),
        ),
        bad(
            "bi: --m beyond the limit",
            vec![],
            &format!("{BI} --subject model:fma --m 99999999"),
        ),
        bad("bi: --m negative", vec![], &format!("{BI} --subject model:fma --m=-3")),
        bad(
            "bi: terabyte K",
            vec![],
            "bi run --family content --k 1099511627776 --n 4 --m 1 --subject model:fma --json @/out.json",
        ),
        bad(
            "bi: M*K beyond the element bound",
            vec![],
            "bi run --family content --k 1048576 --n 4 --m 65536 --subject model:fma --json @/out.json",
        ),
        bad(
            "bi: unknown family",
            vec![],
            &format!("{BI},sideways --subject model:fma --m 1"),
        ),
        bad(
            "bi: bad row position",
            vec![],
            &format!("{BI} --subject model:fma --m 4 --rows middle"),
        ),
        bad(
            "bi: switch without --vs",
            vec![],
            "bi run --family switch --k 8 --n 4 --m 1 --subject model:fma --json @/out.json",
        ),
        bad(
            "bi: repeats 1",
            vec![],
            "bi run --family repeat --repeats 1 --k 8 --n 4 --m 1 --subject model:fma --json @/out.json",
        ),
        bad(
            "bi: bad shard",
            vec![],
            &format!("{BI} --subject model:fma --m 1 --shard 3/2"),
        ),
        bad(
            "bi: unknown matrix",
            vec![],
            "bi run --subject model:fma --matrix nosuch --json @/out.json",
        ),
        bad(
            "bi: unknown input type",
            vec![],
            &format!("{BI} --subject model:fma --m 1 --input f12"),
        ),
        subject("subject: unknown kind", "foo:bar"),
        subject("subject: no kind", "fma"),
        subject("subject: bad model order", "model:fma;lanes=0"),
        subject("subject: unknown op preset", "op:nope"),
        subject("subject: op that is not a GEMM", "op:rmsnorm"),
        subject("dump: missing folder", "dump:@/nodump"),
        bad(
            "dump: folder without manifest",
            vec![("d/x", vec![])],
            &format!("{BI} --m 1 --subject dump:@/d"),
        ),
        bad(
            "dump: manifest not JSON",
            vec![("d/manifest.json", t("{nope"))],
            &format!("{BI} --m 1 --subject dump:@/d"),
        ),
        bad(
            "dump: manifest of another schema",
            vec![("d/manifest.json", t(r#"{"schema": "other/1"}"#))],
            &format!("{BI} --m 1 --subject dump:@/d"),
        ),
        subject("exec: runner that exits at once", "exec:false"),
        subject("exec: runner that answers garbage", "'exec:sh -c \"echo nonsense\"'"),
        bad(
            "exec: runner that hangs",
            vec![],
            &format!("{BI} --m 1 --timeout 0.3 --subject 'exec:sleep 30'"),
        ),
        bad(
            "exec: negative timeout",
            vec![],
            &format!("{BI} --m 1 --timeout -1 --subject exec:false"),
        ),
        // dispatch tables
        dispatch("dispatch: not JSON", "{\"dispatch\": [}"),
        dispatch("dispatch: empty table", r#"{"dispatch": []}"#),
        dispatch(
            "dispatch: unknown key",
            r#"{"dispatch": [{"m_max": 4, "mmax": 3, "order": "fma"}]}"#,
        ),
        dispatch(
            "dispatch: m_max zero",
            r#"{"dispatch": [{"m_max": 0, "order": "fma"}]}"#,
        ),
        dispatch(
            "dispatch: m_max negative",
            r#"{"dispatch": [{"m_max": -4, "order": "fma"}]}"#,
        ),
        dispatch("dispatch: bad order", r#"{"dispatch": [{"order": "fma;split=0"}]}"#),
        dispatch(
            "dispatch: m_max out of order (an unreachable entry)",
            r#"{"dispatch": [{"m_max": 256, "order": "fma"}, {"m_max": 16, "order": "fma;split=4"}, {"order": "fma"}]}"#,
        ),
        dispatch(
            "dispatch: an entry after one without m_max",
            r#"{"dispatch": [{"order": "fma"}, {"m_max": 16, "order": "fma;split=4"}]}"#,
        ),
        dispatch(
            "dispatch: no entry matches",
            r#"{"dispatch": [{"k_max": 4, "order": "fma"}]}"#,
        ),
        subject("dispatch: missing file", "dispatch:@/none.json"),
        bad(
            "dispatch: table too large",
            vec![("t.json", vec![b' '; (1 << 20) + 1])],
            &format!("{BI} --m 1 --subject dispatch:@/t.json"),
        ),
        // case files
        bad("case: missing file", vec![], CASE),
        case("case: empty file", ""),
        case("case: not JSON", "{\"schema\": "),
        case("case: not an object", "[1, 2]"),
        case(
            "case: other schema version",
            r#"{"schema": "mxbi-bi-case/2", "subject": "model:fma", "k": 8, "n": 4}"#,
        ),
        case(
            "case: unknown key",
            &format!(r#"{{{CASE_HEAD}, "k": 8, "n": 4, "families": ["content"], "kk": 1}}"#),
        ),
        case(
            "case: k missing",
            &format!(r#"{{{CASE_HEAD}, "n": 4, "families": ["content"]}}"#),
        ),
        case(
            "case: k zero",
            &format!(r#"{{{CASE_HEAD}, "k": 0, "n": 4, "families": ["content"]}}"#),
        ),
        case(
            "case: m negative",
            &format!(r#"{{{CASE_HEAD}, "k": 8, "n": 4, "m": [1, -2], "families": ["content"]}}"#),
        ),
        case(
            "case: m empty",
            &format!(r#"{{{CASE_HEAD}, "k": 8, "n": 4, "m": [], "families": ["content"]}}"#),
        ),
        case(
            "case: m a bad word",
            &format!(r#"{{{CASE_HEAD}, "k": 8, "n": 4, "m": "corners", "families": ["content"]}}"#),
        ),
        case("case: no families", &format!(r#"{{{CASE_HEAD}, "k": 8, "n": 4}}"#)),
        case(
            "case: unknown family",
            &format!(r#"{{{CASE_HEAD}, "k": 8, "n": 4, "families": ["sideways"]}}"#),
        ),
        case(
            "case: positions unused",
            &format!(r#"{{{CASE_HEAD}, "k": 8, "n": 4, "families": ["repeat"], "positions": [0]}}"#),
        ),
        case(
            "case: n_variants 3",
            &format!(r#"{{{CASE_HEAD}, "k": 8, "n": 4, "standard": {{"bi": {{"n_variants": 3}}}}}}"#),
        ),
        case(
            "case: bad row position",
            &format!(r#"{{{CASE_HEAD}, "k": 8, "n": 4, "standard": {{"bi": {{"row_positions": ["end"]}}}}}}"#),
        ),
        case(
            "case: unknown accuracy standard",
            &format!(
                r#"{{{CASE_HEAD}, "k": 8, "n": 4, "families": ["content"], "standard": {{"acc": "no_such_standard"}}}}"#
            ),
        ),
        case(
            "case: vs without switch",
            &format!(r#"{{{CASE_HEAD}, "vs": "model:muladd", "k": 8, "n": 4, "families": ["content"]}}"#),
        ),
        case(
            "case: unknown input type",
            &format!(r#"{{{CASE_HEAD}, "k": 8, "n": 4, "families": ["content"], "input": "f12"}}"#),
        ),
        case(
            "case: unknown subject",
            r#"{"schema": "mxbi-bi-case/1", "subject": "foo:bar", "k": 8, "n": 4, "families": ["content"]}"#,
        ),
        case(
            "case: seed too large",
            &format!(r#"{{{CASE_HEAD}, "k": 8, "n": 4, "families": ["content"], "seed": 1e30}}"#),
        ),
        bad("case: too large", vec![("case.json", vec![b' '; (1 << 20) + 1])], CASE),
        // op specs
        bad(
            "op: spec not JSON",
            vec![("spec.json", t("{"))],
            "op run @/spec.json --generate 1 --out @/out",
        ),
        bad(
            "op: unknown preset",
            vec![("spec.json", t(r#"{"preset": "nope"}"#))],
            "op run @/spec.json --generate 1 --out @/out",
        ),
        bad(
            "op: unknown key",
            vec![("spec.json", t(r#"{"preset": "agmm-v2-prefix", "bogus": 1}"#))],
            "op run @/spec.json --generate 1 --out @/out",
        ),
        bad(
            "op: missing inputs folder",
            vec![("spec.json", t(r#"{"preset": "agmm-v2-prefix"}"#))],
            "op run @/spec.json --inputs @/none --out @/out",
        ),
        // merge
        bad(
            "merge: report not JSON",
            vec![("r.json", t("{"))],
            "bi merge @/out.json @/r.json",
        ),
    ];
    v.sort_by_key(|b| b.name);
    v
}

#[test]
fn every_malformed_input_is_one_line_and_exit_2() {
    let root = TempDir::new("malformed");
    let cases = battery();
    assert!(cases.len() >= 50, "{} cases", cases.len());
    let mut failures = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        let dir = root.join(&format!("c{i:03}"));
        std::fs::create_dir_all(&dir).unwrap();
        for (name, bytes) in &c.files {
            let p = dir.join(name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, bytes).unwrap();
        }
        let d = dir.display().to_string();
        let args: Vec<String> = c.args.iter().map(|a| a.replace('@', &d)).collect();
        let out = Command::new(env!("CARGO_BIN_EXE_mxbi"))
            .args(&args)
            .env("TMPDIR", root.path())
            .output()
            .unwrap();
        let code = out.status.code();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let lines = stderr.lines().count();
        let left = outputs(&dir);
        if code != Some(2) || lines != 1 || stderr.contains("panicked") || !left.is_empty() {
            failures.push(format!(
                "{}: exit {code:?}, {lines} stderr lines, outputs left {left:?}: {}",
                c.name,
                stderr.trim()
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn the_battery_can_fail() {
    // a good input through the same harness exits 0 and writes its output:
    // the assertions above are not vacuous
    let dir = TempDir::new("malformed-good");
    std::fs::write(dir.join("a.npy"), f32_npy("(2, 3)", 6)).unwrap();
    std::fs::write(dir.join("b.npy"), f32_npy("(3, 2)", 6)).unwrap();
    let d = dir.path().display().to_string();
    let args: Vec<String> = shell_words(GEMM).iter().map(|a| a.replace('@', &d)).collect();
    let out = Command::new(env!("CARGO_BIN_EXE_mxbi")).args(&args).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(outputs(dir.path()), vec!["out.npy".to_string()]);
}

/// Excluded from the battery, with what mxbi outputs there: a runner that
/// cannot start prints its own shell's complaint on the stderr mxbi shares
/// with it (not mxbi's line), then mxbi's one error line, exit 2.
#[test]
fn a_missing_runner_ends_with_one_mxbi_line() {
    let dir = TempDir::new("malformed-runner");
    let d = dir.path().display().to_string();
    let args: Vec<String> = shell_words(&format!("{BI} --m 1,2 --subject exec:/nonexistent/runner"))
        .iter()
        .map(|a| a.replace('@', &d))
        .collect();
    let out = Command::new(env!("CARGO_BIN_EXE_mxbi")).args(&args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let mine: Vec<&str> = stderr.lines().filter(|l| l.starts_with("mxbi:")).collect();
    assert_eq!(mine.len(), 1, "{stderr}");
    assert!(
        stderr
            .lines()
            .last()
            .unwrap()
            .starts_with("mxbi: error: exec '/nonexistent/runner'"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"));
    assert!(outputs(dir.path()).is_empty());
}
