//! The regression corpus: a folder of minimal failing cases
//! (`mxbi-bi-case/1` files, `case-<digest>.json`), replayed before any new
//! case. A case belongs to the subject its name names (`mxbi fuzz:
//! SUBJECT`); others in the folder are left alone.

use super::FuzzError;
use crate::bi::{Case, MAX_CASE_BYTES};
use sha2::{Digest, Sha256};
use std::path::{Component, Path, PathBuf};

/// Most files a corpus folder may hold.
pub const MAX_CORPUS_FILES: usize = 10_000;

/// A case file's text: pretty JSON with a final newline.
pub fn case_text(case: &Case) -> String {
    let mut s = serde_json::to_string_pretty(case).expect("a case serialises");
    s.push('\n');
    s
}

/// Writes `text` to `path` whole or not at all (a temporary file, then a rename).
pub fn write_atomic(path: &Path, text: &str) -> Result<(), FuzzError> {
    let tmp = path.with_extension("json.partial");
    std::fs::write(&tmp, text)
        .and_then(|_| std::fs::rename(&tmp, path))
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            FuzzError::Broken(format!("{}: {e}", path.display()))
        })
}

/// Saves a case into the corpus folder `dir` (created if absent) as
/// `case-<first 16 hex digits of its SHA-256>.json`; a relative
/// `dispatch:` path in its subject is rewritten relative to `dir`.
pub fn save_case(dir: &Path, case: &Case) -> Result<PathBuf, FuzzError> {
    std::fs::create_dir_all(dir).map_err(|e| FuzzError::Broken(format!("{}: {e}", dir.display())))?;
    let mut c = case.clone();
    c.subject = relative_spec(&c.subject, dir);
    let text = case_text(&c);
    let digest = Sha256::digest(text.as_bytes());
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    let path = dir.join(format!("case-{hex}.json"));
    write_atomic(&path, &text)?;
    Ok(path)
}

/// Every case file of a corpus folder, by file name (an absent folder is
/// an empty corpus). Err: a file that is not a case (one line naming it).
pub fn load_corpus(dir: &Path) -> Result<Vec<(PathBuf, Case)>, FuzzError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(FuzzError::BadInput(format!("corpus {}: {e}", dir.display()))),
    };
    let mut paths = Vec::new();
    for e in entries {
        let p = e
            .map_err(|e| FuzzError::BadInput(format!("corpus {}: {e}", dir.display())))?
            .path();
        if p.extension().is_some_and(|x| x == "json") && p.is_file() {
            paths.push(p);
            if paths.len() > MAX_CORPUS_FILES {
                return Err(FuzzError::BadInput(format!(
                    "corpus {}: more than {MAX_CORPUS_FILES} case files",
                    dir.display()
                )));
            }
        }
    }
    paths.sort();
    let mut out = Vec::with_capacity(paths.len());
    for p in paths {
        let name = p.display().to_string();
        let len = std::fs::metadata(&p)
            .map_err(|e| FuzzError::BadInput(format!("{name}: {e}")))?
            .len();
        if len > MAX_CASE_BYTES {
            return Err(FuzzError::BadInput(format!(
                "{name}: {len} bytes (a case has at most {MAX_CASE_BYTES})"
            )));
        }
        let text = std::fs::read_to_string(&p).map_err(|e| FuzzError::BadInput(format!("{name}: {e}")))?;
        let case = Case::parse(&name, &text).map_err(FuzzError::BadInput)?;
        out.push((p, case));
    }
    Ok(out)
}

/// `spec` as a case file in folder `dir` must spell it: a relative
/// `dispatch:PATH` (relative to the working directory) becomes relative to
/// `dir` (`mxbi bi run` resolves it against the case file's folder); any
/// other spec is unchanged. Unchanged too when either path cannot be
/// resolved.
pub fn relative_spec(spec: &str, dir: &Path) -> String {
    let Some(p) = spec.strip_prefix("dispatch:") else {
        return spec.to_string();
    };
    if Path::new(p).is_absolute() {
        return spec.to_string();
    }
    match (std::fs::canonicalize(p), std::fs::canonicalize(dir)) {
        (Ok(target), Ok(base)) => format!("dispatch:{}", relative(&target, &base).display()),
        _ => spec.to_string(),
    }
}

/// `target` relative to the folder `base` (both absolute, canonical).
fn relative(target: &Path, base: &Path) -> PathBuf {
    let t: Vec<Component> = target.components().collect();
    let b: Vec<Component> = base.components().collect();
    let common = t.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut out = PathBuf::new();
    for _ in common..b.len() {
        out.push("..");
    }
    for c in &t[common..] {
        out.push(c.as_os_str());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths() {
        assert_eq!(
            relative(Path::new("/a/b/t.json"), Path::new("/a/c/d")),
            PathBuf::from("../../b/t.json")
        );
        assert_eq!(
            relative(Path::new("/a/t.json"), Path::new("/a")),
            PathBuf::from("t.json")
        );
        assert_eq!(relative_spec("model:fma", Path::new("/x")), "model:fma");
        assert_eq!(
            relative_spec("dispatch:/abs/t.json", Path::new("/x")),
            "dispatch:/abs/t.json"
        );
    }
}
