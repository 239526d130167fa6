//! Real programs from Debian packages (installed by `.ci/run`) must behave
//! exactly as without the shim, and their traces must give a report with
//! real lock activity. A program that is not installed is skipped with a
//! clear message.
//!
//! Output is compared byte for byte where the program's output is
//! deterministic (compressors, sort). sysbench and stress-ng print timings,
//! so for them the exit status and their deterministic lines (event counts,
//! pass/fail summaries) are compared.

use locksuit_tests::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

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
            "sysbench threads --threads=4 --events=3000 --time=0 run",
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

#[test]
fn memcached_under_load() {
    if !installed("memcached") || !installed("memcaslap") {
        return;
    }
    let dir = fresh_dir("real-memcached");
    // A port per test process, so parallel test runs do not collide.
    let port = 20000 + std::process::id() % 20000;
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
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::net::TcpStream::connect(&addr).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "memcached did not come up"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let load = Command::new("memcaslap")
        .args(["-s", &addr, "-t", "5s", "-T", "2", "-c", "16"])
        .env_remove("LD_PRELOAD")
        .output()
        .expect("memcaslap runs");
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
    let report = report_json(&[&dir], None);
    let p = active_process(&report, "memcached")[0];
    assert!(
        arr(p, "threads").len() >= 5,
        "memcached's worker threads are recorded"
    );
}

extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}
