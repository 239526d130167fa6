//! `locksuit run --deadlock-timeout`: while the command runs, its traces
//! are read now and then (read-only, from the mapped files; the shim has no
//! thread of its own and gets none), and a deadlock that persists for the
//! timeout is reported and acted on.

use crate::analysis::findings::Limits;
use crate::analysis::waits::Stuck;
use crate::input::stream::StreamFilter;
use crate::input::symbolize::Symbolizer;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What to do with a deadlocked process (`--on-deadlock`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OnDeadlock {
    /// SIGKILL it.
    Kill,
    /// SIGABRT it: it dies with a core dump, for a debugger.
    Abort,
    /// Leave it hanging (attach a debugger); report when the command ends.
    Keep,
}

/// A deadlock that persisted for the timeout.
pub struct Detected {
    pub trace: PathBuf,
    pub pid: u32,
    /// The deadlock findings, as the text report words them.
    pub explanation: Vec<String>,
    /// The names its threads had (those that were named), read before it
    /// is acted on: a thread named with `prctl` is named in no trace.
    pub thread_names: std::collections::BTreeMap<u32, String>,
}

/// Watches the traces in one directory.
pub struct Watcher {
    dir: PathBuf,
    timeout: Duration,
    /// Per trace: the deadlock seen (its threads and when their waits
    /// began) and since when it has been seen unchanged.
    seen: HashMap<PathBuf, (Vec<(u32, u64)>, Instant)>,
}

/// What identifies one deadlock: its threads and when their waits began
/// (a thread that got out and in again is a new wait).
fn signature(stuck: &[Stuck]) -> Vec<(u32, u64)> {
    let mut sig: Vec<(u32, u64)> = stuck
        .iter()
        .flat_map(|s| match s {
            Stuck::Cycle(waits) | Stuck::NoRunnableThread(waits) => waits.clone(),
            Stuck::SelfDeadlock(w) => vec![w.clone()],
            Stuck::Abandoned { wait, .. } => vec![wait.clone()],
        })
        .map(|w| (w.tid, w.since_ns))
        .collect();
    sig.sort_unstable();
    sig
}

impl Watcher {
    pub fn new(dir: &Path, timeout: Duration) -> Self {
        Watcher {
            dir: dir.to_path_buf(),
            timeout,
            seen: HashMap::new(),
        }
    }

    /// Looks at every unfinished trace once; returns a deadlock that has
    /// persisted for the timeout.
    pub fn poll(&mut self) -> Option<Detected> {
        let traces = crate::input::load::traces_in(&self.dir).ok()?;
        for path in traces {
            let Ok(mapped) = crate::input::load::read(&path) else {
                continue;
            };
            let trace = mapped.trace;
            if trace.header.complete() {
                self.seen.remove(&path);
                continue;
            }
            let stuck = crate::analysis::waits::stuck(&trace);
            if stuck.is_empty() {
                self.seen.remove(&path);
                continue;
            }
            let sig = signature(&stuck);
            let now = Instant::now();
            let since = match self.seen.get(&path) {
                Some((old, since)) if *old == sig => *since,
                _ => {
                    self.seen.insert(path.clone(), (sig, now));
                    now
                }
            };
            if now.duration_since(since) < self.timeout {
                continue;
            }
            let pid = trace.header.pid;
            return Some(Detected {
                thread_names: crate::analysis::process_state::live_thread_names(pid),
                explanation: explain(&path, trace),
                trace: path,
                pid,
            });
        }
        None
    }
}

/// The deadlock findings of a trace, worded as in the report.
fn explain(path: &Path, trace: locksuit_format::Trace) -> Vec<String> {
    let process = crate::analysis::process::analyze(
        &path.display().to_string(),
        trace,
        (&Limits::default(), crate::analysis::process::Depth::Full),
        &StreamFilter::Off,
        &mut Symbolizer::default(),
        &mut || {},
    );
    crate::model::names::with(&process.names, || {
        process
            .findings
            .iter()
            .filter(|f| f.kind == crate::analysis::deadlocks::FINDING_DEADLOCK)
            .map(|f| {
                let mut text = f.message.clone();
                for step in &f.cycle {
                    text.push_str(&format!(
                        "\n    thread {}{}: holds {}, waits for {} at {}",
                        step.tid,
                        step.thread_name
                            .as_deref()
                            .map(|n| format!(" ({n})"))
                            .unwrap_or_default(),
                        step.holds
                            .map_or_else(|| "no lock the shim saw".into(), |l| l.to_string()),
                        step.waits_for.as_deref().unwrap_or("?"),
                        step.waits_site
                            .map_or_else(|| "an unknown line".into(), |s| s.to_string())
                    ));
                }
                text
            })
            .collect()
    })
}
