//! What `mxbi reveal` and `mxbi reveal gen|solve` share: the probe shape
//! flags, their reading into [`RevealOptions`], and the printing of a
//! recovered tree or of a data-dependent answer.

use super::{CliError, Outcome, Result};
use clap::Args;
use mxbi::explain::{self, RevealOptions};
use mxbi::order::InType;
use serde_json::json;

#[derive(Args, Debug)]
pub struct RevealShape {
    /// Rows of each probe launch (M); needed to reveal.
    #[arg(long)]
    pub m: Option<usize>,
    /// K, the reduction length whose tree is recovered (reveal probes at
    /// most 65536 terms); needed to reveal.
    #[arg(long)]
    pub k: Option<usize>,
    /// Output columns of each probe launch (N); needed to reveal.
    #[arg(long)]
    pub n: Option<usize>,
    /// Element type the subject reads (default: the model's, else f32), or
    /// an MX format (`mxfp8-e4m3`, ...): codes and E8M0 scales, probed per
    /// block through the scales.
    #[arg(long)]
    pub input: Option<String>,
    /// Seed of the probe values (same seed, same launches).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

fn input_type(s: Option<&str>, default: Option<InType>) -> Result<InType> {
    match s {
        Some(t) if mx_input(Some(t)).is_some() => Ok(InType::E4M3),
        Some(t) => InType::from_name(t).ok_or_else(|| {
            CliError(format!(
                "--input '{t}': expected one of f32, bf16, f16, e4m3, e5m2 or an MX format (mxfp8-e4m3, ...)"
            ))
        }),
        None => Ok(default.unwrap_or(InType::F32)),
    }
}

/// The MX format `--input` names, if it names one.
pub(super) fn mx_input(s: Option<&str>) -> Option<mxbi::mx::MxFormat> {
    mxbi::mx::MxFormat::ALL.into_iter().find(|f| Some(f.name()) == s)
}

pub(super) fn options(s: &RevealShape, default_input: Option<InType>) -> Result<RevealOptions> {
    let need = |v: Option<usize>, name: &str| v.ok_or_else(|| CliError(format!("reveal needs --{name}")));
    Ok(RevealOptions {
        m: need(s.m, "m")?,
        k: need(s.k, "k")?,
        n: need(s.n, "n")?,
        input: input_type(s.input.as_deref(), default_input)?,
        seed: s.seed,
        verify_rows: 8,
    })
}

pub(super) fn print_revealed(r: &explain::Revealed, as_json: bool, tree: bool) -> Result<()> {
    if as_json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "order": r.order.map(|o| o.to_string()),
                "equivalent": r.equivalent.iter().map(|o| o.to_string()).collect::<Vec<_>>(),
                "launches": r.launches,
                "grid_launches": r.grid_launches,
                "probes": r.probes,
                "scheme": r.scheme,
                "window": r.window,
                "shared_tree": r.disagreement_count == 0,
                "disagreements": r.disagreements,
                "disagreement_count": r.disagreement_count,
                "shape_matches": r.shape_matches.iter().map(|o| o.to_string()).collect::<Vec<_>>(),
                "nearest": r.closest,
                "summary": r.shape.describe(),
                "verified_elements": r.verified_elements,
                "repeated_probes": r.repeats.probes,
                "repeats": r.repeats.repeats,
                "repeat_launches": r.repeats.launches,
                "repeated_answers": r.repeats.answers,
                "tree": r.shape.listing(),
                "m": r.m, "k": r.k, "n": r.n, "input": r.input,
                "mx": r.mx,
                "distinct_probes": r.distinct_probes,
                "checked": r.checked,
            }))?
        );
    } else {
        out!("{r}");
        if !r.to_string().ends_with('\n') {
            outln!();
        }
        if tree && r.order.is_none() {
            outln!("the recovered tree:\n{}", r.shape.listing());
        }
    }
    Ok(())
}

/// A data-dependent order (the probes repeated with other values gave
/// other counts): one headline, then the changed answers (at most 16
/// listed), or the JSON `{"data_dependent": true, ...}`. Exit 1: a check
/// failed, no tree is reported.
pub(super) fn print_data_dependent(rep: &explain::Repeats, as_json: bool) -> Result<Outcome> {
    let headline = explain::RevealError::DataDependent(Box::new(rep.clone())).to_string();
    if as_json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "data_dependent": true,
                "headline": headline,
                "order": null,
                "repeated_probes": rep.probes,
                "repeats": rep.repeats,
                "answers": rep.answers,
                "changed_probes": rep.changed_probes,
                "changed_count": rep.changed_count,
                "changed": rep.changed,
            }))?
        );
        return Ok(Outcome::Failed);
    }
    outln!("{headline}");
    for r in &rep.repeats {
        outln!("  repeat {r}");
    }
    for c in &rep.changed {
        let window = c.window.map(|w| format!(", window {w}")).unwrap_or_default();
        let after = match c.after {
            Some(a) => format!("{a} units"),
            None => format!("{:e}, not a whole number of units", c.value),
        };
        outln!(
            "  {} launch {} C[{}, {}]: probe (+B at k={}, -B at k={}{window}) counted {} units, now {after}",
            c.repeat,
            c.launch,
            c.row,
            c.col,
            c.p,
            c.q,
            c.before
        );
    }
    if rep.changed_count > rep.changed.len() {
        outln!("  ... {} more changed answers", rep.changed_count - rep.changed.len());
    }
    Ok(Outcome::Failed)
}

/// Exit status of a reveal: held when one tree explains every probe and
/// the grammar can say it.
pub(super) fn outcome(r: &explain::Revealed) -> Outcome {
    if r.disagreement_count == 0 && r.order.is_some() {
        Outcome::Held
    } else {
        Outcome::Failed
    }
}
