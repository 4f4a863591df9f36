//! `.npy`: any bytes read to a tensor or to a one-line error (no panic, no
//! allocation beyond the input: a header's shape is bounded by the bytes
//! present). A tensor read holds exactly `numel * size` bytes, widens to
//! `numel` values, and, where its dtype has a `.npy` name, writes back
//! (header as numpy writes it + the same data) to bytes that read to the
//! same dtype, shape and data.

use super::bytes::one_line;
use mxbi::io::{npy_header_bytes, read_npy_bytes};

/// True when the input got past parsing to the property checks.
pub fn run(data: &[u8]) -> bool {
    let t = match read_npy_bytes(data) {
        Ok(t) => t,
        Err(e) => {
            one_line(&e.to_string());
            return false;
        }
    };
    let numel = t
        .shape()
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .expect("the shape's product fits");
    assert_eq!(t.numel(), numel);
    assert_eq!(t.nbytes(), numel * t.dtype().size(), "{:?} {:?}", t.dtype(), t.shape());
    assert!(t.nbytes() <= data.len());
    assert_eq!(t.to_f32_vec().len(), numel);
    let Some(mut img) = npy_header_bytes(t.dtype(), t.shape()) else {
        return false;
    };
    img.extend_from_slice(t.bytes());
    let u = read_npy_bytes(&img).unwrap_or_else(|e| panic!("a written .npy does not read back: {e}"));
    assert_eq!((u.dtype(), u.shape(), u.bytes()), (t.dtype(), t.shape(), t.bytes()));
    true
}
