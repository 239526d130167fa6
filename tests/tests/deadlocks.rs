//! Deadlocks: lock-order inversions that could deadlock (from the
//! lock-order graph), and programs that really hang, explained from the
//! waits in progress their traces hold (while they hang, and after they
//! were killed).

use locksuit_tests::*;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn kinds<'a>(p: &'a Value, kind: &str) -> Vec<&'a Value> {
    findings(p)
        .iter()
        .filter(|f| f["kind"].as_str() == Some(kind))
        .collect()
}

/// `lock_order MODE` without and under the shim (same status and output):
/// its process in the JSON report.
fn lock_order(mode: &str) -> Value {
    let bin = build_c("lock_order");
    let plain = run_plain(&bin, &[mode]);
    let dir = fresh_dir(&format!("lock_order_{mode}"));
    let out = run_under_shim(&bin, &[mode], &dir);
    assert_success(&out, mode);
    assert_same_output(&plain, &out);
    let report = report_json(&[&only_trace(&dir)], None);
    only_process(&report).clone()
}

#[test]
fn lock_order_inversions_are_potential_deadlocks_and_nothing_else_is() {
    // (mode, potential deadlocks, edges in the cycle)
    let expected: &[(&str, usize, usize)] = &[
        ("abba", 1, 2),
        ("gated", 0, 0),
        ("three", 1, 3),
        ("buckets", 0, 0),
        ("buckets-reversed", 1, 5),
        ("trylock", 0, 0),
        ("read-read", 0, 0),
        // glibc's default rwlocks let a reader in past a queued writer: a
        // read never waits for a read hold (order_truth.c has the kinds
        // that can).
        ("read-read-written", 0, 0),
        ("recursive", 0, 0),
        ("gate-dropped", 1, 2),
    ];
    for &(mode, count, edges) in expected {
        let p = lock_order(mode);
        for f in findings(&p) {
            let message = str_of(f, "message");
            assert!(!message.contains(" 1 times"), "{message}");
        }
        let found = kinds(&p, "potential-deadlock");
        assert_eq!(
            found.len(),
            count,
            "{mode}: potential deadlocks: {}",
            short(&p["findings"])
        );
        if let Some(f) = found.first() {
            let cycle = arr(f, "cycle");
            assert_eq!(cycle.len(), edges, "{mode}: {}", short(f));
            for step in cycle {
                assert!(
                    step["tid"].as_u64().is_some_and(|t| t > 0),
                    "{}",
                    short(step)
                );
                assert!(step["holds"].is_string() && step["waits_for"].is_string());
                assert!(step["count"].as_u64().is_some_and(|n| n >= 1));
            }
        }
        match mode {
            "abba" => {
                let message = str_of(found[0], "message");
                assert!(
                    message.contains("take_ab") && message.contains("take_ba"),
                    "both functions are named: {message}"
                );
            }
            "gate-dropped" => {
                // The gate the first A -> B had was dropped later; the
                // edge counts every time it was taken.
                let a_to_b = arr(found[0], "cycle")
                    .iter()
                    .find(|s| s["holds"].as_str() == Some("&a"))
                    .unwrap_or_else(|| panic!("{}", short(found[0])));
                assert_eq!(a_to_b["count"].as_u64(), Some(10), "{}", short(a_to_b));
            }
            "gated" => {
                let warned = arr(&p, "warnings")
                    .iter()
                    .any(|w| w.as_str().is_some_and(|w| w.contains("left out")));
                assert!(
                    warned,
                    "the suppressed cycle is counted: {}",
                    short(&p["warnings"])
                );
            }
            _ => {}
        }
    }
}

