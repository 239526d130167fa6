//! Why threads stop: blocking classes per thread against what the program
//! measured itself (tests/c/stops.c), blocking call stacks, a user's
//! signature file, the `blocking-under-lock` finding, and the blocking-call
//! hooks' return values and errno (tests/c/call_semantics.c).

use locksuit_tests::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// One recorded run of stops.c: its trace and what it measured.
struct Run {
    dir: PathBuf,
    stdout: String,
}

fn run_stops(tag: &str) -> Run {
    let bin = build_c("stops");
    let dir = fresh_dir(tag);
    let out = run_under_shim(&bin, &[] as &[&str], &dir);
    assert_success(&out, "stops");
    Run {
        dir,
        stdout: stdout_str(&out),
    }
}

impl Run {
    fn measured(&self, key: &str) -> u64 {
        stdout_value(&self.stdout, key).parse().unwrap()
    }

    fn report(&self, extra: &[&str]) -> Value {
        let mut args = vec!["report", self.dir.to_str().unwrap(), "--format", "json"];
        args.extend_from_slice(extra);
        let out = run_locksuit(&args);
        assert_success(&out, "locksuit report");
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

fn within_tenth(reported: u64, measured: u64, what: &str) {
    let ms = |ns: u64| ns as f64 / 1e6;
    assert!(
        reported.abs_diff(measured) <= measured / 10,
        "{what}: {:.2} ms reported, the program measured {:.2} ms (±10 % allowed)",
        ms(reported),
        ms(measured)
    );
}

#[test]
fn each_class_total_matches_what_the_program_measured() {
    let run = run_stops("stops-classes");
    let report = run.report(&[]);
    let p = only_process(&report);
    let cases = [
        ("holder", "sleep", "holder_sleep_ns"),
        ("locker", "sync", "locker_wait_ns"),
        ("condwaiter", "sync", "cond_wait_ns"),
        ("reader", "io-file", "read_ns"),
        ("poller", "poll", "poll_ns"),
        ("quiet", "sleep", "quiet_sleep_ns"),
        ("futexer", "sync", "futex_wait_ns"),
    ];
    for (name, class, key) in cases {
        let t = thread_named(p, name);
        within_tenth(
            class_ns(t, class),
            run.measured(key),
            &format!("{name} {class}"),
        );
        // Nothing else kept it waiting.
        assert_eq!(arr(t, "blocking_classes").len(), 1, "{name}: {t}");
    }
    let main = main_thread(p);
    within_tenth(
        class_ns(main, "sleep"),
        run.measured("main_sleep_ns"),
        "main sleep",
    );
    within_tenth(
        class_ns(main, "sync"),
        run.measured("main_join_ns"),
        "main join",
    );
    // Running time is what is left of the thread's life: far less than it
    // blocked, for threads that do nothing but block.
    let holder = thread_named(p, "holder");
    assert!(
        u64_of(holder, "running_ns") < class_ns(holder, "sleep") / 10,
        "{holder}"
    );
}

#[test]
fn blocking_stacks_name_the_call_its_line_and_its_callers() {
    let run = run_stops("stops-stacks");
    let report = run.report(&[]);
    let p = only_process(&report);
    let stacks = arr(p, "blocking_stacks");
    let row = |api: &str, line_marker: &str| -> &Value {
        let line = format!("stops.c:{}", line_of("stops.c", line_marker));
        stacks
            .iter()
            .find(|s| s["api"].as_str() == Some(api) && str_of(s, "line").contains(&line))
            .unwrap_or_else(|| panic!("no {api} stack at {line}: {stacks:#?}"))
    };
    let read = row("read", "marker: reader reads");
    assert_eq!(str_of(read, "class"), "io-file");
    assert_eq!(u64_of(read, "count"), 1);
    within_tenth(
        u64_of(read, "total_ns"),
        run.measured("read_ns"),
        "read stack",
    );
    let functions: Vec<&str> = arr(read, "stack")
        .iter()
        .filter_map(|f| f["function"].as_str())
        .collect();
    let wrapper = functions.iter().position(|f| *f == "wait_for_data");
    let caller = functions.iter().position(|f| *f == "reader");
    assert!(
        matches!((wrapper, caller), (Some(w), Some(c)) if w < c),
        "innermost first: {functions:?}"
    );
    assert_eq!(str_of(row("poll", "marker: poller polls"), "class"), "poll");
    assert_eq!(str_of(row("futex", "marker: futex wait"), "class"), "sync");
    assert_eq!(
        str_of(row("pthread_mutex_lock", "marker: locker waits"), "class"),
        "sync"
    );
    assert_eq!(
        str_of(row("pthread_cond_wait", "marker: cond wait"), "class"),
        "sync"
    );
    let join = row("pthread_join", "marker: main joins");
    within_tenth(
        u64_of(join, "total_ns"),
        run.measured("main_join_ns"),
        "joins",
    );
    // The waiting call tree has the blocking periods, not only lock
    // waits: the read under its wrapper, as long as the program measured.
    let wrapper = tree_node(arr(p, "wait_tree"), "wait_for_data")
        .unwrap_or_else(|| panic!("no wait_for_data in {}", p["wait_tree"]));
    let leaf = arr(wrapper, "children")
        .iter()
        .find(|n| n["frame"] == "read")
        .unwrap_or_else(|| panic!("no read under wait_for_data: {wrapper}"));
    assert_eq!(u64_of(leaf, "count"), 1, "{leaf}");
    within_tenth(
        u64_of(leaf, "total_ns"),
        run.measured("read_ns"),
        "read in the tree",
    );
    // Sorted by total time, most first.
    let totals: Vec<u64> = stacks.iter().map(|s| u64_of(s, "total_ns")).collect();
    assert!(totals.windows(2).all(|w| w[0] >= w[1]), "{totals:?}");

    // The text report shows both tables.
    let text = run_locksuit(&["report", run.dir.to_str().unwrap(), "--width", "100"]);
    let text = stdout_str(&text);
    assert!(text.contains("Why threads stopped"), "{text}");
    assert!(text.contains("Blocking call stacks"), "{text}");
    assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
}

/// The first node named `frame` in a waiting call tree, depth first.
fn tree_node<'a>(nodes: &'a [Value], frame: &str) -> Option<&'a Value> {
    nodes.iter().find_map(|n| {
        if n["frame"] == frame {
            Some(n)
        } else {
            tree_node(arr(n, "children"), frame)
        }
    })
}

