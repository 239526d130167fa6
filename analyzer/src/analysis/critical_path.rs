//! The critical path of a run through its waits, and what shortening the
//! waits on one lock (or at one line) would have gained.
//!
//! The walk goes backwards from the end of the thread that finished last:
//! where that thread waited, it continues in the thread that ended the wait
//! (the releaser of a lock, the last thread to reach a barrier, the thread a
//! join waited for), from the moment it did; where a thread began, in the
//! thread that made it. What the path spent in each lock's waits (the
//! wake-up after the release) and critical sections (from a recorded
//! acquisition to the release the path left by) is its share.
//!
//! The prediction re-plays the run: every thread keeps the length of its
//! own work between its waits, and each wait ends when both the waiter had
//! arrived and its ender had got to the moment that ended it (plus the
//! wake-up the run saw). Shortened waits end sooner by their share of that
//! new wait. A wait whose ender the trace does not give is the range: at
//! best it moves with its waiter (its length was its own), at worst it ends
//! when it ended (what ended it would not have come sooner).
//!
//! Only waits the trace recorded are followed: by default, contended lock
//! waits, barrier rounds, joins and blocking calls longer than the
//! recording's minimum; see [`CriticalPath::limits`].

use std::collections::BTreeMap;

/// A thread's life: made by `parent` (0: unknown) at `start`, ended at `end`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Life {
    pub tid: u32,
    pub parent: u32,
    pub start: u64,
    pub end: u64,
}

/// What a wait was for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum On {
    /// A lock (raw id): its holder is inside a critical section.
    Object(u32),
    /// A barrier (raw id): no thread holds it.
    Barrier(u32),
    /// A join of another thread.
    Join,
    /// A condition variable (raw id): ended by a notify (its notifier is
    /// the ender, when recorded).
    Cond(u32),
}

/// One recorded wait of a thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wait {
    pub tid: u32,
    pub start: u64,
    pub end: u64,
    pub on: On,
    /// The raw site of the waiting line (0: unknown).
    pub site: u32,
    /// The thread that ended it and when, if the trace says.
    pub ender: Option<(u32, u64)>,
}

/// Which waits a re-play shortens, and to what share of their length.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shorten<'a> {
    /// The waits on these (none: on anything).
    pub on: &'a [On],
    /// At these lines (raw sites) only (none: at any).
    pub sites: Option<&'a [u32]>,
    /// What is left of each: 0 (no wait), 0.5 (halved), 1 (as it was).
    pub kept: f64,
}

impl Shorten<'_> {
    fn applies(&self, w: &Wait) -> bool {
        (self.on.is_empty() || self.on.contains(&w.on))
            && self.sites.is_none_or(|s| s.contains(&w.site))
    }
}

/// How much sooner the run would have ended: nanoseconds, at least and at
/// most (equal when every shortened wait's ender is known).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Gain {
    pub low_ns: u64,
    pub high_ns: u64,
}

/// Where a stretch of the path was spent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Spent {
    /// A thread running (or blocked in something it does not wait on
    /// another thread for) outside any known critical section.
    Running,
    /// Inside a critical section of this raw lock.
    Holding(u32),
    /// In a wait on this.
    Waiting(On),
}

/// One stretch of the path, latest first in [`CriticalPath::steps`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    pub tid: u32,
    pub start: u64,
    pub end: u64,
    pub spent: Spent,
    /// Waits: the raw site that waited (0: unknown or not a wait), and the
    /// thread the path went on in (0: none, it went on in the waiter).
    pub site: u32,
    pub ender: u32,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct CriticalPath {
    /// From the start of the first thread on it to the end of the run.
    pub length_ns: u64,
    pub steps: Vec<Step>,
    /// Waits on it whose ender is unknown: the path went on in the waiter.
    pub unknown_enders: u64,
}

impl CriticalPath {
    /// Nanoseconds of the path per place, summed over its steps.
    pub fn shares(&self) -> BTreeMap<Spent, u64> {
        let mut out = BTreeMap::new();
        for s in &self.steps {
            *out.entry(s.spent).or_insert(0) += s.end - s.start;
        }
        out
    }
}

/// The run: its threads and the waits of each that another thread ended.
pub struct Run {
    lives: BTreeMap<u32, Life>,
    /// Per thread, its waits in order of their end.
    waits: BTreeMap<u32, Vec<Wait>>,
}

