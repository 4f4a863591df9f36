//! Captures: bytes produced on a GPU, stored under `reference/captures/`
//! with a manifest (the exact command, GPU, driver and library versions)
//! and a SHA-256 per file, so a machine without a GPU can replay them
//! against the CPU model and detect any edit of the data.
//!
//! Layout of one capture folder: `manifest.json` plus the data files it
//! lists. Data files are written by the suite that owns the folder.
//!
//! # Anchors
//!
//! A manifest's digests only show that the data files were not edited
//! *without* editing the manifest. The SHA-256 of every committed manifest
//! is therefore recorded outside the captures, in [`ANCHOR_FILE`]
//! (`reference/captures.sha256`, `sha256sum` format, paths relative to
//! `reference/`), which is compiled into mxbi. [`Capture::open_anchored`]
//! refuses a capture folder whose manifest is not the anchored one, so
//! changing any captured byte fails CI unless that file changes too,
//! visibly in review. The anchor lines of a new capture are printed by
//! `cd reference && sha256sum captures/*/manifest.json` (or
//! [`anchor_line`]); `sha256sum -c captures.sha256` checks them.

use super::{DeviceError, Result};
use crate::io::digest::{hex_lower, sha256_hex};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// Where the anchors of the committed captures live (repository-relative).
pub const ANCHOR_FILE: &str = "reference/captures.sha256";

/// The anchor file's text as compiled in.
const ANCHORS: &str = include_str!("../../reference/captures.sha256");

/// The anchored captures: (folder name under `reference/captures/`, SHA-256
/// of its `manifest.json`), in file order. Each line of [`ANCHOR_FILE`] is
/// `<64 hex digits>  captures/<folder>/manifest.json`; anything else is an
/// error, as is a folder named twice.
pub fn anchors() -> Result<Vec<(String, String)>> {
    parse_anchors(ANCHORS)
}

fn parse_anchors(text: &str) -> Result<Vec<(String, String)>> {
    let mut out: Vec<(String, String)> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let bad = || DeviceError::Capture(format!("{ANCHOR_FILE} line {}: malformed anchor `{line}`", i + 1));
        let (hash, path) = line.split_once("  ").ok_or_else(bad)?;
        let folder = path
            .strip_prefix("captures/")
            .and_then(|p| p.strip_suffix("/manifest.json"))
            .ok_or_else(bad)?;
        if hash.len() != 64
            || !hash.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
            || folder.is_empty()
            || folder.contains('/')
        {
            return Err(bad());
        }
        if out.iter().any(|(f, _)| f == folder) {
            return Err(DeviceError::Capture(format!(
                "{ANCHOR_FILE} line {}: capture `{folder}` anchored twice",
                i + 1
            )));
        }
        out.push((folder.to_string(), hash.to_string()));
    }
    Ok(out)
}

/// The folder name a capture is anchored under: the last component of
/// `dir` (after resolving `.` and `..`).
fn folder_name(dir: &Path) -> Result<String> {
    let resolved = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    resolved
        .file_name()
        .and_then(|n| n.to_str())
        .map(str::to_string)
        .ok_or_else(|| DeviceError::Capture(format!("{}: not a capture folder name", dir.display())))
}

/// The anchor line of the capture folder `dir` as it is now (for
/// [`ANCHOR_FILE`]).
pub fn anchor_line(dir: &Path) -> Result<String> {
    let path = dir.join("manifest.json");
    let bytes = std::fs::read(&path).map_err(io_err(&path))?;
    Ok(format!(
        "{}  captures/{}/manifest.json",
        sha256_hex(&bytes),
        folder_name(dir)?
    ))
}

/// Checks manifest bytes read from `dir` against the anchors in `text`.
fn check_anchor(text: &str, dir: &Path, manifest: &[u8]) -> Result<()> {
    let folder = folder_name(dir)?;
    let actual = sha256_hex(manifest);
    let path = dir.join("manifest.json");
    let line = format!("{actual}  captures/{folder}/manifest.json");
    match parse_anchors(text)?.into_iter().find(|(f, _)| *f == folder) {
        Some((_, anchored)) if anchored == actual => Ok(()),
        Some((_, anchored)) => Err(DeviceError::Capture(format!(
            "{}: SHA-256 {actual} is not the one anchored in {ANCHOR_FILE} ({anchored}): the capture was edited; \
             if it is a new GPU run, its line in {ANCHOR_FILE} must become `{line}`",
            path.display()
        ))),
        None => Err(DeviceError::Capture(format!(
            "{}: no capture `{folder}` is anchored in {ANCHOR_FILE}; a new capture needs the line `{line}` there",
            path.display()
        ))),
    }
}

/// One data file of a capture and its integrity check.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct FileEntry {
    pub name: String,
    pub bytes: u64,
    pub sha256: String,
}

