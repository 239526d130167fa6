//! The history gate judged on the spread of the saved runs (issue 34):
//! unchanged code on a busy machine never regresses, a doubled contended
//! share is caught, and a run slowed down throughout is not a regression.
//! Ground truth from tests/c/knob.c, whose contended count is exact
//! whatever the load, and which measures its own waits.

use locksuit_tests::*;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// One recorded run of knob.c with `contended` waits of `hold_ms` each:
/// its trace directory and the time main measured itself waiting (µs).
fn knob_run(name: &str, contended: u32, hold_ms: u32) -> (PathBuf, u64) {
    let bin = build_c("knob");
    let dir = fresh_dir(name);
    let (k, hold) = (contended.to_string(), hold_ms.to_string());
    let out = run_under_shim_env(
        &bin,
        &[] as &[&str],
        &dir,
        &[("KNOB_CONTENDED", &k), ("KNOB_HOLD_MS", &hold)],
    );
    assert_success(&out, "knob");
    let stdout = stdout_str(&out);
    assert_eq!(stdout_value(&stdout, "contended"), k);
    let waited = stdout_value(&stdout, "waited_us").parse().unwrap();
    (dir, waited)
}

fn save(run: &Path, db: &Path) {
    let out = run_locksuit(&[
        "report",
        "--save",
        "--history",
        s(db),
        "--label",
        "ci",
        "--format",
        "summary",
        s(run),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
}

fn against_history(run: &Path, db: &Path, format: &str) -> Output {
    run_locksuit(&[
        "diff",
        "--against-history",
        "5",
        "--history",
        s(db),
        "--label",
        "ci",
        "--format",
        format,
        s(run),
    ])
}

/// Busy loops beside the test, killed when it ends (a failed assertion
/// too).
struct CpuHogs(Vec<Child>);

impl CpuHogs {
    fn start(n: usize) -> CpuHogs {
        CpuHogs(
            (0..n)
                .map(|_| {
                    Command::new("sh")
                        .args(["-c", "while :; do :; done"])
                        .stdin(Stdio::null())
                        .spawn()
                        .unwrap()
                })
                .collect(),
        )
    }
}

impl Drop for CpuHogs {
    fn drop(&mut self) {
        for hog in &mut self.0 {
            let _ = hog.kill();
            let _ = hog.wait();
        }
    }
}

#[test]
fn a_run_slowed_down_throughout_is_not_a_regression() {
    // Every wait twice as long, and the run with it: what a machine twice
    // as busy does to unchanged code. Wait per acquisition doubles; the
    // share of the threads' time spent waiting does not.
    let db = fresh_dir("gate-slowed").join("history.db");
    let mut base_waited = Vec::new();
    for i in 0..3 {
        let (run, waited) = knob_run(&format!("gate-slowed-{i}"), 10, 10);
        save(&run, &db);
        base_waited.push(waited);
    }
    let (slow, slow_waited) = knob_run("gate-slowed-slow", 10, 20);
    base_waited.sort_unstable();
    // The slow-down happened, by the program's own measure.
    assert!(
        slow_waited as f64 > 1.5 * base_waited[1] as f64,
        "{slow_waited} µs against {base_waited:?}"
    );
    let out = against_history(&slow, &db, "json");
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let diffs: serde_json::Value = serde_json::from_str(&stdout_str(&out)).unwrap();
    let share = diffs[0]["measures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["what"] == "lock" && m["figure"] == "wait-share")
        .unwrap_or_else(|| panic!("{diffs:#}"))
        .clone();
    assert_eq!(share["regressed"], false, "{share:#}");
    assert_eq!(share["runs"], 3, "{share:#}");
}

#[test]
fn unchanged_runs_beside_four_cpu_hogs_never_regress() {
    // Five runs saved on a quiet machine, then twenty on a busy one, each
    // held to the last five saved as in a CI job, and saved in turn.
    let history = fresh_dir("gate-unchanged").join("history.db");
    for i in 0..5 {
        save(
            &knob_run(&format!("gate-unchanged-quiet-{i}"), 10, 20).0,
            &history,
        );
    }
    let _hogs = CpuHogs::start(4);
    let knob = build_c("knob");
    let mut regressed = Vec::new();
    for i in 0..20 {
        let dir = fresh_dir(&format!("gate-unchanged-{i}"));
        let out = Command::new(workspace_root().join("scripts/run-under-shim.sh"))
            .args(["--dir", s(&dir), "--format", "summary", "--save"])
            .args(["--history", s(&history), "--label", "ci"])
            .args(["--against-history", "5", "--"])
            .arg(&knob)
            .env("LOCKSUIT_BIN", locksuit_path())
            .env_remove("LD_PRELOAD")
            .output()
            .unwrap();
        match out.status.code() {
            Some(0) => {}
            Some(1) => regressed.push(describe(&out)),
            _ => panic!("run {i}: {}", describe(&out)),
        }
    }
    assert!(
        regressed.is_empty(),
        "{} of 20 unchanged runs regressed:\n{}",
        regressed.len(),
        regressed.join("\n")
    );
}

#[test]
fn a_doubled_contended_share_is_caught_in_19_of_20_runs() {
    let db = fresh_dir("gate-doubled").join("history.db");
    for i in 0..5 {
        save(&knob_run(&format!("gate-doubled-base-{i}"), 5, 10).0, &db);
    }
    let mut caught = 0;
    let mut explained = None;
    for i in 0..20 {
        let (run, _) = knob_run(&format!("gate-doubled-{i}"), 10, 10);
        let out = against_history(&run, &db, "text");
        match out.status.code() {
            Some(1) => caught += 1,
            Some(0) => {}
            _ => panic!("run {i}: {}", describe(&out)),
        }
        explained.get_or_insert(stdout_str(&out));
    }
    eprintln!("a doubled contended share: caught in {caught} of 20 runs");
    assert!(caught >= 19, "caught {caught} of 20");
    // The verdict says which numbers it used: 5 of 105 acquisitions is
    // 4.8 %, 10 of 110 is 9.1 %.
    let text = explained.unwrap();
    let line = text
        .lines()
        .find(|l| l.contains("REGRESSED: lock &knob_lock") && l.contains("contended share"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains("4.8% -> 9.1%"), "{line}");
    assert!(line.contains("median of 5 runs"), "{line}");
    assert!(line.contains("spread"), "{line}");
    assert!(line.contains("limit"), "{line}");
}
