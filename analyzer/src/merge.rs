//! One causally ordered stream per process (`locksuit events --merged`):
//! every thread's events merged into an order that could have happened,
//! whatever the threads' clocks say. The filter holds each event back until
//! everything it must follow has been delivered: a queue per thread
//! (program order), and the happened-before rules below, kept as data, for
//! what one thread's event implies for another's. Delivery goes in rounds,
//! under one of three policies (see [`Policy`]).
//!
//! An event whose predecessor never arrives (dropped, overwritten by the
//! flight recorder, left out by a policy) would hold its thread back for
//! ever: when no queue can move, the held-back event with the earliest
//! timestamp is released early, and marked so.

use locksuit_format::*;
use rustc_hash::FxHashMap;
use std::collections::{BTreeMap, VecDeque};

/// What an event makes possible for others: a token `(object, n)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Produces {
    Nothing,
    /// The object's sequence after it (`seq2`): a release, a notify.
    SequenceAfter,
}

/// What an event must follow, beyond its thread's earlier events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Requires {
    Nothing,
    /// The event that left the object's sequence at this one's `seq2` (an
    /// acquisition follows the release that let it in; none for 0).
    SequenceAt,
    /// A condition wait that saw notifies (`seq2 > seq`) follows the first
    /// notify after it began, `seq + 1`.
    NotifiedDuring,
}

/// A row of the happened-before table: an event kind, its name in the
/// output, and the relation it implies. A new kind adds a row.
pub struct Rule {
    pub kind: u32,
    pub name: &'static str,
    pub produces: Produces,
    pub requires: Requires,
}

pub const RULES: &[Rule] = &[
    Rule {
        kind: EVENT_RELEASED,
        name: "release",
        produces: Produces::SequenceAfter,
        requires: Requires::Nothing,
    },
    Rule {
        kind: EVENT_BLOCKED,
        name: "acquire-after-wait",
        produces: Produces::Nothing,
        requires: Requires::SequenceAt,
    },
    Rule {
        kind: EVENT_ACQUIRED,
        name: "acquire",
        produces: Produces::Nothing,
        requires: Requires::SequenceAt,
    },
    Rule {
        kind: EVENT_TIMED_OUT,
        name: "timed-out",
        produces: Produces::Nothing,
        requires: Requires::Nothing,
    },
    Rule {
        kind: EVENT_NOTIFY,
        name: "notify",
        produces: Produces::SequenceAfter,
        requires: Requires::Nothing,
    },
    Rule {
        kind: EVENT_COND_WAIT,
        name: "cond-wait",
        produces: Produces::Nothing,
        requires: Requires::NotifiedDuring,
    },
    Rule {
        kind: EVENT_OUTCOME,
        name: "outcome",
        produces: Produces::Nothing,
        requires: Requires::Nothing,
    },
    Rule {
        kind: EVENT_CALL,
        name: "blocking-call",
        produces: Produces::Nothing,
        requires: Requires::Nothing,
    },
    Rule {
        kind: EVENT_SWITCH,
        name: "switch",
        produces: Produces::Nothing,
        requires: Requires::Nothing,
    },
];

/// The rule of an event kind (an unknown kind follows its thread only).
pub fn rule(kind: u32) -> &'static Rule {
    const UNKNOWN: Rule = Rule {
        kind: 0,
        name: "event",
        produces: Produces::Nothing,
        requires: Requires::Nothing,
    };
    RULES.iter().find(|r| r.kind == kind).unwrap_or(&UNKNOWN)
}

/// How events are delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Policy {
    /// Each event as soon as everything it follows was delivered.
    Minimal,
    /// In steps: the events at the heads of the queues that can go in one
    /// round are mutually concurrent and share a step number.
    Concurrent,
    /// As minimal, with each timestamp raised by just enough that
    /// timestamps never go back in delivery order.
    Adjusted,
}

