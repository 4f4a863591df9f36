//! The README's one-minute tour shows real output: every `console` block of
//! README.md is run (its `$ ` lines, in order, in one fresh folder, with
//! this build's `mxbi` first on PATH), and every output line the README
//! shows must be a line of what the commands printed. `...` stands for
//! lines left out; lines with wall times (`cases/s`) are not compared.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A console block: its commands and the output lines shown under them.
struct Block {
    line: usize,
    commands: Vec<String>,
    shown: Vec<String>,
}

fn console_blocks(markdown: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut cur: Option<Block> = None;
    for (i, line) in markdown.lines().enumerate() {
        let fence = line.trim_start().strip_prefix("```");
        match (&mut cur, fence) {
            (None, Some("console")) => {
                cur = Some(Block {
                    line: i + 1,
                    commands: Vec::new(),
                    shown: Vec::new(),
                })
            }
            (Some(_), Some(_)) => out.push(cur.take().unwrap()),
            (Some(b), None) => match line.strip_prefix("$ ") {
                Some(cmd) => b.commands.push(cmd.to_string()),
                None => b.shown.push(line.to_string()),
            },
            _ => {}
        }
    }
    out
}

/// Runs `commands` in `dir` through `sh`, `mxbi` resolving to this build;
/// returns everything printed on stdout.
fn run_block(commands: &[String], dir: &Path) -> String {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_mxbi"));
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut printed = String::new();
    for cmd in commands {
        let o = Command::new("sh")
            .arg("-c")
            .arg(cmd)
            .current_dir(dir)
            .env("PATH", &path)
            .output()
            .unwrap();
        assert!(
            matches!(o.status.code(), Some(0 | 1)),
            "`{cmd}` exited {:?}: {}",
            o.status.code(),
            String::from_utf8_lossy(&o.stderr)
        );
        printed.push_str(&String::from_utf8_lossy(&o.stdout));
    }
    printed
}

/// The shown lines that the real output lacks.
fn unreal_lines(block: &Block, printed: &str) -> Vec<String> {
    let real: std::collections::HashSet<&str> = printed.lines().map(str::trim_end).collect();
    block
        .shown
        .iter()
        .map(|l| l.trim_end())
        .filter(|l| !l.is_empty() && l.trim() != "..." && !l.contains("cases/s"))
        .filter(|l| !real.contains(l))
        .map(str::to_string)
        .collect()
}

#[test]
fn the_readme_tour_output_is_what_mxbi_prints() {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let blocks = console_blocks(&readme);
    assert!(blocks.len() >= 3, "only {} console blocks in README.md", blocks.len());
    let dir = std::env::temp_dir().join(format!("mxbi-readme-tour-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut errors = Vec::new();
    let mut compared = 0;
    for b in &blocks {
        let printed = run_block(&b.commands, &dir);
        compared += b.shown.len();
        for l in unreal_lines(b, &printed) {
            errors.push(format!("README.md block at line {}: not printed: {l}", b.line));
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(compared >= 10, "only {compared} output lines shown");
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

/// A shown line that the command does not print is reported; `...` and
/// lines the command prints are not.
#[test]
fn a_planted_output_line_is_reported() {
    let md = "```console\n$ mxbi formats\nformat  bits            max  emax  inf  nan\n...\ne4m3       8  9.9e9 8 no yes\n```\n";
    let blocks = console_blocks(md);
    assert_eq!(blocks.len(), 1);
    let dir = std::env::temp_dir().join(format!("mxbi-readme-plant-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let printed = run_block(&blocks[0].commands, &dir);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(unreal_lines(&blocks[0], &printed), ["e4m3       8  9.9e9 8 no yes"]);
}
