//! The crate's imports point one way (the map in src/lib.rs): the checking
//! layers reach kernels only through the subject interface, numerics never
//! reach the edges. A source scan, so a new import breaks the build's tests
//! at once.

use std::path::Path;

/// Every `.rs` file under `src/<module>`, with its text.
fn sources(module: &str) -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = Vec::new();
    let mut stack = vec![root.join(module)];
    let file = root.join(format!("{module}.rs"));
    if file.is_file() {
        out.push((file.display().to_string(), std::fs::read_to_string(&file).unwrap()));
    }
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for e in entries {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push((p.display().to_string(), std::fs::read_to_string(&p).unwrap()));
            }
        }
    }
    assert!(!out.is_empty(), "no sources for module {module}");
    out
}

fn assert_never_imports(module: &str, forbidden: &[&str]) {
    for (path, text) in sources(module) {
        for f in forbidden {
            for (i, line) in text.lines().enumerate() {
                let code = line.split("//").next().unwrap_or("");
                assert!(
                    !code.contains(&format!("crate::{f}")) && !code.contains(&format!("super::{f}")),
                    "{path}:{}: `{module}` must not import `{f}`: {line}",
                    i + 1
                );
            }
        }
    }
}

#[test]
fn checking_layers_reach_kernels_only_through_subjects() {
    for module in ["bi", "subject", "explain", "accuracy"] {
        assert_never_imports(module, &["device", "op", "cli"]);
    }
}

#[test]
fn numerics_never_reach_the_edges() {
    for module in ["format", "mx", "order", "gemm", "rng", "limits"] {
        assert_never_imports(module, &["device", "op", "cli", "bi", "subject", "io"]);
    }
}

#[test]
fn the_scan_sees_an_import() {
    // the scanner itself: a module known to import `op` is caught
    let hits = sources("cli").iter().filter(|(_, t)| t.contains("crate::op")).count();
    assert!(hits > 0);
}
