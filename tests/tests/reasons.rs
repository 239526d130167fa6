//! Why each wait ended: every reason code forced once by
//! tests/c/reasons.c (which checks each result itself) and found on its
//! own object, its line and its thread.

use locksuit_tests::*;
use serde_json::Value;

fn reasons(v: &Value) -> Vec<(String, u64)> {
    arr(v, "reasons")
        .iter()
        .map(|r| (str_of(r, "reason").to_string(), u64_of(r, "count")))
        .collect()
}

fn of(pairs: &[(&str, u64)]) -> Vec<(String, u64)> {
    pairs.iter().map(|(r, n)| (r.to_string(), *n)).collect()
}

#[test]
fn every_reason_is_counted_on_its_object_line_and_thread() {
    let bin = build_c("reasons");
    let dir = fresh_dir("reasons");
    let plain = run_plain(&bin, &[] as &[&str]);
    assert_success(&plain, "reasons without the shim");
    let out = run_under_shim(&bin, &[] as &[&str], &dir);
    assert_success(&out, "reasons");
    assert_eq!(stdout_str(&out), stdout_str(&plain));
    let report = report_json(&[&dir], None);
    let p = only_process(&report);
    let lock = |id: &str| reasons(lock_by_id(p, id));
    assert_eq!(lock("&waited"), of(&[("acquired-after-wait", 1)]));
    assert_eq!(lock("&timed"), of(&[("timed-out", 1)]));
    assert_eq!(
        lock("&robust"),
        of(&[("acquired-after-wait", 1), ("owner-died", 1)])
    );
    assert_eq!(lock("&checked"), of(&[("deadlock-refused", 1)]));
    assert_eq!(lock("&empty"), of(&[("interrupted", 1)]));
    assert_eq!(lock("&tried"), of(&[("try-failed", 1)]));
    let cond = |id: &str| {
        let c = arr(p, "conds")
            .iter()
            .find(|c| c["id"] == id)
            .unwrap_or_else(|| panic!("no condition variable {id}"));
        reasons(c)
    };
    assert_eq!(
        cond("&cv"),
        of(&[("notified-by-broadcast", 1), ("notified-by-signal", 1)])
    );
    assert_eq!(cond("&cv_cancel"), of(&[("cancelled", 1)]));
    // By line: the waiter's lock call.
    let line = line_of("reasons.c", "marker: acquired after wait");
    let site = sites(p)
        .iter()
        .find(|s| s["line"] == line && s["file"] == "reasons.c")
        .expect("the waiter's line");
    assert_eq!(reasons(site), of(&[("acquired-after-wait", 1)]));
    // By thread: main forced five of them.
    let main = main_thread(p);
    let main_reasons: Vec<String> = reasons(main).into_iter().map(|(r, _)| r).collect();
    for r in ["timed-out", "owner-died", "deadlock-refused", "interrupted"] {
        assert!(main_reasons.iter().any(|m| m == r), "{r}: {main_reasons:?}");
    }
    // The text report shows the breakdown where waits did not simply end.
    let text = stdout_str(&run_locksuit(&[
        "report",
        dir.to_str().unwrap(),
        "--width",
        "100",
    ]));
    assert!(text.contains("Why waits ended"), "{text}");
    assert!(text.contains("deadlock-refused 1"), "{text}");
}
