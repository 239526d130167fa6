//! One process's merged stream while it runs: `locksuit events --merged
//! --follow`, and the event pane of `locksuit top`. Every read of the live
//! trace, the events not seen yet (each thread's own come in its program
//! order, so a count per thread says which) go into one merge that lives
//! for the whole run, and what becomes valid is handed on at once. What
//! waited too long for a predecessor is let go, marked; when the process
//! has exited (or died), everything still held back is.

use crate::analysis::findings::Limits;
use crate::input::load::{self, InputError, Selection};
use crate::input::merge::{Delivered, Merge, Policy};
use crate::input::merge_trace::{model_event, object_kinds, Context, Namer};
use crate::input::stream::StreamFilter;
use crate::input::symbolize::Symbolizer;
use crate::model::{MergedEvent, RawNames};
use locksuit_format::events::LanePositions;
use locksuit_format::reader::Trace;
use locksuit_format::*;
use std::path::PathBuf;
use std::time::Duration;

/// How often `--follow` reads the live trace.
pub const POLL: Duration = Duration::from_millis(20);

/// Events merged and handed on at a time: behind a busy program, a read
/// brings a backlog, delivered in pieces whose memory is used again rather
/// than in one batch the size of the backlog.
const CHUNK: usize = 1 << 14;

/// How long, while following, an event is held back for a predecessor
/// that has not come: far above the follower's own latency (one poll),
/// short enough that a lost event does not stop the stream (a whole
/// trace's merge uses the same bound, on the trace's own time).
pub const HOLD_BOUND: Duration = Duration::from_secs(1);

/// The merge of one running process, fed read after read.
pub struct Follower {
    policy: Policy,
    merge: Merge<EventRecord>,
    /// Where reading each lane stopped.
    positions: LanePositions,
    context: Context,
    /// Taken from the last read, not merged yet.
    fresh: Vec<EventRecord>,
    /// What the merge delivered, and as the model has it: kept for their
    /// room from one piece to the next.
    delivered: Vec<Delivered<EventRecord>>,
    modelled: Vec<MergedEvent>,
    /// The process was found gone after the previous read: then it was gone
    /// before the last read began, which holds everything it wrote.
    gone_before_read: bool,
}

impl Follower {
    pub fn new(policy: Policy) -> Follower {
        Follower {
            policy,
            merge: Merge::new(policy),
            positions: LanePositions::new(),
            context: Context::default(),
            fresh: Vec::new(),
            delivered: Vec::new(),
            modelled: Vec::new(),
            gone_before_read: false,
        }
    }

    /// Where reading each lane stopped: the blocks before are read.
    pub fn positions(&self) -> &LanePositions {
        &self.positions
    }

    /// Takes from `trace` (read again) what is new since the last read:
    /// each lane from where its reading stopped, so a poll costs what was
    /// added, not the whole trace.
    pub fn take(&mut self, trace: &Trace) {
        self.context.learn(&trace.threads, object_kinds(trace));
        let fresh = &mut self.fresh;
        trace
            .events
            .for_each_merged_after(&mut self.positions, |e| fresh.push(*e));
    }

    /// Merges what was taken and hands `emit` what is valid now, named by
    /// `names`, a piece at a time (in delivery order). `gone`: the process
    /// no longer ran after the last read. Found so after a read that began
    /// while it ran, it may have written more, so the stream ends (all held
    /// back is handed on, and this returns true) only after the next read.
    pub fn deliver(
        &mut self,
        names: &RawNames,
        start_mono_ns: u64,
        gone: bool,
        emit: &mut dyn FnMut(&[MergedEvent]) -> std::io::Result<()>,
    ) -> std::io::Result<bool> {
        let ended = gone && self.gone_before_read;
        self.gone_before_read = gone;
        let object = |raw: u32| names.objects.get(&raw).cloned();
        let site = |raw: u32| names.sites.get(&raw).cloned();
        let thread = |tid: u32| names.threads.get(&tid).cloned();
        let names = (&object as _, &site as _, &thread as _);
        let mut taken = 0;
        while taken < self.fresh.len() {
            let piece = CHUNK.min(self.fresh.len() - taken);
            for e in &self.fresh[taken..taken + piece] {
                self.merge.push(self.context.item(e));
                let delivered = &mut self.delivered;
                self.merge.drain(false, &mut |d| delivered.push(d));
            }
            taken += piece;
            if let Err(e) = self.hand_on(names, start_mono_ns, emit) {
                // What is in the merge already is not taken again.
                self.fresh.drain(..taken);
                return Err(e);
            }
        }
        self.fresh.clear();
        let delivered = &mut self.delivered;
        if ended {
            self.merge.drain(true, &mut |d| delivered.push(d));
        } else {
            // What waited longer than the bound for a predecessor is let
            // go (marked): it was dropped, or its thread died.
            let limit =
                crate::base::time::monotonic_now_ns().saturating_sub(HOLD_BOUND.as_nanos() as u64);
            self.merge
                .drain_releasing_before(limit, &mut |d| delivered.push(d));
        }
        self.hand_on(names, start_mono_ns, emit)?;
        Ok(ended)
    }

