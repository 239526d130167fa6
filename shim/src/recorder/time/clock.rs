//! The trace's time base: CLOCK_MONOTONIC nanoseconds, read through the
//! invariant TSC once it is calibrated.
//!
//! `rdtsc` costs about 12 ns here against 21 ns for `clock_gettime`, and full
//! tracing reads the clock twice per lock/unlock pair. Calibration costs
//! nothing up front: until [`CALIBRATION_NS`] have passed since start, the
//! clock is read through the vDSO and the start pair (TSC, ns) is kept; the
//! first read after that computes the tick rate from the two pairs, with no
//! spinning, and every later read converts ticks. The calibration pair is
//! the conversion's anchor, so time stays continuous across the switch.
//!
//! The TSC is used only when the CPU says it is invariant (CPUID
//! 0x8000_0007 EDX bit 8) *and* the kernel itself keeps time with it
//! (clocksource `tsc`): a TSC the kernel distrusts is not synchronised
//! across CPUs. `LOCKSUIT_CLOCK=monotonic` turns it off.

use core::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};

/// Time between the start pair and the calibration pair. Reading both
/// clocks back to back jitters by ~20 ns, so the rate error is ~2e-6.
const CALIBRATION_NS: u64 = 10_000_000;

const MONOTONIC: u8 = 0;
const MEASURING: u8 = 1;
const CALIBRATING: u8 = 2;
const TSC: u8 = 3;
/// `CLOCK_MONOTONIC_COARSE`, for good: a thread runs where `rdtsc` faults
/// (seccomp strict mode, `PR_SET_TSC`), and the vDSO's precise clocks
/// read the TSC too. The coarse clock reads only the kernel's shared page.
const COARSE: u8 = 4;

static STATE: AtomicU8 = AtomicU8::new(MONOTONIC);
static START_TSC: AtomicU64 = AtomicU64::new(0);
static START_NS: AtomicU64 = AtomicU64::new(0);
// Written once before STATE becomes TSC (release), read after (acquire).
static ANCHOR_TSC: AtomicU64 = AtomicU64::new(0);
static ANCHOR_NS: AtomicU64 = AtomicU64::new(0);
/// Nanoseconds per tick, times 2^32.
static NS_PER_TICK_Q32: AtomicU64 = AtomicU64::new(0);
static TSC_KHZ: AtomicU64 = AtomicU64::new(0);
/// Told the rate once it is calibrated (the trace header keeps it); set
/// by [`init`], so the clock need not know where the rate is written.
static ON_CALIBRATED: AtomicUsize = AtomicUsize::new(0);

/// Nanoseconds on `clock` (through the vDSO: no system call).
#[inline]
pub fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out-pointer.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Monotonic nanoseconds, the time base of every timestamp and duration in
/// the trace.
#[inline]
pub fn now_ns() -> u64 {
    match STATE.load(Ordering::Acquire) {
        TSC => tsc_to_ns(read_tsc()),
        MEASURING => measuring_now_ns(),
        COARSE => clock_ns(libc::CLOCK_MONOTONIC_COARSE),
        _ => clock_ns(libc::CLOCK_MONOTONIC),
    }
}

/// A timestamp for timing a call that most often does not block: raw TSC
/// ticks once the TSC is calibrated (no conversion until the call turns
/// out to be worth recording), nanoseconds before that or without it.
#[derive(Clone, Copy)]
pub struct Stamp {
    raw: u64,
    tsc: bool,
}

impl Stamp {
    /// The clock's start: zero bits, for per-thread state that starts so.
    pub const ZERO: Stamp = Stamp { raw: 0, tsc: false };

    /// A stamp at `ns` monotonic nanoseconds.
    #[cfg(test)]
    pub fn from_ns(ns: u64) -> Stamp {
        Stamp {
            raw: ns,
            tsc: false,
        }
    }

    #[inline(always)]
    pub fn now() -> Stamp {
        if STATE.load(Ordering::Acquire) == TSC {
            Stamp {
                raw: read_tsc(),
                tsc: true,
            }
        } else {
            Stamp {
                raw: now_ns(),
                tsc: false,
            }
        }
    }

