//! The text report's tables: locks, sites, who blocks whom, waits,
//! condition variables, threads. Each says which columns matter most (see
//! `grid::Grid`): at 80 columns the rest are left out, and the table
//! says so.

use super::grid::{figure, key, whole, words, Cell, Grid};
use super::sections::{section, TABLE_ROWS};
use super::text_options::{Columns, SortKey, TextOptions};
use crate::base::words::duration;
use crate::model::*;

/// A few ids, or how many and the first ones; each id kept whole. Ids go
/// one a line if one of them has a space of its own (a C++ name).
fn few_ids<T: ToString>(ids: &[T], what: &str) -> Cell {
    let shown: Vec<String> = ids.iter().take(4).map(T::to_string).collect();
    let spaced = shown.iter().any(|id| id.contains(' '));
    let separator = if spaced { "\n" } else { " " };
    let text = if ids.len() > 4 {
        let first = shown[..2].join(separator);
        format!("{} {what}{separator}({first}{separator}…)", ids.len())
    } else {
        shown.join(separator)
    };
    if spaced {
        Cell::lines(text)
    } else {
        Cell::from(text)
    }
}

fn lock_ids(locks: &[LockId]) -> Cell {
    few_ids(locks, "locks")
}

fn site_ids(sites: &[SiteId]) -> Cell {
    few_ids(sites, "sites")
}

