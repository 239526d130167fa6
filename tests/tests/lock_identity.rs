//! Lock identity: statically initialised locks are recognised, a lock that is
//! destroyed and re-initialised at the same address is a new lock, and locks
//! on reused thread stacks are told apart: in the full mode and in lean
//! mode (whose quick path keys a lock by address and line, and must see a
//! lock made again as another; issue 37).

use locksuit_tests::*;

const SRC: &str = "lock_identity.c";

/// The recording modes each test runs in.
const RECORDING: [&str; 2] = ["full", "lean"];

fn run_mode(mode: &str, recording: &str) -> (String, Value) {
    let bin = build_c("lock_identity");
    let dir = fresh_dir(&format!("lock_identity_{mode}_{recording}"));
    let out = run_under_shim_env(&bin, &[mode], &dir, &[("LOCKSUIT_MODE", recording)]);
    assert_success(
        &out,
        &format!("lock_identity {mode} under the shim, {recording} mode"),
    );
    let trace = only_trace(&dir);
    (stdout_str(&out), report_json(&[&trace], None))
}

#[test]
fn static_initializer() {
    for recording in RECORDING {
        static_initializer_in(recording);
    }
}

fn static_initializer_in(recording: &str) {
    const USES: u64 = 137;
    let (stdout, report) = run_mode("static", recording);
    let p = only_process(&report);
    let addr = stdout_value(&stdout, "static");
    let lock = lock_by_address(p, &addr);
    assert_eq!(
        str_of(lock, "address"),
        addr,
        "address is printed like glibc's %p: lowercase hex, 0x prefix, no padding"
    );
    assert_eq!(str_of(lock, "kind"), "mutex");
    assert_eq!(u64_of(lock, "acquisitions"), USES);
    assert_eq!(u64_of(lock, "contended"), 0);
    assert_eq!(u64_of(lock, "threads"), 1);
    let line = line_of(SRC, "/* @static-lock */");
    let sites = sites_of_lock(p, id_of(lock));
    assert_eq!(sites.len(), 1, "one site engages the static lock");
    assert!(
        site_is_at(sites[0], "run_static", SRC, line),
        "site must be run_static {SRC}:{line}, got {}",
        site_where(sites[0])
    );
    assert_eq!(u64_of(sites[0], "engagements"), USES);
}

#[test]
fn destroy_and_reinit_is_a_new_lock() {
    for recording in RECORDING {
        destroy_and_reinit_is_a_new_lock_in(recording);
    }
}

fn destroy_and_reinit_is_a_new_lock_in(recording: &str) {
    const FIRST: u64 = 50;
    const SECOND: u64 = 70;
    let (stdout, report) = run_mode("reinit", recording);
    let p = only_process(&report);
    let addr = stdout_value(&stdout, "reinit");
    let at = locks_at(p, &addr);
    assert_eq!(
        at.len(),
        2,
        "init/destroy/init at one address must give two locks, got {:?}",
        at.iter().map(|l| short(l)).collect::<Vec<_>>()
    );
    assert_ne!(
        id_of(at[0]),
        id_of(at[1]),
        "the two lifetimes need distinct ids"
    );
    let mut counts: Vec<u64> = at.iter().map(|l| u64_of(l, "acquisitions")).collect();
    counts.sort();
    assert_eq!(
        counts,
        vec![FIRST, SECOND],
        "each lifetime keeps its own count"
    );

    // Each lifetime is engaged at its own line.
    let first_line = line_of(SRC, "/* @reinit-first */");
    let second_line = line_of(SRC, "/* @reinit-second */");
    for lock in at {
        let n = u64_of(lock, "acquisitions");
        let line = if n == FIRST { first_line } else { second_line };
        let sites = sites_of_lock(p, id_of(lock));
        assert_eq!(sites.len(), 1, "lock {} has one site", id_of(lock));
        assert!(
            site_is_at(sites[0], "run_reinit", SRC, line),
            "lock with {n} acquisitions must be engaged at run_reinit {SRC}:{line}, got {}",
            site_where(sites[0])
        );
    }
}

#[test]
fn stack_locks_in_thread_waves() {
    for recording in RECORDING {
        stack_locks_in_thread_waves_in(recording);
    }
}

fn stack_locks_in_thread_waves_in(recording: &str) {
    const LOCKS: usize = 300;
    let (stdout, report) = run_mode("waves", recording);
    assert_eq!(stdout_value(&stdout, "locks"), LOCKS.to_string());
    // Informational: how many addresses were reused (stacks are cached by glibc).
    eprintln!(
        "{LOCKS} stack locks at {} distinct addresses",
        stdout_value(&stdout, "distinct-addresses")
    );
    let p = only_process(&report);
    let wave_locks = locks_engaged_in_function(p, "wave_worker");
    assert_eq!(
        wave_locks.len(),
        LOCKS,
        "every init/lock/unlock/destroy on a thread stack is its own lock"
    );
    let mut ids: Vec<&str> = wave_locks.iter().map(|l| id_of(l)).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), LOCKS, "lock ids are unique");
    for l in &wave_locks {
        assert_eq!(
            u64_of(l, "acquisitions"),
            1,
            "each stack lock is taken once: {}",
            short(l)
        );
        assert_eq!(
            u64_of(l, "threads"),
            1,
            "each stack lock has one thread: {}",
            short(l)
        );
    }
    let line = line_of(SRC, "/* @wave-lock */");
    let wave_sites: Vec<&Value> = sites(p)
        .iter()
        .filter(|s| s["function"].as_str() == Some("wave_worker"))
        .collect();
    assert!(
        wave_sites
            .iter()
            .all(|s| site_is_at(s, "wave_worker", SRC, line)),
        "wave_worker engages locks only at {SRC}:{line}: {:?}",
        wave_sites.iter().map(|s| site_where(s)).collect::<Vec<_>>()
    );
    let engagements: u64 = wave_sites.iter().map(|s| u64_of(s, "engagements")).sum();
    assert_eq!(engagements, LOCKS as u64, "wave_worker engagements");
}
