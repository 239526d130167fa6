//! Properties of the merged stream: random valid executions (threads
//! taking locks, notifying and waiting on conditions, posting and waiting
//! on a semaphore, meeting at a barrier, reading and writing a read-write
//! lock, creating, exiting and joining threads), each thread's clock
//! off by up to ±1 s, and the threads' events arriving interleaved at
//! random; every policy must deliver each event once, never before what it
//! follows, with `adjusted` timestamps monotone and minimally raised, and
//! `concurrent` steps holding only mutually concurrent events.

use crate::input::merge::*;
use locksuit_format::*;
use proptest::prelude::*;

/// One generated event: its item, with its index in the execution.
type Ev = Item<usize>;

/// Most threads an execution creates beyond the ones it starts with.
const CREATED_MAX: usize = 3;

/// A valid execution from a script of (thread, action) choices: the
/// events in a global order that happened. `threads` run from the start;
/// they may create up to [`CREATED_MAX`] more, which may exit and be
/// joined. Objects: locks 100 and 101, condition 200, semaphore 300,
/// barrier 400 (for two threads), read-write lock 500.
fn execute(threads: usize, script: &[(usize, u8)]) -> Vec<Ev> {
    let (locks, conds) = (2u32, 1u32);
    let total = threads + CREATED_MAX;
    let mut holder: Vec<Option<usize>> = vec![None; locks as usize];
    let mut lock_seq = vec![0u32; locks as usize];
    let mut held: Vec<Option<u32>> = vec![None; total];
    let mut waiting: Vec<Option<u32>> = vec![None; total];
    let mut cond_seq = vec![0u32; conds as usize];
    let (mut sem_count, mut posts) = (0u32, 0u32);
    let mut sem_waiting: Vec<Option<u32>> = vec![None; total];
    let mut arrivals = 0u32;
    let mut at_barrier: Vec<bool> = vec![false; total];
    let mut rw = Rw::default();
    let mut alive: Vec<bool> = (0..total).map(|t| t < threads).collect();
    let mut serial = vec![0u32; total];
    let mut existing = threads;
    let mut exited: Vec<u32> = Vec::new();
    let mut events: Vec<Ev> = Vec::new();
    let push = |events: &mut Vec<Ev>, thread, kind, object, seq, seq2| {
        let id = events.len();
        events.push(Item {
            thread,
            kind,
            object,
            object_kind: match object {
                300 => Some(ObjectKind::Sem),
                500 => Some(ObjectKind::Rwlock),
                _ => None,
            },
            seq,
            seq2,
            ts: id as u64 * 1000,
            data: id,
        });
    };
    for &(t, action) in script {
        let t = t % existing;
        let blocked = waiting[t].is_some() || sem_waiting[t].is_some() || at_barrier[t];
        if !alive[t] || blocked || rw.waiting.iter().any(|w| w.0 == t) {
            continue; // not running, or blocked until a notify, a post, a round
        }
        if rw.readers.contains(&t) || rw.writer == Some(t) {
            rw.release(t, &mut |thread, kind, seq, seq2| {
                push(&mut events, thread, kind, 500, seq, seq2)
            });
            continue;
        }
        if let Some(l) = held[t] {
            holder[l as usize] = None;
            held[t] = None;
            lock_seq[l as usize] += 1;
            let s = lock_seq[l as usize];
            push(&mut events, t, EVENT_RELEASED, 100 + l, s - 1, s);
            continue;
        }
        match action % 10 {
            op @ (0 | 1) => {
                let l = u32::from(op);
                if holder[l as usize].is_none() {
                    holder[l as usize] = Some(t);
                    held[t] = Some(l);
                    let kind = if action / 10 % 2 != 0 {
                        EVENT_BLOCKED
                    } else {
                        EVENT_ACQUIRED
                    };
                    let s = lock_seq[l as usize];
                    push(&mut events, t, kind, 100 + l, s, s);
                }
            }
            2 => waiting[t] = Some(cond_seq[0]),
            3 => {
                cond_seq[0] += 1;
                let s = cond_seq[0];
                push(&mut events, t, EVENT_NOTIFY, 200, s - 1, s);
                for (w, wait) in waiting.iter_mut().enumerate() {
                    if let Some(start) = wait.take() {
                        push(&mut events, w, EVENT_COND_WAIT, 200, start, s);
                    }
                }
            }
            4 => {
                posts += 1;
                push(&mut events, t, EVENT_POSTED, 300, posts - 1, posts);
                // The post wakes one waiter, or raises the count.
                match sem_waiting.iter().position(Option::is_some) {
                    Some(w) => {
                        let start = sem_waiting[w].take().unwrap_or(0);
                        push(&mut events, w, EVENT_BLOCKED, 300, start, posts);
                    }
                    None => sem_count += 1,
                }
            }
            5 if sem_count > 0 => {
                sem_count -= 1;
                push(&mut events, t, EVENT_ACQUIRED, 300, posts, posts);
            }
            5 => sem_waiting[t] = Some(posts),
            6 if existing < total => {
                let child = existing;
                existing += 1;
                alive[child] = true;
                serial[child] = child as u32 + 1;
                push(&mut events, t, EVENT_CREATED, 0, 0, serial[child]);
                push(&mut events, child, EVENT_STARTED, 0, 0, serial[child]);
            }
            6 => {}
            9 => {
                let write = action / 10 % 2 != 0;
                if rw.free_for(write) {
                    rw.grant(t, write);
                    push(&mut events, t, EVENT_ACQUIRED, 500, rw.seq, rw.seq);
                } else {
                    rw.waiting.push((t, write, rw.seq));
                }
            }
            8 => {
                arrivals += 1;
                push(&mut events, t, EVENT_ARRIVED, 400, arrivals, arrivals);
                if arrivals % 2 == 1 {
                    at_barrier[t] = true;
                } else {
                    // The round is complete: both leave.
                    let other = at_barrier.iter().position(|&b| b).unwrap_or(t);
                    at_barrier[other] = false;
                    push(
                        &mut events,
                        other,
                        EVENT_DEPARTED,
                        400,
                        arrivals - 1,
                        arrivals,
                    );
                    push(&mut events, t, EVENT_DEPARTED, 400, arrivals - 1, arrivals);
                }
            }
            _ if serial[t] != 0 => {
                alive[t] = false;
                exited.push(serial[t]);
                push(&mut events, t, EVENT_EXITED, 0, 0, serial[t]);
            }
            _ => {
                if let Some(joined) = exited.pop() {
                    push(&mut events, t, EVENT_JOINED, 0, 0, joined);
                }
            }
        }
    }
    events
}

