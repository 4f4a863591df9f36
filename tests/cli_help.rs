//! The command line explains itself: `mxbi --help` says what batch
//! invariance is and where to start, `mxbi` alone prints the whole help,
//! every argument of every subcommand has a help text, and every argument
//! an empty invocation reports missing says in its help that it is
//! required. A walk over clap's command tree, so a new flag without help
//! fails here at once.

use clap::CommandFactory;
use cli::Cli;

/// The CLI is a private module of the `mxbi` binary, not part of the
/// library: this test compiles its source as a module of its own to read
/// the clap definitions.
#[allow(dead_code, unused_imports, unused_macros)]
#[path = "../src/cli/mod.rs"]
mod cli;
use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mxbi"))
}

/// Every command of the tree with its path (`["mxbi", "bi", "run"]`).
fn walk(cmd: &clap::Command, path: Vec<String>, out: &mut Vec<(Vec<String>, clap::Command)>) {
    out.push((path.clone(), cmd.clone()));
    for sub in cmd.get_subcommands() {
        let mut p = path.clone();
        p.push(sub.get_name().to_string());
        walk(sub, p, out);
    }
}

fn commands() -> Vec<(Vec<String>, clap::Command)> {
    let mut root = Cli::command();
    root.build();
    let mut out = Vec::new();
    walk(&root, vec!["mxbi".into()], &mut out);
    out
}

fn help_of(arg: &clap::Arg) -> String {
    arg.get_long_help()
        .or_else(|| arg.get_help())
        .map(|h| h.to_string())
        .unwrap_or_default()
}

/// The arguments of `cmd` without help text, as `mxbi bi run --k`.
fn args_without_help(cmds: &[(Vec<String>, clap::Command)]) -> Vec<String> {
    let mut bare = Vec::new();
    for (path, cmd) in cmds {
        for arg in cmd.get_arguments() {
            let id = arg.get_id().as_str();
            if id == "help" || id == "version" {
                continue;
            }
            if help_of(arg).trim().is_empty() {
                let name = arg
                    .get_long()
                    .map(|l| format!("--{l}"))
                    .unwrap_or_else(|| format!("<{id}>"));
                bare.push(format!("{} {name}", path.join(" ")));
            }
        }
    }
    bare
}

#[test]
fn every_argument_has_help() {
    let cmds = commands();
    assert!(cmds.len() > 30, "the walk found only {} commands", cmds.len());
    let bare = args_without_help(&cmds);
    assert!(
        bare.is_empty(),
        "{} arguments without help:\n{}",
        bare.len(),
        bare.join("\n")
    );
}

/// The arguments clap reports missing when `path` is given nothing else.
fn missing_on_empty_invocation(path: &[String], root: &clap::Command) -> Vec<String> {
    match root.clone().try_get_matches_from(path) {
        Ok(_) => Vec::new(),
        Err(e) => match e.get(clap::error::ContextKind::InvalidArg) {
            Some(clap::error::ContextValue::Strings(v))
                if e.kind() == clap::error::ErrorKind::MissingRequiredArgument =>
            {
                v.clone()
            }
            _ => Vec::new(),
        },
    }
}

/// An argument that must be given is marked: one that is always required
/// by clap's usage line (no brackets), one that is required unless another
/// is given (`bi run --k` unless a case file or a matrix), which the usage
/// line shows as optional, by the word "required" in its help.
#[test]
fn required_arguments_say_so() {
    let mut root = Cli::command();
    root.build();
    let mut unmarked = Vec::new();
    let mut seen = 0;
    for (path, cmd) in commands() {
        if cmd.has_subcommands() {
            continue;
        }
        for shown in missing_on_empty_invocation(&path, &root) {
            seen += 1;
            // clap shows `--k <K>` or `<INPUT>`: the first word names the arg
            let word = shown.split_whitespace().next().unwrap_or("").trim_end_matches("...");
            let arg = cmd.get_arguments().find(|a| match a.get_long() {
                Some(l) => word == format!("--{l}"),
                None => {
                    a.get_value_names()
                        .is_some_and(|v| v.iter().any(|n| word == format!("<{n}>")))
                        || word.eq_ignore_ascii_case(&format!("<{}>", a.get_id()))
                }
            });
            let Some(arg) = arg else {
                unmarked.push(format!("{}: cannot find {shown}", path.join(" ")));
                continue;
            };
            if arg.is_required_set() {
                // always required: clap's usage line shows it without
                // brackets (`Usage: mxbi cast [OPTIONS] --to <TO> <INPUT>`)
                continue;
            }
            if !help_of(arg).to_lowercase().contains("required") {
                unmarked.push(format!("{} {shown}", path.join(" ")));
            }
        }
    }
    assert!(seen >= 4, "only {seen} missing arguments seen: the walk is broken");
    assert!(
        unmarked.is_empty(),
        "{} required arguments whose help does not say so:\n{}",
        unmarked.len(),
        unmarked.join("\n")
    );
}

