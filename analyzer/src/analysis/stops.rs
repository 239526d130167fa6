//! Why threads stopped: every blocking period (see `periods.rs`) gets a
//! blocking class from its call stack (see `classes.rs`); per thread, the
//! time and count per class and the time it was not blocked; per distinct
//! blocking call stack, how often and how long threads blocked there; and
//! the `blocking-under-lock` finding: a thread slept, polled or did I/O
//! while holding a lock another thread was waiting for.

use crate::analysis::classes::{Signatures, BUILT_IN};
use crate::analysis::deadlocks::Ids;
use crate::analysis::periods::{Blocker, Period};
use crate::base::words::duration;
use crate::model::*;
use locksuit_format::reader::ThreadInfo;
use locksuit_format::{THREAD_ENDED, THREAD_MAIN};
use rustc_hash::FxHashMap;

pub const FINDING_BLOCKING_UNDER_LOCK: &str = "blocking-under-lock";

/// What the periods are read with.
pub struct Inputs<'a> {
    pub ids: &'a Ids<'a>,
    pub threads: &'a [ThreadInfo],
    /// When the shim started in the process: the main thread's start (its
    /// record is made at its first recorded call).
    pub start_ns: u64,
    /// Where the lifetime of a thread that has not ended is measured to
    /// (0: unknown, then the end of its last blocking period).
    pub end_ns: u64,
    pub lock_kind: &'a dyn Fn(u32) -> Option<LockKind>,
    /// The call chain of a raw site (its own, not its line's first),
    /// innermost first; empty if unknown.
    pub chain: &'a dyn Fn(u32) -> Vec<Frame>,
    pub signatures: &'a Signatures,
}

/// A period, classified: what the timeline and the tables show.
#[derive(Clone, Copy, Debug)]
pub struct Stop {
    pub period: Period,
    /// Index into [`Stops::classes`].
    pub class: u16,
    /// Index into [`Stops::stacks`].
    pub stack: u32,
}

#[derive(Default)]
pub struct Stops {
    /// Class names, built-in ones first in their fixed order.
    pub classes: Vec<String>,
    pub by_thread: FxHashMap<u32, (u64, Vec<ClassTime>)>,
    pub stacks: Vec<BlockingStack>,
    pub stops: Vec<Stop>,
    pub findings: Vec<Finding>,
    pub timeline: Timeline,
}

/// The blocking function a period was in.
fn api(p: &Period, inputs: &Inputs) -> &'static str {
    match p.blocker {
        Blocker::Call(call) => call.name(),
        Blocker::Cond => "pthread_cond_wait",
        Blocker::Switch {
            preempted: true, ..
        } => "preempted",
        Blocker::Switch { fault: true, .. } => "page fault",
        Blocker::Switch { .. } => "switched out",
        Blocker::Lock => match (inputs.lock_kind)(p.object) {
            Some(LockKind::Rwlock) => "pthread_rwlock_lock",
            Some(LockKind::Spin) => "pthread_spin_lock",
            Some(LockKind::Sem) => "sem_wait",
            Some(LockKind::Barrier) => "pthread_barrier_wait",
            Some(LockKind::Futex) => "futex",
            _ => "pthread_mutex_lock",
        },
    }
}

