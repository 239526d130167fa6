//! The report's critical path (see `critical_path.rs`): the run's threads
//! and recorded waits read from the trace, the path's shares per lock and
//! per blocking class, and each lock's (and finding's) predicted gain.

use crate::analysis::critical_path::{Gain, Life, On, Run, Shorten, Spent, Wait};
use crate::analysis::periods::{Blocker, Handoff, Round};
use crate::analysis::stops::Stop;
use crate::model::*;
use locksuit_format::reader::ThreadInfo;
use locksuit_format::{BlockingCall, THREAD_ENDED};
use std::collections::BTreeMap;

/// Predicted gains are worked out for this many locks (most waited for
/// first) and findings (first ranked) at most.
pub const GAINS_FOR: usize = 32;

/// What the path is read from.
pub struct Inputs<'a> {
    pub threads: &'a [ThreadInfo],
    pub stops: &'a [Stop],
    pub classes: &'a [String],
    pub rounds: &'a [Round],
    /// Joins that returned: (joining thread, start, end) to the
    /// `pthread_t` joined.
    pub joins: &'a rustc_hash::FxHashMap<(u32, u64, u64), u64>,
    /// Acquisitions that did not wait (`LOCKSUIT_EVENTS=all` only).
    pub handoffs: &'a [Handoff],
    /// Where a thread that has not ended is taken to end.
    pub end_ns: u64,
    pub lock_of: &'a dyn Fn(u32) -> Option<LockId>,
    /// A raw site's line ("f@a.c:3").
    pub line_of: &'a dyn Fn(u32) -> String,
    /// The timeline's origin (the process's start): segments' times are
    /// since it.
    pub origin_ns: u64,
    /// `LOCKSUIT_EVENTS=all` was in force (every lock operation recorded).
    pub all_events: bool,
    /// Blocking calls were recorded (`LOCKSUIT_BLOCK_MIN_US` not "off"),
    /// and from how long.
    pub calls_from_us: Option<u32>,
    /// Recorded by `locksuit attach`: futex waits and wakes only.
    pub attached: bool,
}

/// The run, for predicting gains after the report is built.
pub struct Built {
    pub path: CriticalPath,
    run: Run,
    run_ns: u64,
    /// The run re-played as it was ([`Run::as_it_was`]).
    was: (u64, u64),
    /// What each lock (or barrier) with recorded waits was waited on as.
    raws: BTreeMap<LockId, Vec<On>>,
}

fn is_dependency(b: Blocker) -> bool {
    matches!(
        b,
        Blocker::Lock
            | Blocker::Cond
            | Blocker::Call(BlockingCall::Join)
            | Blocker::Call(BlockingCall::BarrierWait)
    )
}

/// The thread a join that blocked from `start` to `end` waited for, and
/// when it ended: the one the join named (its `pthread_t`: of the threads
/// that had it, the last to start before the join ended), else the last
/// to end within the join.
fn joined(
    (lives, threads): (&[Life], &[ThreadInfo]),
    pthread: Option<u64>,
    tid: u32,
    (start, end): (u64, u64),
) -> Option<(u32, u64)> {
    let named = pthread.and_then(|pthread| {
        threads
            .iter()
            .map(|t| &t.record)
            .filter(|r| r.pthread == pthread && r.tid != tid && r.start_ns <= end)
            .max_by_key(|r| r.start_ns)
            .map(|r| r.tid)
    });
    if let Some(target) = named {
        return lives
            .iter()
            .find(|l| l.tid == target)
            .map(|l| (l.tid, l.end.min(end)));
    }
    lives
        .iter()
        .filter(|l| l.tid != tid && l.end >= start && l.end <= end)
        .max_by_key(|l| l.end)
        .map(|l| (l.tid, l.end))
}