#[test]
fn a_signature_file_reclassifies_a_wrappers_blocks() {
    let run = run_stops("stops-signatures");
    let file = run.dir.join("classes.txt");
    std::fs::write(&file, "# our own\ndatabase = *wait_for_data*\n").unwrap();
    for report in [
        run.report(&["--classes", file.to_str().unwrap()]),
        report_with_env(&run.dir, &file),
    ] {
        let p = only_process(&report);
        let reader = thread_named(p, "reader");
        within_tenth(
            class_ns(reader, "database"),
            run.measured("read_ns"),
            "database",
        );
        assert_eq!(class_ns(reader, "io-file"), 0, "{reader}");
        // Other threads' reads and sleeps keep their built-in classes.
        assert!(class_ns(thread_named(p, "holder"), "sleep") > 0);
    }
    // A malformed file is one clear line naming it and the line, exit 2.
    std::fs::write(&file, "database = *wait_for_data*\nnot a rule\n").unwrap();
    let out = run_locksuit(&[
        "report",
        run.dir.to_str().unwrap(),
        "--classes",
        file.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("{}:2:", file.display())), "{err}");
}

fn report_with_env(dir: &Path, classes: &Path) -> Value {
    let mut cmd = std::process::Command::new(locksuit_path());
    cmd.args(["report", dir.to_str().unwrap(), "--format", "json"])
        .env("LOCKSUIT_CLASSES", classes)
        .env_remove("LD_PRELOAD");
    let out = run_captured(cmd);
    assert_success(&out, "locksuit report with LOCKSUIT_CLASSES");
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn sleeping_while_holding_a_lock_another_thread_wants_is_a_finding() {
    let run = run_stops("stops-under-lock");
    let report = run.report(&[]);
    let p = only_process(&report);
    let found: Vec<&Value> = findings(p)
        .iter()
        .filter(|f| str_of(f, "kind") == "blocking-under-lock")
        .collect();
    // Only `shared`: `alone` was slept on too, but nobody waited for it.
    assert_eq!(found.len(), 1, "{found:#?}");
    let f = found[0];
    let message = str_of(f, "message");
    for marker in [
        "marker: holder takes shared",
        "marker: holder sleeps",
        "marker: locker waits",
    ] {
        let line = format!("stops.c:{}", line_of("stops.c", marker));
        assert!(message.contains(&line), "{line} not in: {message}");
    }
    assert!(
        message.contains("nanosleep") && message.contains("&shared"),
        "{message}"
    );
    let lock = lock_by_id(p, str_of(f, "lock"));
    assert!(str_of(lock, "id").contains("shared"), "{lock}");
    // What it cost: about the locker's wait.
    within_tenth(
        u64_of(f, "wait_ns"),
        run.measured("locker_wait_ns"),
        "waited under the sleep",
    );
}

#[test]
fn blocking_call_hooks_return_what_the_c_library_returns() {
    let bin = build_c("call_semantics");
    let dir = fresh_dir("call-semantics");
    let scratch = dir.canonicalize().unwrap();
    let scratch = scratch.to_str().unwrap();
    let plain = run_plain(&bin, &[scratch]);
    assert_success(&plain, "call_semantics without the shim");
    let traced = run_under_shim(&bin, &[scratch], &dir);
    assert_success(&traced, "call_semantics under the shim");
    assert_eq!(
        stdout_str(&traced),
        stdout_str(&plain),
        "same results, errno included"
    );
    assert!(traced.stderr.is_empty(), "{}", describe(&traced));
    // And the calls that blocked were recorded: the interrupted read, the
    // restarted one, the sleeps, the polls.
    let report = report_json(&[&dir], None);
    let p = processes(&report)
        .iter()
        .find(|p| p["fork_child"].as_bool() == Some(false))
        .expect("the parent's trace");
    let apis: Vec<&str> = arr(p, "blocking_stacks")
        .iter()
        .map(|s| str_of(s, "api"))
        .collect();
    for api in [
        "read",
        "nanosleep",
        "sleep",
        "poll",
        "select",
        "sigtimedwait",
    ] {
        assert!(apis.contains(&api), "{api} not recorded: {apis:?}");
    }
}

#[test]
fn rust_std_locks_are_seen_through_their_futex_waits() {
    let source = workspace_root().join("tests/rust/std_locks.rs");
    let bin = workspace_root().join("target/c-tests/std_locks");
    std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let built = std::process::Command::new(rustc)
        .args(["-O", "-g", "--edition", "2021", "-o"])
        .arg(&bin)
        .arg(&source)
        .status()
        .expect("rustc");
    assert!(built.success(), "rustc {}", source.display());
    let dir = fresh_dir("rust-std-locks");
    let out = run_under_shim(&bin, &[] as &[&str], &dir);
    assert_success(&out, "std_locks");
    let stdout = stdout_str(&out);
    let measured = |key: &str| stdout_value(&stdout, key).parse::<u64>().unwrap();
    assert_eq!(stdout_value(&stdout, "count"), "2");
    let plain = run_plain(&bin, &[] as &[&str]);
    assert_eq!(plain.status.code(), out.status.code());
    assert_eq!(stdout_value(&stdout_str(&plain), "count"), "2");
    let report = report_json(&[&dir], None);
    let p = only_process(&report);
    within_tenth(
        class_ns(thread_named(p, "waiter"), "sync"),
        measured("waiter_ns"),
        "Mutex wait",
    );
    within_tenth(
        class_ns(thread_named(p, "notified"), "sync"),
        measured("notified_ns"),
        "Condvar wait",
    );
    within_tenth(
        class_ns(thread_named(p, "holder"), "sleep"),
        measured("holder_sleep_ns"),
        "holder's sleep",
    );
    // Each wait at its own line of the program, not at std's futex helper.
    for marker in ["marker: rust waiter", "marker: rust condvar"] {
        let line = format!("std_locks.rs:{}", line_in(&source, marker));
        assert!(
            arr(p, "blocking_stacks")
                .iter()
                .any(|s| str_of(s, "api") == "futex" && str_of(s, "line").contains(&line)),
            "no futex wait at {line}: {:#?}",
            p["blocking_stacks"]
        );
    }
}

#[test]
fn stops_behaves_the_same_with_and_without_the_shim() {
    // Its figures are times, so the lines are compared by what they name;
    // the exit status and stderr exactly.
    let bin = build_c("stops");
    let plain = run_plain(&bin, &[] as &[&str]);
    let run = run_stops("stops-plain-compare");
    let traced = run_under_shim(&bin, &[] as &[&str], &run.dir);
    assert_same_output_keys(&plain, &traced);
}

#[test]
fn fortified_reads_and_polls_are_seen_as_the_calls_they_check() {
    // -D_FORTIFY_SOURCE=2 at -O2, as Debian builds: poll and read reach
    // the C library as __poll_chk and __read_chk.
    let src = c_dir().join("fortified.c");
    let bin = build_c_with(&src, "fortified", &["-O2", "-D_FORTIFY_SOURCE=2"], &[]);
    let dir = fresh_dir("stops-fortified");
    let out = run_under_shim(&bin, &[] as &[&str], &dir);
    assert_success(&out, "fortified");
    // The same program without the shim: same status, lines and stderr.
    assert_same_output_keys(&run_plain(&bin, &[] as &[&str]), &out);
    let stdout = stdout_str(&out);
    assert!(stdout.contains("got xy"), "{stdout}");
    let report = report_json(&[&dir], None);
    let p = only_process(&report);
    let total = |api: &str| -> u64 {
        arr(p, "blocking_stacks")
            .iter()
            .filter(|s| {
                str_of(s, "api") == api && str_of(s, "line").starts_with("main@fortified.c:")
            })
            .map(|s| u64_of(s, "total_ns"))
            .sum()
    };
    for (api, key) in [("poll", "poll_ns"), ("read", "read_ns")] {
        let measured: u64 = stdout_value(&stdout, key).parse().unwrap();
        within_tenth(total(api), measured, api);
    }
}

#[test]
fn calls_that_block_after_long_calm_runs_are_timed_right() {
    // After 64 calls in a row that did not block, a thread's calls are
    // timed without a clock; how long one blocked then comes from its CPU
    // time (shim/src/recorder/time/call_timer/). With glibc's rseq turned off
    // they are all timed with two clock reads, and judged by time alone.
    let bin = build_c("calm_then_block");
    let here = block_detection_here();
    if rseq_timing_expected() {
        assert_eq!(here, "switched-out", "this kernel and glibc allow it");
    }
    let rseq_off = [("GLIBC_TUNABLES", "glibc.pthread.rseq=0")];
    for (tag, env, detection) in [
        ("calm-then-block", &[][..], here.as_str()),
        ("calm-no-rseq", &rseq_off[..], "duration"),
    ] {
        let run = record_plain_and_shim_env(&bin, tag, env);
        assert_same_output_keys(&run.plain, &run.shim);
        let stdout = stdout_str(&run.shim);
        assert_eq!(stdout_value(&stdout, "handled"), "6", "{stdout}");
        let p = only_process(&run.report);
        assert_eq!(str_of(p, "block_detection"), detection, "{tag}");
        let measured = |name: &str| -> u64 {
            stdout_value(&stdout, &format!("{name}_ns"))
                .parse()
                .unwrap()
        };
        // Calm pipe calls are io-file too, and one preempted for 50 µs on
        // a loaded machine is a block of its own: the threads that read
        // are checked at their lines only.
        for (name, class) in [("sleeper", "sleep"), ("poller", "poll")] {
            let t = thread_named(p, name);
            within_tenth(
                class_ns(t, class),
                measured(name),
                &format!("{tag}: {name} {class}"),
            );
        }
        // One period per blocking call, at its line, the whole call: the
        // signalled read, with a hooked call made by a signal handler in
        // the middle of it, and the interrupted read, which a handler's
        // hooked call ended (the thread times its calls with the clock).
        let stacks = arr(p, "blocking_stacks");
        for (api, marker, count, ns) in [
            ("nanosleep", "sleeper sleeps", 3, measured("sleeper")),
            ("poll", "poller polls", 3, measured("poller")),
            (
                "read",
                "blocking read",
                6,
                measured("reader") + measured("signalled"),
            ),
            ("read", "interrupted read", 3, measured("interrupted")),
        ] {
            let line = format!(
                "calm_then_block.c:{}",
                line_of("calm_then_block.c", &format!("marker: {marker}"))
            );
            let row = stacks
                .iter()
                .find(|s| str_of(s, "api") == api && str_of(s, "line").contains(&line))
                .unwrap_or_else(|| panic!("{tag}: no {api} at {line}: {stacks:#?}"));
            assert_eq!(u64_of(row, "count"), count, "{tag}: {row}");
            within_tenth(u64_of(row, "total_ns"), ns, &format!("{tag}: {api} stack"));
        }
    }
}
