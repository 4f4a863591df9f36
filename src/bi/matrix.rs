//! Matrices: a check over many settings at once. A matrix is a list of
//! jobs, each a subject setting ([`Knobs`]) and the options of one check;
//! [`run_matrix`] builds one subject per distinct setting through a
//! factory and runs every job's cells into one report. Cell ids carry the
//! knobs (`content/ws=4/x=ID,VAR/det=1/m=16/k=512/n=64/row=mid`).
//!
//! # Shards
//! `--shard i/n` runs the cells whose global index (the order of the full
//! matrix: jobs in order, then families, then each family's cells) is
//! `i mod n`, computing nothing for the others; every shard also runs the
//! positive controls, so each shard's report stands alone and the shards'
//! cells together are the whole matrix.
//!
//! # Built-in matrices ([`builtin`])
//! - `seed000`: the seed-000 proposal: world size {2, 4, 8} x M per rank
//!   {1, 4, 8, 16, 32, 64} x K {128, 256, 512, 1024, 2048} x N {64, 128,
//!   256, 512} x target row {0, mid, last} x (x1, x2) scales {ID, VAR}^2 x
//!   deterministic communication {true, false}, family `content`, inputs in
//!   e4m3. 8,640 cells as listed; at M = 2 `mid` and `last` are the same
//!   row and run once, so 8,480 distinct cells. Then 24 vacuity probes
//!   (20 distinct cells): world size 2, M per rank {1, 4}, K = 128, N = 64,
//!   every scale pair, deterministic communication, inputs drawn in one
//!   binade ([`Draw::Unit`], id segment `inputs=unit`): with (ID, ID)
//!   scales every partial sum is exact, so a passing cell there must be
//!   reported `VACUOUS`; the VAR pairs (scales of the subject's own choosing)
//!   and the same cells with the usual inputs must not be.
//!   The report's [`super::MatrixInfo`] states the arithmetic.
//! - `te-anchor`: seed 001's anchor-row table: the row alone (M = 1) vs
//!   the same row at positions 0, mid and last of batches of M {2, 17, 33,
//!   128, 257, 1024}, K = N = 2048, bf16 inputs (family `anchor`; 18 cells
//!   listed, 17 run: at M = 2 mid and last are one row).
//! - `edges`: M from the subject's own boundaries ([`super::options::edge_ms`]; only
//!   multiples of its world size), families `batch` (baseline: the
//!   smallest M) and `content`, K = 1024, N = 64.
//!
//! Inputs are drawn in the matrix's type unless the subject declares a
//! narrower one ([`Subject::input`] other than f32), which then wins.

use super::content::Content;
use super::control::control;
use super::depends::input_dependence;
use super::execute::run_plan;
use super::family::{Family, RowPos};
use super::inputs::Draw;
use super::limits::Limits;
use super::options::{edge_ms, CheckOptions};
use super::plan::{listed, plans, Plan};
use super::report::{MatrixInfo, Report};
use super::session::Session;
use crate::order::InType;
use crate::subject::{Knobs, ScaleKind, Subject};
use std::collections::BTreeMap;

/// One job of a matrix: a subject setting, one check's options and how
/// its inputs are drawn.
#[derive(Clone, Debug)]
pub struct Job {
    pub knobs: Knobs,
    pub opts: CheckOptions,
    pub draw: Draw,
}

/// A subject the engine holds: borrowed from the caller or built by a
/// factory.
pub enum Held<'a> {
    Borrowed(&'a dyn Subject),
    Owned(Box<dyn Subject>),
}

impl Held<'_> {
    fn get(&self) -> &dyn Subject {
        match self {
            Held::Borrowed(s) => *s,
            Held::Owned(b) => b.as_ref(),
        }
    }
}

/// Builds the subject of one setting (one line on error).
pub type Factory<'a> = dyn Fn(&Knobs) -> Result<Box<dyn Subject>, String> + 'a;

/// The built-in matrix names.
pub const BUILTINS: [&str; 3] = ["seed000", "te-anchor", "edges"];

/// Parses `i/n` (0 <= i < n).
pub fn parse_shard(s: &str) -> Result<(usize, usize), String> {
    let bad = || format!("--shard '{s}': expected i/n with 0 <= i < n (e.g. 0/4)");
    let (i, n) = s.split_once('/').ok_or_else(bad)?;
    let (i, n): (usize, usize) = (
        i.trim().parse().map_err(|_| bad())?,
        n.trim().parse().map_err(|_| bad())?,
    );
    if n == 0 || i >= n {
        return Err(bad());
    }
    Ok((i, n))
}

fn opts(families: &[Family], ms: Vec<usize>, k: usize, n: usize, input: InType) -> CheckOptions {
    CheckOptions {
        families: families.to_vec(),
        ms,
        k,
        n,
        positions: vec![RowPos::Index(0), RowPos::Mid, RowPos::Last],
        seed: 1,
        input,
        repeats: 2,
        confirm: super::confirm::DEFAULT_CONFIRM,
    }
}

