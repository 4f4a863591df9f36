//! The check's entry points: a whole check (cells, controls, report), one
//! shard of it, with drawn content, or the cells alone.

use super::cell::Cell;
use super::content::Content;
use super::execute::run_plan;
use super::inputs::Draw;
use super::options::CheckOptions;
use super::plan::plans;
use super::report::Report;
use super::session::Session;
use crate::subject::{Knobs, Subject};

/// Runs the whole check: every cell of every family, then one positive
/// control per family. `progress(done, total)` is called after each cell.
/// Err: bad options, no cell to check, or a subject reported
/// [`crate::subject::SubjectError::Broken`] (the check stops at once; no report).
pub fn check(
    subject: &dyn Subject,
    vs: Option<&dyn Subject>,
    opts: &CheckOptions,
    progress: &dyn Fn(usize, usize),
) -> Result<Report, String> {
    check_shard(subject, vs, opts, None, progress)
}

/// [`check`] on one shard `(i, n)` of the cells (see
/// [`super::matrix::run_matrix`] for the selection).
pub fn check_shard(
    subject: &dyn Subject,
    vs: Option<&dyn Subject>,
    opts: &CheckOptions,
    shard: Option<(usize, usize)>,
    progress: &dyn Fn(usize, usize),
) -> Result<Report, String> {
    check_shard_content(subject, vs, opts, shard, Content::default(), progress)
}

/// [`check_shard`] with inputs drawn as `content` says.
pub fn check_shard_content(
    subject: &dyn Subject,
    vs: Option<&dyn Subject>,
    opts: &CheckOptions,
    shard: Option<(usize, usize)>,
    content: Content,
    progress: &dyn Fn(usize, usize),
) -> Result<Report, String> {
    content.validate()?;
    let job = super::matrix::Job {
        knobs: Knobs::default(),
        opts: opts.clone(),
        draw: Draw::Wide,
    };
    let mut report = super::matrix::run_jobs(
        &[job],
        &|_| Ok(super::matrix::Held::Borrowed(subject)),
        vs,
        shard,
        content,
        progress,
    )?;
    report.matrix = None;
    Ok(report)
}

/// [`check`] with inputs drawn as `content` says (a case's `content`).
pub fn check_content(
    subject: &dyn Subject,
    vs: Option<&dyn Subject>,
    opts: &CheckOptions,
    content: Content,
    progress: &dyn Fn(usize, usize),
) -> Result<Report, String> {
    content.validate()?;
    let job = super::matrix::Job {
        knobs: Knobs::default(),
        opts: opts.clone(),
        draw: Draw::Wide,
    };
    let mut report = super::matrix::run_jobs(
        &[job],
        &|_| Ok(super::matrix::Held::Borrowed(subject)),
        vs,
        None,
        content,
        progress,
    )?;
    report.matrix = None;
    Ok(report)
}

/// The cells of a check and nothing else (no positive controls, no
/// report): what a search that runs many small checks needs. `knobs` only
/// names the subject's setting in the cell ids. Err: bad options, or a
/// subject that reported itself broken.
pub fn check_cells(
    subject: &dyn Subject,
    vs: Option<&dyn Subject>,
    opts: &CheckOptions,
    content: Content,
    knobs: &Knobs,
) -> Result<Vec<Cell>, String> {
    opts.validate(vs.is_some())?;
    content.validate()?;
    let mut session = Session::new(opts, Draw::Wide, content);
    let mut fams = opts.families.clone();
    fams.sort_unstable();
    fams.dedup();
    let mut cells = Vec::new();
    for f in fams {
        for plan in plans(opts, f, subject.world_size()) {
            cells.push(run_plan(&plan, &mut session, opts, knobs, subject, vs)?);
        }
    }
    Ok(cells)
}
