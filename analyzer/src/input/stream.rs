//! Ordered event streams (`locksuit events`): each lock's and condition
//! variable's events in the order its own sequence number says they
//! happened, never in emission order and never by comparing clocks across
//! threads.
//!
//! A lock's sequence counts its releases. The release that left sequence
//! `k` comes before every acquisition that saw `k`, and those come before
//! the release that left `k + 1`; so each event gets the position `2k` (a
//! release leaving `k`) or `2k + 1` (an acquisition, request or give-up at
//! `k`), and only events at one position are ordered by time (then all
//! come from holders and waiters of one lock state). A condition variable's
//! sequence counts its notifies in the same way.
//!
//! The release event cannot name the next holder when it is written (the
//! kernel picks the waiter to wake, and another thread may barge in), so
//! `handed_to_tid` is filled here: the thread whose acquisition saw the
//! sequence this release left. In the default mode only contended
//! acquisitions are events, so a release followed by an uncontended one has
//! no known successor (`LOCKSUIT_EVENTS=all` records them all).

use crate::model::{ObjectStream, StreamEvent};
use locksuit_format::reader::Trace;
use locksuit_format::*;
use std::collections::HashMap;

/// Which objects `analyze` puts streams into the model for.
#[derive(Clone, Debug, Default)]
pub enum StreamFilter {
    /// None: the plain report.
    #[default]
    Off,
    All,
    /// Only these report ids (L3, C1, …).
    Only(Vec<String>),
    /// No streams: the names of the trace's raw ids only (`RawNames`), for
    /// a reader that merges a live trace itself (`events --merged --follow`).
    Names,
}

impl StreamFilter {
    fn wants(&self, id: &str) -> bool {
        match self {
            Self::Off | Self::Names => false,
            Self::All => true,
            Self::Only(ids) => ids.iter().any(|i| i == id),
        }
    }
}

/// One event before numbering: its place in the object's order.
struct Placed {
    position: u64,
    /// Within a position: the acquisition (there is one per sequence for an
    /// exclusive lock) comes before the requests that found it held; the
    /// rest (requests, give-ups, condition waits) by time, which keeps each
    /// thread's own events in order.
    phase: u8,
    time: u64,
    event: StreamEvent,
}