pub fn build(periods: Vec<Period>, inputs: &Inputs) -> Stops {
    let periods = without_hooked_switches(periods);
    let last_end = periods.iter().map(|p| p.end).max().unwrap_or(0);
    let mut out = Stops {
        classes: BUILT_IN.iter().map(|c| c.to_string()).collect(),
        ..Stops::default()
    };
    // One classification and one stack row per (call, descriptor kind, site).
    let mut stack_of: FxHashMap<(&'static str, u8, u32), (u32, u16)> = FxHashMap::default();
    // Rows are distinct call stacks: the line and every frame above it.
    let mut stack_by_row: FxHashMap<(&'static str, u16, String, String), u32> =
        FxHashMap::default();
    let mut per_thread: FxHashMap<(u32, u16), (u64, u64)> = FxHashMap::default();
    for p in periods {
        let api = api(&p, inputs);
        let (stack, class) = *stack_of.entry((api, p.fd_kind, p.site)).or_insert_with(|| {
            let chain = (inputs.chain)(p.site);
            let functions: Vec<Option<&str>> =
                chain.iter().map(|f| f.function.as_deref()).collect();
            let class = inputs
                .signatures
                .classify(api, u32::from(p.fd_kind), &functions);
            let class = match out.classes.iter().position(|c| c == class) {
                Some(i) => i as u16,
                None => {
                    out.classes.push(class.to_string());
                    (out.classes.len() - 1) as u16
                }
            };
            let line = match p.blocker {
                Blocker::Switch { .. } if p.site == 0 => {
                    "a context switch (the kernel gives no user stack)".to_string()
                }
                _ => (inputs.ids.line)(p.site),
            };
            let frames: String = chain
                .iter()
                .map(|f| format!("{:?}@{:?}:{:?};", f.function, f.path, f.line))
                .collect();
            let row = *stack_by_row
                .entry((api, class, line.clone(), frames))
                .or_insert_with(|| {
                    out.stacks.push(BlockingStack {
                        api: api.to_string(),
                        class: out.classes[class as usize].clone(),
                        line,
                        count: 0,
                        total_ns: 0,
                        max_ns: 0,
                        threads: Vec::new(),
                        stack: chain,
                    });
                    (out.stacks.len() - 1) as u32
                });
            (row, class)
        });
        let row = &mut out.stacks[stack as usize];
        let ns = p.end - p.start;
        row.count += 1;
        row.total_ns = row.total_ns.saturating_add(ns);
        row.max_ns = row.max_ns.max(ns);
        if !row.threads.contains(&p.tid) {
            row.threads.push(p.tid);
        }
        let t = per_thread.entry((p.tid, class)).or_default();
        t.0 += 1;
        t.1 = t.1.saturating_add(ns);
        out.stops.push(Stop {
            period: p,
            class,
            stack,
        });
    }
    for t in inputs.threads.iter().filter(|t| t.record.tid != 0) {
        let tid = t.record.tid;
        let mut classes: Vec<ClassTime> = out
            .classes
            .iter()
            .enumerate()
            .filter_map(|(i, class)| {
                let &(count, total_ns) = per_thread.get(&(tid, i as u16))?;
                Some(ClassTime {
                    class: class.clone(),
                    count,
                    total_ns,
                })
            })
            .collect();
        classes.sort_by_key(|c| std::cmp::Reverse(c.total_ns));
        let end = if t.record.flags & THREAD_ENDED != 0 {
            t.record.end_ns
        } else if inputs.end_ns != 0 {
            inputs.end_ns
        } else {
            last_end
        };
        let start = if t.record.flags & THREAD_MAIN != 0 {
            inputs.start_ns
        } else {
            t.record.start_ns
        };
        let lifetime = end.saturating_sub(start);
        let blocked = classes
            .iter()
            .fold(0u64, |sum, c| sum.saturating_add(c.total_ns));
        out.by_thread
            .insert(tid, (lifetime.saturating_sub(blocked), classes));
    }
    sort_stacks(&mut out);
    out.findings = blocking_under_lock(&out, inputs);
    out.timeline = timeline(&out, inputs, last_end);
    out
}

/// The periods on a time axis from the process's start, lane by lane.
fn timeline(out: &Stops, inputs: &Inputs, last_end: u64) -> Timeline {
    let since = |ns: u64| ns.saturating_sub(inputs.start_ns);
    let mut t = Timeline {
        classes: out.classes.clone(),
        ..Timeline::default()
    };
    for info in inputs.threads.iter().filter(|t| t.record.tid != 0) {
        let r = &info.record;
        let start = if r.flags & THREAD_MAIN != 0 {
            inputs.start_ns
        } else {
            r.start_ns
        };
        let end = if r.flags & THREAD_ENDED != 0 {
            r.end_ns
        } else if inputs.end_ns != 0 {
            inputs.end_ns
        } else {
            last_end
        };
        t.lanes.push(Lane {
            tid: r.tid,
            start_ns: since(start),
            end_ns: since(end),
        });
    }
    let lane_of: FxHashMap<u32, usize> = t
        .lanes
        .iter()
        .enumerate()
        .map(|(i, l)| (l.tid, i))
        .collect();
    let mut line_index: FxHashMap<u32, u32> = FxHashMap::default();
    for s in &out.stops {
        let p = &s.period;
        // The timeline's hand-offs are a lock's (a releaser and the line
        // where it took the lock).
        let released_by = if p.blocker == Blocker::Lock {
            p.released_by
        } else {
            (0, 0)
        };
        let released_at = (released_by.0 != 0).then(|| {
            *line_index.entry(released_by.1).or_insert_with(|| {
                t.lines.push((inputs.ids.line)(released_by.1));
                (t.lines.len() - 1) as u32
            })
        });
        t.periods.push(TimelinePeriod {
            tid: p.tid,
            start_ns: since(p.start),
            end_ns: since(p.end),
            class: s.class,
            stack: s.stack,
            lock: (p.blocker == Blocker::Lock)
                .then(|| (inputs.ids.lock)(p.object))
                .flatten(),
            released_by: released_by.0,
            released_at,
            held_by: if p.blocker == Blocker::Lock {
                p.other
            } else {
                0
            },
            timed_out: p.timed_out,
        });
    }
    t.periods.sort_by_key(|p| {
        (
            lane_of.get(&p.tid).copied().unwrap_or(usize::MAX),
            p.start_ns,
        )
    });
    t
}

/// Time spans sorted by start, with the running maximum of their ends:
/// which of them overlap a given span, without scanning them all.
struct Spans {
    /// (start, end, item), by start.
    spans: Vec<(u64, u64, usize)>,
    max_end: Vec<u64>,
}

impl Spans {
    fn new(mut spans: Vec<(u64, u64, usize)>) -> Spans {
        spans.sort_unstable();
        let mut highest = 0;
        let max_end = spans
            .iter()
            .map(|s| {
                highest = highest.max(s.1);
                highest
            })
            .collect();
        Spans { spans, max_end }
    }

    /// How many spans start before `end`.
    fn before(&self, end: u64) -> usize {
        self.spans.partition_point(|s| s.0 < end)
    }

    fn any_overlap(&self, start: u64, end: u64) -> bool {
        let i = self.before(end);
        i > 0 && self.max_end[i - 1] > start
    }

    /// The items of the spans that overlap `start..end`.
    fn overlapping(&self, start: u64, end: u64) -> impl Iterator<Item = usize> + '_ {
        (0..self.before(end))
            .rev()
            .take_while(move |&j| self.max_end[j] > start)
            .filter(move |&j| self.spans[j].1 > start)
            .map(move |j| self.spans[j].2)
    }
}

/// The kernel's context switches (`LOCKSUIT_SWITCHES=1`) that fall inside a
/// wait the hooks recorded are that wait, seen again: dropped.
fn without_hooked_switches(periods: Vec<Period>) -> Vec<Period> {
    let switch = |p: &Period| matches!(p.blocker, Blocker::Switch { .. });
    if !periods.iter().any(switch) {
        return periods;
    }
    let mut by_thread: FxHashMap<u32, Vec<(u64, u64, usize)>> = FxHashMap::default();
    for p in periods.iter().filter(|p| !switch(p)) {
        by_thread
            .entry(p.tid)
            .or_default()
            .push((p.start, p.end, 0));
    }
    let hooked: FxHashMap<u32, Spans> = by_thread
        .into_iter()
        .map(|(tid, spans)| (tid, Spans::new(spans)))
        .collect();
    periods
        .into_iter()
        .filter(|p| {
            !switch(p)
                || !hooked
                    .get(&p.tid)
                    .is_some_and(|spans| spans.any_overlap(p.start, p.end))
        })
        .collect()
}

/// Orders the stack rows by time blocked there, most first, and points
/// every stop at its row again.
fn sort_stacks(out: &mut Stops) {
    let mut order: Vec<u32> = (0..out.stacks.len() as u32).collect();
    order.sort_by(|&a, &b| {
        out.stacks[b as usize]
            .total_ns
            .cmp(&out.stacks[a as usize].total_ns)
    });
    let mut new_of_old = vec![0u32; order.len()];
    for (new, &old) in order.iter().enumerate() {
        new_of_old[old as usize] = new as u32;
    }
    let mut rows: Vec<Option<BlockingStack>> = std::mem::take(&mut out.stacks)
        .into_iter()
        .map(Some)
        .collect();
    out.stacks = order
        .iter()
        .filter_map(|&old| rows[old as usize].take())
        .collect();
    for stop in &mut out.stops {
        stop.stack = new_of_old[stop.stack as usize];
    }
}

/// What a thread did in a class, as a verb.
fn verb(class: &str) -> &'static str {
    match class {
        "sleep" => "slept",
        "io-file" | "io-net" => "did I/O",
        "poll" => "polled",
        _ => "blocked",
    }
}