/// The read-write lock of a generated execution: its release sequence,
/// holders, and the threads waiting (thread, for writing, sequence when
/// they asked), let in first come first served.
#[derive(Default)]
struct Rw {
    seq: u32,
    readers: Vec<usize>,
    writer: Option<usize>,
    waiting: Vec<(usize, bool, u32)>,
}

impl Rw {
    fn free_for(&self, write: bool) -> bool {
        self.writer.is_none() && (!write || self.readers.is_empty())
    }

    fn grant(&mut self, t: usize, write: bool) {
        if write {
            self.writer = Some(t);
        } else {
            self.readers.push(t);
        }
    }

    /// `t` releases; `event(thread, kind, seq, seq2)` writes the release and
    /// the acquisitions it lets in.
    fn release(&mut self, t: usize, event: &mut dyn FnMut(usize, u32, u32, u32)) {
        self.readers.retain(|&r| r != t);
        if self.writer == Some(t) {
            self.writer = None;
        }
        self.seq += 1;
        event(t, EVENT_RELEASED, self.seq - 1, self.seq);
        while let Some(&(w, write, asked)) = self.waiting.first() {
            if !self.free_for(write) {
                break;
            }
            self.waiting.remove(0);
            self.grant(w, write);
            event(w, EVENT_BLOCKED, asked, self.seq);
        }
    }
}