/// Builds the requested streams. `name` maps a raw object id to its report
/// id; `site` a raw site id to its report site id; `start_ns` is the trace's
/// start, so times are relative to it.
pub fn build(
    trace: &Trace,
    filter: &StreamFilter,
    name: &dyn Fn(u32) -> Option<String>,
    site: &dyn Fn(u32) -> Option<String>,
    start_ns: u64,
) -> Vec<ObjectStream> {
    if matches!(filter, StreamFilter::Off | StreamFilter::Names) {
        return Vec::new();
    }
    let mut by_object: HashMap<u32, Vec<Placed>> = HashMap::new();
    // Names are looked up once per object and site, not once per event.
    let mut wanted: HashMap<u32, bool> = HashMap::new();
    let mut sites: HashMap<u32, Option<String>> = HashMap::new();
    for e in trace.events.iter() {
        let keep = *wanted
            .entry(e.lock_id)
            .or_insert_with(|| name(e.lock_id).is_some_and(|id| filter.wants(&id)));
        if !keep {
            continue;
        }
        let tid = e.tid;
        let site_id = sites
            .entry(e.site_id)
            .or_insert_with(|| site(e.site_id))
            .clone();
        let at = |kind: &'static str, seq: u32, time: u64| StreamEvent {
            seq,
            kind,
            tid,
            site: site_id.clone(),
            time_ns: time.saturating_sub(start_ns),
            ..StreamEvent::default()
        };
        let placed = by_object.entry(e.lock_id).or_default();
        let mut push = |position: u64, phase: u8, time: u64, event: StreamEvent| {
            placed.push(Placed {
                position,
                phase,
                time,
                event,
            })
        };
        let acquisition_at = |seq: u32| 2 * seq as u64 + 1;
        match e.hdr.aux & 0xff {
            EVENT_ACQUIRED => push(
                acquisition_at(e.seq2),
                0,
                e.time,
                at("entered", e.seq2, e.time),
            ),
            kind @ (EVENT_BLOCKED | EVENT_TIMED_OUT) => {
                let mut enter = at("enter", e.seq, e.time);
                enter.owner_tid = (e.other != 0).then_some(e.other);
                enter.deadline_ns = (e.deadline != 0).then_some(e.deadline);
                push(acquisition_at(e.seq), 1, e.time, enter);
                let (label, phase) = if kind == EVENT_BLOCKED {
                    ("entered", 0)
                } else {
                    ("timed-out", 1)
                };
                let mut done = at(label, e.seq2, e.time2);
                done.wait_ns = Some(e.time2.saturating_sub(e.time));
                push(acquisition_at(e.seq2), phase, e.time2, done);
            }
            EVENT_RELEASED => {
                let mut exit = at("exit", e.seq2, e.time);
                exit.hold_ns = (e.time2 != 0).then(|| e.time.saturating_sub(e.time2));
                exit.waiters = Some(e.other);
                push(2 * e.seq2 as u64, 0, e.time, exit);
            }
            EVENT_COND_WAIT => {
                push(acquisition_at(e.seq), 1, e.time, at("wait", e.seq, e.time));
                let mut waited = at("waited", e.seq2, e.time2);
                waited.wait_ns = Some(e.time2.saturating_sub(e.time));
                waited.outcome = Some(outcome_name((e.hdr.aux >> 8) & 0xff));
                waited.deadline_ns = (e.deadline != 0).then_some(e.deadline);
                push(acquisition_at(e.seq2), 1, e.time2, waited);
            }
            EVENT_NOTIFY => {
                let broadcast = e.hdr.aux & (1 << 16) != 0;
                let mut notify = at(
                    if broadcast { "broadcast" } else { "signal" },
                    e.seq2,
                    e.time,
                );
                notify.waiters = Some(e.other);
                push(2 * e.seq2 as u64, 0, e.time, notify);
            }
            _ => {}
        }
    }
    let mut streams: Vec<ObjectStream> = by_object
        .into_iter()
        .filter_map(|(raw, mut placed)| {
            placed.sort_by_key(|p| (p.position, p.phase, p.time));
            link_successors(&mut placed);
            Some(ObjectStream {
                object: name(raw)?,
                events: placed.into_iter().map(|p| p.event).collect(),
            })
        })
        .collect();
    streams.sort_by_key(|s| report_order(&s.object));
    streams
}

/// Fills `owner_tid` of requests that did not see the owner and
/// `handed_to_tid` of releases, from the acquisitions at the same sequence.
fn link_successors(placed: &mut [Placed]) {
    let mut first_acquirer: HashMap<u64, u32> = HashMap::new();
    for p in placed.iter() {
        if p.event.kind == "entered" {
            first_acquirer.entry(p.position).or_insert(p.event.tid);
        }
    }
    for p in placed.iter_mut() {
        match p.event.kind {
            "exit" => p.event.handed_to_tid = first_acquirer.get(&(p.position + 1)).copied(),
            "enter" if p.event.owner_tid.is_none() => {
                p.event.owner_tid = first_acquirer
                    .get(&p.position)
                    .copied()
                    .filter(|&t| t != p.event.tid)
            }
            _ => {}
        }
    }
}

/// L2 before L10, locks before condition variables.
fn report_order(id: &str) -> (bool, u64) {
    let (letter, number) = id.split_at(1.min(id.len()));
    (letter != "L", number.parse().unwrap_or(u64::MAX))
}