/// One event going in: its thread (an index), kind, object and sequence
/// numbers, timestamp, and whatever the caller wants back with it.
#[derive(Clone, Copy, Debug)]
pub struct Item<T> {
    pub thread: usize,
    pub kind: u32,
    pub object: u32,
    pub seq: u32,
    pub seq2: u32,
    pub ts: u64,
    pub data: T,
}

/// One event coming out.
#[derive(Clone, Copy, Debug)]
pub struct Delivered<T> {
    pub item: Item<T>,
    /// Counts deliveries from 0.
    pub n: u64,
    /// `concurrent`: its step; otherwise its round.
    pub step: u64,
    /// `adjusted`: its timestamp raised to keep delivery order (else `ts`).
    pub adjusted_ts: u64,
    /// A predecessor never arrived: released so the stream goes on.
    pub released_early: bool,
}

/// Tokens delivered per object: a window of the sequences just above a
/// floor, one bit each, below which everything counts as delivered (memory
/// stays bounded per object whatever the trace's length), and the threads
/// whose head waits for a token of it.
#[derive(Default)]
struct Tokens {
    floor: u32,
    bits: [u64; WINDOW / 64],
    waiting: BTreeMap<u32, Vec<usize>>,
}

const WINDOW: usize = 256;

impl Tokens {
    /// Adds token `n`; the threads that waited for it (or for one now
    /// below the floor) go into `wake`.
    fn add(&mut self, n: u32, wake: &mut Vec<usize>) {
        if n < self.floor {
            return;
        }
        let top = self.floor.saturating_add(WINDOW as u32);
        if n >= top {
            let new_floor = n - (WINDOW as u32 - 1);
            self.slide(new_floor - self.floor);
            self.floor = new_floor;
            if !self.waiting.is_empty() {
                let above = self.waiting.split_off(&self.floor);
                for (_, threads) in std::mem::replace(&mut self.waiting, above) {
                    wake.extend(threads);
                }
            }
        }
        let at = (n - self.floor) as usize;
        self.bits[at / 64] |= 1 << (at % 64);
        if !self.waiting.is_empty() {
            if let Some(threads) = self.waiting.remove(&n) {
                wake.extend(threads);
            }
        }
    }

    /// Moves the window up by `by` sequences.
    fn slide(&mut self, by: u32) {
        let by = by as usize;
        if by >= WINDOW {
            self.bits = [0; WINDOW / 64];
            return;
        }
        let (words, shift) = (by / 64, by % 64);
        let old = self.bits;
        for i in 0..self.bits.len() {
            let lo = old.get(i + words).copied().unwrap_or(0);
            let hi = old.get(i + words + 1).copied().unwrap_or(0);
            self.bits[i] = if shift == 0 {
                lo
            } else {
                lo >> shift | hi << (64 - shift)
            };
        }
    }

    fn has(&self, n: u32) -> bool {
        if n < self.floor {
            return true;
        }
        let at = (n - self.floor) as usize;
        at < WINDOW && self.bits[at / 64] & 1 << (at % 64) != 0
    }
}

/// The merge: feed items (each thread's in program order), then drain.
///
/// `minimal` and `adjusted` work from a list of threads worth a look: a
/// thread whose queue was empty when an event came, or whose head waited
/// for a token just delivered; a head that must wait is filed under the
/// token it waits for. So each event costs a few map operations whatever
/// the number of threads. `concurrent` goes in rounds over every queue.
pub struct Merge<T> {
    policy: Policy,
    queues: Vec<VecDeque<Item<T>>>,
    tokens: FxHashMap<u32, Tokens>,
    /// Threads worth a look.
    ready: Vec<usize>,
    n: u64,
    step: u64,
    last_ts: u64,
}

impl<T: Copy> Merge<T> {
    pub fn new(policy: Policy) -> Self {
        Merge {
            policy,
            queues: Vec::new(),
            tokens: FxHashMap::default(),
            ready: Vec::new(),
            n: 0,
            step: 0,
            last_ts: 0,
        }
    }

