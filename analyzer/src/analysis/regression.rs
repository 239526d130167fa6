//! The regression gate's verdicts: a run against the runs saved before it
//! (`diff --against-history N`), or against one base, judged on the spread
//! those runs show rather than on one comparison.
//!
//! For each lock and site, each measure's median over the base runs and
//! its spread (1.4826 × the median absolute deviation, which estimates a
//! standard deviation and ignores one odd run). A measure regressed when
//! the current value passes the limit, the median plus the largest of
//! `spreads` × spread, `threshold` × median and a noise floor, *and* is
//! above every base run but one (every one, with fewer than three), so that
//! one odd saved run neither sets the bar nor hides a lasting regression.
//!
//! The measures that can regress do not move with machine load:
//! - contended share: contended / acquisitions (and at least
//!   [`MIN_MORE_CONTENDED`] more contended acquisitions than the median);
//! - wait share: the lock's or site's waits / the threads' lifetimes in all
//!   (with at least [`MIN_WAIT_NS`] of waiting). A busy machine stretches
//!   the waits and the run alike.
//!
//! Both need at least [`MIN_SHARE_POINTS`] of movement. Acquisitions, wait
//! per acquisition and hold per acquisition are told when they pass their
//! limits, never a regression by themselves.
//!
//! A finding the base runs mostly lacked: of a structural kind
//! ([`STRUCTURAL_KINDS`]) it is a regression at once; of any other kind
//! (read from timing or scheduling: long-hold, starvation,
//! high-contention, …) only when it is present in most of the base runs
//! and this one together, or a measure of its lock or site regressed.

use crate::input::compare::{Figures, Summary};
use serde::Serialize;
use std::collections::BTreeMap;

/// Contended share: at least this many more contended acquisitions.
pub const MIN_MORE_CONTENDED: u64 = 5;
/// Contended and wait share: at least this much movement (one point).
pub const MIN_SHARE_POINTS: f64 = 0.01;
/// Wait share and wait per acquisition: at least this much waiting (ns).
pub const MIN_WAIT_NS: u64 = 1_000_000;
/// Wait and hold per acquisition: at least this much movement (ns).
pub const MIN_PER_ACQUISITION_NS: f64 = 1_000.0;
/// Acquisitions: at least this many more or fewer.
pub const MIN_MORE_ACQUISITIONS: f64 = 100.0;
/// 1.4826 × MAD estimates the standard deviation of normally spread data.
const MAD_TO_SD: f64 = 1.4826;

/// Findings read from which locks were taken, in which order, by whom,
/// not from how long anything took: one new such finding is a regression.
pub const STRUCTURAL_KINDS: &[&str] = &[
    "deadlock",
    "potential-deadlock",
    "family-order-inversion",
    "misuse",
];

/// How far a measure must move.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Rule {
    /// Relative to the median (0.2: 20 %).
    pub threshold: f64,
    /// How many spreads above (or below) the median.
    pub spreads: f64,
}

/// One measure of one lock or site, the numbers its verdict used.
#[derive(Clone, Debug, Serialize)]
pub struct Measure {
    /// `lock` or `site`.
    pub what: &'static str,
    pub id: String,
    /// A lock's lines (site ids); a site's own id.
    pub lines: Vec<String>,
    /// `contended-share` or `wait-share` (which can regress),
    /// `acquisitions`, `wait-per-acquisition-ns` or
    /// `hold-per-acquisition-ns` (told only).
    pub figure: &'static str,
    /// How many base runs it was judged against, their median and spread.
    pub runs: usize,
    pub median: f64,
    pub spread: f64,
    pub current: f64,
    /// The limit the current value was held to: above the median when it
    /// grew, below when it fell.
    pub limit: f64,
    /// How many base runs the current value is beyond, in its direction,
    /// and how many it had to be (all but one; all, with fewer than three).
    pub runs_passed: usize,
    pub runs_needed: usize,
    /// It passed the limit and the runs, either way (and what stands
    /// behind the movement, e.g. five more contended acquisitions).
    pub changed: bool,
    /// It passed the limit and the runs upward (a figure that can regress).
    pub regressed: bool,
    /// It passed them downward.
    pub improved: bool,
}

/// A finding that appeared or was resolved.
#[derive(Clone, Debug, Serialize)]
pub struct FindingChange {
    /// `kind subject`.
    pub finding: String,
    /// Read from timing or scheduling (not in [`STRUCTURAL_KINDS`]).
    pub timing: bool,
    /// How many of the base runs had it.
    pub in_runs: usize,
    pub runs: usize,
    /// A measure of its lock or site regressed.
    pub subject_regressed: bool,
    pub regressed: bool,
}

