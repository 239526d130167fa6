//! The text report's critical path: its length and where it went, the
//! locks whose waits are off it, the lines whose waits cost it most, and
//! each finding's predicted gain.

use super::layout::wrap;
use crate::base::words::duration;
use crate::model::*;

/// "44.7 ms (46.4%)", or "0 ns to 30.0 ms (0.0–31.0%)" when the trace
/// cannot tell.
pub fn gain(g: &PredictedGain) -> String {
    if g.low_ns == g.high_ns {
        format!("{} ({:.1}%)", duration(g.low_ns), g.low_pct)
    } else {
        format!(
            "{} to {} ({:.1}–{:.1}%)",
            duration(g.low_ns),
            duration(g.high_ns),
            g.low_pct,
            g.high_pct
        )
    }
}

/// The line under a finding: what its locks' waits cost the run.
pub fn finding_line(f: &Finding) -> Option<String> {
    let g = f.predicted_gain.as_ref()?;
    Some(format!(
        "predicted gain: the run ends {} sooner without these waits, {} sooner with them halved; waits {}",
        gain(&g.if_removed),
        gain(&g.if_halved),
        duration(f.wait_ns)
    ))
}

pub fn section(out: &mut String, p: &Process, width: usize) {
    let Some(c) = &p.critical_path else {
        return;
    };
    if c.run_ns == 0 {
        return;
    }
    let mut parts = vec![format!("running {}", duration(c.running_ns))];
    for l in c.locks.iter().filter(|l| l.wait_ns + l.hold_ns > 0) {
        parts.push(format!(
            "{} {} ({} in critical sections, {} waking from its waits)",
            l.lock,
            duration(l.wait_ns + l.hold_ns),
            duration(l.hold_ns),
            duration(l.wait_ns)
        ));
    }
    if c.join_ns > 0 {
        parts.push(format!("joins {}", duration(c.join_ns)));
    }
    if c.cond_ns > 0 {
        parts.push(format!("condition waits {}", duration(c.cond_ns)));
    }
    let mut text = format!(
        "Critical path: {} of the {} run, through {}.",
        duration(c.length_ns),
        duration(c.run_ns),
        parts.join(", ")
    );
    if !c.classes.is_empty() {
        let classes: Vec<String> = c
            .classes
            .iter()
            .map(|k| format!("{} {}", k.class, duration(k.ns)))
            .collect();
        text.push_str(&format!(" Blocked on it in: {}.", classes.join(", ")));
    }
    out.push_str(&wrap(&text, width, "", ""));
    for l in c
        .locks
        .iter()
        .filter(|l| c.off_path.contains(&l.lock))
        .take(5)
    {
        let mut line = format!(
            "off the path: {} ({} of waits, none on the path",
            l.lock,
            duration(l.total_wait_ns),
        );
        match &l.gain {
            Some(g) => line.push_str(&format!(
                "; predicted gain without them {})",
                gain(&g.if_removed)
            )),
            None => line.push(')'),
        }
        out.push_str(&wrap(&line, width, "  ", "    "));
    }
    // The lines whose waits cost the run most (a lock waited for at
    // several lines: which of them to fix first).
    let mut lines: Vec<(&Site, &Gains)> = p
        .sites
        .iter()
        .filter_map(|s| Some((s, s.predicted_gain.as_ref()?)))
        .filter(|(_, g)| g.if_removed.high_ns > 0)
        .collect();
    lines.sort_by_key(|(s, g)| (std::cmp::Reverse(g.rank()), s.id));
    for (site, g) in lines.into_iter().take(5) {
        let line = format!(
            "by line: {}: the run ends {} sooner without its waits ({} of waits)",
            site.name,
            gain(&g.if_removed),
            duration(site.wait_ns)
        );
        out.push_str(&wrap(&line, width, "  ", "    "));
    }
    for limit in &c.limits {
        out.push_str(&wrap(&format!("note: {limit}"), width, "  ", "    "));
    }
    out.push('\n');
}
