//! Subject specs, `KIND:ARG`, parsed in one place: a [`Factory`] holds the
//! kinds a build knows, each with its spelling and its builder, and turns a
//! spec into a [`Parsed`] subject under a matrix cell's [`Knobs`] and the
//! caller's [`RunnerOptions`].
//!
//! This module defines the kinds of the subject layer: `model:ORDER` (the
//! CPU model), `dispatch:FILE` (an order chosen by shape from a JSON table),
//! `exec:CMD` (an external runner) and `dump:DIR` (a dump folder). Layers
//! above add theirs (`op:` in `crate::op::spec`, the GPU kinds and `nccl:`
//! in `crate::device`); `crate::subjects::factory` lists every kind of this
//! build, once, for the CLI, the case files and the Python binding.
//!
//! # Contract
//! - Every error is one line that starts with what was given
//!   (`subject 'SPEC': ...`, `dispatch table FILE: ...`, ...), and a spec
//!   without a known kind lists the kinds of the factory.
//! - A subject that cannot honour a set knob is refused, not built without it.
//! - Runner options reach only the runner kinds (`exec:` and `dump:`);
//!   other kinds ignore them.

use super::{Dispatch, Dump, Exec, ExecOptions, Knobs, Model, Subject};
use crate::order::{InType, Order};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Most bytes a dispatch table file may have.
pub const MAX_TABLE_BYTES: u64 = 1 << 20;

/// Longest runner timeout a caller may set, in seconds (one day).
pub const MAX_TIMEOUT_SECS: f64 = 86_400.0;

/// What runner subjects (`exec:`, `dump:`) take from the caller (command
/// line flags, a case file, Python keyword arguments).
#[derive(Clone, Debug, Default)]
pub struct RunnerOptions {
    /// The input type jobs announce (None: f32; [`Factory::pair`] tells a
    /// runner its partner's).
    pub input: Option<InType>,
    /// Longest wait for each answer (None: the runner's default, 120 s).
    pub timeout: Option<Duration>,
    /// Keep an `exec:` runner's work folder.
    pub keep: bool,
    /// The folder an `exec:` runner starts in (a case file's folder).
    pub dir: Option<PathBuf>,
    /// How the caller spells the input option in messages (`--input`,
    /// `input`); empty: `input`.
    pub input_flag: &'static str,
}

/// A runner timeout given in seconds, as `flag` names it: in (0, 86400].
pub fn timeout_secs(secs: f64, flag: &str) -> Result<Duration, String> {
    if secs > 0.0 && secs <= MAX_TIMEOUT_SECS {
        Ok(Duration::from_secs_f64(secs))
    } else {
        Err(format!("{flag} {secs}: expected seconds in (0, 86400]"))
    }
}

/// A built subject and what a checker should know about it.
pub struct Parsed {
    pub subject: Box<dyn Subject>,
    /// The input type its order reads (None: any).
    pub input: Option<InType>,
    /// M values where its behaviour may change (dispatch bounds, tiles).
    pub boundaries: Vec<usize>,
    /// An `exec:` runner's kept work folder.
    pub kept: Option<PathBuf>,
}

impl Parsed {
    /// A subject whose input type and boundaries are its own.
    pub fn of(subject: Box<dyn Subject>) -> Parsed {
        Parsed {
            input: subject.input(),
            boundaries: subject.m_boundaries(),
            subject,
            kept: None,
        }
    }
}

/// Builds a subject of one kind: `(spec, arg, knobs, runner)`, `arg` being
/// what follows `KIND:` in `spec`.
pub type Build = fn(&str, &str, &Knobs, &RunnerOptions) -> Result<Parsed, String>;

/// One subject kind: its name (before the colon), its spelling in messages
/// and its builder.
#[derive(Clone, Copy)]
pub struct Kind {
    pub name: &'static str,
    pub usage: &'static str,
    pub build: Build,
    /// A runner kind: started last by [`Factory::pair`], told its partner's
    /// input type.
    pub runner: bool,
}

/// `model:ORDER`: the CPU model of one order.
pub const MODEL: Kind = Kind {
    name: "model",
    usage: "model:ORDER",
    build: build_model,
    runner: false,
};

/// `dispatch:FILE`: an order chosen by shape from a JSON table.
pub const DISPATCH: Kind = Kind {
    name: "dispatch",
    usage: "dispatch:FILE",
    build: build_dispatch,
    runner: false,
};

/// `exec:CMD`: an external runner (docs/BI.md, "Exec protocol").
pub const EXEC: Kind = Kind {
    name: "exec",
    usage: "exec:CMD",
    build: build_exec,
    runner: true,
};

