//! Replays every committed fuzz corpus file `fuzz/corpus/<target>/*`
//! through the same target bodies cargo-fuzz runs (`fuzz/src/`, included
//! here by path), on stable Rust and without a fuzzing engine. A body
//! panics exactly when one of its properties fails (docs/FUZZING.md).

#[path = "../fuzz/src/lib.rs"]
#[allow(dead_code)]
mod fuzz_bodies;

use std::path::Path;

fn corpus_dir(target: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus").join(target)
}

/// Every target has a binary in `fuzz/Cargo.toml`, a body here, and a
/// corpus in which at least one file gets past parsing to the property
/// checks (so the replay is not vacuous); each corpus file passes its body.
#[test]
fn every_committed_corpus_file_passes_its_target() {
    let manifest = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/Cargo.toml")).unwrap();
    let bins: Vec<&str> = manifest
        .lines()
        .filter_map(|l| l.strip_prefix("name = \""))
        .filter_map(|l| l.strip_suffix('"'))
        .filter(|n| !n.starts_with("mxbi"))
        .collect();
    let names: Vec<&str> = fuzz_bodies::TARGETS.iter().map(|t| t.0).collect();
    let mut sorted = bins.clone();
    sorted.sort_unstable();
    assert_eq!(
        sorted, names,
        "fuzz/Cargo.toml's binaries and the replayed bodies differ"
    );
    let mut failures = Vec::new();
    for (name, body) in fuzz_bodies::TARGETS {
        let dir = corpus_dir(name);
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "{}: an empty corpus", dir.display());
        let mut reached = 0;
        let total = files.len();
        for f in files {
            let bytes = std::fs::read(&f).unwrap();
            match std::panic::catch_unwind(|| body(&bytes)) {
                Ok(r) => reached += r as usize,
                Err(e) => {
                    let msg = e
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default();
                    failures.push(format!("{name}/{}: {msg}", f.file_name().unwrap().to_string_lossy()));
                }
            }
        }
        eprintln!("{name}: {total} files, {reached} past parsing");
        assert!(reached > 0, "{name}: no corpus file gets past parsing");
    }
    assert!(
        failures.is_empty(),
        "{} corpus files failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The shared message check fails on a message that prints empty, and
/// passes a message whose quoted input holds a newline (printed joined).
#[test]
fn the_message_check_can_fail() {
    use fuzz_bodies::bytes::one_line;
    let caught = |f: &dyn Fn()| std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).is_err();
    assert!(caught(&|| one_line("")));
    assert!(caught(&|| one_line(" \n \n")));
    assert!(!caught(&|| one_line("order 'fma\n': unknown family")));
}
