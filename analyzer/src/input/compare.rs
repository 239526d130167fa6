//! A report boiled down to what a regression gate compares
//! ([`Summary`]: per lock and per site, acquisitions, contended, wait and
//! hold; the findings; the threads' lifetimes). Locks, sites and findings
//! are keyed by their stable names, so two runs of the same program line
//! up; the verdicts are `regression.rs`'s.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// The figures of one lock or site.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Figures {
    pub acquisitions: u64,
    pub contended: u64,
    pub wait_ns: u64,
    pub hold_ns: u64,
    /// A lock: the most threads that asked for it in one process (0 where
    /// a saved run predates the field). The run history's evidence that a
    /// lock is shared (see `evidence.rs`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub threads: u64,
    /// A lock: the lines that engaged it (site ids), to say where it is.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lines: Vec<String>,
    /// A lock: its waits and holds on the run's critical path (0 where it
    /// is off the path, or the report has none).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub path_ns: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Figures {
    fn add(&mut self, other: &Figures) {
        self.threads = self.threads.max(other.threads);
        self.acquisitions += other.acquisitions;
        self.contended += other.contended;
        self.wait_ns += other.wait_ns;
        self.hold_ns += other.hold_ns;
        self.path_ns += other.path_ns;
        for l in &other.lines {
            if !self.lines.contains(l) {
                self.lines.push(l.clone());
            }
        }
    }
}

/// One program's run, as a regression gate sees it: every process of that
/// executable summed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// The executable's file name.
    pub exe: String,
    pub processes: u64,
    pub locks: BTreeMap<String, Figures>,
    pub sites: BTreeMap<String, Figures>,
    /// `kind subject` of every finding (its lock, else its first site).
    pub findings: BTreeSet<String>,
    /// Which processes it summed: (pid, start on the wall clock in ns), so
    /// one run saved twice, or reported again, is known as one run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub identities: Vec<(u64, u64)>,
    /// The lifetimes of all its threads, summed (ns): what a wait share is
    /// a share of, stretched by a busy machine as the waits are (0 in runs
    /// saved before it was kept).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub thread_time_ns: u64,
    /// The critical paths' lengths, summed over its processes (0: no
    /// report of it had one).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub path_length_ns: u64,
}

fn u64_at(v: &Value, key: &str) -> u64 {
    v.get(key).and_then(Value::as_u64).unwrap_or(0)
}

fn str_at<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// A process's threads' lifetimes, summed: each thread's running time
/// plus its recorded blocking periods.
fn thread_lifetimes(process: &Value) -> u64 {
    let list = |v: &Value, key: &str| -> Vec<Value> {
        v.get(key)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    list(process, "threads")
        .iter()
        .map(|t| {
            let blocked: u64 = list(t, "blocking_classes")
                .iter()
                .map(|c| u64_at(c, "total_ns"))
                .sum();
            u64_at(t, "running_ns") + blocked
        })
        .sum()
}

/// The summaries of a JSON report (schema `locksuit.report/3`, or 2,
/// whose locks, sites and findings read the same), one per executable, or
/// what is wrong with it.
pub fn summaries(report: &Value) -> Result<Vec<Summary>, String> {
    match str_at(report, "schema") {
        Some(crate::model::SCHEMA | "locksuit.report/2") => {}
        Some(other) => {
            return Err(format!(
                "a report of schema {other}; this locksuit compares {}",
                crate::model::SCHEMA
            ))
        }
        None => return Err("not a locksuit report (no \"schema\" field)".into()),
    }
    let mut by_exe: BTreeMap<String, Summary> = BTreeMap::new();
    for p in report
        .get("processes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let exe = crate::base::words::basename(str_at(p, "exe").unwrap_or("?")).to_string();
        let s = by_exe.entry(exe.clone()).or_insert_with(|| Summary {
            exe,
            ..Summary::default()
        });
        s.processes += 1;
        s.identities
            .push((u64_at(p, "pid"), u64_at(p, "start_unix_ns")));
        s.thread_time_ns += thread_lifetimes(p);
        for lock in p
            .get("locks")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let Some(id) = str_at(lock, "id") else {
                continue;
            };
            let lines = lock
                .get("sites")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect();
            let figures = Figures {
                acquisitions: u64_at(lock, "acquisitions"),
                contended: u64_at(lock, "contended"),
                wait_ns: u64_at(lock, "wait_ns"),
                hold_ns: u64_at(lock, "hold_ns"),
                threads: u64_at(lock, "threads").max(u64_at(lock, "askers")),
                lines,
                path_ns: 0,
            };
            s.locks.entry(id.to_string()).or_default().add(&figures);
        }
        if let Some(path) = p.get("critical_path").filter(|c| !c.is_null()) {
            s.path_length_ns += u64_at(path, "length_ns");
            for l in path
                .get("locks")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let Some(id) = str_at(l, "lock") {
                    s.locks.entry(id.to_string()).or_default().path_ns +=
                        u64_at(l, "wait_ns") + u64_at(l, "hold_ns");
                }
            }
        }
        for site in p
            .get("sites")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let Some(id) = str_at(site, "id") else {
                continue;
            };
            let figures = Figures {
                acquisitions: u64_at(site, "engagements"),
                contended: u64_at(site, "contended"),
                wait_ns: u64_at(site, "wait_ns"),
                hold_ns: u64_at(site, "hold_ns"),
                ..Figures::default()
            };
            s.sites.entry(id.to_string()).or_default().add(&figures);
        }
        for f in p
            .get("findings")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let kind = str_at(f, "kind").unwrap_or("?");
            let subject = str_at(f, "lock")
                .or_else(|| {
                    f.get("sites")
                        .and_then(|s| s.get(0))
                        .and_then(Value::as_str)
                })
                .unwrap_or("");
            s.findings.insert(format!("{kind} {subject}"));
        }
    }
    Ok(by_exe.into_values().collect())
}
