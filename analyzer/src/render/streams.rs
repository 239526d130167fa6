//! Text for `locksuit events`: each object's stream, one line per event, in
//! the order the model holds them (causal, by sequence number). Plain
//! columns rather than a table widget: streams run to millions of lines.

use super::duration;
use crate::model::*;
use std::collections::HashMap;
use std::fmt::Write;

pub fn render(report: &Report) -> String {
    let mut out = String::new();
    for p in &report.processes {
        let _ = writeln!(out, "== {} (pid {}) — {}", p.exe, p.pid, p.trace);
        let _ = writeln!(
            out,
            "   {} events ({}); times are from the process's start",
            p.events,
            if p.events_mode == "all" {
                "every operation"
            } else {
                "contended operations only: record with LOCKSUIT_EVENTS=all for every one"
            }
        );
        for w in &p.warnings {
            let _ = writeln!(out, "   warning: {w}");
        }
        // Where each site is, worked out once: streams run to millions of events.
        let places: HashMap<String, String> = p
            .sites
            .iter()
            .map(|site| {
                let id = site.id.to_string();
                let place = super::text::where_short(&site.function, &site.file, site.line, &id);
                (id, place)
            })
            .collect();
        for s in &p.streams {
            object(&mut out, p, s, &places);
        }
        let _ = writeln!(out);
    }
    out
}

fn object(out: &mut String, p: &Process, s: &ObjectStream, places: &HashMap<String, String>) {
    let lock = s
        .object
        .strip_prefix('L')
        .and_then(|n| n.parse::<usize>().ok())
        .and_then(|n| p.locks.get(n.checked_sub(1)?));
    let what = if let Some(l) = lock {
        format!("{} {} at {:#x}", l.kind, l.id, l.address)
    } else if let Some(c) = p.conds.iter().find(|c| c.id == s.object) {
        format!("condition variable {} at {}", c.id, c.address)
    } else {
        s.object.clone()
    };
    let _ = writeln!(
        out,
        "\n{what}: {} events, ordered by its sequence number",
        s.events.len()
    );
    let _ = writeln!(
        out,
        "{:>8}  {:>12}  {:>8}  {:<10} {:<34} detail",
        "seq", "time", "tid", "event", "where"
    );
    for e in &s.events {
        let place = match e.site.as_deref() {
            Some(id) => places.get(id).map_or(id, String::as_str),
            None => "?",
        };
        let _ = writeln!(
            out,
            "{:>8}  {:>12}  {:>8}  {:<10} {:<34} {}",
            e.seq,
            duration(e.time_ns),
            e.tid,
            e.kind,
            place,
            detail(e)
        );
    }
}

fn detail(e: &StreamEvent) -> String {
    let mut parts = Vec::new();
    if let Some(t) = e.owner_tid {
        parts.push(format!("held by {t}"));
    }
    if let Some(ns) = e.wait_ns {
        parts.push(format!("waited {}", duration(ns)));
    }
    if let Some(ns) = e.hold_ns {
        parts.push(format!("held {}", duration(ns)));
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
        parts.push(format!("deadline {d} ns"));
    }
    parts.join("; ")
}
