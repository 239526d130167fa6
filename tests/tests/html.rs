//! The HTML report in a real browser (Debian's chromium, headless, which
//! `.ci/run` installs): the page's scripts run, and the DOM they leave is
//! checked — a lane per thread, periods with the right classes, tooltips
//! with the call stack, the handoff into a lock wait, the collated table.
//! A screenshot is kept under target/screenshots for a person to look at.
//! Also a page for a trace of about a million events: its size and the
//! time the page itself measured to draw. And the Chrome trace export,
//! checked against the trace-event format.

use locksuit_tests::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Debian's chromium, or None (the test then says so and passes: `.ci/run`
/// installs it, so CI always runs these).
fn chromium() -> Option<PathBuf> {
    ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

/// Runs headless chromium on `page` with `extra` arguments; the flags keep
/// it off the network and out of the user's profile.
fn headless(browser: &Path, page: &Path, extra: &[&str]) -> std::process::Output {
    let profile = page.with_extension("profile");
    let mut cmd = Command::new(browser);
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        // Lets the page's asynchronous drawing finish before the dump.
        "--virtual-time-budget=60000",
    ])
    .arg(format!("--user-data-dir={}", profile.display()))
    .args(extra)
    .arg(format!("file://{}", page.canonicalize().unwrap().display()));
    run_captured(cmd)
}

fn dump_dom(browser: &Path, page: &Path) -> String {
    let out = headless(browser, page, &["--dump-dom"]);
    assert!(out.status.success(), "{}", describe(&out));
    stdout_str(&out)
}

fn screenshot(browser: &Path, page: &Path, name: &str) -> PathBuf {
    let dir = workspace_root().join("target").join("screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    let png = dir.join(name);
    let _ = std::fs::remove_file(&png);
    let shot = format!("--screenshot={}", png.display());
    let out = headless(browser, page, &[&shot, "--window-size=1400,1200"]);
    assert!(out.status.success(), "{}", describe(&out));
    let bytes = std::fs::read(&png).expect("a screenshot");
    assert!(
        bytes.starts_with(b"\x89PNG"),
        "not a PNG: {}",
        png.display()
    );
    png
}

/// The opening tags of elements with `class="…"` starting with `class`.
fn tags<'a>(dom: &'a str, element: &str, class: &str) -> Vec<&'a str> {
    let open = format!("<{element} class=\"{class}");
    dom.match_indices(&open)
        .map(|(at, _)| {
            let end = dom[at..].find('>').map_or(dom.len(), |e| at + e + 1);
            &dom[at..end]
        })
        .collect()
}

fn attr(tag: &str, name: &str) -> Option<String> {
    let key = format!(" {name}=\"");
    let start = tag.find(&key)? + key.len();
    let end = tag[start..].find('"')? + start;
    Some(
        tag[start..end]
            .replace("&quot;", "\"")
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&#39;", "'")
            .replace("&amp;", "&"),
    )
}

