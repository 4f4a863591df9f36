//! Variant families and target-row positions (the contract is in the
//! module doc of `bi`).

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A batch-invariance variant family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    Content,
    Batch,
    Position,
    Permutation,
    Repeat,
    Switch,
    /// The same global row on every rank of a multi-device subject.
    Rank,
    /// The row at position 0 of a batch of the first M listed (1: the row
    /// alone) vs at each target position of a batch of every other M:
    /// seed 001's anchor-row table.
    Anchor,
}

impl Family {
    pub const ALL: [Family; 8] = [
        Family::Content,
        Family::Batch,
        Family::Position,
        Family::Permutation,
        Family::Repeat,
        Family::Switch,
        Family::Rank,
        Family::Anchor,
    ];

    pub const fn name(self) -> &'static str {
        match self {
            Family::Content => "content",
            Family::Batch => "batch",
            Family::Position => "position",
            Family::Permutation => "permutation",
            Family::Repeat => "repeat",
            Family::Switch => "switch",
            Family::Rank => "rank",
            Family::Anchor => "anchor",
        }
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Family {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Family::ALL.into_iter().find(|f| f.name() == s).ok_or_else(|| {
            format!(
                "unknown family '{s}'; expected one of: {}",
                Family::ALL.map(|f| f.name()).join(", ")
            )
        })
    }
}

/// Where the target row sits in a batch of M rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RowPos {
    Index(usize),
    /// `M / 2`.
    Mid,
    /// `M - 1`.
    Last,
    /// Every row (the `position` family only): the target at every row of
    /// one batch, each row compared with the row before it.
    All,
}

impl RowPos {
    /// The default positions of the `position` family: 0, 1, 2, 3, 7, 15,
    /// 31, mid, last (those beyond M are skipped).
    pub const POSITIONS: [RowPos; 9] = [
        RowPos::Index(0),
        RowPos::Index(1),
        RowPos::Index(2),
        RowPos::Index(3),
        RowPos::Index(7),
        RowPos::Index(15),
        RowPos::Index(31),
        RowPos::Mid,
        RowPos::Last,
    ];

    /// The index in a batch of `m` rows (None when it does not fit).
    pub fn resolve(self, m: usize) -> Option<usize> {
        match self {
            RowPos::Index(i) => (i < m).then_some(i),
            RowPos::Mid => (m > 0).then_some(m / 2),
            RowPos::Last => m.checked_sub(1),
            // not one row: the position family plans it itself
            RowPos::All => None,
        }
    }
}

impl fmt::Display for RowPos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RowPos::Index(i) => write!(f, "{i}"),
            RowPos::Mid => f.write_str("mid"),
            RowPos::Last => f.write_str("last"),
            RowPos::All => f.write_str("all"),
        }
    }
}

impl FromStr for RowPos {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "mid" => Ok(RowPos::Mid),
            "last" => Ok(RowPos::Last),
            "all" => Ok(RowPos::All),
            _ => s
                .parse::<usize>()
                .map(RowPos::Index)
                .map_err(|_| format!("bad row position '{s}': expected an index, 'mid', 'last' or 'all'")),
        }
    }
}

impl Serialize for RowPos {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for RowPos {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(usize),
            S(String),
        }
        match Raw::deserialize(d)? {
            Raw::N(n) => Ok(RowPos::Index(n)),
            Raw::S(s) => s.parse().map_err(serde::de::Error::custom),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for f in Family::ALL {
            assert_eq!(f.name().parse::<Family>(), Ok(f));
        }
        assert!("ranks".parse::<Family>().unwrap_err().contains("expected one of"));
        for p in RowPos::POSITIONS {
            assert_eq!(p.to_string().parse::<RowPos>(), Ok(p));
        }
        let p: RowPos = serde_json::from_str("7").unwrap();
        assert_eq!(p, RowPos::Index(7));
        let p: RowPos = serde_json::from_str("\"mid\"").unwrap();
        assert_eq!(p, RowPos::Mid);
    }

    #[test]
    fn positions_resolve_inside_the_batch() {
        assert_eq!(RowPos::Mid.resolve(9), Some(4));
        assert_eq!(RowPos::Last.resolve(9), Some(8));
        assert_eq!(RowPos::Index(9).resolve(9), None);
        assert_eq!(RowPos::Last.resolve(0), None);
        assert_eq!(RowPos::All.resolve(9), None);
        assert_eq!("all".parse::<RowPos>(), Ok(RowPos::All));
        assert_eq!(RowPos::All.to_string(), "all");
    }
}
