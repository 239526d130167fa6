//! Contention from the event stream: who blocks whom, on which lock, at
//! which lines, for how long; wait and hold distributions; condition-variable
//! wake-ups.
//!
//! Events are ordered per lock by the lock's release sequence, never by
//! emission order or by timestamps across threads: the release that left
//! sequence `k` handed the lock to the contended acquisition that saw `k`,
//! whichever thread's stream each was written to and whatever their clocks
//! said.

use crate::model::{Blocking, DurationStats, FunctionBlocking, NotifyPair};
use locksuit_format::reader::Trace;
use locksuit_format::*;
use std::collections::{BTreeMap, HashMap};

/// Sorted samples → count, total, average, max, p50, p99 (nearest rank).
pub fn stats(mut samples: Vec<u64>) -> Option<DurationStats> {
    if samples.is_empty() {
        return None;
    }
    samples.sort_unstable();
    let n = samples.len();
    let total = samples.iter().fold(0u64, |a, &b| a.saturating_add(b));
    let rank = |p: f64| samples[((p * n as f64).ceil() as usize).clamp(1, n) - 1];
    Some(DurationStats {
        count: n as u64,
        total_ns: total,
        avg_ns: total / n as u64,
        max_ns: samples[n - 1],
        p50_ns: rank(0.50),
        p99_ns: rank(0.99),
    })
}

/// Names for what the events refer to, from the rest of the analysis.
pub struct Names<'a> {
    /// Raw lock (or cond) id → report id.
    pub lock: &'a HashMap<u32, String>,
    /// Raw site id → report site id.
    pub site: &'a dyn Fn(u32) -> Option<String>,
    /// Report site id → function name.
    pub function: &'a dyn Fn(&str) -> Option<String>,
}

/// Everything the events say, keyed by report ids.
#[derive(Default)]
pub struct Contention {
    pub blocking: Vec<Blocking>,
    pub blocking_functions: Vec<FunctionBlocking>,
    pub lock_wait: HashMap<String, DurationStats>,
    pub lock_hold: HashMap<String, DurationStats>,
    /// The same with the shim's own slow-path time taken out.
    pub lock_wait_compensated: HashMap<String, DurationStats>,
    pub lock_hold_compensated: HashMap<String, DurationStats>,
    pub site_wait: HashMap<String, DurationStats>,
    pub cond_latency: HashMap<String, DurationStats>,
    pub cond_outcomes: HashMap<String, [u64; 7]>,
    pub notifiers: HashMap<String, Vec<NotifyPair>>,
    /// Events whose lock is unknown (a lost creation record).
    pub orphans: u64,
}

struct Blocked {
    tid: u32,
    lock: u32,
    site: u32,
    seq_after: u32,
    owner: u32,
    wait: u64,
}

