//! Advice as strong as its evidence (issue 32, item 1): one run in which
//! one thread alone took a lock is an observation (`single-thread-lock`);
//! the verdict `unnecessary-lock` needs every one of several runs of the
//! program (reported together, or from the run history), or the data its
//! critical sections touched (`locksuit cc`); one run in which two threads
//! took it clears it. tests/c/evidence.c models memcached's per-worker
//! stats mutexes, which a `stats` command takes from another thread.

use locksuit_tests::*;
use std::path::{Path, PathBuf};

/// `evidence MODE` under the shim, its trace written into `dir`.
fn record(mode: &str, dir: &Path) {
    let bin = build_c("evidence");
    let plain = run_plain(&bin, &[mode]);
    let out = run_under_shim(&bin, &[mode], dir);
    assert_success(&out, mode);
    assert_same_output(&plain, &out);
}

/// Findings of `kind` in `p`, each as (the lines' functions, evidence).
fn of_kind<'a>(p: &'a Value, kind: &str) -> Vec<&'a Value> {
    findings(p).iter().filter(|f| f["kind"] == kind).collect()
}

/// The finding of `kind` whose lines are in `function`, if any.
fn at<'a>(p: &'a Value, kind: &str, function: &str) -> Option<&'a Value> {
    of_kind(p, kind).into_iter().find(|f| {
        finding_sites(p, f)
            .iter()
            .any(|s| s["function"].as_str() == Some(function))
    })
}

/// Locks one thread alone took, as (kind, the function of its line).
fn alone(p: &Value) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = findings(p)
        .iter()
        .filter(|f| f["kind"] == "single-thread-lock" || f["kind"] == "unnecessary-lock")
        .map(|f| {
            let function = finding_sites(p, f)
                .first()
                .and_then(|s| s["function"].as_str())
                .unwrap_or("?")
                .to_string();
            (str_of(f, "kind").to_string(), function)
        })
        .collect();
    out.sort();
    out
}

fn runs_dir(tag: &str, modes: &[&str]) -> PathBuf {
    let dir = fresh_dir(tag);
    for mode in modes {
        record(mode, &dir);
    }
    dir
}

#[test]
fn one_run_is_an_observation_and_every_run_of_five_a_verdict() {
    let dir = runs_dir("evidence-five", &["quiet"; 5]);
    let traces = traces_in(&dir);
    assert_eq!(traces.len(), 5);
    // One trace alone: what one thread took is an observation.
    let one = report_json(&[&traces[0]], None);
    let p = only_process(&one);
    assert_eq!(
        alone(p),
        vec![
            ("single-thread-lock".into(), "work".into()),
            ("single-thread-lock".into(), "work".into())
        ],
        "{}",
        short(&p["findings"])
    );
    let stats = at(p, "single-thread-lock", "work").unwrap();
    assert_eq!(stats["evidence"]["basis"], "run");
    assert_eq!(stats["evidence"]["runs"], 1);
    let message = str_of(stats, "message");
    assert!(
        message.contains("in this run") && message.contains("observation"),
        "{message}"
    );
    // Four together: still an observation, and it says how far along.
    let four: Vec<&Path> = traces[..4].iter().map(PathBuf::as_path).collect();
    let report = report_json(&four, None);
    for p in processes(&report) {
        for f in of_kind(p, "single-thread-lock") {
            assert_eq!(f["evidence"]["runs"], 4, "{}", short(f));
            let message = str_of(f, "message");
            assert!(
                message.contains("each of the 4 recorded runs of evidence")
                    && message.contains("5 such runs"),
                "{message}"
            );
        }
        assert!(of_kind(p, "unnecessary-lock").is_empty());
    }
    // All five: every run had one thread alone take them, a verdict.
    let report = report_json(&[&dir], None);
    assert_eq!(processes(&report).len(), 5);
    for p in processes(&report) {
        assert!(of_kind(p, "single-thread-lock").is_empty(), "{}", short(p));
        let found = of_kind(p, "unnecessary-lock");
        assert_eq!(found.len(), 2, "stats and tally: {}", short(&p["findings"]));
        for f in found {
            assert_eq!(f["evidence"]["basis"], "runs");
            assert_eq!(f["evidence"]["runs"], 5);
            assert!(
                str_of(f, "message").contains("each of the 5 recorded runs of evidence"),
                "{}",
                short(f)
            );
        }
    }
    // --min-runs sets how many make a verdict.
    let report = report_json_with(&four, &["--min-runs", "4"]);
    assert!(processes(&report)
        .iter()
        .all(|p| of_kind(p, "unnecessary-lock").len() == 2));
}

