//! The fuzz loop: replay the corpus, then draw cases until one fails and
//! its replays confirm it, the case limit or the time budget is reached;
//! shrink the first confirmed failure, confirm the minimal case, explain
//! it, save it to the corpus. Failures whose replays do not all fail are
//! kept as `NON_DET` and the search goes on.

use super::case::{corpus_name, run, FuzzCase, Outcome};
use super::corpus::{load_corpus, save_case};
use super::explanation::explain;
use super::shrink::Shrinker;
use super::strategy::{Draw, Space};
use super::{FuzzConfig, FuzzError, FuzzOutcome, NonDet, Shrunk, MAX_CONFIRM, MAX_NON_DET};
use crate::bi::{Cell, Content, Factory};
use crate::order::InType;
use crate::rng::SplitMix64;
use crate::subject::{Knobs, Subject};
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use std::collections::BTreeMap;
use std::time::Instant;

/// The subject of each knob setting: the given one for no knobs, the
/// others built once each by the factory.
struct Subjects<'a> {
    plain: &'a dyn Subject,
    factory: &'a Factory<'a>,
    built: BTreeMap<Knobs, Box<dyn Subject>>,
}

impl Subjects<'_> {
    fn get(&mut self, k: &Knobs) -> Result<&dyn Subject, FuzzError> {
        if k.is_empty() {
            return Ok(self.plain);
        }
        if !self.built.contains_key(k) {
            let s = (self.factory)(k).map_err(FuzzError::BadInput)?;
            self.built.insert(*k, s);
        }
        Ok(self.built[k].as_ref())
    }

    /// Runs a case: Some(cell) when it fails; skipped cases are noted in `out`.
    fn fails(&mut self, fc: &FuzzCase, out: &mut FuzzOutcome) -> Result<Option<Cell>, FuzzError> {
        match run(self.get(&fc.knobs)?, fc)? {
            Outcome::Fail(c) => Ok(Some(*c)),
            Outcome::Pass => Ok(None),
            Outcome::Skip(why) => {
                out.cases_skipped += 1;
                if out.first_error.is_none() {
                    out.first_error = why;
                }
                Ok(None)
            }
        }
    }
}

/// How many of `n` fresh runs of `fc` fail again (never memoised).
fn replays(subjects: &mut Subjects, fc: &FuzzCase, n: u32, out: &mut FuzzOutcome) -> Result<u32, FuzzError> {
    let mut failed = 0;
    for _ in 0..n {
        if subjects.fails(fc, out)?.is_some() {
            failed += 1;
        }
    }
    Ok(failed)
}

/// Notes a failure whose replays did not all fail.
fn non_det(out: &mut FuzzOutcome, case: &FuzzCase, cell: &Cell, failed: u32, replays: u32, stage: &'static str) {
    out.non_det_count += 1;
    if out.non_det.len() < MAX_NON_DET {
        out.non_det.push(NonDet {
            case: case.clone(),
            cell: cell.clone(),
            failed,
            replays,
            stage,
        });
    }
}

/// The proptest generator for a run seed: ChaCha, keyed by the seed's
/// SplitMix64 stream.
fn rng(seed: u64) -> TestRng {
    let mut s = SplitMix64::new(seed);
    let mut key = [0u8; 32];
    for chunk in key.chunks_mut(8) {
        chunk.copy_from_slice(&s.next_u64().to_le_bytes());
    }
    TestRng::from_seed(RngAlgorithm::ChaCha, &key)
}

/// Fuzzes `subject` (see the module doc of `fuzz`); `cfg.knobs` must be
/// empty or only the empty setting (use [`fuzz_with`] for knobs).
pub fn fuzz(subject: &dyn Subject, cfg: &FuzzConfig) -> Result<FuzzOutcome, FuzzError> {
    let none = |k: &Knobs| -> Result<Box<dyn Subject>, String> {
        Err(format!("knob setting {} needs a subject factory", k.id()))
    };
    fuzz_with(subject, &none, cfg)
}

/// The settings' checks, before anything runs: Err(BadInput) names the
/// first bad one (a caller can refuse bad input before it prints a word).
pub fn check_config(cfg: &FuzzConfig, subject: &dyn Subject) -> Result<(), FuzzError> {
    checked_space(cfg, subject).map(|_| ())
}

fn checked_space(cfg: &FuzzConfig, subject: &dyn Subject) -> Result<Space, FuzzError> {
    if cfg.confirm > MAX_CONFIRM {
        return Err(FuzzError::BadInput(format!(
            "--confirm {} is out of range (0..={MAX_CONFIRM})",
            cfg.confirm
        )));
    }
    Space::new(cfg, subject)
}

