//! Locks made through a helper several lines call (tests/c/helper_made.c,
//! as pigz's yarn makes all its locks in new_lock): each caller's locks are
//! a family of their own, named by the caller's line, so a worker's own
//! locks are seen as one thread's each although the helper also makes
//! shared ones, and locks of the two kinds are never compared for
//! asymmetric contention (issue 32: found on pigz).

use locksuit_tests::*;

#[test]
fn each_caller_of_a_lock_making_helper_makes_a_family() {
    let bin = build_c("helper_made");
    let dir = fresh_dir("helper_made");
    let out = run_under_shim(&bin, &[] as &[&str], &dir);
    assert_success(&out, "helper_made");
    let stdout = stdout_str(&out);
    let report = report_json(&[&only_trace(&dir)], None);
    let p = only_process(&report);
    let addresses = |what: &str| -> Vec<String> {
        stdout
            .lines()
            .filter_map(|l| l.strip_prefix(&format!("{what} ")))
            .map(str::to_string)
            .collect()
    };
    let name_of = |addr: &str| str_of(lock_by_address(p, addr), "id").to_string();
    let own_line = line_of("helper_made.c", "/* @make-own */");
    let shared_line = line_of("helper_made.c", "/* @make-shared */");
    let own: Vec<String> = addresses("own").iter().map(|a| name_of(a)).collect();
    let shared: Vec<String> = addresses("shared").iter().map(|a| name_of(a)).collect();
    assert_eq!(own.len(), 4);
    for name in &own {
        assert!(
            name.starts_with(&format!("work@helper_made.c:{own_line}#")),
            "named by the line that called the helper: {name}"
        );
    }
    for name in &shared {
        assert!(
            name.starts_with(&format!("main@helper_made.c:{shared_line}#")),
            "{name}"
        );
    }
    // The workers' own locks: one thread each, one finding for them all.
    let alone: Vec<&Value> = findings(p)
        .iter()
        .filter(|f| f["kind"] == "single-thread-lock")
        .collect();
    assert_eq!(alone.len(), 1, "{}", short(&p["findings"]));
    let mut listed: Vec<String> = arr(alone[0], "locks")
        .iter()
        .map(|l| l.as_str().unwrap().to_string())
        .collect();
    listed.sort();
    let mut expected = own.clone();
    expected.sort();
    assert_eq!(listed, expected);
    // Never a comparison of an own lock with a shared one.
    for f in findings(p)
        .iter()
        .filter(|f| f["kind"] == "asymmetric-contention")
    {
        let message = str_of(f, "message");
        let mentions = |names: &[String]| names.iter().any(|n| message.contains(n.as_str()));
        assert!(!(mentions(&own) && mentions(&shared)), "{message}");
    }
}