/// The events each one must follow (indices into the execution).
fn must_follow(events: &[Ev], e: &Ev) -> Vec<usize> {
    let mut before = Vec::new();
    for (i, o) in events.iter().enumerate() {
        let same_thread = o.thread == e.thread && o.data < e.data;
        let released_into = matches!(e.kind, EVENT_ACQUIRED | EVENT_BLOCKED)
            && e.object_kind.is_none()
            && o.kind == EVENT_RELEASED
            && o.object == e.object
            && e.seq2 > 0
            && o.seq2 == e.seq2;
        let woke = e.kind == EVENT_COND_WAIT
            && o.kind == EVENT_NOTIFY
            && o.object == e.object
            && e.seq2 > e.seq
            && o.seq2 == e.seq + 1;
        let posted_before = e.object_kind == Some(ObjectKind::Sem)
            && o.kind == EVENT_POSTED
            && o.object == e.object
            && match e.kind {
                EVENT_BLOCKED => e.seq2 > e.seq && o.seq2 == e.seq + 1,
                _ => false,
            };
        // A read-write lock: an acquisition after a wait follows every
        // release made while it waited; one without, the last release.
        let rw_released = e.object_kind == Some(ObjectKind::Rwlock)
            && o.kind == EVENT_RELEASED
            && o.object == e.object
            && match e.kind {
                EVENT_BLOCKED => e.seq < o.seq2 && o.seq2 <= e.seq2,
                EVENT_ACQUIRED => e.seq2 > 0 && o.seq2 == e.seq2,
                _ => false,
            };
        let round_arrival = e.kind == EVENT_DEPARTED
            && o.kind == EVENT_ARRIVED
            && o.object == e.object
            && (e.seq..=e.seq2).contains(&o.seq2);
        let thread_edge = matches!(
            (o.kind, e.kind),
            (EVENT_CREATED, EVENT_STARTED) | (EVENT_EXITED, EVENT_JOINED)
        ) && o.seq2 == e.seq2;
        let between_threads = released_into || woke || posted_before || rw_released;
        if same_thread || between_threads || round_arrival || thread_edge {
            before.push(i);
        }
    }
    before
}

fn run(policy: Policy, events: &[Ev], offsets: &[i64], arrival: &[usize]) -> Vec<Delivered<usize>> {
    let mut merge = Merge::new(policy);
    let mut out = Vec::new();
    // Each thread's events in its own order, arriving interleaved as the
    // arrival script says, with the thread's clock offset.
    let threads = events.iter().map(|e| e.thread + 1).max().unwrap_or(1);
    let mut next: Vec<std::collections::VecDeque<Ev>> = vec![Default::default(); threads];
    for e in events {
        let mut e = *e;
        e.ts = (e.ts as i64 + offsets[e.thread % offsets.len()]).max(0) as u64;
        next[e.thread].push_back(e);
    }
    let mut a = 0;
    while next.iter().any(|q| !q.is_empty()) {
        let t = arrival.get(a).copied().unwrap_or(a) % next.len();
        a += 1;
        let t = (0..next.len())
            .map(|k| (t + k) % next.len())
            .find(|&k| !next[k].is_empty())
            .unwrap();
        let e = next[t].pop_front().unwrap();
        merge.push(e);
        merge.drain(false, &mut |d| out.push(d));
    }
    merge.drain(true, &mut |d| out.push(d));
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn every_policy_keeps_happened_before(
        threads in 2usize..5,
        script in proptest::collection::vec((0usize..8, 0u8..20), 0..160),
        offsets in proptest::collection::vec(-1_000_000_000i64..1_000_000_000, 8),
        arrival in proptest::collection::vec(0usize..8, 0..400),
    ) {
        let events = execute(threads, &script);
        for policy in [Policy::Minimal, Policy::Concurrent, Policy::Adjusted] {
            let out = run(policy, &events, &offsets, &arrival);
            // (b) each exactly once, none released early.
            prop_assert_eq!(out.len(), events.len());
            let mut at = vec![usize::MAX; events.len()];
            for (k, d) in out.iter().enumerate() {
                prop_assert_eq!(at[d.item.data], usize::MAX);
                at[d.item.data] = k;
                prop_assert!(!d.released_early);
            }
            // (a) nothing before what it follows.
            for e in &events {
                for b in must_follow(&events, e) {
                    prop_assert!(at[b] < at[e.data], "{:?}: {:?} delivered after {:?}", policy, events[b], e);
                }
            }
            if policy == Policy::Adjusted {
                // (c) monotone, each raised by the least that keeps it so.
                let mut last = 0;
                for d in &out {
                    prop_assert_eq!(d.adjusted_ts, d.item.ts.max(last));
                    last = d.adjusted_ts;
                }
            }
            if policy == Policy::Concurrent {
                // (d) one step: distinct threads, none following another.
                for (i, a) in out.iter().enumerate() {
                    for b in &out[i + 1..] {
                        if a.step == b.step {
                            prop_assert_ne!(a.item.thread, b.item.thread);
                            prop_assert!(!must_follow(&events, &b.item).contains(&a.item.data));
                        }
                    }
                }
            }
        }
    }
}