    pub fn push(&mut self, item: Item<T>) {
        if self.queues.len() <= item.thread {
            self.queues.resize_with(item.thread + 1, VecDeque::new);
        }
        let queue = &mut self.queues[item.thread];
        if queue.is_empty() {
            self.ready.push(item.thread);
        }
        queue.push_back(item);
    }

    /// The token `item` waits for that is not delivered yet, if any.
    fn missing(&self, item: &Item<T>) -> Option<u32> {
        let has = |n: u32| self.tokens.get(&item.object).is_some_and(|t| t.has(n));
        let needed = match rule(item.kind).requires {
            Requires::Nothing => None,
            Requires::SequenceAt => (item.seq2 != 0).then_some(item.seq2),
            Requires::NotifiedDuring => (item.seq2 > item.seq).then(|| item.seq + 1),
        };
        needed.filter(|&n| !has(n))
    }

    fn deliver(&mut self, item: Item<T>, early: bool, out: &mut impl FnMut(Delivered<T>)) {
        if rule(item.kind).produces == Produces::SequenceAfter {
            let Merge { tokens, ready, .. } = self;
            tokens.entry(item.object).or_default().add(item.seq2, ready);
        }
        let adjusted_ts = if self.policy == Policy::Adjusted {
            item.ts.max(self.last_ts)
        } else {
            item.ts
        };
        self.last_ts = adjusted_ts;
        out(Delivered {
            item,
            n: self.n,
            step: self.step,
            adjusted_ts,
            released_early: early,
        });
        self.n += 1;
    }

    /// Delivers every event that can go now; with `all`, also releases
    /// held-back events early until every queue is empty (the input is
    /// complete).
    pub fn drain(&mut self, all: bool, out: &mut impl FnMut(Delivered<T>)) {
        loop {
            let moved = if self.policy == Policy::Concurrent {
                self.round(out)
            } else {
                self.work(out)
            };
            if moved {
                self.step += 1;
                continue;
            }
            if !all {
                return;
            }
            // Stuck: the earliest held-back head goes, marked.
            let Some(t) = (0..self.queues.len())
                .filter(|&t| !self.queues[t].is_empty())
                .min_by_key(|&t| self.queues[t].front().map_or(u64::MAX, |i| i.ts))
            else {
                return;
            };
            if let Some(item) = self.queues[t].pop_front() {
                self.deliver(item, true, out);
                self.ready.push(t);
                self.step += 1;
            }
        }
    }

    /// `minimal`, `adjusted`: each thread worth a look, as far as it goes.
    fn work(&mut self, out: &mut impl FnMut(Delivered<T>)) -> bool {
        let mut moved = false;
        while let Some(t) = self.ready.pop() {
            while let Some(item) = self.queues[t].front().copied() {
                if let Some(n) = self.missing(&item) {
                    let waiting = &mut self.tokens.entry(item.object).or_default().waiting;
                    let threads = waiting.entry(n).or_default();
                    if !threads.contains(&t) {
                        threads.push(t);
                    }
                    break;
                }
                self.queues[t].pop_front();
                self.deliver(item, false, out);
                moved = true;
            }
        }
        moved
    }

    /// `concurrent`: one step, the heads that can go now, together.
    fn round(&mut self, out: &mut impl FnMut(Delivered<T>)) -> bool {
        self.ready.clear();
        let heads: Vec<usize> = (0..self.queues.len())
            .filter(|&t| {
                self.queues[t]
                    .front()
                    .is_some_and(|i| self.missing(i).is_none())
            })
            .collect();
        for &t in &heads {
            if let Some(item) = self.queues[t].pop_front() {
                self.deliver(item, false, out);
            }
        }
        self.ready.clear();
        !heads.is_empty()
    }
}

/// Names a raw id (an object, a site, a thread), if it has one.
pub type Namer<'a> = &'a dyn Fn(u32) -> Option<String>;