    /// Names what was delivered and hands it to `emit`.
    fn hand_on(
        &mut self,
        names: (Namer<'_>, Namer<'_>, Namer<'_>),
        start_mono_ns: u64,
        emit: &mut dyn FnMut(&[MergedEvent]) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        if self.delivered.is_empty() {
            return Ok(());
        }
        self.modelled.clear();
        self.modelled.extend(
            self.delivered
                .drain(..)
                .map(|d| model_event(&d, self.policy, &self.context, names, start_mono_ns)),
        );
        emit(&self.modelled)
    }
}

/// Follows the one process traced at `paths`, handing `emit` the events as
/// they become valid, some at a time (so that it writes each piece at
/// once); returns when the process is gone.
pub fn follow(
    paths: &[PathBuf],
    policy: Policy,
    emit: &mut dyn FnMut(&[MergedEvent]) -> std::io::Result<()>,
) -> Result<(), InputError> {
    crate::base::oom::reuse_memory_between_reads();
    let mut symbolizer = Symbolizer::default();
    let mut follower = Follower::new(policy);
    let mut followed: Option<u32> = None;
    // The names of the trace's ids, from its last analysis, and what the
    // trace held then: the analysis (the costly part of a poll, growing
    // with the trace) runs again only when there is something new to name.
    let mut named: Option<(RawNames, u64, Shape)> = None;
    let mut live = load::LiveIndexes::default();
    loop {
        let mut ended = None;
        let mut pids = Vec::new();
        let mut taken_from = None;
        load::for_each_live(paths, &Selection::default(), &mut live, |path, mapped| {
            let load::Mapped { trace, pages, .. } = mapped;
            pids.push(trace.header.pid);
            if followed.is_some_and(|pid| pid != trace.header.pid) {
                return;
            }
            follower.take(&trace);
            let header = &trace.header;
            taken_from = Some((header.pid, header.start_unix_ns, header.start_mono_ns));
            // Gone means no longer running: a trace marked complete may
            // still be written to (exit handlers, other threads, after the
            // `exit` hook marked it).
            let done = !crate::analysis::process_state::still_running(header);
            let shape = Shape::of(&trace);
            ended = Some(done);
            if done || named.as_ref().is_none_or(|(_, _, then)| *then != shape) {
                let p = crate::analysis::process::analyze(
                    &path.display().to_string(),
                    trace,
                    (&Limits::default(), crate::analysis::process::Depth::Records),
                    &StreamFilter::Names,
                    &mut symbolizer,
                    &mut || pages.release(),
                );
                named = Some((p.raw_names, p.start_mono_ns, shape));
            }
        })?;
        // What was taken is not read again: a poll costs what was added.
        if let Some(identity) = taken_from {
            live.forget_read(identity, follower.positions());
        }
        if followed.is_none() {
            if pids.len() != 1 {
                return Err(InputError(format!(
                    "--follow reads one process's trace; found {}: name one trace file",
                    pids.len()
                )));
            }
            followed = pids.first().copied();
        }
        let (Some(gone), Some((names, start_mono_ns, _))) = (ended, &named) else {
            return Err(InputError("the followed trace is gone".into()));
        };
        let ended = follower
            .deliver(names, *start_mono_ns, gone, emit)
            .map_err(|e| InputError(format!("cannot write: {e}")))?;
        if ended {
            return Ok(());
        }
        if !gone {
            std::thread::sleep(POLL);
        }
    }
}

/// What a trace holds that its names come from: when none of it changed,
/// the names of the last analysis still hold.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Shape {
    objects: usize,
    conds: usize,
    sites: usize,
    threads: usize,
    named_threads: usize,
    modules: usize,
}

impl Shape {
    fn of(trace: &Trace) -> Shape {
        Shape {
            objects: trace.locks.len(),
            conds: trace.conds.len(),
            sites: trace.sites.len(),
            threads: trace.threads.len(),
            named_threads: trace.threads.iter().filter(|t| t.name.is_some()).count(),
            modules: trace.modules.len(),
        }
    }
}