/// `manifest.json` of a capture folder.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Manifest {
    /// Which suite wrote it (`conform`, `probe`, `casts`, `vendor`, ...).
    pub suite: String,
    /// The command that produced it (the runner script line when run by
    /// `reference/device/run.sh`, else this process's argv).
    pub command: String,
    /// `mxbi` version that produced it.
    pub mxbi_version: String,
    /// UTC time of the run (from `MXBI_CAPTURE_DATE`, else UNIX seconds).
    pub created: String,
    /// `DeviceInfo` as JSON (kept untyped so CI needs no `cuda` feature).
    pub device: serde_json::Value,
    pub files: Vec<FileEntry>,
    /// Free-form observations of the run.
    #[serde(default)]
    pub notes: Vec<String>,
}

/// The first 8 bytes of SHA-256, as a compact per-row fingerprint.
pub fn digest64(bytes: &[u8]) -> u64 {
    let d = Sha256::digest(bytes);
    u64::from_le_bytes(d[..8].try_into().expect("8 bytes"))
}

/// An output's bits with NaN compared as a class: every NaN becomes
/// 0x7FFFFFFF (the tensor cores' NaN) before digests and comparisons.
pub fn canonical_bits(x: f32) -> u32 {
    if x.is_nan() {
        crate::gemm::step::FUSED_NAN
    } else {
        x.to_bits()
    }
}

