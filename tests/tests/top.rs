//! `locksuit top` in a real terminal: tmux runs it against a program that
//! is running (tests/c/top_target.c, two threads taking turns on one lock);
//! the test reads the pane as a person would see it (the lock table, the
//! hottest line, the merged event stream in causal order), presses keys
//! (sort, switch the program to recording every operation, pause), and
//! quits. Every wait polls the pane until what it looks for is there (or
//! 30 s pass), never a fixed sleep.

use locksuit_tests::*;
use std::process::Command;
use std::time::{Duration, Instant};

fn tmux(args: &[&str]) -> std::process::Output {
    Command::new("tmux").args(args).output().unwrap()
}

fn pane(session: &str) -> String {
    stdout_str(&tmux(&["capture-pane", "-p", "-t", session]))
}

/// Polls the pane until `want` holds; the pane as last seen.
fn until(session: &str, what: &str, want: impl Fn(&str) -> bool) -> String {
    let started = Instant::now();
    loop {
        let seen = pane(session);
        if want(&seen) {
            return seen;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no {what} in:\n{seen}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The number right after `pattern` in `line`, if it is there.
fn number_after(line: &str, pattern: &str) -> Option<u64> {
    let rest = &line[line.find(pattern)? + pattern.len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

#[test]
fn top_shows_a_running_programs_locks_and_answers_keys() {
    if Command::new("tmux").arg("-V").output().is_err() {
        eprintln!("tmux is not installed: the terminal view is not checked (.ci/run installs it)");
        return;
    }
    let bin = build_c("top_target");
    let dir = fresh_dir("top");
    let target = spawn_ready_under_shim(&bin, &dir);
    let session = format!("locksuit-top-{}", std::process::id());
    let command = format!(
        "env -u LD_PRELOAD {} top {}",
        locksuit_path().display(),
        dir.display()
    );
    let made = tmux(&[
        "new-session",
        "-d",
        "-s",
        &session,
        "-x",
        "120",
        "-y",
        "40",
        &command,
    ]);
    assert!(made.status.success(), "{}", describe(&made));
    let seen = until(&session, "lock table", |p| {
        p.contains("&hot_lock") && p.contains("Locks")
    });
    assert!(seen.contains("top_target"), "{seen}");
    assert!(seen.contains("running"), "{seen}");
    assert!(
        seen.contains("worker@top_target.c:"),
        "the hottest line:\n{seen}"
    );
    // The event pane: the merged stream, where an acquisition never shows
    // above the release that let it in.
    let seen = until(&session, "the event stream", |p| {
        p.contains("Events, in causal order")
            && p.contains("release &hot_lock #")
            && p.contains("acquire-after-wait &hot_lock #")
    });
    let lines: Vec<&str> = seen.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        let Some(n) = number_after(line, "acquire-after-wait &hot_lock #") else {
            continue;
        };
        let release = lines
            .iter()
            .position(|l| number_after(l, "release &hot_lock #") == Some(n));
        if let Some(j) = release {
            assert!(j < i, "acquisition #{n} above its release:\n{seen}");
        }
    }
    // A second later the interval's wait is there too (two threads taking
    // turns on a 2 ms hold wait most of the time).
    until(&session, "sort key", |p| p.contains("s: sort by total"));
    tmux(&["send-keys", "-t", &session, "s"]);
    until(&session, "the other sort", |p| {
        p.contains("s: sort by last interval")
    });
    // Steering: every operation recorded from now on, seen by the shim on
    // its next slow path.
    until(&session, "recording mode", |p| {
        p.contains("recording contended operations")
    });
    tmux(&["send-keys", "-t", &session, "e"]);
    until(&session, "full recording", |p| {
        p.contains("recording every operation")
    });
    tmux(&["send-keys", "-t", &session, "p"]);
    until(&session, "pause", |p| p.contains("paused"));
    tmux(&["send-keys", "-t", &session, "q"]);
    let started = Instant::now();
    while tmux(&["has-session", "-t", &session]).status.success() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "top did not quit"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    terminate(target);
    // The trace says its recording mode was switched while it ran.
    let report = report_json(&[&dir], None);
    assert_eq!(only_process(&report)["events_mode"], "switched");
}