pub fn build(inputs: &Inputs) -> Built {
    let lives: Vec<Life> = inputs
        .threads
        .iter()
        .filter(|t| t.record.tid != 0 && t.record.start_ns != 0)
        .map(|t| {
            let r = &t.record;
            let ended = r.flags & THREAD_ENDED != 0 && r.end_ns >= r.start_ns;
            Life {
                tid: r.tid,
                parent: r.parent_tid,
                start: r.start_ns,
                end: if ended {
                    r.end_ns
                } else {
                    inputs.end_ns.max(r.start_ns)
                },
            }
        })
        .collect();
    let mut waits: Vec<Wait> = Vec::new();
    for s in inputs.stops {
        let p = &s.period;
        let (on, ender) = match p.blocker {
            Blocker::Lock | Blocker::Cond => {
                // The releaser, or the notifier, when the trace says.
                let by = (p.released_by.0 != 0 && p.released_at != 0)
                    .then_some((p.released_by.0, p.released_at));
                let on = if p.blocker == Blocker::Lock {
                    On::Object(p.object)
                } else {
                    On::Cond(p.object)
                };
                (on, by)
            }
            Blocker::Call(BlockingCall::Join) => {
                let pthread = inputs.joins.get(&(p.tid, p.start, p.end)).copied();
                let ender = joined((&lives, inputs.threads), pthread, p.tid, (p.start, p.end));
                (On::Join, ender)
            }
            // Barrier rounds come from their own events (below).
            _ => continue,
        };
        waits.push(Wait {
            tid: p.tid,
            start: p.start,
            end: p.end,
            on,
            site: p.site,
            ender,
        });
    }
    waits.extend(inputs.rounds.iter().map(|r| Wait {
        tid: r.tid,
        start: r.start,
        end: r.end,
        on: On::Barrier(r.barrier),
        site: r.site,
        ender: r.last,
    }));
    // An acquisition that did not wait keeps its lock's order in the
    // re-play: shortened waits elsewhere cannot let two threads hold it at
    // once.
    let zero_length = inputs.handoffs.iter().map(|h| Wait {
        tid: h.tid,
        start: h.at,
        end: h.at,
        on: On::Object(h.lock),
        site: h.site,
        ender: Some(h.after),
    });
    let run = Run::new(
        &lives,
        &waits.iter().copied().chain(zero_length).collect::<Vec<_>>(),
    );
    let start = lives.iter().map(|l| l.start).min().unwrap_or(0);
    let run_ns = run.end().saturating_sub(start);
    let walked = run.path();

    // Per lock: its raw ids and all its waits.
    let mut raws: BTreeMap<LockId, Vec<On>> = BTreeMap::new();
    let mut total: BTreeMap<LockId, u64> = BTreeMap::new();
    for w in &waits {
        if let On::Object(raw) | On::Barrier(raw) = w.on {
            if let Some(lock) = (inputs.lock_of)(raw) {
                let ids = raws.entry(lock).or_default();
                if !ids.contains(&w.on) {
                    ids.push(w.on);
                }
                *total.entry(lock).or_default() += w.end - w.start;
            }
        }
    }
    // The path's time per place; blocking calls inside its running
    // stretches by class.
    let mut on_path: BTreeMap<LockId, (u64, u64)> = BTreeMap::new();
    let mut path = CriticalPath {
        run_ns,
        length_ns: walked.length_ns,
        unknown_enders: walked.unknown_enders,
        ..Default::default()
    };
    let mut calls: BTreeMap<u32, Vec<(u64, u64, u16)>> = BTreeMap::new();
    for s in inputs
        .stops
        .iter()
        .filter(|s| !is_dependency(s.period.blocker))
    {
        let p = &s.period;
        calls
            .entry(p.tid)
            .or_default()
            .push((p.start, p.end, s.class));
    }
    let mut by_class: BTreeMap<u16, u64> = BTreeMap::new();
    for step in &walked.steps {
        let ns = step.end - step.start;
        match step.spent {
            Spent::Running | Spent::Holding(_) => {
                for &(a, b, class) in calls.get(&step.tid).map(Vec::as_slice).unwrap_or(&[]) {
                    let overlap = b.min(step.end).saturating_sub(a.max(step.start));
                    if overlap > 0 {
                        *by_class.entry(class).or_default() += overlap;
                    }
                }
                match step.spent {
                    Spent::Holding(raw) => match (inputs.lock_of)(raw) {
                        Some(lock) => on_path.entry(lock).or_default().1 += ns,
                        None => path.running_ns += ns,
                    },
                    _ => path.running_ns += ns,
                }
            }
            Spent::Waiting(On::Join) => path.join_ns += ns,
            Spent::Waiting(On::Cond(_)) => path.cond_ns += ns,
            Spent::Waiting(On::Object(raw) | On::Barrier(raw)) => match (inputs.lock_of)(raw) {
                Some(lock) => on_path.entry(lock).or_default().0 += ns,
                None => path.running_ns += ns,
            },
        }
    }
    let mut classes: Vec<PathClass> = by_class
        .into_iter()
        .map(|(class, ns)| PathClass {
            class: inputs
                .classes
                .get(class as usize)
                .cloned()
                .unwrap_or_else(|| "other".to_string()),
            ns,
        })
        .collect();
    classes.sort_by(|a, b| b.ns.cmp(&a.ns).then_with(|| a.class.cmp(&b.class)));
    path.classes = classes;
    path.segments = segments(&walked.steps, inputs);
    let built = Built {
        path,
        was: run.as_it_was(),
        run,
        run_ns,
        raws,
    };
    // Each re-play goes over every wait: the most waited-for locks only.
    let mut most: Vec<(u64, LockId)> = total.iter().map(|(&l, &ns)| (ns, l)).collect();
    most.sort_by(|a, b| b.cmp(a));
    most.truncate(GAINS_FOR);
    let mut locks: Vec<PathLock> = total
        .iter()
        .map(|(&lock, &total_wait_ns)| {
            let (wait_ns, hold_ns) = on_path.get(&lock).copied().unwrap_or((0, 0));
            PathLock {
                lock,
                wait_ns,
                hold_ns,
                total_wait_ns,
                gain: most
                    .iter()
                    .any(|(_, l)| *l == lock)
                    .then(|| built.gains(&[lock]))
                    .flatten(),
            }
        })
        .collect();
    locks.sort_by(|a, b| {
        let rank = |l: &PathLock| l.gain.map(|g| g.rank());
        (b.wait_ns + b.hold_ns, rank(b), b.total_wait_ns)
            .cmp(&(a.wait_ns + a.hold_ns, rank(a), a.total_wait_ns))
            .then(a.lock.cmp(&b.lock))
    });
    let mut off_path: Vec<&PathLock> = locks
        .iter()
        .filter(|l| l.wait_ns == 0 && l.hold_ns == 0)
        .collect();
    off_path.sort_by_key(|l| std::cmp::Reverse(l.total_wait_ns));
    let off_path = off_path.iter().map(|l| l.lock).collect();
    let mut limits = Vec::new();
    if inputs.attached {
        limits.push("attached from outside, only futex waits and wakes were recorded (no uncontended acquisition, join or other blocking call): a critical section is on the path only from a wait, and the path runs through joins and blocking calls as the waiting thread's own time".to_string());
    } else if !inputs.all_events {
        limits.push("only contended lock operations were recorded: a critical section is on the path only from a contended acquisition, and a prediction may let two threads hold a lock at once that never waited for each other in this run (LOCKSUIT_EVENTS=all records every operation)".to_string());
    }
    match inputs.calls_from_us {
        _ if inputs.attached => {}
        Some(us) => limits.push(format!(
            "joins and blocking calls shorter than {us} µs were not recorded: the path runs through them as the waiting thread's own time"
        )),
        None => limits.push("joins and blocking calls were not recorded (LOCKSUIT_BLOCK_MIN_US=off): the path cannot follow a join to the joined thread".to_string()),
    }
    if built.path.unknown_enders > 0 {
        limits.push(format!(
            "{} waits on the path end where the trace does not say who ended them (a lock wait whose release was not recorded, a condition wait no recorded notify ended: timed out, or a signal among several waiters): the path goes on in the waiter, and predicted gains through them are ranges",
            built.path.unknown_enders
        ));
    }
    Built {
        path: CriticalPath {
            locks,
            off_path,
            limits,
            ..built.path
        },
        ..built
    }
}