    /// Monotonic nanoseconds, as every other timestamp in the trace.
    pub fn ns(self) -> u64 {
        if self.tsc {
            tsc_to_ns(self.raw)
        } else {
            self.raw
        }
    }

    /// Whether at least `min_ns` passed from `self` to `later`.
    #[inline(always)]
    pub fn at_least(self, later: Stamp, min_ns: u64) -> bool {
        if self.tsc && later.tsc {
            let ticks = later.raw.saturating_sub(self.raw);
            let ns = (ticks as u128 * NS_PER_TICK_Q32.load(Ordering::Relaxed) as u128) >> 32;
            ns as u64 >= min_ns
        } else {
            later.ns().saturating_sub(self.ns()) >= min_ns
        }
    }
}

/// From now on, the coarse clock (see [`COARSE`]): its resolution is the
/// kernel's tick (1 to 10 ms). Returns the clock before, for [`restore`]
/// if the call that would have lost the TSC failed.
pub fn use_coarse() -> u8 {
    STATE.swap(COARSE, Ordering::SeqCst)
}

/// Back to the clock `before` [`use_coarse`] (unless that was coarse too).
pub fn restore(before: u8) {
    if before != COARSE {
        // A calibration in flight then finishes on its next read.
        let before = if before == CALIBRATING {
            MEASURING
        } else {
            before
        };
        let _ = STATE.compare_exchange(COARSE, before, Ordering::SeqCst, Ordering::Relaxed);
    }
}

/// Decides the clock for this process (called once at start; a fork child
/// keeps its parent's calibration, as the TSC is the same). `on_calibrated`
/// is told the TSC rate in kHz once it is known.
pub fn init(allow_tsc: bool, on_calibrated: fn(u32)) {
    ON_CALIBRATED.store(on_calibrated as usize, Ordering::Relaxed);
    if STATE.load(Ordering::Relaxed) != MONOTONIC || !allow_tsc || !tsc_usable() {
        return;
    }
    let Some((tsc, ns)) = clock_pair() else {
        return;
    };
    START_NS.store(ns, Ordering::Relaxed);
    START_TSC.store(tsc, Ordering::Relaxed);
    STATE.store(MEASURING, Ordering::Release);
}

/// The calibrated TSC rate in kHz, or 0 while timestamps come from
/// `clock_gettime`.
pub fn tsc_khz() -> u32 {
    if STATE.load(Ordering::Acquire) == TSC {
        TSC_KHZ.load(Ordering::Relaxed) as u32
    } else {
        0
    }
}

#[inline]
fn tsc_to_ns(tsc: u64) -> u64 {
    let anchor_tsc = ANCHOR_TSC.load(Ordering::Relaxed);
    // Another CPU's TSC may read a few ticks behind the anchor.
    let ticks = tsc.saturating_sub(anchor_tsc);
    let scaled = (ticks as u128 * NS_PER_TICK_Q32.load(Ordering::Relaxed) as u128) >> 32;
    ANCHOR_NS.load(Ordering::Relaxed) + scaled as u64
}

/// Most ticks a (TSC, ns) pair may span to be taken as simultaneous:
/// about 20 µs at 2.5 GHz. A thread preempted between the two reads would
/// otherwise skew the rate by the length of the preemption over 10 ms.
const PAIR_MAX_TICKS: u64 = 50_000;

/// Reads the TSC on both sides of `clock_gettime` and keeps the middle, as
/// long as the two reads are close; None if no try of a few succeeds.
fn clock_pair() -> Option<(u64, u64)> {
    for _ in 0..8 {
        let before = read_tsc();
        let ns = clock_ns(libc::CLOCK_MONOTONIC);
        let after = read_tsc();
        if after >= before && after - before <= PAIR_MAX_TICKS {
            return Some((before + (after - before) / 2, ns));
        }
    }
    None
}

