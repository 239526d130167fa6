//! `locksuit events --merged --follow`: one process's merged stream while
//! it runs. Every `POLL` the live trace is read again; the events not seen
//! yet (each thread's own come in its program order, so a count per thread
//! says which) go into one merge that lives for the whole run, and what
//! becomes valid is written at once. When the process has exited (or
//! died), what is still held back is released, marked, and the stream ends.

use crate::findings::Limits;
use crate::load::{self, InputError, Selection};
use crate::merge::{Delivered, Merge, Policy};
use crate::merge_trace::{model_event, perturb, Context};
use crate::model::MergedEvent;
use crate::stream::StreamFilter;
use crate::symbolize::Symbolizer;
use locksuit_format::*;
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

/// How often the live trace is read.
pub const POLL: Duration = Duration::from_millis(20);

/// How long, while following, an event is held back for a predecessor
/// that has not come: far above the follower's own latency (one poll),
/// short enough that a lost event does not stop the stream.
pub const HOLD_BOUND: Duration = Duration::from_secs(1);

/// CLOCK_MONOTONIC now, the clock of the trace's timestamps.
fn monotonic_ns() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64
}

/// Follows the one process traced at `paths`, handing each event to
/// `emit` as it becomes valid; returns when the process is gone.
pub fn follow(
    paths: &[PathBuf],
    policy: Policy,
    emit: &mut dyn FnMut(&MergedEvent) -> std::io::Result<()>,
) -> Result<(), InputError> {
    let mut symbolizer = Symbolizer::default();
    let mut merge: Merge<EventRecord> = Merge::new(policy);
    let mut seen: HashMap<u32, u64> = HashMap::new();
    let mut context = Context::default();
    let mut perturbation = Vec::new();
    let mut followed: Option<u32> = None;
    loop {
        let mut fresh: Vec<EventRecord> = Vec::new();
        let mut process = None;
        let mut pids = Vec::new();
        load::for_each(paths, &Selection::default(), |path, mapped| {
            let load::Mapped { trace, pages, .. } = mapped;
            pids.push(trace.header.pid);
            if followed.is_some_and(|pid| pid != trace.header.pid) {
                return;
            }
            context.learn(&trace, crate::merge_trace::object_kinds(&trace));
            let mut counts: HashMap<u32, u64> = HashMap::new();
            trace.events.for_each_merged(|e| {
                let count = counts.entry(e.tid).or_default();
                *count += 1;
                if *count > seen.get(&e.tid).copied().unwrap_or(0) {
                    fresh.push(*e);
                }
            });
            process = Some(crate::analysis::analyze(
                &path.display().to_string(),
                trace,
                &Limits::default(),
                &StreamFilter::Names,
                &mut symbolizer,
                &mut || pages.release(),
            ));
        })?;
        if followed.is_none() {
            if pids.len() != 1 {
                return Err(InputError(format!(
                    "--follow reads one process's trace; found {}: name one trace file",
                    pids.len()
                )));
            }
            followed = pids.first().copied();
        }
        let Some(p) = process else {
            return Err(InputError("the followed trace is gone".into()));
        };
        let names = &p.raw_names;
        let object = |raw: u32| names.objects.get(&raw).cloned();
        let site = |raw: u32| names.sites.get(&raw).cloned();
        let thread = |tid: u32| names.threads.get(&tid).cloned();
        let mut out: Vec<Delivered<EventRecord>> = Vec::new();
        for e in fresh {
            *seen.entry(e.tid).or_default() += 1;
            merge.push(context.item(&e));
            merge.drain(false, &mut |d| out.push(d));
        }
        let done = p.ended_by != "running";
        if done {
            merge.drain(true, &mut |d| out.push(d));
        } else {
            // What waited longer than the bound for a predecessor is let
            // go (marked): it was dropped, or its thread died.
            let limit = monotonic_ns().saturating_sub(HOLD_BOUND.as_nanos() as u64);
            merge.drain_releasing_before(limit, &mut |d| out.push(d));
        }
        for d in &out {
            if policy == Policy::Adjusted {
                perturb(&mut perturbation, d);
            }
            let event = model_event(
                d,
                policy,
                &context,
                (&object, &site, &thread),
                p.start_mono_ns,
            );
            emit(&event).map_err(|e| InputError(format!("cannot write: {e}")))?;
        }
        if done {
            return Ok(());
        }
        std::thread::sleep(POLL);
    }
}