impl Run {
    pub fn new(lives: &[Life], waits: &[Wait]) -> Self {
        let lives: BTreeMap<u32, Life> = lives.iter().map(|l| (l.tid, *l)).collect();
        let mut by: BTreeMap<u32, Vec<Wait>> = BTreeMap::new();
        for w in waits {
            // A wait its own thread ended (the last to reach a barrier) is
            // its own work.
            // An acquisition that did not wait (recorded with every
            // operation) still came after the release before it.
            let own = w.ender.is_some_and(|(by, _)| by == w.tid);
            let known = w.end > w.start || w.ender.is_some();
            if known && lives.contains_key(&w.tid) && !own {
                by.entry(w.tid).or_default().push(*w);
            }
        }
        for list in by.values_mut() {
            list.sort_by_key(|w| (w.end, w.start));
        }
        Self { lives, waits: by }
    }

    /// When the run ended: the last thread's end.
    pub fn end(&self) -> u64 {
        self.lives.values().map(|l| l.end).max().unwrap_or(0)
    }

    fn last_thread(&self) -> Option<Life> {
        self.lives.values().max_by_key(|l| (l.end, l.tid)).copied()
    }

    /// The path, walked back from the end of the thread that ended last.
    pub fn path(&self) -> CriticalPath {
        let mut out = CriticalPath::default();
        let Some(last) = self.last_thread() else {
            return out;
        };
        let (mut tid, mut t) = (last.tid, last.end);
        let mut first = t;
        // The lock whose release the path came into this thread by.
        let mut entered_by: Option<On> = None;
        // Going on in the same thread: only its waits before this index
        // (a wait that took no time ends where the walk goes on).
        let mut before = usize::MAX;
        // Each step goes back in time, so the walk ends; the bound is a guard
        // against a trace whose clocks disagree.
        let mut budget = self.waits.values().map(Vec::len).sum::<usize>() * 2 + 64;
        while budget > 0 {
            budget -= 1;
            let Some(life) = self.lives.get(&tid) else {
                break;
            };
            let list = self.waits.get(&tid).map(Vec::as_slice).unwrap_or(&[]);
            // The latest wait that ended by `t`.
            let at = list.partition_point(|w| w.end <= t).min(before);
            before = usize::MAX;
            let Some(w) = at
                .checked_sub(1)
                .map(|i| list[i])
                .filter(|w| w.end > life.start)
            else {
                // Back to its start: on in the thread that made it.
                push(&mut out, tid, life.start, t, Spent::Running);
                first = life.start.min(t);
                match self.lives.get(&life.parent) {
                    Some(p) if life.parent != tid && p.start <= life.start => {
                        (tid, t) = (life.parent, life.start);
                        entered_by = None;
                        continue;
                    }
                    _ => break,
                }
            };
            // Inside a critical section from this wait's end when it was for
            // the lock the path next waited on, else running.
            let spent = match w.on {
                On::Object(o) if entered_by == Some(w.on) => Spent::Holding(o),
                _ => Spent::Running,
            };
            push(&mut out, tid, w.end, t, spent);
            match w.ender {
                // Released before the waiter came: it did not wait for it.
                Some((_, at_ns)) if at_ns <= w.start => {
                    t = w.start;
                    entered_by = None;
                    before = at - 1;
                }
                Some((by, at_ns)) if by != tid && self.lives.contains_key(&by) => {
                    let from = at_ns.clamp(w.start, w.end);
                    push_wait(&mut out, &w, from, by);
                    first = from;
                    (tid, t) = (by, from);
                    entered_by = Some(w.on);
                }
                _ => {
                    out.unknown_enders += 1;
                    push_wait(&mut out, &w, w.start, 0);
                    first = w.start;
                    t = w.start;
                    entered_by = None;
                    before = at - 1;
                }
            }
        }
        out.length_ns = last.end.saturating_sub(first);
        out
    }

