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
    for module in ["bi", "subject", "explain", "accuracy", "fuzz"] {
        assert_never_imports(module, &["device", "op", "cli"]);
    }
}

#[test]
fn only_the_cli_reaches_the_fuzzer() {
    for module in [
        "bi", "subject", "explain", "accuracy", "op", "device", "format", "mx", "order", "gemm", "rng", "limits", "io",
    ] {
        assert_never_imports(module, &["fuzz"]);
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

/// The files of `format` import each other without a cycle, and only by
/// file (`super::FILE::Item`): a sibling is never reached through the
/// re-exports of `mod.rs` (`super::Item`, `crate::format::Item`). Test
/// modules are not scanned (they may use the re-exports).
#[test]
fn format_files_import_without_a_cycle() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/format");
    let mut files: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs") && !p.ends_with("mod.rs"))
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            let code = text.split("#[cfg(test)]").next().unwrap().to_string();
            (p.file_stem().unwrap().to_string_lossy().into_owned(), code)
        })
        .collect();
    files.sort();
    let names: Vec<String> = files.iter().map(|f| f.0.clone()).collect();
    let mut edges: Vec<(usize, usize)> = Vec::new();
    for (i, (name, code)) in files.iter().enumerate() {
        for line in code.lines().map(|l| l.split("//").next().unwrap_or("")) {
            for pat in ["super::", "crate::format::"] {
                for (at, _) in line.match_indices(pat) {
                    let rest = &line[at + pat.len()..];
                    let ident: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                    match names.iter().position(|n| *n == ident) {
                        Some(j) => edges.push((i, j)),
                        None => panic!("src/format/{name}.rs reaches `{pat}{rest}` through mod.rs, not by file"),
                    }
                }
            }
        }
    }
    edges.sort();
    edges.dedup();
    // topological order by repeatedly removing files without imports left
    let mut left: Vec<usize> = (0..names.len()).collect();
    let mut order = Vec::new();
    while !left.is_empty() {
        let free: Vec<usize> = left
            .iter()
            .copied()
            .filter(|&i| !edges.iter().any(|&(a, b)| a == i && b != i && left.contains(&b)))
            .collect();
        assert!(
            !free.is_empty(),
            "import cycle among src/format/{{{}}}.rs; edges: {:?}",
            left.iter().map(|&i| names[i].as_str()).collect::<Vec<_>>().join(","),
            edges
                .iter()
                .filter(|(a, b)| left.contains(a) && left.contains(b))
                .map(|&(a, b)| format!("{} -> {}", names[a], names[b]))
                .collect::<Vec<_>>()
        );
        left.retain(|i| !free.contains(i));
        order.extend(free.into_iter().map(|i| names[i].clone()));
    }
    println!("format files, leaves first: {}", order.join(", "));
    // the scan sees the edges it must: encode reaches the rounding core
    let (e, r) = (
        names.iter().position(|n| n == "encode"),
        names.iter().position(|n| n == "round"),
    );
    assert!(edges.contains(&(e.unwrap(), r.unwrap())));
}