/// SHA-256 of the little-endian bit patterns of f32 values.
pub fn f32_digest(values: &[f32]) -> String {
    let mut h = Sha256::new();
    for v in values {
        h.update(v.to_bits().to_le_bytes());
    }
    hex_lower(&h.finalize())
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> DeviceError + '_ {
    move |source| DeviceError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// The command recorded in a manifest.
pub fn current_command() -> String {
    std::env::var("MXBI_CAPTURE_COMMAND").unwrap_or_else(|_| std::env::args().collect::<Vec<_>>().join(" "))
}

fn created() -> String {
    std::env::var("MXBI_CAPTURE_DATE").unwrap_or_else(|_| {
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        format!("unix:{secs}")
    })
}

/// Writes the data files of one capture folder, then its manifest.
pub struct CaptureWriter {
    dir: PathBuf,
    files: Vec<FileEntry>,
}

impl CaptureWriter {
    pub fn create(dir: &Path) -> Result<CaptureWriter> {
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        Ok(CaptureWriter {
            dir: dir.to_path_buf(),
            files: Vec::new(),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Writes `name` (a plain file name) and records its digest.
    pub fn put(&mut self, name: &str, bytes: &[u8]) -> Result<()> {
        check_name(name)?;
        let path = self.dir.join(name);
        std::fs::write(&path, bytes).map_err(io_err(&path))?;
        self.files.retain(|f| f.name != name);
        self.files.push(FileEntry {
            name: name.into(),
            bytes: bytes.len() as u64,
            sha256: sha256_hex(bytes),
        });
        Ok(())
    }

    /// Writes pretty JSON.
    pub fn put_json<T: Serialize>(&mut self, name: &str, value: &T) -> Result<()> {
        let text = serde_json::to_string_pretty(value).map_err(|e| DeviceError::Capture(e.to_string()))?;
        self.put(name, format!("{text}\n").as_bytes())
    }

    /// Writes `manifest.json` and returns it.
    pub fn finish(self, suite: &str, device: serde_json::Value, notes: Vec<String>) -> Result<Manifest> {
        let manifest = Manifest {
            suite: suite.into(),
            command: current_command(),
            mxbi_version: env!("CARGO_PKG_VERSION").into(),
            created: created(),
            device,
            files: self.files,
            notes,
        };
        let text = serde_json::to_string_pretty(&manifest).map_err(|e| DeviceError::Capture(e.to_string()))?;
        let path = self.dir.join("manifest.json");
        std::fs::write(&path, format!("{text}\n")).map_err(io_err(&path))?;
        Ok(manifest)
    }
}

fn check_name(name: &str) -> Result<()> {
    if name.is_empty()
        || name == "manifest.json"
        || !name.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
    {
        return Err(DeviceError::Capture(format!("bad capture file name `{name}`")));
    }
    Ok(())
}

/// A capture folder opened for replay: the manifest, with every listed
/// file's size and SHA-256 verified on read.
pub struct Capture {
    pub dir: PathBuf,
    pub manifest: Manifest,
}

impl Capture {
    /// Opens a capture folder without checking its anchor (synthetic and
    /// fresh captures); committed captures are opened with
    /// [`Capture::open_anchored`].
    pub fn open(dir: &Path) -> Result<Capture> {
        let path = dir.join("manifest.json");
        let bytes = std::fs::read(&path).map_err(io_err(&path))?;
        Self::parse(dir, &bytes)
    }

    /// Opens a capture folder whose `manifest.json` has exactly the SHA-256
    /// anchored for its folder name in [`ANCHOR_FILE`]; any other manifest
    /// (edited, or a new capture not yet anchored) is refused with a message
    /// naming the manifest, the anchor file and the line it would need.
    pub fn open_anchored(dir: &Path) -> Result<Capture> {
        Self::open_anchored_in(ANCHORS, dir)
    }

    fn open_anchored_in(anchors: &str, dir: &Path) -> Result<Capture> {
        let path = dir.join("manifest.json");
        let bytes = std::fs::read(&path).map_err(io_err(&path))?;
        check_anchor(anchors, dir, &bytes)?;
        Self::parse(dir, &bytes)
    }

    fn parse(dir: &Path, bytes: &[u8]) -> Result<Capture> {
        let path = dir.join("manifest.json");
        let manifest: Manifest =
            serde_json::from_slice(bytes).map_err(|e| DeviceError::Capture(format!("{}: {e}", path.display())))?;
        Ok(Capture {
            dir: dir.to_path_buf(),
            manifest,
        })
    }

    /// Reads a listed file and checks it against the manifest.
    pub fn read(&self, name: &str) -> Result<Vec<u8>> {
        let entry = self
            .manifest
            .files
            .iter()
            .find(|f| f.name == name)
            .ok_or_else(|| DeviceError::Capture(format!("{} lists no file `{name}`", self.dir.display())))?;
        let path = self.dir.join(name);
        let bytes = std::fs::read(&path).map_err(io_err(&path))?;
        if bytes.len() as u64 != entry.bytes || sha256_hex(&bytes) != entry.sha256 {
            return Err(DeviceError::Capture(format!(
                "{} does not match its manifest digest (edited or truncated)",
                path.display()
            )));
        }
        Ok(bytes)
    }

    pub fn read_json<T: serde::de::DeserializeOwned>(&self, name: &str) -> Result<T> {
        let bytes = self.read(name)?;
        serde_json::from_slice(&bytes).map_err(|e| DeviceError::Capture(format!("{name}: {e}")))
    }

    /// Verifies every listed file.
    pub fn verify_all(&self) -> Result<()> {
        for f in &self.manifest.files {
            self.read(&f.name)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_tamper_detection() {
        let dir = std::env::temp_dir().join(format!("mxbi-capture-{}", std::process::id()));
        let mut w = CaptureWriter::create(&dir).unwrap();
        w.put("a.bin", &[1, 2, 3]).unwrap();
        w.put_json("b.json", &vec![1u32, 2]).unwrap();
        assert!(w.put("../x", b"").is_err());
        w.finish("test", serde_json::json!({"name": "none"}), vec![]).unwrap();
        let c = Capture::open(&dir).unwrap();
        c.verify_all().unwrap();
        assert_eq!(c.read("a.bin").unwrap(), vec![1, 2, 3]);
        std::fs::write(dir.join("a.bin"), [1, 2, 4]).unwrap();
        assert!(c.read("a.bin").is_err());
        assert!(c.read("missing").is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn anchors_parse_and_refuse() {
        let dir = std::env::temp_dir().join(format!("mxbi-anchor-{}", std::process::id()));
        let cap = dir.join("demo");
        let mut w = CaptureWriter::create(&cap).unwrap();
        w.put("a.bin", &[1, 2, 3]).unwrap();
        w.finish("test", serde_json::json!({}), vec![]).unwrap();
        let line = anchor_line(&cap).unwrap();
        let good = format!("{}  captures/other/manifest.json\n{line}\n", "0".repeat(64));
        assert_eq!(parse_anchors(&good).unwrap().len(), 2);
        Capture::open_anchored_in(&good, &cap).unwrap();
        // the same folder with another manifest digest, and no anchor at all
        let wrong = format!("{}  captures/demo/manifest.json\n", "1".repeat(64));
        let err = Capture::open_anchored_in(&wrong, &cap).err().unwrap().to_string();
        assert!(
            err.contains("is not the one anchored in reference/captures.sha256"),
            "{err}"
        );
        assert!(err.contains(&line), "{err}");
        let err = Capture::open_anchored_in("", &cap).err().unwrap().to_string();
        assert!(err.contains("no capture `demo` is anchored"), "{err}");
        // malformed anchor files
        for bad in [
            "abc  captures/demo/manifest.json",
            &format!("{}  demo/manifest.json", "0".repeat(64)),
            &format!("{} captures/demo/manifest.json", "0".repeat(64)),
            &format!("{}  captures/a/b/manifest.json", "0".repeat(64)),
            &format!("{}  captures/demo/manifest.json", "A".repeat(64)),
            &format!("{line}\n{line}"),
        ] {
            assert!(parse_anchors(bad).is_err(), "{bad}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn compiled_in_anchors_name_every_committed_capture() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("reference/captures");
        let anchored = anchors().unwrap();
        let mut folders: Vec<String> = std::fs::read_dir(&root)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.path().join("manifest.json").is_file())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        folders.sort();
        let mut names: Vec<String> = anchored.iter().map(|a| a.0.clone()).collect();
        names.sort();
        assert_eq!(names, folders, "{ANCHOR_FILE} must anchor exactly the capture folders");
        for f in &folders {
            Capture::open_anchored(&root.join(f)).unwrap();
        }
    }
}
