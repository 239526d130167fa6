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
    /// Every token from `seq` to `seq2` (a barrier departure follows every
    /// arrival of its round).
    AllOf,
    /// Every token after `seq` up to `seq2` (an acquisition of a read-write
    /// lock after a wait follows every release made while it waited: a
    /// writer, all the readers it waited for).
    AllSince,
}

/// Which objects a row is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Applies {
    Any,
    /// Objects of one kind only (a semaphore's count moves by posts, not
    /// releases; a read-write lock lets several holders in).
    Only(ObjectKind),
}

/// Whose tokens a row makes or waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum On {
    /// The event's own object (a lock, a condition variable, a semaphore).
    Object,
    /// Thread creations, by creation number: a creation before the
    /// created thread's start.
    Creations,
    /// Thread exits, by creation number: an exit before the join that
    /// returned it.
    Exits,
}

/// A row of the happened-before table: an event kind (on which objects),
/// its name in the output, and the relation it implies. A new kind adds a
/// row.
pub struct Rule {
    pub kind: u32,
    pub applies: Applies,
    pub name: &'static str,
    pub produces: Produces,
    pub requires: Requires,
    pub on: On,
}

const fn row(
    kind: u32,
    applies: Applies,
    name: &'static str,
    (produces, requires): (Produces, Requires),
    on: On,
) -> Rule {
    Rule {
        kind,
        applies,
        name,
        produces,
        requires,
        on,
    }
}

use Applies::{Any, Only};
const SEMAPHORES: Applies = Only(ObjectKind::Sem);
const RWLOCKS: Applies = Only(ObjectKind::Rwlock);
const FUTEXES: Applies = Only(ObjectKind::Futex);
use Produces::{Nothing as Makes, SequenceAfter};
use Requires::{AllOf, AllSince, Nothing as Follows, NotifiedDuring, SequenceAt};

/// The table. The first row that fits an event is its rule.
#[rustfmt::skip]
pub const RULES: &[Rule] = &[
    // Semaphores: a post that found waiters makes the next count; a wait
    // that blocked and saw the count move follows the first post after it
    // began. A wait that did not block follows no recorded post (a post
    // that finds no waiter writes nothing).
    row(EVENT_POSTED, Any, "post", (SequenceAfter, Follows), On::Object),
    row(EVENT_BLOCKED, SEMAPHORES, "sem-acquire-after-wait", (Makes, NotifiedDuring), On::Object),
    row(EVENT_ACQUIRED, SEMAPHORES, "sem-acquire", (Makes, Follows), On::Object),
    // Read-write locks: an acquisition after a wait follows every release
    // made while it waited (a writer waits for every reader).
    row(EVENT_BLOCKED, RWLOCKS, "acquire-after-wait", (Makes, AllSince), On::Object),
    // Futex words: a wake that ended a recorded wait moved the word's
    // sequence; the wait it ended follows it (as a lock's release and the
    // acquisition it lets in, under their own names: nothing is known to
    // be held).
    row(EVENT_RELEASED, FUTEXES, "futex-wake", (SequenceAfter, Follows), On::Object),
    row(EVENT_BLOCKED, FUTEXES, "futex-woken", (Makes, SequenceAt), On::Object),
    row(EVENT_TIMED_OUT, FUTEXES, "futex-timed-out", (Makes, Follows), On::Object),
    // Locks: a release makes the acquisition it lets in possible.
    row(EVENT_RELEASED, Any, "release", (SequenceAfter, Follows), On::Object),
    row(EVENT_BLOCKED, Any, "acquire-after-wait", (Makes, SequenceAt), On::Object),
    row(EVENT_ACQUIRED, Any, "acquire", (Makes, SequenceAt), On::Object),
    row(EVENT_TIMED_OUT, Any, "timed-out", (Makes, Follows), On::Object),
    // Condition variables.
    row(EVENT_NOTIFY, Any, "notify", (SequenceAfter, Follows), On::Object),
    row(EVENT_COND_WAIT, Any, "cond-wait", (Makes, NotifiedDuring), On::Object),
    // Barriers: every arrival of a round before any departure from it.
    row(EVENT_ARRIVED, Any, "arrive", (SequenceAfter, Follows), On::Object),
    row(EVENT_DEPARTED, Any, "depart", (Makes, AllOf), On::Object),
    // Threads: created before started; exited before joined.
    row(EVENT_CREATED, Any, "create", (SequenceAfter, Follows), On::Creations),
    row(EVENT_STARTED, Any, "start", (Makes, SequenceAt), On::Creations),
    row(EVENT_EXITED, Any, "exit", (SequenceAfter, Follows), On::Exits),
    row(EVENT_JOINED, Any, "join", (Makes, SequenceAt), On::Exits),
    // Program order only.
    row(EVENT_OUTCOME, Any, "outcome", (Makes, Follows), On::Object),
    row(EVENT_CALL, Any, "blocking-call", (Makes, Follows), On::Object),
    row(EVENT_SWITCH, Any, "switch", (Makes, Follows), On::Object),
    row(EVENT_MISUSE, Any, "misuse", (Makes, Follows), On::Object),
    row(EVENT_HOLDER, Any, "holder-ran", (Makes, Follows), On::Object),
];