/// The path's steps, earliest first, as the timeline shows them.
fn segments(steps: &[crate::analysis::critical_path::Step], inputs: &Inputs) -> Vec<PathSegment> {
    // Where the releaser of a lock wait on the path had taken the lock.
    let wanted: std::collections::HashSet<(u32, u64)> = steps
        .iter()
        .filter(|s| matches!(s.spent, Spent::Waiting(On::Object(_))) && s.ender != 0)
        .map(|s| (s.tid, s.end))
        .collect();
    let taken_at: BTreeMap<(u32, u64), u32> = inputs
        .stops
        .iter()
        .map(|s| &s.period)
        .filter(|p| p.blocker == Blocker::Lock && p.released_by.1 != 0)
        .filter(|p| wanted.contains(&(p.tid, p.end)))
        .map(|p| ((p.tid, p.end), p.released_by.1))
        .collect();
    let since = |ns: u64| ns.saturating_sub(inputs.origin_ns);
    let line = |site: u32| (site != 0).then(|| (inputs.line_of)(site));
    steps
        .iter()
        .rev()
        .map(|s| {
            let (kind, lock) = match s.spent {
                Spent::Running => (SegmentKind::Running, None),
                Spent::Holding(raw) => (SegmentKind::Holding, (inputs.lock_of)(raw)),
                Spent::Waiting(On::Object(raw) | On::Barrier(raw)) => {
                    (SegmentKind::Waiting, (inputs.lock_of)(raw))
                }
                Spent::Waiting(On::Join) => (SegmentKind::Join, None),
                Spent::Waiting(On::Cond(_)) => (SegmentKind::Cond, None),
            };
            PathSegment {
                tid: s.tid,
                start_ns: since(s.start),
                end_ns: since(s.end),
                kind,
                lock,
                line: line(s.site),
                ended_by: s.ender,
                ender_line: taken_at.get(&(s.tid, s.end)).and_then(|&site| line(site)),
            }
        })
        .collect()
}

