//! Confinement: a program that puts itself under seccomp (a strict mode,
//! or a filter that allows only the system calls it makes itself) must not
//! be killed by the shim's. From the moment a confinement takes effect the
//! shim makes no system call of its own: [`OwnCall::begin`] refuses them,
//! the callers see an error (as if the kernel had refused) and record what
//! they can into memory already mapped, counting the rest.
//!
//! Installing one is a protocol, driven by the hooks that see it
//! (`prctl(PR_SET_SECCOMP)`, `syscall(SYS_seccomp)`), because a filter
//! installed with `SECCOMP_FILTER_FLAG_TSYNC` confines every thread at
//! once, even one that is inside the shim between deciding to make a call
//! and making it: [`close_for_install`] refuses new own calls and waits for
//! those under way to return; the real install follows; [`install_ended`]
//! keeps them refused if it took effect, or reopens if it failed.
//!
//! The state is process-wide even where the kernel's is per thread (a
//! filter without TSYNC, strict mode): a thread the shim would let make a
//! call might be one the filter covers, and which threads it covers cannot
//! be read without a system call.

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Own system calls are refused: a confinement took effect (or was found
/// at start-up).
const CONFINED: u32 = 1 << 0;
/// An install is under way: own calls are refused until it ends.
const CLOSING: u32 = 1 << 1;
/// Some thread runs in strict mode or with its TSC disabled: `rdtsc`, and
/// the vDSO clocks that use it, fault there.
const NO_TSC: u32 = 1 << 2;
/// No-new-privs is set (found at start-up, or set since through `prctl`):
/// a filter installed now is a sandbox's, and an exec'd program inherits
/// it as one (see [`inherited_at_start`]).
const NO_NEW_PRIVS: u32 = 1 << 3;
const PR_SET_NO_NEW_PRIVS: i32 = 38;

static STATE: AtomicU32 = AtomicU32::new(0);
/// Own calls begun and not yet returned.
static IN_FLIGHT: AtomicU32 = AtomicU32::new(0);
/// Own calls refused.
static REFUSED: AtomicU64 = AtomicU64::new(0);

/// Spins [`close_for_install`] makes at most while own calls are under
/// way (a few hundred milliseconds at most; none of them blocks for long).
const DRAIN_SPINS: u32 = 5_000_000;

/// Proof that an own system call may be made now; while it lives, an
/// install waits for it.
pub struct OwnCall(());

impl OwnCall {
    /// `None` if own system calls are refused (counted).
    #[inline]
    pub fn begin() -> Option<OwnCall> {
        // SeqCst on both sides: either the installer sees this call under
        // way, or this call sees the installer's CLOSING.
        IN_FLIGHT.fetch_add(1, Ordering::SeqCst);
        if STATE.load(Ordering::SeqCst) & (CONFINED | CLOSING) != 0 {
            IN_FLIGHT.fetch_sub(1, Ordering::Release);
            REFUSED.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        Some(OwnCall(()))
    }
}

impl Drop for OwnCall {
    #[inline]
    fn drop(&mut self) {
        IN_FLIGHT.fetch_sub(1, Ordering::Release);
    }
}

/// Whether own system calls may be made now (not confined, no install
/// under way). A hint: [`OwnCall::begin`] is what decides.
#[inline]
pub fn own_calls_allowed() -> bool {
    STATE.load(Ordering::Relaxed) & (CONFINED | CLOSING) == 0
}

/// Whether own system calls are refused for good (not only during an
/// install).
#[inline]
pub fn confined() -> bool {
    STATE.load(Ordering::Relaxed) & CONFINED != 0
}

/// Whether some thread may fault on `rdtsc`.
#[inline]
pub fn no_tsc() -> bool {
    STATE.load(Ordering::Relaxed) & NO_TSC != 0
}

/// How many own system calls were refused so far.
pub fn refused() -> u64 {
    REFUSED.load(Ordering::Relaxed)
}

/// An install is about to be made: refuses new own calls and waits (without
/// a system call) for those under way. Returns whether they all returned.
pub fn close_for_install() -> bool {
    STATE.fetch_or(CLOSING, Ordering::SeqCst);
    for _ in 0..DRAIN_SPINS {
        if IN_FLIGHT.load(Ordering::SeqCst) == 0 {
            return true;
        }
        core::hint::spin_loop();
    }
    false
}

/// The install ended: `took_effect`, own calls stay refused (and with
/// `no_tsc`, the TSC is off limits too); else they are allowed again,
/// unless an earlier confinement holds.
pub fn install_ended(took_effect: bool, no_tsc: bool) {
    if took_effect {
        let tsc = if no_tsc { NO_TSC } else { 0 };
        STATE.fetch_or(CONFINED | tsc, Ordering::SeqCst);
    }
    STATE.fetch_and(!CLOSING, Ordering::SeqCst);
}

/// The TSC was turned off for a thread (`PR_SET_TSC`) without a filter.
pub fn tsc_disabled() {
    STATE.fetch_or(NO_TSC, Ordering::SeqCst);
}

/// Found confined at start-up (see [`inherited_at_start`]).
pub fn inherited() {
    STATE.fetch_or(CONFINED, Ordering::SeqCst);
}

/// In a fork child: the parent's calls under way are not the child's (the
/// confinement itself is inherited, and stays).
pub fn forget_calls_in_child() {
    IN_FLIGHT.store(0, Ordering::Relaxed);
}

/// Whether the process starts confined by a filter it inherited: a
/// seccomp filter (`Seccomp:` in /proc/self/status) together with
/// `NoNewPrivs:` set, as an unprivileged program or sandbox must set it to
/// install one (bubblewrap, browsers' renderers, a program that sandboxed
/// itself, then exec'd). A filter without it was installed with
/// privileges, for every process in a container or service (Docker's
/// default profile): such a policy refuses calls with an error rather than
/// kills, and the shim goes on as usual there. Read with the calls the
/// loader made to load the shim (openat, read, close).
pub fn inherited_at_start() -> bool {
    let Some((seccomp, no_new_privs)) = status_at_start() else {
        return false;
    };
    if no_new_privs {
        STATE.fetch_or(NO_NEW_PRIVS, Ordering::SeqCst);
    }
    seccomp && no_new_privs
}

/// A `prctl(option, arg2, …)` succeeded: notes no-new-privs being set.
pub fn prctl_done(option: i32, arg2: u64) {
    if option == PR_SET_NO_NEW_PRIVS && arg2 == 1 {
        STATE.fetch_or(NO_NEW_PRIVS, Ordering::SeqCst);
    }
}

/// Whether no-new-privs is set (see [`NO_NEW_PRIVS`]).
pub fn no_new_privs() -> bool {
    STATE.load(Ordering::Relaxed) & NO_NEW_PRIVS != 0
}

/// `Seccomp:` and `NoNewPrivs:` of this process, each whether not 0;
/// `None` if the status could not be read.
fn status_at_start() -> Option<(bool, bool)> {
    let fd = super::open(c"/proc/self/status", libc::O_RDONLY | libc::O_CLOEXEC, 0).ok()?;
    let mut buf = [0u8; 4096];
    let mut len = 0;
    while len < buf.len() {
        match super::read(fd, &mut buf[len..]) {
            Ok(0) | Err(_) => break,
            Ok(n) => len += n,
        }
    }
    super::close(fd);
    let status = &buf[..len];
    Some((
        field_set(status, b"\nSeccomp:")?,
        field_set(status, b"\nNoNewPrivs:")?,
    ))
}

/// Whether the status field `key` (with its newline and colon) is not 0.
fn field_set(status: &[u8], key: &[u8]) -> Option<bool> {
    let at = status.windows(key.len()).position(|w| w == key)? + key.len();
    let digit = status[at..].iter().find(|b| !b.is_ascii_whitespace())?;
    Some(*digit != b'0')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_fields_are_read() {
        let status = b"Name:\tx\nNoNewPrivs:\t1\nSeccomp:\t2\nSeccomp_filters:\t1\n";
        assert_eq!(field_set(status, b"\nSeccomp:"), Some(true));
        assert_eq!(field_set(status, b"\nNoNewPrivs:"), Some(true));
        assert_eq!(
            field_set(b"Name:\tx\nSeccomp:\t0\n", b"\nSeccomp:"),
            Some(false)
        );
        assert_eq!(field_set(b"Name:\tx\n", b"\nSeccomp:"), None);
        // This test process reads its own.
        assert!(status_at_start().is_some());
    }
}