/// An acquisition after release 3 of object 1, a release never recorded.
fn after_unrecorded_release() -> Item<u32> {
    Item {
        thread: 0,
        kind: EVENT_BLOCKED,
        object: 1,
        object_kind: None,
        seq: 3,
        seq2: 3,
        ts: 10,
        data: 0,
    }
}

#[test]
fn a_missing_predecessor_is_released_early_not_waited_for() {
    let mut merge = Merge::new(Policy::Minimal);
    merge.push(after_unrecorded_release());
    merge.push(Item {
        thread: 1,
        kind: EVENT_NOTIFY,
        object: 2,
        object_kind: None,
        seq: 0,
        seq2: 1,
        ts: 20,
        data: 1,
    });
    let mut out = Vec::new();
    merge.drain(false, &mut |d| out.push(d));
    assert_eq!(out.len(), 1, "the notify goes; the acquisition waits");
    merge.drain(true, &mut |d| out.push(d));
    assert_eq!(out.len(), 2);
    assert!(out[1].released_early);
}

/// A follower's bound: an event held back for a predecessor is released
/// once its time is older than the limit given, not before.
#[test]
fn a_follower_releases_what_waited_too_long() {
    let mut merge = Merge::new(Policy::Minimal);
    merge.push(after_unrecorded_release());
    let mut out = Vec::new();
    merge.drain_releasing_before(10, &mut |d| out.push(d));
    assert!(out.is_empty(), "not older than the limit yet");
    merge.drain_releasing_before(11, &mut |d| out.push(d));
    assert_eq!(out.len(), 1);
    assert!(out[0].released_early);
}

/// The merge's own speed (no trace reading, no output): 10 M events of 8
/// threads handing 64 locks around. `cargo test --release -p locksuit
/// merge_speed -- --ignored --nocapture` prints events per second
/// (docs/performance.md).
#[test]
#[ignore]
fn merge_speed() {
    let threads = 8usize;
    let mut seq = [0u32; 64];
    let mut events = Vec::with_capacity(10_000_000);
    for i in 0..5_000_000usize {
        let t = i % threads;
        let l = (i * 7) % 64;
        events.push(Item {
            thread: t,
            kind: EVENT_BLOCKED,
            object: l as u32,
            object_kind: None,
            seq: seq[l],
            seq2: seq[l],
            ts: i as u64,
            data: (),
        });
        seq[l] += 1;
        events.push(Item {
            thread: t,
            kind: EVENT_RELEASED,
            object: l as u32,
            object_kind: None,
            seq: seq[l] - 1,
            seq2: seq[l],
            ts: i as u64,
            data: (),
        });
    }
    for policy in [Policy::Minimal, Policy::Adjusted] {
        let mut merge = Merge::new(policy);
        let mut delivered = 0u64;
        let started = std::time::Instant::now();
        for e in &events {
            merge.push(*e);
            merge.drain(false, &mut |_| delivered += 1);
        }
        merge.drain(true, &mut |_| delivered += 1);
        let secs = started.elapsed().as_secs_f64();
        assert_eq!(delivered, events.len() as u64);
        println!(
            "{policy:?}: {:.1} M events/s",
            events.len() as f64 / secs / 1e6
        );
    }
}

