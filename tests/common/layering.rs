//! The source scan behind tests/layering.rs: which module a file's code
//! names (`crate::X`, `super::X`, grouped `use` trees included), resolved
//! to absolute module paths; the file-level import graph of one folder
//! (an item reached through `mod.rs`'s re-export counts as an import of the
//! file that defines it); and the circles in such a graph. Comments and
//! `#[cfg(test)]` modules are not scanned.

use std::path::{Path, PathBuf};

/// The crate's `src/`.
pub fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `dir` (or `dir` itself when it is one), sorted.
pub fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if dir.is_file() {
        out.push(dir.to_path_buf());
    }
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// A file's code: up to its first `#[cfg(test)]`, comments removed.
pub fn code_of(text: &str) -> Vec<String> {
    text.split("#[cfg(test)]")
        .next()
        .unwrap_or("")
        .lines()
        .map(|l| l.split("//").next().unwrap_or("").to_string())
        .collect()
}

/// The module path of a file under `root` (`bi/run.rs` -> [bi, run],
/// `bi/mod.rs` -> [bi]).
fn module_path(root: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(root).unwrap();
    let mut parts: Vec<String> = rel.iter().map(|c| c.to_string_lossy().into_owned()).collect();
    let last = parts.pop().unwrap();
    if last != "mod.rs" {
        parts.push(last.trim_end_matches(".rs").to_string());
    }
    parts
}

/// The paths a `use` tree names, starting at `s` (`a::b`, `a::{b, c::d}`).
fn tree_paths(s: &str) -> Vec<Vec<String>> {
    fn parse(chars: &[char], i: &mut usize) -> Vec<Vec<String>> {
        let mut prefix: Vec<String> = Vec::new();
        loop {
            while *i < chars.len() && chars[*i] == ' ' {
                *i += 1;
            }
            if *i < chars.len() && chars[*i] == '{' {
                *i += 1;
                let mut out = Vec::new();
                loop {
                    for mut p in parse(chars, i) {
                        let mut full = prefix.clone();
                        full.append(&mut p);
                        out.push(full);
                    }
                    while *i < chars.len() && (chars[*i] == ' ' || chars[*i] == '\n') {
                        *i += 1;
                    }
                    match chars.get(*i) {
                        Some(',') => *i += 1,
                        Some('}') => {
                            *i += 1;
                            return out;
                        }
                        _ => return out,
                    }
                }
            }
            let start = *i;
            while *i < chars.len() && (chars[*i].is_alphanumeric() || chars[*i] == '_') {
                *i += 1;
            }
            if *i == start {
                return if prefix.is_empty() { vec![] } else { vec![prefix] };
            }
            prefix.push(chars[start..*i].iter().collect());
            if chars.get(*i) == Some(&':') && chars.get(*i + 1) == Some(&':') {
                *i += 2;
            } else {
                return vec![prefix];
            }
        }
    }
    let chars: Vec<char> = s.chars().collect();
    parse(&chars, &mut 0)
}

/// The absolute module paths the code of `file` (module path `here`)
/// names through `crate::`, `super::` and `self::`, with their line numbers.
fn named_paths(here: &[String], is_mod_rs: bool, code: &[String]) -> Vec<(Vec<String>, usize)> {
    // a grouped `use` may span lines: scan the code joined, lines counted
    let joined = code.join("\n");
    let mut out = Vec::new();
    let bytes = joined.as_bytes();
    let mut at = 0;
    while at < joined.len() {
        let rest = &joined[at..];
        let (base, len): (Vec<String>, usize) = if rest.starts_with("crate::") {
            (Vec::new(), 7)
        } else if rest.starts_with("self::") {
            (here.to_vec(), 6)
        } else if rest.starts_with("super::") {
            // a file's parent module: mod.rs's path is its folder's
            let mut p = here.to_vec();
            let mut n = 0;
            while joined[at + n..].starts_with("super::") {
                p.pop();
                n += 7;
            }
            let _ = is_mod_rs;
            (p, n)
        } else {
            at += rest.chars().next().map_or(1, char::len_utf8);
            continue;
        };
        // not the tail of a longer identifier (`mycrate::`)
        let prev = if at == 0 { b' ' } else { bytes[at - 1] };
        if prev.is_ascii_alphanumeric() || prev == b'_' || prev == b'$' {
            at += len;
            continue;
        }
        let line = joined[..at].matches('\n').count() + 1;
        for p in tree_paths(&joined[at + len..]) {
            let mut full = base.clone();
            full.extend(p);
            out.push((full, line));
        }
        at += len;
    }
    out
}

