//! Large buffers (outputs, packed panels, decomposed operands).
//!
//! Contract: `zeroed(len)` is `vec![T::default(); len]` (every element the
//! all-zero value). On Linux a buffer of at least [`HUGE_MIN`] bytes asks
//! the kernel for transparent huge pages over its 2 MiB-aligned interior
//! before anything touches it (numpy does the same for its large arrays),
//! so the first pass over it faults once per 2 MiB instead of once per
//! 4 KiB page. The advice changes no value; where it is refused or the
//! system has no huge pages the buffer is an ordinary one.
//!
//! [`Lines::scratch`] is a packing buffer whose elements are unspecified
//! when taken (what an earlier call left there): its user writes every
//! element before reading it. Scratch buffers go back to a process-wide
//! pool when dropped (at most [`POOL_BUFFERS`] buffers and [`POOL_BYTES`]
//! bytes are kept), so a GEMM after the first reuses memory that is already
//! mapped instead of zeroing and faulting in fresh pages (OpenBLAS keeps its
//! packing buffers the same way). [`unwritten`] is an output the caller
//! fills completely before [`Vec::set_len`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// Buffers from this size (bytes) get the huge-page advice.
const HUGE_MIN: usize = 4 << 20;

/// A zeroed buffer of `len` elements (see the module's contract).
pub(super) fn zeroed<T: Copy + Default>(len: usize) -> Vec<T> {
    let v = vec![T::default(); len];
    #[cfg(target_os = "linux")]
    advise_huge(v.as_ptr() as usize, std::mem::size_of_val(&v[..]));
    v
}

/// An empty `Vec` with room for `len` elements, advised like [`zeroed`]:
/// the caller writes all `len` elements through its pointer, then sets the
/// length (no zeroing pass over memory that is about to be written).
pub(super) fn unwritten(len: usize) -> Vec<f32> {
    let mut v = Vec::with_capacity(len);
    #[cfg(target_os = "linux")]
    advise_huge(v.as_ptr() as usize, len * 4);
    if POISON.load(Ordering::Relaxed) {
        v.spare_capacity_mut()[..len].fill(std::mem::MaybeUninit::new(f32::NAN));
    }
    v
}

/// An `f32` buffer whose first element starts a 64-byte cache line, so
/// rows of 16-float multiples never straddle two lines (a vector load that
/// does costs two). Derefs to exactly `len` elements. A scratch buffer goes
/// back to the pool when dropped.
pub(super) struct Lines {
    buf: Vec<f32>,
    at: usize,
    len: usize,
    pooled: bool,
}

/// Scratch buffers kept for reuse, at most this many ...
const POOL_BUFFERS: usize = 8;
/// ... and at most this many bytes in all.
const POOL_BYTES: usize = 512 << 20;

static POOL: Mutex<Vec<Vec<f32>>> = Mutex::new(Vec::new());

/// When set, every scratch buffer and the room of every [`unwritten`]
/// output is filled with NaN when taken, so a read before a write, or an
/// output element never stored, shows as NaN (for tests; see
/// `poison_scratch`).
static POISON: AtomicBool = AtomicBool::new(false);

/// Fill scratch buffers and unwritten outputs with NaN when taken (tests of
/// the fast kernels turn this on to show that no kernel reads a packing
/// buffer before writing it or leaves an output element unstored).
#[doc(hidden)]
pub fn poison_scratch(on: bool) {
    POISON.store(on, Ordering::Relaxed);
}

/// Floats per cache line.
const LINE: usize = 16;

impl Lines {
    /// A buffer of `len` elements from the pool (the smallest that holds
    /// them) or, where none does, a fresh one; its elements are
    /// unspecified (the module's contract).
    pub(super) fn scratch(len: usize) -> Lines {
        if len == 0 {
            return Lines::from(Vec::new(), 0, false);
        }
        let want = len + LINE - 1;
        let reused = {
            let mut pool = POOL.lock().unwrap_or_else(|e| e.into_inner());
            let best = (0..pool.len())
                .filter(|&x| pool[x].len() >= want)
                .min_by_key(|&x| pool[x].len());
            best.map(|x| pool.swap_remove(x))
        };
        let mut l = Lines::from(reused.unwrap_or_else(|| zeroed(want)), len, true);
        if POISON.load(Ordering::Relaxed) {
            l.fill(f32::NAN);
        }
        l
    }

    fn from(buf: Vec<f32>, len: usize, pooled: bool) -> Lines {
        let at = match buf.is_empty() {
            true => 0,
            false => buf.as_ptr().align_offset(LINE * 4),
        };
        assert!(at < LINE && at + len <= buf.len(), "an f32 buffer is 4-byte aligned");
        Lines { buf, at, len, pooled }
    }
}

impl Drop for Lines {
    fn drop(&mut self) {
        if !self.pooled || self.buf.is_empty() {
            return;
        }
        let buf = std::mem::take(&mut self.buf);
        let mut pool = POOL.lock().unwrap_or_else(|e| e.into_inner());
        pool.push(buf);
        // over the limits: drop the smallest buffers first
        pool.sort_unstable_by_key(|b| std::cmp::Reverse(b.len()));
        while pool.len() > POOL_BUFFERS || pool.iter().map(|b| b.len() * 4).sum::<usize>() > POOL_BYTES {
            pool.pop();
        }
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
        }
    }

    #[test]
    fn scratch_buffers_start_a_line_and_are_reused() {
        for len in [1, 1000, HUGE_MIN / 4 + 3] {
            let mut l = Lines::scratch(len);
            assert_eq!(l.len(), len);
            assert_eq!(l.as_ptr() as usize % 64, 0, "len {len}");
            l.fill(1.5);
            let at = l.as_ptr() as usize;
            drop(l);
            // the pool hands back the smallest buffer that holds the length;
            // other tests may hold or return buffers meanwhile, so only the
            // shape is asserted, and reuse where this one came back
            let again = Lines::scratch(len);
            assert_eq!(again.len(), len);
            assert_eq!(again.as_ptr() as usize % 64, 0, "len {len}");
            if again.as_ptr() as usize == at {
                assert!(
                    again.iter().all(|&x| x == 1.5),
                    "a reused buffer keeps what was written"
                );
            }
        }
        assert!(Lines::scratch(0).is_empty());
    }

    #[test]
    fn the_pool_keeps_at_most_its_buffers_and_bytes() {
        let held: Vec<Lines> = (0..3 * POOL_BUFFERS).map(|x| Lines::scratch(1000 + x)).collect();
        drop(held);
        // larger than the byte limit alone (calloc'd, never touched)
        drop(Lines::scratch(POOL_BYTES / 4 + 1));
        let pool = POOL.lock().unwrap_or_else(|e| e.into_inner());
        assert!(pool.len() <= POOL_BUFFERS, "{} buffers kept", pool.len());
        let bytes: usize = pool.iter().map(|b| b.len() * 4).sum();
        assert!(bytes <= POOL_BYTES, "{bytes} bytes kept");
    }
}
