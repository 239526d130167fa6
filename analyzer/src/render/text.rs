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

/// Rows a table shows, largest first, before "… and N more".
pub const TABLE_ROWS: usize = 20;

/// The line under a table that left rows out.
fn more(out: &mut String, hidden: usize, what: &str) {
    if hidden > 0 {
        let _ = writeln!(
            out,
            "   … and {hidden} more {what} (--format json lists every one)"
        );
    }
}

fn family_key(f: &Family, key: SortKey) -> u64 {
    match key {
        SortKey::Wait => f.wait_ns,
        SortKey::Hold => f.hold_ns,
        SortKey::Acquisitions => f.acquisitions,
        SortKey::Contended => f.contended,
        SortKey::Changes => f.owner_changes,
        SortKey::P99 => f.wait.as_ref().map_or(0, |w| w.p99_ns),
        SortKey::Max => f.wait.as_ref().map_or(0, |w| w.max_ns),
        SortKey::Threads => u64::from(f.threads),
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

/// A family's name in a table: its lock when it has one, else its id and size.
fn family_label(f: &Family) -> String {
    if f.size == 1 {
        f.first_lock.to_string()
    } else {
        // No breakable space: the table keeps the label on one line.
        format!("{}\u{a0}×{}", f.id, f.size)
    }
}

/// A few ids, or how many and the first ones.
fn lock_ids(locks: &[LockId]) -> String {
    if locks.len() <= 4 {
        locks
            .iter()
            .map(|l| l.to_string())
            .collect::<Vec<_>>()
            .join(" ")
    } else {
        format!("{} locks ({} {} …)", locks.len(), locks[0], locks[1])
    }
}

fn site_ids(sites: &[SiteId]) -> String {
    sites
        .iter()
        .map(|s| s.to_string())
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn render(report: &Report, sort: SortKey, columns: Columns) -> String {
    let mut out = String::new();
    for p in &report.processes {
        crate::names::with(&p.names, || {
            process(&mut out, p, report.threshold, sort, columns)
        });
    }
    out
}

/// The families (each the row of one lock, or of many), largest first.
fn ranked_families(p: &Process, sort: SortKey) -> Vec<&Family> {
    let mut order: Vec<&Family> = p.families.iter().collect();
    order.sort_by(|a, b| {
        family_key(b, sort)
            .cmp(&family_key(a, sort))
            .then(b.acquisitions.cmp(&a.acquisitions))
            .then(a.id.cmp(&b.id))
    });
    order
}

fn mutrace_table(out: &mut String, p: &Process, sort: SortKey) {
    let order = ranked_families(p, sort);
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
    for f in order.iter().take(TABLE_ROWS) {
        let avg = f.hold_ns.checked_div(f.hold_samples).unwrap_or(0);
        let max = f.hold.as_ref().map_or(0, |h| h.max_ns);
        let flag = match f.kind {
            LockKind::Mutex => "M",
            LockKind::Rwlock => "W",
            LockKind::Spin => "S",
            LockKind::Sem => "s",
            LockKind::Barrier => "B",
            LockKind::Unknown => "?",
        };
        t.add_row(vec![
            family_label(f),
            f.acquisitions.to_string(),
            f.owner_changes.to_string(),
            f.contended.to_string(),
            ms(f.hold_ns),
            ms(avg),
            ms(max),
            format!("{flag}{}", if f.process_shared { "p" } else { "" }),
        ]);
    }
    right_align(&mut t, &[1, 2, 3, 4, 5, 6]);
    let period = match p.hold_sample_period {
        0 => "only contended holds are timed".to_string(),
        n => format!("contended holds and 1 in {n} others are timed"),
    };
    let _ = writeln!(
        out,
        "Locks, mutrace columns (times are hold times; {period}; a family of locks taken at the same lines is one row, F<n> ×<locks>)\n{t}"
    );
    more(out, order.len().saturating_sub(TABLE_ROWS), "rows");
    let _ = writeln!(out);
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
        "   {status}; {} threads, {} locks ({}), {} sites, {} condition variables, {} events ({}), {} dropped{}; clock {}",
        p.threads.len(),
        p.locks.len(),
        super::count(p.families.len() as u64, "family", "families"),
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
    for (i, f) in p.findings.iter().take(TABLE_ROWS).enumerate() {
        let _ = writeln!(out, "{:>3}. [{}] {}", i + 1, f.kind, f.message);
        if let Some(site) = f.sites.first().and_then(|id| p.sites.get(id.index())) {
            let own = crate::symbolize::first_own_frame(&site.call_chain);
            for frame in site.call_chain.iter().skip(own).take(6) {
                let _ = writeln!(out, "        at {}", frame_line(frame));
            }
        }
    }
    more(out, p.findings.len().saturating_sub(TABLE_ROWS), "findings");
    let _ = writeln!(out);

    if !p.locks.is_empty() && matches!(columns, Columns::Mutrace) {
        mutrace_table(out, p, sort);
    } else if !p.locks.is_empty() {
        locks_table(out, p, sort);
    }
    sites_table(out, p, sort);
    blocking_tables(out, p);
    waits_table(out, p);
    conds_table(out, p);
    threads_table(out, p);
}

fn locks_table(out: &mut String, p: &Process, sort: SortKey) {
    let order = ranked_families(p, sort);
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
    for f in order.iter().take(TABLE_ROWS) {
        t.add_row(vec![
            family_label(f),
            if f.process_shared {
                format!("{} (shared)", f.kind)
            } else {
                f.kind.to_string()
            },
            format!("{:#x}", f.first_address),
            f.acquisitions.to_string(),
            f.contended.to_string(),
            f.owner_changes.to_string(),
            f.threads.to_string(),
            format!("{:.2}", f.sharing_ratio),
            duration(f.wait_ns),
            format!("{} ({})", duration(f.hold_ns), f.hold_samples),
            site_ids(&f.sites),
        ]);
    }
    right_align(&mut t, &[3, 4, 5, 6, 7, 8, 9]);
    let _ = writeln!(
        out,
        "Locks, largest {sort:?} first (a family, locks of one kind taken at the same lines, is one row: F<n> ×<locks>, figures summed, address of its first lock)\n{t}"
    );
    more(out, order.len().saturating_sub(TABLE_ROWS), "rows");
    let _ = writeln!(out);
}

fn sites_table(out: &mut String, p: &Process, sort: SortKey) {
    if p.sites.is_empty() {
        return;
    }
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
    for s in order.iter().take(TABLE_ROWS) {
        let own = s
            .call_chain
            .get(crate::symbolize::first_own_frame(&s.call_chain));
        let fallback = own.map_or("?", |f| f.offset.as_deref().unwrap_or(&f.address));
        t.add_row(vec![
            s.id.to_string(),
            where_short(&s.function, &s.file, s.line, fallback),
            s.engagements.to_string(),
            s.task_switches.to_string(),
            duration(s.wait_ns),
            format!("{:.2}", s.ratio),
            s.status.to_string(),
            lock_ids(&s.locks),
        ]);
    }
    right_align(&mut t, &[2, 3, 4, 5]);
    let _ = writeln!(
        out,
        "Sites (lines that engage locks), largest {sort:?} first\n{t}"
    );
    more(out, order.len().saturating_sub(TABLE_ROWS), "sites");
    let _ = writeln!(out);
}

fn blocking_tables(out: &mut String, p: &Process) {
    if p.blocking.is_empty() {
        return;
    }
    let name = |tid: u32| {
        let thread = p.threads.iter().find(|t| t.tid == tid);
        match thread.and_then(|t| t.name.as_deref()) {
            Some(n) => format!("{tid} ({n})"),
            None => tid.to_string(),
        }
    };
    let mut t = table(&["blocker", "blocked", "lock", "times", "waited"]);
    for b in p.blocking.iter().take(TABLE_ROWS) {
        t.add_row(vec![
            name(b.blocker_tid),
            name(b.blocked_tid),
            b.lock.to_string(),
            b.count.to_string(),
            duration(b.wait_ns),
        ]);
    }
    right_align(&mut t, &[3, 4]);
    let _ = writeln!(
        out,
        "Who blocks whom (the blocker held the lock while the blocked thread waited)\n{t}"
    );
    more(out, p.blocking.len().saturating_sub(TABLE_ROWS), "rows");
    let _ = writeln!(out);
    if !p.blocking_functions.is_empty() {
        let mut t = table(&["blocking function", "blocked function", "times", "waited"]);
        for f in p.blocking_functions.iter().take(TABLE_ROWS) {
            t.add_row(vec![
                f.blocker_function.clone(),
                f.blocked_function.clone(),
                f.count.to_string(),
                duration(f.wait_ns),
            ]);
        }
        right_align(&mut t, &[2, 3]);
        let _ = writeln!(out, "Which functions block which\n{t}");
        more(
            out,
            p.blocking_functions.len().saturating_sub(TABLE_ROWS),
            "rows",
        );
        let _ = writeln!(out);
    }
}

fn waits_table(out: &mut String, p: &Process) {
    let mut waited: Vec<&Family> = p.families.iter().filter(|f| f.wait.is_some()).collect();
    if waited.is_empty() {
        return;
    }
    waited.sort_by(|a, b| b.wait_ns.cmp(&a.wait_ns).then(a.id.cmp(&b.id)));
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
    for f in waited.iter().take(TABLE_ROWS) {
        let w = f.wait.clone().unwrap_or_default();
        let wc = f.wait_compensated.clone().unwrap_or_default();
        let h = f.hold.clone().unwrap_or_default();
        let hc = f.hold_compensated.clone().unwrap_or_default();
        t.add_row(vec![
            family_label(f),
            w.count.to_string(),
            duration(w.avg_ns()),
            duration(wc.avg_ns()),
            duration(w.p50_ns),
            duration(w.p99_ns),
            duration(w.max_ns),
            h.count.to_string(),
            duration(h.avg_ns()),
            duration(hc.avg_ns()),
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
         timed, and its fast-path calls at their sampled cost{per_call}; a family's \
         distributions are pooled\n{t}"
    );
    more(out, waited.len().saturating_sub(TABLE_ROWS), "rows");
    let _ = writeln!(out);
}

fn conds_table(out: &mut String, p: &Process) {
    if p.conds.is_empty() {
        return;
    }
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
    for c in p.conds.iter().take(TABLE_ROWS) {
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
            lock_ids(&c.mutexes),
        ]);
    }
    right_align(&mut t, &[2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
    let _ = writeln!(out, "Condition variables\n{t}");
    more(
        out,
        p.conds.len().saturating_sub(TABLE_ROWS),
        "condition variables",
    );
    let _ = writeln!(out);
}

fn threads_table(out: &mut String, p: &Process) {
    let mut shown: Vec<usize> = (0..p.threads.len()).collect();
    let title = if shown.len() > TABLE_ROWS {
        // Too many to list: the busiest, in the order they were recorded.
        shown.sort_by(|&a, &b| p.threads[b].acquisitions.cmp(&p.threads[a].acquisitions));
        shown.truncate(TABLE_ROWS);
        shown.sort_unstable();
        format!("Threads, the {TABLE_ROWS} with the most acquisitions")
    } else {
        "Threads".to_string()
    };
    let mut t = table(&[
        "tid",
        "name",
        "parent",
        "acquisitions",
        "joins",
        "join wait",
    ]);
    for th in shown.iter().map(|&i| &p.threads[i]) {
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
    let _ = writeln!(out, "{title}\n{t}");
    more(out, p.threads.len().saturating_sub(shown.len()), "threads");
    let _ = writeln!(out);
}