fn outcome_name(outcome: u32) -> &'static str {
    match outcome {
        OUTCOME_NOTIFIED => "notified",
        OUTCOME_TIMED_OUT => "timed-out",
        OUTCOME_SPURIOUS => "spurious",
        OUTCOME_OWNER_DIED => "owner-died",
        OUTCOME_ERROR => "error",
        OUTCOME_CANCELLED => "cancelled",
        _ => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::contention::tests::{ev, trace};

    /// Full tracing of one lock (raw id 5): 10 takes it; 20 asks (owner not
    /// seen) and gets it when 10 releases; 30 asks while 20 holds it and
    /// gets it when 20 releases.
    fn scenario() -> Vec<(usize, EventRecord)> {
        let asked_at = |mut e: EventRecord, seq: u32| {
            e.seq = seq;
            e
        };
        vec![
            (0, ev(EVENT_ACQUIRED, 5, 1, 0, 0, (50, 0))),
            (0, ev(EVENT_RELEASED, 5, 1, 1, 1, (300, 50))),
            (1, asked_at(ev(EVENT_BLOCKED, 5, 2, 1, 0, (100, 300)), 0)),
            (1, ev(EVENT_RELEASED, 5, 2, 2, 1, (400, 300))),
            (2, asked_at(ev(EVENT_BLOCKED, 5, 3, 2, 20, (350, 400)), 1)),
        ]
    }

    type Row = (&'static str, u32, u32, Option<u32>, Option<u32>);

    fn ordered(events: Vec<(usize, EventRecord)>) -> Vec<Row> {
        let streams = build(
            &trace(events),
            &StreamFilter::All,
            &|raw| (raw == 5).then(|| "L1".to_string()),
            &|raw| Some(format!("S{raw}")),
            0,
        );
        assert_eq!(streams.len(), 1);
        streams[0]
            .events
            .iter()
            .map(|e| (e.kind, e.tid, e.seq, e.owner_tid, e.handed_to_tid))
            .collect()
    }

    fn expected() -> Vec<Row> {
        vec![
            ("entered", 10, 0, None, None),
            ("enter", 20, 0, Some(10), None),
            ("exit", 10, 1, None, Some(20)),
            ("entered", 20, 1, None, None),
            ("enter", 30, 1, Some(20), None),
            ("exit", 20, 2, None, Some(30)),
            ("entered", 30, 2, None, None),
        ]
    }

    #[test]
    fn streams_follow_the_sequence_whatever_the_emission_order() {
        assert_eq!(ordered(scenario()), expected());
        // A release written after the acquisition it enabled, and every
        // other order the per-thread buffers could be read in.
        let mut reversed = scenario();
        reversed.reverse();
        assert_eq!(ordered(reversed), expected());
        for k in 1..5 {
            let mut rotated = scenario();
            rotated.rotate_left(k);
            assert_eq!(ordered(rotated), expected(), "rotation {k}");
        }
    }

    #[test]
    fn clock_skew_does_not_reorder_a_stream() {
        // Thread 10's clock runs 1 s ahead: by timestamps its release would
        // come after everything else; by sequence it hands the lock to 20.
        let mut skewed = scenario();
        for (thread, e) in &mut skewed {
            if *thread == 0 {
                e.time += 1_000_000_000;
                if e.time2 != 0 {
                    e.time2 += 1_000_000_000;
                }
            }
        }
        assert_eq!(ordered(skewed), expected());
    }

    #[test]
    fn a_release_followed_by_an_unrecorded_acquisition_names_no_successor() {
        // Default mode: only 10's contended release and 20's wait are events.
        let events = vec![(0, ev(EVENT_RELEASED, 5, 1, 7, 1, (300, 0)))];
        assert_eq!(ordered(events), vec![("exit", 10, 7, None, None)]);
    }

    #[test]
    fn give_ups_at_one_sequence_keep_each_threads_order() {
        // 10 holds the lock at sequence 0; 20 and then 30 ask with a
        // deadline and give up, one after the other.
        let events = vec![
            (2, ev(EVENT_TIMED_OUT, 5, 3, 0, 10, (70, 120))),
            (1, ev(EVENT_TIMED_OUT, 5, 2, 0, 10, (10, 60))),
            (0, ev(EVENT_ACQUIRED, 5, 1, 0, 0, (5, 0))),
        ];
        assert_eq!(
            ordered(events),
            vec![
                ("entered", 10, 0, None, None),
                ("enter", 20, 0, Some(10), None),
                ("timed-out", 20, 0, None, None),
                ("enter", 30, 0, Some(10), None),
                ("timed-out", 30, 0, None, None),
            ]
        );
    }
}
