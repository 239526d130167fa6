//! Timed mutex, rwlock and semaphore waits carry their deadline in their
//! events (as condition waits do): the absolute time the caller passed, in
//! nanoseconds of the clock it named.

use locksuit_format::reader::read_trace;
use locksuit_format::*;
use locksuit_tests::*;

#[test]
fn timed_waits_record_their_deadlines() {
    let bin = build_c("timed_waits");
    let dir = fresh_dir("timed_waits");
    let out = run_under_shim(&bin, &[] as &[&str], &dir);
    assert_success(&out, "timed_waits under the shim");
    let stdout = stdout_str(&out);
    let trace = only_trace(&dir);
    let t = read_trace(&trace).unwrap_or_else(|e| panic!("{}: {e}", trace.display()));
    for (name, kind) in [
        ("timedlock", EVENT_TIMED_OUT),
        ("timedwrlock", EVENT_TIMED_OUT),
        ("sem_timedwait", EVENT_TIMED_OUT),
        ("clocklock", EVENT_BLOCKED),
    ] {
        let line = stdout_value(&stdout, name);
        let (addr, deadline) = line.split_once(' ').expect("address and deadline");
        let deadline: u64 = deadline.parse().expect("deadline in ns");
        let addr = parse_addr(addr);
        let id = trace_lock_id(&t, addr);
        let deadlines: Vec<u64> = t
            .events
            .iter()
            .filter(|e| e.lock_id == id && e.hdr.aux & 0xff == kind)
            .map(|e| e.deadline)
            .collect();
        assert!(
            deadlines.contains(&deadline),
            "{name}: an event of kind {kind} with deadline {deadline}; found {deadlines:?}"
        );
    }
}