/// A process's events merged (for `locksuit events --merged`): `object`
/// and `site` name raw ids, `thread_name` a tid; times from `start_ns`.
pub fn process_stream(
    trace: &locksuit_format::reader::Trace,
    policy: Policy,
    (object, site, thread_name): (Namer<'_>, Namer<'_>, Namer<'_>),
    start_ns: u64,
) -> (
    Vec<crate::model::MergedEvent>,
    Vec<crate::model::Perturbation>,
) {
    let mut threads: Vec<u32> = Vec::new();
    let mut merge = Merge::new(policy);
    let mut out = Vec::new();
    let mut on_delivery = |d: Delivered<EventRecord>| out.push(d);
    // Events arrive as they were written (by each one's emission time,
    // each thread's in its own order), as a live reader would see them:
    // the merge then only repairs what the clocks got wrong. `concurrent`
    // delivers in steps of whatever can go together, so it takes them all
    // first.
    let online = policy != Policy::Concurrent;
    trace.events.for_each_merged(|e| {
        let thread = match threads.iter().position(|&t| t == e.tid) {
            Some(i) => i,
            None => {
                threads.push(e.tid);
                threads.len() - 1
            }
        };
        merge.push(Item {
            thread,
            kind: e.hdr.aux & 0xff,
            object: e.lock_id,
            seq: e.seq,
            seq2: e.seq2,
            ts: emission_time(e),
            data: *e,
        });
        if online {
            merge.drain(false, &mut on_delivery);
        }
    });
    merge.drain(true, &mut on_delivery);
    let mut perturbation: Vec<crate::model::Perturbation> = Vec::new();
    let events = out
        .into_iter()
        .map(|d| {
            if policy == Policy::Adjusted {
                perturb(&mut perturbation, &d);
            }
            model_event(&d, policy, (object, site, thread_name), start_ns)
        })
        .collect();
    (events, perturbation)
}

/// `adjusted`: counts how far a delivered event was moved, for its thread.
pub fn perturb(perturbation: &mut Vec<crate::model::Perturbation>, d: &Delivered<EventRecord>) {
    let tid = d.item.data.tid;
    let adjustment = d.adjusted_ts - d.item.ts;
    let at = match perturbation.iter().position(|p| p.tid == tid) {
        Some(i) => i,
        None => {
            perturbation.push(crate::model::Perturbation {
                tid,
                ..Default::default()
            });
            perturbation.len() - 1
        }
    };
    let p = &mut perturbation[at];
    p.events += 1;
    if adjustment > 0 {
        p.adjusted += 1;
        p.total_ns += adjustment;
        p.largest_ns = p.largest_ns.max(adjustment);
    }
}

/// A delivered event as the report shows it.
pub fn model_event(
    d: &Delivered<EventRecord>,
    policy: Policy,
    (object, site, thread_name): (Namer<'_>, Namer<'_>, Namer<'_>),
    start_ns: u64,
) -> crate::model::MergedEvent {
    let e = d.item.data;
    let adjustment = d.adjusted_ts - d.item.ts;
    crate::model::MergedEvent {
        n: d.n,
        step: (policy == Policy::Concurrent).then_some(d.step),
        tid: e.tid,
        thread: thread_name(e.tid),
        kind: rule(d.item.kind).name,
        object: (e.lock_id != 0 && d.item.kind != EVENT_CALL && d.item.kind != EVENT_SWITCH)
            .then(|| object(e.lock_id))
            .flatten(),
        object_seq: e.seq2,
        ts_ns: d.item.ts.saturating_sub(start_ns),
        mono_ns: d.item.ts,
        adjusted_ts_ns: (policy == Policy::Adjusted)
            .then(|| d.adjusted_ts.saturating_sub(start_ns)),
        adjustment_ns: (policy == Policy::Adjusted).then_some(adjustment),
        site: site(e.site_id),
        released_early: d.released_early,
    }
}
