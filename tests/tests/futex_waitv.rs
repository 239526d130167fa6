//! futex_waitv(2) made through `syscall()` (tests/c/futex_waitv.c): a wait
//! on one word is a wait on that word, as FUTEX_WAIT's is (the lock named
//! by its variable, the wait within 10 % of the program's own measures,
//! the waker as the thread that blocked it, the waiting line); a wait on
//! several words, which the report cannot pin to one, is a blocking call
//! of class `sync` of the thread's, and makes no wait on either word.

use locksuit_tests::*;
use serde_json::Value;

#[test]
fn a_futex_waitv_on_one_word_is_a_wait_on_that_word() {
    let bin = build_c("futex_waitv");
    let dir = fresh_dir("futex_waitv");
    let out = run_under_shim(&bin, &[] as &[&str], &dir);
    assert_success(&out, "futex_waitv");
    // The shim changes nothing the program does: its status, stderr and
    // the lines it prints (their figures are times) are a plain run's.
    assert_same_output_keys(&run_plain(&bin, &[] as &[&str]), &out);
    let text = stdout_str(&out);
    let value = |key: &str| -> u64 { stdout_value(&text, key).parse().unwrap() };
    let (held, waited) = (value("one_held_ns"), value("one_waited_ns"));
    let report = report_json(&[&dir], None);
    let p = only_process(&report);
    let word = locks(p)
        .iter()
        .find(|l| str_of(l, "id") == "&one_word")
        .unwrap_or_else(|| panic!("no lock &one_word: {}", short(&p["locks"])));
    assert_eq!(str_of(word, "kind"), "futex");
    assert_eq!(u64_of(word, "contended"), 1, "{}", short(word));
    let wait = u64_of(word, "wait_ns");
    assert!(
        wait >= held - held / 10 && wait <= waited + waited / 10,
        "{wait} ns reported; the main thread held on {held} ns after it saw the waiter \
         blocked, the waiter measured {waited} ns"
    );
    let line = line_of("futex_waitv.c", "marker: waitv");
    assert!(
        sites_of_lock(p, id_of(word))
            .iter()
            .any(|s| site_is_at(s, "waitv", "futex_waitv.c", line)),
        "the wait is at the waiting line {line}: {}",
        short(&p["sites"])
    );
    let blocked: Vec<&Value> = arr(p, "blocking")
        .iter()
        .filter(|b| b["lock"] == id_of(word))
        .collect();
    assert!(
        blocked.len() == 1
            && u64_of(blocked[0], "blocker_tid") == value("main_tid")
            && u64_of(blocked[0], "blocked_tid") == value("one_waiter_tid"),
        "the main thread's wake ended the waiter's wait: {blocked:?}"
    );
    // Two words: no wait on either (which one ends it is known only
    // after it), but the thread's time in the call is a blocking call.
    assert_eq!(value("two_index"), 1, "the program woke the second word");
    for l in locks(p)
        .iter()
        .filter(|l| str_of(l, "id").starts_with("&two_words"))
    {
        assert_eq!(u64_of(l, "contended"), 0, "{}", short(l));
    }
    let sync_ns: u64 = arr(p, "threads")
        .iter()
        .flat_map(|t| arr(t, "blocking_classes"))
        .filter(|c| c["class"] == "sync")
        .map(|c| u64_of(c, "total_ns"))
        .sum();
    let two = value("two_waited_ns");
    assert!(
        sync_ns >= two - two / 10,
        "the two-word wait ({two} ns) is in the threads' sync time ({sync_ns} ns)"
    );
}