/// A family's name in a table: its lock when it has one, else its id and
/// size, kept together by a no-break space.
fn family_label(f: &Family) -> String {
    if f.size == 1 {
        f.first_lock.to_string()
    } else {
        format!("{}\u{a0}×{}", f.id, f.size)
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

/// Every table of one process, in reading order.
pub fn all(out: &mut String, p: &Process, o: &TextOptions) {
    if !p.locks.is_empty() {
        match o.columns {
            Columns::Mutrace => mutrace_table(out, p, o),
            Columns::Locksuit => locks_table(out, p, o),
        }
    }
    sites_table(out, p, o);
    blocking_tables(out, p, o.width);
    super::stops::tables(out, p, o.width);
    if let Some(min_share) = o.tree {
        super::tree::section(out, p, min_share, o.width);
    }
    super::reasons::table(out, p, o.width);
    super::snapshots::section(out, p, o.width);
    waits_table(out, p, o.width);
    conds_table(out, p, o.width);
    threads_table(out, p, o.width);
}

fn mutrace_table(out: &mut String, p: &Process, o: &TextOptions) {
    let order = ranked_families(p, o.sort);
    let mut grid = Grid::new(vec![
        key("Mutex #"),
        figure("Locked", 0),
        figure("Changed", 0),
        figure("Cont.", 0),
        figure("tot.Time[ms]", 0),
        figure("avg.Time[ms]", 2),
        figure("max.Time[ms]", 1),
        whole("Flags", 3),
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
            LockKind::Futex => "F",
            LockKind::Unknown => "?",
        };
        grid.row(vec![
            Cell::id(family_label(f)),
            f.acquisitions.to_string().into(),
            f.owner_changes.to_string().into(),
            f.contended.to_string().into(),
            ms(f.hold_ns).into(),
            ms(avg).into(),
            ms(max).into(),
            format!("{flag}{}", if f.process_shared { "p" } else { "" }).into(),
        ]);
    }
    let period = match p.hold_sample_period {
        0 => "only contended holds are timed".to_string(),
        n => format!("contended holds and 1 in {n} others are timed"),
    };
    let title = format!(
        "Locks, mutrace columns (times are hold times; {period}; a family of locks taken \
         at the same lines is one row: its first lock's name ×<locks>)"
    );
    let hidden = order.len().saturating_sub(TABLE_ROWS);
    section(out, &title, &grid, hidden, "rows", o.width);
}

fn locks_table(out: &mut String, p: &Process, o: &TextOptions) {
    let order = ranked_families(p, o.sort);
    let mut grid = Grid::new(vec![
        key("lock"),
        words("kind", 7),
        whole("address", 10),
        figure("acquired", 0),
        figure("contended", 0),
        figure("changes", 9),
        figure("threads", 3),
        figure("sharing", 4),
        figure("wait", 0),
        whole("hold", 8),
        words("sites", 6),
    ]);
    for f in order.iter().take(TABLE_ROWS) {
        grid.row(vec![
            Cell::id(family_label(f)),
            if f.process_shared {
                format!("{} (shared)", f.kind)
            } else {
                f.kind.to_string()
            }
            .into(),
            format!("{:#x}", f.first_address).into(),
            f.acquisitions.to_string().into(),
            f.contended.to_string().into(),
            f.owner_changes.to_string().into(),
            f.threads.to_string().into(),
            format!("{:.2}", f.sharing_ratio).into(),
            duration(f.wait_ns).into(),
            hold_cell(f).into(),
            site_ids(&f.sites),
        ]);
    }
    let title = format!(
        "Locks, largest {:?} first (a family, locks of one kind taken at the same lines, is one \
         row: its first lock's name ×<locks>, figures summed, address of its first lock; hold: \
         the holds that were timed, and ≥ with the waits that untimed holds made a thread sit \
         through, which they lasted at least)",
        o.sort
    );
    let hidden = order.len().saturating_sub(TABLE_ROWS);
    section(out, &title, &grid, hidden, "rows", o.width);
}

/// A lock's holds as far as they were measured: the timed ones, and the
/// untimed ones another thread waited for, each at least that wait long.
fn hold_cell(f: &Family) -> String {
    match f.waited_holds {
        Some(w) if w.count > 0 => format!(
            "≥{} ({} timed, {} waited for)",
            duration(f.hold_ns.saturating_add(w.wait_ns)),
            f.hold_samples,
            w.count
        ),
        _ => format!("{} ({} timed)", duration(f.hold_ns), f.hold_samples),
    }
}

fn sites_table(out: &mut String, p: &Process, o: &TextOptions) {
    if p.sites.is_empty() {
        return;
    }
    let mut order: Vec<&Site> = p.sites.iter().collect();
    order.sort_by(|a, b| {
        site_key(b, o.sort)
            .cmp(&site_key(a, o.sort))
            .then(b.engagements.cmp(&a.engagements))
    });
    let mut grid = Grid::new(vec![
        key("site"),
        words("where", 0),
        figure("engaged", 0),
        figure("task switches", 3),
        figure("wait", 0),
        figure("ratio", 2),
        whole("status", 4),
        words("locks", 5),
    ]);
    for s in order.iter().take(TABLE_ROWS) {
        let own = s
            .call_chain
            .get(crate::model::frames::first_own_frame(&s.call_chain));
        let fallback = own.map_or("?", |f| f.offset.as_deref().unwrap_or(&f.address));
        let id = s.id.to_string();
        // A site named function@file:line says where it is already.
        let named_by_place = match (&s.function, &s.file, s.line) {
            (Some(function), Some(file), Some(line)) => id == format!("{function}@{file}:{line}"),
            _ => false,
        };
        let place = if named_by_place {
            String::new()
        } else {
            where_short(&s.function, &s.file, s.line, fallback)
        };
        grid.row(vec![
            Cell::id(id),
            place.into(),
            s.engagements.to_string().into(),
            s.task_switches.to_string().into(),
            duration(s.wait_ns).into(),
            format!("{:.2}", s.ratio).into(),
            s.status.to_string().into(),
            lock_ids(&s.locks),
        ]);
    }
    let title = format!(
        "Sites (lines that engage locks), largest {:?} first",
        o.sort
    );
    let hidden = order.len().saturating_sub(TABLE_ROWS);
    section(out, &title, &grid, hidden, "sites", o.width);
}

fn blocking_tables(out: &mut String, p: &Process, width: usize) {
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
    let mut grid = Grid::new(vec![
        key("blocker"),
        words("blocked", 0),
        words("lock", 0),
        figure("times", 1),
        figure("waited", 0),
    ]);
    for b in p.blocking.iter().take(TABLE_ROWS) {
        grid.row(vec![
            name(b.blocker_tid).into(),
            name(b.blocked_tid).into(),
            Cell::id(b.lock.to_string()),
            b.count.to_string().into(),
            duration(b.wait_ns).into(),
        ]);
    }
    let title = "Who blocks whom (the blocker held the lock while the blocked thread waited)";
    let hidden = p.blocking.len().saturating_sub(TABLE_ROWS);
    section(out, title, &grid, hidden, "rows", width);
    if !p.blocking_functions.is_empty() {
        let mut grid = Grid::new(vec![
            key("blocking function"),
            words("blocked function", 0),
            figure("times", 1),
            figure("waited", 0),
        ]);
        for f in p.blocking_functions.iter().take(TABLE_ROWS) {
            grid.row(vec![
                f.blocker_function.clone().into(),
                f.blocked_function.clone().into(),
                f.count.to_string().into(),
                duration(f.wait_ns).into(),
            ]);
        }
        let hidden = p.blocking_functions.len().saturating_sub(TABLE_ROWS);
        section(
            out,
            "Which functions block which",
            &grid,
            hidden,
            "rows",
            width,
        );
    }
}

fn waits_table(out: &mut String, p: &Process, width: usize) {
    let mut waited: Vec<&Family> = p.families.iter().filter(|f| f.wait.is_some()).collect();
    if waited.is_empty() {
        return;
    }
    waited.sort_by(|a, b| b.wait_ns.cmp(&a.wait_ns).then(a.id.cmp(&b.id)));
    let mut grid = Grid::new(vec![
        key("lock"),
        figure("waits", 0),
        figure("avg", 3),
        figure("avg compensated", 6),
        figure("p50", 4),
        figure("p99", 0),
        figure("max", 0),
        figure("holds timed", 7),
        figure("hold avg", 2),
        figure("hold avg compensated", 8),
        figure("hold max", 1),
    ]);
    for f in waited.iter().take(TABLE_ROWS) {
        let w = f.wait.clone().unwrap_or_default();
        let wc = f.wait_compensated.clone().unwrap_or_default();
        let h = f.hold.clone().unwrap_or_default();
        let hc = f.hold_compensated.clone().unwrap_or_default();
        grid.row(vec![
            Cell::id(family_label(f)),
            w.count.to_string().into(),
            duration(w.avg_ns()).into(),
            duration(wc.avg_ns()).into(),
            duration(w.p50_ns).into(),
            duration(w.p99_ns).into(),
            duration(w.max_ns).into(),
            h.count.to_string().into(),
            duration(h.avg_ns()).into(),
            duration(hc.avg_ns()).into(),
            duration(h.max_ns).into(),
        ]);
    }
    let costs: Vec<f64> = p.threads.iter().filter_map(|t| t.shim_call_ns).collect();
    let per_call = if costs.is_empty() {
        String::new()
    } else {
        let least = costs.iter().cloned().fold(f64::MAX, f64::min);
        let most = costs.iter().cloned().fold(0.0, f64::max);
        format!(", {least:.1}–{most:.1} ns per call, sampled per thread")
    };
    let title = format!(
        "Contended waits and holds (every contended wait is recorded; figures are raw, except \
         \"compensated\", which takes out the shim's own time: its slow paths as timed, its \
         fast-path calls at their sampled cost{per_call}; a family's figures are pooled)"
    );
    let hidden = waited.len().saturating_sub(TABLE_ROWS);
    section(out, &title, &grid, hidden, "rows", width);
}

fn conds_table(out: &mut String, p: &Process, width: usize) {
    if p.conds.is_empty() {
        return;
    }
    let mut grid = Grid::new(vec![
        key("cond"),
        whole("address", 9),
        figure("waits", 0),
        figure("notified", 3),
        figure("timeouts", 2),
        figure("spurious", 4),
        figure("signals", 5),
        figure("broadcasts", 6),
        figure("found waiters", 7),
        figure("wait", 0),
        figure("wake p50", 8),
        figure("wake p99", 1),
        words("mutexes", 2),
    ]);
    for c in p.conds.iter().take(TABLE_ROWS) {
        let latency = c.notify_latency.clone().unwrap_or_default();
        grid.row(vec![
            Cell::id(c.id.clone()),
            c.address.clone().into(),
            c.waits.to_string().into(),
            c.notified.to_string().into(),
            c.timeouts.to_string().into(),
            c.spurious.to_string().into(),
            c.signals.to_string().into(),
            c.broadcasts.to_string().into(),
            c.notifies_with_waiters.to_string().into(),
            duration(c.wait_ns).into(),
            duration(latency.p50_ns).into(),
            duration(latency.p99_ns).into(),
            lock_ids(&c.mutexes),
        ]);
    }
    let hidden = p.conds.len().saturating_sub(TABLE_ROWS);
    section(
        out,
        "Condition variables",
        &grid,
        hidden,
        "condition variables",
        width,
    );
}

fn threads_table(out: &mut String, p: &Process, width: usize) {
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
    let mut grid = Grid::new(vec![
        key("tid"),
        words("name", 1),
        figure("parent", 2),
        figure("acquisitions", 0),
        figure("joins", 3),
        figure("join wait", 3),
        figure("cpu", 1),
        figure("runnable", 2),
        figure("switches vol/invol", 2),
    ]);
    for th in shown.iter().map(|&i| &p.threads[i]) {
        grid.row(vec![
            format!("{}{}", th.tid, if th.main { " (main)" } else { "" }).into(),
            th.name.clone().unwrap_or_default().into(),
            th.parent_tid
                .map(|t| t.to_string())
                .unwrap_or_default()
                .into(),
            th.acquisitions.to_string().into(),
            th.joins.to_string().into(),
            duration(th.join_wait_ns).into(),
            th.cpu_ns.map(duration).unwrap_or_default().into(),
            th.runnable_ns.map(duration).unwrap_or_default().into(),
            match (th.voluntary_switches, th.involuntary_switches) {
                (Some(v), Some(i)) => format!("{v}/{i}"),
                _ => String::new(),
            }
            .into(),
        ]);
    }
    let hidden = p.threads.len().saturating_sub(shown.len());
    section(out, &title, &grid, hidden, "threads", width);
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
