//! `LOCKSUIT_*` settings, read once at initialisation with `getenv` (no
//! allocation). A malformed value gets one warning and the default.

use crate::callback::Callback;
use crate::diag::{warn_once, Warning};
use core::ffi::CStr;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

/// Default size cap of one trace, in MiB.
pub const DEFAULT_MAX_MB: u32 = 256;
/// Largest accepted cap, in MiB (the block index is a u32 of 16 KiB blocks).
pub const LIMIT_MAX_MB: u32 = 65536;

static MAX_MB: AtomicU32 = AtomicU32::new(DEFAULT_MAX_MB);
static HOLD_SAMPLE: AtomicU32 = AtomicU32::new(0);
static EVENTS_ALL: AtomicBool = AtomicBool::new(false);
static FLIGHT: AtomicBool = AtomicBool::new(false);
/// Default of `LOCKSUIT_BLOCK_MIN_US`.
pub const DEFAULT_BLOCK_MIN_US: u32 = 50;
static BLOCK_MIN_US: AtomicU32 = AtomicU32::new(DEFAULT_BLOCK_MIN_US);
static BLOCK_MIN_NS: AtomicU64 = AtomicU64::new(DEFAULT_BLOCK_MIN_US as u64 * 1000);
/// `LOCKSUIT_BLOCK_MIN_US=off`: blocking calls beyond the lock API are not
/// timed at all (their hooks cost one flag read), and joins and barrier
/// waits are not written as events either.
static CALLS_TIMED: AtomicBool = AtomicBool::new(true);
/// `LOCKSUIT_SWITCHES=1`: record the kernel's context switches too.
static SWITCHES: AtomicBool = AtomicBool::new(false);
/// `LOCKSUIT_DATA_SAMPLE`: see [`data_sample_every`].
static DATA_SAMPLE_EVERY: AtomicU32 = AtomicU32::new(DATA_SAMPLE_DEFAULT);
static TSC_ALLOWED: AtomicBool = AtomicBool::new(true);
/// Neither full tracing nor hold sampling: an uncontended engagement and its
/// release read no clock and write no event (one flag for the hot path).
static UNTIMED_UNCONTENDED: AtomicBool = AtomicBool::new(true);
/// What [`set_events_all`] calls once [`untimed_uncontended`] or full
/// tracing changed: the mutex hooks' handlers for untimed engagements and
/// for full tracing do not test the flags, and are swapped for others
/// instead.
static ON_TIMING_CHANGED: Callback = Callback::new();

/// Sets what [`set_events_all`] calls once [`untimed_uncontended`] or full
/// tracing changed (sequentially consistent with the flags' swaps: see
/// [`Callback::set`]).
pub fn on_timing_changed(changed: fn()) {
    ON_TIMING_CHANGED.set(changed);
}
/// `LOCKSUIT_MODE=lean`: see [`lean`].
static LEAN: AtomicBool = AtomicBool::new(false);

/// `LOCKSUIT_MODE=lean`, the mode for always-on profiling: a plain mutex's
/// engagement is counted per lock and line and leaves its holder in the
/// lock's slot, nothing more (see `recorder/api/lean.rs`); no full tracing,
/// no hold sampling.
#[inline]
pub fn lean() -> bool {
    LEAN.load(Ordering::Relaxed)
}

/// `LOCKSUIT_CLOCK=monotonic` keeps every timestamp on `clock_gettime`;
/// the default `auto` reads a calibrated invariant TSC where it is safe.
pub fn tsc_allowed() -> bool {
    TSC_ALLOWED.load(Ordering::Relaxed)
}

/// `LOCKSUIT_EVENTS=all`: write every acquisition and release as an event
/// (each then reads the clock), not only the contended ones.
#[inline]
pub fn events_all() -> bool {
    EVENTS_ALL.load(Ordering::Relaxed)
}

/// Switches full tracing on or off while the process runs (a reader's
/// request, see `recorder::trace::control`); the hot path reads the same flags
/// it always does.
pub fn set_events_all(on: bool) {
    if on && lean() {
        // A lean trace has no held entries to write releases from.
        warn_once(
            Warning::BadSetting,
            b"full tracing was asked for a lean recording (LOCKSUIT_MODE=lean); it stays lean",
        );
        return;
    }
    let was_on = EVENTS_ALL.swap(on, Ordering::SeqCst);
    let untimed = !on && hold_sample_period() == 0;
    // Both swapped before the call, whichever changed: with hold sampling
    // on, full tracing switches the handlers though engagements stay timed.
    let untimed_changed = UNTIMED_UNCONTENDED.swap(untimed, Ordering::SeqCst) != untimed;
    if was_on != on || untimed_changed {
        ON_TIMING_CHANGED.call();
    }
}

