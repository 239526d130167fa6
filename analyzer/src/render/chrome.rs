//! `locksuit export --format chrome`: the timeline as Chrome trace-event
//! JSON, which Perfetto and `chrome://tracing` open. One track per thread
//! (named by metadata events), one complete slice (`ph: X`) per blocking
//! period with its class as the category and its line, lock and call stack
//! as arguments, and for a lock handed over, a flow (`s` → `f`) from a
//! zero-length `release` slice on the releasing thread to the wait it
//! ended. The flow's finish lies inside the wait slice, [`FLOW_MARGIN_NS`]
//! (at most half the slice) before its end: a finish at the very end
//! binds to the slice or not as float rounding of `ts + dur` falls.
//! Timestamps are microseconds from the process's start.

use crate::model::*;
use serde_json::{json, Value};

/// Every process of the report, each as its own `pid`.
pub fn render(report: &Report) -> Value {
    let mut events: Vec<Value> = Vec::new();
    let mut flow = 0u64;
    for p in &report.processes {
        crate::model::names::with(&p.names, || process(&mut events, &mut flow, p));
    }
    json!({
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": { "producer": "locksuit", "schema": crate::model::SCHEMA },
    })
}

/// How far inside its wait slice a flow ends: 1 µs, far above the rounding
/// of microsecond floats (~1e-9 µs over an hour) and of a reader's
/// conversion to whole nanoseconds.
const FLOW_MARGIN_NS: u64 = 1000;

/// Where a flow into the wait `[start_ns, end_ns]` ends: inside it, clear of
/// both edges (the middle of a wait shorter than twice the margin).
fn flow_end_ns(start_ns: u64, end_ns: u64) -> u64 {
    end_ns - FLOW_MARGIN_NS.min((end_ns - start_ns) / 2)
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

fn process(events: &mut Vec<Value>, flow: &mut u64, p: &Process) {
    let pid = p.pid;
    let exe = crate::base::words::basename(&p.exe);
    events.push(
        json!({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
        "args": {"name": format!("{exe} (pid {pid})")}}),
    );
    let t = &p.timeline;
    for lane in &t.lanes {
        let name = p
            .threads
            .iter()
            .find(|th| th.tid == lane.tid)
            .and_then(|th| th.name.clone())
            .unwrap_or_else(|| lane.tid.to_string());
        events.push(
            json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": lane.tid,
            "args": {"name": name}}),
        );
    }
    for period in &t.periods {
        let stack = p.blocking_stacks.get(period.stack as usize);
        let mut args = serde_json::Map::new();
        if let Some(s) = stack {
            args.insert("line".into(), json!(s.line));
            let frames: Vec<String> = s
                .stack
                .iter()
                .map(|f| match (&f.function, &f.file, f.line) {
                    (Some(func), Some(file), Some(line)) => format!("{func} ({file}:{line})"),
                    (Some(func), _, _) => func.clone(),
                    _ => f.offset.clone().unwrap_or_else(|| f.address.clone()),
                })
                .collect();
            args.insert("stack".into(), json!(frames));
        }
        if let Some(lock) = period.lock {
            args.insert("lock".into(), json!(lock.to_string()));
        }
        if period.timed_out {
            args.insert("timed_out".into(), json!(true));
        }
        let class = t
            .classes
            .get(period.class as usize)
            .map_or("other", String::as_str);
        events.push(json!({
            "ph": "X", "name": stack.map_or("blocked", |s| s.api.as_str()), "cat": class,
            "pid": pid, "tid": period.tid,
            "ts": us(period.start_ns), "dur": us(period.end_ns - period.start_ns),
            "args": args,
        }));
        if period.released_by != 0 {
            *flow += 1;
            let at = period
                .released_at
                .and_then(|i| t.lines.get(i as usize))
                .cloned();
            events.push(json!({
                "ph": "X", "name": "release", "cat": "handoff", "pid": pid,
                "tid": period.released_by, "ts": us(period.end_ns), "dur": 0,
                "args": {"lock": period.lock.map(|l| l.to_string()), "taken_at": at},
            }));
            events.push(
                json!({"ph": "s", "id": *flow, "name": "handoff", "cat": "handoff",
                "pid": pid, "tid": period.released_by, "ts": us(period.end_ns)}),
            );
            let finish = flow_end_ns(period.start_ns, period.end_ns);
            events.push(json!({"ph": "f", "bp": "e", "id": *flow, "name": "handoff",
                "cat": "handoff", "pid": pid, "tid": period.tid, "ts": us(finish)}));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flows_end_inside_their_wait() {
        // Long, short and tiny waits, far from the process's start (where
        // microsecond floats are coarsest).
        let hour = 3_600_000_000_000u64;
        for (start, end) in [(hour, hour + 5_000_000), (hour, hour + 1500), (7, 11)] {
            let f = flow_end_ns(start, end);
            assert!(start < f && f < end, "{start} {f} {end}");
            let (ts, dur, at) = (us(start), us(end - start), us(f));
            assert!(at < ts + dur && at > ts, "{ts} + {dur} vs {at}");
        }
        assert_eq!(flow_end_ns(0, 10_000), 9_000);
    }
}