/// `dump:DIR`: a dump folder's recorded outputs.
pub const DUMP: Kind = Kind {
    name: "dump",
    usage: "dump:DIR",
    build: build_dump,
    runner: false,
};

fn build_model(spec: &str, arg: &str, knobs: &Knobs, _: &RunnerOptions) -> Result<Parsed, String> {
    let order: Order = arg.parse().map_err(|e| format!("subject '{spec}': {e}"))?;
    knobs.refuse_any(spec, "the CPU model is one device with plain inputs")?;
    Ok(Parsed::of(Box::new(Model::new(order))))
}

fn build_dispatch(spec: &str, arg: &str, knobs: &Knobs, _: &RunnerOptions) -> Result<Parsed, String> {
    knobs.refuse_any(spec, "a dispatch table is one device with plain inputs")?;
    Ok(Parsed::of(Box::new(dispatch_table(Path::new(arg))?)))
}

fn build_exec(spec: &str, arg: &str, knobs: &Knobs, runner: &RunnerOptions) -> Result<Parsed, String> {
    knobs.refuse_any(spec, "an external runner computes whole batches on its own device")?;
    let mut opts = ExecOptions {
        keep: runner.keep,
        input: runner.input.unwrap_or(InType::F32),
        dir: runner.dir.clone(),
        ..ExecOptions::default()
    };
    if let Some(t) = runner.timeout {
        opts.timeout = t;
    }
    let e = Exec::start(arg, opts.clone())?;
    Ok(Parsed {
        kept: runner.keep.then(|| e.work_dir().to_path_buf()),
        subject: Box::new(e),
        input: Some(opts.input),
        boundaries: vec![],
    })
}

fn build_dump(spec: &str, arg: &str, knobs: &Knobs, runner: &RunnerOptions) -> Result<Parsed, String> {
    knobs.refuse_any(spec, "a dump folder holds one setting's outputs")?;
    let d = Dump::open(arg)?;
    if let Some(t) = runner.input.filter(|t| *t != d.input_type()) {
        let flag = if runner.input_flag.is_empty() {
            "input"
        } else {
            runner.input_flag
        };
        return Err(format!(
            "dump folder {arg} holds {} inputs, not {} ({flag})",
            d.input_type().name(),
            t.name()
        ));
    }
    Ok(Parsed {
        input: Some(d.input_type()),
        boundaries: d.boundaries().to_vec(),
        subject: Box::new(d),
        kept: None,
    })
}

/// Reads a dispatch table file (bounded before reading).
pub fn dispatch_table(path: &Path) -> Result<Dispatch, String> {
    let shown = path.display();
    let len = std::fs::metadata(path)
        .map_err(|e| format!("dispatch table {shown}: {e}"))?
        .len();
    if len > MAX_TABLE_BYTES {
        return Err(format!(
            "dispatch table {shown}: {len} bytes (at most {MAX_TABLE_BYTES})"
        ));
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("dispatch table {shown}: {e}"))?;
    Dispatch::parse(&shown.to_string(), &text)
}

/// The subject kinds a build knows, in the order messages list them.
pub struct Factory {
    kinds: Vec<Kind>,
}

impl Factory {
    /// A factory of `kinds` (names must differ).
    pub fn new(kinds: Vec<Kind>) -> Factory {
        debug_assert!(
            kinds
                .iter()
                .enumerate()
                .all(|(i, k)| kinds[..i].iter().all(|o| o.name != k.name)),
            "a kind registered twice"
        );
        Factory { kinds }
    }

