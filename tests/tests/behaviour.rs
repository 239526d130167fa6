//! The shim must not change behaviour: return codes, errno, stdout and the
//! exit status are identical with and without it.

use locksuit_tests::*;

/// Every line the program must print, in order (the program checks the codes
/// itself; this pins the full list so a missing check is noticed too).
const EXPECTED: &[(&str, &str)] = &[
    ("trylock-free", "0"),
    ("unlock-after-trylock", "0"),
    ("trylock-held-by-other", "EBUSY"),
    ("timedlock-held-by-other", "ETIMEDOUT"),
    ("destroy-locked", "EBUSY"),
    ("timedlock-free", "0"),
    ("unlock-after-timedlock", "0"),
    ("destroy-unlocked", "0"),
    ("errorcheck-lock", "0"),
    ("errorcheck-relock", "EDEADLK"),
    ("errorcheck-unlock", "0"),
    ("errorcheck-unlock-unlocked", "EPERM"),
    ("errorcheck-unlock-others", "EPERM"),
    ("recursive-lock-1", "0"),
    ("recursive-lock-2", "0"),
    ("recursive-lock-3", "0"),
    ("recursive-other-trylock-held", "EBUSY"),
    ("recursive-unlock-3", "0"),
    ("recursive-unlock-2", "0"),
    ("recursive-unlock-1", "0"),
    ("recursive-unlock-extra", "EPERM"),
    ("recursive-other-trylock-free", "0"),
    ("recursive-trylock", "0"),
    ("recursive-trylock-unlock", "0"),
    ("robust-lock-owner-died", "EOWNERDEAD"),
    ("robust-consistent", "0"),
    ("robust-unlock", "0"),
    ("robust-relock", "0"),
    ("robust-unlock-again", "0"),
    ("errno-after-lock-unlock", "4242"),
    ("cond-timedwait", "ETIMEDOUT"),
    ("cond-timedwait-mutex-held", "EBUSY"),
    ("cond-timedwait-unlock", "0"),
    ("failures", "0"),
];

#[test]
fn same_results_with_and_without_shim() {
    let bin = build_c("behaviour");

    let plain = run_plain(&bin, &[] as &[&str]);
    assert_success(
        &plain,
        "behaviour without the shim (the program's own checks)",
    );
    let lines: Vec<(String, String)> = stdout_str(&plain)
        .lines()
        .map(|l| {
            let mut it = l.split_whitespace();
            (
                it.next().unwrap_or("").to_string(),
                it.next().unwrap_or("").to_string(),
            )
        })
        .collect();
    let expected: Vec<(String, String)> = EXPECTED
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    assert_eq!(lines, expected, "plain run output");

    let dir = fresh_dir("behaviour");
    let shim = run_under_shim(&bin, &[] as &[&str], &dir);
    assert_eq!(
        stdout_str(&shim),
        stdout_str(&plain),
        "stdout must be byte-for-byte identical under the shim\n{}",
        describe(&shim)
    );
    assert_eq!(
        shim.status.code(),
        plain.status.code(),
        "exit status must be identical under the shim\n{}",
        describe(&shim)
    );
    assert!(
        shim.stderr.is_empty(),
        "the shim must not write to stderr when recording works: {}",
        String::from_utf8_lossy(&shim.stderr)
    );

    // The trace of all that is readable.
    let trace = only_trace(&dir);
    let report = report_json(&[&trace], None);
    let p = only_process(&report);
    assert_eq!(p["complete"], Value::Bool(true));
    assert!(!locks(p).is_empty(), "the program's mutexes were recorded");
}

/// tests/c/quick_paths.c: the same lock and trylock calls on the same
/// mutexes, round after round, so that from the second round on the full
/// mode takes them on its quick path (hits, a busy trylock, nested holds,
/// error-checking and recursive mutexes). What every call returns is the
/// same as without the shim, and the counts are the program's own.
#[test]
fn the_quick_lock_path_returns_and_counts_what_the_general_one_does() {
    let bin = build_c("quick_paths");
    let rounds = 4;
    let args = [rounds.to_string()];
    let plain = run_plain(&bin, &args);
    assert_success(&plain, "quick_paths without the shim");
    let dir = fresh_dir("quick_paths");
    let shim = run_under_shim(&bin, &args, &dir);
    assert_success(&shim, "quick_paths under the shim");
    // Addresses differ from run to run; everything else is compared.
    let fixed = |out: &std::process::Output| -> String {
        stdout_str(out)
            .lines()
            .filter(|l| !l.starts_with("addr-"))
            .map(|l| format!("{l}\n"))
            .collect()
    };
    assert_eq!(fixed(&shim), fixed(&plain), "{}", describe(&shim));
    assert_eq!(shim.status.code(), plain.status.code());
    assert!(
        shim.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&shim.stderr)
    );

    let stdout = stdout_str(&shim);
    let report = report_json(&[&only_trace(&dir)], None);
    let p = only_process(&report);
    for mutex in ["normal", "outer", "errorcheck", "recursive"] {
        let lock = lock_by_address(p, &stdout_value(&stdout, &format!("addr-{mutex}")));
        let taken: u64 = stdout_value(&stdout, &format!("taken-{mutex}"))
            .parse()
            .unwrap();
        assert_eq!(
            u64_of(lock, "acquisitions"),
            taken,
            "{mutex}: {}",
            short(lock)
        );
    }
    let normal = lock_by_address(p, &stdout_value(&stdout, "addr-normal"));
    let busy: u64 = stdout_value(&stdout, "busy-normal").parse().unwrap();
    assert_eq!(u64_of(normal, "try_failures"), busy, "{}", short(normal));
    let errorcheck = lock_by_address(p, &stdout_value(&stdout, "addr-errorcheck"));
    assert_eq!(
        u64_of(errorcheck, "try_failures"),
        rounds,
        "{}",
        short(errorcheck)
    );
}
