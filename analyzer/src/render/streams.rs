//! Text for `locksuit events`: each object's stream, one line per event, in
//! the order the model holds them (causal, by sequence number). Plain
//! columns rather than a table widget: streams run to millions of lines.
//! A line longer than the width continues under its "where" column.

use super::layout::{glued, unglued, width_of, wrap};
use crate::base::words::duration;
use crate::model::*;
use std::collections::{HashMap, HashSet};
use std::fmt::Write;

/// Deadlines above this many nanoseconds are wall-clock time (ns since
/// 1970, the REALTIME clock of timedlock and friends); below, monotonic
/// time (clocklock with CLOCK_MONOTONIC, ns since boot). 1e17 ns is three
/// years: no machine's monotonic clock gets there, and no wall clock has
/// been below it since 1973.
const WALL_CLOCK_FROM_NS: u64 = 100_000_000_000_000_000;

/// The deadline `deadline_ns` relative to the process's start on its own
/// clock, on the scale of the events' `time_ns` (negative: before the start).
pub fn deadline_since_start(p: &Process, deadline_ns: u64) -> i64 {
    let start = if deadline_ns >= WALL_CLOCK_FROM_NS {
        p.start_unix_ns
    } else {
        p.start_mono_ns
    };
    let since = i128::from(deadline_ns) - i128::from(start);
    since.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}

/// Fills in `deadline_since_start_ns` of every event that has a deadline.
pub fn relate_deadlines(report: &mut Report) {
    for p in &mut report.processes {
        let mut streams = std::mem::take(&mut p.streams);
        for e in streams.iter_mut().flat_map(|s| s.events.iter_mut()) {
            e.deadline_since_start_ns = e.deadline_ns.map(|d| deadline_since_start(p, d));
        }
        p.streams = streams;
    }
}

/// A signed duration: "30.00 ms", "-15.00 µs".
fn signed_duration(ns: i64) -> String {
    if ns < 0 {
        format!("-{}", span(ns.unsigned_abs()))
    } else {
        span(ns as u64)
    }
}

/// A duration that wrapping keeps on one line.
fn span(ns: u64) -> String {
    glued(&duration(ns))
}

pub fn render(report: &Report, width: usize) -> String {
    let mut out = String::new();
    for p in &report.processes {
        // Ids print by the process's own names (see `names.rs`).
        crate::model::names::with(&p.names, || process(&mut out, p, width));
    }
    out
}

fn process(out: &mut String, p: &Process, width: usize) {
    out.push_str(&super::process_heading(p, width));
    let mode = if p.events_mode == "all" {
        "every operation"
    } else {
        "contended operations only: record with LOCKSUIT_EVENTS=all for every one"
    };
    let about = format!(
        "{} events ({mode}); times and deadlines are from the process's start",
        p.events
    );
    out.push_str(&wrap(&about, width, "   ", "   "));
    for w in &p.warnings {
        out.push_str(&wrap(&format!("warning: {w}"), width, "   ", "     "));
    }
    // Where each site is, worked out once: streams run to millions of events.
    let places: HashMap<String, String> = p
        .sites
        .iter()
        .map(|site| {
            let id = site.id.to_string();
            let place = super::tables::where_short(&site.function, &site.file, site.line, &id);
            (id, place)
        })
        .collect();
    // The locks whose streams are shown, by name.
    let shown: HashSet<&str> = p.streams.iter().map(|s| s.object.as_str()).collect();
    let locks: HashMap<String, &Lock> = p
        .locks
        .iter()
        .map(|l| (l.id.to_string(), l))
        .filter(|(name, _)| shown.contains(name.as_str()))
        .collect();
    for s in &p.streams {
        object(out, p, s, &places, &locks, width);
    }
    let _ = writeln!(out);
}

/// Columns before "where": seq, time ("999.99 ms"), tid (up to 4194304),
/// event ("timed-out"): the narrowest width (40) holds them.
const PREFIX: usize = 8 + 2 + 9 + 2 + 7 + 2 + 9 + 1;