    /// The kinds' spellings for messages: `a, b, c or d`.
    pub fn usage(&self) -> String {
        let u: Vec<&str> = self.kinds.iter().map(|k| k.usage).collect();
        match u.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
            Some((last, _)) => last.to_string(),
            None => String::new(),
        }
    }

    /// The kind `spec` names (one-line error for a spec without a colon or
    /// with a kind this factory lacks).
    pub fn kind_of<'s>(&self, spec: &'s str) -> Result<(&Kind, &'s str), String> {
        let (kind, arg) = spec
            .split_once(':')
            .ok_or_else(|| format!("subject '{spec}': expected KIND:ARG ({})", self.usage()))?;
        let k = self
            .kinds
            .iter()
            .find(|k| k.name == kind)
            .ok_or_else(|| format!("subject '{spec}': unknown kind '{kind}' ({})", self.usage()))?;
        Ok((k, arg))
    }

    /// Builds the subject `spec` names under `knobs` and `runner`.
    pub fn parse(&self, spec: &str, knobs: &Knobs, runner: &RunnerOptions) -> Result<Parsed, String> {
        let (kind, arg) = self.kind_of(spec)?;
        (kind.build)(spec, arg, knobs, runner)
    }

    /// The subject `spec` names under `knobs`, runner options at their
    /// defaults.
    pub fn subject(&self, spec: &str, knobs: &Knobs) -> Result<Box<dyn Subject>, String> {
        self.parse(spec, knobs, &RunnerOptions::default()).map(|p| p.subject)
    }

    /// Whether `spec` names a runner kind (started last by [`Factory::pair`]).
    pub fn is_runner(&self, spec: &str) -> bool {
        self.kind_of(spec).is_ok_and(|(k, _)| k.runner)
    }

    /// A subject and its switch partner (`vs`). Runners are started last,
    /// told the input type `runner.input`, else the one the other subject
    /// reads (a bf16 GEMM's partner runner gets bf16 jobs), else f32.
    pub fn pair(
        &self,
        spec: &str,
        vs: Option<&str>,
        runner: &RunnerOptions,
    ) -> Result<(Parsed, Option<Parsed>), String> {
        let none = Knobs::default();
        let mut main = (!self.is_runner(spec))
            .then(|| self.parse(spec, &none, runner))
            .transpose()?;
        let mut other = match vs {
            Some(v) if !self.is_runner(v) => Some(self.parse(v, &none, runner)?),
            _ => None,
        };
        let told = RunnerOptions {
            input: runner
                .input
                .or_else(|| main.as_ref().and_then(|p| p.input))
                .or_else(|| other.as_ref().and_then(|p| p.input)),
            ..runner.clone()
        };
        if main.is_none() {
            main = Some(self.parse(spec, &none, &told)?);
        }
        if let (Some(v), None) = (vs, &other) {
            other = Some(self.parse(v, &none, &told)?);
        }
        Ok((main.expect("parsed above"), other))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local() -> Factory {
        Factory::new(vec![MODEL, DISPATCH, EXEC, DUMP])
    }

    #[test]
    fn the_usage_lists_every_kind_in_order() {
        assert_eq!(local().usage(), "model:ORDER, dispatch:FILE, exec:CMD or dump:DIR");
        assert_eq!(Factory::new(vec![MODEL]).usage(), "model:ORDER");
    }

    #[test]
    fn specs_are_parsed_by_kind_with_one_line_errors() {
        let f = local();
        assert_eq!(f.subject("model:fma", &Knobs::default()).unwrap().name(), "model:fma");
        let e = f.subject("gpu0", &Knobs::default()).err().unwrap();
        assert_eq!(
            e,
            "subject 'gpu0': expected KIND:ARG (model:ORDER, dispatch:FILE, exec:CMD or dump:DIR)"
        );
        let e = f.subject("foo:bar", &Knobs::default()).err().unwrap();
        assert!(
            e.starts_with("subject 'foo:bar': unknown kind 'foo' (model:ORDER"),
            "{e}"
        );
        let e = f.subject("model:nope", &Knobs::default()).err().unwrap();
        assert!(e.starts_with("subject 'model:nope': "), "{e}");
        assert!(!e.contains('\n'));
        let ws4 = Knobs {
            world_size: Some(4),
            ..Knobs::default()
        };
        let e = f.subject("model:fma", &ws4).err().unwrap();
        assert!(e.contains("takes no knobs (ws=4)"), "{e}");
        assert!(f.is_runner("exec:./r") && !f.is_runner("model:fma") && !f.is_runner("dump:x"));
    }

    #[test]
    fn a_dispatch_table_is_bounded_before_it_is_read() {
        let dir = std::env::temp_dir().join(format!("mxbi-spec-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let big = dir.join("big.json");
        std::fs::write(&big, vec![b' '; MAX_TABLE_BYTES as usize + 1]).unwrap();
        let e = dispatch_table(&big).err().unwrap();
        assert!(
            e.ends_with(&format!("{} bytes (at most {MAX_TABLE_BYTES})", MAX_TABLE_BYTES + 1)),
            "{e}"
        );
        let e = dispatch_table(&dir.join("missing.json")).err().unwrap();
        assert!(e.starts_with("dispatch table "), "{e}");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn timeouts_are_bounded() {
        assert_eq!(timeout_secs(2.5, "--timeout"), Ok(Duration::from_millis(2500)));
        assert!(timeout_secs(86_400.0, "t").is_ok());
        for bad in [0.0, -1.0, 86_400.5, f64::NAN, f64::INFINITY] {
            let e = timeout_secs(bad, "--timeout").err().unwrap();
            assert!(
                e.starts_with("--timeout ") && e.ends_with("expected seconds in (0, 86400]"),
                "{e}"
            );
        }
    }
}