#[test]
fn one_run_in_which_two_threads_took_it_clears_the_lock() {
    // memcached's pattern: four quiet runs, one in which a `stats` command
    // read every worker's stats under its lock.
    let dir = runs_dir(
        "evidence-stats",
        &["quiet", "quiet", "quiet", "quiet", "stats"],
    );
    let report = report_json(&[&dir], None);
    let stats_line = line_of("evidence.c", "/* @stats-own */");
    for p in processes(&report) {
        // The stats locks: shared in one run, so in none a finding.
        for f in findings(p) {
            let on_stats = finding_sites(p, f)
                .iter()
                .any(|s| s["line"].as_u64() == Some(stats_line));
            assert!(
                !(on_stats
                    && (f["kind"] == "single-thread-lock" || f["kind"] == "unnecessary-lock")),
                "the stats locks are shared in another run: {}",
                short(f)
            );
        }
        // The tally locks: alone in all five runs.
        let tally = at(p, "unnecessary-lock", "work").expect("tally is unnecessary");
        assert_eq!(tally["evidence"]["runs"], 5, "{}", short(tally));
    }
    let quiet = processes(&report)
        .iter()
        .find(|p| arr(p, "threads").len() == 5 && !findings(p).is_empty())
        .unwrap();
    let warnings = quiet["warnings"].to_string();
    assert!(
        warnings.contains("taken by several in another run of evidence"),
        "{warnings}"
    );
}

#[test]
fn a_fork_childs_lock_is_judged_with_its_parent() {
    let dir = runs_dir("evidence-fork", &["fork"]);
    let traces = traces_in(&dir);
    assert_eq!(traces.len(), 2, "parent and child");
    let child_line = line_of("evidence.c", "/* @child-total */");
    let child_trace = traces
        .iter()
        .find(|t| {
            let r = report_json(&[t.as_path()], None);
            only_process(&r)["fork_child"] == true
        })
        .unwrap();
    // The child alone took &total_lock 2000 times: alone, an observation.
    let alone_report = report_json(&[child_trace.as_path()], None);
    let child = only_process(&alone_report);
    let total = lock_by_id(child, "&total_lock");
    assert_eq!(u64_of(total, "threads"), 1);
    assert!(
        !findings_taken_alone(child, "&total_lock").is_empty(),
        "{}",
        short(&child["findings"])
    );
    // With its parent, where four threads shared it: no finding.
    let both = report_json(&[&dir], None);
    let child = processes(&both)
        .iter()
        .find(|p| p["fork_child"] == true)
        .unwrap();
    assert!(
        findings_taken_alone(child, "&total_lock").is_empty(),
        "shared in the parent: {}",
        short(&child["findings"])
    );
    assert!(sites(child)
        .iter()
        .any(|s| s["line"].as_u64() == Some(child_line)));
}

