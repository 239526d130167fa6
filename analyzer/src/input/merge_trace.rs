//! Between a trace and the merge (`merge.rs`): each event record becomes
//! an item (its thread's queue, the tokens it makes or waits for), and each
//! delivered item becomes a row of the report.

use crate::input::merge::{rule, Delivered, Item, Merge, Policy};
use crate::model::{MergedEvent, Perturbation};
use locksuit_format::events::Events;
use locksuit_format::reader::{ThreadInfo, Trace};
use locksuit_format::*;
use rustc_hash::FxHashMap;

/// How long (of the trace's own time) an event is held back for a
/// predecessor that has not come (as `follow::HOLD_BOUND`).
const HOLD_BOUND_NS: u64 = 1_000_000_000;

/// Names a raw id (an object, a site, a thread), if it has one.
pub type Namer<'a> = &'a dyn Fn(u32) -> Option<String>;

/// What an event record alone does not say: which objects are semaphores,
/// which thread a join's `pthread_t` was, and each thread's queue.
#[derive(Default)]
pub struct Context {
    /// The kinds of the objects some rules single out (semaphores,
    /// read-write locks).
    kinds: FxHashMap<u32, ObjectKind>,
    /// Each `pthread_t`'s threads as (start, creation number), by start: a
    /// `pthread_t` is reused once its thread was joined.
    by_pthread: FxHashMap<u64, Vec<(u64, u32)>>,
    tid_of_serial: FxHashMap<u32, u32>,
    /// The queue of each tid, in order of first appearance.
    queues: Vec<u32>,
}

impl Context {
    /// Learns (again) what `trace` says, given its objects' kinds (see
    /// [`object_kinds`]); queues already given keep their index (a followed
    /// trace is read again and again).
    pub fn learn(&mut self, threads: &[ThreadInfo], kinds: FxHashMap<u32, ObjectKind>) {
        self.kinds = kinds;
        self.by_pthread.clear();
        self.tid_of_serial.clear();
        for t in threads {
            let r = &t.record;
            if r.create_serial == 0 {
                continue;
            }
            self.tid_of_serial.insert(r.create_serial, r.tid);
            let starts = self.by_pthread.entry(r.pthread).or_default();
            starts.push((r.start_ns, r.create_serial));
            starts.sort_unstable();
        }
    }

    fn queue(&mut self, tid: u32) -> usize {
        match self.queues.iter().position(|&t| t == tid) {
            Some(i) => i,
            None => {
                self.queues.push(tid);
                self.queues.len() - 1
            }
        }
    }

    /// The creation number of the thread a join returned: of the threads
    /// that had its `pthread_t`, the last to start before the join ended.
    fn joined_serial(&self, e: &EventRecord) -> u32 {
        let Some(starts) = self.by_pthread.get(&e.deadline) else {
            return 0;
        };
        starts
            .iter()
            .rev()
            .find(|(start, _)| *start <= e.time2)
            .or(starts.first())
            .map_or(0, |&(_, serial)| serial)
    }

    /// `e` as the merge takes it.
    pub fn item(&mut self, e: &EventRecord) -> Item<EventRecord> {
        let kind = e.hdr.aux & 0xff;
        Item {
            thread: self.queue(e.tid),
            kind,
            object: e.lock_id,
            object_kind: self.kinds.get(&e.lock_id).copied(),
            seq: e.seq,
            seq2: if kind == EVENT_JOINED {
                self.joined_serial(e)
            } else {
                e.seq2
            },
            ts: emission_time(e),
            data: *e,
        }
    }

    /// The other thread of a creation (the new one), a start (its
    /// creator) or a join (the joined one).
    fn peer(&self, d: &Delivered<EventRecord>) -> Option<u32> {
        match d.item.kind {
            EVENT_CREATED | EVENT_JOINED => self.tid_of_serial.get(&d.item.seq2).copied(),
            EVENT_STARTED => Some(d.item.data.other).filter(|&t| t != 0),
            _ => None,
        }
    }
}

/// The kinds of a trace's semaphores, read-write locks and futex words (from its object
/// records, which the analysis frees early: take them first).
pub fn object_kinds(trace: &Trace) -> FxHashMap<u32, ObjectKind> {
    trace
        .locks
        .iter()
        .filter_map(|l| {
            let kind = ObjectKind::from_u8(l.kind as u8)?;
            matches!(
                kind,
                ObjectKind::Sem | ObjectKind::Rwlock | ObjectKind::Futex
            )
            .then_some((l.id, kind))
        })
        .collect()
}

