//! Text: for each process with lock activity, what it was, its findings
//! (each wrapped, with where it happened), then one table per section,
//! ranked by cost; processes that recorded nothing share one line at the
//! end. Every line fits the width given (see `layout.rs`).

use super::layout::{glued, wrap, wrap_phrases};
use super::no_activity;
use super::tables;
use super::text_options::TextOptions;
use crate::base::words::{count, duration};
use crate::model::*;

/// Frames of a finding's call chain shown under it.
const FRAMES_SHOWN: usize = 6;

fn frame_line(f: &Frame) -> String {
    let module = f
        .module
        .as_deref()
        .map(crate::base::words::basename)
        .unwrap_or("?");
    match (&f.function, &f.file, f.line) {
        (Some(func), Some(file), Some(line)) => format!("{func} ({file}:{line})"),
        (Some(func), _, _) => format!("{func} [{module}]"),
        _ => f
            .offset
            .clone()
            .unwrap_or_else(|| format!("{} [{module}]", f.address)),
    }
}

pub fn render(report: &Report, o: &TextOptions) -> String {
    let mut out = String::new();
    let (active, idle) = no_activity::partition(&report.processes);
    for p in &active {
        // Ids print by the process's own names (see `names.rs`).
        crate::model::names::with(&p.names, || process(&mut out, p, report.threshold, o));
    }
    if !idle.is_empty() {
        out.push_str(&idle_line(&idle, !active.is_empty(), o.width));
    }
    out
}

/// "2 processes recorded no lock activity: sh ×2 (pids 12, 14), env (pid 13)"
fn idle_line(idle: &[&Process], others: bool, width: usize) -> String {
    let mut out = wrap_phrases(&no_activity::phrases(idle, others), " ", width, "");
    out.push('\n');
    out
}

