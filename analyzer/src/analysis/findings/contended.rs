//! The findings about contended locks' waits and rates: starvation,
//! high-contention, over-synchronization, each with advice for the
//! language of the line that takes the lock (see `python.rs`).

use super::*;

/// One wait that sat through many acquisitions by other threads.
pub(super) fn starvation(ev: &Evidence, s: &Starved) -> Finding {
    let lock = ev.lock(s.lock);
    let site = s.site.and_then(|site| ev.sites.get(site.index()));
    let at = site.map_or_else(|| "an unknown line".to_string(), where_of);
    let py = Py::at(site);
    // With threads queuing for CPUs, a woken waiter may have stood in the
    // queue while running threads took the lock: that is scheduling, and a
    // lock that hands over in turn would make it worse.
    let advice = match ev.cpu_queue {
        Some((queued, ran)) if queued.saturating_mul(2) >= ran => format!(
            "; but the threads stood waiting for a CPU for {} in all against {} on one: a woken waiter may have waited for a CPU while running threads took the lock, which is scheduling, not an unfair lock. {}",
            duration(queued),
            duration(ran),
            py.map_or_else(
                || "With fewer runnable threads than processors, if it still happens, shorten the others' critical sections (a lock that hands over in turn would only make waiting for CPUs worse).".to_string(),
                |py| py.starvation(true)
            )
        ),
        _ => py.map_or_else(
            || ": the lock is unfair to it; shorten the others' critical sections or hand the lock over in turn (a queue or ticket lock).".to_string(),
            |py| py.starvation(false),
        ),
    };
    let message = format!(
        "thread {} waited {} for {} {} at {} while other threads took it {}{} times{}{advice}",
        s.tid,
        duration(s.wait_ns),
        lock.kind,
        lock.id,
        at,
        if ev.lean { "at least " } else { "" },
        s.passed_over,
        if s.timed_out { " (then gave up)" } else { "" }
    );
    let mut finding = ev.finding(FINDING_STARVATION, vec![lock.id], message);
    finding.sites = s.site.into_iter().collect();
    finding.wait_ns = s.wait_ns;
    finding
}

pub(super) fn high_contention(ev: &Evidence, group: Vec<LockId>) -> Finding {
    let first = ev.lock(group[0]);
    let (acquisitions, contended, wait) =
        group.iter().fold((0u64, 0u64, 0u64), |(a, c, w), &id| {
            let l = ev.lock(id);
            (
                a.saturating_add(l.acquisitions),
                c.saturating_add(l.contended),
                w.saturating_add(l.wait_ns),
            )
        });
    let percent = contended as f64 * 100.0 / acquisitions.max(1) as f64;
    let py = Py::at(ev.first_site(first));
    let message = if first.kind == LockKind::Futex {
        // Only its waits are seen: no share of acquisitions to give.
        format!(
            "{} {} (waited for at {}): threads waited for it {} times, {} in all (its acquisitions that did not wait are not seen): {}",
            first.kind,
            lock_list(&group, NAMED_IN_MESSAGE),
            ev.at(first),
            contended,
            duration(wait),
            py.as_ref().map_or_else(
                || "split the lock or the data it guards.".to_string(),
                |py| py.high_contention(false)
            )
        )
    } else if group.len() == 1 {
        format!(
            "{} {} (taken at {}): {:.0}% of its {} acquisitions had to wait, {} in all: {}",
            first.kind,
            first.id,
            ev.at(first),
            percent,
            acquisitions,
            duration(wait),
            py.as_ref().map_or_else(
                || "split the lock or the data it guards.".to_string(),
                |py| py.high_contention(false)
            )
        )
    } else {
        format!(
            "{} {} of one family, {}, taken at {}: {:.0}% of their {} acquisitions had to wait, {} in all: {}",
            group.len(),
            kind_plural(first.kind),
            lock_list(&group, NAMED_IN_MESSAGE),
            ev.at(first),
            percent,
            acquisitions,
            duration(wait),
            py.as_ref().map_or_else(
                || "split the locks or the data they guard.".to_string(),
                |py| py.high_contention(true)
            )
        )
    };
    ev.finding(FINDING_HIGH_CONTENTION, group, message)
}

pub(super) fn over_sync(ev: &Evidence, group: Vec<LockId>) -> Finding {
    let first = ev.lock(group[0]);
    let rate: f64 = group.iter().filter_map(|&id| ev.per_sec(ev.lock(id))).sum();
    let py = Py::at(ev.first_site(first));
    let message = if group.len() == 1 {
        format!(
            "{} {} (taken at {}) was acquired {:.0} times a second by {} threads and almost never contended: {}",
            first.kind,
            first.id,
            ev.at(first),
            rate,
            first.threads,
            py.as_ref().map_or_else(
                || "batch the work under one acquisition, or use per-thread data or atomics.".to_string(),
                Py::over_sync
            )
        )
    } else {
        format!(
            "{} {} of one family, {}, taken at {}, were acquired {:.0} times a second in all by {} threads and almost never contended: {}",
            group.len(),
            kind_plural(first.kind),
            lock_list(&group, NAMED_IN_MESSAGE),
            ev.at(first),
            rate,
            ev.threads(&group),
            py.as_ref().map_or_else(
                || "batch the work under fewer acquisitions, or use per-thread data or atomics.".to_string(),
                Py::over_sync
            )
        )
    };
    ev.finding(FINDING_OVER_SYNC, group, message)
}
