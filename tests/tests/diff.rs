//! The regression gate: `locksuit diff` between two runs, the run history
//! (`report --save`, `locksuit history`, `diff --against-history`), and bad
//! input. Ground truth from tests/c/knob.c, whose lock is contended exactly
//! KNOB_CONTENDED times (about 20 ms each), whatever the machine's load.

use locksuit_tests::*;
use std::path::{Path, PathBuf};
use std::process::Output;

/// One recorded run of knob.c at setting `k`: its trace directory.
fn knob_run(name: &str, k: u32) -> PathBuf {
    let bin = build_c("knob");
    let dir = fresh_dir(name);
    let k = k.to_string();
    let out = run_under_shim_env(&bin, &[] as &[&str], &dir, &[("KNOB_CONTENDED", &k)]);
    assert_success(&out, "knob");
    assert_eq!(stdout_value(&stdout_str(&out), "contended"), k);
    dir
}

fn locksuit(args: &[&str]) -> Output {
    run_locksuit(args)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn runs_at_one_setting_pass_and_a_more_contended_run_fails_naming_the_lock() {
    let a = knob_run("diff-a", 10);
    let b = knob_run("diff-b", 10);
    let worse = knob_run("diff-worse", 30);
    let same = locksuit(&["diff", s(&a), s(&b)]);
    assert_eq!(same.status.code(), Some(0), "{}", describe(&same));
    let out = locksuit(&["diff", s(&a), s(&worse)]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let text = stdout_str(&out);
    let line = text
        .lines()
        .find(|l| l.contains("REGRESSED: lock &knob_lock") && l.contains("contended share"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains("contend@knob.c:"), "{line}");
    assert!(line.contains("9.1% -> 23.1%"), "{line}");
    assert!(
        text.contains("new finding high-contention &knob_lock"),
        "{text}"
    );
    // The same from JSON reports, and in JSON.
    let base_json = a.join("base.json");
    let saved = locksuit(&["report", "--format", "json", "-o", s(&base_json), s(&a)]);
    assert_eq!(saved.status.code(), Some(0), "{}", describe(&saved));
    let out = locksuit(&["diff", "--format", "json", s(&base_json), s(&worse)]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let diffs: serde_json::Value = serde_json::from_str(&stdout_str(&out)).unwrap();
    assert_eq!(diffs[0]["exe"], "knob");
    assert_eq!(diffs[0]["regressed"], true);
    // The other way round the lock improved (its lines' sharing drops,
    // so unsuitable-site findings may appear: those are new findings).
    let better = locksuit(&["diff", s(&worse), s(&a)]);
    let text = stdout_str(&better);
    assert!(text.contains("improved: lock &knob_lock"), "{text}");
    assert!(!text.contains("REGRESSED: lock"), "{text}");
    assert!(
        text.contains("resolved: finding high-contention &knob_lock"),
        "{text}"
    );
}

#[test]
fn the_history_gate_holds_over_repeated_runs_and_catches_a_regression() {
    let dir = fresh_dir("diff-history");
    let db = dir.join("history.db");
    let mut runs = Vec::new();
    for i in 0..5 {
        let run = knob_run(&format!("diff-history-{i}"), 10);
        runs.push(run.clone());
        let out = locksuit(&[
            "report",
            "--save",
            "--history",
            s(&db),
            "--label",
            "ci",
            "--format",
            "summary",
            s(&run),
        ]);
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
        assert!(String::from_utf8_lossy(&out.stderr).contains("saved run"));
    }
    let listed = locksuit(&["history", "--history", s(&db), "--exe", "knob"]);
    assert_eq!(listed.status.code(), Some(0), "{}", describe(&listed));
    assert_eq!(
        stdout_str(&listed)
            .lines()
            .filter(|l| l.contains(" knob "))
            .count(),
        5
    );
    // Each of the five, and a sixth, against the median of the five.
    let sixth = knob_run("diff-history-6", 10);
    // Each wait is a 20 ms sleep of the helper, which a busy machine
    // stretches (1.94 -> 4.24 ms per acquisition in one run on unchanged
    // code): the gate judges shares of the acquisitions and of the
    // threads' time against the five runs' spread, at its default limits.
    let against_label = |run: &Path, label: &str| {
        locksuit(&[
            "diff",
            "--against-history",
            "5",
            "--history",
            s(&db),
            "--label",
            label,
            s(run),
        ])
    };
    let against = |run: &Path| against_label(run, "ci");
    // No false alarm for any run at the setting the history was made at.
    runs.push(sixth);
    for run in &runs {
        let out = against(run);
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    }
    let worse = knob_run("diff-history-worse", 30);
    let out = against(&worse);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let text = stdout_str(&out);
    assert!(
        text.contains("REGRESSED: lock &knob_lock") && text.contains("median of 5 runs"),
        "{text}"
    );
    // Another label has no runs to compare with.
    let out = against_label(&worse, "other");
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
}

#[test]
fn two_processes_saving_at_once_both_land() {
    let run = knob_run("diff-concurrent", 3);
    let db = run.join("history.db");
    let save = |db: PathBuf, run: PathBuf| {
        move || {
            std::process::Command::new(locksuit_path())
                .args([
                    "report",
                    "--save",
                    "--history",
                    s(&db),
                    "--format",
                    "summary",
                    s(&run),
                ])
                .output()
                .unwrap()
        }
    };
    let other = std::thread::spawn(save(db.clone(), run.clone()));
    let mine = save(db.clone(), run.clone())();
    let theirs = other.join().unwrap();
    for out in [&mine, &theirs] {
        assert_eq!(out.status.code(), Some(0), "{}", describe(out));
    }
    let listed = locksuit(&["history", "--history", s(&db), "--format", "json"]);
    let runs: serde_json::Value = serde_json::from_str(&stdout_str(&listed)).unwrap();
    assert_eq!(runs.as_array().unwrap().len(), 2, "{runs}");
}

fn one_line_error(out: &Output, what: &str) -> String {
    assert_eq!(out.status.code(), Some(2), "{what}: {}", describe(out));
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(err.lines().count(), 1, "{what}: {err}");
    err
}

#[test]
fn bad_input_gets_one_line_and_exit_2() {
    let knob = knob_run("diff-bad-knob", 2);
    let tiny = fresh_dir("diff-bad-tiny");
    assert_success(
        &run_under_shim(&build_c("tiny"), &[] as &[&str], &tiny),
        "tiny",
    );
    let err = one_line_error(&locksuit(&["diff", s(&knob), s(&tiny)]), "programs");
    assert!(err.contains("different programs"), "{err}");
    let junk = knob.join("junk.json");
    std::fs::write(&junk, "{\"schema\": \"locksuit.report/99\"}").unwrap();
    let err = one_line_error(&locksuit(&["diff", s(&junk), s(&knob)]), "schema");
    assert!(err.contains("locksuit.report/99"), "{err}");
    let err = one_line_error(&locksuit(&["diff", "/no/such/run", s(&knob)]), "missing");
    assert!(err.contains("/no/such/run"), "{err}");
    let corrupt = knob.join("corrupt.db");
    std::fs::write(&corrupt, vec![b'x'; 4096]).unwrap();
    let before = std::fs::read(&corrupt).unwrap();
    let err = one_line_error(
        &locksuit(&["report", "--save", "--history", s(&corrupt), s(&knob)]),
        "corrupt",
    );
    assert!(err.contains("corrupt.db"), "{err}");
    assert_eq!(std::fs::read(&corrupt).unwrap(), before, "left as it was");
    // A history from a newer locksuit is refused, and left alone.
    let newer = knob.join("newer.db");
    let made = locksuit(&[
        "report",
        "--save",
        "--history",
        s(&newer),
        "--format",
        "summary",
        s(&knob),
    ]);
    assert_eq!(made.status.code(), Some(0), "{}", describe(&made));
    let bumped = std::process::Command::new("python3")
        .args(["-c", "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('PRAGMA user_version = 9'); c.commit()", s(&newer)])
        .status();
    if !bumped.is_ok_and(|st| st.success()) {
        eprintln!("python3's sqlite3 is missing: the newer-schema check is skipped");
        return;
    }
    let err = one_line_error(&locksuit(&["history", "--history", s(&newer)]), "newer");
    assert!(err.contains("newer locksuit"), "{err}");
}

/// scripts/run-under-shim.sh with `gate_options` (summary report) over
/// knob.c at setting `k`, its traces in a fresh directory `name`.
fn script_gate(gate_options: &[&str], k: &str, name: &str) -> Output {
    let dir = fresh_dir(name);
    std::process::Command::new(workspace_root().join("scripts/run-under-shim.sh"))
        .args(["--dir", s(&dir), "--format", "summary"])
        .args(gate_options)
        .arg("--")
        .arg(build_c("knob"))
        .env("KNOB_CONTENDED", k)
        .env_remove("LD_PRELOAD")
        .output()
        .unwrap()
}

#[test]
fn run_under_shim_gates_a_suite_on_a_baseline_in_one_line() {
    let base = knob_run("diff-script-base", 10);
    let gate = |k: &str, name: &str| script_gate(&["--baseline", s(&base)], k, name);
    let same = gate("10", "diff-script-same");
    assert_eq!(same.status.code(), Some(0), "{}", describe(&same));
    assert!(String::from_utf8_lossy(&same.stderr).contains("no regression"));
    let worse = gate("30", "diff-script-worse");
    assert_eq!(worse.status.code(), Some(1), "{}", describe(&worse));
    let err = String::from_utf8_lossy(&worse.stderr);
    assert!(err.contains("REGRESSED: lock &knob_lock"), "{err}");
    // The suite's own output is left alone.
    assert!(stdout_str(&worse).starts_with("contended 30\nwaited_us "));
}

#[test]
fn run_under_shim_gates_against_the_history_before_saving_the_run() {
    let history = fresh_dir("diff-script-history").join("history.db");
    let options = [
        "--save",
        "--history",
        s(&history),
        "--label",
        "gate",
        "--against-history",
        "1",
    ];
    let gate = |k: &str, name: &str| script_gate(&options, k, name);
    // The first run has nothing to be held to: it passes, and is saved.
    let first = gate("10", "diff-script-history-1");
    assert_eq!(first.status.code(), Some(0), "{}", describe(&first));
    let err = String::from_utf8_lossy(&first.stderr);
    assert!(err.contains("no saved run to compare with yet"), "{err}");
    let same = gate("10", "diff-script-history-2");
    assert_eq!(same.status.code(), Some(0), "{}", describe(&same));
    // Against the last saved run, which is the previous one, not itself
    // (saved first, a run would always equal the median of the last one).
    let worse = gate("30", "diff-script-history-3");
    assert_eq!(worse.status.code(), Some(1), "{}", describe(&worse));
    let err = String::from_utf8_lossy(&worse.stderr);
    assert!(err.contains("REGRESSED: lock &knob_lock"), "{err}");
    // Every run was saved, the regressed one too.
    let listed = locksuit(&["history", "--history", s(&history)]);
    assert_eq!(listed.status.code(), Some(0), "{}", describe(&listed));
    let lines = stdout_str(&listed);
    assert_eq!(lines.matches("knob").count(), 3, "{lines}");
}

#[test]
fn a_locked_history_gets_one_line_and_the_report_is_still_printed() {
    let knob = knob_run("diff-locked-knob", 2);
    let history = knob.join("history.db");
    let save = || {
        locksuit(&[
            "report",
            "--save",
            "--history",
            s(&history),
            "--format",
            "summary",
            s(&knob),
        ])
    };
    let made = save();
    assert_eq!(made.status.code(), Some(0), "{}", describe(&made));
    let before = std::fs::read(&history).unwrap();
    // Another process holds the database's write lock past locksuit's
    // 10 s wait (it says when it has the lock).
    let holder = std::process::Command::new("python3")
        .args([
            "-c",
            "import sqlite3,sys,time; c=sqlite3.connect(sys.argv[1], isolation_level=None); \
             c.execute('BEGIN EXCLUSIVE'); print('locked', flush=True); time.sleep(13); c.execute('ROLLBACK')",
            s(&history),
        ])
        .stdout(std::process::Stdio::piped())
        .spawn();
    let Ok(mut holder) = holder else {
        eprintln!("python3 is missing: the locked-history check is skipped");
        return;
    };
    let mut said = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(holder.stdout.take().unwrap()),
        &mut said,
    )
    .unwrap();
    if said.trim() != "locked" {
        eprintln!("python3's sqlite3 is missing: the locked-history check is skipped");
        let _ = holder.wait();
        return;
    }
    let out = save();
    let err = one_line_error(&out, "locked");
    assert!(err.contains("locked for over 10 s"), "{err}");
    assert!(err.contains("history.db"), "{err}");
    // The report was printed all the same.
    assert!(stdout_str(&out).contains("knob"), "{}", describe(&out));
    assert!(holder.wait().unwrap().success());
    assert_eq!(std::fs::read(&history).unwrap(), before, "nothing written");
    // Once free, the run saves.
    let saved = save();
    assert_eq!(saved.status.code(), Some(0), "{}", describe(&saved));
}
