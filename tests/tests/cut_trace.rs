//! A trace file cut under the program (issue 33, item 4): the program
//! runs on, its own SIGBUS handling stays its own, and the trace says it
//! was cut (tests/c/cut_trace.c).

use locksuit_tests::*;
use std::os::unix::process::ExitStatusExt;

/// The program's output without the line that says whether it found a
/// trace to cut (none without the shim).
fn without_cut_line(out: &std::process::Output) -> String {
    stdout_str(out)
        .lines()
        .filter(|l| !l.starts_with("cut "))
        .collect::<Vec<_>>()
        .join("\n")
}

fn both_ways(
    mode: &str,
) -> (
    std::process::Output,
    std::process::Output,
    std::path::PathBuf,
) {
    let bin = build_c("cut_trace");
    let plain = run_plain(&bin, &[mode]);
    let dir = fresh_dir(&format!("cut-trace-{mode}"));
    let traced = run_under_shim(&bin, &[mode], &dir);
    assert_eq!(
        traced.status.code(),
        plain.status.code(),
        "{mode}: plain {}\nunder the shim {}",
        describe(&plain),
        describe(&traced)
    );
    assert_eq!(traced.status.signal(), plain.status.signal(), "{mode}");
    assert_eq!(
        without_cut_line(&traced),
        without_cut_line(&plain),
        "{mode}"
    );
    (plain, traced, dir)
}

#[test]
fn a_program_whose_trace_is_cut_runs_on_and_the_trace_says_so() {
    let (_, traced, dir) = both_ways("cut");
    assert_eq!(
        stdout_value(&stdout_str(&traced), "cut"),
        "1",
        "the test cut its trace"
    );
    let report = report_json(&[&only_trace(&dir)], None);
    let p = only_process(&report);
    let warnings = arr(p, "warnings");
    assert!(
        warnings
            .iter()
            .any(|w| w.as_str().unwrap_or_default().contains("cut (truncated)")),
        "{}",
        short(p)
    );
    // What was recorded after the cut is there: the 2,000 locks taken
    // then, less those in the blocks the threads were writing when it came.
    let after = locks(p).len();
    assert!(
        (1000..=2000).contains(&after),
        "{after} locks: {}",
        short(p)
    );
}

#[test]
fn the_programs_own_sigbus_handler_stays_its_own() {
    // It reads its handler back, gets a SIGBUS it raised and one it caused,
    // and never sees the one the cut trace caused.
    let (_, traced, _) = both_ways("handler");
    let stdout = stdout_str(&traced);
    assert!(stdout.contains("own-handler yes"), "{stdout}");
    assert!(stdout.ends_with("handled 2\n"), "{stdout}");
}

#[test]
fn a_sigbus_with_the_default_action_still_ends_the_program() {
    let (plain, _, _) = both_ways("default");
    assert_eq!(plain.status.signal(), Some(libc::SIGBUS));
}
