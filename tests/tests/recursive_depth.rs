//! A lock taken again by the thread that holds it (a recursive mutex, a
//! read lock) is a count on its hold, so recursion of any depth is
//! recorded in full: 50 levels used to drop 18 operations ("too many
//! threads, locks or nesting") per descent, as each level took one of the
//! 32 entries the shim tracks.

use locksuit_format::reader::read_trace;
use locksuit_tests::*;

const ROUNDS: u64 = 2;

fn check_depth(depth: u64) {
    let bin = build_c("recursive_depth");
    let args = [depth.to_string()];
    let plain = run_plain(&bin, &args);
    assert_success(&plain, "recursive_depth without the shim");
    let dir = fresh_dir(&format!("recursive_depth_{depth}"));
    let shim = run_under_shim(&bin, &args, &dir);
    assert_eq!(
        shim.status.code(),
        plain.status.code(),
        "{}",
        describe(&shim)
    );
    assert_eq!(stable_stdout(&shim), stable_stdout(&plain));
    assert!(
        shim.stderr.is_empty(),
        "depth {depth}: nothing dropped, nothing said\n{}",
        describe(&shim)
    );

    let stdout = stdout_str(&shim);
    let uses = |key: &str| -> u64 { stdout_value(&stdout, key).parse().unwrap() };
    assert_eq!(uses("recursive-uses"), ROUNDS * depth);
    let trace = only_trace(&dir);
    let report = report_json(&[&trace], None);
    let p = only_process(&report);
    assert_eq!(p["complete"], Value::Bool(true));
    assert_eq!(
        u64_of(p, "dropped_events"),
        0,
        "depth {depth}: no operation dropped: {}",
        short(p)
    );
    let recursive = lock_by_address(p, &stdout_value(&stdout, "recursive"));
    assert_eq!(
        u64_of(recursive, "acquisitions"),
        uses("recursive-uses") + 1,
        "every level, and the final trylock: {}",
        short(recursive)
    );
    assert_eq!(u64_of(recursive, "task_switches"), 0);
    let inner = lock_by_address(p, &stdout_value(&stdout, "inner"));
    assert_eq!(u64_of(inner, "acquisitions"), uses("inner-uses"));
    let rwlock = lock_by_address(p, &stdout_value(&stdout, "rwlock"));
    assert_eq!(
        u64_of(&rwlock["read"], "acquisitions"),
        uses("read-uses"),
        "{}",
        short(rwlock)
    );

    // The one lock-order edge: `inner` under the recursive mutex, once a
    // round. A re-acquisition is no edge, to itself or to anything.
    let t = read_trace(&trace).unwrap();
    let recursive_id = trace_lock_id(&t, parse_addr(&stdout_value(&stdout, "recursive")));
    let inner_id = trace_lock_id(&t, parse_addr(&stdout_value(&stdout, "inner")));
    let edges: Vec<(u32, u32, u64)> = t
        .edges
        .iter()
        .map(|(_, e)| (e.from_lock, e.to_lock, e.count))
        .collect();
    assert_eq!(
        edges,
        vec![(recursive_id, inner_id, ROUNDS)],
        "depth {depth}"
    );
}

#[test]
fn a_recursive_mutex_locked_50_deep_drops_nothing() {
    check_depth(50);
}

#[test]
fn a_recursive_mutex_locked_1000_deep_drops_nothing() {
    check_depth(1000);
}
