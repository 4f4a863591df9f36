//! `mxbi reveal`: a subject's reduction tree recovered by probing it
//! (docs/EXPLAIN.md), directly on a subject or through files a runner
//! answers (`reveal gen|solve`, [`super::reveal_files`]).

use super::reveal_shape::{mx_input, options, outcome, print_data_dependent, print_revealed, RevealShape};
use super::{CliError, Outcome, Result};
use clap::{Args, Subcommand};
use mxbi::explain::{self, RevealOptions};
use mxbi::gemm::{BLayout, Matrix, Problem};
use mxbi::mx::MxFormat;
use mxbi::subject::Subject;
use std::path::PathBuf;

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct RevealArgs {
    #[command(subcommand)]
    pub files: Option<RevealFiles>,
    #[command(flatten)]
    pub direct: RevealDirect,
}

#[derive(Args, Debug)]
pub struct RevealDirect {
    /// The subject: model:ORDER or dispatch:FILE.
    #[arg(long)]
    pub subject: Option<String>,
    #[command(flatten)]
    pub shape: RevealShape,
    /// Print the recovered tree as JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Print wall seconds per phase (calibration, probe launches, answer
    /// reading, checks, shape matching, verification) on stderr.
    #[arg(long)]
    pub timings: bool,
    /// Run one untimed launch of the subject at the reveal's shape first
    /// (a GPU subject's first call loads its kernels), as FPRev's timed
    /// comparison does; not counted in `launches`.
    #[arg(long)]
    pub warmup: bool,
    /// Also print the recovered tree node by node (one `nI = sum(...)`
    /// line per addition) when no order names it; the default is a
    /// summary in a few lines.
    #[arg(long)]
    pub tree: bool,
}

#[derive(Subcommand, Debug)]
pub enum RevealFiles {
    /// Write the first round of probe launches to DIR (job-NNNNNN/a.npy,
    /// b.npy); a runner writes each job's out.npy.
    Gen {
        /// The folder the probe launches are written to.
        #[arg(long)]
        dir: PathBuf,
        #[command(flatten)]
        shape: RevealShape,
    },
    /// Read the runner's outputs in DIR: write the next round's launches,
    /// or print the recovered tree when no launch is missing.
    Solve {
        /// The folder `reveal gen` wrote, with the runner's out.npy files.
        #[arg(long)]
        dir: PathBuf,
        /// Print the recovered tree as JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

pub fn reveal(a: RevealArgs) -> Result<Outcome> {
    match a.files {
        Some(RevealFiles::Gen { dir, shape }) => return super::reveal_files::gen(&dir, &shape),
        Some(RevealFiles::Solve { dir, json }) => return super::reveal_files::solve(&dir, json),
        None => {}
    }
    let spec = a
        .direct
        .subject
        .as_deref()
        .ok_or_else(|| CliError("reveal needs --subject SPEC (or the gen/solve subcommands)".into()))?;
    let parsed = super::subject_specs::parse_subject(spec)?;
    let o = options(&a.direct.shape, parsed.subject.input().or(parsed.input))?;
    let mx = mx_input(a.direct.shape.input.as_deref());
    let subject = parsed.subject.as_ref();
    let t0 = std::time::Instant::now();
    if a.direct.warmup {
        warm_up(subject, &o, mx)?;
    }
    let warm = t0.elapsed().as_secs_f64();
    let r = match mx {
        Some(f) => explain::reveal_mx(subject, o, f),
        None => explain::reveal(subject, o),
    };
    let r = match r {
        Err(explain::RevealError::DataDependent(rep)) => return print_data_dependent(&rep, a.direct.json),
        r => r?,
    };
    if a.direct.timings {
        if a.direct.warmup {
            super::write_stderr_line(&format!("reveal timing: warm-up launch (not counted) {warm:.3} s"));
        }
        for (what, secs) in &r.timings {
            super::write_stderr_line(&format!("reveal timing: {what} {secs:.3} s"));
        }
    }
    print_revealed(&r, a.direct.json, a.direct.tree)?;
    Ok(outcome(&r))
}

/// One launch of zeros at the reveal's shape (its answer is not used).
fn warm_up(subject: &dyn Subject, o: &RevealOptions, mx: Option<MxFormat>) -> Result<()> {
    let (a, b) = (vec![0f32; o.m * o.k], vec![0f32; o.k * o.n]);
    let (ca, cb) = (vec![0u8; o.m * o.k], vec![0u8; o.k * o.n]);
    let blocks = o.k / mxbi::gemm::MX_BLOCK;
    let (sa, sb) = (vec![127u8; o.m * blocks], vec![127u8; blocks * o.n]);
    let (a, b) = match mx {
        None => (Matrix::F32(&a), Matrix::F32(&b)),
        Some(format) => (
            Matrix::Mx {
                codes: &ca,
                scales: &sa,
                format,
            },
            Matrix::Mx {
                codes: &cb,
                scales: &sb,
                format,
            },
        ),
    };
    let p = Problem {
        a,
        b,
        m: o.m,
        n: o.n,
        k: o.k,
        b_layout: BLayout::Kn,
    };
    subject
        .run(&p, None)
        .map(|_| ())
        .map_err(|e| CliError(format!("reveal --warmup: {e}")))
}
