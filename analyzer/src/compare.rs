//! Run against run: a report boiled down to what a regression gate
//! compares ([`Summary`]: per lock and per site, acquisitions, contended,
//! wait and hold; the findings), and the comparison itself ([`diff`]).
//! Locks, sites and findings are matched by their stable names, so two runs
//! of the same program line up; runs of other programs are not compared.
//!
//! A change is a regression when it passes the threshold *and* the noise
//! floor, so that 2 ns → 3 ns is not one:
//! - contended share (contended / acquisitions): grew by more than the
//!   threshold (relative), by at least one percentage point, and by at
//!   least [`MIN_MORE_CONTENDED`] more contended acquisitions;
//! - wait per acquisition: grew by more than the threshold, by at least
//!   [`MIN_WAIT_PER_ACQUISITION_NS`], with at least [`MIN_WAIT_NS`] of
//!   waiting in all;
//! - a finding that the base did not have.
//!
//! Acquisitions and hold per acquisition that moved as far are told too,
//! never a regression by themselves (more work is not worse locking).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// Contended share: at least this many more contended acquisitions.
pub const MIN_MORE_CONTENDED: u64 = 5;
/// Wait per acquisition: at least this much more (ns).
pub const MIN_WAIT_PER_ACQUISITION_NS: f64 = 1_000.0;
/// Wait per acquisition: at least this much waiting in the current run (ns).
pub const MIN_WAIT_NS: u64 = 1_000_000;
/// Acquisitions: a change of at least this many is told.
pub const MIN_MORE_ACQUISITIONS: f64 = 100.0;

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
        for l in &other.lines {
            if !self.lines.contains(l) {
                self.lines.push(l.clone());
            }
        }
    }

    fn share(&self) -> f64 {
        if self.acquisitions == 0 {
            0.0
        } else {
            self.contended as f64 / self.acquisitions as f64
        }
    }

    fn wait_per_acquisition(&self) -> f64 {
        if self.acquisitions == 0 {
            0.0
        } else {
            self.wait_ns as f64 / self.acquisitions as f64
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
}

fn u64_at(v: &Value, key: &str) -> u64 {
    v.get(key).and_then(Value::as_u64).unwrap_or(0)
}

fn str_at<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
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
        let exe = crate::symbolize::basename(str_at(p, "exe").unwrap_or("?")).to_string();
        let s = by_exe.entry(exe.clone()).or_insert_with(|| Summary {
            exe,
            ..Summary::default()
        });
        s.processes += 1;
        s.identities
            .push((u64_at(p, "pid"), u64_at(p, "start_unix_ns")));
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
            };
            s.locks.entry(id.to_string()).or_default().add(&figures);
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

/// The median run of several of one program: each figure of each lock and
/// site is the median of the runs that had it (a run without it counts as
/// zero), and a finding is kept if more than half the runs had it.
pub fn median(runs: &[Summary]) -> Summary {
    let n = runs.len();
    let Some(first) = runs.first() else {
        return Summary::default();
    };
    let med = |mut v: Vec<u64>| -> u64 {
        v.sort_unstable();
        match v.len() {
            0 => 0,
            len if len % 2 == 1 => v[len / 2],
            len => (v[len / 2 - 1] + v[len / 2]) / 2,
        }
    };
    let merge = |pick: fn(&Summary) -> &BTreeMap<String, Figures>| -> BTreeMap<String, Figures> {
        let keys: BTreeSet<&String> = runs.iter().flat_map(|r| pick(r).keys()).collect();
        keys.into_iter()
            .map(|k| {
                let all: Vec<Figures> = runs
                    .iter()
                    .map(|r| pick(r).get(k).cloned().unwrap_or_default())
                    .collect();
                let field = |f: fn(&Figures) -> u64| med(all.iter().map(f).collect());
                let lines = all
                    .iter()
                    .flat_map(|f| f.lines.clone())
                    .collect::<BTreeSet<_>>();
                (
                    k.clone(),
                    Figures {
                        acquisitions: field(|f| f.acquisitions),
                        contended: field(|f| f.contended),
                        wait_ns: field(|f| f.wait_ns),
                        hold_ns: field(|f| f.hold_ns),
                        threads: all.iter().map(|f| f.threads).max().unwrap_or(0),
                        lines: lines.into_iter().collect(),
                    },
                )
            })
            .collect()
    };
    let mut counts: BTreeMap<&String, usize> = BTreeMap::new();
    for r in runs {
        for f in &r.findings {
            *counts.entry(f).or_default() += 1;
        }
    }
    Summary {
        exe: first.exe.clone(),
        processes: med(runs.iter().map(|r| r.processes).collect()),
        locks: merge(|s| &s.locks),
        sites: merge(|s| &s.sites),
        findings: counts
            .into_iter()
            .filter(|&(_, c)| c * 2 > n)
            .map(|(f, _)| f.clone())
            .collect(),
        identities: Vec::new(),
    }
}