/// What changed between the base runs and the current run of one program.
#[derive(Clone, Debug, Serialize)]
pub struct Diff {
    pub exe: String,
    pub rule: Rule,
    /// How many base runs (1: one base).
    pub runs: usize,
    /// Every measure that can regress of every lock and site, and the
    /// others that passed their limits either way.
    pub measures: Vec<Measure>,
    /// Findings the current run has and most base runs had not (each with
    /// its verdict), and the reverse.
    pub findings_appeared: Vec<FindingChange>,
    pub findings_resolved: Vec<FindingChange>,
    /// The critical path's length and each lock's share of it, against
    /// the base runs' medians (see `path_diff.rs`).
    pub critical_path: Option<crate::analysis::path_diff::PathDiff>,
    pub regressed: bool,
}

use crate::base::stats::median;

/// The median and the spread (1.4826 × MAD) of `values`.
pub fn median_and_spread(values: &[f64]) -> (f64, f64) {
    let m = median(values);
    let deviations: Vec<f64> = values.iter().map(|v| (v - m).abs()).collect();
    (m, MAD_TO_SD * median(&deviations))
}

/// One measure: how to read it off a run, the least movement that counts,
/// and whether it can regress.
struct Kind {
    figure: &'static str,
    value: fn(&Figures, u64) -> Option<f64>,
    floor: f64,
    can_regress: bool,
    /// Enough behind the movement (e.g. more contended acquisitions), given
    /// the figures moved from (median run's) and to.
    enough: fn(&[&Figures], &Figures, bool) -> bool,
}

fn ratio(a: u64, b: u64) -> Option<f64> {
    (b > 0).then(|| a as f64 / b as f64)
}

fn median_u64(runs: &[&Figures], f: fn(&Figures) -> u64) -> f64 {
    median(&runs.iter().map(|r| f(r) as f64).collect::<Vec<_>>())
}

const KINDS: &[Kind] = &[
    Kind {
        figure: "contended-share",
        value: |f, _| Some(ratio(f.contended, f.acquisitions).unwrap_or(0.0)),
        floor: MIN_SHARE_POINTS,
        can_regress: true,
        enough: |base, cur, up| {
            let m = median_u64(base, |f| f.contended);
            let more = if up {
                cur.contended as f64 - m
            } else {
                m - cur.contended as f64
            };
            more >= MIN_MORE_CONTENDED as f64
        },
    },
    Kind {
        figure: "wait-share",
        value: |f, thread_ns| ratio(f.wait_ns, thread_ns),
        floor: MIN_SHARE_POINTS,
        can_regress: true,
        enough: |base, cur, up| {
            let waited = if up {
                cur.wait_ns as f64
            } else {
                median_u64(base, |f| f.wait_ns)
            };
            waited >= MIN_WAIT_NS as f64
        },
    },
    Kind {
        figure: "acquisitions",
        value: |f, _| Some(f.acquisitions as f64),
        floor: MIN_MORE_ACQUISITIONS,
        can_regress: false,
        enough: |_, _, _| true,
    },
    Kind {
        figure: "wait-per-acquisition-ns",
        value: |f, _| Some(ratio(f.wait_ns, f.acquisitions).unwrap_or(0.0)),
        floor: MIN_PER_ACQUISITION_NS,
        can_regress: false,
        enough: |base, cur, _| {
            let most = median_u64(base, |f| f.wait_ns).max(cur.wait_ns as f64);
            most >= MIN_WAIT_NS as f64
        },
    },
    Kind {
        figure: "hold-per-acquisition-ns",
        value: |f, _| Some(ratio(f.hold_ns, f.acquisitions).unwrap_or(0.0)),
        floor: MIN_PER_ACQUISITION_NS,
        can_regress: false,
        enough: |base, cur, _| {
            let most = median_u64(base, |f| f.hold_ns).max(cur.hold_ns as f64);
            most >= MIN_WAIT_NS as f64
        },
    },
];

