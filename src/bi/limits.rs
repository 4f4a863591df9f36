//! The checker's size bounds: what one check may ask for, checked before
//! anything is allocated.

/// Size bounds, checked before anything is allocated.
pub struct Limits;

impl Limits {
    pub const MAX_M: usize = 1 << 16;
    /// mxbi's one K limit ([`crate::limits::MAX_K`], 2^22).
    pub const MAX_K: usize = crate::limits::MAX_K;
    pub const MAX_N: usize = 1 << 16;
    /// Largest M*K, K*N or M*N of one batch (f32 elements).
    pub const MAX_ELEMENTS: usize = 1 << 28;
    pub const MAX_CELLS: usize = 1 << 20;
    pub const MAX_REPEATS: usize = 1000;
}
