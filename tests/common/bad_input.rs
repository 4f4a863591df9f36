//! Building bad inputs and running the `mxbi` binary on them, for the
//! malformed-input batteries: `.npy` images with any header, the paths a
//! failed command must not leave behind, and the "exit 2, one line"
//! assertion.

use std::path::Path;
use std::process::Command;

/// A `.npy` file: version 1.0 header `dict` (padded to 64 bytes) + `data`.
pub fn npy(dict: &str, data: &[u8]) -> Vec<u8> {
    let mut h = dict.to_string();
    while !(10 + h.len() + 1).is_multiple_of(64) {
        h.push(' ');
    }
    h.push('\n');
    let mut v = b"\x93NUMPY\x01\x00".to_vec();
    v.extend((h.len() as u16).to_le_bytes());
    v.extend(h.as_bytes());
    v.extend(data);
    v
}

/// `n` little-endian f32 values 0, 0.5, 1, ...
pub fn f32s(n: usize) -> Vec<u8> {
    (0..n).flat_map(|i| (i as f32 * 0.5).to_le_bytes()).collect()
}

/// A `<f4` `.npy` of the given shape (Python tuple syntax) and `n` values.
pub fn f32_npy(shape: &str, n: usize) -> Vec<u8> {
    npy(
        &format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}"),
        &f32s(n),
    )
}

/// Every path under `dir` whose name starts with `out` (recursively).
pub fn outputs(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("out") || name.starts_with(".out") {
            found.push(name.clone());
        }
        if e.file_type().unwrap().is_dir() {
            found.extend(outputs(&e.path()).into_iter().map(|n| format!("{name}/{n}")));
        }
    }
    found
}

/// The outcome of one `mxbi` run.
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// Runs the `mxbi` binary with `args`; with `address_space_kib`, under
/// that limit of virtual memory (`ulimit -v`), so an allocation beyond it
/// fails (an abort) instead of succeeding.
pub fn mxbi(args: &[&str], address_space_kib: Option<u64>, tmp: &Path) -> Run {
    let bin = env!("CARGO_BIN_EXE_mxbi");
    let mut c = match address_space_kib {
        Some(kib) => {
            let mut c = Command::new("sh");
            c.arg("-c")
                .arg(format!("ulimit -v {kib} && exec \"$0\" \"$@\""))
                .arg(bin);
            c
        }
        None => Command::new(bin),
    };
    let out = c.args(args).env("TMPDIR", tmp).output().unwrap();
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

impl Run {
    /// None when the run exited 2 with exactly one stderr line starting
    /// `mxbi: error: ` that contains `want`, and no panic; else what went
    /// wrong.
    pub fn bad_input_problem(&self, want: &str) -> Option<String> {
        let lines: Vec<&str> = self.stderr.lines().collect();
        let ok = self.code == Some(2)
            && lines.len() == 1
            && lines[0].starts_with("mxbi: error: ")
            && lines[0].contains(want)
            && !self.stderr.contains("panicked");
        (!ok).then(|| {
            format!(
                "exit {:?}, stderr {:?} (wanted one line with {want:?})",
                self.code, self.stderr
            )
        })
    }
}