/// One figure of one lock or site that changed.
#[derive(Clone, Debug, Serialize)]
pub struct Change {
    /// `lock` or `site`.
    pub what: &'static str,
    pub id: String,
    /// A lock's lines (site ids); a site's own id.
    pub lines: Vec<String>,
    /// `contended-share` or `wait-per-acquisition-ns` (which can regress),
    /// `acquisitions` or `hold-per-acquisition-ns` (told only).
    pub figure: &'static str,
    pub base: f64,
    pub current: f64,
    /// It passed the threshold and the noise floor upward.
    pub regressed: bool,
    /// It passed them downward.
    pub improved: bool,
}

/// What changed between two runs of one program.
#[derive(Clone, Debug, Serialize)]
pub struct Diff {
    pub exe: String,
    pub threshold: f64,
    /// Every lock and site whose contended share, wait per acquisition,
    /// acquisitions or hold per acquisition moved past the threshold and
    /// the noise floor, either way.
    pub changes: Vec<Change>,
    /// Findings the current run has and the base had not, and the reverse.
    pub findings_appeared: Vec<String>,
    pub findings_resolved: Vec<String>,
    pub regressed: bool,
}

/// Compares `current` with `base` (the same program).
pub fn diff(base: &Summary, current: &Summary, threshold: f64) -> Diff {
    let mut changes = Vec::new();
    for (what, b, c) in [
        ("lock", &base.locks, &current.locks),
        ("site", &base.sites, &current.sites),
    ] {
        for (id, cur) in c {
            let old = b.get(id).cloned().unwrap_or_default();
            let lines = if what == "lock" {
                cur.lines.clone()
            } else {
                vec![id.clone()]
            };
            for change in figure_changes(&old, cur, threshold) {
                changes.push(Change {
                    what,
                    id: id.clone(),
                    lines: lines.clone(),
                    ..change
                });
            }
        }
    }
    changes.sort_by(|a, b| b.regressed.cmp(&a.regressed).then(a.id.cmp(&b.id)));
    let findings_appeared: Vec<String> = current
        .findings
        .difference(&base.findings)
        .cloned()
        .collect();
    let findings_resolved = base
        .findings
        .difference(&current.findings)
        .cloned()
        .collect();
    let regressed = changes.iter().any(|c| c.regressed) || !findings_appeared.is_empty();
    Diff {
        exe: current.exe.clone(),
        threshold,
        changes,
        findings_appeared,
        findings_resolved,
        regressed,
    }
}

