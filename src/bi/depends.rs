//! Whether a subject's output depends on its inputs at all: a runner that
//! answers zeros, or any constant, would otherwise pass every cell (the
//! same bytes whatever the batch).
//!
//! # Contract
//! - Once per subject of a check (and per switch partner), before any
//!   cell: the subject runs the batch of the smallest M listed (target row
//!   at 0, as the cells draw it) and the same batch with every input
//!   negated. A GEMM's outputs change sign under that (`(-A) B = -(A B)`,
//!   and rounding is sign-symmetric), so their bytes differ unless every
//!   output is zero or NaN. If the subject's two answers are the same
//!   bytes while the CPU model's (`fma`) are not, the whole check is an
//!   error: `subject S: its output does not depend on its inputs ...`
//!   (`mxbi bi run` exits 2).
//! - Inconclusive, and silent, when the subject cannot run the probe (an
//!   error of any kind: the cells will report it) or when the model's own
//!   two answers are the same bytes (inputs that are all zero).
//! - Cost: two runs of one small batch per subject (plus the model's two).

use super::options::CheckOptions;
use super::session::{run_batch, Batch, Session};
use crate::order::Order;
use crate::subject::{Model, Subject};

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Err (one line) when `subject`'s output provably does not depend on its
/// inputs (see the module doc); Ok otherwise, inconclusive probes included.
pub(super) fn input_dependence(
    subject: &dyn Subject,
    session: &mut Session,
    opts: &CheckOptions,
) -> Result<(), String> {
    let Some(&m) = opts.ms.iter().min() else {
        return Ok(());
    };
    let a = session.batch(&Batch::with_target(m, 0, 0));
    let neg: Vec<f32> = a.iter().map(|x| -x).collect();
    let rows = &session.rows;
    let sel: Vec<usize> = (0..m).collect();
    let (Ok(x), Ok(y)) = (
        run_batch(subject, 0, rows, &a, &sel),
        run_batch(subject, 0, rows, &neg, &sel),
    ) else {
        return Ok(());
    };
    if bits(&x) != bits(&y) {
        return Ok(());
    }
    let model = Model::new("fma".parse::<Order>().expect("fma parses"));
    let (Ok(mx), Ok(my)) = (
        run_batch(&model, 0, rows, &a, &sel),
        run_batch(&model, 0, rows, &neg, &sel),
    ) else {
        return Ok(());
    };
    if bits(&mx) == bits(&my) {
        return Ok(());
    }
    let first = x
        .first()
        .map_or(String::new(), |v| format!(", e.g. {:08x}", v.to_bits()));
    Err(format!(
        "subject {}: its output does not depend on its inputs: a batch (M = {m}, K = {}, N = {}) and the same batch negated give the same bytes{first}; a GEMM's outputs change sign",
        subject.name(),
        rows.k,
        rows.n
    ))
}