/// One process's text report, as `render` prints it (the HTML page shows
/// it too); call it with the process's names current.
/// How data-level accesses were recorded, when not in every engagement.
fn sampling(d: &DataLevel) -> String {
    if d.sample_every <= 1 {
        return String::new();
    }
    // Where the samples only read shared data, say so: a run recording
    // every engagement would judge those locks.
    let candidates = match d.read_only_unjudged.as_slice() {
        [] => String::new(),
        locks => format!(
            " (the samples under {} only read shared data)",
            locks
                .iter()
                .map(|l| l.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    format!(
        " in sampled engagements (each line's first {}, then 1 in {}, and the first accesses of each; read-only sharing not judged{candidates}: LOCKSUIT_DATA_SAMPLE=all judges it)",
        d.sample_first, d.sample_every
    )
}

pub fn process(out: &mut String, p: &Process, threshold: f64, o: &TextOptions) {
    let width = o.width;
    let status = match (p.ended_by, p.exit_code) {
        ("exit", Some(code)) => format!("exited with status {code}"),
        ("exit", None) => "exited normally".to_string(),
        ("exec", _) => "replaced itself with exec".to_string(),
        ("running", _) => "still running".to_string(), // a warning says more
        // The notes say from when to when, and with what.
        ("detached", _) => "recorded by locksuit attach while it ran, then detached".to_string(),
        _ => "DIED without a normal exit (crash or kill): figures are as of its death".to_string(),
    };
    out.push_str(&super::process_heading(p, width));
    let mut facts = vec![
        match p.duration_ns {
            Some(d) if p.ended_by == "detached" => format!("{status}: {} attached", duration(d)),
            Some(d) => format!("{status} after {}", duration(d)),
            None => status,
        },
        match (p.cpu_ns, p.parallelism) {
            (Some(cpu), Some(busy)) => format!(
                "{}, {busy:.2} running on average (CPU {})",
                count(p.threads.len() as u64, "thread", "threads"),
                duration(cpu)
            ),
            _ => count(p.threads.len() as u64, "thread", "threads"),
        },
        format!(
            "{} ({})",
            count(p.locks.len() as u64, "lock", "locks"),
            count(p.families.len() as u64, "family", "families")
        ),
        count(p.sites.len() as u64, "site", "sites"),
        count(
            p.conds.len() as u64,
            "condition variable",
            "condition variables",
        ),
        format!(
            "{} events ({})",
            p.events,
            if p.events_mode == "all" {
                "every operation"
            } else {
                "contended operations"
            }
        ),
        format!("{} dropped", p.dropped_events),
    ];
    if p.recording == "lean" {
        facts.push(LEAN_CANNOT_GIVE.to_string());
    }
    if !p.sites.is_empty() {
        facts.push(match &p.data_level {
            Some(d) if d.complete => format!(
                "lines judged by data touched{}: {} accesses under locks, {} dropped",
                sampling(d),
                d.accesses,
                d.dropped
            ),
            Some(d) => format!(
                "lines judged by data touched{}: {} accesses under locks recorded; no totals (it did not exit)",
                sampling(d),
                d.accesses
            ),
            None => "lines judged by sharing ratio (not built with locksuit cc)".to_string(),
        });
    }
    facts.push(match p.tsc_khz {
        Some(khz) => format!("clock TSC at {:.3} GHz", khz as f64 / 1e6),
        None => "clock clock_gettime".to_string(),
    });
    let last = facts.len() - 1;
    let facts: Vec<String> = facts
        .into_iter()
        .enumerate()
        .map(|(i, f)| if i < last { format!("{f};") } else { f })
        .collect();
    out.push_str(&wrap_phrases(&facts, " ", width, "   "));
    for w in &p.warnings {
        out.push_str(&wrap(&format!("warning: {w}"), width, "   ", "     "));
    }
    out.push('\n');
    findings(out, p, threshold, o);
    super::critical_path::section(out, p, width);
    tables::all(out, p, o);
}

fn findings(out: &mut String, p: &Process, threshold: f64, o: &TextOptions) {
    let title = format!(
        "Findings at threshold {threshold:.2} ({}), ranked by predicted gain (how much sooner the run would end without their waits), then wait time, then engagements",
        p.findings.len()
    );
    out.push_str(&wrap(&title, o.width, "", ""));
    if p.findings.is_empty() {
        out.push_str("   none\n");
    }
    let numbers = p.findings.len().min(o.top).to_string().len().max(2);
    let hang = " ".repeat(numbers + 3);
    for (i, f) in p.findings.iter().take(o.top).enumerate() {
        let number = format!(" {:>numbers$}. ", i + 1);
        let text = ids_glued(&format!("[{}] {}", f.kind, f.message), f, p);
        out.push_str(&wrap(&text, o.width, &number, &hang));
        if let Some(line) = super::critical_path::finding_line(f) {
            out.push_str(&wrap(
                &line,
                o.width,
                &format!("{hang}  "),
                &format!("{hang}    "),
            ));
        }
        if let Some(site) = f.sites.first().and_then(|id| p.sites.get(id.index())) {
            let at = format!("{hang}  at ");
            let deeper = format!("{hang}     ");
            for frame in shown_frames(&site.call_chain) {
                out.push_str(&wrap(&frame_line(frame), o.width, &at, &deeper));
            }
        }
    }
    if p.findings.len() > o.top {
        let hidden = p.findings.len() - o.top;
        let line = format!(
            "… and {hidden} more findings (--top {} or --format json lists every one)",
            p.findings.len()
        );
        out.push_str(&wrap(&line, o.width, "   ", "   "));
    }
    if let Some(line) = suppressed_line(p) {
        out.push_str(&wrap(&line, o.width, "", "   "));
    }
    out.push('\n');
}

/// "Suppressed: 3 findings …": how many findings each suppression entry
/// left out (not counted by --fail-on-findings), or None if none.
pub fn suppressed_line(p: &Process) -> Option<String> {
    if p.suppressed.is_empty() {
        return None;
    }
    let total: u64 = p.suppressed.iter().map(|s| s.findings).sum();
    let each: Vec<String> = p
        .suppressed
        .iter()
        .map(|s| {
            format!(
                "{} {} by [{}] ({})",
                s.findings, s.kind, s.suppression, s.source
            )
        })
        .collect();
    Some(format!(
        "Suppressed: {}, not listed and not counted by --fail-on-findings: {}",
        crate::base::words::count(total, "finding", "findings"),
        each.join(", ")
    ))
}

/// `text` with the ids of the finding's locks and sites (and of its sites'
/// locks) that have spaces in them (C++ names) kept whole. Messages name a
/// few ids at most, the first ones: the rest of a family of thousands is
/// not looked at.
fn ids_glued(text: &str, f: &Finding, p: &Process) -> String {
    const NAMED: usize = 8;
    let sites = f.sites.iter().take(NAMED);
    let site_locks = sites
        .clone()
        .filter_map(|s| p.sites.get(s.index()))
        .flat_map(|s| s.locks.iter().take(NAMED));
    let ids = f
        .locks
        .iter()
        .take(NAMED)
        .chain(site_locks)
        .map(ToString::to_string)
        .chain(sites.map(ToString::to_string));
    let mut text = text.to_string();
    for id in ids.filter(|id| id.contains(' ')) {
        text = text.replace(&id, &glued(&id));
    }
    text
}

/// The frames under a finding: from the first in the program's own code,
/// up to where the chain enters the system's libraries again (thread
/// start-up, `main`'s caller), which says nothing about the program.
fn shown_frames(chain: &[Frame]) -> impl Iterator<Item = &Frame> {
    let own = crate::model::frames::first_own_frame(chain);
    chain
        .iter()
        .skip(own)
        .take_while(|f| {
            !f.module
                .as_deref()
                .is_some_and(crate::model::frames::is_system_module)
        })
        .take(FRAMES_SHOWN)
}
