//! `exec:CMD`: an external runner as a co-process, protocol "mxbi-exec/1"
//! (docs/BI.md, "Exec protocol").
//!
//! # Contract
//! - The runner is started once, `sh -c CMD`, in its own process group
//!   (in [`ExecOptions::dir`] when set, e.g. a case file's folder), stdin
//!   and stdout piped. Its first line is the greeting `{"protocol":
//!   "mxbi-exec/1", "name": "..."}`; the subject is named `exec:<name>`.
//! - Its stderr is copied to `WORK/runner-stderr.log` and, once it has
//!   greeted, to mxbi's stderr as it comes (lines printed before the
//!   greeting are shown then). A runner that ends before greeting shows
//!   nothing of its own: mxbi's one line quotes its last stderr line (e.g.
//!   the shell's `not found`).
//! - Per job, mxbi writes `WORK/job-NNNNNN/a.npy` (`<f4 [M, K]`) and `b.npy`
//!   (`<f4 [K, N]`), sends one line `{"job", "a", "b", "m", "k", "n",
//!   "input", "out"}` and waits at most `timeout` for one answer line:
//!   `{"job", "out", "dtype"}` (the whole `[M, N]` output written) or
//!   `{"job", "error"}` (that job failed: [`SubjectError::Failed`], the
//!   runner stays). mxbi selects rows itself.
//! - Anything else makes the subject [`SubjectError::Broken`] for good and
//!   kills the runner's process group: the runner exited, a job took longer
//!   than the timeout, a line is not a JSON answer (or longer than 1 MiB),
//!   the answer names another job, the output file's dtype or shape
//!   disagrees with the job, the output holds NaN or Inf where no
//!   summation of the job's finite inputs can overflow
//!   (`check_overflow_free` in `job.rs`).
//! - `WORK` is a fresh folder under the system temp dir; each job's folder
//!   is removed once read, and `WORK` when the subject is dropped, unless
//!   `keep`. Dropping the subject closes the runner's stdin (EOF: exit),
//!   waits up to 2 s, then kills its process group.

use super::job::{check_overflow_free, read_output, select_rows, JobInputs};
pub use super::job::{read_output_bytes, OutType};
use super::{Subject, SubjectError};
use crate::gemm::Problem;
use crate::order::InType;
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The protocol's name, in the greeting.
pub const EXEC_PROTOCOL: &str = "mxbi-exec/1";
/// Longest line a runner may print.
const MAX_LINE: u64 = 1 << 20;
/// The runner's stderr, in the work folder.
const STDERR_LOG: &str = "runner-stderr.log";
/// Most stderr lines held back until the greeting.
const MAX_HELD_LINES: usize = 1000;
/// How long a runner may take to exit after EOF before it is killed.
const EXIT_GRACE: Duration = Duration::from_secs(2);

/// How to run the runner.
#[derive(Clone, Debug)]
pub struct ExecOptions {
    /// Longest wait for the greeting and for each answer.
    pub timeout: Duration,
    /// Keep the work folder (job inputs and outputs).
    pub keep: bool,
    /// The input type jobs announce (`"input"`); values must be exact in it.
    pub input: InType,
    /// The folder the runner starts in (None: mxbi's own).
    pub dir: Option<PathBuf>,
}

impl Default for ExecOptions {
    fn default() -> Self {
        ExecOptions {
            timeout: Duration::from_secs(120),
            keep: false,
            input: InType::F32,
            dir: None,
        }
    }
}

/// A line from the runner's stdout, or why reading stopped.
type Line = Result<String, String>;

struct Runner {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Line>,
    next_job: u64,
    /// Set once the subject broke: every later job fails the same way.
    broken: Option<String>,
}

/// An external runner (see the module doc).
pub struct Exec {
    name: String,
    opts: ExecOptions,
    work: PathBuf,
    runner: Mutex<Runner>,
}

