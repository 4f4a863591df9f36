//! The case file `mxbi-bi-case/1`: one batch-invariance check as JSON (the
//! same settings as the flags of `mxbi bi run`), accepting the seed-000
//! proposal's `standard` object. Its JSON Schema is generated from these
//! types ([`case_schema`]; committed as `docs/schema/bi-case.schema.json`).
//!
//! # Contract
//! - Unknown keys are refused at every level; errors name the JSON path
//!   (`standard.bi.row_positions[2]: ...`).
//! - [`Case::options`] maps a case onto [`CheckOptions`]:
//!   `families` as given, else `["content"]` when `standard.bi` is present;
//!   `m` a list or `"edges"` (the default: [`edge_ms`] of the subject's
//!   boundaries); `positions` as given, else `standard.bi.row_positions`;
//!   `seed` 1, `repeats` 3, `confirm` 3 (re-runs of each side of a
//!   failing cell, `bi::confirm`), `input` what the subject reads (else f32) when
//!   absent.
//! - `standard.bi` is the seed-000 content test: the target row fixed, the
//!   other rows from seed A vs seed B, asserting byte equality of the target
//!   row, at each of `row_positions`. It maps onto the `content` family
//!   (which `families` must then include) with those positions;
//!   `n_variants` counts the variants compared (A and B): only 2 exists.
//! - `standard.acc` (an accuracy standard's name, docs/ACCURACY.md) is
//!   evaluated by `mxbi bi run` beside the cells, on the first batch size;
//!   `standard.perf` (performance thresholds) is parsed and carried into
//!   the report unevaluated.
//! - Inconsistent settings are refused with one line: `positions` that
//!   disagree with `standard.bi.row_positions`, positions when no chosen
//!   family uses them, `vs` without the `switch` family.

use super::content::Content;
use super::family::{Family, RowPos};
use super::options::{edge_ms, CheckOptions};
use crate::order::InType;
use crate::subject::Knobs;
use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use std::borrow::Cow;
use std::fmt;

/// The version tag every case carries.
pub const CASE_SCHEMA: &str = "mxbi-bi-case/1";

/// Default seed and repeat count (the same as the flags of `bi run`).
pub const DEFAULT_SEED: u64 = 1;
pub const DEFAULT_REPEATS: usize = 3;

/// Most bytes a case file may have.
pub const MAX_CASE_BYTES: u64 = 1 << 20;

/// The case format's version tag: `"mxbi-bi-case/1"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum CaseVersion {
    #[serde(rename = "mxbi-bi-case/1")]
    V1,
}

/// One batch-invariance check.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "mxbi batch-invariance case (mxbi-bi-case/1)")]
pub struct Case {
    /// The format version: "mxbi-bi-case/1".
    pub schema: CaseVersion,
    /// A name for the case (carried into the report).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The subject under test, as `--subject` spells it (e.g.
    /// "model:fma;split=4", "dispatch:table.json"). A relative `dispatch:`
    /// or `dump:` path is relative to the case file's folder, and an
    /// `exec:` runner starts in that folder (so does `vs`).
    pub subject: String,
    /// A second subject for the `switch` family.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vs: Option<String>,
    /// Variant families (default: ["content"] when `standard.bi` is given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub families: Option<Vec<Family>>,
    /// Batch sizes (the batch family's baseline is the first), or "edges"
    /// (the default): the usual edges plus b-1, b, b+1 for each boundary of
    /// the subject.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub m: Option<MSpec>,
    /// The reduction length.
    pub k: usize,
    /// The output width.
    pub n: usize,
    /// Target-row positions for content, batch, position, anchor and rank:
    /// indices, "mid", "last" or "all" (position only) (default: standard.bi.row_positions, else
    /// 0, mid, last; the position family: 0, 1, 2, 3, 7, 15, 31, mid, last).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub positions: Option<Vec<Pos>>,
    /// The seed every input row is drawn from (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// The element type inputs are drawn in (default: what the subject
    /// reads, else f32).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Input>,
    /// Runs of the repeat family (default 3, at least 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeats: Option<usize>,
    /// Re-runs of each side of a cell that would fail, before it is
    /// BI_FAIL; a side that does not reproduce makes the cell NON_DET
    /// (default 3; 0: no re-runs; at most 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirm: Option<usize>,
    /// The seed-000 standards: `acc` is evaluated beside the cells, `perf`
    /// is carried into the report; `bi` selects the content test.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub standard: Option<Standard>,
    /// How input values are drawn (default: the `separating` drawing, docs/BI.md "Power"): a content
    /// class and its simplifications (`mxbi fuzz` writes them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Content>,
    /// The subject's setting (world size, MX scale kinds, deterministic
    /// communication), for subjects that take knobs (`op:`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub knobs: Option<Knobs>,
}