/// The jobs of a built-in matrix (see the module doc); `subject` (built
/// with no knobs) gives the boundaries and world size `edges` needs.
pub fn builtin(name: &str, subject: &dyn Subject) -> Result<Vec<Job>, String> {
    match name {
        "seed000" => {
            let mut jobs = Vec::new();
            for k in [128, 256, 512, 1024, 2048] {
                for n in [64, 128, 256, 512] {
                    for ws in [2usize, 4, 8] {
                        for x1 in ScaleKind::ALL {
                            for x2 in ScaleKind::ALL {
                                for det in [true, false] {
                                    jobs.push(Job {
                                        knobs: Knobs {
                                            world_size: Some(ws),
                                            x1_scales: Some(x1),
                                            x2_scales: Some(x2),
                                            deterministic_comm: Some(det),
                                        },
                                        opts: opts(
                                            &[Family::Content],
                                            [1, 4, 8, 16, 32, 64].iter().map(|m| m * ws).collect(),
                                            k,
                                            n,
                                            InType::E4M3,
                                        ),
                                        draw: Draw::Wide,
                                    });
                                }
                            }
                        }
                    }
                }
            }
            // the vacuity probes (module doc)
            for x1 in ScaleKind::ALL {
                for x2 in ScaleKind::ALL {
                    jobs.push(Job {
                        knobs: Knobs {
                            world_size: Some(2),
                            x1_scales: Some(x1),
                            x2_scales: Some(x2),
                            deterministic_comm: Some(true),
                        },
                        opts: opts(&[Family::Content], vec![2, 8], 128, 64, InType::E4M3),
                        draw: Draw::Unit,
                    });
                }
            }
            Ok(jobs)
        }
        "te-anchor" => Ok(vec![Job {
            knobs: Knobs::default(),
            opts: opts(
                &[Family::Anchor],
                vec![1, 2, 17, 33, 128, 257, 1024],
                2048,
                2048,
                InType::Bf16,
            ),
            draw: Draw::Wide,
        }]),
        "edges" => {
            let ws = subject.world_size().max(1);
            let ms: Vec<usize> = edge_ms(&subject.m_boundaries())
                .into_iter()
                .filter(|m| m.is_multiple_of(ws))
                .collect();
            Ok(vec![Job {
                knobs: Knobs::default(),
                opts: opts(&[Family::Batch, Family::Content], ms, 1024, 64, InType::F32),
                draw: Draw::Wide,
            }])
        }
        _ => Err(format!(
            "unknown matrix '{name}'; built-in matrices: {}",
            BUILTINS.join(", ")
        )),
    }
}

/// Runs a matrix: one subject per distinct [`Knobs`] from `factory`, every
/// job's cells (or one shard's, see the module doc), one positive control
/// per family. Err: a factory error, bad options, no cell, or a subject
/// that reported itself broken.
pub fn run_matrix(
    jobs: &[Job],
    factory: &Factory,
    shard: Option<(usize, usize)>,
    progress: &dyn Fn(usize, usize),
) -> Result<Report, String> {
    let built = |k: &Knobs| -> Result<Held<'static>, String> { factory(k).map(Held::Owned) };
    // the subject's own input type wins over the matrix's
    let mut resolved = jobs.to_vec();
    let mut inputs: BTreeMap<Knobs, Option<InType>> = BTreeMap::new();
    for j in &mut resolved {
        if let std::collections::btree_map::Entry::Vacant(e) = inputs.entry(j.knobs) {
            e.insert(factory(&j.knobs)?.input());
        }
        if let Some(t) = inputs[&j.knobs].filter(|t| *t != InType::F32) {
            j.opts.input = t;
        }
    }
    run_jobs(&resolved, &built, None, shard, Content::default(), progress)
}

/// [`run_matrix`] on one subject the caller holds (an `exec:` runner
/// started once, a GPU context): every job must leave the knobs unset; the
/// subject's own input type wins as there.
pub fn run_matrix_on(
    jobs: &[Job],
    subject: &dyn Subject,
    shard: Option<(usize, usize)>,
    progress: &dyn Fn(usize, usize),
) -> Result<Report, String> {
    if let Some(j) = jobs.iter().find(|j| !j.knobs.is_empty()) {
        return Err(format!(
            "the matrix sets knobs ({}) that one subject cannot take",
            j.knobs.id()
        ));
    }
    let mut resolved = jobs.to_vec();
    if let Some(t) = subject.input().filter(|t| *t != InType::F32) {
        for j in &mut resolved {
            j.opts.input = t;
        }
    }
    run_jobs(
        &resolved,
        &|_| Ok(Held::Borrowed(subject)),
        None,
        shard,
        Content::default(),
        progress,
    )
}