/// The modules (top level) that `module`'s files import, each with where.
pub fn module_imports(module: &str) -> Vec<(String, String)> {
    let root = src();
    let mut files = rust_files(&root.join(module));
    let single = root.join(format!("{module}.rs"));
    if single.is_file() {
        files.push(single);
    }
    assert!(!files.is_empty(), "no sources for module {module}");
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let here = module_path(&root, &f);
        let is_mod = f.ends_with("mod.rs");
        for (path, line) in named_paths(&here, is_mod, &code_of(&text)) {
            if let Some(first) = path.first() {
                if first != module {
                    out.push((first.clone(), format!("{}:{line}", f.display())));
                }
            }
        }
    }
    out
}

/// The files of folder `dir` (its `.rs` files, `mod.rs` as the node
/// `mod`, and its subfolders, each one node) and which import which:
/// `(from, to)` indices. `mod.rs` imports a child when its code (its
/// `mod` and `pub use` lines aside) names it; a child imports `mod.rs`
/// when it names an item that `mod.rs` itself defines.
pub fn file_edges(dir: &Path) -> (Vec<String>, Vec<(usize, usize)>) {
    // the crate root: the nearest ancestor named `src`
    let root = dir
        .ancestors()
        .find(|a| a.ends_with("src"))
        .expect("under src/")
        .to_path_buf();
    let folder = module_path(&root, &dir.join("mod.rs"));
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir() || (p.extension().is_some_and(|x| x == "rs") && !p.ends_with("mod.rs")))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mod_rs = dir.join("mod.rs");
    let mod_code: Vec<String> = if mod_rs.is_file() {
        code_of(&std::fs::read_to_string(&mod_rs).unwrap())
    } else {
        Vec::new()
    };
    // the items mod.rs defines itself (not re-exports)
    let defined_in_mod: Vec<String> = mod_code
        .iter()
        .filter_map(|l| {
            let l = l.trim_start();
            let l = l
                .strip_prefix("pub ")
                .or_else(|| l.strip_prefix("pub(crate) "))
                .unwrap_or(l);
            ["fn ", "struct ", "enum ", "const ", "type ", "trait ", "static "]
                .iter()
                .find_map(|kw| {
                    l.strip_prefix(kw).map(|r| {
                        r.chars()
                            .take_while(|c| c.is_alphanumeric() || *c == '_')
                            .collect::<String>()
                    })
                })
        })
        .filter(|n| !n.is_empty())
        .collect();
    names.push("mod".to_string());
    let mod_node = names.len() - 1;
    // items mod.rs re-exports from a file: item -> file
    let mut reexports: Vec<(String, String)> = Vec::new();
    if mod_rs.is_file() {
        let text = std::fs::read_to_string(&mod_rs).unwrap();
        for line in code_of(&text).join("\n").split(';') {
            let l = line.trim();
            let Some(tree) = l
                .strip_prefix("pub use ")
                .or_else(|| l.strip_prefix("pub(crate) use "))
                .or_else(|| l.strip_prefix("pub(super) use "))
            else {
                continue;
            };
            for p in tree_paths(&tree.replace(" as ", "AS")) {
                let p: Vec<String> = p
                    .into_iter()
                    .map(|x| x.split("AS").last().unwrap().to_string())
                    .collect();
                if p.len() >= 2 && names.contains(&p[0]) {
                    reexports.push((p.last().unwrap().clone(), p[0].clone()));
                }
            }
        }
    }
    let mut edges = Vec::new();
    // mod.rs's own code, its `mod` and `pub use` statements aside: a child
    // named as `child::` or through a crate::/super::/self:: path
    let own: String = mod_code
        .join("\n")
        .split(';')
        .filter(|st| {
            let t = st.trim_start();
            ![
                "pub use ",
                "pub(crate) use ",
                "pub(super) use ",
                "mod ",
                "pub mod ",
                "pub(crate) mod ",
            ]
            .iter()
            .any(|p| t.starts_with(p))
        })
        .collect::<Vec<_>>()
        .join(";");
    let own_paths = named_paths(&folder, true, std::slice::from_ref(&own));
    for (i, n) in names.iter().enumerate().filter(|(i, _)| *i != mod_node) {
        let pat = format!("{n}::");
        let named = own.match_indices(&pat).any(|(at, _)| {
            let prev = own[..at].chars().next_back().unwrap_or(' ');
            !(prev.is_alphanumeric() || prev == '_' || prev == ':')
        });
        let through_paths = own_paths
            .iter()
            .any(|(p, _)| p.len() > folder.len() && p[..folder.len()] == folder[..] && p[folder.len()] == *n);
        if named || through_paths {
            edges.push((mod_node, i));
        }
    }
    for f in rust_files(dir) {
        if f == mod_rs {
            continue;
        }
        let rel = f.strip_prefix(dir).unwrap();
        let node = rel
            .iter()
            .next()
            .unwrap()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string();
        let from = names.iter().position(|n| *n == node).unwrap();
        let text = std::fs::read_to_string(&f).unwrap();
        let here = module_path(&root, &f);
        for (path, _) in named_paths(&here, f.ends_with("mod.rs"), &code_of(&text)) {
            if path.len() <= folder.len() || path[..folder.len()] != folder[..] {
                continue;
            }
            let next = &path[folder.len()];
            let to = names
                .iter()
                .position(|n| n == next && n != "mod")
                .or_else(|| {
                    reexports
                        .iter()
                        .find(|(item, _)| item == next)
                        .and_then(|(_, file)| names.iter().position(|n| n == file))
                })
                .or_else(|| defined_in_mod.contains(next).then_some(mod_node));
            if let Some(to) = to.filter(|&t| t != from) {
                edges.push((from, to));
            }
        }
    }
    edges.sort();
    edges.dedup();
    (names, edges)
}

