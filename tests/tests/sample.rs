//! The bundled example (examples/sample.c, used by the README's first command)
//! builds, runs unchanged under the shim, and shows what it is meant to show.

use locksuit_tests::*;

#[test]
fn sample_program() {
    let src = workspace_root().join("examples").join("sample.c");
    let bin = build_c_source(&src, "sample");
    let plain = run_plain(&bin, &[] as &[&str]);
    assert_success(&plain, "sample without the shim");
    let dir = fresh_dir("sample");
    let out = run_under_shim(&bin, &[] as &[&str], &dir);
    assert_success(&out, "sample under the shim");
    assert_eq!(
        stdout_str(&out),
        stdout_str(&plain),
        "same output under the shim"
    );

    let trace = only_trace(&dir);
    let report = report_json(&[&trace], None);
    let p = only_process(&report);

    // The four per-worker locks are the ones one thread each took: in one
    // run an observation, not the unnecessary-lock verdict. They are one
    // family (mutexes taken at the same line), so one finding lists them.
    let line = line_in(&src, "check(pthread_mutex_lock(&w->own_lock)");
    assert!(
        findings(p).iter().all(|f| f["kind"] != "unnecessary-lock"),
        "one run is no verdict: {}",
        short(&p["findings"])
    );
    let unnecessary: Vec<&Value> = findings(p)
        .iter()
        .filter(|f| f["kind"] == "single-thread-lock")
        .collect();
    assert_eq!(
        unnecessary.len(),
        1,
        "one single-thread-lock finding for the workers' locks: {}",
        short(&p["findings"])
    );
    assert_eq!(unnecessary[0]["evidence"]["basis"], "run");
    assert_eq!(unnecessary[0]["evidence"]["runs"], 1);
    let listed = arr(unnecessary[0], "locks");
    assert_eq!(
        listed.len(),
        4,
        "one lock per worker: {}",
        short(unnecessary[0])
    );
    assert_eq!(u64_of(unnecessary[0], "family_size"), 4);
    assert_eq!(
        unnecessary[0]["lock"], listed[0],
        "`lock` is the first of them"
    );
    for id in listed {
        let lock = lock_by_id(p, id.as_str().expect("lock ids are strings"));
        assert_eq!(u64_of(lock, "threads"), 1, "{}", short(lock));
        assert_eq!(u64_of(lock, "acquisitions"), 20_000, "{}", short(lock));
    }
    for f in &unnecessary {
        let sites = finding_sites(p, f);
        assert!(
            sites
                .iter()
                .all(|s| site_is_at(s, "count_own_item", "sample.c", line)),
            "finding points at count_own_item sample.c:{line}: {:?}",
            sites.iter().map(|s| site_where(s)).collect::<Vec<_>>()
        );
    }

    // The shared total lock: four threads, 4 * 20000 acquisitions.
    let shared = locks_engaged_in_function(p, "add_to_total");
    assert_eq!(shared.len(), 1, "one lock protects the total");
    assert_eq!(u64_of(shared[0], "threads"), 4);
    assert_eq!(u64_of(shared[0], "acquisitions"), 4 * 20_000);
}
