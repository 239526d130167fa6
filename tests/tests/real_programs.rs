//! Real programs from Debian packages (installed by `.ci/run`) must behave
//! exactly as without the shim, and their traces must give a report with
//! real lock activity. A program that is not installed is skipped with a
//! clear message.
//!
//! Output is compared byte for byte where the program's output is
//! deterministic (compressors, sort). sysbench and stress-ng print timings,
//! so for them the exit status and their deterministic lines (event counts,
//! pass/fail summaries) are compared.
//!
//! Advice as strong as its evidence (issue 32, item 1), on the programs the
//! old one-run `unnecessary-lock` was wrong for: memcached's per-worker
//! stats mutexes (a `stats` command takes them from another worker),
//! pigz's buffer-pool locks (shared with `--rsyncable`), sort's merge-node
//! mutexes (which of them one thread took changes from run to run) and
//! sysbench's latency-histogram rwlock (shared with `--report-interval`).
//! Every report here is checked against the rules (`check_evidence`): no
//! `unnecessary-lock` from one run, and no finding that one thread alone
//! took a lock that any run reported with it shared.
//!
//! Past 600 lines: each file under tests/tests is its own test binary,
//! linked apart; one subject stays in one file rather than pay another link.

use locksuit_tests::*;
use serde_json::Value;
use std::collections::HashSet;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

fn installed(program: &str) -> bool {
    let found = std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).any(|d| d.join(program).is_file()))
        .unwrap_or(false);
    if !found {
        println!("SKIPPED: `{program}` is not installed (apt-get install it, as .ci/run does)");
    }
    found
}

/// A shared 24 MB input: pseudo-random bytes (incompressible) and text.
fn input_file() -> &'static Path {
    static INPUT: OnceLock<PathBuf> = OnceLock::new();
    INPUT.get_or_init(|| {
        let path = workspace_root().join("target/real-programs-input.bin");
        if !path.exists() {
            let mut data = Vec::with_capacity(24 << 20);
            let mut x: u64 = 0x2545_f491_4f6c_dd1d;
            while data.len() < 12 << 20 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                data.extend_from_slice(&x.to_le_bytes());
            }
            let mut line = 0u64;
            while data.len() < 24 << 20 {
                data.extend_from_slice(
                    format!(
                        "line {line} of a sortable text, key {}\n",
                        line * 7919 % 100_003
                    )
                    .as_bytes(),
                );
                line += 1;
            }
            let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
            std::fs::write(&tmp, &data).unwrap();
            std::fs::rename(&tmp, &path).unwrap();
        }
        path
    })
}

fn sh(script: &str, shim_dir: Option<&Path>) -> Output {
    let mut cmd = Command::new("/bin/sh");
    cmd.args(["-c", script])
        .env_remove("LD_PRELOAD")
        .env_remove("LOCKSUIT_DIR");
    if let Some(dir) = shim_dir {
        cmd.env("LD_PRELOAD", shim_path())
            .env("LOCKSUIT_DIR", std::fs::canonicalize(dir).unwrap());
    }
    run_captured(cmd)
}

/// Runs `script` plainly and under the shim; returns both outputs and the
/// report of every traced process.
fn both(script: &str, tag: &str) -> (Output, Output, Value) {
    let plain = sh(script, None);
    let dir = fresh_dir(tag);
    let traced = sh(script, Some(&dir));
    assert_eq!(
        plain.status.code(),
        traced.status.code(),
        "{script}: exit status\n{}",
        describe(&traced)
    );
    let report = report_json(&[&dir], None);
    (plain, traced, report)
}

