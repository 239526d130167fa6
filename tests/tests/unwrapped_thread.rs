//! A thread created behind the shim's back (the C library's own
//! pthread_create, found with dlsym, bypassing the hook) is still recorded:
//! its acquisitions count, and it appears in threads[] without a parent.
//! A normally created thread, for contrast, has main as its parent.

use locksuit_tests::*;

const UNWRAPPED_USES: u64 = 70;
const WRAPPED_USES: u64 = 45;

#[test]
fn thread_created_with_real_pthread_create() {
    let bin = build_c_with(
        &c_dir().join("unwrapped_thread.c"),
        "unwrapped_thread",
        &["-ldl"],
        &[],
    );
    let dir = fresh_dir("unwrapped_thread");
    let out = run_under_shim(&bin, &[] as &[&str], &dir);
    assert_success(&out, "unwrapped_thread under the shim");
    let stdout = stdout_str(&out);
    assert_eq!(
        stdout_value(&stdout, "real-create-is-libc"),
        "1",
        "test premise: the thread was created by libc's pthread_create, not the hook"
    );
    let main_tid: u64 = stdout_value(&stdout, "main-tid").parse().unwrap();
    let unwrapped_tid: u64 = stdout_value(&stdout, "unwrapped-tid").parse().unwrap();
    let wrapped_tid: u64 = stdout_value(&stdout, "wrapped-tid").parse().unwrap();

    let trace = only_trace(&dir);
    let report = report_json(&[&trace], None);
    let p = only_process(&report);
    assert_eq!(p["complete"], Value::Bool(true));

    let lock = lock_by_address(p, &stdout_value(&stdout, "lock"));
    assert_eq!(
        u64_of(lock, "acquisitions"),
        UNWRAPPED_USES + WRAPPED_USES,
        "all acquisitions, including the unwrapped thread's: {}",
        short(lock)
    );
    assert_eq!(u64_of(lock, "threads"), 2, "two threads engaged the lock");
    let mut by_thread: Vec<(u64, u64)> = arr(lock, "engagements_by_thread")
        .iter()
        .map(|e| (u64_of(e, "tid"), u64_of(e, "count")))
        .collect();
    by_thread.sort();
    let mut want = vec![(unwrapped_tid, UNWRAPPED_USES), (wrapped_tid, WRAPPED_USES)];
    want.sort();
    assert_eq!(by_thread, want, "engagements_by_thread (tid, count)");

    let main = thread_by_tid(p, main_tid);
    assert_eq!(
        main["main"],
        Value::Bool(true),
        "main thread: {}",
        short(main)
    );
    assert_eq!(
        u64_of(main, "joins"),
        2,
        "main joined both threads: {}",
        short(main)
    );

    let unwrapped = thread_by_tid(p, unwrapped_tid);
    assert!(
        unwrapped["parent_tid"].is_null(),
        "a thread created behind the hook has no known parent: {}",
        short(unwrapped)
    );
    assert_eq!(
        unwrapped["main"],
        Value::Bool(false),
        "{}",
        short(unwrapped)
    );
    assert_eq!(
        u64_of(unwrapped, "acquisitions"),
        UNWRAPPED_USES,
        "unwrapped thread's acquisitions: {}",
        short(unwrapped)
    );
    assert_eq!(
        unwrapped["ended"],
        Value::Bool(true),
        "the unwrapped thread ended before the process: {}",
        short(unwrapped)
    );

    let wrapped = thread_by_tid(p, wrapped_tid);
    assert_eq!(
        wrapped["parent_tid"].as_u64(),
        Some(main_tid),
        "a hooked pthread_create records main as the parent: {}",
        short(wrapped)
    );
    assert_eq!(
        u64_of(wrapped, "acquisitions"),
        WRAPPED_USES,
        "{}",
        short(wrapped)
    );
    assert_eq!(wrapped["ended"], Value::Bool(true), "{}", short(wrapped));
}
