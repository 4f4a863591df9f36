//! Scale layouts. `Plain` is C order `[rows, cols]` (one scale per block).
//! `Swizzled128x4` is the cuBLAS / Blackwell block-scaling layout: the
//! matrix is padded with zeros to multiples of 128 rows and 4 columns and cut
//! into 128x4 tiles stored one after another in row-major tile order; inside
//! a tile, scale (r, c) sits at byte `(r % 32) * 16 + (r / 32) * 4 + c`.

use std::str::FromStr;

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ScaleLayout {
    Plain,
    Swizzled128x4,
}

impl FromStr for ScaleLayout {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "plain" => Ok(ScaleLayout::Plain),
            "swizzled-128x4" | "swizzled" => Ok(ScaleLayout::Swizzled128x4),
            _ => Err(format!("unknown scale layout '{s}'; expected plain or swizzled-128x4")),
        }
    }
}

/// Bytes of the swizzled layout for a `rows x cols` scale matrix.
pub fn swizzled_len(rows: usize, cols: usize) -> usize {
    rows.div_ceil(128) * 128 * cols.div_ceil(4) * 4
}

#[inline]
fn offset(r: usize, c: usize, col_tiles: usize) -> usize {
    let tile = (r / 128) * col_tiles + c / 4;
    let (rr, cc) = (r % 128, c % 4);
    tile * 512 + (rr % 32) * 16 + (rr / 32) * 4 + cc
}

/// Plain `[rows, cols]` -> swizzled (padding bytes are 0).
pub fn swizzle_128x4(plain: &[u8], rows: usize, cols: usize) -> Vec<u8> {
    assert_eq!(plain.len(), rows * cols);
    let col_tiles = cols.div_ceil(4);
    let mut out = vec![0u8; swizzled_len(rows, cols)];
    for r in 0..rows {
        for c in 0..cols {
            out[offset(r, c, col_tiles)] = plain[r * cols + c];
        }
    }
    out
}

/// Swizzled -> plain `[rows, cols]` (padding dropped).
pub fn unswizzle_128x4(swizzled: &[u8], rows: usize, cols: usize) -> Vec<u8> {
    assert_eq!(swizzled.len(), swizzled_len(rows, cols));
    let col_tiles = cols.div_ceil(4);
    let mut out = vec![0u8; rows * cols];
    for r in 0..rows {
        for c in 0..cols {
            out[r * cols + c] = swizzled[offset(r, c, col_tiles)];
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The layout written as torchao's `to_blocked` describes it: pad, view
    /// as (row_tiles, 128, col_tiles, 4), permute to (row_tiles, col_tiles,
    /// 128, 4), view each tile as (4, 32, 4), swap the first two axes.
    fn by_reshapes(plain: &[u8], rows: usize, cols: usize) -> Vec<u8> {
        let (rt, ct) = (rows.div_ceil(128), cols.div_ceil(4));
        let mut out = Vec::new();
        for a in 0..rt {
            for b in 0..ct {
                for r_lo in 0..32 {
                    for r_hi in 0..4 {
                        for c in 0..4 {
                            let (r, cc) = (a * 128 + r_hi * 32 + r_lo, b * 4 + c);
                            out.push(if r < rows && cc < cols { plain[r * cols + cc] } else { 0 });
                        }
                    }
                }
            }
        }
        out
    }

    #[test]
    fn swizzle_matches_reshape_description_and_round_trips() {
        for (rows, cols) in [(1, 1), (128, 4), (130, 7), (300, 12), (5, 64)] {
            let plain: Vec<u8> = (0..rows * cols).map(|i| (i * 31 % 251) as u8 + 1).collect();
            let s = swizzle_128x4(&plain, rows, cols);
            assert_eq!(s, by_reshapes(&plain, rows, cols), "{rows}x{cols}");
            assert_eq!(unswizzle_128x4(&s, rows, cols), plain);
        }
    }
}