/// The seed-000 `standard` object.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Standard {
    /// The accuracy standard's name (e.g. "cv_fused_double_benchmark";
    /// docs/ACCURACY.md), evaluated beside the cells on the first batch size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acc: Option<String>,
    /// Performance thresholds (e.g. [0.95, 0.95]); carried into the report,
    /// not evaluated by the checker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub perf: Option<Vec<f64>>,
    /// The batch-invariance standard: the content test.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bi: Option<BiStandard>,
}

/// `standard.bi`: target row fixed, other rows from seed A vs seed B.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BiStandard {
    /// Where the target row sits (default [0, "mid", "last"]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub row_positions: Option<Vec<Pos>>,
    /// Variants compared per cell (A and B; only 2 exists; default 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n_variants: Option<usize>,
}

/// Batch sizes: a list, or "edges".
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MSpec {
    Edges,
    List(Vec<usize>),
}

/// A target-row position in a case: an index, "mid" or "last".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pos(pub RowPos);

/// An input element type in a case, by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Input(pub InType);

impl Serialize for MSpec {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            MSpec::Edges => s.serialize_str("edges"),
            MSpec::List(v) => v.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for MSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = MSpec;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list of batch sizes or \"edges\"")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<MSpec, E> {
                if s == "edges" {
                    Ok(MSpec::Edges)
                } else {
                    Err(E::invalid_value(de::Unexpected::Str(s), &self))
                }
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<MSpec, A::Error> {
                let mut v = Vec::new();
                while let Some(m) = seq.next_element::<usize>()? {
                    v.push(m);
                }
                Ok(MSpec::List(v))
            }
        }
        d.deserialize_any(V)
    }
}

impl JsonSchema for MSpec {
    fn schema_name() -> Cow<'static, str> {
        "MSpec".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "Batch sizes, or \"edges\".",
            "oneOf": [
                {"type": "array", "items": {"type": "integer", "minimum": 1}, "minItems": 1},
                {"const": "edges"}
            ]
        })
    }
}

impl Serialize for Pos {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            RowPos::Index(i) => s.serialize_u64(i as u64),
            p => s.collect_str(&p),
        }
    }
}

impl<'de> Deserialize<'de> for Pos {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Pos;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a row index, \"mid\", \"last\" or \"all\"")
            }
            fn visit_u64<E: de::Error>(self, i: u64) -> Result<Pos, E> {
                usize::try_from(i)
                    .map(|i| Pos(RowPos::Index(i)))
                    .map_err(|_| E::invalid_value(de::Unexpected::Unsigned(i), &self))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Pos, E> {
                match s {
                    "mid" => Ok(Pos(RowPos::Mid)),
                    "last" => Ok(Pos(RowPos::Last)),
                    "all" => Ok(Pos(RowPos::All)),
                    _ => Err(E::invalid_value(de::Unexpected::Str(s), &self)),
                }
            }
        }
        d.deserialize_any(V)
    }
}

impl JsonSchema for Pos {
    fn schema_name() -> Cow<'static, str> {
        "RowPosition".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "A target-row position: an index, \"mid\" (M/2), \"last\" (M-1) or \"all\" (every row; the position family only).",
            "oneOf": [{"type": "integer", "minimum": 0}, {"enum": ["mid", "last", "all"]}]
        })
    }
}

impl Serialize for Input {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.0.name())
    }
}

impl<'de> Deserialize<'de> for Input {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Input;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                let names: Vec<&str> = InType::ALL.iter().map(|t| t.name()).collect();
                write!(f, "an input type: one of {}", names.join(", "))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Input, E> {
                InType::from_name(s)
                    .map(Input)
                    .ok_or_else(|| E::invalid_value(de::Unexpected::Str(s), &self))
            }
        }
        d.deserialize_str(V)
    }
}

impl JsonSchema for Input {
    fn schema_name() -> Cow<'static, str> {
        "InputType".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let names: Vec<&str> = InType::ALL.iter().map(|t| t.name()).collect();
        json_schema!({
            "description": "The element type inputs are drawn in.",
            "enum": names
        })
    }
}

impl JsonSchema for Family {
    fn schema_name() -> Cow<'static, str> {
        "Family".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let names: Vec<&str> = Family::ALL.iter().map(|f| f.name()).collect();
        json_schema!({
            "description": "A variant family.",
            "enum": names
        })
    }
}

/// The JSON Schema of the case format, pretty-printed with a final newline
/// (what `mxbi bi schema` prints and `docs/schema/bi-case.schema.json`
/// holds).
pub fn case_schema() -> String {
    let schema = schemars::schema_for!(Case);
    let mut s = serde_json::to_string_pretty(&schema).expect("a schema serialises");
    s.push('\n');
    s
}

impl Case {
    /// Parses a case; errors read `SOURCE: PATH: what was wrong`.
    pub fn parse(source: &str, text: &str) -> Result<Case, String> {
        parse_json(source, text)
    }

