//! Waits by call stack: the waiting call tree (`report --tree`, JSON
//! `wait_tree`), folded stacks under each weight, the flame graph (SVG,
//! parsed as XML) and the pprof profile, read by the real `go tool pprof`
//! (Debian's golang-go, which `.ci/run` installs). Ground truth from
//! tests/c/snapshots.c: eight threads wait once each on `pile_lock` at
//! pile_on, one on `other_lock`.

use locksuit_tests::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A recorded run of snapshots.c: its trace directory and its report.
fn recorded(name: &str) -> (PathBuf, Value) {
    let bin = build_c("snapshots");
    let dir = fresh_dir(name);
    assert_success(&run_under_shim(&bin, &[] as &[&str], &dir), "snapshots");
    let report = report_json(&[&dir], None);
    (dir, report)
}

/// The pile_on lock waits in the blocking stacks: (count, total ns).
fn pile_waits(p: &Value) -> (u64, u64) {
    arr(p, "blocking_stacks")
        .iter()
        .filter(|s| {
            str_of(s, "line").starts_with("pile_on@") && str_of(s, "api") == "pthread_mutex_lock"
        })
        .fold((0, 0), |(c, t), s| {
            (c + u64_of(s, "count"), t + u64_of(s, "total_ns"))
        })
}

/// The node reached from the roots through frames named `path`, searching
/// every root's subtree for the first name.
fn find<'a>(nodes: &'a [Value], name: &str) -> Option<&'a Value> {
    for n in nodes {
        if n["frame"] == name {
            return Some(n);
        }
        if let Some(hit) = find(arr(n, "children"), name) {
            return Some(hit);
        }
    }
    None
}

fn locksuit_out(args: &[&str]) -> String {
    let out = run_locksuit(args);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    stdout_str(&out)
}

#[test]
fn the_waiting_tree_merges_the_stacks_and_prunes_below_the_cut() {
    let (dir, report) = recorded("stacks-tree");
    let p = only_process(&report);
    let (count, total) = pile_waits(p);
    assert_eq!(count, 8);
    let tree = arr(p, "wait_tree");
    let pile = find(tree, "pile_on").unwrap_or_else(|| panic!("{}", p["wait_tree"]));
    assert_eq!(u64_of(pile, "count"), 8, "{pile}");
    let leaf = &arr(pile, "children")[0];
    assert_eq!(str_of(leaf, "frame"), "pthread_mutex_lock");
    assert_eq!(
        (u64_of(leaf, "count"), u64_of(leaf, "total_ns")),
        (8, total)
    );
    // Every node's total is at least the sum of its children's.
    fn check(n: &Value) {
        let below: u64 = arr(n, "children")
            .iter()
            .map(|c| u64_of(c, "total_ns"))
            .sum();
        assert!(u64_of(n, "total_ns") >= below, "{n}");
        arr(n, "children").iter().for_each(check);
    }
    tree.iter().for_each(check);
    let dir = dir.to_str().unwrap();
    let text = locksuit_out(&["report", "--tree", "--width", "80", dir]);
    assert!(text.contains("Waiting call tree"), "{text}");
    let tree_text: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("Waiting call tree"))
        .take_while(|l| !l.is_empty())
        .collect();
    assert!(
        tree_text.iter().any(|l| l.trim_end().ends_with(" pile_on")),
        "{text}"
    );
    assert!(text.lines().all(|l| l.chars().count() <= 80), "{text}");
    // A cut above every node but the biggest hides the rest, and says so.
    let cut = locksuit_out(&["report", "--tree", "--tree-min", "99%", dir]);
    assert!(cut.contains("below the cut"), "{cut}");
    assert!(!cut.contains(" other_waiter\n"), "{cut}");
    let bad = run_locksuit(&["report", "--tree-min", "150%", dir]);
    assert_eq!(bad.status.code(), Some(2), "{}", describe(&bad));
}

#[test]
fn folded_stacks_carry_each_weight() {
    let (dir, report) = recorded("stacks-folded");
    let p = only_process(&report);
    let dir = dir.to_str().unwrap();
    let value_of = |weight: &str, tail: &str| -> u64 {
        let folded = locksuit_out(&["report", "--format", "folded", "--weight", weight, dir]);
        folded
            .lines()
            .filter_map(|l| l.rsplit_once(' '))
            .filter(|(stack, _)| stack.ends_with(tail))
            .map(|(_, v)| v.parse::<u64>().unwrap())
            .sum()
    };
    assert_eq!(
        value_of("wait", ";pile_on;pthread_mutex_lock"),
        pile_waits(p).1
    );
    let site = arr(p, "sites")
        .iter()
        .find(|s| str_of(s, "id").starts_with("pile_on@"))
        .unwrap();
    assert_eq!(value_of("contentions", ";pile_on"), 8);
    assert_eq!(
        value_of("contentions", ";pile_on"),
        u64_of(site, "contended")
    );
    assert_eq!(
        value_of("acquisitions", ";pile_on"),
        u64_of(site, "engagements")
    );
    assert_eq!(value_of("hold", ";pile_on"), u64_of(site, "hold_ns"));
    let folded = locksuit_out(&["report", "--format", "folded", dir]);
    let first = folded.lines().next().unwrap();
    assert!(first.starts_with("snapshots (pid "), "{folded}");
}