/// `LOCKSUIT_FLIGHT=1`: when the trace is full, reuse each thread's oldest
/// event blocks instead of dropping new events (keep the most recent).
pub fn flight_recorder() -> bool {
    FLIGHT.load(Ordering::Relaxed)
}

/// `LOCKSUIT_BLOCK_MIN_US`: a blocking call beyond the lock API (a sleep,
/// a poll, I/O) is recorded only if it blocked at least this long, so fast
/// I/O costs a look at whether the thread was switched out (two clock
/// reads on threads whose calls keep blocking) and nothing else.
/// 0 when they are not timed at all.
pub fn block_min_us() -> u32 {
    if calls_timed() {
        BLOCK_MIN_US.load(Ordering::Relaxed)
    } else {
        0
    }
}

/// Whether blocking calls beyond the lock API are timed (and recorded).
#[inline]
pub fn calls_timed() -> bool {
    CALLS_TIMED.load(Ordering::Relaxed)
}

#[inline]
pub fn block_min_ns() -> u64 {
    BLOCK_MIN_NS.load(Ordering::Relaxed)
}

/// `LOCKSUIT_SWITCHES=1`: each thread also records the kernel's context
/// switches (preemption, page faults, system calls made around libc).
pub fn switches() -> bool {
    SWITCHES.load(Ordering::Relaxed)
}

pub fn max_mb() -> u32 {
    MAX_MB.load(Ordering::Relaxed)
}

/// Programs built with `locksuit cc`: each line's engagements of a lock
/// on a thread have their accesses recorded for the first
/// [`DATA_SAMPLE_FIRST`], then one in this many (1: all of them, and all
/// their accesses; above 1, the first [`DATA_SAMPLE_ACCESSES`] of each).
pub fn data_sample_every() -> u32 {
    DATA_SAMPLE_EVERY.load(Ordering::Relaxed)
}

/// See [`data_sample_every`].
pub const DATA_SAMPLE_FIRST: u32 = 4;

/// The default of [`data_sample_every`]: recording every engagement costs
/// a program that holds locks through most of its work (SQLite) tens of
/// times its run; one in 64 keeps within 3x (docs/performance.md).
pub const DATA_SAMPLE_DEFAULT: u32 = 64;
// The warning for a malformed LOCKSUIT_DATA_SAMPLE names it.
const _: () = assert!(DATA_SAMPLE_DEFAULT == 64);

/// Sampling (`LOCKSUIT_DATA_SAMPLE` above 1): of each engagement recorded,
/// its first this many accesses (a long one, such as a table scan under a
/// database's lock, would otherwise cost as much as all the rest).
pub const DATA_SAMPLE_ACCESSES: u32 = 4096;

/// Measure the hold time of one uncontended engagement in this many (0 =
/// never; contended engagements are always timed because their clock read
/// is already paid for).
pub fn hold_sample_period() -> u32 {
    HOLD_SAMPLE.load(Ordering::Relaxed)
}

/// True when uncontended engagements are neither traced nor sampled.
#[inline]
pub fn untimed_uncontended() -> bool {
    UNTIMED_UNCONTENDED.load(Ordering::Relaxed)
}

pub fn getenv(name: &CStr) -> Option<&'static [u8]> {
    // SAFETY: getenv with a NUL-terminated name; the result, if non-null, is a
    // NUL-terminated string that lives as long as the environment entry.
    unsafe {
        let p = libc::getenv(name.as_ptr());
        (!p.is_null()).then(|| CStr::from_ptr(p).to_bytes())
    }
}

fn parse_u32(bytes: &[u8]) -> Option<u32> {
    crate::text::decimal(bytes, 9).map(|v| v as u32)
}

