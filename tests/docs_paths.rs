//! The docs stay true to the tree and to the command line:
//!
//! - every `docs/...` and `examples/...` path that the sources, the README,
//!   the docs, the Python package and the examples cite exists (a file, or a
//!   folder when cited with a trailing `/`);
//! - every `mxbi ...` command line in the README's code blocks parses as the
//!   binary parses it, names a real subcommand path whose `--help` exits 0,
//!   and uses only flags that this `--help` lists.
//!
//! A renamed doc, a dropped example or a renamed flag fails here, not in
//! a reader's terminal.

use clap::{CommandFactory, Parser};
use cli::Cli;

/// The CLI is a private module of the `mxbi` binary, not part of the
/// library: this test compiles its source as a module of its own to read
/// the clap definitions.
#[allow(dead_code, unused_imports, unused_macros)]
#[path = "../src/cli/mod.rs"]
mod cli;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Citations of paths outside this repository that happen to start with
/// `docs/`: (the citing file, the path, where it lives).
const EXTERNAL: &[(&str, &str, &str)] = &[(
    "docs/ACCURACY.md",
    "docs/zh/ops_precision_standard/experimental_standard.md",
    "the hicann/opbase repository, not this one",
)];

/// Files whose citations are checked: `src/**/*.rs`, `README.md`,
/// `docs/**/*.md`, `python/**/*.{py,md,toml}` and `examples/**/*.{py,md,sh,json}`
/// (build outputs and virtual environments skipped).
fn citing_files() -> Vec<PathBuf> {
    let mut out = vec![root().join("README.md")];
    let walk_roots: [(&str, &[&str]); 4] = [
        ("src", &["rs"]),
        ("docs", &["md"]),
        ("python", &["py", "md", "toml"]),
        ("examples", &["py", "md", "sh", "json", "yml", "yaml"]),
    ];
    for (dir, exts) in walk_roots {
        let mut stack = vec![root().join(dir)];
        while let Some(d) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&d) else { continue };
            for e in entries {
                let p = e.unwrap().path();
                let name = p.file_name().unwrap().to_string_lossy().to_string();
                if p.is_dir() {
                    if !(name.starts_with('.') || name == "target" || name == "__pycache__" || name == "build") {
                        stack.push(p);
                    }
                } else if p.extension().is_some_and(|x| exts.iter().any(|e| x == *e)) {
                    out.push(p);
                }
            }
        }
    }
    out.sort();
    out
}

fn is_path_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '/' | '-')
}

/// The `docs/...` and `examples/...` paths cited in `text`, with their
/// line numbers: a maximal run of path characters whose first component is
/// `docs` or `examples`, trailing sentence punctuation removed. Runs with a
/// longer prefix (`python/examples/x.py`) are cited relative to the
/// repository root as written; placeholders (`...`) are skipped.
pub fn cited_paths(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (ln, line) in text.lines().enumerate() {
        let chars: Vec<char> = line.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            if !is_path_char(chars[i]) || (i > 0 && is_path_char(chars[i - 1])) {
                i += 1;
                continue;
            }
            let start = i;
            while i < chars.len() && is_path_char(chars[i]) {
                i += 1;
            }
            let mut run: String = chars[start..i].iter().collect();
            while run.ends_with('.') || run.ends_with('-') {
                run.pop();
            }
            let cites = ["docs/", "examples/"].iter().any(|p| run.starts_with(p))
                || run.contains("/docs/")
                || run.contains("/examples/");
            // a URL, an absolute path or a placeholder is not a citation of this tree
            let before = &chars[..start];
            let url = before.ends_with(&[':', '/', '/']) || before.last() == Some(&'/');
            if cites && !url && !run.contains("...") && !run.starts_with('/') && !run.starts_with("..") {
                // only paths whose first component is in the repository root
                let first = run.split('/').next().unwrap_or("");
                if root().join(first).exists() {
                    out.push((ln + 1, run));
                }
            }
        }
    }
    out
}

/// Every cited path that does not exist, as `file:line: path`.
fn missing_citations(files: &[PathBuf]) -> (usize, Vec<String>) {
    let mut seen = 0;
    let mut missing = Vec::new();
    for f in files {
        let Ok(text) = std::fs::read_to_string(f) else { continue };
        let rel = f.strip_prefix(root()).unwrap().display().to_string();
        for (ln, path) in cited_paths(&text) {
            if EXTERNAL.iter().any(|(file, p, _)| *file == rel && *p == path) {
                continue;
            }
            seen += 1;
            let p = root().join(&path);
            let ok = if path.ends_with('/') { p.is_dir() } else { p.exists() };
            if !ok {
                missing.push(format!("{rel}:{ln}: {path}"));
            }
        }
    }
    (seen, missing)
}

