//! Helpers shared by the integration tests: temporary folders, copies of
//! the committed captures, resealing a capture's manifest after an edit,
//! the seed of the sampled cast replay, (`bad_input`) building bad inputs
//! and running the binary on them, (`reveal_runner`) an emulated
//! runner of `mxbi reveal gen|solve` folders, (`vendor_rows`) the
//! committed `vendor` capture's anchor rows and the suite's inputs, and
//! (`trees`) captured tree listings against the shapes of orders.

#![allow(dead_code)] // each test crate uses its own subset

pub mod bad_input;
pub mod layering;
pub mod reveal_runner;
pub mod trees;
pub mod vendor_rows;

use mxbi::device::capture::Manifest;
use mxbi::io::sha256_hex;
use std::path::{Path, PathBuf};

/// A fresh, empty folder under the system temp dir, unique per process and
/// tag, removed (with its contents) when dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let d = std::env::temp_dir().join(format!("mxbi-test-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
        TempDir(d)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// `self/name` (not created).
    pub fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A fresh, empty folder `target/tmp/mxbi-tests/TAG-PID-N`, unique per
/// call (the tests of one crate run in parallel). It lies under cargo's
/// target dir and is kept, so a failing test's files can be looked at.
pub fn fresh_dir(tag: &str) -> PathBuf {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let n = COUNTER.fetch_add(1, Ordering::SeqCst);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("mxbi-tests")
        .join(format!("{tag}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    dir
}

/// `NAME` in one folder per test process and `group`,
/// `target/tmp/mxbi-tests/GROUP-PID` (created on first use; test files
/// name themselves apart). Under cargo's target dir, as `fresh_dir`'s: kept
/// for a look after a failure, and not left in the system temp dir.
pub fn scratch(group: &str, name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("mxbi-tests")
        .join(format!("{group}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    dir.join(name)
}

/// `reference/captures/<name>` of this checkout.
pub fn committed_capture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("reference/captures")
        .join(name)
}

/// Copies the committed capture folder `name` to `into/name` (same folder
/// name, so it is anchored under the same name) and returns the copy.
pub fn copy_capture(name: &str, into: &Path) -> PathBuf {
    let src = committed_capture(name);
    let dst = into.join(name);
    std::fs::create_dir_all(&dst).unwrap();
    for e in std::fs::read_dir(&src).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), dst.join(e.file_name())).unwrap();
        }
    }
    dst
}

/// Recomputes the size and SHA-256 of every file listed in `dir`'s
/// manifest and rewrites the manifest, as someone editing a capture would:
/// afterwards `Capture::verify_all` passes again.
pub fn reseal_manifest(dir: &Path) {
    let path = dir.join("manifest.json");
    let mut m: Manifest = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    for f in &mut m.files {
        let bytes = std::fs::read(dir.join(&f.name)).unwrap();
        f.bytes = bytes.len() as u64;
        f.sha256 = sha256_hex(&bytes);
    }
    let text = serde_json::to_string_pretty(&m).unwrap();
    std::fs::write(&path, format!("{text}\n")).unwrap();
}

/// Replaces the first occurrence of `from` (which must occur) in `dir/file`
/// by `to`.
pub fn edit_file(dir: &Path, file: &str, from: &str, to: &str) {
    let path = dir.join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(from), "{}: no `{from}`", path.display());
    std::fs::write(&path, text.replacen(from, to, 1)).unwrap();
}

/// Seed of the sampled cast replay and where it came from: the environment
/// variable `MXBI_CAST_SAMPLE_SEED` (a decimal or 0x-hex number, or a
/// commit id whose first 16 hex digits are taken) if set, else the commit
/// id of `git rev-parse HEAD` in this checkout (so the sample changes with
/// each commit), else the fixed fallback 0.
pub fn cast_sample_seed() -> (u64, String) {
    if let Ok(v) = std::env::var("MXBI_CAST_SAMPLE_SEED") {
        let seed = parse_seed(&v).unwrap_or_else(|| panic!("MXBI_CAST_SAMPLE_SEED=`{v}`: not a number or commit id"));
        return (seed, format!("MXBI_CAST_SAMPLE_SEED={v}"));
    }
    let head = std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string());
    match head.as_deref().and_then(|h| commit_seed(h).map(|s| (s, h))) {
        Some((seed, h)) => (seed, format!("git HEAD {h}")),
        None => (0, "fixed fallback (no git HEAD)".into()),
    }
}

fn commit_seed(id: &str) -> Option<u64> {
    if id.len() >= 16 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
        u64::from_str_radix(&id[..16], 16).ok()
    } else {
        None
    }
}

fn parse_seed(v: &str) -> Option<u64> {
    let v = v.trim();
    if let Some(hex) = v.strip_prefix("0x") {
        u64::from_str_radix(hex, 16).ok()
    } else {
        v.parse::<u64>().ok().or_else(|| commit_seed(v))
    }
}