pub fn load() {
    // First, so that a bad setting below is said, or not, as asked.
    crate::diag::set_quiet(getenv(c"LOCKSUIT_QUIET").is_some_and(|v| v == b"1"));
    match getenv(c"LOCKSUIT_EVENTS") {
        None | Some(b"contended") => {}
        Some(b"all") => EVENTS_ALL.store(true, Ordering::Relaxed),
        Some(_) => warn_once(
            Warning::BadSetting,
            b"LOCKSUIT_EVENTS must be 'contended' or 'all'; using 'contended'",
        ),
    }
    match getenv(c"LOCKSUIT_FLIGHT") {
        None | Some(b"0") => {}
        Some(b"1") => FLIGHT.store(true, Ordering::Relaxed),
        Some(_) => warn_once(
            Warning::BadSetting,
            b"LOCKSUIT_FLIGHT must be 0 or 1; using 0 (drop new events when the trace is full)",
        ),
    }
    match getenv(c"LOCKSUIT_CLOCK") {
        None | Some(b"auto") => {}
        Some(b"monotonic") => TSC_ALLOWED.store(false, Ordering::Relaxed),
        Some(_) => warn_once(
            Warning::BadSetting,
            b"LOCKSUIT_CLOCK must be 'auto' or 'monotonic'; using 'auto'",
        ),
    }
    if let Some(v) = getenv(c"LOCKSUIT_MAX_MB") {
        match parse_u32(v) {
            Some(mb) if (1..=LIMIT_MAX_MB).contains(&mb) => MAX_MB.store(mb, Ordering::Relaxed),
            _ => warn_once(
                Warning::BadSetting,
                b"LOCKSUIT_MAX_MB must be a whole number of MiB from 1 to 65536; using the default 256",
            ),
        }
    }
    if let Some(v) = getenv(c"LOCKSUIT_HOLD_SAMPLE") {
        match parse_u32(v) {
            Some(n) => HOLD_SAMPLE.store(n, Ordering::Relaxed),
            _ => warn_once(
                Warning::BadSetting,
                b"LOCKSUIT_HOLD_SAMPLE must be a whole number (0 = time holds only when contended); using 0",
            ),
        }
    }
    if let Some(v) = getenv(c"LOCKSUIT_BLOCK_MIN_US") {
        match (v, parse_u32(v)) {
            (b"off", _) => CALLS_TIMED.store(false, Ordering::Relaxed),
            (_, Some(us)) => {
                BLOCK_MIN_US.store(us, Ordering::Relaxed);
                BLOCK_MIN_NS.store(u64::from(us) * 1000, Ordering::Relaxed);
            }
            _ => warn_once(
                Warning::BadSetting,
                b"LOCKSUIT_BLOCK_MIN_US must be a whole number of microseconds or 'off'; using the default 50",
            ),
        }
    }
    if let Some(v) = getenv(c"LOCKSUIT_DATA_SAMPLE") {
        match (v, parse_u32(v)) {
            (b"", _) => {} // set but empty: the default
            (b"all", _) => DATA_SAMPLE_EVERY.store(1, Ordering::Relaxed),
            (_, Some(n)) if n >= 1 => DATA_SAMPLE_EVERY.store(n, Ordering::Relaxed),
            _ => warn_once(
                Warning::BadSetting,
                b"LOCKSUIT_DATA_SAMPLE must be 'all' or a whole number from 1 (one engagement in N); using the default 64",
            ),
        }
    }
    match getenv(c"LOCKSUIT_SWITCHES") {
        None | Some(b"0") => {}
        Some(b"1") => SWITCHES.store(true, Ordering::Relaxed),
        Some(_) => warn_once(
            Warning::BadSetting,
            b"LOCKSUIT_SWITCHES must be 0 or 1; using 0",
        ),
    }
    match getenv(c"LOCKSUIT_MODE") {
        None | Some(b"full") => {}
        Some(b"lean") => {
            LEAN.store(true, Ordering::Relaxed);
            if events_all() || hold_sample_period() != 0 {
                warn_once(
                    Warning::BadSetting,
                    b"LOCKSUIT_MODE=lean times no uncontended hold; LOCKSUIT_EVENTS=all and LOCKSUIT_HOLD_SAMPLE are ignored",
                );
                EVENTS_ALL.store(false, Ordering::Relaxed);
                HOLD_SAMPLE.store(0, Ordering::Relaxed);
            }
        }
        Some(_) => warn_once(
            Warning::BadSetting,
            b"LOCKSUIT_MODE must be 'full' or 'lean'; using 'full'",
        ),
    }
    UNTIMED_UNCONTENDED.store(
        !events_all() && hold_sample_period() == 0,
        Ordering::Relaxed,
    );
}

/// True under setuid/setgid/capability execution, where the shim must not
/// create files on the user's behalf.
pub fn secure_execution() -> bool {
    // SAFETY: getauxval is always safe to call.
    unsafe { libc::getauxval(libc::AT_SECURE) != 0 }
}

#[cfg(test)]
mod tests {
    use super::parse_u32;

    #[test]
    fn parses_only_plain_numbers() {
        assert_eq!(parse_u32(b"64"), Some(64));
        assert_eq!(parse_u32(b""), None);
        assert_eq!(parse_u32(b"-1"), None);
        assert_eq!(parse_u32(b"12MB"), None);
        assert_eq!(parse_u32(b"9999999999"), None);
    }
}