/// The changes of one lock's or site's figures past the threshold and the
/// noise floor (`what`, `id` and `lines` left for the caller).
fn figure_changes(old: &Figures, cur: &Figures, threshold: f64) -> Vec<Change> {
    let change = |figure, base: f64, current: f64, up: bool, down: bool| Change {
        what: "",
        id: String::new(),
        lines: Vec::new(),
        figure,
        base,
        current,
        regressed: up,
        improved: down,
    };
    let mut out = Vec::new();
    let (s0, s1) = (old.share(), cur.share());
    let share_moved = |from: f64, to: f64, more: u64| {
        to - from > threshold * from && to - from >= 0.01 && more >= MIN_MORE_CONTENDED
    };
    let up = share_moved(s0, s1, cur.contended.saturating_sub(old.contended));
    let down = share_moved(s1, s0, old.contended.saturating_sub(cur.contended));
    if up || down {
        out.push(change("contended-share", s0, s1, up, down));
    }
    let (w0, w1) = (old.wait_per_acquisition(), cur.wait_per_acquisition());
    let wait_moved = |from: f64, to: f64, total: u64| {
        to - from > threshold * from
            && to - from >= MIN_WAIT_PER_ACQUISITION_NS
            && total >= MIN_WAIT_NS
    };
    let up = wait_moved(w0, w1, cur.wait_ns);
    let down = wait_moved(w1, w0, old.wait_ns);
    if up || down {
        out.push(change("wait-per-acquisition-ns", w0, w1, up, down));
    }
    // Told, never a regression by themselves: how often the lock is taken,
    // and how long it is held (timed holds only).
    let (a0, a1) = (old.acquisitions as f64, cur.acquisitions as f64);
    if (a1 - a0).abs() > threshold * a0 && (a1 - a0).abs() >= MIN_MORE_ACQUISITIONS {
        out.push(change("acquisitions", a0, a1, false, false));
    }
    let per = |f: &Figures| {
        if f.acquisitions == 0 {
            0.0
        } else {
            f.hold_ns as f64 / f.acquisitions as f64
        }
    };
    let (h0, h1) = (per(old), per(cur));
    if (h1 - h0).abs() > threshold * h0
        && (h1 - h0).abs() >= MIN_WAIT_PER_ACQUISITION_NS
        && old.hold_ns.max(cur.hold_ns) >= MIN_WAIT_NS
    {
        out.push(change("hold-per-acquisition-ns", h0, h1, false, false));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(contended: u64, wait_ms: u64, findings: &[&str]) -> Summary {
        let mut s = Summary {
            exe: "knob".into(),
            processes: 1,
            ..Summary::default()
        };
        s.locks.insert(
            "&knob_lock".into(),
            Figures {
                acquisitions: 100 + contended,
                contended,
                wait_ns: wait_ms * 1_000_000,
                hold_ns: 0,
                threads: 2,
                lines: vec!["contend@knob.c:30".into()],
            },
        );
        s.findings = findings.iter().map(|f| f.to_string()).collect();
        s
    }

    #[test]
    fn regressions_pass_the_threshold_and_the_noise_floor() {
        let base = run(10, 200, &[]);
        assert!(
            !diff(&base, &run(10, 210, &[]), 0.2).regressed,
            "5 % more wait"
        );
        let worse = diff(&base, &run(30, 600, &["high-contention &knob_lock"]), 0.2);
        assert!(worse.regressed);
        assert_eq!(worse.findings_appeared, vec!["high-contention &knob_lock"]);
        assert!(worse
            .changes
            .iter()
            .any(|c| c.figure == "contended-share" && c.regressed));
        // 2 ns → 3 ns per acquisition is past any threshold, and noise.
        let tiny = diff(&run(0, 0, &[]), &run(0, 0, &[]), 0.1);
        assert!(!tiny.regressed);
        let better = diff(&run(30, 600, &[]), &base, 0.2);
        assert!(!better.regressed && better.changes.iter().any(|c| c.improved));
    }

    #[test]
    fn the_median_run_takes_each_figure_and_the_majority_of_findings() {
        let runs = [
            run(10, 100, &["a x"]),
            run(12, 900, &["a x"]),
            run(11, 200, &[]),
        ];
        let m = median(&runs);
        let lock = &m.locks["&knob_lock"];
        assert_eq!((lock.contended, lock.wait_ns), (11, 200_000_000));
        assert_eq!(m.findings.iter().collect::<Vec<_>>(), vec!["a x"]);
    }
}
