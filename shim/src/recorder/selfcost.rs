//! What the shim's fast path costs this thread, for overhead compensation.
//!
//! Timing every recorder call would double the cost it measures, so each
//! thread counts its calls (`prepare`, `acquired`, `released`) and times one
//! in [`SAMPLE_EVERY`], the 16th first so that short-lived threads get a
//! sample too. The shim's time so far is then estimated as calls × the
//! sampled mean, plus the slow paths, which are always timed. Only calls
//! that stayed on the fast path are sampled; a sample excludes the clock
//! read that ends it. The untimed acquisition (a few stores) is counted
//! but never timed: its test for the sampled call would cost about as much
//! as it does, and the mean of the prepares and releases stands for it.

use super::clock::now_ns;
use core::cell::Cell;
use core::sync::atomic::{AtomicU64, Ordering};

/// One call in this many is timed (a power of two).
pub const SAMPLE_EVERY: u64 = 1024;
/// Which call of each period is timed: early, so a thread with only a few
/// dozen lock operations is sampled too.
const SAMPLED_PHASE: u64 = 16;

/// A fast-path call never takes this long unless the thread was preempted.
const OUTLIER_NS: u64 = 2_000;

/// Cost of reading the clock twice back to back, the floor under every
/// sample; measured once per clock (`clock_gettime`, then the TSC), as
/// u64::MAX until then.
static READ_COST_NS: [AtomicU64; 2] = [const { AtomicU64::new(u64::MAX) }; 2];

/// Per-thread counts, in the thread's const-initialised state.
pub struct CallCost {
    calls: Cell<u64>,
    sampled_ns: Cell<u64>,
    samples: Cell<u64>,
    /// The mean so far in picoseconds, kept up to date by each sample so
    /// that estimates need no division (full tracing asks twice per pair).
    mean_ps: Cell<u64>,
}

impl Default for CallCost {
    fn default() -> Self {
        Self::new()
    }
}

impl CallCost {
    pub const fn new() -> Self {
        Self {
            calls: Cell::new(0),
            sampled_ns: Cell::new(0),
            samples: Cell::new(0),
            mean_ps: Cell::new(0),
        }
    }

    /// Where the call count lies in a `CallCost`: the access gate compares
    /// it inline (see `ThreadState::close_load_gate`).
    pub const CALLS_OFFSET: usize = core::mem::offset_of!(CallCost, calls);

    /// The recorder calls this thread has made.
    #[inline(always)]
    pub fn calls(&self) -> u64 {
        self.calls.get()
    }

    #[cfg(test)]
    pub fn same_as(&self, other: &CallCost) -> bool {
        (self.calls.get(), self.sampled_ns.get(), self.samples.get())
            == (
                other.calls.get(),
                other.sampled_ns.get(),
                other.samples.get(),
            )
    }

    /// Counts one recorder call; returns its start time if it is to be
    /// timed, else 0.
    #[inline]
    pub fn begin(&self) -> u64 {
        let timed = self.next_is_timed();
        self.count();
        if timed {
            now_ns()
        } else {
            0
        }
    }

    /// Whether the next call is the one to time (then it goes the way
    /// that times it, [`begin`](Self::begin)).
    #[inline(always)]
    pub fn next_is_timed(&self) -> bool {
        (self.calls.get() + 1) & (SAMPLE_EVERY - 1) == SAMPLED_PHASE
    }

    /// Counts a call that is not timed.
    #[inline(always)]
    pub fn count(&self) {
        self.calls.set(self.calls.get() + 1);
    }

    /// Ends a call that `begin` chose to time (`started` != 0).
    #[inline]
    pub fn end(&self, started: u64) {
        if started != 0 {
            self.record(started);
        }
    }

    #[cold]
    fn record(&self, started: u64) {
        let elapsed = now_ns().saturating_sub(started);
        // One fast-path call in 1024 passes here: a reader's request to
        // switch the recording mode is seen within that many.
        super::control::poll();
        if elapsed > OUTLIER_NS {
            // Preempted or interrupted mid-call: one such sample would
            // inflate the mean a million calls are multiplied by.
            return;
        }
        self.sampled_ns
            .set(self.sampled_ns.get() + elapsed.saturating_sub(read_cost_ns()));
        self.samples.set(self.samples.get() + 1);
        self.mean_ps
            .set(self.sampled_ns.get().saturating_mul(1000) / self.samples.get());
    }

    /// Mean cost of one call in picoseconds, 0 before the first sample.
    pub fn mean_ps(&self) -> u64 {
        self.mean_ps.get()
    }

    /// The fast path's estimated time on this thread so far: calls × the
    /// sampled mean.
    #[inline]
    pub fn estimated_ns(&self) -> u64 {
        // A constant divisor: a multiply and a shift.
        self.calls.get().saturating_mul(self.mean_ps.get()) / 1000
    }
}

fn read_cost_ns() -> u64 {
    let cost = &READ_COST_NS[usize::from(super::clock::tsc_khz() != 0)];
    let known = cost.load(Ordering::Relaxed);
    if known != u64::MAX {
        return known;
    }
    // The cheapest of a few back-to-back pairs: what a sample costs when
    // the call between its two reads does nothing.
    let mut least = u64::MAX;
    for _ in 0..8 {
        let a = now_ns();
        least = least.min(now_ns().saturating_sub(a));
    }
    cost.store(least, Ordering::Relaxed);
    least
}