/// [`fuzz`] over knob settings: `factory` builds the subject of each
/// non-empty setting in `cfg.knobs` (once each); `subject` is the setting
/// without knobs.
pub fn fuzz_with(subject: &dyn Subject, factory: &Factory, cfg: &FuzzConfig) -> Result<FuzzOutcome, FuzzError> {
    let space = checked_space(cfg, subject)?;
    let input = cfg.input.or(subject.input()).unwrap_or(InType::F32);
    let spec = if cfg.spec.is_empty() {
        subject.name()
    } else {
        cfg.spec.clone()
    };
    let mut subjects = Subjects {
        plain: subject,
        factory,
        built: BTreeMap::new(),
    };
    let mut out = FuzzOutcome {
        seed: cfg.seed,
        cases_tried: 0,
        corpus_replayed: 0,
        cases_skipped: 0,
        first_error: None,
        failure: None,
        non_det: Vec::new(),
        non_det_count: 0,
    };
    let n = cfg.confirm;
    // the corpus first: a case that fails again, every replay, is the answer
    let own = corpus_name(&subject.name());
    if let Some(dir) = &cfg.corpus {
        for (path, file) in load_corpus(dir)? {
            if file.name.as_deref() != Some(own.as_str()) {
                continue;
            }
            let fc = FuzzCase::from_case(&file, input)
                .map_err(|e| FuzzError::BadInput(format!("{}: {e}", path.display())))?;
            out.corpus_replayed += 1;
            if let Some(cell) = subjects.fails(&fc, &mut out)? {
                let failed = replays(&mut subjects, &fc, n, &mut out)?;
                if failed < n {
                    non_det(&mut out, &fc, &cell, failed, n, "corpus");
                    continue;
                }
                let explanation = explain(subjects.get(&fc.knobs)?, (&fc, &cell), (&fc, &cell));
                out.failure = Some(Shrunk {
                    found: fc.clone(),
                    file: fc.to_case(&spec, &subject.name()),
                    case: fc,
                    cell,
                    explanation,
                    shrink_runs: 0,
                    from_corpus: Some(path),
                    confirmed: n,
                });
                return Ok(out);
            }
        }
    }
    let strategy = space.strategy();
    let mut runner = TestRunner::new_with_rng(Config::default(), rng(cfg.seed));
    let start = Instant::now();
    loop {
        if cfg.max_cases.is_some_and(|n| out.cases_tried >= n) || start.elapsed() >= cfg.budget {
            return Ok(out);
        }
        let mut tree = strategy
            .new_tree(&mut runner)
            .map_err(|e| FuzzError::Broken(format!("drawing a case: {e}")))?;
        let case_seed = SplitMix64::for_item(cfg.seed ^ 0xF0A2_C0DE, out.cases_tried).next_u32() as u64;
        // the batch family's baseline is the smaller of the two batch sizes
        let make = move |d: Draw| FuzzCase {
            family: d.0,
            base_m: d.1.min(d.2),
            m: d.1.max(d.2),
            k: d.3,
            n: d.4,
            row: d.5,
            content: Content {
                class: d.6,
                others: d.7,
                ..Content::default()
            },
            knobs: d.8,
            seed: case_seed,
            input,
        };
        let fc = make(tree.current());
        out.cases_tried += 1;
        let Some(cell) = subjects.fails(&fc, &mut out)? else {
            continue;
        };
        // replays first: a failure that does not come back is NON_DET
        let failed = replays(&mut subjects, &fc, n, &mut out)?;
        if failed < n {
            non_det(&mut out, &fc, &cell, failed, n, "new");
            continue;
        }
        // shrink: proptest's walk, then the exact searches
        let found = (fc.clone(), cell.clone());
        let mut scratch = out.clone();
        let mut test = |c: &FuzzCase| subjects.fails(c, &mut scratch);
        let mut shrinker = Shrinker::new(&mut test, cfg.max_shrink_runs);
        let best = shrinker.walk(&mut tree, &make, (fc, cell))?;
        let (mut case, mut cell) = shrinker.refine(best, space.m_step, space.k_step)?;
        let shrink_runs = shrinker.runs;
        // the minimal case must replay its failure too; else the confirmed
        // case as found is the result
        if case != found.0 {
            let failed = replays(&mut subjects, &case, n, &mut out)?;
            if failed < n {
                non_det(&mut out, &case, &cell, failed, n, "minimal");
                (case, cell) = found.clone();
            }
        }
        let explanation = explain(subjects.get(&case.knobs)?, (&found.0, &found.1), (&case, &cell));
        let file = case.to_case(&spec, &subject.name());
        if let Some(dir) = &cfg.corpus {
            save_case(dir, &file)?;
        }
        out.failure = Some(Shrunk {
            found: found.0,
            case,
            file,
            cell,
            explanation,
            shrink_runs,
            from_corpus: None,
            confirmed: n,
        });
        return Ok(out);
    }
}