/// The processes whose executable is `name`, checked to have real, complete
/// lock activity in the report.
fn active_process<'a>(report: &'a Value, name: &str) -> Vec<&'a Value> {
    let ps: Vec<&Value> = processes(report)
        .iter()
        .filter(|p| str_of(p, "exe").rsplit('/').next() == Some(name))
        .collect();
    assert!(!ps.is_empty(), "no trace of {name}");
    let busiest = ps
        .iter()
        .map(|p| {
            locks(p)
                .iter()
                .map(|l| u64_of(l, "acquisitions"))
                .sum::<u64>()
        })
        .max()
        .unwrap();
    assert!(busiest > 0, "{name}: no lock activity recorded");
    check_evidence(report, name, 5);
    for p in &ps {
        assert_eq!(p["complete"], true, "{name} exited normally: {}", short(p));
        assert_eq!(p["dropped_events"], 0, "{name} lost nothing");
        assert!(
            !sites(p).is_empty() || locks(p).is_empty(),
            "{name}: sites are attributed"
        );
    }
    ps
}

/// The key by which the report joins a lock across runs: its name without
/// its number (`make@a.c:9#3` → `make@a.c:9`, the line that made the
/// family), as analyzer/src/analysis/evidence.rs does.
fn join_key(id: &str) -> &str {
    match id.rsplit_once('#') {
        Some((base, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => base,
        _ => id,
    }
}

fn exe_name(p: &Value) -> &str {
    str_of(p, "exe").rsplit('/').next().unwrap_or("")
}

fn is_shared(lock: &Value) -> bool {
    u64_of(lock, "askers") > 1 || lock["process_shared"] == true
}

/// The findings that say one thread alone took locks: the observation
/// (`single-thread-lock`) and the verdict (`unnecessary-lock`).
fn alone_findings(p: &Value) -> Vec<&Value> {
    findings(p)
        .iter()
        .filter(|f| f["kind"] == "single-thread-lock" || f["kind"] == "unnecessary-lock")
        .collect()
}

/// Issue 32's rules, on every process of `name` in `report` (made with
/// `--min-runs min_runs`): a `single-thread-lock` rests on the run; an
/// `unnecessary-lock` on at least `min_runs` runs reported together, or on
/// the data (`locksuit cc`), never on one run alone; and neither is said of
/// a lock that more than one thread asked for, nor of one whose family (its
/// process's, or by name in any run of the program reported with it) some
/// thread shared.
fn check_evidence(report: &Value, name: &str, min_runs: u64) {
    let ps: Vec<&Value> = processes(report)
        .iter()
        .filter(|p| exe_name(p) == name)
        .collect();
    for p in &ps {
        let runs: Vec<&&Value> = ps.iter().filter(|q| q["exe"] == p["exe"]).collect();
        let shared_keys: HashSet<&str> = runs
            .iter()
            .flat_map(|q| locks(q))
            .filter(|l| is_shared(l))
            .map(|l| join_key(id_of(l)))
            .collect();
        let shared_families: HashSet<&str> = locks(p)
            .iter()
            .filter(|l| is_shared(l))
            .filter_map(|l| l["family"].as_str())
            .collect();
        for f in alone_findings(p) {
            let evidence = &f["evidence"];
            let basis = evidence["basis"].as_str();
            let backing = evidence["runs"].as_u64().unwrap_or(0);
            if f["kind"] == "single-thread-lock" {
                assert_eq!(basis, Some("run"), "{name}: {}", short(f));
            } else {
                assert!(
                    basis == Some("data")
                        || (basis == Some("runs")
                            && backing >= min_runs
                            && backing <= runs.len() as u64),
                    "{name}: a verdict from {} run(s) reported together (--min-runs {min_runs}): {}",
                    runs.len(),
                    short(f)
                );
            }
            for id in arr(f, "locks").iter().filter_map(Value::as_str) {
                let lock = lock_by_id(p, id);
                assert_eq!(
                    u64_of(lock, "askers"),
                    1,
                    "{name}: {id} was asked for by several threads: {}",
                    short(f)
                );
                let family = lock["family"].as_str().unwrap_or(id);
                assert!(
                    !shared_families.contains(family),
                    "{name}: {id}'s family {family} is shared in this run: {}",
                    short(f)
                );
                assert!(
                    !shared_keys.contains(join_key(id)),
                    "{name}: {id} is shared in a run reported with it: {}",
                    short(f)
                );
            }
        }
    }
}

/// `p`'s findings that one thread alone took locks, one `kind lock ×locks
/// evidence` each, for messages.
fn alone_summary(p: &Value) -> String {
    alone_findings(p)
        .iter()
        .map(|f| {
            format!(
                "{} {} ×{} {}",
                str_of(f, "kind"),
                str_of(f, "lock"),
                arr(f, "locks").len(),
                f["evidence"]
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// `locksuit report DIRS… --format json EXTRA…`.
fn report_dirs(dirs: &[&PathBuf], extra: &[&str]) -> Value {
    let paths: Vec<&Path> = dirs.iter().map(|d| d.as_path()).collect();
    report_json_with(&paths, extra)
}

fn assert_same_bytes(plain: &Output, traced: &Output, what: &str) {
    assert_eq!(
        plain.stdout, traced.stdout,
        "{what}: stdout differs under the shim"
    );
    assert_eq!(
        plain.stderr, traced.stderr,
        "{what}: stderr differs under the shim"
    );
}

#[test]
fn pigz_round_trip() {
    if !installed("pigz") {
        return;
    }
    let input = input_file().display();
    let (plain, traced, report) = both(
        &format!("pigz -p 4 -c {input} | pigz -d -c | cksum"),
        "real-pigz",
    );
    assert_same_bytes(&plain, &traced, "pigz");
    active_process(&report, "pigz");
}

#[test]
fn zstd_two_threads() {
    if !installed("zstd") {
        return;
    }
    let input = input_file().display();
    let (plain, traced, report) = both(
        &format!("zstd -T2 -q -c {input} | zstd -d -q -c | cksum"),
        "real-zstd",
    );
    assert_same_bytes(&plain, &traced, "zstd");
    active_process(&report, "zstd");
}

#[test]
fn pbzip2_round_trip() {
    if !installed("pbzip2") {
        return;
    }
    let input = input_file().display();
    let (plain, traced, report) = both(
        &format!("head -c 6000000 {input} | pbzip2 -p2 -c | pbzip2 -p2 -d -c | cksum"),
        "real-pbzip2",
    );
    assert_same_bytes(&plain, &traced, "pbzip2");
    active_process(&report, "pbzip2");
}

#[test]
fn sort_parallel() {
    if !installed("sort") {
        return;
    }
    let input = input_file().display();
    let (plain, traced, report) = both(
        &format!("tail -c 12000000 {input} | sort --parallel=2 -S 20M | cksum"),
        "real-sort",
    );
    assert_same_bytes(&plain, &traced, "sort");
    active_process(&report, "sort");
}

/// The lines of sysbench's output that do not depend on timing.
fn sysbench_counts(out: &Output) -> Vec<String> {
    stdout_str(out)
        .lines()
        .filter(|l| l.contains("total number of events") || l.contains("Number of threads"))
        .map(str::to_string)
        .collect()
}

#[test]
fn sysbench_mutex_and_threads() {
    if !installed("sysbench") {
        return;
    }
    for (test, script) in [
        (
            "mutex",
            "sysbench mutex --threads=4 --mutex-locks=20000 run",
        ),
        (
            "threads",
            // sched_yield-bound: few events, so a busy machine (whose hogs
            // each yield gives the CPU to) still finishes it in seconds.
            "sysbench threads --threads=4 --events=300 --thread-yields=100 --time=0 run",
        ),
    ] {
        let (plain, traced, report) = both(script, &format!("real-sysbench-{test}"));
        let counts = sysbench_counts(&plain);
        assert!(
            !counts.is_empty(),
            "sysbench printed its counts:\n{}",
            stdout_str(&plain)
        );
        assert_eq!(
            counts,
            sysbench_counts(&traced),
            "sysbench {test}: counts differ"
        );
        active_process(&report, "sysbench");
    }
}

#[test]
fn stress_ng_sync_stressors() {
    if !installed("stress-ng") {
        return;
    }
    let listed = Command::new("stress-ng")
        .arg("--stressors")
        .output()
        .expect("stress-ng runs");
    let available: Vec<String> = String::from_utf8_lossy(&listed.stdout)
        .split_whitespace()
        .map(String::from)
        .collect();
    for stressor in ["mutex", "sem", "spin", "pthread"] {
        if !available.iter().any(|s| s == stressor) {
            println!("SKIPPED: this stress-ng has no --{stressor} stressor");
            continue;
        }
        // Only the pass/fail summary, without its pid and run time.
        let script = format!(
            "stress-ng --{stressor} 2 -t 2s --metrics-brief 2>&1 | grep -E 'passed|failed|skipped|successful' \
             | sed -E 's/\\[[0-9]+\\]//; s/[0-9.]+ ?s(ecs)?$//'"
        );
        let (plain, traced, report) = both(&script, &format!("real-stress-ng-{stressor}"));
        // The summary lines hold counts of passed/failed stressors, not timings.
        assert_eq!(
            stdout_str(&plain),
            stdout_str(&traced),
            "stress-ng --{stressor} summary"
        );
        active_process(&report, "stress-ng");
    }
}

/// memcached under the shim (4 worker threads, on a free private port),
/// loaded by memcaslap for `load` (`1s`), with `stats` commands sent
/// meanwhile (each takes every worker's stats mutex from the worker that
/// serves it), then stopped with SIGTERM. Checks that it served the load and
/// exited cleanly; returns the directory of its trace.
fn memcached_run(tag: &str, load: &str, stats: u32) -> PathBuf {
    let dir = fresh_dir(tag);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let mut server = Command::new("memcached")
        .args([
            "-u",
            "root",
            "-t",
            "4",
            "-l",
            "127.0.0.1",
            "-U",
            "0",
            "-m",
            "64",
            "-p",
            &port.to_string(),
        ])
        .env("LD_PRELOAD", shim_path())
        .env("LOCKSUIT_DIR", std::fs::canonicalize(&dir).unwrap())
        .spawn()
        .expect("memcached starts");
    let addr = format!("127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(&addr).is_err() {
        if let Ok(Some(status)) = server.try_wait() {
            panic!("memcached exited at start ({status}); port {port} taken?");
        }
        assert!(Instant::now() < deadline, "memcached did not come up");
        std::thread::sleep(Duration::from_millis(50));
    }
    let load_child = Command::new("memcaslap")
        .args(["-s", &addr, "-t", load, "-T", "2", "-c", "16"])
        .env_remove("LD_PRELOAD")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("memcaslap runs");
    // Spread over the load; nothing below depends on when they land.
    let secs: f64 = load.trim_end_matches('s').parse().unwrap_or(2.0);
    for _ in 0..stats {
        std::thread::sleep(Duration::from_secs_f64(secs / f64::from(stats + 1)));
        let reply = memcached_stats(&addr);
        assert!(reply.contains("STAT threads 4\r\n"), "stats: {reply}");
    }
    let load = load_child.wait_with_output().expect("memcaslap ends");
    // SAFETY: sending SIGTERM to the child we spawned.
    unsafe { libc_kill(server.id() as i32, 15) };
    let status = server.wait().expect("memcached exits");
    assert!(
        load.status.success(),
        "memcaslap: {}",
        String::from_utf8_lossy(&load.stderr)
    );
    let ops: u64 = String::from_utf8_lossy(&load.stdout)
        .lines()
        .find_map(|l| l.split("Ops: ").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .expect("memcaslap reports Ops");
    assert!(ops > 1000, "the server answered under the shim: {ops} ops");
    assert_eq!(
        status.code(),
        Some(0),
        "memcached exits cleanly on SIGTERM under the shim"
    );
    dir
}

/// One `stats` command on a connection of its own; the whole reply.
fn memcached_stats(addr: &str) -> String {
    let mut conn = std::net::TcpStream::connect(addr).expect("connect for stats");
    conn.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    conn.write_all(b"stats\r\n").expect("send stats");
    let mut reply = Vec::new();
    let mut buf = [0u8; 4096];
    while !reply.ends_with(b"END\r\n") {
        let n = conn.read(&mut buf).expect("memcached answers stats");
        assert!(
            n > 0,
            "memcached closed the connection: {}",
            String::from_utf8_lossy(&reply)
        );
        reply.extend_from_slice(&buf[..n]);
    }
    let _ = conn.write_all(b"quit\r\n");
    String::from_utf8_lossy(&reply).into_owned()
}

#[test]
fn memcached_under_load() {
    if !installed("memcached") || !installed("memcaslap") {
        return;
    }
    let dir = memcached_run("real-memcached", "5s", 0);
    let report = report_json(&[&dir], None);
    let p = active_process(&report, "memcached")[0];
    assert!(
        arr(p, "threads").len() >= 5,
        "memcached's worker threads are recorded"
    );
}

/// The families of per-worker locks in a run: those of its findings that
/// one thread alone took locks, each lock by another worker thread. In a
/// run with no `stats` command they include thread.c's `stats.mutex`, one
/// per worker. Each is an observation, resting on this run.
fn per_worker_families(p: &Value) -> Vec<String> {
    let workers: HashSet<u64> = arr(p, "threads")
        .iter()
        .filter(|t| t["name"] == "mc-worker")
        .map(|t| u64_of(t, "tid"))
        .collect();
    let main = u64_of(main_thread(p), "tid");
    let per_worker = alone_findings(p).into_iter().filter(|f| {
        let takers: Vec<u64> = arr(f, "locks")
            .iter()
            .filter_map(Value::as_str)
            .map(|id| {
                let by = arr(lock_by_id(p, id), "engagements_by_thread");
                if by.len() == 1 {
                    u64_of(&by[0], "tid")
                } else {
                    0
                }
            })
            .collect();
        let distinct: HashSet<u64> = takers.iter().copied().collect();
        takers.len() >= 2
            && distinct.len() == takers.len()
            && takers
                .iter()
                .all(|&t| t != 0 && t != main && (workers.is_empty() || workers.contains(&t)))
    });
    per_worker
        .map(|f| {
            assert_eq!(
                f["kind"],
                "single-thread-lock",
                "one run is an observation: {}",
                short(f)
            );
            assert_eq!(f["evidence"]["basis"], "run", "{}", short(f));
            assert_eq!(f["evidence"]["runs"], 1, "{}", short(f));
            let family = str_of(f, "family").to_string();
            assert!(
                arr(f, "locks")
                    .iter()
                    .all(|l| join_key(l.as_str().unwrap()) == family),
                "the family is the line that made the locks: {}",
                short(f)
            );
            family
        })
        .collect()
}

/// The findings that one thread alone took locks of `family` in `p`.
fn alone_in_family<'a>(p: &'a Value, family: &str) -> Vec<&'a Value> {
    alone_findings(p)
        .into_iter()
        .filter(|f| {
            f["family"] == family
                || arr(f, "locks")
                    .iter()
                    .any(|l| l.as_str().map(join_key) == Some(family))
        })
        .collect()
}

/// memcached's per-worker stats mutexes: one thread each while nobody asks
/// for statistics, every worker's taken by the one serving a `stats`
/// command otherwise. One quiet run is an observation; quiet runs reported
/// together (enough of them) a verdict; a run with `stats` commands among
/// them clears the locks.
#[test]
fn memcached_stats_locks_are_judged_across_runs() {
    if !installed("memcached") || !installed("memcaslap") {
        return;
    }
    let started = Instant::now();
    let quiet = memcached_run("real-memcached-quiet", "1s", 0);
    let quiet2 = memcached_run("real-memcached-quiet2", "1s", 0);
    let stats = memcached_run("real-memcached-stats", "1s", 3);

    // Each run alone: no verdict. The quiet ones observe per-worker locks;
    // those the stats run shares are the stats mutexes.
    let observed: Vec<Vec<String>> = [&quiet, &quiet2]
        .iter()
        .map(|dir| {
            let report = report_dirs(&[dir], &[]);
            per_worker_families(active_process(&report, "memcached")[0])
        })
        .collect();
    let report = report_dirs(&[&stats], &["--min-acquisitions", "1"]);
    let p = active_process(&report, "memcached")[0];
    check_evidence(&report, "memcached", 5);
    let families: Vec<String> = observed[0]
        .iter()
        .filter(|family| observed[1].contains(family))
        .filter(|family| {
            locks(p)
                .iter()
                .any(|l| join_key(id_of(l)) == family.as_str() && u64_of(l, "askers") >= 2)
        })
        .cloned()
        .collect();
    assert!(
        !families.is_empty(),
        "the quiet runs observe per-worker locks ({observed:?}) that a stats command took \
         from another worker"
    );
    for family in &families {
        assert!(
            alone_in_family(p, family).is_empty(),
            "shared in this run: {}",
            alone_summary(p)
        );
    }

    // Two quiet runs, two runs make a verdict.
    let report = report_dirs(&[&quiet, &quiet2], &["--min-runs", "2"]);
    check_evidence(&report, "memcached", 2);
    assert_eq!(processes(&report).len(), 2);
    for (p, family) in processes(&report)
        .iter()
        .flat_map(|p| families.iter().map(move |f| (p, f)))
    {
        let found = alone_in_family(p, family);
        assert_eq!(found.len(), 1, "{}", alone_summary(p));
        let f = found[0];
        assert_eq!(f["kind"], "unnecessary-lock", "{}", short(f));
        assert_eq!(f["evidence"]["basis"], "runs", "{}", short(f));
        assert_eq!(f["evidence"]["runs"], 2, "{}", short(f));
    }
    // Below --min-runs: an observation that says how far along it is.
    let report = report_dirs(&[&quiet, &quiet2], &[]);
    check_evidence(&report, "memcached", 5);
    for (p, family) in processes(&report)
        .iter()
        .flat_map(|p| families.iter().map(move |f| (p, f)))
    {
        let found = alone_in_family(p, family);
        assert_eq!(found.len(), 1, "{}", alone_summary(p));
        assert_eq!(found[0]["kind"], "single-thread-lock");
        assert_eq!(found[0]["evidence"]["runs"], 2);
    }

    // With the stats run: shared in one run, so in none a finding, however
    // few runs make a verdict.
    for (extra, min_runs) in [(&[][..], 5), (&["--min-runs", "2"][..], 2)] {
        let report = report_dirs(&[&quiet, &quiet2, &stats], extra);
        check_evidence(&report, "memcached", min_runs);
        assert_eq!(processes(&report).len(), 3);
        for (p, family) in processes(&report)
            .iter()
            .flat_map(|p| families.iter().map(move |f| (p, f)))
        {
            assert!(
                alone_in_family(p, family).is_empty(),
                "{extra:?}: {}",
                alone_summary(p)
            );
        }
        let cleared = processes(&report)
            .iter()
            .filter(|p| {
                p["warnings"]
                    .to_string()
                    .contains("taken by several in another run of memcached")
            })
            .count();
        assert!(cleared >= 2, "the quiet runs say why: {extra:?}");
    }
    println!(
        "memcached across runs: {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// pigz's buffer pools: without `--rsyncable` the main thread alone takes
/// an unused pool's lock (when it frees the pool), with it the compress
/// threads share it. Every lock pigz makes comes from one line (yarn's
/// `new_lock`), one family some of whose members the threads always share:
/// no run, alone or with the other, gets a finding that one thread alone
/// took a lock, even counting locks taken once.
#[test]
fn pigz_pool_locks_get_no_verdict() {
    if !installed("pigz") {
        return;
    }
    let input = input_file().display();
    let mut dirs = Vec::new();
    for (tag, flags) in [
        ("real-pigz-plain", ""),
        ("real-pigz-rsyncable", " --rsyncable"),
    ] {
        let script = format!("pigz -p 4{flags} -c {input} | cksum");
        let plain = sh(&script, None);
        let dir = fresh_dir(tag);
        let traced = sh(&script, Some(&dir));
        assert_same_bytes(&plain, &traced, &script);
        let report = report_dirs(&[&dir], &[]);
        active_process(&report, "pigz");
        // The pool locks are taken once each at teardown: below the cost
        // floor, no finding at all.
        for p in processes(&report).iter().filter(|p| exe_name(p) == "pigz") {
            assert!(
                alone_findings(p).is_empty(),
                "{script}: {}",
                alone_summary(p)
            );
        }
        // Counted however few their acquisitions: one run's observation at
        // most (each pool's locks are a family of their own, as yarn's
        // new_lock is called from several lines), never a verdict.
        let report = report_dirs(&[&dir], &["--min-acquisitions", "1"]);
        check_evidence(&report, "pigz", 5);
        for p in processes(&report).iter().filter(|p| exe_name(p) == "pigz") {
            assert!(
                alone_findings(p)
                    .iter()
                    .all(|f| f["kind"] == "single-thread-lock"),
                "{script}: {}",
                alone_summary(p)
            );
        }
        dirs.push(dir);
    }
    let both_runs: Vec<&PathBuf> = dirs.iter().collect();
    let report = report_dirs(&both_runs, &["--min-acquisitions", "1", "--min-runs", "2"]);
    check_evidence(&report, "pigz", 2);
    for p in processes(&report).iter().filter(|p| exe_name(p) == "pigz") {
        assert!(alone_findings(p).is_empty(), "{}", alone_summary(p));
    }
}

/// sort's merge tree: which node mutexes one thread alone took changes from
/// run to run; they are made at one line, so the family is judged as one,
/// and taken at one line (popped from one queue) with shared ones. Three
/// runs, each alone and the three together (enough for a verdict with
/// `--min-runs 3`), counting every lock however few its acquisitions. They
/// run on one CPU (as on a busy machine), where a node mutex is one
/// thread's in most runs (in 3 of 5, one day), and sometimes in all three.
#[test]
fn sort_merge_nodes_get_no_verdict() {
    if !installed("sort") {
        return;
    }
    let input = input_file().display();
    let script = format!("tail -c 12000000 {input} | sort --parallel=2 -S 20M | cksum");
    let plain = sh(&script, None);
    let one_cpu = if installed("taskset") {
        script.replace("| sort", "| taskset -c 0 sort")
    } else {
        script.clone()
    };
    let dirs: Vec<PathBuf> = (0..3)
        .map(|i| {
            let dir = fresh_dir(&format!("real-sort-run{i}"));
            let traced = sh(&one_cpu, Some(&dir));
            assert_same_bytes(&plain, &traced, "sort");
            dir
        })
        .collect();
    for dir in &dirs {
        let report = report_dirs(&[dir], &[]);
        active_process(&report, "sort");
        let report = report_dirs(&[dir], &["--min-acquisitions", "1"]);
        check_evidence(&report, "sort", 5);
    }
    let all: Vec<&PathBuf> = dirs.iter().collect();
    for extra in [
        &["--min-acquisitions", "1"][..],
        &["--min-acquisitions", "1", "--min-runs", "3"][..],
    ] {
        let report = report_dirs(&all, extra);
        assert_eq!(
            processes(&report)
                .iter()
                .filter(|p| exe_name(p) == "sort")
                .count(),
            3
        );
        check_evidence(&report, "sort", if extra.len() > 2 { 3 } else { 5 });
        // Every lock sort takes guards its merge tree, which its threads
        // share: however many runs back it, no lock is called unneeded.
        for p in processes(&report).iter().filter(|p| exe_name(p) == "sort") {
            let unneeded: Vec<&Value> = alone_findings(p)
                .into_iter()
                .filter(|f| f["kind"] == "unnecessary-lock")
                .collect();
            assert!(
                unneeded.is_empty(),
                "sort: {}",
                unneeded
                    .iter()
                    .map(|f| short(f))
                    .collect::<Vec<_>>()
                    .join("; ")
            );
        }
    }
}

/// sysbench's latency histogram (`sb_latency_histogram`, an rwlock): read
/// once by the main thread at the end of a plain run, also by the
/// reporting thread every second with `--report-interval`.
#[test]
fn sysbench_histogram_lock_is_shared_with_report_interval() {
    if !installed("sysbench") {
        return;
    }
    let runs = [
        // Bounded by time, not events: sched_yield under a lock takes as
        // long as the machine's other work wants.
        (
            "plain",
            "sysbench threads --threads=4 --events=0 --time=2 run",
        ),
        (
            "interval",
            "sysbench threads --threads=4 --events=0 --time=3 --report-interval=1 run",
        ),
    ];
    let mut dirs = Vec::new();
    for (tag, script) in runs {
        let dir = fresh_dir(&format!("real-sysbench-{tag}"));
        let traced = sh(script, Some(&dir));
        assert_success(&traced, script);
        assert!(
            stdout_str(&traced).contains("Number of threads: 4"),
            "{}",
            describe(&traced)
        );
        let report = report_dirs(&[&dir], &[]);
        active_process(&report, "sysbench");
        dirs.push(dir);
    }
    let (plain, interval) = (&dirs[0], &dirs[1]);
    let histogram = |p: &Value| -> Option<String> {
        locks(p)
            .iter()
            .find(|l| {
                id_of(l).starts_with("&sb_latency_histogram")
                    || arr(l, "sites")
                        .iter()
                        .any(|s| s.as_str() == Some("sb_histogram_get_pct_checkpoint"))
            })
            .map(|l| id_of(l).to_string())
    };
    let one = ["--min-acquisitions", "1"];
    let report = report_dirs(&[plain], &one);
    check_evidence(&report, "sysbench", 5);
    let p = active_process(&report, "sysbench")[0];
    let Some(id) = histogram(p) else {
        println!("SKIPPED: this sysbench's latency histogram lock has no name (no symbols)");
        return;
    };
    let lock = lock_by_id(p, &id);
    assert_eq!(u64_of(lock, "askers"), 1, "{}", short(lock));
    let found = findings_taken_alone(p, &id);
    assert_eq!(found.len(), 1, "{}", alone_summary(p));
    assert_eq!(
        found[0]["kind"],
        "single-thread-lock",
        "{}",
        short(found[0])
    );
    assert_eq!(found[0]["evidence"]["runs"], 1);

    let report = report_dirs(&[interval], &one);
    check_evidence(&report, "sysbench", 5);
    let p = active_process(&report, "sysbench")[0];
    assert!(
        u64_of(lock_by_id(p, &id), "askers") >= 2,
        "the reporting thread read the histogram: {}",
        short(lock_by_id(p, &id))
    );
    assert!(findings_taken_alone(p, &id).is_empty());

    for extra in [
        &one[..],
        &["--min-acquisitions", "1", "--min-runs", "2"][..],
    ] {
        let report = report_dirs(&[plain, interval], extra);
        check_evidence(&report, "sysbench", 2);
        for p in processes(&report)
            .iter()
            .filter(|p| exe_name(p) == "sysbench")
        {
            assert!(
                findings_taken_alone(p, &id).is_empty(),
                "{extra:?}: {}",
                alone_summary(p)
            );
        }
    }
}

extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}