/// Judges one measure of one lock or site; `None` when no base run
/// could be read for it (a wait share of runs saved before it existed).
fn judge(
    kind: &Kind,
    base: &[(&Figures, u64)],
    current: (&Figures, u64),
    rule: Rule,
) -> Option<Measure> {
    let values: Vec<f64> = base
        .iter()
        .filter_map(|&(f, t)| (kind.value)(f, t))
        .collect();
    let cur = (kind.value)(current.0, current.1)?;
    if values.is_empty() {
        return None;
    }
    let (median, spread) = median_and_spread(&values);
    let margin = (rule.spreads * spread)
        .max(rule.threshold * median.abs())
        .max(kind.floor);
    let up = cur >= median;
    let limit = if up { median + margin } else { median - margin };
    let runs_passed = values
        .iter()
        .filter(|&&v| if up { cur > v } else { cur < v })
        .count();
    // Beyond all base runs but one (all of them, with fewer than three).
    let runs_needed = if values.len() >= 3 {
        values.len() - 1
    } else {
        values.len()
    };
    let figures: Vec<&Figures> = base.iter().map(|&(f, _)| f).collect();
    let passed = (if up { cur > limit } else { cur < limit })
        && runs_passed >= runs_needed
        && (kind.enough)(&figures, current.0, up);
    Some(Measure {
        what: "",
        id: String::new(),
        lines: Vec::new(),
        figure: kind.figure,
        runs: values.len(),
        median,
        spread,
        current: cur,
        limit,
        runs_passed,
        runs_needed,
        changed: passed,
        regressed: passed && up && kind.can_regress,
        improved: passed && !up && kind.can_regress,
    })
}

/// Compares `current` with the `base` runs of the same program (one or
/// more).
pub fn diff(base: &[Summary], current: &Summary, rule: Rule) -> Diff {
    let mut measures = Vec::new();
    for what in ["lock", "site"] {
        let pick: fn(&Summary) -> &BTreeMap<String, Figures> = if what == "lock" {
            |s| &s.locks
        } else {
            |s| &s.sites
        };
        for (id, cur) in pick(current) {
            let lines = if what == "lock" {
                cur.lines.clone()
            } else {
                vec![id.clone()]
            };
            let absent = Figures::default();
            let runs: Vec<(&Figures, u64)> = base
                .iter()
                .map(|s| (pick(s).get(id).unwrap_or(&absent), s.thread_time_ns))
                .collect();
            let judged: Vec<(bool, Measure)> = KINDS
                .iter()
                .filter_map(|k| {
                    judge(k, &runs, (cur, current.thread_time_ns), rule).map(|m| (k.can_regress, m))
                })
                .collect();
            // Every measure that can regress, with the numbers its verdict
            // used; the others only when they changed.
            for (can_regress, m) in judged {
                if m.changed || can_regress {
                    measures.push(Measure {
                        what,
                        id: id.clone(),
                        lines: lines.clone(),
                        ..m
                    });
                }
            }
        }
    }
    measures.sort_by(|a, b| b.regressed.cmp(&a.regressed).then(a.id.cmp(&b.id)));
    let (findings_appeared, findings_resolved) = findings(base, current, &measures);
    let regressed =
        measures.iter().any(|m| m.regressed) || findings_appeared.iter().any(|f| f.regressed);
    Diff {
        exe: current.exe.clone(),
        rule,
        runs: base.len(),
        measures,
        findings_appeared,
        findings_resolved,
        critical_path: crate::analysis::path_diff::diff(base, current),
        regressed,
    }
}

/// The findings that appeared (most base runs lacked them), each with its
/// verdict, and those resolved (most base runs had them).
fn findings(
    base: &[Summary],
    current: &Summary,
    measures: &[Measure],
) -> (Vec<FindingChange>, Vec<FindingChange>) {
    let n = base.len();
    let mut counts: BTreeMap<&String, usize> = BTreeMap::new();
    for f in base.iter().flat_map(|s| &s.findings) {
        *counts.entry(f).or_default() += 1;
    }
    let in_runs = |f: &String| counts.get(f).copied().unwrap_or(0);
    let change = |f: &String| {
        let (kind, subject) = f.split_once(' ').unwrap_or((f, ""));
        let timing = !STRUCTURAL_KINDS.contains(&kind);
        let subject_regressed = measures.iter().any(|m| m.regressed && m.id == subject);
        let in_runs = in_runs(f);
        // Most of the base runs and this one had it.
        let lasting = (in_runs + 1) * 2 > n + 1;
        FindingChange {
            finding: f.clone(),
            timing,
            in_runs,
            runs: n,
            subject_regressed,
            regressed: !timing || lasting || subject_regressed,
        }
    };
    let appeared = current
        .findings
        .iter()
        .filter(|f| in_runs(f) * 2 <= n)
        .map(change)
        .collect();
    let resolved = counts
        .iter()
        .filter(|&(f, &c)| c * 2 > n && !current.findings.contains(*f))
        .map(|(f, _)| FindingChange {
            regressed: false,
            ..change(f)
        })
        .collect();
    (appeared, resolved)
}

#[cfg(test)]
#[path = "regression_tests.rs"]
mod tests;
