//! The shallow analysis the live views use (`Depth::Records`: `top`, the
//! follower's names) against the report's (`Depth::Full`), on one trace of
//! a program with real contention: the records give the same locks, lines,
//! threads and counts; what only the events tell (who blocked whom, the
//! blocking periods) is left empty, and the event count is still right.

use locksuit::analysis::findings::Limits;
use locksuit::analysis::process::{analyze, Depth};
use locksuit::input::stream::StreamFilter;
use locksuit::input::symbolize::Symbolizer;
use locksuit_tests::*;
use serde_json::Value;
use std::path::Path;

fn model(trace: &Path, depth: Depth) -> Value {
    let read = locksuit_format::read_trace(trace).expect("the trace reads");
    let process = analyze(
        &trace.display().to_string(),
        read,
        (&Limits::default(), depth),
        &StreamFilter::Off,
        &mut Symbolizer::default(),
        &mut || {},
    );
    serde_json::to_value(&process).expect("the model serialises")
}

/// Each row's name and the counters that come from records.
fn rows(process: &Value, table: &str, fields: &[&str]) -> Vec<String> {
    let mut rows: Vec<String> = arr(process, table)
        .iter()
        .map(|row| {
            let mut line = row["id"].to_string();
            for field in fields {
                line.push_str(&format!(" {field}={}", row[*field]));
            }
            line
        })
        .collect();
    rows.sort();
    rows
}

#[test]
fn records_depth_gives_the_reports_tables_without_the_event_passes() {
    let bin = build_c("contention");
    let dir = fresh_dir("depth");
    let out = run_under_shim(&bin, &[] as &[&str], &dir);
    assert_success(&out, "contention under the shim");
    let trace = only_trace(&dir);

    let full = model(&trace, Depth::Full);
    let records = model(&trace, Depth::Records);

    let lock_fields = ["acquisitions", "contended", "owner_changes", "threads"];
    let locks = rows(&full, "locks", &lock_fields);
    assert!(
        locks
            .iter()
            .any(|l| !l.contains("null") && l.contains("contended=10")),
        "the program's contended lock, with its counts: {locks:?}"
    );
    assert_eq!(rows(&records, "locks", &lock_fields), locks, "locks");
    let site_fields = ["engagements", "contended", "task_switches", "status"];
    let sites = rows(&full, "sites", &site_fields);
    assert!(
        sites.len() >= 2 && sites.iter().all(|s| !s.contains("null")),
        "the program's lines, with their counts: {sites:?}"
    );
    assert_eq!(rows(&records, "sites", &site_fields), sites, "lines");
    let tids = |p: &Value| -> Vec<u64> {
        let mut tids: Vec<u64> = arr(p, "threads").iter().map(|t| u64_of(t, "tid")).collect();
        tids.sort();
        tids
    };
    assert_eq!(tids(&records), tids(&full), "threads");
    assert_eq!(
        u64_of(&records, "events"),
        u64_of(&full, "events"),
        "events counted without reading them"
    );
    assert!(u64_of(&full, "events") > 0, "contended waits are events");

    // Only the events tell who blocked whom: the report has it, the live
    // views' model does not pretend to.
    assert!(!arr(&full, "blocking").is_empty(), "B waited behind A");
    assert!(
        arr(&records, "blocking").is_empty(),
        "no who-blocks-whom without the events"
    );
}
