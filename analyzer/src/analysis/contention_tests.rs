//! Unit tests of `contention.rs`.

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
            block_min_us: 50,
            switches_lost: 0,
            cpus: 2,
            policy_min_wait_us: 0,
            events_filtered: 0,
            control: 0,
            data_sample_every: 1,
            data_sample_first: 0,
            confined_mono_ns: 0,
            own_calls_refused: 0,
            cut_mono_ns: 0,
            shim_notes: Vec::new(),
            exe: String::new(),
        },
        threads: vec![thread(10), thread(20), thread(30)],
        locks: Vec::new(),
        destroys: Vec::new(),
        sites: Vec::new(),
        py_frames: Vec::new(),
        counters: Vec::new(),
        conds: Vec::new(),
        edges: Vec::new(),
        events: Events::from_records(
            &events
                .into_iter()
                .map(|(thread, mut e)| {
                    e.tid = 10 * (thread as u32 + 1);
                    e
                })
                .collect::<Vec<_>>(),
        ),
        modules: Vec::new(),
        policy: None,
        snapshots: Vec::new(),
        snapshot_stacks: Vec::new(),
        access_summary: None,
        accesses: Vec::new(),
        site_ratios: Vec::new(),
        warnings: Vec::new(),
    }
}

fn rows(events: Vec<(usize, EventRecord)>) -> Vec<(u32, u32, u64, u64)> {
    let lock = |raw: u32| (raw == 5).then_some(LockId(0));
    let cond = |_: u32| None;
    let site = |raw: u32| Some(SiteId(raw));
    let function = |s: SiteId| Some(format!("fn_{s}"));
    let c = analyze(
        &trace(events),
        &Names {
            lock: &lock,
            cond: &cond,
            site: &site,
            function: &function,
        },
        Targets {
            locks: &mut [],
            families: &mut [],
            sites: &mut [],
            conds: &mut [],
        },
        (
            &mut crate::analysis::periods::Collector::default(),
            &mut crate::analysis::reasons::Collector::default(),
            &mut crate::analysis::misuse::Collector::default(),
        ),
        &mut || {},
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