#[test]
fn every_cited_doc_and_example_exists() {
    let files = citing_files();
    assert!(files.len() > 50, "only {} files to scan", files.len());
    let (seen, missing) = missing_citations(&files);
    // the scan must see the citations it exists for
    assert!(seen > 100, "only {seen} citations found: the scan is broken");
    assert!(
        missing.is_empty(),
        "{} cited paths do not exist:\n{}",
        missing.len(),
        missing.join("\n")
    );
}

#[test]
fn the_external_citations_are_still_cited() {
    for (file, path, _) in EXTERNAL {
        let text = std::fs::read_to_string(root().join(file)).unwrap();
        assert!(
            text.contains(path),
            "{file} no longer cites {path}: drop it from EXTERNAL"
        );
    }
}

#[test]
fn the_scan_finds_citations_and_ignores_what_is_not_one() {
    let found: Vec<String> = cited_paths(
        "see docs/BI.md. and `docs/schema/` (docs/ORDERS.md), examples/cases/x.json,\n\
         python3 python/examples/h200_bi.py; https://example.org/docs/A.md; /abs/docs/B.md;\n\
         exec:python3 examples/runner_....py; mydocs/C.md; docs/BI.md#exit-codes",
    )
    .into_iter()
    .map(|(_, p)| p)
    .collect();
    assert_eq!(
        found,
        [
            "docs/BI.md",
            "docs/schema/",
            "docs/ORDERS.md",
            "examples/cases/x.json",
            "python/examples/h200_bi.py",
            "docs/BI.md"
        ]
    );
    // a planted citation of a doc that does not exist is reported
    let dir = std::env::temp_dir().join(format!("mxbi-docs-paths-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let planted = dir.join("planted.md");
    std::fs::write(&planted, "details in docs/NOPE.md and examples/none.py\n").unwrap();
    let text = std::fs::read_to_string(&planted).unwrap();
    let bad: Vec<String> = cited_paths(&text)
        .into_iter()
        .filter(|(_, p)| !root().join(p).exists())
        .map(|(_, p)| p)
        .collect();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(bad, ["docs/NOPE.md", "examples/none.py"]);
}

// ------------------------------------------------------------ README commands

/// The shell words of `line` (quotes group, `#` starts a comment outside
/// quotes).
fn shell_words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut word = false;
    let mut prev_space = true;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                word = true;
            }
            (None, '#') if prev_space => break,
            (None, c) if c.is_whitespace() => {
                if word {
                    out.push(std::mem::take(&mut cur));
                    word = false;
                }
            }
            (None, c) => {
                cur.push(c);
                word = true;
            }
        }
        prev_space = c.is_whitespace();
    }
    if word {
        out.push(cur);
    }
    out
}

/// How a fenced code block holds commands.
#[derive(Clone, Copy, PartialEq)]
enum Block {
    /// Not in a block.
    Prose,
    /// `sh`, `bash`, `shell` or no language: every line may be a command.
    Shell,
    /// `console`: commands follow `$ `, other lines are their output.
    Console,
    /// Any other language (`text`, `json`, `python`, ...): no commands.
    Other,
}