/// The rule of an event kind on an object of a kind (if known); an
/// unknown event kind follows its thread only.
pub fn rule(kind: u32, object: Option<ObjectKind>) -> &'static Rule {
    const UNKNOWN: Rule = row(0, Any, "event", (Makes, Follows), On::Object);
    RULES
        .iter()
        .find(|r| r.kind == kind && (r.applies == Any || Some(r.applies) == object.map(Only)))
        .unwrap_or(&UNKNOWN)
}

/// The token objects of thread creations and exits (no lock id comes
/// near them).
const CREATIONS: u32 = u32::MAX;
const EXITS: u32 = u32::MAX - 1;

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
    /// The object's kind, where it matters (some rows apply to one kind).
    pub object_kind: Option<ObjectKind>,
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
/// Thread creations and exits are kept exactly instead (one per thread,
/// and exits come in any order).
#[derive(Default)]
struct Tokens {
    floor: u32,
    bits: [u64; WINDOW / 64],
    exact: Option<rustc_hash::FxHashSet<u32>>,
    waiting: BTreeMap<u32, Vec<usize>>,
}

const WINDOW: usize = 256;

impl Tokens {
    fn of(object: u32) -> Tokens {
        Tokens {
            exact: (object >= EXITS).then(Default::default),
            ..Default::default()
        }
    }

    /// Adds token `n`; the threads that waited for it (or for one now
    /// below the floor) go into `wake`.
    fn add(&mut self, n: u32, wake: &mut Vec<usize>) {
        if let Some(exact) = &mut self.exact {
            exact.insert(n);
            if let Some(threads) = self.waiting.remove(&n) {
                wake.extend(threads);
            }
            return;
        }
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
        if let Some(exact) = &self.exact {
            return exact.contains(&n);
        }
        if n < self.floor {
            return true;
        }
        let at = (n - self.floor) as usize;
        at < WINDOW && self.bits[at / 64] & 1 << (at % 64) != 0
    }
}

/// The object whose tokens `item` makes or waits for.
fn token_object<T>(item: &Item<T>) -> u32 {
    match rule(item.kind, item.object_kind).on {
        On::Object => item.object,
        On::Creations => CREATIONS,
        On::Exits => EXITS,
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
        let object = token_object(item);
        let has = |n: u32| self.tokens.get(&object).is_some_and(|t| t.has(n));
        let needed = match rule(item.kind, item.object_kind).requires {
            Requires::Nothing => None,
            Requires::SequenceAt => (item.seq2 != 0).then_some(item.seq2),
            Requires::NotifiedDuring => (item.seq2 > item.seq).then(|| item.seq + 1),
            Requires::AllOf => return (item.seq..=item.seq2).find(|&n| !has(n)),
            Requires::AllSince => {
                return (item.seq.wrapping_add(1)..=item.seq2).find(|&n| !has(n));
            }
        };
        needed.filter(|&n| !has(n))
    }

    fn deliver(&mut self, item: Item<T>, early: bool, out: &mut impl FnMut(Delivered<T>)) {
        if rule(item.kind, item.object_kind).produces == Produces::SequenceAfter {
            let Merge { tokens, ready, .. } = self;
            let object = token_object(&item);
            tokens
                .entry(object)
                .or_insert_with(|| Tokens::of(object))
                .add(item.seq2, ready);
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
        self.drain_releasing_before(if all { u64::MAX } else { 0 }, out);
    }

    /// Delivers every event that can go now; when nothing can move, a
    /// held-back event with a timestamp before `limit` is released early
    /// (the earliest first), and so on. A follower passes "now minus a
    /// bound": a predecessor that has not come by then never will.
    pub fn drain_releasing_before(&mut self, limit: u64, out: &mut impl FnMut(Delivered<T>)) {
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
            // Stuck: the earliest held-back head goes, marked, if it is
            // old enough.
            let Some(t) = (0..self.queues.len())
                .filter(|&t| self.queues[t].front().is_some_and(|i| i.ts < limit))
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
                    let object = token_object(&item);
                    let tokens = self.tokens.entry(object);
                    let waiting = &mut tokens.or_insert_with(|| Tokens::of(object)).waiting;
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