/// The circles of a graph, each as its node names from the smallest round
/// to itself (`a -> b -> a`), one per strongly connected group of two or
/// more nodes.
pub fn cycles(names: &[String], edges: &[(usize, usize)]) -> Vec<Vec<String>> {
    let n = names.len();
    let reach = |from: usize| -> Vec<bool> {
        let mut seen = vec![false; n];
        let mut stack = vec![from];
        while let Some(x) = stack.pop() {
            for &(a, b) in edges {
                if a == x && !seen[b] {
                    seen[b] = true;
                    stack.push(b);
                }
            }
        }
        seen
    };
    let reaches: Vec<Vec<bool>> = (0..n).map(reach).collect();
    let mut done = vec![false; n];
    let mut out = Vec::new();
    for a in 0..n {
        if done[a] || !reaches[a][a] {
            continue;
        }
        // a's group: the nodes a reaches that reach a; one circle through a
        let group: Vec<usize> = (0..n).filter(|&b| reaches[a][b] && reaches[b][a]).collect();
        for &g in &group {
            done[g] = true;
        }
        // shortest path back to a inside the group (breadth first)
        let mut prev = vec![usize::MAX; n];
        let mut queue = std::collections::VecDeque::from([a]);
        let mut back = None;
        while let Some(x) = queue.pop_front() {
            for &(s, t) in edges.iter().filter(|(s, t)| *s == x && group.contains(t)) {
                if t == a {
                    back = Some(s);
                    queue.clear();
                    break;
                }
                if prev[t] == usize::MAX {
                    prev[t] = x;
                    queue.push_back(t);
                }
            }
        }
        let mut path = vec![a];
        let mut x = back.expect("a node that reaches itself has a circle");
        while x != a {
            path.push(x);
            x = prev[x];
        }
        path.push(a);
        let mut words: Vec<String> = path.iter().map(|&i| names[i].clone()).collect();
        words[1..path.len() - 1].reverse();
        out.push(words);
    }
    out
}