    /// The run's end re-played with `shorten`: `free` says how a wait
    /// with no known ender moves (with its waiter, or not at all).
    fn replay(&self, shorten: &Shorten, free: bool) -> u64 {
        // Shift per thread: (original time from which it holds, shift in ns,
        // negative = sooner), in order.
        let mut shifts: BTreeMap<u32, Vec<(u64, i64)>> = BTreeMap::new();
        // Threads' starts and waits' ends, in time order, so that every
        // shift a step reads was set before it.
        let mut steps: Vec<(u64, u8, u32, usize)> = Vec::new();
        for l in self.lives.values() {
            steps.push((l.start, 0, l.tid, 0));
        }
        for (tid, list) in &self.waits {
            for (i, w) in list.iter().enumerate() {
                steps.push((w.end, 1, *tid, i));
            }
        }
        steps.sort_unstable();
        let shift_at = |shifts: &BTreeMap<u32, Vec<(u64, i64)>>, tid: u32, t: u64| -> i64 {
            // Each thread's shifts are pushed in time order.
            let s = shifts.get(&tid).map(Vec::as_slice).unwrap_or(&[]);
            let at = s.partition_point(|(from, _)| *from <= t);
            at.checked_sub(1).map_or(0, |i| s[i].1)
        };
        for (_, kind, tid, i) in steps {
            if kind == 0 {
                let life = self.lives[&tid];
                let d = if life.parent != tid && self.lives.contains_key(&life.parent) {
                    shift_at(&shifts, life.parent, life.start)
                } else {
                    0
                };
                shifts.entry(tid).or_default().push((life.start, d));
                continue;
            }
            let w = self.waits[&tid][i];
            let new_start = w.start as i64 + shift_at(&shifts, tid, w.start);
            // When it would have ended, shortened or not.
            let ended = match w.ender {
                Some((by, at)) if by != tid && self.lives.contains_key(&by) => {
                    let at = at.min(w.end);
                    let wake = (w.end - at.max(w.start)) as i64;
                    new_start.max(at as i64 + shift_at(&shifts, by, at)) + wake
                }
                _ if free => new_start + (w.end - w.start) as i64,
                _ => new_start.max(w.end as i64),
            };
            let kept = if shorten.applies(&w) {
                shorten.kept
            } else {
                1.0
            };
            let new_end = new_start + ((ended - new_start).max(0) as f64 * kept).round() as i64;
            shifts
                .entry(tid)
                .or_default()
                .push((w.end, new_end - w.end as i64));
        }
        self.lives
            .values()
            .map(|l| (l.end as i64 + shift_at(&shifts, l.tid, l.end)).max(0) as u64)
            .max()
            .unwrap_or(0)
    }

    /// Whether any recorded wait was made at one of these raw sites.
    pub fn waits_at(&self, sites: &[u32]) -> bool {
        self.waits
            .values()
            .flatten()
            .any(|w| sites.contains(&w.site))
    }

    /// The run's end re-played as it was (what [`Run::gain`] compares
    /// with, so that the re-play's own rounding is no gain): with waits of
    /// unknown enders fixed, and free.
    pub fn as_it_was(&self) -> (u64, u64) {
        let same = Shorten {
            on: &[],
            sites: None,
            kept: 1.0,
        };
        (self.replay(&same, false), self.replay(&same, true))
    }

    /// How much sooner the run would have ended with `shorten`.
    pub fn gain(&self, shorten: &Shorten) -> Gain {
        self.gain_from(self.as_it_was(), shorten)
    }

    /// The same, given [`Run::as_it_was`].
    pub fn gain_from(&self, (fixed, free): (u64, u64), shorten: &Shorten) -> Gain {
        let gain = |free_enders, was: u64| was.saturating_sub(self.replay(shorten, free_enders));
        let (a, b) = (gain(false, fixed), gain(true, free));
        Gain {
            low_ns: a.min(b),
            high_ns: a.max(b),
        }
    }
}

fn push(out: &mut CriticalPath, tid: u32, start: u64, end: u64, spent: Spent) {
    if end > start {
        out.steps.push(Step {
            tid,
            start,
            end,
            spent,
            site: 0,
            ender: 0,
        });
    }
}

fn push_wait(out: &mut CriticalPath, w: &Wait, from: u64, ender: u32) {
    if w.end > from {
        out.steps.push(Step {
            tid: w.tid,
            start: from,
            end: w.end,
            spent: Spent::Waiting(w.on),
            site: w.site,
            ender,
        });
    }
}

#[cfg(test)]
#[path = "critical_path_tests.rs"]
mod tests;
