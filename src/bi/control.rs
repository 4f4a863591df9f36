//! The positive control: a subject built to break every family, run on
//! one cell per family, and the record of whether it failed as it must
//! ([`Control`]).

use super::execute::run_plan;
use super::family::Family;
use super::options::CheckOptions;
use super::plan::Plan;
use super::session::Session;
use super::verdict::Verdict;
use crate::gemm::{Matrix, Problem};
use crate::subject::{Knobs, Model, Subject, SubjectError};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering};

/// A positive control: a cell run on a subject built to fail it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Control {
    pub family: Family,
    pub cell: String,
    pub subject: String,
    pub verdict: Verdict,
    pub expected: Verdict,
    /// The control failed as it must; false makes the whole run invalid.
    pub held: bool,
}

/// A subject built to break batch invariance, for the positive control:
/// the CPU model (`fma`) whose output bits are perturbed by a hash of the
/// whole batch (its bytes, M, the row's position), the rank asked for and,
/// when `nondet`, a call counter. Its rows depend on other rows, on M, on
/// position, on rank and on order, so every family must fail on it.
struct ControlSubject {
    nondet: bool,
    world_size: usize,
    calls: AtomicU64,
}

fn fnv(h: &mut u64, bytes: &[u8]) {
    for &b in bytes {
        *h ^= b as u64;
        *h = h.wrapping_mul(0x0000_0100_0000_01B3);
    }
}

impl Subject for ControlSubject {
    fn name(&self) -> String {
        format!("control:{}", if self.nondet { "nondet" } else { "coupled" })
    }

    fn world_size(&self) -> usize {
        self.world_size
    }

    fn run(&self, p: &Problem, rows: Option<&[usize]>) -> Result<Vec<f32>, SubjectError> {
        self.run_on_rank(p, 0, rows)
    }

    fn run_on_rank(&self, p: &Problem, rank: usize, rows: Option<&[usize]>) -> Result<Vec<f32>, SubjectError> {
        let model = Model::new("fma".parse().expect("fma parses"));
        let all: Vec<usize> = (0..p.m).collect();
        let sel = rows.unwrap_or(&all);
        let mut out = model.run(p, Some(sel))?;
        let mut h = 0xCBF2_9CE4_8422_2325u64;
        if let Matrix::F32(a) = p.a {
            for x in a {
                fnv(&mut h, &x.to_bits().to_le_bytes());
            }
        }
        fnv(&mut h, &(p.m as u64).to_le_bytes());
        fnv(&mut h, &(rank as u64).to_le_bytes());
        if self.nondet {
            fnv(&mut h, &self.calls.fetch_add(1, Ordering::Relaxed).to_le_bytes());
        }
        for (ri, &r) in sel.iter().enumerate() {
            let mut hr = h;
            fnv(&mut hr, &(r as u64).to_le_bytes());
            for c in 0..p.n {
                let mask = ((hr >> (16 * (c % 4))) & 0xFFFF) as u32 | 1;
                let x = &mut out[ri * p.n + c];
                *x = f32::from_bits(x.to_bits() ^ mask);
            }
        }
        Ok(out)
    }
}

/// The positive control of one family, on `plan` (the family's largest-M
/// cell): the control subject must fail it.
pub(super) fn control(plan: &Plan, session: &mut Session, opts: &CheckOptions, ws: usize) -> Result<Control, String> {
    let f = plan.family;
    let coupled = ControlSubject {
        nondet: f == Family::Repeat,
        world_size: ws,
        calls: AtomicU64::new(0),
    };
    let model = Model::new("fma".parse().expect("fma parses"));
    let none = Knobs::default();
    // switch: the model against the coupled control
    let cell = if f == Family::Switch {
        run_plan(plan, session, opts, &none, &model, Some(&coupled))?
    } else {
        run_plan(plan, session, opts, &none, &coupled, None)?
    };
    let expected = if f == Family::Repeat {
        Verdict::NonDet
    } else {
        Verdict::Fail
    };
    Ok(Control {
        family: f,
        cell: cell.id.clone(),
        subject: coupled.name(),
        verdict: cell.verdict,
        expected,
        held: cell.verdict == expected,
    })
}
