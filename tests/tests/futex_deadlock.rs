//! A futex deadlock (issue 36): two `std::sync::Mutex`es taken in opposite
//! orders by two threads (tests/rust/futex_deadlock.rs), under `locksuit
//! run --deadlock-timeout 2`, which must say the threads are stuck, on
//! which futex words, at which lines of the program.

use locksuit_tests::*;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// A finished `locksuit run --deadlock-timeout 2` of
/// tests/rust/futex_deadlock.rs: its stderr, the `deadlock` finding, and
/// the tids of the two threads and the line of their second lock.
struct Hung {
    stderr: String,
    deadlock: Value,
    /// The report's locks.
    locks: Vec<Value>,
    ab: u64,
    ba: u64,
    line: String,
}

fn run_futex_deadlock(tag: &str) -> Hung {
    let (bin, source) = build_rust("futex_deadlock");
    let root = fresh_dir(tag);
    let json = root.join("report.json");
    let mut cmd = Command::new(locksuit_path());
    cmd.args(["run", "--deadlock-timeout", "2", "--format", "json", "-o"])
        .arg(&json)
        .arg("--dir")
        .arg(root.join("traces"))
        .arg("--shim")
        .arg(shim_path())
        .arg("--")
        .arg(&bin)
        .env_remove("LD_PRELOAD");
    let started = std::time::Instant::now();
    let out = run_captured(cmd);
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(took.as_secs() < 20, "stopped within seconds, not {took:?}");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let p = only_process(&report);
    let pid = u64_of(p, "pid");
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "process {pid} is not left running"
    );
    let deadlock = findings(p)
        .iter()
        .find(|f| f["kind"] == "deadlock")
        .unwrap_or_else(|| panic!("a deadlock finding: {:#}", p["findings"]))
        .clone();
    let stdout = stdout_str(&out);
    let tid = |key: &str| stdout_value(&stdout, key).parse::<u64>().unwrap();
    Hung {
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        deadlock,
        locks: arr(p, "locks").to_vec(),
        ab: tid("ab_tid"),
        ba: tid("ba_tid"),
        line: format!(
            "futex_deadlock.rs:{}",
            line_in(&source, "marker: second lock")
        ),
    }
}

impl Hung {
    /// The step of the finding's `cycle` of thread `tid`.
    fn step(&self, tid: u64) -> &Value {
        arr(&self.deadlock, "cycle")
            .iter()
            .find(|s| s["tid"] == tid)
            .unwrap_or_else(|| panic!("thread {tid} in {:#}", self.deadlock))
    }
}

#[test]
fn a_futex_deadlock_is_explained_by_its_words_and_lines() {
    let hung = run_futex_deadlock("futex-deadlock");
    assert!(
        hung.stderr.contains("locksuit: deadlock in process"),
        "explained on stderr: {}",
        hung.stderr
    );
    // Each thread stuck on the other's mutex (its futex word, named by the
    // static the program wrote, not by std's fields it lies in), at the
    // line of its second lock.
    for (tid, waits_for) in [
        (hung.ab, "&futex_deadlock::B"),
        (hung.ba, "&futex_deadlock::A"),
    ] {
        let step = hung.step(tid);
        assert_eq!(step["waits_for"], waits_for, "{step}");
        assert!(
            str_of(step, "waits_site").ends_with(&hung.line),
            "{step}: at {}",
            hung.line
        );
        let said = format!(
            "waits for {waits_for} at futex_deadlock::take@{}",
            hung.line
        );
        assert!(hung.stderr.contains(&said), "{said}: {}", hung.stderr);
    }
    // Each word by the program's object; the path into std's own fields
    // kept in `futex_path`. The `Barrier`'s two words (its condition
    // variable's, which the first thread to arrive always waits on, and
    // its mutex's, waited on only when the two arrive at once) are told
    // apart by the field each lies in. (std's own, `STDOUT`'s lock, may be
    // there too.)
    let named: Vec<(&str, &str)> = hung
        .locks
        .iter()
        .map(|l| (str_of(l, "id"), str_of(l, "futex_path")))
        .filter(|(_, path)| path.starts_with("futex_deadlock::"))
        .collect();
    let expected = [
        ("&futex_deadlock::A", "futex_deadlock::A.inner"),
        ("&futex_deadlock::B", "futex_deadlock::B.inner"),
        (
            "&futex_deadlock::BOTH_HELD/cvar",
            "futex_deadlock::BOTH_HELD.cvar",
        ),
        (
            "&futex_deadlock::BOTH_HELD/lock",
            "futex_deadlock::BOTH_HELD.lock.inner",
        ),
    ];
    for (i, word) in expected.iter().enumerate() {
        assert!(
            i == 3 || named.contains(word),
            "{word:?} in {named:?}: {:#?}",
            hung.locks
        );
    }
    for word in &named {
        assert!(expected.contains(word), "{word:?}: {:#?}", hung.locks);
    }
}

#[test]
#[ignore = "who holds a futex word is known only from a wake, and A and B were taken without waiting: the finding says 'no runnable thread' with each thread 'holds nothing', not the cycle ab holds A, waits for B; ba holds B, waits for A"]
fn a_futex_deadlock_is_a_cycle_of_holders() {
    let hung = run_futex_deadlock("futex-deadlock-cycle");
    for (tid, holds) in [
        (hung.ab, "&futex_deadlock::A"),
        (hung.ba, "&futex_deadlock::B"),
    ] {
        assert_eq!(hung.step(tid)["holds"], holds, "{:#}", hung.deadlock);
    }
    let mut locks: Vec<&str> = arr(&hung.deadlock, "locks")
        .iter()
        .filter_map(|l| l.as_str())
        .collect();
    locks.sort_unstable();
    assert_eq!(
        locks,
        ["&futex_deadlock::A", "&futex_deadlock::B"],
        "{:#}",
        hung.deadlock
    );
}
