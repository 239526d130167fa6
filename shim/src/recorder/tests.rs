//! The recorder driven directly, without LD_PRELOAD: every call a hook would
//! make, then the trace read back through the format's own reader.

use super::*;
use crate::guard::HookGuard;
use core::sync::atomic::Ordering;
use locksuit_format::read_trace;

const SITE_A: u64 = 0x1111;
const SITE_B: u64 = 0x2222;

/// Stand-ins for three mutexes: zeroed memory laid out as glibc's
/// pthread_mutex_t (the recorder reads its attributes when it first sees
/// one, and writes its first word back as it was before that). Writable, as
/// every real lock is: an immutable static would be read-only memory.
static MUTEXES: [[core::sync::atomic::AtomicU64; 5]; 3] =
    [const { [const { core::sync::atomic::AtomicU64::new(0) }; 5] }; 3];

/// A call from `site` whose caller cannot be known (no real stack behind it).
fn from(site: u64) -> Caller {
    Caller::new(site as usize, 0)
}

fn engage(g: &HookGuard, addr: u64, site: u64, how: How) {
    let p = prepare(g, addr, ObjectKind::Mutex, MODE_EXCLUSIVE, from(site)).expect("prepared");
    acquired(g, &p, how, Hold::Exclusive);
}

// One test: the recorder is process-global and starts once per process.
#[test]
fn records_counts_identity_and_exit_without_preload() {
    let (lock, other) = (MUTEXES[0].as_ptr() as u64, MUTEXES[1].as_ptr() as u64);
    let third = MUTEXES[2].as_ptr() as u64;
    let dir = std::env::temp_dir().join(format!("locksuit-recorder-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // SAFETY-free in edition 2021; nothing else in this binary reads the env concurrently.
    std::env::set_var("LOCKSUIT_DIR", &dir);
    let g = HookGuard::enter().expect("the recorder starts on first use");
    assert!(
        HookGuard::enter().is_none(),
        "the guard refuses re-entry on the same thread"
    );

    // Three uncontended engagements at site A, nested with one of the other lock.
    for _ in 0..3 {
        engage(&g, lock, SITE_A, How::Uncontended);
        engage(&g, other, SITE_B, How::Uncontended);
        // Released out of order: the held stack must still find each.
        released(&g, lock, 0);
        released(&g, other, 0);
    }
    // A trylock of `other` while holding `lock`: an edge that cannot block.
    engage(&g, lock, SITE_A, How::Uncontended);
    engage(&g, other, SITE_A, How::Tried);
    released(&g, other, 0);
    released(&g, lock, 0);
    // One contended engagement at site B with a known wait.
    engage(
        &g,
        lock,
        SITE_B,
        How::Contended {
            wait_ns: 5_000,
            now: now_ns(),
        },
    );
    released(&g, lock, 0);
    // A failed trylock at site B.
    let p = prepare(&g, lock, ObjectKind::Mutex, MODE_EXCLUSIVE, from(SITE_B)).unwrap();
    try_failed(&p);
    // Destroyed and initialised again at the same address: a new lock.
    object_destroyed(&g, lock);
    object_initialized(&g, lock, ObjectKind::Mutex, from(SITE_A), Some(false));
    engage(&g, lock, SITE_A, How::Uncontended);
    released(&g, lock, 0);

    // The short release path (untimed.rs) must decline what it does not
    // handle. A recursive hold: the inner release keeps the lock, so its
    // release sequence must not move.
    let seq_of = |g: &HookGuard| {
        let p = prepare(g, third, ObjectKind::Mutex, MODE_EXCLUSIVE, from(SITE_A)).unwrap();
        p.slot.seq.load(Ordering::Relaxed)
    };
    engage(&g, third, SITE_A, How::Uncontended);
    let seq_before = seq_of(&g);
    engage(&g, third, SITE_A, How::Uncontended);
    released(&g, third, 0);
    assert!(g.thread().held().holds(third), "the outer hold remains");
    assert_eq!(seq_of(&g), seq_before, "an inner release releases nothing");
    released(&g, third, 0);
    assert!(!g.thread().held().holds(third));
    assert_eq!(seq_of(&g), seq_before.wrapping_add(1));
    // A release that finds a waiter is a task switch, with its event.
    engage(&g, third, SITE_B, How::Uncontended);
    let p = prepare(&g, third, ObjectKind::Mutex, MODE_EXCLUSIVE, from(SITE_B)).unwrap();
    p.slot.begin_wait(p.slot.seq.load(Ordering::Relaxed));
    released(&g, third, 0);
    p.slot.end_wait();

    process_exit(Some(7));
    drop(g);

    let trace_path = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "trace"))
        .expect("a trace was written");
    let trace = read_trace(&trace_path).expect("readable");
    assert!(trace.warnings.is_empty(), "{:?}", trace.warnings);
    assert!(trace.header.complete());
    assert_eq!(trace.header.exit_code, Some(7));
    // The refused re-entry above is counted, as a signal handler's call would be.
    assert_eq!(trace.header.dropped_ops, 1);
    assert_eq!(trace.header.dropped_records, 0);

    let at_lock: Vec<&LockRecord> = trace.locks.iter().filter(|l| l.address == lock).collect();
    assert_eq!(at_lock.len(), 2, "re-init makes a second identity");
    assert_eq!(at_lock[0].origin, ORIGIN_FIRST_USE);
    assert_eq!(at_lock[1].origin, ORIGIN_INIT);
    assert_eq!(trace.destroys.len(), 1);
    assert_eq!(trace.destroys[0].id, at_lock[0].id);

    let site_id = |ret: u64| {
        trace
            .sites
            .iter()
            .find(|s| s.frames[0] == ret)
            .map(|s| s.id)
            .unwrap()
    };
    let counter = |lock: u32, site: u64| {
        trace
            .counters
            .iter()
            .map(|(_, c)| c)
            .find(|c| c.lock_id == lock && c.site_id == site_id(site))
            .copied()
            .unwrap_or_default()
    };
    let first = counter(at_lock[0].id, SITE_A);
    assert_eq!(
        (first.engagements, first.contended, first.task_switches),
        (4, 0, 0)
    );
    assert_eq!(
        first.hold_samples, 0,
        "uncontended holds are not timed by default"
    );
    let contended = counter(at_lock[0].id, SITE_B);
    assert_eq!((contended.engagements, contended.contended), (1, 1));
    assert_eq!(contended.wait_ns, 5_000);
    assert_eq!(contended.task_switches, 1, "waiting is a task switch");
    assert_eq!(contended.hold_samples, 1, "a contended hold is timed");
    assert_eq!(contended.try_failures, 1);
    assert_eq!(counter(at_lock[1].id, SITE_A).engagements, 1);
    let other_lock = trace.locks.iter().find(|l| l.address == other).unwrap();
    assert_eq!(counter(other_lock.id, SITE_B).engagements, 3);
    assert_eq!(
        other_lock.mutex_type, 0,
        "a zeroed mutex reads as PTHREAD_MUTEX_NORMAL"
    );
    assert_eq!(other_lock.hdr.aux, 0, "and not process-shared");
    let third_lock = trace.locks.iter().find(|l| l.address == third).unwrap();
    let recursive = counter(third_lock.id, SITE_A);
    assert_eq!((recursive.engagements, recursive.task_switches), (2, 0));
    let handed = counter(third_lock.id, SITE_B);
    assert_eq!((handed.engagements, handed.task_switches), (1, 1));
    assert_eq!(
        handed.hold_samples, 0,
        "an untimed hold stays untimed when it ends with a waiter"
    );
    assert_eq!(trace.threads.len(), 1);

    // Lock order: `other` was taken under `lock`, three times blocking (site
    // A then B) and once by a trylock (A then A). `third`'s recursive
    // re-acquisition is no edge.
    let mut edges: Vec<(u32, u32, u64, u32)> = trace
        .edges
        .iter()
        .map(|(_, e)| (e.from_lock, e.to_lock, e.count, e.hdr.aux))
        .collect();
    edges.sort();
    assert_eq!(
        edges,
        vec![
            (at_lock[0].id, other_lock.id, 1, EDGE_TRY),
            (at_lock[0].id, other_lock.id, 3, 0)
        ]
    );
    let blocking = trace.edges.iter().find(|(_, e)| e.hdr.aux == 0).unwrap().1;
    assert_eq!(
        (blocking.from_site, blocking.to_site),
        (site_id(SITE_A), site_id(SITE_B))
    );
    assert_eq!(blocking.gates, [0; EDGE_GATES], "nothing else was held");
    let _ = std::fs::remove_dir_all(&dir);
}
