//! `locksuit top` in a real terminal: tmux runs it against a program that
//! is running (tests/c/top_target.c, two threads taking turns on one lock);
//! the test reads the pane as a person would see it (the lock table, the
//! hottest line, the merged event stream in causal order), presses keys
//! (sort, switch the program to recording every operation, pause), and
//! quits. Every wait polls the pane until what it looks for is there (or
//! 30 s pass), never a fixed sleep.

use locksuit_tests::*;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

/// tmux, on a server of the session's own (`-L`, the session's name: the
/// name after `-s` or `-t`). On one server shared by the tests that run
/// at once, a session's end stopped the server as another test's
/// `new-session` reached it: "server exited unexpectedly".
fn tmux(args: &[&str]) -> std::process::Output {
    Command::new("tmux")
        .args(["-L", socket_of(args)])
        .args(args)
        .output()
        .unwrap()
}

fn socket_of<'a>(args: &[&'a str]) -> &'a str {
    args.windows(2)
        .find(|w| w[0] == "-s" || w[0] == "-t")
        .map_or("locksuit-tests", |w| w[1])
}

fn pane(session: &str) -> String {
    stdout_str(&tmux(&["capture-pane", "-p", "-t", session]))
}

/// Polls the pane until `want` holds on a view at rest; the pane as last
/// seen. At rest: a second capture right after reads the same, so a
/// capture taken in the middle of a redraw (the first pane drawn, the
/// next not yet) is never judged, on a busy machine least of all.
fn until(session: &str, what: &str, want: impl Fn(&str) -> bool) -> String {
    let started = Instant::now();
    loop {
        let seen = pane(session);
        if want(&seen) && pane(session) == seen {
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
    let _ended = Session(session.clone());
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

/// `bin` started under the shim with `args` and `env`, its traces in
/// `dir`, once it printed "ready".
fn spawn_ready_with(
    bin: &std::path::Path,
    args: &[&str],
    dir: &std::path::Path,
    env: &[(&str, &str)],
) -> std::process::Child {
    use std::io::{BufRead, BufReader};
    let mut child = Command::new(bin)
        .args(args)
        .env("LD_PRELOAD", shim_path())
        .env("LOCKSUIT_DIR", dir)
        .envs(env.iter().copied())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut ready)
        .unwrap();
    assert_eq!(ready, "ready\n", "{} did not start", bin.display());
    child
}

/// A tmux session, ended when dropped: a failed check leaves no `top`
/// running in a detached session.
struct Session(String);

impl Drop for Session {
    fn drop(&mut self) {
        let _ = tmux(&["kill-session", "-t", &self.0]);
        // The session's own server (see `tmux`) leaves its socket behind.
        let dir = std::env::var_os("TMUX_TMPDIR").map_or_else(|| "/tmp".into(), PathBuf::from);
        // SAFETY: getuid only reads the caller's user id.
        let uid = unsafe { libc::getuid() };
        let _ = std::fs::remove_file(dir.join(format!("tmux-{uid}")).join(&self.0));
    }
}

/// Runs `locksuit ARGS` in a new tmux session of `columns` × `rows`, from
/// directory `cwd`, with neither the shim nor LOCKSUIT_DIR in its
/// environment (the tmux server may have either from whoever started it).
fn start_top(
    session: &str,
    (columns, rows): (u16, u16),
    cwd: &std::path::Path,
    args: &str,
) -> Session {
    let command = format!(
        "env -u LD_PRELOAD -u LOCKSUIT_DIR {} {args}",
        locksuit_path().display()
    );
    let made = tmux(&[
        "new-session",
        "-d",
        "-s",
        session,
        "-c",
        cwd.to_str().unwrap(),
        "-x",
        &columns.to_string(),
        "-y",
        &rows.to_string(),
        &command,
    ]);
    assert!(made.status.success(), "{}", describe(&made));
    Session(session.to_string())
}

/// Presses `q` and waits for the session to end.
fn quit(session: &str) {
    tmux(&["send-keys", "-t", session, "q"]);
    let started = Instant::now();
    while tmux(&["has-session", "-t", session]).status.success() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "top did not quit"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn tmux_missing() -> bool {
    let missing = Command::new("tmux").arg("-V").output().is_err();
    if missing {
        eprintln!("tmux is not installed: the terminal view is not checked (.ci/run installs it)");
    }
    missing
}

#[test]
fn top_pid_finds_the_trace_the_program_has_open_and_its_keys_fit_80_columns() {
    if tmux_missing() {
        return;
    }
    let bin = build_c("top_target");
    let dir = fresh_dir("top-pid");
    let target = spawn_ready_with(&bin, &[], &dir, &[]);
    // Run from a directory with no traces, without LOCKSUIT_DIR: only the
    // program's own mappings say where its trace is.
    let elsewhere = fresh_dir("top-pid-elsewhere");
    let session = format!("locksuit-top-pid-{}", std::process::id());
    let _ended_on_drop = start_top(
        &session,
        (80, 24),
        &elsewhere,
        &format!("top {}", target.id()),
    );
    let seen = until(&session, "lock table", |p| {
        p.contains("&hot_lock") && p.contains("Locks")
    });
    assert!(seen.contains(&format!("(pid {})", target.id())), "{seen}");
    // The whole key line, inside the frame.
    let keys = seen
        .lines()
        .find(|l| l.contains("s: sort by"))
        .unwrap_or_else(|| panic!("no key line in:\n{seen}"));
    for key in ["s: sort by", "p: pause", "e: record", "q: quit"] {
        assert!(keys.contains(key), "{key} cut from the key line:\n{seen}");
    }
    assert!(keys.trim_end().ends_with('│'), "{keys}");
    quit(&session);
    terminate(target);
}

/// The number before `pattern` in `line` ("1234 events"), if it is there.
fn number_before(line: &str, pattern: &str) -> Option<u64> {
    let head = &line[..line.find(pattern)?];
    let digits: String = head
        .chars()
        .rev()
        .take_while(char::is_ascii_digit)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    digits.parse().ok()
}

#[test]
fn top_on_a_trace_over_32_mib_draws_nothing_over_its_view() {
    if tmux_missing() {
        return;
    }
    let bin = build_c("top_target");
    let dir = fresh_dir("top-large");
    // 300,000 rounds alone, two events each of 64 bytes: over 36 MiB
    // before "ready", and more while the workers run.
    let target = spawn_ready_with(&bin, &["300000"], &dir, &[("LOCKSUIT_EVENTS", "all")]);
    let trace = traces_in(&dir).into_iter().next().expect("a trace");
    let size = std::fs::metadata(&trace).unwrap().len();
    assert!(
        size > 32 << 20,
        "{size} bytes: not the size this test is about"
    );
    let session = format!("locksuit-top-large-{}", std::process::id());
    let _ended_on_drop = start_top(&session, (120, 40), &dir, &format!("top {}", dir.display()));
    // Every refresh reads the whole trace again: three refreshes seen (the
    // event count moved), each look at the pane finds only the view: a
    // frame on every row, no progress line, no row wiped by one.
    let started = Instant::now();
    let mut counts: Vec<u64> = Vec::new();
    while counts.len() < 4 {
        let seen = pane(&session);
        let count = seen.lines().find_map(|l| number_before(l, " events ("));
        // Before the view first shows, the first read's progress may (it
        // is not over anything); once the view is up, never.
        if count.is_some() {
            assert!(!seen.contains("reading records"), "progress:\n{seen}");
            assert!(!seen.contains("events ["), "a progress bar:\n{seen}");
        }
        // A look in the middle of a redraw (on a busy machine one lasts
        // long enough to be caught) ends before the view's last row: its
        // empty rows are the redraw's, not a wipe.
        let drawn = seen
            .lines()
            .last()
            .is_some_and(|l| l.trim_end().ends_with('┘'));
        if let (Some(n), true) = (count, drawn) {
            for (i, line) in seen.lines().enumerate() {
                assert!(
                    !line.trim().is_empty(),
                    "row {i} is not the view's:\n{seen}"
                );
            }
            if counts.last() != Some(&n) {
                counts.push(n);
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "fewer than 3 refreshes in 60 s ({counts:?}):\n{seen}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    quit(&session);
    terminate(target);
}
