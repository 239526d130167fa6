//! Unnecessary locks: a lock only one thread ever engages is reported, with
//! the exact line that engaged it; a lock shared by four threads is not.

use locksuit_tests::*;

const SRC: &str = "private_locks.c";
const WORKERS: usize = 4;
const ITER: u64 = 10_000;

#[test]
fn private_locks() {
    let bin = build_c("private_locks");
    let dir = fresh_dir("private_locks");
    let out = run_under_shim(&bin, &[] as &[&str], &dir);
    assert_success(&out, "private_locks under the shim");
    let stdout = stdout_str(&out);
    assert_eq!(
        stdout_value(&stdout, "counter"),
        (WORKERS as u64 * ITER).to_string(),
        "the shared counter must be exact under the shim"
    );

    let private_line = line_of(SRC, "/* @private-lock */");
    let shared_line = line_of(SRC, "/* @shared-lock */");
    let trace = only_trace(&dir);

    // --- default threshold --------------------------------------------------
    let report = report_json(&[&trace], None);
    assert_eq!(
        report["threshold"].as_f64(),
        Some(0.3),
        "default threshold is 0.3"
    );
    let p = only_process(&report);
    assert_eq!(
        p["complete"],
        Value::Bool(true),
        "normal exit must be complete"
    );

    let shared_addr = stdout_value(&stdout, "shared");
    let shared = lock_by_address(p, &shared_addr);
    let shared_id = id_of(shared);
    assert_eq!(
        u64_of(shared, "acquisitions"),
        WORKERS as u64 * ITER,
        "shared lock acquisitions"
    );
    assert_eq!(
        u64_of(shared, "threads"),
        WORKERS as u64,
        "shared lock threads"
    );
    let shared_sites = sites_of_lock(p, shared_id);
    assert!(
        !shared_sites.is_empty()
            && shared_sites
                .iter()
                .all(|s| site_is_at(s, "work_shared", SRC, shared_line)),
        "shared lock must be engaged only at work_shared {SRC}:{shared_line}; sites: {:?}",
        shared_sites
            .iter()
            .map(|s| site_where(s))
            .collect::<Vec<_>>()
    );
    assert!(
        findings_taken_alone(p, shared_id).is_empty(),
        "a lock engaged by {WORKERS} threads must not be said to be one thread's: {:?}",
        findings_for_lock(p, shared_id)
    );

    let mut private_ids = Vec::new();
    for i in 0..WORKERS {
        let addr = stdout_value(&stdout, &format!("private{i}"));
        let lock = lock_by_address(p, &addr);
        let id = id_of(lock).to_string();
        assert_eq!(
            u64_of(lock, "acquisitions"),
            ITER,
            "private lock {i} acquisitions"
        );
        assert_eq!(u64_of(lock, "threads"), 1, "private lock {i} threads");
        assert_eq!(
            u64_of(lock, "contended"),
            0,
            "private lock {i} cannot be contended"
        );

        let sites = sites_of_lock(p, &id);
        assert_eq!(
            sites.len(),
            1,
            "private lock {i} is engaged at exactly one site"
        );
        assert!(
            site_is_at(sites[0], "work_private", SRC, private_line),
            "private lock {i} site must be work_private {SRC}:{private_line}, got {}",
            site_where(sites[0])
        );
        assert_eq!(
            u64_of(sites[0], "task_switches"),
            0,
            "private site never switches tasks"
        );

        // One run: an observation, never the unnecessary-lock verdict.
        assert!(
            findings_of_kind_for_lock(p, "unnecessary-lock", &id).is_empty(),
            "one run is no verdict: {}",
            short(&p["findings"])
        );
        let found = findings_of_kind_for_lock(p, "single-thread-lock", &id);
        assert_eq!(
            found.len(),
            1,
            "private lock {i} ({id}) must have exactly one single-thread-lock finding; findings: {}",
            short(&p["findings"])
        );
        let fsites = finding_sites(p, found[0]);
        assert!(
            !fsites.is_empty()
                && fsites
                    .iter()
                    .all(|s| site_is_at(s, "work_private", SRC, private_line)),
            "single-thread-lock finding for private lock {i} must point at work_private \
             {SRC}:{private_line}; it lists {:?}",
            fsites.iter().map(|s| site_where(s)).collect::<Vec<_>>()
        );
        assert!(
            !str_of(found[0], "message").trim().is_empty(),
            "finding message must not be empty"
        );
        private_ids.push(id);
    }
    private_ids.sort();
    private_ids.dedup();
    assert_eq!(
        private_ids.len(),
        WORKERS,
        "each worker's private lock is a distinct lock"
    );

    // --- threshold 0: no site can be unsuitable, so the shared lock (engaged
    // by four threads) must have no finding at all ---------------------------
    let report0 = report_json(&[&trace], Some(0.0));
    assert_eq!(
        report0["threshold"].as_f64(),
        Some(0.0),
        "report echoes the threshold"
    );
    let p0 = only_process(&report0);
    let shared0 = lock_by_address(p0, &shared_addr);
    // (Contention findings may apply to it on a loaded machine; the
    // suitability verdicts are what this test is about.)
    let suitability: Vec<&Value> = findings_for_lock(p0, id_of(shared0))
        .into_iter()
        .filter(|f| f["kind"] == "single-thread-lock" || f["kind"] == "unsuitable-site")
        .collect();
    assert!(
        suitability.is_empty(),
        "shared lock must have no suitability findings at threshold 0: {:?}",
        suitability
    );
    for i in 0..WORKERS {
        let addr = stdout_value(&stdout, &format!("private{i}"));
        let id = id_of(lock_by_address(p0, &addr));
        assert_eq!(
            findings_of_kind_for_lock(p0, "single-thread-lock", id).len(),
            1,
            "single-thread-lock does not depend on the threshold (private lock {i})"
        );
    }
    assert!(
        findings(p0).iter().all(|f| f["kind"] != "unsuitable-site"),
        "no site can be unsuitable at threshold 0: {}",
        short(&p0["findings"])
    );
}