/// The `mxbi` command lines in the fenced code blocks of a Markdown text:
/// (line number, the words after `mxbi`). A command starts where a line (or
/// a `$ `, `&&`, `;`, `|` segment) begins with `mxbi` or a path ending in
/// `/mxbi`; `\` continues it on the next line.
fn mxbi_commands(markdown: &str) -> Vec<(usize, Vec<String>)> {
    let mut out = Vec::new();
    let mut block = Block::Prose;
    let mut lines = markdown.lines().enumerate().peekable();
    while let Some((ln, line)) = lines.next() {
        if let Some(lang) = line.trim_start().strip_prefix("```") {
            block = match (block, lang.trim()) {
                (Block::Prose, "" | "sh" | "bash" | "shell") => Block::Shell,
                (Block::Prose, "console") => Block::Console,
                (Block::Prose, _) => Block::Other,
                _ => Block::Prose,
            };
            continue;
        }
        match block {
            Block::Prose | Block::Other => continue,
            Block::Console if !line.starts_with("$ ") => continue,
            _ => {}
        }
        let mut full = line.to_string();
        while full.trim_end().ends_with('\\') {
            let t = full.trim_end();
            full = t[..t.len() - 1].to_string();
            match lines.next() {
                Some((_, next)) => full.push_str(next),
                None => break,
            }
        }
        let words = shell_words(&full);
        let mut start = true;
        for (i, w) in words.iter().enumerate() {
            if start && (w == "mxbi" || w.ends_with("/mxbi")) && !w.contains('=') {
                let rest: Vec<String> = words[i + 1..]
                    .iter()
                    .take_while(|w| !matches!(w.as_str(), "&&" | "||" | "|" | ";" | ">" | "2>&1"))
                    .cloned()
                    .collect();
                out.push((ln + 1, rest));
            }
            start = matches!(w.as_str(), "$" | "&&" | "||" | "|" | ";") || (i == 0 && w.starts_with('$'));
        }
    }
    out
}

/// The subcommand path of `words` (`["bi", "run"]`) and the rest, or an
/// error naming a word that should have been a subcommand.
fn subcommand_path(words: &[String]) -> Result<(Vec<String>, clap::Command), String> {
    let mut cmd = Cli::command();
    cmd.build();
    let mut path = Vec::new();
    for w in words {
        if !cmd.has_subcommands() || w.starts_with('-') {
            break;
        }
        match cmd.find_subcommand(w) {
            Some(sub) => {
                path.push(w.clone());
                cmd = sub.clone();
            }
            None if cmd.is_subcommand_required_set() => {
                return Err(format!("'{w}' is not a subcommand of `mxbi {}`", path.join(" ")))
            }
            None => break,
        }
    }
    if path.is_empty() {
        return Err("no subcommand".into());
    }
    Ok((path, cmd))
}

/// What is wrong with one command line: its subcommand path, its
/// `--help`, a flag that help does not list, or (with `parse`) clap
/// refusing the line.
fn check_command(
    words: &[String],
    parse: bool,
    help_cache: &mut std::collections::HashMap<Vec<String>, String>,
) -> Option<String> {
    let (path, _) = match subcommand_path(words) {
        Ok(p) => p,
        Err(e) => return Some(e),
    };
    let help = match help_cache.get(&path) {
        Some(h) => h.clone(),
        None => {
            let o = Command::new(env!("CARGO_BIN_EXE_mxbi"))
                .args(&path)
                .arg("--help")
                .output()
                .unwrap();
            if o.status.code() != Some(0) {
                return Some(format!("`mxbi {} --help` exited {:?}", path.join(" "), o.status.code()));
            }
            let h = String::from_utf8_lossy(&o.stdout).to_string();
            help_cache.insert(path.clone(), h.clone());
            h
        }
    };
    for w in &words[path.len()..] {
        if let Some(flag) = w.strip_prefix("--") {
            let flag = flag.split('=').next().unwrap_or("");
            let listed = help.lines().any(|l| {
                l.split(|c: char| c.is_whitespace() || c == ',')
                    .any(|t| t == format!("--{flag}"))
            });
            if !listed {
                return Some(format!("--{flag} is not in `mxbi {} --help`", path.join(" ")));
            }
        }
    }
    if !parse {
        return None;
    }
    let argv = std::iter::once("mxbi".to_string()).chain(words.iter().cloned());
    if let Err(e) = Cli::try_parse_from(argv) {
        use clap::error::ErrorKind;
        if !matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
            return Some(format!("does not parse: {}", cli::clap_error_line(&e)));
        }
    }
    None
}

/// The README's commands are meant to be typed: each must parse.
fn readme_command_errors(readme: &str) -> (usize, Vec<String>) {
    let mut cache = std::collections::HashMap::new();
    let cmds = mxbi_commands(readme);
    let errors = cmds
        .iter()
        .filter_map(|(ln, words)| {
            check_command(words, true, &mut cache).map(|e| format!("README.md:{ln}: mxbi {}: {e}", words.join(" ")))
        })
        .collect();
    (cmds.len(), errors)
}

