//! Reading structured choices off the fuzz input, and scratch folders.

use std::path::{Path, PathBuf};

/// Takes little-endian numbers off the front of the input; past the end
/// every number is 0.
pub struct Take<'a>(pub &'a [u8]);

impl<'a> Take<'a> {
    pub fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }

    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }

    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }

    pub fn u64(&mut self) -> u64 {
        (self.u32() as u64) | ((self.u32() as u64) << 32)
    }

    /// What is left.
    pub fn rest(self) -> &'a [u8] {
        self.0
    }
}

/// The input's bytes as little-endian f32 values (a tail of fewer than 4
/// bytes dropped).
pub fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// A fresh empty folder under the system temp dir, removed when dropped.
pub struct Scratch(PathBuf);

impl Scratch {
    pub fn new(tag: &str) -> Scratch {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let d = std::env::temp_dir().join(format!("mxbi-fuzz-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
        Scratch(d)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// An error message as mxbi prints it (`mxbi: error: ` and the message
/// through `mxbi::message::one_line`, as the binary and the Python package do)
/// is one non-empty line. (Messages may quote input that holds newlines;
/// the printing joins them.)
pub fn one_line(msg: &str) {
    let printed = mxbi::message::one_line(msg);
    assert!(!printed.is_empty(), "an error message that prints empty: {msg:?}");
    assert!(!printed.contains('\n'), "an error message of several lines: {msg:?}");
}