#[test]
fn the_run_history_is_evidence_too() {
    let history = fresh_dir("evidence-history").join("history.db");
    let history = history.to_str().unwrap();
    let save = |dir: &Path| {
        let out = run_locksuit(&[
            "report",
            dir.to_str().unwrap(),
            "--save",
            "--history",
            history,
            "--label",
            "t",
        ]);
        assert_success(&out, "report --save");
    };
    for i in 0..4 {
        save(&runs_dir(&format!("evidence-history-{i}"), &["quiet"]));
    }
    let now = runs_dir("evidence-history-now", &["quiet"]);
    let against = |n: &str| {
        report_json_with(
            &[&now],
            &["--against-history", n, "--history", history, "--label", "t"],
        )
    };
    let report = against("4");
    let p = only_process(&report);
    let found = of_kind(p, "unnecessary-lock");
    assert_eq!(found.len(), 2, "{}", short(&p["findings"]));
    assert!(found.iter().all(|f| f["evidence"]["runs"] == 5));
    // Only the last two saved: three runs, an observation still.
    let report = against("2");
    let p = only_process(&report);
    assert!(of_kind(p, "unnecessary-lock").is_empty());
    assert!(of_kind(p, "single-thread-lock")
        .iter()
        .all(|f| f["evidence"]["runs"] == 3));
    // A saved run in which the stats locks were shared clears them.
    save(&runs_dir("evidence-history-stats", &["stats"]));
    let report = against("5");
    let p = only_process(&report);
    let stats_line = line_of("evidence.c", "/* @stats-own */");
    assert!(
        findings(p).iter().all(|f| {
            f["kind"] != "unnecessary-lock"
                || finding_sites(p, f)
                    .iter()
                    .all(|s| s["line"].as_u64() != Some(stats_line))
        }),
        "{}",
        short(&p["findings"])
    );
    // No history there: one line, exit 2.
    let out = run_locksuit(&[
        "report",
        now.to_str().unwrap(),
        "--against-history",
        "3",
        "--history",
        "/nonexistent/history.db",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert_eq!(String::from_utf8_lossy(&out.stderr).lines().count(), 1);
}

#[test]
fn the_data_its_critical_sections_touched_makes_a_verdict_of_one_run() {
    let Some(bin) = instrumented("evidence") else {
        return;
    };
    let verdicts = |env: &[(&str, &str)], tag: &str| {
        let dir = fresh_dir(tag);
        let out = run_under_shim_env(&bin, &["quiet"], &dir, env);
        assert_success(&out, tag);
        let report = report_json(&[&only_trace(&dir)], None);
        alone(only_process(&report))
    };
    // Every engagement recorded: the data under the per-worker locks never
    // left its thread.
    let exact = verdicts(&[EVERY_ENGAGEMENT], "evidence-data-all");
    assert_eq!(
        exact,
        vec![
            ("unnecessary-lock".into(), "work".into()),
            ("unnecessary-lock".into(), "work".into())
        ]
    );
    // Sampled: another thread's touch may have been left out, so no verdict.
    let sampled = verdicts(&[], "evidence-data-sampled");
    assert!(
        sampled.iter().all(|(kind, _)| kind == "single-thread-lock") && sampled.len() == 2,
        "{sampled:?}"
    );
}

/// What counts as a run: one invocation, however many processes it forks
/// (a `multiprocessing` pool's children are no runs of their own), and a
/// trace read twice (a copy) is one process.
#[test]
fn a_run_is_one_invocation_not_each_process_or_copy() {
    let dir = runs_dir("evidence-forks", &["forks"]);
    assert_eq!(traces_in(&dir).len(), 4, "main and three children");
    let report = report_json_with(&[&dir], &["--min-runs", "2"]);
    for p in processes(&report) {
        let own = findings_taken_alone(p, "&own_lock");
        assert_eq!(own.len(), 1, "{}", short(&p["findings"]));
        assert_eq!(
            own[0]["kind"],
            "single-thread-lock",
            "one run: {}",
            short(own[0])
        );
        assert_eq!(own[0]["evidence"]["runs"], 1);
    }
    // Two copies of one quiet trace are one run, not two.
    let quiet = runs_dir("evidence-copy", &["quiet"]);
    let trace = only_trace(&quiet);
    let copy = fresh_dir("evidence-copy-2").join(trace.file_name().unwrap());
    std::fs::copy(&trace, &copy).unwrap();
    let report = report_json_with(&[trace.as_path(), copy.as_path()], &["--min-runs", "2"]);
    for p in processes(&report) {
        assert!(
            findings(p).iter().all(|f| f["kind"] != "unnecessary-lock"),
            "{}",
            short(&p["findings"])
        );
    }
}

/// One run saved again and again, and then reported with its history, is
/// still one run: saving is no evidence (found in review: five saves of
/// one trace made it "unnecessary-lock … each of the 6 recorded runs").
#[test]
fn a_run_saved_many_times_is_one_run() {
    let history = fresh_dir("evidence-resaved").join("history.db");
    let history = history.to_str().unwrap();
    let run = runs_dir("evidence-resaved-run", &["quiet"]);
    for _ in 0..5 {
        let out = run_locksuit(&[
            "report",
            run.to_str().unwrap(),
            "--save",
            "--history",
            history,
            "--label",
            "t",
        ]);
        assert_success(&out, "report --save");
    }
    let report = report_json_with(
        &[&run],
        &[
            "--against-history",
            "10",
            "--history",
            history,
            "--label",
            "t",
        ],
    );
    let p = only_process(&report);
    assert!(
        of_kind(p, "unnecessary-lock").is_empty(),
        "{}",
        short(&p["findings"])
    );
    for f in of_kind(p, "single-thread-lock") {
        assert_eq!(f["evidence"]["runs"], 1, "{}", short(f));
    }
}
