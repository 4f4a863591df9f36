//! Large zeroed buffers (outputs, packed panels, decomposed operands).
//!
//! Contract: `zeroed(len)` is `vec![T::default(); len]` (every element the
//! all-zero value). On Linux a buffer of at least [`HUGE_MIN`] bytes asks
//! the kernel for transparent huge pages over its 2 MiB-aligned interior
//! before anything touches it (numpy does the same for its large arrays),
//! so the first pass over it faults once per 2 MiB instead of once per
//! 4 KiB page. The advice changes no value; where it is refused or the
//! system has no huge pages the buffer is an ordinary one.

/// Buffers from this size (bytes) get the huge-page advice.
const HUGE_MIN: usize = 4 << 20;

/// A zeroed buffer of `len` elements (see the module's contract).
pub(super) fn zeroed<T: Copy + Default>(len: usize) -> Vec<T> {
    let v = vec![T::default(); len];
    #[cfg(target_os = "linux")]
    advise_huge(v.as_ptr() as usize, std::mem::size_of_val(&v[..]));
    v
}

/// A zeroed `f32` buffer whose first element starts a 64-byte cache line,
/// so rows of 16-float multiples never straddle two lines (a vector load
/// that does costs two). Derefs to exactly `len` elements.
pub(super) struct Lines {
    buf: Vec<f32>,
    at: usize,
    len: usize,
}

/// Floats per cache line.
const LINE: usize = 16;

impl Lines {
    pub(super) fn zeroed(len: usize) -> Lines {
        let buf: Vec<f32> = zeroed(len + LINE - 1);
        let at = buf.as_ptr().align_offset(LINE * 4);
        assert!(at < LINE, "an f32 buffer is 4-byte aligned");
        Lines { buf, at, len }
    }
}

impl std::ops::Deref for Lines {
    type Target = [f32];
    fn deref(&self) -> &[f32] {
        &self.buf[self.at..self.at + self.len]
    }
}

impl std::ops::DerefMut for Lines {
    fn deref_mut(&mut self) -> &mut [f32] {
        &mut self.buf[self.at..self.at + self.len]
    }
}

#[cfg(target_os = "linux")]
fn advise_huge(start: usize, bytes: usize) {
    const HUGE: usize = 2 << 20;
    if bytes < HUGE_MIN {
        return;
    }
    let lo = start.next_multiple_of(HUGE);
    let hi = (start + bytes) / HUGE * HUGE;
    if hi > lo {
        // SAFETY: [lo, hi) lies inside the live allocation; MADV_HUGEPAGE
        // only advises how to back it and keeps every byte. The result is
        // ignored: the advice is optional.
        unsafe { libc::madvise(lo as *mut libc::c_void, hi - lo, libc::MADV_HUGEPAGE) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeroed_is_zero_at_every_size() {
        for len in [0, 1, 1000, (HUGE_MIN / 4) - 1, HUGE_MIN / 4, 3 * HUGE_MIN / 4 + 17] {
            let v: Vec<f32> = zeroed(len);
            assert_eq!(v.len(), len);
            assert!(v.iter().all(|x| x.to_bits() == 0), "len {len}");
            let w: Vec<i64> = zeroed(len);
            assert!(w.len() == len && w.iter().all(|&x| x == 0), "len {len}");
            let l = Lines::zeroed(len);
            assert_eq!(l.len(), len);
            assert!(l.iter().all(|x| x.to_bits() == 0), "len {len}");
            assert_eq!(l.as_ptr() as usize % 64, 0, "len {len}");
        }
    }
}