/// Starts `deadlock MODE` under the shim into `dir`.
fn start_hang(mode: &str, dir: &std::path::Path) -> Child {
    Command::new(build_c("deadlock"))
        .arg(mode)
        .env("LD_PRELOAD", shim_path())
        .env("LOCKSUIT_DIR", dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the hanging program")
}

/// Reports on `dir` until `done` says so (or 30 s pass).
fn report_until(dir: &std::path::Path, done: impl Fn(&Value) -> bool) -> Value {
    let started = Instant::now();
    loop {
        let out = run_locksuit(&[
            "report".as_ref(),
            dir.as_os_str(),
            "--format".as_ref(),
            "json".as_ref(),
        ]);
        if out.status.success() {
            let report: Value = serde_json::from_str(&stdout_str(&out)).unwrap();
            if done(&report) {
                return report;
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no such report within 30 s: {}",
            stdout_str(&out)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn the_deadlock(p: &Value) -> Option<&Value> {
    kinds(p, "deadlock").into_iter().next()
}

/// A program hung in each well-known way is explained while it hangs (it
/// reads as running) and after it is killed (as died), and none of its
/// locks is called unnecessary.
#[test]
fn a_hung_program_is_explained_while_it_hangs_and_after() {
    for mode in ["abba", "self", "abandoned", "lost-wakeup", "join-lock"] {
        let dir = fresh_dir(&format!("deadlock_{mode}"));
        let mut child = start_hang(mode, &dir);
        let live = report_until(&dir, |r| {
            processes(r)
                .first()
                .is_some_and(|p| the_deadlock(p).is_some())
        });
        let p = only_process(&live);
        assert_eq!(
            p["ended_by"].as_str(),
            Some("running"),
            "{mode}: {}",
            short(p)
        );
        assert!(
            !arr(p, "blocked").is_empty(),
            "{mode}: blocked threads listed"
        );
        // The text report says so too, and never calls it dead.
        let text = stdout_str(&run_locksuit(&["report".as_ref(), dir.as_os_str()]));
        assert!(
            text.contains("still running") && !text.contains("DIED"),
            "{mode}: {text}"
        );
        child.kill().unwrap();
        child.wait().unwrap();

        // No cost floor: these programs take each lock a few times, and
        // what is said of them is what this checks.
        let report = report_json_with(&[&only_trace(&dir)], &["--min-acquisitions", "1"]);
        let p = only_process(&report);
        assert_eq!(p["ended_by"].as_str(), Some("died"), "{mode}");
        let deadlock =
            the_deadlock(p).unwrap_or_else(|| panic!("{mode}: {}", short(&p["findings"])));
        assert_eq!(
            findings(p)[0]["kind"].as_str(),
            Some("deadlock"),
            "{mode}: a deadlock ranks first"
        );
        assert!(
            findings(p)
                .iter()
                .filter(|f| f["kind"] == "unnecessary-lock" || f["kind"] == "single-thread-lock")
                .all(|f| !arr(f, "locks")
                    .iter()
                    .any(|l| arr(deadlock, "locks").contains(l))),
            "{mode}: a deadlocked lock is never unnecessary: {}",
            short(&p["findings"])
        );
        // Nor is a line that took one of them unsuitable (issue 32, 7).
        let stuck: Vec<&Value> = arr(deadlock, "locks").iter().collect();
        for f in kinds(p, "unsuitable-site") {
            let on_stuck = finding_sites(p, f)
                .iter()
                .any(|s| arr(s, "locks").iter().any(|l| stuck.contains(&l)));
            assert!(!on_stuck, "{mode}: {}", short(f));
        }
        let cycle = arr(deadlock, "cycle");
        let line = |step: &Value, field: &str| {
            step[field]
                .as_str()
                .map(|id| site_by_id(p, id)["line"].as_u64())
                .unwrap_or(None)
        };
        match mode {
            "abba" => {
                assert_eq!(cycle.len(), 2, "{}", short(deadlock));
                let waits: Vec<Option<u64>> = cycle.iter().map(|s| line(s, "waits_site")).collect();
                let holds: Vec<Option<u64>> = cycle.iter().map(|s| line(s, "holds_site")).collect();
                for (marker, lines) in [
                    ("@ab-second", &waits),
                    ("@ba-second", &waits),
                    ("@ab-first", &holds),
                    ("@ba-first", &holds),
                ] {
                    assert!(
                        lines.contains(&Some(line_of("deadlock.c", marker))),
                        "{marker}: {}",
                        short(deadlock)
                    );
                }
                assert_ne!(cycle[0]["tid"], cycle[1]["tid"]);
            }
            "self" => {
                assert_eq!(cycle.len(), 1);
                assert_eq!(
                    line(&cycle[0], "waits_site"),
                    Some(line_of("deadlock.c", "@self-relock"))
                );
                assert_eq!(cycle[0]["holds"], cycle[0]["waits_for"]);
            }
            "abandoned" => {
                assert!(
                    str_of(deadlock, "message").contains("exited"),
                    "{}",
                    short(deadlock)
                );
                assert_eq!(
                    line(&cycle[0], "waits_site"),
                    Some(line_of("deadlock.c", "@abandoned-wait"))
                );
            }
            "lost-wakeup" => {
                assert!(
                    str_of(deadlock, "message").starts_with("no runnable thread"),
                    "{}",
                    short(deadlock)
                );
                let lines: Vec<Option<u64>> = cycle.iter().map(|s| line(s, "waits_site")).collect();
                assert!(
                    lines.contains(&Some(line_of("deadlock.c", "@lost-wait"))),
                    "{lines:?}"
                );
            }
            "join-lock" => {
                // Main holds A and joins the thread; the thread waits for A.
                // A join's line engages no lock, so it is no site of the
                // report: the message names it.
                assert_eq!(cycle.len(), 2, "{}", short(deadlock));
                let waits: Vec<Option<u64>> = cycle.iter().map(|s| line(s, "waits_site")).collect();
                assert!(
                    waits.contains(&Some(line_of("deadlock.c", "@join-lock-wait"))),
                    "{}",
                    short(deadlock)
                );
                let message = str_of(deadlock, "message");
                let join_line = format!("deadlock.c:{}", line_of("deadlock.c", "@join-wait"));
                assert!(
                    message.contains(&join_line) && message.contains("Unlock before joining"),
                    "{message}"
                );
                let joiner = cycle
                    .iter()
                    .find(|s| s["holds"].is_string())
                    .unwrap_or_else(|| panic!("{}", short(deadlock)));
                let joined = cycle.iter().find(|s| s["tid"] != joiner["tid"]).unwrap();
                assert_eq!(
                    joiner["waits_for"].as_str().map(String::from),
                    Some(format!("thread {}", joined["tid"])),
                    "{}",
                    short(deadlock)
                );
                let holds: Vec<Option<u64>> = cycle.iter().map(|s| line(s, "holds_site")).collect();
                assert!(
                    holds.contains(&Some(line_of("deadlock.c", "@join-hold"))),
                    "{}",
                    short(deadlock)
                );
            }
            _ => unreachable!(),
        }
        // Every blocked thread says what it waits for and since when.
        for b in arr(p, "blocked") {
            assert!(b["tid"].as_u64().is_some());
            assert!(b["waits_in"].is_string());
            assert!(b["since_ns"].as_u64().is_some());
        }
    }
}

/// `locksuit run --deadlock-timeout 1 --on-deadlock ACTION --format json
/// -o ROOT/report.json --dir ROOT/traces -- deadlock MODE`.
fn watched_run(mode: &str, on_deadlock: &str, root: &std::path::Path) -> Command {
    let mut cmd = Command::new(locksuit_path());
    cmd.args([
        "run",
        "--deadlock-timeout",
        "1",
        "--on-deadlock",
        on_deadlock,
    ])
    .args(["--format", "json", "-o"])
    .arg(root.join("report.json"))
    .arg("--dir")
    .arg(root.join("traces"))
    .arg("--shim")
    .arg(shim_path())
    .arg("--")
    .arg(build_c("deadlock"))
    .arg(mode)
    .env_remove("LD_PRELOAD");
    cmd
}

/// `--on-deadlock keep`: the hung program is explained and left hanging
/// (for a debugger); once someone stops it, `run` reports and exits 1.
#[test]
fn run_can_keep_a_hung_program_for_a_debugger() {
    use std::io::{BufRead, BufReader};
    let root = fresh_dir("deadlock_run_keep");
    let mut run = watched_run("abba", "keep", &root)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start locksuit run");
    let mut stderr = BufReader::new(run.stderr.take().unwrap());
    let mut said = String::new();
    let pid: u32 = loop {
        let mut line = String::new();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "run ended before saying it keeps the process: {said}"
        );
        said.push_str(&line);
        if let Some(rest) = line.split("process ").nth(1) {
            if line.contains("is left hanging") {
                break rest.split(' ').next().unwrap().parse().unwrap();
            }
        }
    };
    assert!(said.contains("locksuit: deadlock in process"), "{said}");
    // Still there, and still stuck, until someone stops it.
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "process {pid} is kept: {said}"
    );
    assert!(run.try_wait().unwrap().is_none(), "run waits for it");
    // SAFETY: signalling the test's own hung grandchild.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGKILL) }, 0);
    let status = run.wait().unwrap();
    assert_eq!(status.code(), Some(1), "{said}");
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("report.json")).unwrap()).unwrap();
    assert!(
        processes(&report).iter().any(|p| the_deadlock(p).is_some()),
        "{}",
        short(&report)
    );
}

/// `locksuit run --deadlock-timeout 1`: a program that deadlocks is
/// explained on stderr within a few seconds, stopped (nothing is left
/// running), and `run` exits 1 with a `deadlock` finding in its report.
#[test]
fn run_with_a_deadlock_timeout_stops_a_hung_program() {
    for (mode, on_deadlock) in [
        ("abba", "kill"),
        ("self", "abort"),
        ("abandoned", "kill"),
        ("lost-wakeup", "kill"),
        ("named", "kill"),
    ] {
        let root = fresh_dir(&format!("deadlock_run_{mode}"));
        let json = root.join("report.json");
        let started = Instant::now();
        let out = run_captured(watched_run(mode, on_deadlock, &root));
        let took = started.elapsed();
        assert_eq!(out.status.code(), Some(1), "{mode}: {}", describe(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("locksuit: deadlock in process"),
            "{mode}: explained on stderr: {stderr}"
        );
        assert!(
            took < Duration::from_secs(20),
            "{mode}: stopped within seconds, not {took:?}"
        );
        let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let p = processes(&report)
            .iter()
            .find(|p| the_deadlock(p).is_some())
            .unwrap_or_else(|| panic!("{mode}: a deadlock finding: {}", stdout_str(&out)));
        let pid = p["pid"].as_u64().unwrap();
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "{mode}: process {pid} is not left running"
        );
        if mode == "named" {
            // Named by another thread before the shim knew it, and by
            // itself where no hook sees it (issue 32, 7): both named.
            let mut names: Vec<&str> = arr(the_deadlock(p).unwrap(), "cycle")
                .iter()
                .map(|step| step["thread_name"].as_str().unwrap_or("(none)"))
                .collect();
            names.sort_unstable();
            assert_eq!(names, ["taker-ab", "taker-ba"], "{}", short(p));
            let message = str_of(the_deadlock(p).unwrap(), "message");
            assert!(
                message.contains("(taker-ab)") && message.contains("(taker-ba)"),
                "{message}"
            );
        }
        if mode == "abba" {
            let message = str_of(the_deadlock(p).unwrap(), "message");
            for marker in ["@ab-second", "@ba-second"] {
                let line = line_of("deadlock.c", marker);
                assert!(
                    message.contains(&format!("deadlock.c:{line}")),
                    "{marker}: {message}"
                );
            }
        }
    }
}