/// `locksuit report DIR --format html -o DIR/NAME`.
/// The page's own measure of how long it took to draw, in ms.
fn render_ms(dom: &str) -> u64 {
    dom.split("data-render-ms=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .and_then(|n| n.parse().ok())
        .expect("the page's own measure")
}

fn html_report(dir: &Path, name: &str) -> PathBuf {
    let page = dir.join(name);
    let made = run_locksuit(&[
        "report",
        dir.to_str().unwrap(),
        "--format",
        "html",
        "-o",
        page.to_str().unwrap(),
    ]);
    assert_success(&made, "locksuit report --format html");
    page
}

fn report_json_of(dir: &Path) -> Value {
    report_json(&[dir], None)
}

#[test]
fn the_page_draws_every_thread_with_classes_tooltips_and_handoffs() {
    let Some(browser) = chromium() else {
        eprintln!(
            "chromium is not installed (apt-get install chromium); the browser test did not run"
        );
        return;
    };
    let bin = build_c("stops");
    let dir = fresh_dir("html-stops");
    let out = run_under_shim(&bin, &[] as &[&str], &dir);
    assert_success(&out, "stops");
    let page = html_report(&dir, "report.html");
    let html = std::fs::read_to_string(&page).unwrap();
    // Self-contained: nothing is fetched.
    for outside in ["src=\"http", "href=\"http", "<link ", "@import"] {
        assert!(!html.contains(outside), "the page loads {outside}…");
    }
    let report = report_json_of(&dir);
    let p = only_process(&report);

    let png = screenshot(&browser, &page, "stops-report.png");
    eprintln!("screenshot: {}", png.display());
    let dom = dump_dom(&browser, &page);
    assert!(
        dom.contains("data-rendered=\"yes\""),
        "the scripts did not finish: {dom}"
    );
    assert!(!dom.contains("data-failed="), "{dom}");

    // A lane per thread.
    let lanes = tags(&dom, "g", "lane");
    let mut lane_tids: Vec<u64> = lanes
        .iter()
        .filter_map(|t| attr(t, "data-tid")?.parse().ok())
        .collect();
    lane_tids.sort_unstable();
    let mut tids: Vec<u64> = arr(p, "threads").iter().map(|t| u64_of(t, "tid")).collect();
    tids.sort_unstable();
    assert_eq!(lane_tids, tids, "one lane per thread");

    // Periods with the right classes: at this size every one is exact.
    let periods = tags(&dom, "rect", "period\"");
    let class_of = |api: &str, line: &str| -> String {
        let rect = periods
            .iter()
            .find(|t| {
                attr(t, "data-tip")
                    .is_some_and(|tip| tip.contains(&format!(": {api} for ")) && tip.contains(line))
            })
            .unwrap_or_else(|| panic!("no period of {api} at {line} in the DOM"));
        attr(rect, "data-class").unwrap()
    };
    let line = |marker: &str| format!("stops.c:{}", line_of("stops.c", marker));
    assert_eq!(
        class_of("pthread_mutex_lock", &line("marker: locker waits")),
        "sync"
    );
    assert_eq!(
        class_of("nanosleep", &line("marker: holder sleeps")),
        "sleep"
    );
    assert_eq!(class_of("read", &line("marker: reader reads")), "io-file");
    assert_eq!(class_of("poll", &line("marker: poller polls")), "poll");
    assert_eq!(
        class_of("pthread_cond_wait", &line("marker: cond wait")),
        "sync"
    );

    // The tooltip of the read names its whole stack: the wrapper and its caller.
    let read = periods
        .iter()
        .filter_map(|t| attr(t, "data-tip"))
        .find(|tip| tip.contains(": read for "))
        .unwrap();
    assert!(read.contains("wait_for_data (stops.c:"), "{read}");
    assert!(read.contains("reader (stops.c:"), "{read}");

    // The locker's wait: its handoff comes from the holder, and the
    // tooltip names the holder and the line that took the lock.
    let holder = arr(p, "threads")
        .iter()
        .find(|t| t["name"] == "holder")
        .map(|t| u64_of(t, "tid"))
        .unwrap();
    let wait = periods
        .iter()
        .find(|t| attr(t, "data-tip").is_some_and(|tip| tip.contains(": pthread_mutex_lock for ")))
        .unwrap();
    assert_eq!(attr(wait, "data-released-by"), Some(holder.to_string()));
    let tip = attr(wait, "data-tip").unwrap();
    assert!(tip.contains("held by thread"), "{tip}");
    assert!(tip.contains(&line("marker: holder takes shared")), "{tip}");
    // Every lock wait's tooltip names as its holder the blocker "who
    // blocks whom" names for that wait (the holder when it began waiting,
    // not the last thread to release it).
    let blocked_by: Vec<(u64, u64)> = arr(p, "blocking")
        .iter()
        .map(|r| (u64_of(r, "blocked_tid"), u64_of(r, "blocker_tid")))
        .collect();
    for t in periods.iter().filter(|t| {
        attr(t, "data-tip").is_some_and(|tip| tip.contains(": pthread_mutex_lock for "))
    }) {
        let tip = attr(t, "data-tip").unwrap();
        let Some(held) = tip.split("held by thread ").nth(1) else {
            continue;
        };
        let held: u64 = held
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let waiter: u64 = tip
            .split("thread ")
            .nth(1)
            .unwrap()
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!(
            blocked_by.contains(&(waiter, held)),
            "the tooltip's holder is who blocks whom's blocker: {tip}\n{blocked_by:?}"
        );
    }

    // The collated table: a row per blocking stack, and the finding.
    let rows = tags(&dom, "tr", "stack\"");
    assert_eq!(
        rows.len(),
        arr(p, "blocking_stacks").len(),
        "one row per stack"
    );
    assert!(dom.contains("data-kind=\"blocking-under-lock\""), "{dom}");
    // Per-thread bars.
    assert_eq!(tags(&dom, "div", "bar-row").len(), tids.len());
}

/// A shell that ran a program with locks and one without (`env`): as in
/// the text report, the page starts with the program with lock activity,
/// each process's findings come before its timeline and tables, and the
/// shell and `env` share one line at the end instead of empty sections.
#[test]
fn the_page_opens_on_lock_activity_with_findings_first_and_idle_processes_folded() {
    let Some(browser) = chromium() else {
        eprintln!(
            "chromium is not installed (apt-get install chromium); the browser test did not run"
        );
        return;
    };
    let bin = build_c("stops");
    let dir = fresh_dir("html-folded");
    let traces = dir.join("traces");
    let script = format!("{} > /dev/null && env > /dev/null", bin.display());
    let out = run_locksuit(&[
        "run",
        "--dir",
        traces.to_str().unwrap(),
        "--format",
        "json",
        "--output",
        dir.join("run.json").to_str().unwrap(),
        "--",
        "/bin/sh",
        "-c",
        &script,
    ]);
    assert_success(&out, "locksuit run -- sh -c 'stops && env'");
    assert_eq!(traces_in(&traces).len(), 3, "sh, stops and env");
    let report = report_json_of(&traces);
    let stops_pid = arr(&report, "processes")
        .iter()
        .find(|p| str_of(p, "exe").ends_with("/stops"))
        .map(|p| u64_of(p, "pid").to_string())
        .expect("stops in the report");
    let page = html_report(&traces, "folded.html");
    let png = screenshot(&browser, &page, "folded-report.png");
    eprintln!("screenshot: {}", png.display());
    let dom = dump_dom(&browser, &page);
    assert!(dom.contains("data-rendered=\"yes\""), "{dom}");

    // One section, the program's, and it is the page's first.
    let sections = tags(&dom, "section", "process");
    assert_eq!(sections.len(), 1, "{sections:?}");
    assert_eq!(attr(sections[0], "data-pid"), Some(stops_pid));
    assert!(
        !tags(&dom, "g", "lane").is_empty(),
        "the first timeline has lanes"
    );
    // The shell and env: one line, after the section.
    let folded = tags(&dom, "p", "no-activity");
    assert_eq!(folded.len(), 1, "{dom}");
    let line_at = dom.find("<p class=\"no-activity\"").unwrap();
    let line = &dom[line_at..line_at + dom[line_at..].find("</p>").unwrap()];
    assert!(
        line.contains("2 more processes recorded no lock activity:") && line.contains("env (pid"),
        "{line}"
    );
    assert!(line_at > dom.find("</section>").unwrap(), "{dom}");
    // Findings first, then the timeline, the blocking stacks and the text
    // report's tables.
    let at = |what: &str| {
        dom.find(what)
            .unwrap_or_else(|| panic!("no {what} in the page"))
    };
    let order = [
        at("<h3>Findings"),
        at("<h3>Timeline"),
        at("<h3>Blocking call stacks"),
        at("class=\"text-report\""),
    ];
    assert!(
        order.windows(2).all(|w| w[0] < w[1]),
        "findings, timeline, stacks, tables: {order:?}"
    );
    assert!(dom.contains("data-kind=\"blocking-under-lock\""), "{dom}");
}

#[test]
fn a_page_for_a_million_events_is_small_and_draws_quickly() {
    let Some(browser) = chromium() else {
        eprintln!(
            "chromium is not installed (apt-get install chromium); the browser test did not run"
        );
        return;
    };
    // Two threads hand a turn back and forth through a condition variable:
    // every round trip is two waits and two notifies.
    let bin = workspace_root()
        .join("target")
        .join("c-tests")
        .join("pingpong");
    let built = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-O2", "-pthread", "-o"])
        .arg(&bin)
        .arg(workspace_root().join("bench").join("pingpong.c"))
        .status()
        .unwrap();
    assert!(built.success());
    let dir = fresh_dir("html-million");
    // 400,000 round trips: about 1.6 M events, a margin for a loaded
    // machine, where a notify may find its waiter not yet waiting.
    let out = run_under_shim(&bin, &["400000"], &dir);
    assert_success(&out, "pingpong");
    let report = report_json_of(&dir);
    let p = only_process(&report);
    let events = u64_of(p, "events");
    assert!(
        events >= 900_000,
        "{events} events: not the size this test is about"
    );
    let page = html_report(&dir, "big.html");
    let size = std::fs::metadata(&page).unwrap().len();
    assert!(size < 10 << 20, "{size} bytes for {events} events");
    let _ = screenshot(&browser, &page, "million-events.png");
    let dom = dump_dom(&browser, &page);
    assert!(
        dom.contains("data-rendered=\"yes\""),
        "the scripts did not finish"
    );
    assert!(!dom.contains("data-failed="));
    let ms = render_ms(&dom);
    // The same program's page for 4,000 round trips, drawn by the same
    // browser just after: what a hundredth of the events takes on this
    // machine as loaded now. Drawn aggregated, a hundred times the events
    // take far less than a hundred times as long; 5 s is the bound on a
    // quiet machine, scaled by the small page's time on a busy one.
    let small_dir = fresh_dir("html-million-small");
    let out = run_under_shim(&bin, &["4000"], &small_dir);
    assert_success(&out, "pingpong 4000");
    let small_page = html_report(&small_dir, "small.html");
    let small_ms = render_ms(&dump_dom(&browser, &small_page));
    let bound = 5000.max(30 * small_ms);
    eprintln!(
        "{events} events: page {size} bytes, drawn {ms} ms after navigation; a hundredth of them {small_ms} ms"
    );
    assert!(
        ms < bound,
        "the page took {ms} ms to draw {events} events, a hundredth of them {small_ms} ms"
    );
    let _ = std::fs::remove_dir_all(&small_dir);
    // Drawn aggregated: far fewer elements than periods.
    let drawn = tags(&dom, "rect", "period").len();
    assert!(drawn > 0 && drawn < 20_000, "{drawn} rects");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_chrome_export_is_valid_trace_event_json() {
    let bin = build_c("stops");
    let dir = fresh_dir("chrome-export");
    let out = run_under_shim(&bin, &[] as &[&str], &dir);
    assert_success(&out, "stops");
    let file = dir.join("trace.json");
    let made = run_locksuit(&[
        "export",
        "--format",
        "chrome",
        "-o",
        file.to_str().unwrap(),
        dir.to_str().unwrap(),
    ]);
    assert_success(&made, "locksuit export");
    let trace: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let events = arr(&trace, "traceEvents");
    let report = report_json_of(&dir);
    let p = only_process(&report);
    let pid = u64_of(p, "pid");
    let duration_us = u64_of(p, "duration_ns") as f64 / 1000.0;
    let named: Vec<u64> = events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .map(|e| u64_of(e, "tid"))
        .collect();
    let mut slices: std::collections::HashMap<u64, Vec<(f64, f64)>> = Default::default();
    let mut classes = std::collections::HashSet::new();
    for e in events.iter().filter(|e| e["ph"] == "X") {
        assert_eq!(u64_of(e, "pid"), pid, "{e}");
        let tid = u64_of(e, "tid");
        assert!(named.contains(&tid), "slice on an unnamed thread: {e}");
        let ts = e["ts"].as_f64().unwrap();
        let dur = e["dur"].as_f64().unwrap();
        assert!(
            ts >= 0.0 && dur >= 0.0 && ts + dur <= duration_us + 1.0,
            "{e}"
        );
        if e["cat"] != "handoff" {
            classes.insert(str_of(e, "cat").to_string());
            assert!(
                e["args"]["stack"].as_array().is_some_and(|s| !s.is_empty()),
                "{e}"
            );
        }
        slices.entry(tid).or_default().push((ts, ts + dur));
    }
    // On each thread, slices nest or follow one another: never half-overlap.
    for (tid, mut list) in slices {
        list.sort_by(|a, b| a.0.total_cmp(&b.0).then(b.1.total_cmp(&a.1)));
        let mut open: Vec<f64> = Vec::new();
        for (start, end) in list {
            while open.last().is_some_and(|&e| e <= start) {
                open.pop();
            }
            if let Some(&outer) = open.last() {
                assert!(
                    end <= outer,
                    "thread {tid}: a slice ending {end} overlaps one ending {outer}"
                );
            }
            open.push(end);
        }
    }
    for class in ["sync", "sleep", "io-file", "poll"] {
        assert!(classes.contains(class), "no {class} slice: {classes:?}");
    }
    // Flows come in pairs: a start on the releasing thread, a finish on the
    // thread it let in.
    let flow = |ph: &str| -> Vec<(u64, u64)> {
        events
            .iter()
            .filter(|e| e["ph"] == ph)
            .map(|e| (u64_of(e, "id"), u64_of(e, "tid")))
            .collect()
    };
    let (starts, finishes) = (flow("s"), flow("f"));
    assert!(
        !starts.is_empty(),
        "the locker's wait was handed over by the holder"
    );
    assert_eq!(starts.len(), finishes.len());
    for ((id_s, from), (id_f, to)) in starts.iter().zip(&finishes) {
        assert_eq!(id_s, id_f);
        assert_ne!(from, to);
    }
    // Each finish binds to its wait slice (`bp: e`, the enclosing slice)
    // without doubt: strictly inside it, at least 1 ns from either edge as a
    // reader adds `ts + dur` in floats, never at its very end.
    for f in events.iter().filter(|e| e["ph"] == "f") {
        let at = f["ts"].as_f64().unwrap();
        let inside = events.iter().any(|e| {
            let (ts, dur) = (e["ts"].as_f64().unwrap_or(-1.0), e["dur"].as_f64());
            e["ph"] == "X"
                && e["cat"] != "handoff"
                && e["tid"] == f["tid"]
                && dur.is_some_and(|d| ts + 0.001 <= at && at <= ts + d - 0.001)
        });
        assert!(inside, "a flow ends at no wait's inside: {f}");
    }
}

/// The critical path over the lanes (issue 39): tests/c/critical_path.c's
/// "series" run is serialised by &lock_a, so the path goes from worker to
/// worker through its waits; every segment is drawn, the lock's holds
/// and waits say so, and the path jumps lanes where a release let the
/// next worker in.
#[test]
fn the_timeline_draws_the_critical_path_through_the_lock_that_serialises_the_run() {
    let Some(browser) = chromium() else {
        eprintln!("no chromium: the critical path's drawing is not checked");
        return;
    };
    let bin = build_c("critical_path");
    let dir = fresh_dir("html-critical-path");
    assert_success(
        &run_under_shim(&bin, &["series", "base"], &dir),
        "critical_path series",
    );
    let report = report_json_of(&dir);
    let path = &only_process(&report)["critical_path"];
    let on_path = arr(path, "locks")
        .iter()
        .find(|l| l["lock"] == "&lock_a")
        .unwrap_or_else(|| panic!("no &lock_a in {}", short(path)));
    assert!(u64_of(on_path, "hold_ns") > 0, "{}", short(path));
    let page = html_report(&dir, "critical-path.html");
    let html = std::fs::read_to_string(&page).unwrap();
    let legend = tags(&html, "div", "path-legend");
    assert_eq!(legend.len(), 1, "one legend for the one process");
    let segments: usize = attr(legend[0], "data-segments").unwrap().parse().unwrap();
    assert!(segments > 2, "{segments} segments");
    let legend_text = &html[html.find("class=\"path-legend\"").unwrap()..];
    let legend_text = &legend_text[..legend_text.find("</div>").unwrap()];
    assert!(legend_text.contains("on it: &amp;lock_a"), "{legend_text}");

    let dom = dump_dom(&browser, &page);
    let drawn = tags(&dom, "rect", "path-seg");
    assert_eq!(drawn.len(), segments, "every segment is drawn at full view");
    let tip_of = |kind: &str| -> Vec<String> {
        drawn
            .iter()
            .filter(|t| attr(t, "data-kind").as_deref() == Some(kind))
            .filter_map(|t| attr(t, "data-tip"))
            .collect()
    };
    let holding = tip_of("holding");
    assert!(
        holding
            .iter()
            .any(|t| t.contains("in a critical section of lock &lock_a")),
        "{holding:?}"
    );
    let waiting = tip_of("waiting");
    assert!(
        waiting
            .iter()
            .any(|t| t.contains("waiting for lock &lock_a")
                && t.contains("until released by thread")
                && t.contains("critical_path.c:")),
        "{waiting:?}"
    );
    assert!(
        !tags(&dom, "line", "path-jump").is_empty(),
        "the path goes on in the thread that ended each wait"
    );
    screenshot(&browser, &page, "critical-path.png");
}
