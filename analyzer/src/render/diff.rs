//! `locksuit diff` and `locksuit history` in text.

use super::duration;
use crate::compare::{Change, Diff};
use crate::history::Run;

fn figure(c: &Change, v: f64) -> String {
    match c.figure {
        "contended-share" => format!("{:.1}%", v * 100.0),
        "acquisitions" => format!("{v:.0}"),
        _ => duration(v as u64),
    }
}

pub fn text(diffs: &[Diff]) -> String {
    let mut out = String::new();
    for d in diffs {
        out.push_str(&format!(
            "== {}: threshold {:.0}%\n",
            d.exe,
            d.threshold * 100.0
        ));
        for c in &d.changes {
            let verdict = match (c.regressed, c.improved) {
                (true, _) => "REGRESSED",
                (_, true) => "improved",
                _ => "changed",
            };
            let what = match c.figure {
                "contended-share" => "contended share",
                "acquisitions" => "acquisitions",
                "hold-per-acquisition-ns" => "hold per acquisition",
                _ => "wait per acquisition",
            };
            let lines = if c.what == "lock" && !c.lines.is_empty() {
                format!(" (at {})", c.lines.join(", "))
            } else {
                String::new()
            };
            out.push_str(&format!(
                "  {verdict}: {} {}{lines}: {what} {} -> {}\n",
                c.what,
                c.id,
                figure(c, c.base),
                figure(c, c.current)
            ));
        }
        for f in &d.findings_appeared {
            out.push_str(&format!("  REGRESSED: new finding {f}\n"));
        }
        for f in &d.findings_resolved {
            out.push_str(&format!("  resolved: finding {f}\n"));
        }
        out.push_str(if d.regressed {
            "  result: regressed\n"
        } else {
            "  result: no regression past the threshold\n"
        });
    }
    out
}

pub fn runs(runs: &[Run]) -> String {
    let mut out = String::from(
        "   id  saved (UTC)          exe                  label          locks  contended\n",
    );
    for r in runs {
        let contended: u64 = r.summary.locks.values().map(|f| f.contended).sum();
        out.push_str(&format!(
            "{:>5}  {}  {:<20} {:<14} {:>5}  {:>9}\n",
            r.id,
            r.saved_utc,
            r.exe,
            r.label,
            r.summary.locks.len(),
            contended
        ));
    }
    if runs.is_empty() {
        out.push_str("(no saved runs match)\n");
    }
    out
}
