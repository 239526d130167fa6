//! `locksuit diff` and `locksuit history` in text: the gate's comparison of
//! runs, not the report model, so it lives with the gate, not in render/.

use crate::analysis::regression::{Diff, FindingChange, Measure};
use crate::base::words::duration;
use crate::input::history::Run;

fn value(figure: &str, v: f64) -> String {
    match figure {
        "contended-share" | "wait-share" => format!("{:.1}%", v * 100.0),
        "acquisitions" => format!("{v:.0}"),
        _ => duration(v.max(0.0) as u64),
    }
}

/// The spread in the measure's own unit: points for a share.
fn spread(figure: &str, v: f64) -> String {
    match figure {
        "contended-share" | "wait-share" => format!("{:.1} points", v * 100.0),
        _ => value(figure, v),
    }
}

fn runs_word(n: usize) -> &'static str {
    if n == 1 {
        "run"
    } else {
        "runs"
    }
}

fn measure_line(m: &Measure) -> String {
    let verdict = match (m.regressed, m.improved, m.changed) {
        (true, _, _) => "REGRESSED",
        (_, true, _) => "improved",
        (_, _, true) => "changed",
        _ => "held",
    };
    let what = match m.figure {
        "contended-share" => "contended share",
        "wait-share" => "wait share of the threads' time",
        "acquisitions" => "acquisitions",
        "hold-per-acquisition-ns" => "hold per acquisition",
        _ => "wait per acquisition",
    };
    let lines = if m.what == "lock" && !m.lines.is_empty() {
        format!(" (at {})", m.lines.join(", "))
    } else {
        String::new()
    };
    let direction = if m.current >= m.median {
        "above"
    } else {
        "below"
    };
    format!(
        "  {verdict}: {} {}{lines}: {what} {} -> {} (median of {} {}, spread {}, limit {}; {direction} {} of them, {} needed)\n",
        m.what,
        m.id,
        value(m.figure, m.median),
        value(m.figure, m.current),
        m.runs,
        runs_word(m.runs),
        spread(m.figure, m.spread),
        value(m.figure, m.limit),
        m.runs_passed,
        m.runs_needed,
    )
}

fn finding_line(f: &FindingChange) -> String {
    let seen = format!("in {} of {} base {}", f.in_runs, f.runs, runs_word(f.runs));
    let why = if !f.timing {
        format!("a structural kind, counted at once; {seen}")
    } else if f.subject_regressed {
        format!("timing-dependent, and its lock or site regressed; {seen}")
    } else if f.regressed {
        format!("timing-dependent, {seen} and this one: most of them")
    } else {
        format!("timing-dependent, {seen} and its lock or site held: not counted")
    };
    let verdict = if f.regressed { "REGRESSED" } else { "noted" };
    format!("  {verdict}: new finding {} ({why})\n", f.finding)
}

pub fn text(diffs: &[Diff]) -> String {
    let mut out = String::new();
    for d in diffs {
        out.push_str(&format!(
            "== {}: against {} base {}; a share regresses past the median by the most of {} spreads, {:.0}% and one point\n",
            d.exe,
            d.runs,
            runs_word(d.runs),
            d.rule.spreads,
            d.rule.threshold * 100.0
        ));
        // What changed, and beside it the other measures of the same lock
        // or site; JSON has every measure.
        let moved = |m: &Measure| {
            d.measures
                .iter()
                .any(|o| o.changed && o.what == m.what && o.id == m.id)
        };
        for m in d.measures.iter().filter(|m| moved(m)) {
            out.push_str(&measure_line(m));
        }
        for f in &d.findings_appeared {
            out.push_str(&finding_line(f));
        }
        for f in &d.findings_resolved {
            out.push_str(&format!(
                "  resolved: finding {} (in {} of {} base {})\n",
                f.finding,
                f.in_runs,
                f.runs,
                runs_word(f.runs)
            ));
        }
        if let Some(c) = &d.critical_path {
            out.push_str(&path_lines(c));
        }
        out.push_str(if d.regressed {
            "  result: regressed\n"
        } else {
            "  result: no regression past the limits\n"
        });
    }
    out
}

pub fn runs(runs: &[Run]) -> String {
    // The contended and wait shares are what the gate judges: steadier
    // under load than the contended count or the waits themselves.
    let mut out = String::from(
        "   id  saved (UTC)          exe                  label          locks  contended  cont.share  wait.share\n",
    );
    for r in runs {
        let locks = r.summary.locks.values();
        let contended: u64 = locks.clone().map(|f| f.contended).sum();
        let acquisitions: u64 = locks.clone().map(|f| f.acquisitions).sum();
        let waited: u64 = locks.map(|f| f.wait_ns).sum();
        let share = |part: u64, whole: u64| {
            if whole == 0 {
                "-".to_string()
            } else {
                format!("{:.1}%", part as f64 * 100.0 / whole as f64)
            }
        };
        out.push_str(&format!(
            "{:>5}  {}  {:<20} {:<14} {:>5}  {:>9}  {:>10}  {:>10}\n",
            r.id,
            r.saved_utc,
            r.exe,
            r.label,
            r.summary.locks.len(),
            contended,
            share(contended, acquisitions),
            share(waited, r.summary.thread_time_ns)
        ));
    }
    if runs.is_empty() {
        out.push_str("(no saved runs match)\n");
    }
    out
}

fn signed(ns: i64) -> String {
    let sign = if ns < 0 { "-" } else { "+" };
    format!("{sign}{}", crate::base::words::duration(ns.unsigned_abs()))
}

/// The critical path's length, and per lock its share of the path beside
/// its waits, most grown share first.
fn path_lines(c: &crate::analysis::path_diff::PathDiff) -> String {
    let mut out = format!(
        "  critical path: {} (base {}, {})\n",
        crate::base::words::duration(c.length_ns),
        crate::base::words::duration(c.base_length_ns),
        signed(c.length_change_ns)
    );
    for l in &c.locks {
        if l.off_path {
            out.push_str(&format!(
                "    {}: waits {}, off the critical path: the run did not get slower for it\n",
                l.lock,
                signed(l.wait_change_ns)
            ));
        } else {
            out.push_str(&format!(
                "    {}: on the critical path {} ({} to {}), waits {}\n",
                l.lock,
                signed(l.path_change_ns),
                crate::base::words::duration(l.base_path_ns),
                crate::base::words::duration(l.path_ns),
                signed(l.wait_change_ns)
            ));
        }
    }
    out
}