/// `mxbi --help` defines batch invariance and points at where to start.
#[test]
fn top_level_help_defines_batch_invariance_and_where_to_start() {
    let o = bin().arg("--help").output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    let out = String::from_utf8_lossy(&o.stdout);
    for needle in [
        "batch-invariant",
        "mxbi demo",
        "mxbi bi run --help",
        "mxbi explain",
        "mxbi fuzz",
    ] {
        assert!(out.contains(needle), "`mxbi --help` lacks {needle:?}:\n{out}");
    }
}

/// A K beyond the limit is refused in the same words by the fuzzer as by
/// `bi run` and `order` (tests/cli.rs checks those).
#[test]
fn fuzz_refuses_k_beyond_the_limit_in_the_same_words() {
    let dir = std::env::temp_dir().join(format!("mxbi-fuzz-k-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let o = bin()
        .current_dir(&dir)
        .args(["fuzz", "--subject", "model:fma", "--max-k", "4194305"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    // refused before the header and before --out is made
    assert!(o.stdout.is_empty(), "{}", String::from_utf8_lossy(&o.stdout));
    assert!(!dir.join("mxbi-fuzz").exists(), "--out was made for a refused run");
    let _ = std::fs::remove_dir_all(&dir);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        err.trim_end(),
        "mxbi: error: --max-k = 4194305: K must be at most 4194304 (mxbi's K limit, mxbi::limits::MAX_K = 2^22)"
    );
}

/// The one K limit is stated in the user's words where K is asked for.
#[test]
fn k_help_states_the_k_limit() {
    let limit = mxbi::limits::MAX_K.to_string();
    for args in [
        ["bi", "run", "--help"],
        ["bi", "gen", "--help"],
        ["order", "--help", ""],
        ["fuzz", "--help", ""],
    ] {
        let args: Vec<&str> = args.into_iter().filter(|a| !a.is_empty()).collect();
        let o = bin().args(&args).output().unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            out.contains(&format!("{limit} (mxbi's K limit")),
            "mxbi {args:?}:\n{out}"
        );
    }
}

/// `mxbi` alone prints the whole help (every subcommand listed), on
/// stderr, with exit code 2 (a command was expected: nothing ran); the
/// same for every command group given no subcommand (`mxbi bi`, `mxbi op`,
/// `mxbi device`).
#[test]
fn no_arguments_print_the_whole_help_with_exit_2() {
    let root = Cli::command();
    let mut groups: Vec<(Vec<&str>, &clap::Command)> = vec![(vec![], &root)];
    for sub in root.get_subcommands() {
        if sub.is_subcommand_required_set() {
            groups.push((vec![sub.get_name()], sub));
        }
    }
    assert!(groups.len() >= 4, "{} groups", groups.len());
    for (args, group) in groups {
        let o = bin().args(&args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "mxbi {args:?}");
        assert!(o.stdout.is_empty(), "mxbi {args:?} wrote to stdout");
        let err = String::from_utf8_lossy(&o.stderr);
        for sub in group.get_subcommands() {
            assert!(
                err.contains(&format!("  {} ", sub.get_name())) || err.contains(&format!("  {}\n", sub.get_name())),
                "mxbi {args:?}: {} not listed:\n{err}",
                sub.get_name()
            );
        }
        assert!(err.lines().count() > 5, "mxbi {args:?}: one line only:\n{err}");
    }
    let err = String::from_utf8_lossy(&bin().output().unwrap().stderr).to_string();
    assert!(err.contains("batch-invariant"), "{err}");
}

/// One K limit: the checker, the fuzzer (which bounds K by the checker's
/// limits) and the order compiler accept exactly `mxbi::limits::MAX_K` and
/// refuse one more in the same words.
#[test]
fn one_k_limit_for_the_checker_and_the_order_compiler() {
    use mxbi::bi::{CheckOptions, Family, RowPos};
    use mxbi::limits::{k_limit_error, MAX_K};
    assert_eq!(mxbi::bi::Limits::MAX_K, MAX_K);
    let opts = |k| CheckOptions {
        families: vec![Family::Batch],
        ms: vec![1],
        k,
        n: 1,
        positions: vec![RowPos::Index(0)],
        seed: 1,
        input: mxbi::order::InType::F32,
        repeats: 3,
        confirm: 0,
    };
    assert_eq!(opts(MAX_K).validate(false), Ok(()));
    assert_eq!(opts(MAX_K + 1).validate(false), Err(k_limit_error("K", MAX_K + 1)));
    let fma: mxbi::order::Order = "fma".parse().unwrap();
    assert!(fma.check_size(MAX_K).is_ok());
    let e = fma.check_size(MAX_K + 1).unwrap_err().to_string();
    assert!(e.contains(&k_limit_error("K", MAX_K + 1)), "{e}");
}