    /// The check this case asks for (the contract in the module doc).
    /// `subject_input` is the input type the subject reads, if it says;
    /// `boundaries` are its M boundaries (for `"edges"`).
    pub fn options(&self, subject_input: Option<InType>, boundaries: &[usize]) -> Result<CheckOptions, String> {
        let bi = self.standard.as_ref().and_then(|s| s.bi.as_ref());
        let families = match (&self.families, bi) {
            (Some(f), _) => f.clone(),
            (None, Some(_)) => vec![Family::Content],
            (None, None) => return Err("no families: give `families`, or a `standard.bi` (the content test)".into()),
        };
        let mut positions: Option<Vec<RowPos>> = self.positions.as_ref().map(|p| p.iter().map(|x| x.0).collect());
        if let Some(bi) = bi {
            if let Some(nv) = bi.n_variants {
                if nv != 2 {
                    return Err(format!(
                        "standard.bi.n_variants = {nv}: the content test compares two variants (A and B); only 2 is supported"
                    ));
                }
            }
            if !families.contains(&Family::Content) {
                return Err(format!(
                    "standard.bi asks for the content test, but families [{}] has no content",
                    names(&families)
                ));
            }
            let bi_pos: Vec<RowPos> = bi.row_positions.as_ref().map_or_else(
                || vec![RowPos::Index(0), RowPos::Mid, RowPos::Last],
                |p| p.iter().map(|x| x.0).collect(),
            );
            match &positions {
                Some(p) if *p != bi_pos => {
                    return Err(format!(
                        "positions [{}] disagree with standard.bi.row_positions [{}]",
                        joined(p),
                        joined(&bi_pos)
                    ))
                }
                _ => positions = Some(bi_pos),
            }
        }
        if self.positions.is_some()
            && !families.iter().any(|f| {
                matches!(
                    f,
                    Family::Content | Family::Batch | Family::Position | Family::Anchor | Family::Rank
                )
            })
        {
            return Err(format!(
                "positions are given but no family uses them (families [{}]; positions apply to content, batch, position, anchor and rank)",
                names(&families)
            ));
        }
        if self.vs.is_some() && !families.contains(&Family::Switch) {
            return Err("vs is given but families has no switch".into());
        }
        let ms = match &self.m {
            None | Some(MSpec::Edges) => edge_ms(boundaries),
            Some(MSpec::List(v)) => v.clone(),
        };
        let opts = CheckOptions {
            families,
            ms,
            k: self.k,
            n: self.n,
            positions: positions.unwrap_or_default(),
            seed: self.seed.unwrap_or(DEFAULT_SEED),
            input: self.input.map(|i| i.0).or(subject_input).unwrap_or(InType::F32),
            repeats: self.repeats.unwrap_or(DEFAULT_REPEATS),
            confirm: self.confirm.unwrap_or(super::confirm::DEFAULT_CONFIRM),
        };
        opts.validate(self.vs.is_some())?;
        if let Some(c) = &self.content {
            c.validate()?;
        }
        Ok(opts)
    }
}

/// Deserializes JSON text; an error reads `SOURCE: PATH: what was wrong`
/// (the path left out where there is none).
pub fn parse_json<T: serde::de::DeserializeOwned>(source: &str, text: &str) -> Result<T, String> {
    let de = &mut serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." || path == "?" {
            format!("{source}: {inner}")
        } else {
            format!("{source}: {path}: {inner}")
        }
    })
}

fn names(f: &[Family]) -> String {
    f.iter().map(|f| f.name()).collect::<Vec<_>>().join(", ")
}

fn joined(p: &[RowPos]) -> String {
    p.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_json_path() {
        let text = r#"{"schema": "mxbi-bi-case/1", "subject": "model:fma", "k": 8, "n": 4,
            "standard": {"bi": {"row_positions": [0, "mid", "end"]}}}"#;
        let e = Case::parse("case.json", text).unwrap_err();
        assert!(
            e.starts_with(
                "case.json: standard.bi.row_positions[2]: invalid value: string \"end\", expected a row index"
            ),
            "{e}"
        );
        let e = Case::parse(
            "c",
            r#"{"schema": "mxbi-bi-case/1", "subject": "x", "k": 8, "n": 4, "kk": 1}"#,
        )
        .unwrap_err();
        assert!(e.starts_with("c: kk: unknown field `kk`"), "{e}");
        let e = Case::parse("c", r#"{"schema": "mxbi-bi-case/2"}"#).unwrap_err();
        assert!(e.starts_with("c: schema: unknown variant `mxbi-bi-case/2`"), "{e}");
        let e = Case::parse(
            "c",
            r#"{"schema": "mxbi-bi-case/1", "subject": "x", "k": 8, "n": 4, "m": [1, -2]}"#,
        )
        .unwrap_err();
        assert!(e.starts_with("c: m[1]: invalid value: integer `-2`"), "{e}");
    }
}