/// A long run (sequences far beyond the window of exact tokens kept per
/// object) with the threads' events arriving far apart: the window slides
/// and nothing is lost or released early.
#[test]
fn long_runs_slide_the_token_window() {
    let mut state = 12345u64;
    let mut next = || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) as usize
    };
    // No condition waits here: threads that all wait would stop the run.
    let script: Vec<(usize, u8)> = (0..8000)
        .map(|_| {
            let action = (next() % 20) as u8;
            let waits = matches!(action % 10, 2 | 5 | 8 | 9);
            (next() % 6, if waits { action + 1 } else { action })
        })
        .collect();
    let events = execute(3, &script);
    for kind in [
        EVENT_POSTED,
        EVENT_CREATED,
        EVENT_STARTED,
        EVENT_EXITED,
        EVENT_JOINED,
    ] {
        assert!(
            events.iter().any(|e| e.kind == kind),
            "no event of kind {kind}"
        );
    }
    let longest = events.iter().map(|e| e.seq2).max().unwrap_or(0);
    assert!(longest > 2 * 256, "long enough to slide: {longest}");
    // One thread's events all arrive before the others' (far apart).
    let arrival: Vec<usize> = std::iter::repeat_n(0, events.len()).collect();
    for policy in [Policy::Minimal, Policy::Concurrent, Policy::Adjusted] {
        let out = run(policy, &events, &[0, 500_000_000, -500_000_000], &arrival);
        assert_eq!(out.len(), events.len());
        let mut at = vec![usize::MAX; events.len()];
        for (k, d) in out.iter().enumerate() {
            assert!(!d.released_early, "{policy:?}: {:?}", d.item);
            at[d.item.data] = k;
        }
        for e in &events {
            for b in must_follow(&events, e) {
                assert!(
                    at[b] < at[e.data],
                    "{policy:?}: {:?} after {:?}",
                    events[b],
                    e
                );
            }
        }
    }
}

/// A writer that waited for two readers comes after both releases, even
/// when the first reader's events arrive last (the last release alone
/// would let it through too early).
#[test]
fn a_writer_follows_every_reader_it_waited_for() {
    // Threads 0 and 1 read, 2 asks to write and waits, 0 and 1 release.
    let script = [(0, 9), (1, 9), (2, 19), (0, 0), (1, 0)];
    let events = execute(3, &script);
    let writer = events
        .iter()
        .find(|e| e.kind == EVENT_BLOCKED && e.object == 500)
        .expect("the writer waited");
    assert_eq!((writer.seq, writer.seq2), (0, 2));
    // Thread 0's events arrive after everyone else's.
    let arrival = [1, 1, 1, 1, 2, 2, 2, 2, 0, 0, 0, 0];
    for policy in [Policy::Minimal, Policy::Concurrent, Policy::Adjusted] {
        let out = run(policy, &events, &[0; 3], &arrival);
        let at = |e: &Ev| out.iter().position(|d| d.item.data == e.data).unwrap();
        for e in events.iter().filter(|e| e.kind == EVENT_RELEASED) {
            assert!(at(e) < at(writer), "{policy:?}: {e:?} after the writer");
        }
    }
}