/// What the merge of one process needs from its trace: its events, its
/// threads, and its objects' kinds (see [`object_kinds`]; take them before
/// the analysis frees the object records).
pub struct Input<'a> {
    pub events: &'a Events,
    pub threads: &'a [ThreadInfo],
    pub kinds: FxHashMap<u32, ObjectKind>,
}

/// A process's events merged, each handed to `sink` as it is delivered
/// (memory: the events held back, not the trace); returns the threads'
/// perturbation (`adjusted`). `names` name raw ids (objects, sites, thread
/// names); times from `start_ns`.
pub fn stream(
    input: Input<'_>,
    policy: Policy,
    names: (Namer<'_>, Namer<'_>, Namer<'_>),
    start_ns: u64,
    sink: &mut dyn FnMut(MergedEvent) -> std::io::Result<()>,
) -> std::io::Result<Vec<Perturbation>> {
    let mut context = Context::default();
    context.learn(input.threads, input.kinds);
    let mut merge = Merge::new(policy);
    let mut perturbation: Vec<Perturbation> = Vec::new();
    let mut failed: Option<std::io::Error> = None;
    let mut on_delivery = |d: Delivered<EventRecord>, context: &Context| {
        if failed.is_some() {
            return;
        }
        if policy == Policy::Adjusted {
            perturb(&mut perturbation, &d);
        }
        if let Err(e) = sink(model_event(&d, policy, context, names, start_ns)) {
            failed = Some(e);
        }
    };
    // Events arrive as they were written (by each one's emission time,
    // each thread's in its own order), as a live reader would see them:
    // the merge then only repairs what the clocks got wrong. `concurrent`
    // delivers in steps of whatever can go together, so it takes them all
    // first.
    let online = policy != Policy::Concurrent;
    let mut delivered: Vec<Delivered<EventRecord>> = Vec::new();
    input.events.for_each_merged(|e| {
        let item = context.item(e);
        let latest = item.ts;
        merge.push(item);
        if online {
            // What waited a second of the trace's time for a predecessor
            // that never came is let go, as a follower does: one lost
            // event must not hold its thread (and memory) to the end.
            let limit = latest.saturating_sub(HOLD_BOUND_NS);
            merge.drain_releasing_before(limit, &mut |d| delivered.push(d));
            for d in delivered.drain(..) {
                on_delivery(d, &context);
            }
        }
    });
    merge.drain(true, &mut |d| delivered.push(d));
    for d in delivered.drain(..) {
        on_delivery(d, &context);
    }
    match failed {
        Some(e) => Err(e),
        None => Ok(perturbation),
    }
}

/// `adjusted`: counts how far a delivered event was moved, for its thread.
pub fn perturb(perturbation: &mut Vec<Perturbation>, d: &Delivered<EventRecord>) {
    let tid = d.item.data.tid;
    let adjustment = d.adjusted_ts - d.item.ts;
    let at = match perturbation.iter().position(|p| p.tid == tid) {
        Some(i) => i,
        None => {
            perturbation.push(Perturbation {
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
    context: &Context,
    (object, site, thread_name): (Namer<'_>, Namer<'_>, Namer<'_>),
    start_ns: u64,
) -> MergedEvent {
    let e = d.item.data;
    let adjustment = d.adjusted_ts - d.item.ts;
    let on_object = !matches!(
        d.item.kind,
        EVENT_CALL | EVENT_SWITCH | EVENT_CREATED | EVENT_STARTED | EVENT_EXITED | EVENT_JOINED
    );
    MergedEvent {
        n: d.n,
        step: (policy == Policy::Concurrent).then_some(d.step),
        tid: e.tid,
        thread: thread_name(e.tid),
        kind: rule(d.item.kind, d.item.object_kind).name,
        object: (on_object && e.lock_id != 0)
            .then(|| object(e.lock_id))
            .flatten(),
        object_seq: d.item.seq2,
        peer_tid: context.peer(d),
        ts_ns: d.item.ts.saturating_sub(start_ns),
        mono_ns: d.item.ts,
        adjusted_ts_ns: (policy == Policy::Adjusted)
            .then(|| d.adjusted_ts.saturating_sub(start_ns)),
        adjustment_ns: (policy == Policy::Adjusted).then_some(adjustment),
        site: site(e.site_id),
        released_early: d.released_early,
    }
}