#[cold]
fn measuring_now_ns() -> u64 {
    let ns = clock_ns(libc::CLOCK_MONOTONIC);
    if ns.saturating_sub(START_NS.load(Ordering::Relaxed)) < CALIBRATION_NS {
        return ns;
    }
    let Some((tsc, ns)) = clock_pair() else {
        return ns; // try again on a later read
    };
    let start_ns = START_NS.load(Ordering::Relaxed);
    let start_tsc = START_TSC.load(Ordering::Relaxed);
    if ns.saturating_sub(start_ns) < CALIBRATION_NS
        || STATE
            .compare_exchange(MEASURING, CALIBRATING, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
    {
        return ns;
    }
    let elapsed_ns = ns - start_ns;
    let elapsed_ticks = tsc.saturating_sub(start_tsc);
    let khz = if elapsed_ticks == 0 {
        0
    } else {
        elapsed_ticks as u128 * 1_000_000 / elapsed_ns as u128
    };
    // A rate outside 100 MHz..20 GHz means the TSC is not what it claimed.
    if !(100_000..=20_000_000).contains(&khz) {
        let _ =
            STATE.compare_exchange(CALIBRATING, MONOTONIC, Ordering::Release, Ordering::Relaxed);
        return ns;
    }
    let q32 = ((elapsed_ns as u128) << 32) / elapsed_ticks as u128;
    ANCHOR_TSC.store(tsc, Ordering::Relaxed);
    ANCHOR_NS.store(ns, Ordering::Relaxed);
    NS_PER_TICK_Q32.store(q32 as u64, Ordering::Relaxed);
    TSC_KHZ.store(khz as u64, Ordering::Relaxed);
    // Not over COARSE, set meanwhile by a thread about to lose the TSC.
    if STATE
        .compare_exchange(CALIBRATING, TSC, Ordering::Release, Ordering::Relaxed)
        .is_err()
    {
        return ns;
    }
    let told = ON_CALIBRATED.load(Ordering::Relaxed);
    if told != 0 {
        // SAFETY: only ever stored from an `fn(u32)` in `init`.
        let told = unsafe { core::mem::transmute::<usize, fn(u32)>(told) };
        told(khz as u32);
    }
    ns
}

#[cfg(target_arch = "x86_64")]
#[inline]
fn read_tsc() -> u64 {
    // SAFETY: rdtsc has no preconditions on x86_64.
    unsafe { core::arch::x86_64::_rdtsc() }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline]
fn read_tsc() -> u64 {
    0
}

#[cfg(target_arch = "x86_64")]
fn tsc_usable() -> bool {
    use core::arch::x86_64::__cpuid;
    // Leaf 0x8000_0000 says which extended leaves exist before 0x8000_0007
    // is asked for (cpuid itself is safe on every x86_64 CPU).
    let invariant =
        __cpuid(0x8000_0000).eax >= 0x8000_0007 && __cpuid(0x8000_0007).edx & (1 << 8) != 0;
    invariant && kernel_clocksource_is_tsc()
}

#[cfg(not(target_arch = "x86_64"))]
fn tsc_usable() -> bool {
    false
}

/// Reads the kernel's current clocksource with plain system calls (this
/// runs at start-up, possibly before the allocator may be used).
fn kernel_clocksource_is_tsc() -> bool {
    let path = c"/sys/devices/system/clocksource/clocksource0/current_clocksource";
    let Ok(fd) = crate::sys::open(path, libc::O_RDONLY | libc::O_CLOEXEC, 0) else {
        return false;
    };
    let mut buf = [0u8; 16];
    let n = crate::sys::read(fd, &mut buf).unwrap_or(0);
    crate::sys::close(fd);
    &buf[..n] == b"tsc\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversion_is_linear_from_the_anchor() {
        ANCHOR_TSC.store(1_000, Ordering::Relaxed);
        ANCHOR_NS.store(5_000, Ordering::Relaxed);
        // 0.5 ns per tick (a 2 GHz TSC).
        NS_PER_TICK_Q32.store(1 << 31, Ordering::Relaxed);
        assert_eq!(tsc_to_ns(1_000), 5_000);
        assert_eq!(tsc_to_ns(3_000), 6_000);
        // A TSC read behind the anchor never goes back in time.
        assert_eq!(tsc_to_ns(900), 5_000);
    }
}
