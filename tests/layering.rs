//! The crate's imports point one way. `src/lib.rs`'s module map gives each
//! module a floor; a module imports only modules on lower floors. Inside
//! every folder, files import each other without a circle. The CLI is
//! private to the binary: nothing else names it. A source scan, so a new
//! import breaks the build's tests at once.

mod common;

use common::layering::{cycles, file_edges, module_imports, rust_files, src};
use std::collections::BTreeMap;
use std::path::Path;

/// The map of src/lib.rs: module -> floor, in table order.
fn floors() -> Vec<(String, u32)> {
    let lib = std::fs::read_to_string(src().join("lib.rs")).unwrap();
    let mut out = Vec::new();
    for line in lib.lines().filter_map(|l| l.strip_prefix("//! | ")) {
        let cells: Vec<&str> = line.split(" | ").collect();
        let Ok(floor) = cells[0].trim().parse::<u32>() else {
            continue;
        };
        let name: String = cells[1]
            .trim_start_matches("[`")
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        out.push((name, floor));
    }
    assert!(out.len() > 10, "the module map of src/lib.rs was not found");
    out
}

/// The modules src/lib.rs declares.
fn declared() -> Vec<String> {
    let lib = std::fs::read_to_string(src().join("lib.rs")).unwrap();
    let mut v: Vec<String> = lib
        .lines()
        .filter_map(|l| l.strip_prefix("pub mod ").or_else(|| l.strip_prefix("mod ")))
        .map(|l| l.trim_end_matches(';').to_string())
        .collect();
    v.sort();
    v
}

#[test]
fn the_map_lists_every_module_once() {
    let mut mapped: Vec<String> = floors().into_iter().map(|(m, _)| m).collect();
    mapped.sort();
    let before = mapped.len();
    mapped.dedup();
    assert_eq!(before, mapped.len(), "a module is listed twice in the map");
    assert_eq!(mapped, declared(), "src/lib.rs's map and its `mod` lines differ");
    // every folder and file of src/ is a declared module (or the binary's)
    let mut on_disk: Vec<String> = std::fs::read_dir(src())
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .filter(|n| !["lib", "main", "cli"].contains(&n.as_str()))
        .collect();
    on_disk.sort();
    on_disk.dedup();
    assert_eq!(on_disk, declared(), "src/ holds a module the map does not list");
}

#[test]
fn imports_point_down_the_floors() {
    let floors: BTreeMap<String, u32> = floors().into_iter().collect();
    let mut wrong = Vec::new();
    for (module, floor) in &floors {
        for (to, at) in module_imports(module) {
            match floors.get(&to) {
                Some(f) if f < floor => {}
                Some(f) => wrong.push(format!("{at}: `{module}` (floor {floor}) imports `{to}` (floor {f})")),
                None => wrong.push(format!("{at}: `{module}` imports `{to}`, which the map lacks")),
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports up or across the floors:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_floor_check_sees_an_import() {
    // `gemm` imports `order`: the scan must see it, or the check above is empty
    assert!(module_imports("gemm").iter().any(|(to, _)| to == "order"));
    assert!(module_imports("diagnosis").iter().any(|(to, _)| to == "op"));
}

#[test]
fn nothing_but_the_binary_names_the_cli() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in [
        "src",
        "tests",
        "benches",
        "python/src",
        "fuzz/src",
        "fuzz/fuzz_targets",
        "examples",
    ] {
        files.extend(rust_files(&root.join(dir)));
    }
    assert!(files.len() > 100);
    for path in files {
        let rel = path.strip_prefix(root).unwrap().to_string_lossy().into_owned();
        if rel.starts_with("src/cli/") || rel == "src/main.rs" {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        // spelled in two halves, so this file's own needles are not hits
        let needles = [["mxbi", "::cli"].concat(), ["crate", "::cli"].concat()];
        for (i, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            assert!(
                !needles.iter().any(|n| code.contains(n.as_str())),
                "{rel}:{}: the CLI is the binary's: {line}",
                i + 1
            );
        }
    }
    let lib = std::fs::read_to_string(root.join("src/lib.rs")).unwrap();
    assert!(!declared().contains(&"cli".to_string()) && !lib.contains("mod cli"));
}

/// Every folder of src/ (the CLI's too): its files import each other
/// without a circle.
#[test]
fn no_folder_has_an_import_circle() {
    let mut found = Vec::new();
    let mut folders = vec![src()];
    while let Some(dir) = folders.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                folders.push(p);
            }
        }
        if dir == src() {
            continue;
        }
        let (names, edges) = file_edges(&dir);
        for c in cycles(&names, &edges) {
            found.push(format!(
                "{}: {}",
                dir.strip_prefix(src()).unwrap().display(),
                c.join(" -> ")
            ));
        }
    }
    found.sort();
    assert!(found.is_empty(), "import circles among files:\n{}", found.join("\n"));
}

#[test]
fn the_circle_check_sees_a_planted_circle() {
    let dir = std::env::temp_dir().join(format!("mxbi-layering-{}", std::process::id()));
    let folder = dir.join("src/plant");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join("mod.rs"), "mod a;\nmod b;\nmod c;\npub use c::Thing;\n").unwrap();
    std::fs::write(folder.join("a.rs"), "use super::b::B;\npub struct A;\n").unwrap();
    std::fs::write(folder.join("b.rs"), "use super::{Thing, d};\npub struct B;\n").unwrap();
    std::fs::write(
        folder.join("c.rs"),
        "pub struct Thing;\nfn f() -> crate::plant::a::A { todo() }\n#[cfg(test)]\nmod tests { use super::super::b; }\n",
    )
    .unwrap();
    let (names, edges) = file_edges(&folder);
    let c = cycles(&names, &edges);
    assert_eq!(c.len(), 1, "{c:?} from {edges:?}");
    assert_eq!(c[0], vec!["a", "b", "c", "a"]);
    // the test module's import is not an edge; without a's import, no circle
    std::fs::write(folder.join("a.rs"), "pub struct A;\n").unwrap();
    let (names, edges) = file_edges(&folder);
    assert!(cycles(&names, &edges).is_empty(), "{edges:?}");
    // mod.rs counts: it calls a child that uses an item mod.rs defines
    std::fs::write(
        folder.join("mod.rs"),
        "mod a;\nmod b;\nmod c;\npub use c::Thing;\npub struct Shared;\nfn go() { a::run() }\n",
    )
    .unwrap();
    std::fs::write(folder.join("a.rs"), "use super::Shared;\npub fn run() {}\n").unwrap();
    let (names, edges) = file_edges(&folder);
    assert_eq!(cycles(&names, &edges), vec![vec!["a", "mod", "a"]], "{edges:?}");
    // a re-export and a `mod` line are not imports by mod.rs
    std::fs::write(
        folder.join("mod.rs"),
        "mod a;\nmod b;\nmod c;\npub use a::run;\npub struct Shared;\n",
    )
    .unwrap();
    let (names, edges) = file_edges(&folder);
    assert!(cycles(&names, &edges).is_empty(), "{edges:?}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn checking_layers_reach_kernels_only_through_subjects() {
    // implied by the floors; kept as the contract in words
    for module in ["bi", "subject", "explain", "accuracy", "fuzz"] {
        for (to, at) in module_imports(module) {
            assert!(
                !["device", "op", "subjects", "diagnosis"].contains(&to.as_str()),
                "{at}: {module} imports {to}"
            );
        }
    }
}
