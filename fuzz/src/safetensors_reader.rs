//! `.safetensors`: any file opens to a validated listing or to a one-line
//! error; every listed tensor either loads (exactly its listed byte count,
//! `numel * size` bytes) or is refused in one line (an unsupported dtype);
//! the tensors that load, with the metadata, write back to a file that
//! opens to the same names, dtypes, shapes, bytes and metadata.
//!
//! Input: the file's bytes (written to a scratch file; the reader maps
//! files).

use super::bytes::{one_line, Scratch};
use mxbi::io::{write_safetensors_tensors, SafetensorsFile};

/// True when the input got past parsing to the property checks.
pub fn run(data: &[u8]) -> bool {
    let dir = Scratch::new("st");
    let path = dir.path().join("x.safetensors");
    std::fs::write(&path, data).unwrap();
    let f = match SafetensorsFile::open(&path) {
        Ok(f) => f,
        Err(e) => {
            one_line(&e.to_string());
            return false;
        }
    };
    let mut loaded = Vec::new();
    for e in f.entries() {
        match f.tensor(&e.name) {
            Ok(t) => {
                assert_eq!(t.nbytes(), e.nbytes, "{}", e.name);
                assert_eq!(t.shape(), &e.shape[..], "{}", e.name);
                assert_eq!(Some(t.dtype()), e.dtype, "{}", e.name);
                let numel = e.shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).unwrap();
                assert_eq!(t.nbytes(), numel * t.dtype().size());
                assert_eq!(t.to_f32_vec().len(), numel);
                loaded.push((e.name.clone(), t));
            }
            Err(err) => {
                one_line(&err.to_string());
                assert!(e.dtype.is_none(), "{}: a supported tensor did not load: {err}", e.name);
            }
        }
    }
    if f.len() == 1 && loaded.len() == 1 {
        assert!(f.get(None).is_ok());
    }
    let out = dir.path().join("y.safetensors");
    let refs: Vec<(&str, &mxbi::io::TensorData)> = loaded.iter().map(|(n, t)| (n.as_str(), t)).collect();
    write_safetensors_tensors(&out, &refs, f.metadata()).unwrap_or_else(|e| panic!("cannot write back: {e}"));
    let g = SafetensorsFile::open(&out).unwrap_or_else(|e| panic!("a written file does not open: {e}"));
    assert_eq!(g.len(), loaded.len());
    assert_eq!(g.metadata(), f.metadata());
    for (name, t) in &loaded {
        let u = g.tensor(name).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            (u.dtype(), u.shape(), u.bytes()),
            (t.dtype(), t.shape(), t.bytes()),
            "{name}"
        );
    }
    true
}