#[test]
fn the_flame_graph_is_svg_naming_the_hot_function() {
    let (dir, _) = recorded("stacks-flame");
    let svg = dir.join("waits.svg");
    locksuit_out(&[
        "flamegraph",
        dir.to_str().unwrap(),
        "-o",
        svg.to_str().unwrap(),
    ]);
    let text = std::fs::read_to_string(&svg).unwrap();
    // inferno names the SVG 1.1 DTD; the parser is told to allow it.
    let options = roxmltree::ParsingOptions {
        allow_dtd: true,
        ..Default::default()
    };
    let doc = roxmltree::Document::parse_with_options(&text, options)
        .unwrap_or_else(|e| panic!("not XML: {e}"));
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    let titles: Vec<&str> = doc
        .descendants()
        .filter(|n| n.has_tag_name("title"))
        .filter_map(|n| n.text())
        .collect();
    assert!(
        titles.iter().any(|t| t.starts_with("pile_on ")),
        "{titles:?}"
    );
    assert!(
        titles.iter().any(|t| t.starts_with("pthread_mutex_lock ")),
        "{titles:?}"
    );
}

/// `go`, or None (the test then says so and passes: `.ci/run` installs
/// Debian's golang-go, so CI always runs it).
fn go() -> Option<PathBuf> {
    ["/usr/bin/go", "/usr/lib/go/bin/go", "/usr/local/go/bin/go"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

fn pprof(go: &Path, mode: &str, profile: &Path) -> String {
    let out = Command::new(go)
        .args(["tool", "pprof", mode])
        .arg(profile)
        .env("HOME", profile.parent().unwrap())
        .env("PPROF_TMPDIR", profile.parent().unwrap())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "go tool pprof {mode}: {}",
        describe(&out)
    );
    stdout_str(&out)
}

#[test]
fn go_tool_pprof_reads_the_profile() {
    let Some(go) = go() else {
        eprintln!("go is not installed: the pprof check is skipped (.ci/run installs golang-go)");
        return;
    };
    let (dir, report) = recorded("stacks-pprof");
    let p = only_process(&report);
    let profile = dir.join("locks.pb.gz");
    locksuit_out(&[
        "report",
        "--format",
        "pprof",
        "-o",
        profile.to_str().unwrap(),
        dir.to_str().unwrap(),
    ]);
    let top = pprof(&go, "-top", &profile);
    assert!(top.contains("Type: delay"), "{top}");
    let lock_line = top
        .lines()
        .find(|l| l.trim_end().ends_with(" pthread_mutex_lock"))
        .unwrap_or_else(|| panic!("{top}"));
    assert!(top.contains(" pile_on"), "{top}");
    // pprof's flat delay of pthread_mutex_lock: every lock wait's.
    let flat = lock_line.split_whitespace().next().unwrap();
    let all_lock_waits: u64 = arr(p, "blocking_stacks")
        .iter()
        .filter(|s| str_of(s, "api") == "pthread_mutex_lock")
        .map(|s| u64_of(s, "total_ns"))
        .sum();
    let ms = |v: &str| -> f64 {
        let (n, unit) = v.split_at(v.find(|c: char| c.is_alphabetic()).unwrap());
        let n: f64 = n.parse().unwrap();
        match unit {
            "s" => n * 1e3,
            "ms" => n,
            "us" | "µs" => n / 1e3,
            "ns" => n / 1e6,
            other => panic!("unit {other}"),
        }
    };
    let ours = all_lock_waits as f64 / 1e6;
    assert!(
        (ms(flat) - ours).abs() <= ours * 0.01 + 0.01,
        "{flat} vs {ours} ms: {top}"
    );
    // -traces: a trace with pile_on under pthread_mutex_lock.
    let traces = pprof(&go, "-traces", &profile);
    let found = traces.split("-----------+").any(|t| {
        let lines: Vec<&str> = t.lines().map(str::trim).collect();
        let lock = lines.iter().position(|l| l.ends_with("pthread_mutex_lock"));
        let pile = lines.iter().position(|l| l.ends_with("pile_on"));
        matches!((lock, pile), (Some(a), Some(b)) if a < b)
    });
    assert!(found, "{traces}");
}