/// Threads that slept, polled or did I/O while holding a lock another
/// thread was waiting for: one finding per (lock, blocking line, line that
/// took the lock), with the waiting lines and how long they waited then.
fn blocking_under_lock(out: &Stops, inputs: &Inputs) -> Vec<Finding> {
    // Lock waits by lock, for the overlap search.
    let mut by_lock: FxHashMap<u32, Vec<(u64, u64, usize)>> = FxHashMap::default();
    for (i, s) in out.stops.iter().enumerate() {
        if s.period.blocker == Blocker::Lock {
            let p = &s.period;
            by_lock
                .entry(p.object)
                .or_default()
                .push((p.start, p.end, i));
        }
    }
    let waits: FxHashMap<u32, Spans> = by_lock
        .into_iter()
        .map(|(lock, spans)| (lock, Spans::new(spans)))
        .collect();
    struct Group {
        holder_tid: u32,
        api: String,
        class: String,
        count: u64,
        blocked_ns: u64,
        waited_ns: u64,
        waiters: Vec<u32>,
        waiting_sites: Vec<u32>,
        /// The first period's raw (call, held) sites, which name the group.
        raw_sites: (u32, u32),
    }
    // Grouped by the report's lines, not the raw sites: one line reached
    // by two native paths (a CPython lock taken by `sem_trywait`, or by
    // `sem_wait` when that failed) is one finding.
    let ids = inputs.ids;
    let line = |raw: u32| (ids.site)(raw).map_or(u64::from(raw), |s| 1 << 32 | s.index() as u64);
    let mut groups: FxHashMap<(u32, u64, u64), Group> = FxHashMap::default();
    for s in &out.stops {
        let p = &s.period;
        let class = out.classes[s.class as usize].as_str();
        if !matches!(p.blocker, Blocker::Call(_)) || p.object == 0 || class == "sync" {
            continue;
        }
        let mut waited = 0u64;
        let mut found = Vec::new();
        let overlapping = waits
            .get(&p.object)
            .into_iter()
            .flat_map(|spans| spans.overlapping(p.start, p.end));
        for w in overlapping.map(|i| &out.stops[i].period) {
            let overlap = p.end.min(w.end).saturating_sub(p.start.max(w.start));
            if w.tid != p.tid && overlap > 0 {
                waited = waited.saturating_add(overlap);
                found.push((w.tid, w.site));
            }
        }
        if found.is_empty() {
            continue;
        }
        let g = groups
            .entry((p.object, line(p.site), line(p.other)))
            .or_insert_with(|| Group {
                raw_sites: (p.site, p.other),
                holder_tid: p.tid,
                api: out.stacks[s.stack as usize].api.clone(),
                class: class.to_string(),
                count: 0,
                blocked_ns: 0,
                waited_ns: 0,
                waiters: Vec::new(),
                waiting_sites: Vec::new(),
            });
        g.count += 1;
        g.blocked_ns = g.blocked_ns.saturating_add(p.end - p.start);
        g.waited_ns = g.waited_ns.saturating_add(waited);
        for (tid, site) in found {
            if !g.waiters.contains(&tid) {
                g.waiters.push(tid);
            }
            if !g.waiting_sites.contains(&site) {
                g.waiting_sites.push(site);
            }
        }
    }
    let mut findings: Vec<Finding> = groups
        .into_iter()
        .map(|((lock_raw, _, _), g)| {
            let (call_site, held_site) = g.raw_sites;
            let lock = (ids.lock)(lock_raw);
            let kind = (inputs.lock_kind)(lock_raw).unwrap_or(LockKind::Unknown);
            let lock_name = lock.map_or_else(|| "a lock".to_string(), |l| format!("{kind} {l}"));
            let times = if g.count == 1 {
                String::new()
            } else {
                format!(" ({} times)", g.count)
            };
            let waiting_lines: Vec<String> =
                g.waiting_sites.iter().map(|&s| (ids.line)(s)).collect();
            let others = match g.waiters.len() {
                1 => format!("thread {} waited", thread(g.waiters[0], ids)),
                n => format!("{n} threads waited"),
            };
            let message = format!(
                "{} {} {} in {}{times} at {} while holding {lock_name} (taken at {}); meanwhile {others} {} for it at {}: release the lock before the slow call, or move the call out of the critical section.",
                thread_word(g.holder_tid, ids),
                verb(&g.class),
                duration(g.blocked_ns),
                g.api,
                (ids.line)(call_site),
                (ids.line)(held_site),
                duration(g.waited_ns),
                waiting_lines.join(", "),
            );
            let mut sites: Vec<SiteId> = std::iter::once(held_site)
                .chain(std::iter::once(call_site))
                .chain(g.waiting_sites.iter().copied())
                .filter_map(|raw| (ids.site)(raw))
                .collect();
            sites.dedup();
            Finding {
                kind: FINDING_BLOCKING_UNDER_LOCK,
                lock,
                sites,
                message,
                engagements: g.count,
                wait_ns: g.waited_ns,
                locks: lock.into_iter().collect(),
                blocking_call: Some((ids.line)(call_site)),
                ..Finding::default()
            }
        })
        .collect();
    findings.sort_by(|a, b| b.wait_ns.cmp(&a.wait_ns).then(a.message.cmp(&b.message)));
    findings
}

fn thread(tid: u32, ids: &Ids) -> String {
    match (ids.thread_name)(tid) {
        Some(name) => format!("{tid} ({name})"),
        None => tid.to_string(),
    }
}

fn thread_word(tid: u32, ids: &Ids) -> String {
    format!("Thread {}", thread(tid, ids))
}
