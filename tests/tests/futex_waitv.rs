//! futex_waitv(2) made through `syscall()` (tests/c/futex_waitv.c): a wait
//! on one word is a wait on that word, as FUTEX_WAIT's is (the lock named
//! by its variable, the wait within 10 % of the program's own measures,
//! the waker as the thread that blocked it, the waiting line); a wait on
//! several words is a wait on the word whose index the call returned (the
//! one its waker woke), and on no other.

use locksuit_tests::*;
use serde_json::Value;

#[test]
fn a_futex_waitv_is_a_wait_on_the_word_that_ended_it() {
    let bin = build_c("futex_waitv");
    let dir = fresh_dir("futex_waitv");
    let out = run_under_shim(&bin, &[] as &[&str], &dir);
    assert_success(&out, "futex_waitv");
    // The shim changes nothing the program does: its status, stderr and
    // the lines it prints (their figures are times) are a plain run's.
    assert_same_output_keys(&run_plain(&bin, &[] as &[&str]), &out);
    let text = stdout_str(&out);
    let value = |key: &str| -> u64 { stdout_value(&text, key).parse().unwrap() };
    let report = report_json(&[&dir], None);
    let p = only_process(&report);
    let line = line_of("futex_waitv.c", "marker: waitv");
    // One word, then two of which the main thread woke the second.
    assert_eq!(value("two_index"), 1, "the program woke the second word");
    for (case, word_id) in [("one", "&one_word"), ("two", "&two_words[1]")] {
        let (held, waited) = (
            value(&format!("{case}_held_ns")),
            value(&format!("{case}_waited_ns")),
        );
        let word = locks(p)
            .iter()
            .find(|l| str_of(l, "id") == word_id)
            .unwrap_or_else(|| panic!("{case}: no lock {word_id}: {}", short(&p["locks"])));
        assert_eq!(str_of(word, "kind"), "futex");
        assert_eq!(u64_of(word, "contended"), 1, "{case}: {}", short(word));
        let wait = u64_of(word, "wait_ns");
        assert!(
            wait >= held - held / 10 && wait <= waited + waited / 10,
            "{case}: {wait} ns reported; the main thread held on {held} ns after it saw \
             the waiter blocked, the waiter measured {waited} ns"
        );
        assert!(
            sites_of_lock(p, id_of(word)).iter().any(|s| site_is_at(
                s,
                "waitv",
                "futex_waitv.c",
                line
            )),
            "{case}: the wait is at the waiting line {line}: {}",
            short(&p["sites"])
        );
        let blocked: Vec<&Value> = arr(p, "blocking")
            .iter()
            .filter(|b| b["lock"] == id_of(word))
            .collect();
        assert!(
            blocked.len() == 1
                && u64_of(blocked[0], "blocker_tid") == value("main_tid")
                && u64_of(blocked[0], "blocked_tid") == value(&format!("{case}_waiter_tid")),
            "{case}: the main thread's wake ended the waiter's wait: {blocked:?}"
        );
    }
    // The word nobody woke was waited on, but no wait on it is counted.
    for l in locks(p)
        .iter()
        .filter(|l| str_of(l, "id").starts_with("&two_words") && str_of(l, "id") != "&two_words[1]")
    {
        assert_eq!(u64_of(l, "contended"), 0, "{}", short(l));
    }
}