impl Exec {
    /// Starts `sh -c cmd` and reads its greeting. Err: one line saying why
    /// the runner cannot be used.
    pub fn start(cmd: &str, opts: ExecOptions) -> Result<Exec, String> {
        let work = fresh_work_dir()?;
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg(cmd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(d) = &opts.dir {
            c.current_dir(d);
        }
        #[cfg(unix)]
        std::os::unix::process::CommandExt::process_group(&mut c, 0);
        let mut child = c.spawn().map_err(|e| {
            let _ = std::fs::remove_dir_all(&work);
            format!("exec '{cmd}': cannot start sh: {e}")
        })?;
        let tap = Tap::start(child.stderr.take().expect("stderr is piped"), &work.join(STDERR_LOG));
        let stdout = child.stdout.take().expect("stdout is piped");
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            loop {
                let mut buf = Vec::new();
                match (&mut r).take(MAX_LINE + 1).read_until(b'\n', &mut buf) {
                    Ok(0) => return, // EOF: the sender drops, the receiver sees Disconnected
                    Ok(_) if buf.last() != Some(&b'\n') && buf.len() as u64 > MAX_LINE => {
                        let _ = tx.send(Err(format!("printed a line longer than {MAX_LINE} bytes")));
                        return;
                    }
                    Ok(_) => {
                        let line = String::from_utf8(buf).map_err(|_| "printed a line that is not UTF-8".to_string());
                        if tx.send(line).is_err() {
                            return;
                        }
                    }
                    Err(e) => {
                        let _ = tx.send(Err(format!("stdout could not be read: {e}")));
                        return;
                    }
                }
            }
        });
        let mut runner = Runner {
            stdin: child.stdin.take(),
            child,
            lines: rx,
            next_job: 1,
            broken: None,
        };
        let fail = |runner: &mut Runner, why: String| {
            runner.kill();
            let last = tap.last_line();
            let _ = std::fs::remove_dir_all(&work);
            match last {
                Some(l) => format!("exec '{cmd}': {why}; its last stderr line: {}", clip(&l)),
                None => format!("exec '{cmd}': {why}"),
            }
        };
        let greeting = match runner.next_line(opts.timeout, "the greeting") {
            Ok(l) => l,
            Err(why) => return Err(fail(&mut runner, why)),
        };
        let name = match parse_greeting(&greeting) {
            Ok(n) => n,
            Err(why) => return Err(fail(&mut runner, why)),
        };
        tap.release();
        Ok(Exec {
            name,
            opts,
            work,
            runner: Mutex::new(runner),
        })
    }

    /// The folder job files are written to.
    pub fn work_dir(&self) -> &Path {
        &self.work
    }

    fn broken(&self, why: String) -> SubjectError {
        SubjectError::Broken {
            subject: self.name(),
            why,
        }
    }

    /// One job on the runner: Ok(Ok(output)) or Ok(Err(the runner's error
    /// answer)); Err: the subject broke.
    fn job(&self, r: &mut Runner, inputs: &JobInputs) -> Result<Result<Vec<f32>, String>, String> {
        let id = r.next_job;
        r.next_job += 1;
        let dir = self.work.join(format!("job-{id:06}"));
        let (a, b, out) = (dir.join("a.npy"), dir.join("b.npy"), dir.join("out.npy"));
        let io = |e: std::io::Error| format!("cannot write the inputs of job {id} under {}: {e}", dir.display());
        std::fs::create_dir_all(&dir).map_err(io)?;
        std::fs::write(&a, inputs.a_npy()).map_err(io)?;
        std::fs::write(&b, inputs.b_npy()).map_err(io)?;
        let line = serde_json::json!({
            "job": id, "a": a, "b": b, "m": inputs.m, "k": inputs.k, "n": inputs.n,
            "input": self.opts.input.name(), "out": out,
        });
        r.send(&format!("{line}\n"), id)?;
        let answer = r.next_line(self.opts.timeout, &format!("job {id}"))?;
        let (path, dtype) = match parse_reply(&answer, id)? {
            Reply::Error(why) => {
                self.done(&dir);
                return Ok(Err(why));
            }
            Reply::Output { out, dtype } => (out, dtype),
        };
        let keep = if self.opts.keep {
            ""
        } else {
            " (--keep keeps the job files)"
        };
        let c = read_output(Path::new(&path), Some(dtype), inputs.m, inputs.n)
            .and_then(|c| check_overflow_free(inputs, &c, dtype).map(|()| c))
            .map_err(|e| format!("job {id}: {e}{keep}"))?;
        self.done(&dir);
        Ok(Ok(c))
    }

    fn done(&self, dir: &Path) {
        if !self.opts.keep {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

impl Runner {
    /// The next line within `timeout`; Err says why none came.
    fn next_line(&mut self, timeout: Duration, waiting_for: &str) -> Result<String, String> {
        match self.lines.recv_timeout(timeout) {
            Ok(Ok(line)) => Ok(line),
            Ok(Err(why)) => Err(why),
            Err(RecvTimeoutError::Timeout) => {
                self.kill();
                Err(format!(
                    "no answer for {waiting_for} within {} s (killed)",
                    timeout.as_secs_f64()
                ))
            }
            Err(RecvTimeoutError::Disconnected) => match self.status() {
                Some(s) => Err(format!("exited ({s}) before {waiting_for}")),
                None => Err(format!("closed its stdout before {waiting_for}")),
            },
        }
    }

    /// Sends one job line.
    fn send(&mut self, line: &str, id: u64) -> Result<(), String> {
        let Some(stdin) = self.stdin.as_mut() else {
            return Err("its input is closed".into());
        };
        match write_quietly(stdin, line.as_bytes()) {
            Ok(()) => Ok(()),
            Err(e) => Err(format!(
                "stopped reading its input at job {id} ({e}; {})",
                self.status().unwrap_or_else(|| "still running".into())
            )),
        }
    }

    /// How the runner ended, waiting a moment for it (None: still running).
    fn status(&mut self) -> Option<String> {
        let until = Instant::now() + Duration::from_millis(500);
        loop {
            match self.child.try_wait() {
                Ok(Some(s)) => return Some(s.to_string()),
                Ok(None) if Instant::now() < until => std::thread::sleep(Duration::from_millis(10)),
                Ok(None) => return None,
                Err(e) => return Some(format!("status unknown: {e}")),
            }
        }
    }

    /// Kills the runner's process group and reaps it.
    fn kill(&mut self) {
        self.stdin = None;
        if let Ok(None) = self.child.try_wait() {
            #[cfg(unix)]
            if let Ok(pid) = i32::try_from(self.child.id()) {
                // SAFETY: kill(2) on the process group we created; the child
                // is not reaped yet, so its id still names that group.
                unsafe {
                    libc::kill(-pid, libc::SIGKILL);
                }
            }
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

impl Drop for Exec {
    fn drop(&mut self) {
        let r = self.runner.get_mut().unwrap_or_else(|e| e.into_inner());
        r.stdin = None; // EOF: the runner's cue to exit
        let until = Instant::now() + EXIT_GRACE;
        while Instant::now() < until {
            match r.child.try_wait() {
                Ok(None) => std::thread::sleep(Duration::from_millis(10)),
                _ => break,
            }
        }
        r.kill();
        if !self.opts.keep {
            let _ = std::fs::remove_dir_all(&self.work);
        }
    }
}

impl Subject for Exec {
    fn name(&self) -> String {
        format!("exec:{}", self.name)
    }

    fn input(&self) -> Option<InType> {
        Some(self.opts.input)
    }

    fn run(&self, p: &Problem, rows: Option<&[usize]>) -> Result<Vec<f32>, SubjectError> {
        let unsupported = |why: String| SubjectError::Unsupported {
            subject: self.name(),
            why,
        };
        let inputs = JobInputs::of(p, self.opts.input).map_err(unsupported)?;
        if let Some(&r) = rows.and_then(|rs| rs.iter().find(|&&r| r >= p.m)) {
            return Err(unsupported(format!("row {r} asked of a batch of {} rows", p.m)));
        }
        let mut r = self.runner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(why) = &r.broken {
            return Err(self.broken(why.clone()));
        }
        match self.job(&mut r, &inputs) {
            Ok(Ok(c)) => select_rows(c, p.m, p.n, rows).map_err(unsupported),
            Ok(Err(why)) => Err(SubjectError::Failed {
                subject: self.name(),
                why: format!("the runner answered: {why}"),
            }),
            Err(why) => {
                r.kill();
                r.broken = Some(why.clone());
                Err(self.broken(why))
            }
        }
    }
}

/// A runner's answer to one job (protocol "mxbi-exec/1").
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// The whole `[M, N]` output was written to `out`, as `dtype`.
    Output { out: String, dtype: OutType },
    /// The runner could not do this job (the subject stays usable).
    Error(String),
}

/// Parses one answer line to job `id` (the module doc's contract): a JSON
/// object whose `"job"` is `id`, with `"error"` (a string, or any JSON
/// value, kept as its text) or with string `"out"` and `"dtype"` (`f32`,
/// `f16`, `bf16`). Err: one line saying why the line is not an answer to
/// this job (the runner is then broken). The output file is not read here.
pub fn parse_reply(line: &str, id: u64) -> Result<Reply, String> {
    let v: Value = serde_json::from_str(line.trim_end())
        .ok()
        .filter(Value::is_object)
        .ok_or_else(|| format!("answered job {id} with a line that is not JSON: {}", clip(line)))?;
    match v.get("job").and_then(Value::as_u64) {
        Some(j) if j == id => {}
        Some(j) => return Err(format!("answered job {j} while job {id} was asked")),
        None => return Err(format!("answered job {id} without a \"job\" number: {}", clip(line))),
    }
    if let Some(e) = v.get("error") {
        return Ok(Reply::Error(e.as_str().map_or_else(|| e.to_string(), str::to_string)));
    }
    let (Some(out), Some(dtype)) = (
        v.get("out").and_then(Value::as_str),
        v.get("dtype").and_then(Value::as_str),
    ) else {
        return Err(format!(
            "answered job {id} without \"out\" and \"dtype\" (or \"error\"): {}",
            clip(line)
        ));
    };
    let dtype =
        OutType::from_name(dtype).ok_or_else(|| format!("job {id}: unknown dtype '{dtype}' (f32, f16 or bf16)"))?;
    Ok(Reply::Output {
        out: out.to_string(),
        dtype,
    })
}

/// The runner's name from its greeting line: a JSON object with
/// `"protocol": "mxbi-exec/1"` and a `"name"` of 1 to 200 printable
/// characters. Err: one line saying what is wrong.
pub fn parse_greeting(line: &str) -> Result<String, String> {
    let bad = || {
        format!(
            "its first line is not the greeting {{\"protocol\": \"{EXEC_PROTOCOL}\", \"name\": ...}}: {}",
            clip(line)
        )
    };
    let v: Value = serde_json::from_str(line.trim_end()).map_err(|_| bad())?;
    match v.get("protocol").and_then(Value::as_str) {
        Some(EXEC_PROTOCOL) => {}
        Some(other) => return Err(format!("speaks protocol '{other}', not '{EXEC_PROTOCOL}'")),
        None => return Err(bad()),
    }
    match v.get("name").and_then(Value::as_str) {
        Some(n) if !n.trim().is_empty() && n.len() <= 200 && !n.chars().any(char::is_control) => Ok(n.to_string()),
        _ => Err(format!(
            "its greeting has no usable \"name\" (1 to 200 printable characters): {}",
            clip(line)
        )),
    }
}

/// A line for an error message: trimmed, at most 120 characters.
fn clip(line: &str) -> String {
    let t = line.trim_end();
    let mut s: String = t.chars().take(120).collect();
    if s.len() < t.len() {
        s.push_str("...");
    }
    format!("{s:?}")
}

/// The runner's stderr: copied to a log file, held back until the runner
/// has greeted, then passed on to mxbi's stderr line by line.
struct Tap {
    state: Mutex<TapState>,
    /// Set (and notified) when the runner's stderr reached EOF.
    done: (Mutex<bool>, std::sync::Condvar),
}

#[derive(Default)]
struct TapState {
    forward: bool,
    held: Vec<Vec<u8>>,
    last: Option<String>,
}

impl Tap {
    fn start(from: impl Read + Send + 'static, log: &Path) -> std::sync::Arc<Tap> {
        let tap = std::sync::Arc::new(Tap {
            state: Mutex::new(TapState::default()),
            done: (Mutex::new(false), std::sync::Condvar::new()),
        });
        let mut file = std::fs::File::create(log).ok();
        let t = tap.clone();
        std::thread::spawn(move || {
            let mut r = BufReader::new(from);
            loop {
                let mut buf = Vec::new();
                match (&mut r).take(MAX_LINE).read_until(b'\n', &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                if let Some(f) = file.as_mut() {
                    let _ = f.write_all(&buf);
                }
                let text = String::from_utf8_lossy(&buf).trim().to_string();
                let mut st = t.state.lock().unwrap_or_else(|e| e.into_inner());
                if !text.is_empty() {
                    st.last = Some(text);
                }
                if st.forward {
                    let _ = std::io::stderr().write_all(&buf);
                } else if st.held.len() < MAX_HELD_LINES {
                    st.held.push(buf);
                }
            }
            let (lock, cv) = &t.done;
            *lock.lock().unwrap_or_else(|e| e.into_inner()) = true;
            cv.notify_all();
        });
        tap
    }

    /// The runner greeted: show what it printed so far, pass on the rest.
    fn release(&self) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let mut err = std::io::stderr().lock();
        for l in st.held.drain(..) {
            let _ = err.write_all(&l);
        }
        st.forward = true;
    }

    /// The last non-empty stderr line, after waiting up to a second for
    /// the (killed) runner's stderr to end.
    fn last_line(&self) -> Option<String> {
        let (lock, cv) = &self.done;
        let g = lock.lock().unwrap_or_else(|e| e.into_inner());
        let _ = cv.wait_timeout_while(g, Duration::from_secs(1), |done| !*done);
        self.state.lock().unwrap_or_else(|e| e.into_inner()).last.clone()
    }
}

/// A fresh folder under the system temp dir.
fn fresh_work_dir() -> Result<PathBuf, String> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let base = std::env::temp_dir();
    for _ in 0..1000 {
        let d = base.join(format!(
            "mxbi-exec-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        if d.to_str().is_none() {
            return Err(format!("the temp folder {} is not UTF-8 (set TMPDIR)", base.display()));
        }
        match std::fs::create_dir(&d) {
            Ok(()) => return Ok(d),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(format!("cannot create a work folder in {}: {e}", base.display())),
        }
    }
    Err(format!("cannot create a work folder in {}", base.display()))
}

/// Writes all of `bytes` to a pipe whose reader may be gone, without dying
/// of SIGPIPE (the binary restores its default action): the signal is
/// blocked for this thread during the write, and one it raised is consumed.
fn write_quietly(w: &mut impl Write, bytes: &[u8]) -> std::io::Result<()> {
    #[cfg(unix)]
    // SAFETY: sigset operations on local sets; the mask change is for this
    // thread only and restored before returning; sigwait only runs when
    // SIGPIPE is pending, so it returns at once.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGPIPE);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old);
        let r = w.write_all(bytes).and_then(|()| w.flush());
        let mut pending: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut pending);
        if libc::sigismember(&old, libc::SIGPIPE) == 0
            && libc::sigpending(&mut pending) == 0
            && libc::sigismember(&pending, libc::SIGPIPE) == 1
        {
            let mut sig = 0;
            libc::sigwait(&set, &mut sig);
        }
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        r
    }
    #[cfg(not(unix))]
    {
        w.write_all(bytes).and_then(|()| w.flush())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greetings_are_checked() {
        assert_eq!(
            parse_greeting("{\"protocol\": \"mxbi-exec/1\", \"name\": \"np\"}\n"),
            Ok("np".into())
        );
        for bad in [
            "hello",
            "{\"name\": \"x\"}",
            "{\"protocol\": \"mxbi-exec/2\", \"name\": \"x\"}",
            "{\"protocol\": \"mxbi-exec/1\", \"name\": \"\"}",
            "{\"protocol\": \"mxbi-exec/1\"}",
        ] {
            assert!(parse_greeting(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn long_lines_are_clipped() {
        let c = clip(&"x".repeat(500));
        assert!(c.len() < 130 && c.ends_with("...\""), "{c}");
    }
}
