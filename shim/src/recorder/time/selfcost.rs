//! What the shim's fast path costs this thread, for overhead compensation.
//!
//! Timing every recorder call would double the cost it measures, so each
//! thread counts its calls (`prepare`, `acquired`, `released`) and times one
//! in [`SAMPLE_EVERY`] (and, early, its first and about its 17th tested
//! calls: the first is its first prepare, which goes the slow way and is
//! not kept as a sample, so a short-lived thread gets its sample from the
//! other). The shim's time so far is then estimated as calls × the
//! sampled mean, plus the slow paths, which are always timed. Only calls
//! that stayed on the fast path are sampled; a sample excludes the clock
//! read that ends it. The untimed acquisition (a few stores) is counted
//! but never timed: its test for the sampled call would cost about as much
//! as it does, and the mean of the prepares and releases stands for it.

use crate::callback::Callback;
use crate::recorder::time::clock::now_ns;
use core::cell::Cell;
use core::sync::atomic::{AtomicU64, Ordering};

/// One call in this many is timed.
pub const SAMPLE_EVERY: u64 = 1024;
/// The count of calls left (its low 32 bits, signed) at which the next is
/// timed: above zero, so that the count, which starts at zero and is moved
/// up a period by the thread's first tested call, never reaches all one
/// bits, whose complement is the access gate's initial "open" for stores
/// (`ThreadState::close_gates`).
const TIMED_AT: u64 = 16;
/// Added to the count left at each timed call besides the period: the
/// count's high 32 bits number the periods, so the gate word never comes
/// back to a value it had (a period's calls take the low bits back down by
/// as much as the timed call put them up).
const PERIOD_MARK: u64 = 1 << 32;
/// The first period, from the thread's first tested call: short, so that
/// a thread with a few dozen calls is sampled too.
const FIRST_PERIOD: u64 = 2 * TIMED_AT;

/// A fast-path call never takes this long unless the thread was preempted.
const OUTLIER_NS: u64 = 2_000;

/// Cost of reading the clock twice back to back, the floor under every
/// sample; measured once per clock (`clock_gettime`, then the TSC), as
/// u64::MAX until then.
static READ_COST_NS: [AtomicU64; 2] = [const { AtomicU64::new(u64::MAX) }; 2];

/// Called on each sample (a reader's requests are polled there); set by
/// [`init`], so the time base need not know the trace file, which sits
/// above it (as the clock is told where its rate goes).
static ON_SAMPLE: Callback = Callback::new();

/// Sets what each sample calls (`control::poll`).
pub fn init(on_sample: fn()) {
    ON_SAMPLE.set(on_sample);
}