impl Built {
    fn predicted(&self, g: Gain) -> PredictedGain {
        let pct = |ns: u64| {
            if self.run_ns == 0 {
                0.0
            } else {
                (ns as f64 * 1000.0 / self.run_ns as f64).round() / 10.0
            }
        };
        PredictedGain {
            low_ns: g.low_ns,
            high_ns: g.high_ns,
            low_pct: pct(g.low_ns),
            high_pct: pct(g.high_ns),
        }
    }

    /// The gains of removing and halving every recorded wait on `locks`;
    /// none when none of them has one.
    pub fn gains(&self, locks: &[LockId]) -> Option<Gains> {
        let on: Vec<On> = locks
            .iter()
            .filter_map(|l| self.raws.get(l))
            .flatten()
            .copied()
            .collect();
        if on.is_empty() {
            return None;
        }
        Some(self.gains_of(&on, None))
    }

    /// The gains of removing and halving every recorded wait (on a lock,
    /// a condition, a join or a barrier) made at one of a line's raw
    /// sites; none when it made none.
    pub fn line_gains(&self, raw_sites: &[u32]) -> Option<Gains> {
        self.run
            .waits_at(raw_sites)
            .then(|| self.gains_of(&[], Some(raw_sites)))
    }

    fn gains_of(&self, on: &[On], sites: Option<&[u32]>) -> Gains {
        let gain =
            |kept| self.predicted(self.run.gain_from(self.was, &Shorten { on, sites, kept }));
        Gains {
            if_removed: gain(0.0),
            if_halved: gain(0.5),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use locksuit_format::ThreadRecord;

    fn thread(tid: u32, pthread: u64, start_ns: u64) -> ThreadInfo {
        ThreadInfo {
            record: ThreadRecord {
                tid,
                pthread,
                start_ns,
                ..ThreadRecord::default()
            },
            name: None,
        }
    }

    fn life(tid: u32, end: u64) -> Life {
        Life {
            tid,
            parent: 1,
            start: 0,
            end,
        }
    }

    /// A join that names its thread waits for that one, even when another
    /// thread ended later within the join (the guess would take that one).
    #[test]
    fn a_join_waits_for_the_thread_it_named() {
        let lives = [life(1, 100), life(2, 50), life(3, 60)];
        // Thread 4 had thread 2's pthread_t after it: it started after the
        // join ended, so it is not the one joined.
        let threads = [
            thread(1, 0x10, 0),
            thread(2, 0xa0, 0),
            thread(3, 0xb0, 0),
            thread(4, 0xa0, 70),
        ];
        let join = |pthread| joined((&lives, &threads), pthread, 1, (10, 61));
        assert_eq!(join(Some(0xa0)), Some((2, 50)));
        assert_eq!(join(None), Some((3, 60)), "unnamed: the last to end");
    }
}
