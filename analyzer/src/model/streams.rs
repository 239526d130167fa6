//! The events of each lock and condition variable, for `--streams`.

use serde::Serialize;

/// One lock's or condition variable's events, ordered by its sequence
/// number (see `stream.rs`).
#[derive(Debug, Serialize)]
pub struct ObjectStream {
    /// Report id: L3, C1, …
    pub object: String,
    pub events: Vec<StreamEvent>,
}

#[derive(Debug, Default, Serialize)]
pub struct StreamEvent {
    /// The object's sequence at the operation: releases (locks) or
    /// notifies (condition variables) before it, or, for a release or
    /// notify, including it.
    pub seq: u32,
    /// Locks: "enter" (asked and had to wait), "entered", "timed-out",
    /// "exit". Condition variables: "wait", "waited", "signal", "broadcast".
    pub kind: &'static str,
    pub tid: u32,
    pub site: Option<String>,
    /// Since the process's start.
    pub time_ns: u64,
    /// enter: the thread that held the lock.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner_tid: Option<u32>,
    /// exit: the thread whose acquisition followed this release.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub handed_to_tid: Option<u32>,
    /// entered, timed-out, waited: from the request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait_ns: Option<u64>,
    /// exit: how long the lock was held, when that hold was timed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hold_ns: Option<u64>,
    /// exit, signal, broadcast: threads waiting at that moment.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiters: Option<u32>,
    /// Timed calls: the absolute deadline, in ns of the clock the caller named.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline_ns: Option<u64>,
    /// The same deadline relative to the process's start on that clock
    /// (negative: before it), on the scale of `time_ns`; filled in for
    /// rendering (see `render::streams::relate_deadlines`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline_since_start_ns: Option<i64>,
    /// waited: notified, timed-out, spurious, owner-died, error or cancelled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<&'static str>,
}
