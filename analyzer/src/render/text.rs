//! Text: one readable table per section, ranked by cost.

use super::duration;
use crate::model::*;
use comfy_table::{presets, CellAlignment, ContentArrangement, Table};
use std::fmt::Write;

fn table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(presets::UTF8_BORDERS_ONLY)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_width(120)
        .set_header(header.to_vec());
    t
}

fn right_align(t: &mut Table, columns: &[usize]) {
    for &c in columns {
        if let Some(col) = t.column_mut(c) {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
}

pub(super) fn where_short(
    function: &Option<String>,
    file: &Option<String>,
    line: Option<u32>,
    fallback: &str,
) -> String {
    match (function, file, line) {
        (Some(f), Some(file), Some(line)) => format!("{f} {file}:{line}"),
        (Some(f), _, _) => f.clone(),
        _ => fallback.to_string(),
    }
}

fn frame_line(f: &Frame) -> String {
    let module = f
        .module
        .as_deref()
        .map(crate::symbolize::basename)
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

/// Which column orders the locks and sites tables (largest first).
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum SortKey {
    /// Total time threads waited.
    Wait,
    /// Total timed hold time.
    Hold,
    Acquisitions,
    Contended,
    /// Owner changes.
    Changes,
    /// 99th percentile of contended waits.
    P99,
    /// Longest contended wait.
    Max,
    Threads,
}

/// The locks table's columns.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum Columns {
    Locksuit,
    /// mutrace's: Locked, Changed, Cont., tot.Time, avg.Time, max.Time.
    Mutrace,
}

fn lock_key(l: &Lock, key: SortKey) -> u64 {
    match key {
        SortKey::Wait => l.wait_ns,
        SortKey::Hold => l.hold_ns,
        SortKey::Acquisitions => l.acquisitions,
        SortKey::Contended => l.contended,
        SortKey::Changes => l.owner_changes,
        SortKey::P99 => l.wait.as_ref().map_or(0, |w| w.p99_ns),
        SortKey::Max => l.wait.as_ref().map_or(0, |w| w.max_ns),
        SortKey::Threads => l.threads as u64,
    }
}

fn site_key(s: &Site, key: SortKey) -> u64 {
    match key {
        SortKey::Wait => s.wait_ns,
        SortKey::Hold => s.hold_ns,
        SortKey::Acquisitions | SortKey::Changes | SortKey::Threads => s.engagements,
        SortKey::Contended => s.contended,
        SortKey::P99 => s.wait.as_ref().map_or(0, |w| w.p99_ns),
        SortKey::Max => s.wait.as_ref().map_or(0, |w| w.max_ns),
    }
}

pub fn render(report: &Report, sort: SortKey, columns: Columns) -> String {
    let mut out = String::new();
    for p in &report.processes {
        process(&mut out, p, report.threshold, sort, columns);
    }
    out
}

fn mutrace_table(out: &mut String, p: &Process, sort: SortKey) {
    let mut order: Vec<&Lock> = p.locks.iter().collect();
    order.sort_by_key(|l| std::cmp::Reverse(lock_key(l, sort)));
    let mut t = table(&[
        "Mutex #",
        "Locked",
        "Changed",
        "Cont.",
        "tot.Time[ms]",
        "avg.Time[ms]",
        "max.Time[ms]",
        "Flags",
    ]);
    let ms = |ns: u64| format!("{:.3}", ns as f64 / 1e6);
    for l in order {
        let avg = l.hold_ns.checked_div(l.hold_samples).unwrap_or(0);
        let max = l.hold.as_ref().map_or(0, |h| h.max_ns);
        let flag = match l.kind {
            "mutex" => "M",
            "rwlock" => "W",
            "spin" => "S",
            "sem" => "s",
            "barrier" => "B",
            _ => "?",
        };
        t.add_row(vec![
            l.id.clone(),
            l.acquisitions.to_string(),
            l.owner_changes.to_string(),
            l.contended.to_string(),
            ms(l.hold_ns),
            ms(avg),
            ms(max),
            format!("{flag}{}", if l.process_shared { "p" } else { "" }),
        ]);
    }
    right_align(&mut t, &[1, 2, 3, 4, 5, 6]);
    let period = match p.hold_sample_period {
        0 => "only contended holds are timed".to_string(),
        n => format!("contended holds and 1 in {n} others are timed"),
    };
    let _ = writeln!(
        out,
        "Locks, mutrace columns (times are hold times; {period})\n{t}\n"
    );
}

fn process(out: &mut String, p: &Process, threshold: f64, sort: SortKey, columns: Columns) {
    let status = match (p.ended_by, p.exit_code) {
        ("exit", Some(code)) => format!("exited with status {code}"),
        ("exit", None) => "exited normally".to_string(),
        ("exec", _) => "replaced itself with exec".to_string(),
        _ => "DIED without a normal exit (crash or kill): figures are as of its death".to_string(),
    };
    let _ = writeln!(out, "== {} (pid {}) — {}", p.exe, p.pid, p.trace);
    let _ =
        writeln!(
        out,
        "   {status}; {} threads, {} locks, {} sites, {} condition variables, {} events ({}), {} dropped{}; clock {}",
        p.threads.len(),
        p.locks.len(),
        p.sites.len(),
        p.conds.len(),
        p.events,
        if p.events_mode == "all" { "every operation" } else { "contended operations" },
        p.dropped_events,
        p.duration_ns.map(|d| format!(", ran {}", duration(d))).unwrap_or_default(),
        match p.tsc_khz {
            Some(khz) => format!("TSC at {:.3} GHz", khz as f64 / 1e6),
            None => "clock_gettime".to_string(),
        }
    );
    for w in &p.warnings {
        let _ = writeln!(out, "   warning: {w}");
    }
    let _ = writeln!(out);

    let _ = writeln!(
        out,
        "Findings at threshold {threshold:.2} ({}), ranked by wait time, then engagements",
        p.findings.len()
    );
    if p.findings.is_empty() {
        let _ = writeln!(out, "   none");
    }
    for (i, f) in p.findings.iter().enumerate() {
        let _ = writeln!(out, "{:>3}. [{}] {}", i + 1, f.kind, f.message);
        if let Some(site) = f
            .sites
            .first()
            .and_then(|id| p.sites.iter().find(|s| &s.id == id))
        {
            let own = crate::symbolize::first_own_frame(&site.call_chain);
            for frame in site.call_chain.iter().skip(own).take(6) {
                let _ = writeln!(out, "        at {}", frame_line(frame));
            }
        }
    }
    let _ = writeln!(out);

    if !p.locks.is_empty() && matches!(columns, Columns::Mutrace) {
        mutrace_table(out, p, sort);
    } else if !p.locks.is_empty() {
        let mut order: Vec<&Lock> = p.locks.iter().collect();
        order.sort_by(|a, b| {
            lock_key(b, sort)
                .cmp(&lock_key(a, sort))
                .then(b.acquisitions.cmp(&a.acquisitions))
        });
        let mut t = table(&[
            "lock",
            "kind",
            "address",
            "acquired",
            "contended",
            "changes",
            "threads",
            "sharing",
            "wait",
            "hold (timed)",
            "sites",
        ]);
        for l in order {
            t.add_row(vec![
                l.id.clone(),
                if l.process_shared {
                    format!("{} (shared)", l.kind)
                } else {
                    l.kind.to_string()
                },
                l.address.clone(),
                l.acquisitions.to_string(),
                l.contended.to_string(),
                l.owner_changes.to_string(),
                l.threads.to_string(),
                format!("{:.2}", l.sharing_ratio),
                duration(l.wait_ns),
                format!("{} ({})", duration(l.hold_ns), l.hold_samples),
                l.sites.join(" "),
            ]);
        }
        right_align(&mut t, &[3, 4, 5, 6, 7, 8, 9]);
        let _ = writeln!(out, "Locks, largest {sort:?} first\n{t}\n");
    }

    if !p.sites.is_empty() {
        let mut order: Vec<&Site> = p.sites.iter().collect();
        order.sort_by(|a, b| {
            site_key(b, sort)
                .cmp(&site_key(a, sort))
                .then(b.engagements.cmp(&a.engagements))
        });
        let mut t = table(&[
            "site",
            "where",
            "engaged",
            "task switches",
            "wait",
            "ratio",
            "status",
            "locks",
        ]);
        for s in order {
            let own = s
                .call_chain
                .get(crate::symbolize::first_own_frame(&s.call_chain));
            let fallback = own.map_or("?", |f| f.offset.as_deref().unwrap_or(&f.address));
            t.add_row(vec![
                s.id.clone(),
                where_short(&s.function, &s.file, s.line, fallback),
                s.engagements.to_string(),
                s.task_switches.to_string(),
                duration(s.wait_ns),
                format!("{:.2}", s.ratio),
                s.status.to_string(),
                s.locks.join(" "),
            ]);
        }
        right_align(&mut t, &[2, 3, 4, 5]);
        let _ = writeln!(
            out,
            "Sites (lines that engage locks), largest {sort:?} first\n{t}\n"
        );
    }

    if !p.blocking.is_empty() {
        let name = |tid: u32| {
            let thread = p.threads.iter().find(|t| t.tid == tid);
            match thread.and_then(|t| t.name.as_deref()) {
                Some(n) => format!("{tid} ({n})"),
                None => tid.to_string(),
            }
        };
        let mut t = table(&["blocker", "blocked", "lock", "times", "waited"]);
        for b in &p.blocking {
            t.add_row(vec![
                name(b.blocker_tid),
                name(b.blocked_tid),
                b.lock.clone(),
                b.count.to_string(),
                duration(b.wait_ns),
            ]);
        }
        right_align(&mut t, &[3, 4]);
        let _ = writeln!(
            out,
            "Who blocks whom (the blocker held the lock while the blocked thread waited)\n{t}\n"
        );
        if !p.blocking_functions.is_empty() {
            let mut t = table(&["blocking function", "blocked function", "times", "waited"]);
            for f in &p.blocking_functions {
                t.add_row(vec![
                    f.blocker_function.clone(),
                    f.blocked_function.clone(),
                    f.count.to_string(),
                    duration(f.wait_ns),
                ]);
            }
            right_align(&mut t, &[2, 3]);
            let _ = writeln!(out, "Which functions block which\n{t}\n");
        }
    }

    let waited: Vec<&Lock> = p.locks.iter().filter(|l| l.wait.is_some()).collect();
    if !waited.is_empty() {
        let mut t = table(&[
            "lock",
            "waits",
            "avg",
            "avg compensated",
            "p50",
            "p99",
            "max",
            "holds timed",
            "hold avg",
            "hold avg compensated",
            "hold max",
        ]);
        for l in waited {
            let w = l.wait.clone().unwrap_or_default();
            let wc = l.wait_compensated.clone().unwrap_or_default();
            let h = l.hold.clone().unwrap_or_default();
            let hc = l.hold_compensated.clone().unwrap_or_default();
            t.add_row(vec![
                l.id.clone(),
                w.count.to_string(),
                duration(w.avg_ns),
                duration(wc.avg_ns),
                duration(w.p50_ns),
                duration(w.p99_ns),
                duration(w.max_ns),
                h.count.to_string(),
                duration(h.avg_ns),
                duration(hc.avg_ns),
                duration(h.max_ns),
            ]);
        }
        right_align(&mut t, &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
        let costs: Vec<f64> = p.threads.iter().filter_map(|t| t.shim_call_ns).collect();
        let per_call = if costs.is_empty() {
            String::new()
        } else {
            let least = costs.iter().cloned().fold(f64::MAX, f64::min);
            let most = costs.iter().cloned().fold(0.0, f64::max);
            format!(" ({least:.1}–{most:.1} ns per call, sampled per thread)")
        };
        let _ = writeln!(
            out,
            "Contended waits and holds: every contended wait is recorded; figures are raw, \
             except \"compensated\", which takes out the shim's own time: its slow paths as \
             timed, and its fast-path calls at their sampled cost{per_call}\n{t}\n"
        );
    }

    if !p.conds.is_empty() {
        let mut t = table(&[
            "cond",
            "address",
            "waits",
            "notified",
            "timeouts",
            "spurious",
            "signals",
            "broadcasts",
            "found waiters",
            "wait",
            "wake p50",
            "wake p99",
            "mutexes",
        ]);
        for c in &p.conds {
            let latency = c.notify_latency.clone().unwrap_or_default();
            t.add_row(vec![
                c.id.clone(),
                c.address.clone(),
                c.waits.to_string(),
                c.notified.to_string(),
                c.timeouts.to_string(),
                c.spurious.to_string(),
                c.signals.to_string(),
                c.broadcasts.to_string(),
                c.notifies_with_waiters.to_string(),
                duration(c.wait_ns),
                duration(latency.p50_ns),
                duration(latency.p99_ns),
                c.mutexes.join(" "),
            ]);
        }
        right_align(&mut t, &[2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
        let _ = writeln!(out, "Condition variables\n{t}\n");
    }

    let mut t = table(&[
        "tid",
        "name",
        "parent",
        "acquisitions",
        "joins",
        "join wait",
    ]);
    for th in &p.threads {
        t.add_row(vec![
            format!("{}{}", th.tid, if th.main { " (main)" } else { "" }),
            th.name.clone().unwrap_or_default(),
            th.parent_tid.map(|t| t.to_string()).unwrap_or_default(),
            th.acquisitions.to_string(),
            th.joins.to_string(),
            duration(th.join_wait_ns),
        ]);
    }
    right_align(&mut t, &[3, 4, 5]);
    let _ = writeln!(out, "Threads\n{t}\n");
}
