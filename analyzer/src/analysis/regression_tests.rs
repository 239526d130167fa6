use super::*;

const RULE: Rule = Rule {
    threshold: 0.2,
    spreads: 3.0,
};

/// knob.c's lock: `contended` of 100 + contended acquisitions waited,
/// `wait_ms` in all, out of `thread_ms` of the threads' lifetimes.
fn run(contended: u64, wait_ms: u64, thread_ms: u64, findings: &[&str]) -> Summary {
    let mut s = Summary {
        exe: "knob".into(),
        processes: 1,
        thread_time_ns: thread_ms * 1_000_000,
        ..Summary::default()
    };
    s.locks.insert(
        "&knob_lock".into(),
        Figures {
            acquisitions: 100 + contended,
            contended,
            wait_ns: wait_ms * 1_000_000,
            hold_ns: 0,
            threads: 2,
            lines: vec!["contend@knob.c:30".into()],
            path_ns: 0,
        },
    );
    s.findings = findings.iter().map(|f| f.to_string()).collect();
    s
}

fn measure<'a>(d: &'a Diff, figure: &str) -> Option<&'a Measure> {
    d.measures.iter().find(|m| m.figure == figure)
}

#[test]
fn the_median_and_the_spread_ignore_one_odd_run() {
    let (m, spread) = median_and_spread(&[10.0, 11.0, 12.0, 11.0, 90.0]);
    assert_eq!(m, 11.0);
    assert!((spread - 1.4826).abs() < 1e-9, "{spread}");
}

#[test]
fn a_doubled_contended_share_regresses_and_names_its_numbers() {
    let base = vec![run(10, 200, 400, &[]); 5];
    let d = diff(&base, &run(20, 400, 800, &[]), RULE);
    assert!(d.regressed);
    let share = measure(&d, "contended-share").unwrap();
    assert!(share.regressed);
    assert_eq!((share.runs, share.runs_passed, share.spread), (5, 5, 0.0));
    assert!((share.median - 10.0 / 110.0).abs() < 1e-9);
    // The limit: 20 % above the median, past the one-point floor.
    assert!((share.limit - 1.2 * 10.0 / 110.0).abs() < 1e-9);
    // Twice the waits in twice the time: the wait share held.
    let wait = measure(&d, "wait-share").unwrap();
    assert!(!wait.regressed && !wait.improved, "{wait:?}");
}

#[test]
fn a_run_slowed_throughout_regresses_nothing_and_is_told() {
    let base = vec![run(10, 200, 400, &[]); 3];
    let d = diff(&base, &run(10, 400, 800, &[]), RULE);
    assert!(!d.regressed, "{d:?}");
    let per = measure(&d, "wait-per-acquisition-ns").unwrap();
    assert!(per.changed && !per.regressed, "{per:?}");
}

#[test]
fn a_value_within_the_spread_of_the_history_passes() {
    // Contention that swings from run to run: 10 to 30 contended.
    let base: Vec<Summary> = [10, 30, 14, 25, 18]
        .iter()
        .map(|&c| run(c, c * 20, 1000, &[]))
        .collect();
    let d = diff(&base, &run(28, 560, 1000, &[]), RULE);
    assert!(!d.regressed, "{d:?}");
    // Far past it regresses.
    let d = diff(&base, &run(60, 1200, 1000, &[]), RULE);
    assert!(d.regressed, "{d:?}");
}

#[test]
fn one_odd_saved_run_neither_sets_the_bar_nor_hides_a_regression() {
    let mut base = vec![run(10, 200, 400, &[]); 4];
    base.push(run(20, 400, 500, &[]));
    let d = diff(&base, &run(20, 400, 500, &[]), RULE);
    assert!(d.regressed, "above four of five runs: {d:?}");
    assert_eq!(measure(&d, "contended-share").unwrap().runs_passed, 4);
}

#[test]
fn timing_findings_count_only_when_they_last_or_their_lock_regressed() {
    let mut base = vec![run(10, 200, 400, &[]); 3];
    base.push(run(10, 200, 400, &["long-hold &knob_lock"]));
    base.push(run(10, 200, 400, &[]));
    // In one of five saved runs and this one: it comes and goes.
    let d = diff(&base, &run(10, 200, 400, &["long-hold &knob_lock"]), RULE);
    assert!(!d.regressed, "{d:?}");
    let f = &d.findings_appeared[0];
    assert!(f.timing && !f.regressed && (f.in_runs, f.runs) == (1, 5));
    // With its lock past the spread it counts.
    let d = diff(&base, &run(30, 600, 800, &["long-hold &knob_lock"]), RULE);
    assert!(d.findings_appeared[0].subject_regressed);
    assert!(d.findings_appeared[0].regressed);
    // In two of four saved runs and this one: most of them.
    let half = [&base[3], &base[0], &base[3], &base[0]].map(Summary::clone);
    let d = diff(&half, &run(10, 200, 400, &["long-hold &knob_lock"]), RULE);
    assert!(d.findings_appeared[0].regressed && d.regressed, "{d:?}");
}

#[test]
fn a_structural_finding_counts_at_once() {
    let base = vec![run(10, 200, 400, &[]); 5];
    let d = diff(&base, &run(10, 200, 400, &["potential-deadlock &a"]), RULE);
    assert!(d.regressed);
    assert!(!d.findings_appeared[0].timing);
    let better = diff(&[run(10, 200, 400, &["misuse &a"])], &base[0], RULE);
    assert_eq!(better.findings_resolved[0].finding, "misuse &a");
    assert!(!better.regressed);
}

#[test]
fn runs_saved_without_thread_times_are_judged_on_the_rest() {
    let mut old = run(10, 200, 0, &[]);
    old.thread_time_ns = 0;
    let d = diff(&[old], &run(30, 600, 800, &[]), RULE);
    assert!(measure(&d, "wait-share").is_none(), "{d:?}");
    assert!(measure(&d, "contended-share").unwrap().regressed);
}