/// The docs' code blocks also hold synopses (`[--json]`, `--m M`) and
/// printed output (`mxbi fuzz: ...`): their subcommand paths and flags
/// must exist; they need not parse.
fn doc_command_errors(name: &str, text: &str) -> (usize, Vec<String>) {
    let mut cache = std::collections::HashMap::new();
    let mut n = 0;
    let mut errors = Vec::new();
    for (ln, words) in mxbi_commands(text) {
        if words.first().is_some_and(|w| w.ends_with(':')) {
            continue; // output: `mxbi fuzz: dispatch:t.json, seed 1`
        }
        n += 1;
        let words: Vec<String> = words
            .iter()
            .map(|w| w.trim_start_matches('[').trim_end_matches(']').to_string())
            .collect();
        if let Some(e) = check_command(&words, false, &mut cache) {
            errors.push(format!("{name}:{ln}: mxbi {}: {e}", words.join(" ")));
        }
    }
    (n, errors)
}

#[test]
fn every_docs_command_names_real_subcommands_and_flags() {
    let mut total = 0;
    let mut errors = Vec::new();
    for e in std::fs::read_dir(root().join("docs")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "md") {
            let name = format!("docs/{}", p.file_name().unwrap().to_string_lossy());
            let (n, errs) = doc_command_errors(&name, &std::fs::read_to_string(&p).unwrap());
            total += n;
            errors.extend(errs);
        }
    }
    assert!(
        total >= 20,
        "only {total} mxbi commands in docs/*.md: the scan is broken"
    );
    assert!(
        errors.is_empty(),
        "{} doc commands are wrong:\n{}",
        errors.len(),
        errors.join("\n")
    );
}

#[test]
fn every_readme_command_parses_and_its_flags_exist() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let (n, errors) = readme_command_errors(&readme);
    assert!(n >= 20, "only {n} mxbi commands found in README.md: the scan is broken");
    assert!(
        errors.is_empty(),
        "{} README commands are wrong:\n{}",
        errors.len(),
        errors.join("\n")
    );
}

/// Planted mistakes in a README: a wrong subcommand, a flag the subcommand
/// does not have, a value clap refuses, each reported; correct lines not.
#[test]
fn planted_readme_mistakes_are_reported() {
    let readme = "text mxbi bi run is prose\n\
                  ```console\n$ mxbi bi run --subject model:fma --family batch --k 64 --n 8\nmxbi bi rnu is output\n```\n\
                  ```text\nmxbi bi rnu\n```\n\
                  ```sh\n\
                  mxbi bi rnu --subject model:fma --family batch --k 64 --n 8\n\
                  mxbi bi run --subject model:fma --famliy batch --k 64 --n 8\n\
                  $ target/release/mxbi order fma --k -3\n\
                  mxbi bi run --subject model:fma \\\n  --family batch --k 64 --n 8 --json r.json   # fine\n\
                  mxbi formats e2m1\n\
                  ```\n";
    let (n, errors) = readme_command_errors(readme);
    assert_eq!(n, 6, "{errors:?}");
    assert_eq!(errors.len(), 3, "{errors:#?}");
    assert!(
        errors[0].contains("'rnu' is not a subcommand of `mxbi bi`"),
        "{}",
        errors[0]
    );
    assert!(
        errors[1].contains("--famliy is not in `mxbi bi run --help`"),
        "{}",
        errors[1]
    );
    assert!(
        errors[2].contains("does not parse") && errors[2].contains("-3"),
        "{}",
        errors[2]
    );
    // a synopsis in the docs: brackets and placeholders pass, a wrong flag does not
    let doc = "```\nmxbi reveal gen --dir DIR --m M [--json] [--input T|MX]\nmxbi fuzz: model:fma, seed 1\n\
               mxbi reveal solve --dir DIR [--jsno]\n```\n";
    let (n, errors) = doc_command_errors("d.md", doc);
    assert_eq!(n, 2);
    assert_eq!(errors.len(), 2, "{errors:#?}");
    assert!(
        errors[0].contains("--json is not in `mxbi reveal gen --help`"),
        "{}",
        errors[0]
    );
    assert!(errors[1].contains("--jsno is not in"), "{}", errors[1]);
}

#[test]
fn readme_links_every_doc() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let mut unlinked = Vec::new();
    for e in std::fs::read_dir(root().join("docs")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "md") {
            let rel = Path::new("docs").join(p.file_name().unwrap());
            if !readme.contains(&rel.display().to_string()) {
                unlinked.push(rel.display().to_string());
            }
        }
    }
    assert!(unlinked.is_empty(), "README.md does not link {unlinked:?}");
}
