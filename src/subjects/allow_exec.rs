//! Case files are data, not commands (docs/BI.md, "Case files are data:
//! --allow-exec"). A case file (`mxbi-bi-case/1`) whose subject or `vs`
//! subject is `exec:CMD` would start `CMD` through the shell; a case file
//! can come from anywhere (a colleague, a bug report, a fuzz corpus), so
//! the command runs only when the user allows it: `--allow-exec` on the
//! command that reads the file (`mxbi bi run CASE`, `mxbi explain --case`;
//! `allow_exec=True` in Python's `check_case`), or the environment
//! variable `MXBI_ALLOW_EXEC=1` (for CI). An `exec:` subject typed on the
//! command line (`--subject exec:CMD`) is the user's own command and needs
//! neither.

use crate::bi::Case;

/// The environment variable that allows `exec:` subjects of case files
/// when set to exactly `1` (any other value, or unset, does not).
pub const ALLOW_EXEC_ENV: &str = "MXBI_ALLOW_EXEC";

/// Most characters of a command quoted in the refusal (the line stays short).
const MAX_QUOTED: usize = 100;

/// Whether case files may run their `exec:` commands: `flag` (the caller's
/// `--allow-exec`), or [`ALLOW_EXEC_ENV`] set to `1`.
pub fn allowed(flag: bool) -> bool {
    flag || std::env::var_os(ALLOW_EXEC_ENV).is_some_and(|v| v == "1")
}

/// Whether a subject spec names an external command (`exec:CMD`, or a bare
/// `exec`, which the subject parsers read as an empty command).
pub fn is_exec(spec: &str) -> bool {
    spec.split_once(':').map_or(spec, |(kind, _)| kind) == "exec"
}

/// The first `exec:` subject a case names, with its role: `subject`, then
/// `vs subject`. None: the case runs no external command.
pub fn exec_subject(case: &Case) -> Option<(&'static str, &str)> {
    [
        ("subject", Some(case.subject.as_str())),
        ("vs subject", case.vs.as_deref()),
    ]
    .into_iter()
    .find_map(|(role, spec)| spec.filter(|s| is_exec(s)).map(|s| (role, s)))
}

/// Ok when the case `source` (its file name, for the message) names no
/// `exec:` subject or [`allowed`]`(flag)`; else the refusal, one line:
/// `SOURCE: subject exec:CMD would run a command; pass HOW (or set
/// MXBI_ALLOW_EXEC=1) to allow it` (`how`: the caller's spelling of the
/// permission, `--allow-exec` or `allow_exec=True`; a long command is cut
/// at 100 characters, control characters shown as spaces).
pub fn check(source: &str, case: &Case, flag: bool, how: &str) -> Result<(), String> {
    match exec_subject(case) {
        Some((role, spec)) if !allowed(flag) => Err(format!(
            "{source}: {role} {} would run a command; pass {how} (or set {ALLOW_EXEC_ENV}=1) to allow it",
            quoted(spec)
        )),
        _ => Ok(()),
    }
}

/// `spec` on one short line: control characters as spaces, at most
/// [`MAX_QUOTED`] characters (then `...`).
fn quoted(spec: &str) -> String {
    let clean: String = spec.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    match clean.char_indices().nth(MAX_QUOTED) {
        Some((cut, _)) => format!("{}...", &clean[..cut]),
        None => clean,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(subject: &str, vs: Option<&str>) -> Case {
        let vs = vs.map_or(String::new(), |v| format!(r#", "vs": "{v}""#));
        Case::parse(
            "c.json",
            &format!(r#"{{"schema": "mxbi-bi-case/1", "subject": "{subject}"{vs}, "k": 8, "n": 4}}"#),
        )
        .unwrap()
    }

    #[test]
    fn exec_subjects_are_found_in_either_role() {
        assert_eq!(exec_subject(&case("model:fma", None)), None);
        assert_eq!(exec_subject(&case("dispatch:t.json", Some("model:fma"))), None);
        assert_eq!(
            exec_subject(&case("exec:sh r.sh", None)),
            Some(("subject", "exec:sh r.sh"))
        );
        assert_eq!(
            exec_subject(&case("model:fma", Some("exec:sh r.sh"))),
            Some(("vs subject", "exec:sh r.sh"))
        );
        assert!(is_exec("exec"));
        assert!(!is_exec("executable:x"));
        assert!(!is_exec("model:exec"));
    }

    #[test]
    fn the_refusal_is_one_short_line() {
        // the flag allows whatever the environment says
        assert_eq!(
            check("c.json", &case("exec:sh r.sh", None), true, "--allow-exec"),
            Ok(())
        );
        assert_eq!(check("c.json", &case("model:fma", None), false, "--allow-exec"), Ok(()));
        let long = format!("exec:{}\\n{}", "x".repeat(150), "y");
        let c = case(&long, None);
        assert_eq!(quoted(&c.subject).chars().count(), MAX_QUOTED + 3);
        assert!(!quoted("exec:a\nb").contains('\n'));
        if !allowed(false) {
            let e = check("c.json", &c, false, "--allow-exec").unwrap_err();
            assert!(e.starts_with("c.json: subject exec:xxx"), "{e}");
            assert!(
                e.ends_with("pass --allow-exec (or set MXBI_ALLOW_EXEC=1) to allow it"),
                "{e}"
            );
            assert!(e.len() < 200 && !e.contains('\n'), "{e}");
        }
    }
}
