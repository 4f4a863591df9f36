//! Probe keys and answer positions: a probe is `+B` at p, `-B` at q and
//! the window of other terms it counts; an answer sits at a launch, a row
//! and a column.

/// The window index of a probe that counts every other term.
pub(super) const NO_WINDOW: u32 = u32::MAX;

/// A probe: `+B` at p, `-B` at q, the window (chunk of the other terms)
/// whose units it counts, or [`NO_WINDOW`].
pub(super) type Key = (u32, u32, u32);

/// Where an answer sat: (launch, row, column).
pub(super) type At = (u32, u32, u32);

pub(super) fn at(launch: usize, row: usize, col: usize) -> At {
    (launch as u32, row as u32, col as u32)
}