fn object(
    out: &mut String,
    p: &Process,
    s: &ObjectStream,
    places: &HashMap<String, String>,
    locks: &HashMap<String, &Lock>,
    width: usize,
) {
    let what = if let Some(l) = locks.get(&s.object) {
        format!("{} {} at {:#x}", l.kind, l.id, l.address)
    } else if let Some(c) = p.conds.iter().find(|c| c.id == s.object) {
        format!("condition variable {} at {}", c.id, c.address)
    } else {
        s.object.clone()
    };
    out.push('\n');
    let title = format!(
        "{what}: {} events, ordered by its sequence number",
        s.events.len()
    );
    out.push_str(&wrap(&title, width, "", ""));
    // "where" takes what the width leaves, at least a site's name. Below
    // that, "where" and the detail go on lines of their own.
    let place_width = width.saturating_sub(PREFIX + 24).clamp(16, 34);
    let narrow = width < PREFIX + place_width + 8;
    let hang = " ".repeat(if narrow { 10 } else { PREFIX });
    let columns = format!("{:>8}  {:>9}  {:>7}  {:<9}", "seq", "time", "tid", "event");
    if narrow {
        let _ = writeln!(out, "{}\n{hang}where; detail", columns.trim_end());
    } else {
        let _ = writeln!(out, "{columns} {:<place_width$} detail", "where");
    }
    for e in &s.events {
        let place = match e.site.as_deref() {
            Some(id) => places.get(id).map_or(id, String::as_str),
            None => "?",
        };
        let head = format!(
            "{:>8}  {:>9}  {:>7}  {:<9} ",
            e.seq,
            duration(e.time_ns),
            e.tid,
            e.kind
        );
        let detail = detail(p, e);
        let tail = format!("{place:<place_width$} {detail}");
        if width_of(&head) + width_of(tail.trim_end()) <= width {
            out.push_str(&head);
            out.push_str(&unglued(tail.trim_end()));
            out.push('\n');
        } else if narrow {
            // Where and what on lines of their own.
            out.push_str(head.trim_end());
            out.push('\n');
            let rest = if detail.is_empty() {
                place.to_string()
            } else {
                format!("{place}; {detail}")
            };
            out.push_str(&wrap(&rest, width, &hang, &hang));
        } else {
            // Too long: the detail goes on lines of its own, under "where".
            out.push_str(&wrap(place, width, &head, &hang));
            if !detail.is_empty() {
                out.push_str(&wrap(&detail, width, &hang, &hang));
            }
        }
    }
}

fn detail(p: &Process, e: &StreamEvent) -> String {
    let mut parts = Vec::new();
    if let Some(t) = e.owner_tid {
        parts.push(format!("held by {t}"));
    }
    if let Some(ns) = e.wait_ns {
        parts.push(format!("waited {}", span(ns)));
    }
    if let Some(ns) = e.hold_ns {
        parts.push(format!("held {}", span(ns)));
    }
    if let Some(n) = e.waiters {
        parts.push(format!("{n} waiting"));
    }
    match (e.kind, e.handed_to_tid) {
        ("exit", Some(t)) => parts.push(format!("handed to {t}")),
        ("exit", None) => parts.push("next holder not recorded".into()),
        _ => {}
    }
    if let Some(o) = e.outcome {
        parts.push(o.to_string());
    }
    if let Some(d) = e.deadline_ns {
        let since = e
            .deadline_since_start_ns
            .unwrap_or_else(|| deadline_since_start(p, d));
        let from_event = since.saturating_sub(i64::try_from(e.time_ns).unwrap_or(i64::MAX));
        let when = if from_event >= 0 {
            format!("{} after this", span(from_event as u64))
        } else {
            format!("{} before this", span(from_event.unsigned_abs()))
        };
        parts.push(format!("deadline at {} ({when})", signed_duration(since)));
    }
    parts.join("; ")
}