/// The engine under [`super::check`] and [`run_matrix`].
pub(super) fn run_jobs<'a>(
    jobs: &[Job],
    factory: &dyn Fn(&Knobs) -> Result<Held<'a>, String>,
    vs: Option<&dyn Subject>,
    shard: Option<(usize, usize)>,
    content: Content,
    progress: &dyn Fn(usize, usize),
) -> Result<Report, String> {
    if jobs.is_empty() {
        return Err("the matrix has no jobs".into());
    }
    for j in jobs {
        j.opts.validate(vs.is_some())?;
    }
    let mut subjects: BTreeMap<Knobs, Held<'a>> = BTreeMap::new();
    for j in jobs {
        if let std::collections::btree_map::Entry::Vacant(e) = subjects.entry(j.knobs) {
            e.insert(factory(&j.knobs)?);
        }
    }
    // every cell of the whole matrix, in order
    let mut all: Vec<(usize, Plan)> = Vec::new();
    let mut families: Vec<Family> = Vec::new();
    let mut info = MatrixInfo::default();
    for (ji, j) in jobs.iter().enumerate() {
        let ws = subjects[&j.knobs].get().world_size();
        let mut fams = j.opts.families.clone();
        fams.sort_unstable();
        fams.dedup();
        for f in fams {
            families.push(f);
            let planned = plans(&j.opts, f, ws);
            let (l, merged) = listed(&j.opts, f, planned.len());
            info.listed += l;
            info.merged += merged;
            info.skipped += l.saturating_sub(merged + planned.len());
            info.cells += planned.len();
            if j.draw == Draw::Unit {
                info.probes += l;
            }
            all.extend(planned.into_iter().map(|p| (ji, p)));
            if all.len() > Limits::MAX_CELLS {
                return Err(format!("the matrix has more than {} cells", Limits::MAX_CELLS));
            }
        }
    }
    families.sort_unstable();
    families.dedup();
    if all.is_empty() {
        let s = subjects[&jobs[0].knobs].get();
        if families == [Family::Rank] && s.world_size() < 2 {
            return Err(format!(
                "no cell to check: the rank family needs a subject with world size 2 or more; {} has world size {}",
                s.name(),
                s.world_size()
            ));
        }
        return Err("no cell to check: every family needs M >= 2, or a position inside the batch".into());
    }
    let selected: Vec<usize> = match shard {
        Some((i, n)) => (0..all.len()).filter(|x| x % n == i).collect(),
        None => (0..all.len()).collect(),
    };
    let mut session: Option<Session> = None;
    // a subject whose output does not depend on its inputs: an error, once
    // per subject (super::depends), before any cell
    let mut probed: Vec<Knobs> = Vec::new();
    for job in jobs {
        if probed.contains(&job.knobs) {
            continue;
        }
        probed.push(job.knobs);
        if !session.as_ref().is_some_and(|s| s.serves(&job.opts, job.draw, content)) {
            session = Some(Session::new(&job.opts, job.draw, content));
        }
        let s = session.as_mut().expect("set above");
        input_dependence(subjects[&job.knobs].get(), s, &job.opts)?;
        if let (Some(v), true) = (vs, probed.len() == 1) {
            input_dependence(v, s, &job.opts)?;
        }
    }
    let mut cells = Vec::with_capacity(selected.len());
    for (done, &x) in selected.iter().enumerate() {
        let (ji, plan) = &all[x];
        let job = &jobs[*ji];
        if !session.as_ref().is_some_and(|s| s.serves(&job.opts, job.draw, content)) {
            session = Some(Session::new(&job.opts, job.draw, content));
        }
        let s = session.as_mut().expect("set above");
        cells.push(run_plan(
            plan,
            s,
            &job.opts,
            &job.knobs,
            subjects[&job.knobs].get(),
            vs,
        )?);
        progress(done + 1, selected.len());
    }
    // one control per family: the largest-M cell of the first job that has it
    let mut controls = Vec::new();
    for f in families {
        let Some((ji, plan)) = all
            .iter()
            .filter(|(ji, p)| p.family == f && *ji == all.iter().find(|(_, q)| q.family == f).map_or(0, |q| q.0))
            .max_by_key(|(_, p)| p.m)
        else {
            continue;
        };
        let job = &jobs[*ji];
        if !session.as_ref().is_some_and(|s| s.serves(&job.opts, job.draw, content)) {
            session = Some(Session::new(&job.opts, job.draw, content));
        }
        let ws = subjects[&job.knobs].get().world_size();
        controls.push(control(plan, session.as_mut().expect("set above"), &job.opts, ws)?);
    }
    let first = subjects[&jobs[0].knobs].get();
    let mut report = Report::new(first.name(), vs.map(|s| s.name()), &jobs[0].opts, cells, controls);
    report.matrix = Some(info);
    Ok(report)
}
