//! Row ids: the one numbering of the checker's rows. The target row is id
//! 0; every other row comes from a set (A = 0, B = 1) and has its index `j`
//! in it: id `1 + (set << 40) + j`. A row is a function of the seed and its
//! id only ([`super::Rows::row`]), so the same id is the same bytes in any
//! batch and at any position.

/// Bits of a row id below the set (see [`other_id`]).
const SET_SHIFT: u32 = 40;

/// Row ids: the target row is id 0; the other rows of a batch come from a
/// set (A = 0, B = 1) and their index in it.
pub fn other_id(set: u64, j: usize) -> u64 {
    1 + (set << SET_SHIFT) + j as u64
}

/// The set and the index in it of a row id other than 0 (the inverse of
/// [`other_id`]).
pub(super) fn set_and_index(id: u64) -> (u64, u64) {
    ((id - 1) >> SET_SHIFT, (id - 1) & ((1u64 << SET_SHIFT) - 1))
}

/// The row ids of the checker's batch of `m` rows: the target (id 0) at
/// `at`, the others from `set` in order (the one numbering every family,
/// `mxbi explain --case` and the fuzzer's explanation rebuild).
pub fn target_batch(m: usize, at: usize, set: u64) -> Vec<u64> {
    let mut ids: Vec<u64> = (0..m - 1).map(|j| other_id(set, j)).collect();
    ids.insert(at, 0);
    ids
}