/// Per-thread counts, in the thread's const-initialised state (all zero
/// bits).
///
/// The calls are counted down: the low 32 bits of `left`, taken as
/// signed, are how many more calls go by before the next one to time
/// (above [`TIMED_AT`]), and the count made so far is `anchor - left`. The
/// hooks' test for a call to time is then one compare, and a count one
/// subtraction; the call timed moves both words up by a period and
/// [`PERIOD_MARK`].
pub struct CallCost {
    left: Cell<u64>,
    anchor: Cell<u64>,
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
            left: Cell::new(0),
            anchor: Cell::new(0),
            sampled_ns: Cell::new(0),
            samples: Cell::new(0),
            mean_ps: Cell::new(0),
        }
    }

    /// Where the word every counted call changes lies in a `CallCost`:
    /// the access gate compares it inline (see
    /// `ThreadState::close_load_gate`).
    pub const CALLS_OFFSET: usize = core::mem::offset_of!(CallCost, left);

    /// The recorder calls this thread has made.
    #[inline(always)]
    pub fn calls(&self) -> u64 {
        self.anchor.get().wrapping_sub(self.left.get())
    }

    /// The word the access gate compares: it changes with every call
    /// counted, and never back to a value it had (see [`PERIOD_MARK`]).
    #[inline(always)]
    pub fn gate_word(&self) -> u64 {
        self.left.get()
    }

    #[cfg(test)]
    pub fn same_as(&self, other: &CallCost) -> bool {
        (self.calls(), self.sampled_ns.get(), self.samples.get())
            == (other.calls(), other.sampled_ns.get(), other.samples.get())
    }

    /// Counts one recorder call; returns its start time if it is to be
    /// timed, else 0. A timed call starts the next period.
    #[inline]
    pub fn begin(&self) -> u64 {
        let timed = self.next_is_timed();
        if timed {
            let period = if self.anchor.get() == 0 {
                FIRST_PERIOD
            } else {
                SAMPLE_EVERY
            };
            let up = PERIOD_MARK + period;
            self.left.set(self.left.get().wrapping_add(up));
            self.anchor.set(self.anchor.get().wrapping_add(up));
        }
        self.count();
        if timed {
            now_ns()
        } else {
            0
        }
    }

    /// Whether the next call is one to time (then it goes the way that
    /// times it, [`begin`](Self::begin), which every way that times calls
    /// takes): the period's calls are used up. Calls that are counted but
    /// never tested (an untimed acquisition, which only counts itself) can
    /// only take the count below [`TIMED_AT`], so the next call that is
    /// tested is timed, whatever the thread's loop.
    #[inline(always)]
    pub fn next_is_timed(&self) -> bool {
        self.left.get() as u32 as i32 <= TIMED_AT as i32
    }

    /// Counts a call that is not timed.
    #[inline(always)]
    pub fn count(&self) {
        self.left.set(self.left.get().wrapping_sub(1));
    }

    /// Counts two calls that are not timed, in one store (a look and the
    /// acquisition after it: the first was not the one to time, see
    /// [`next_is_timed`](Self::next_is_timed), and the second never is).
    #[inline(always)]
    pub fn count_two(&self) {
        self.left.set(self.left.get().wrapping_sub(2));
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
        ON_SAMPLE.call();
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
        self.calls().saturating_mul(self.mean_ps.get()) / 1000
    }
}

fn read_cost_ns() -> u64 {
    let cost = &READ_COST_NS[usize::from(crate::recorder::time::clock::tsc_khz() != 0)];
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

#[cfg(test)]
mod tests {
    use super::*;

    /// How many of `periods` × [`SAMPLE_EVERY`] calls are chosen for
    /// timing when a thread's loop makes the calls `pattern` says (true:
    /// a prepare or release, which may be timed; false: an untimed
    /// acquisition, which only counts itself); every call counted, and the
    /// gate word never all ones.
    fn chosen(pattern: &[bool], periods: u64) -> u64 {
        let cost = CallCost::new();
        let mut chosen = 0;
        let mut seen = std::collections::HashSet::new();
        for &may_time in pattern
            .iter()
            .cycle()
            .take((periods * SAMPLE_EVERY) as usize)
        {
            if may_time {
                chosen += u64::from(cost.begin() != 0);
            } else {
                cost.count();
            }
            // Its complement would close the access gate's store side
            // for a thread that never closed it (see `TIMED_AT`); a value
            // seen before would keep a gate closed there shut.
            assert_ne!(cost.gate_word(), u64::MAX, "the gate word at all ones");
            assert!(seen.insert(cost.gate_word()), "the gate word repeats");
        }
        assert_eq!(cost.calls(), periods * SAMPLE_EVERY, "every call counted");
        chosen
    }

    /// A thread's first tested call is its first prepare, which goes the
    /// slow way and is not kept as a sample: a second comes early.
    #[test]
    fn a_short_lived_thread_is_timed_twice_early() {
        let cost = CallCost::new();
        let timed: Vec<usize> = (0..40).filter(|_| cost.begin() != 0).collect();
        assert_eq!(timed.len(), 2, "timed at calls {timed:?}");
        assert_eq!(timed[0], 0, "the first call");
    }

    #[test]
    fn a_thread_is_sampled_whatever_its_loop() {
        // Semaphore waits only (a prepare and an acquisition), a mutex pair
        // (prepare, acquisition, release), and two pairs and a wait.
        let patterns: [&[bool]; 3] = [
            &[true, false],
            &[true, false, true],
            &[true, false, true, true, false, true, true, false],
        ];
        for pattern in patterns {
            let n = chosen(pattern, 8);
            // One a period, and the thread's first and about 17th.
            assert!(
                (8..=10).contains(&n),
                "{n} timed in 8 periods of {pattern:?}"
            );
        }
    }
}