pub fn analyze(trace: &Trace, names: &Names) -> Contention {
    let mut out = Contention::default();
    let tid_of = |t: usize| trace.threads[t].record.tid;

    // Releases by (lock, sequence they left): who let the next one in, and
    // how much of the hold was the shim's own time.
    let mut releases: HashMap<(u32, u32), (u32, u32, u64)> = HashMap::new(); // -> (tid, site, shim)
    let mut blocked = Vec::new();
    let mut waits: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    let mut holds: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    let mut holds_compensated: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    let mut site_waits: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    let mut cond_waits = Vec::new();
    // (cond, sequence after the notify) -> (time, tid)
    let mut notifies: HashMap<(u32, u32), (u64, u32)> = HashMap::new();
    for (thread, e) in &trace.events {
        let tid = tid_of(*thread);
        match e.hdr.aux & 0xff {
            EVENT_BLOCKED | EVENT_TIMED_OUT => {
                let wait = e.time2.saturating_sub(e.time);
                waits.entry(e.lock_id).or_default().push(wait);
                site_waits.entry(e.site_id).or_default().push(wait);
                if e.hdr.aux & 0xff == EVENT_BLOCKED {
                    blocked.push(Blocked {
                        tid,
                        lock: e.lock_id,
                        site: e.site_id,
                        seq_after: e.seq2,
                        owner: e.other,
                        wait,
                    });
                }
            }
            EVENT_RELEASED => {
                releases.insert((e.lock_id, e.seq2), (tid, e.site_id, e.deadline));
                if e.time2 != 0 {
                    let hold = e.time.saturating_sub(e.time2);
                    holds.entry(e.lock_id).or_default().push(hold);
                    // `deadline` carries the shim's time inside the hold.
                    holds_compensated
                        .entry(e.lock_id)
                        .or_default()
                        .push(hold.saturating_sub(e.deadline));
                }
            }
            EVENT_COND_WAIT => cond_waits.push((tid, *e)),
            EVENT_NOTIFY => {
                notifies.insert((e.lock_id, e.seq2), (e.time, tid));
            }
            _ => {}
        }
    }

    // Who blocked whom: the owner seen on asking, else the thread whose
    // release (by sequence) handed the lock over.
    let mut rows: BTreeMap<(String, u32, u32), (u64, u64)> = BTreeMap::new();
    let mut waits_compensated: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    let mut by_function: BTreeMap<(String, String), (u64, u64)> = BTreeMap::new();
    for b in &blocked {
        let Some(lock) = names.lock.get(&b.lock) else {
            out.orphans += 1;
            continue;
        };
        let release = releases.get(&(b.lock, b.seq_after));
        // The wait lasted as long as the hold that caused it; the shim's
        // own time inside that hold came out of the wait too.
        let shim = release.map_or(0, |&(_, _, shim)| shim);
        waits_compensated
            .entry(b.lock)
            .or_default()
            .push(b.wait.saturating_sub(shim));
        let blocker = match (b.owner, release) {
            (0, Some(&(tid, _, _))) => tid,
            (owner, _) => owner,
        };
        if blocker == 0 || blocker == b.tid {
            continue; // unknown, or a semaphore the thread itself will post
        }
        let row = rows.entry((lock.clone(), blocker, b.tid)).or_default();
        row.0 += 1;
        row.1 = row.1.saturating_add(b.wait);
        let blocker_site = release
            .filter(|&&(tid, _, _)| tid == blocker)
            .and_then(|&(_, site, _)| (names.site)(site));
        let blocked_fn = (names.site)(b.site).and_then(|s| (names.function)(&s));
        let blocker_fn = blocker_site.and_then(|s| (names.function)(&s));
        if let (Some(blocker_fn), Some(blocked_fn)) = (blocker_fn, blocked_fn) {
            let f = by_function.entry((blocker_fn, blocked_fn)).or_default();
            f.0 += 1;
            f.1 = f.1.saturating_add(b.wait);
        }
    }
    out.blocking = rows
        .into_iter()
        .map(
            |((lock, blocker_tid, blocked_tid), (count, wait_ns))| Blocking {
                lock,
                blocker_tid,
                blocked_tid,
                count,
                wait_ns,
            },
        )
        .collect();
    out.blocking
        .sort_by(|a, b| b.wait_ns.cmp(&a.wait_ns).then(b.count.cmp(&a.count)));
    out.blocking_functions = by_function
        .into_iter()
        .map(
            |((blocker_function, blocked_function), (count, wait_ns))| FunctionBlocking {
                blocker_function,
                blocked_function,
                count,
                wait_ns,
            },
        )
        .collect();
    out.blocking_functions
        .sort_by_key(|f| std::cmp::Reverse(f.wait_ns));

    for (lock, samples) in waits {
        if let (Some(id), Some(s)) = (names.lock.get(&lock), stats(samples)) {
            out.lock_wait.insert(id.clone(), s);
        }
    }
    for (lock, samples) in holds {
        if let (Some(id), Some(s)) = (names.lock.get(&lock), stats(samples)) {
            out.lock_hold.insert(id.clone(), s);
        }
    }
    for (lock, samples) in holds_compensated {
        if let (Some(id), Some(s)) = (names.lock.get(&lock), stats(samples)) {
            out.lock_hold_compensated.insert(id.clone(), s);
        }
    }
    for (lock, samples) in waits_compensated {
        if let (Some(id), Some(s)) = (names.lock.get(&lock), stats(samples)) {
            out.lock_wait_compensated.insert(id.clone(), s);
        }
    }
    // Several recorded sites may be one line of the report: pool them first.
    let mut by_line: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for (site, samples) in site_waits {
        if let Some(id) = (names.site)(site) {
            by_line.entry(id).or_default().extend(samples);
        }
    }
    for (id, samples) in by_line {
        if let Some(s) = stats(samples) {
            out.site_wait.insert(id, s);
        }
    }

    // Condition variables: outcomes, and the latency from the notify a
    // waiter woke to (the newest one before it returned) to its return.
    let mut latency: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    let mut pairs: BTreeMap<(u32, u32, u32), u64> = BTreeMap::new();
    for (tid, e) in &cond_waits {
        let outcome = ((e.hdr.aux >> 8) & 0xff) as usize;
        if let Some(id) = names.lock.get(&e.lock_id) {
            out.cond_outcomes.entry(id.clone()).or_default()[outcome.min(6)] += 1;
        }
        if outcome as u32 != OUTCOME_NOTIFIED {
            continue;
        }
        let woke_by = (e.seq.wrapping_add(1)..=e.seq2)
            .rev()
            .take(4096)
            .filter_map(|s| notifies.get(&(e.lock_id, s)))
            .find(|&&(time, _)| time <= e.time2);
        if let Some(&(time, notifier)) = woke_by {
            latency
                .entry(e.lock_id)
                .or_default()
                .push(e.time2.saturating_sub(time));
            *pairs.entry((e.lock_id, notifier, *tid)).or_default() += 1;
        }
    }
    for (cond, samples) in latency {
        if let (Some(id), Some(s)) = (names.lock.get(&cond), stats(samples)) {
            out.cond_latency.insert(id.clone(), s);
        }
    }
    for ((cond, notifier_tid, waiter_tid), count) in pairs {
        if let Some(id) = names.lock.get(&cond) {
            out.notifiers
                .entry(id.clone())
                .or_default()
                .push(NotifyPair {
                    notifier_tid,
                    waiter_tid,
                    count,
                });
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use locksuit_format::reader::{HeaderInfo, ThreadInfo};

    fn thread(tid: u32) -> ThreadInfo {
        ThreadInfo {
            record: ThreadRecord {
                tid,
                ..Default::default()
            },
            name: None,
        }
    }

    pub(crate) fn ev(
        kind: u32,
        lock: u32,
        site: u32,
        seq2: u32,
        other: u32,
        t: (u64, u64),
    ) -> EventRecord {
        EventRecord {
            hdr: RecordHeader {
                kind: RecordKind::Event as u16,
                size: 64,
                aux: kind,
            },
            lock_id: lock,
            site_id: site,
            seq2,
            other,
            time: t.0,
            time2: t.1,
            ..Default::default()
        }
    }

    /// Threads 10, 20 and 30 (indexes 0, 1, 2) and these events.
    pub(crate) fn trace(events: Vec<(usize, EventRecord)>) -> Trace {
        Trace {
            header: HeaderInfo {
                version: FORMAT_VERSION,
                pid: 1,
                ppid: 0,
                flags: FLAG_COMPLETE,
                exit_code: None,
                hold_sample_period: 0,
                start_unix_ns: 0,
                start_mono_ns: 0,
                end_mono_ns: 0,
                dropped_records: 0,
                dropped_ops: 0,
                max_blocks: 0,
                blocks_reserved: 0,
                tsc_khz: 0,
                exe: String::new(),
            },
            threads: vec![thread(10), thread(20), thread(30)],
            locks: Vec::new(),
            destroys: Vec::new(),
            sites: Vec::new(),
            counters: Vec::new(),
            conds: Vec::new(),
            events,
            modules: Vec::new(),
            warnings: Vec::new(),
        }
    }

    fn rows(events: Vec<(usize, EventRecord)>) -> Vec<(u32, u32, u64, u64)> {
        let locks: HashMap<u32, String> = [(5, "L1".to_string())].into();
        let site = |raw: u32| Some(format!("S{raw}"));
        let function = |s: &str| Some(format!("fn_{s}"));
        let c = analyze(
            &trace(events),
            &Names {
                lock: &locks,
                site: &site,
                function: &function,
            },
        );
        let mut r: Vec<_> = c
            .blocking
            .iter()
            .map(|b| (b.blocker_tid, b.blocked_tid, b.count, b.wait_ns))
            .collect();
        r.sort();
        r
    }

    /// Thread 10 holds lock 5; thread 20 asks and waits 200; 10's release
    /// leaves sequence 1 and 20 gets the lock seeing 1. Then 30 waits 50 for
    /// 20, whose release leaves 2. No owner was seen on asking, so only the
    /// sequences say who let whom in.
    fn scenario() -> Vec<(usize, EventRecord)> {
        vec![
            (0, ev(EVENT_RELEASED, 5, 1, 1, 1, (300, 0))),
            (1, ev(EVENT_BLOCKED, 5, 2, 1, 0, (100, 300))),
            (1, ev(EVENT_RELEASED, 5, 2, 2, 1, (400, 300))),
            (2, ev(EVENT_BLOCKED, 5, 3, 2, 0, (350, 400))),
        ]
    }

    #[test]
    fn blockers_come_from_sequences_not_emission_order() {
        let expected = vec![(10, 20, 1, 200), (20, 30, 1, 50)];
        assert_eq!(rows(scenario()), expected);
        // Emitted in the opposite order: a thread's release written after the
        // next holder's acquisition.
        let mut reversed = scenario();
        reversed.reverse();
        assert_eq!(rows(reversed), expected);
        // Every rotation gives the same answer.
        for k in 1..4 {
            let mut rotated = scenario();
            rotated.rotate_left(k);
            assert_eq!(rows(rotated), expected, "rotation {k}");
        }
    }

    #[test]
    fn clock_skew_between_threads_does_not_change_who_blocked_whom() {
        // Thread 10's clock runs 1 s ahead of the others: its release seems
        // to happen long after the acquisition it enabled.
        let mut skewed = scenario();
        skewed[0].1.time += 1_000_000_000;
        assert_eq!(rows(skewed), vec![(10, 20, 1, 200), (20, 30, 1, 50)]);
    }

    #[test]
    fn the_owner_seen_on_asking_wins_over_the_release_match() {
        // Thread 30 asked while 10 held it (seen on asking), but 20 barged in
        // and handed it over: the wait is 10's doing.
        let events = vec![
            (0, ev(EVENT_RELEASED, 5, 1, 1, 1, (300, 0))),
            (2, ev(EVENT_BLOCKED, 5, 3, 2, 10, (100, 400))),
            (1, ev(EVENT_RELEASED, 5, 2, 2, 1, (400, 0))),
        ];
        assert_eq!(rows(events), vec![(10, 30, 1, 300)]);
    }

    #[test]
    fn percentiles_use_nearest_rank() {
        let s = stats((1..=100).collect()).unwrap();
        assert_eq!(
            (s.count, s.total_ns, s.avg_ns, s.max_ns),
            (100, 5050, 50, 100)
        );
        assert_eq!((s.p50_ns, s.p99_ns), (50, 99));
        let one = stats(vec![7]).unwrap();
        assert_eq!((one.p50_ns, one.p99_ns), (7, 7));
        assert!(stats(Vec::new()).is_none());
    }
}
