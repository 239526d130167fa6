//! What the futex-lock test programs share (tests/rust/std_futex_locks.rs,
//! tests/rust/parking_lot_locks/): thread ids, and a holder that lets go
//! only once its waiter is surely blocked in the futex system call, never
//! after a fixed sleep a busy machine could outrun.

use std::sync::atomic::{AtomicI32, Ordering};
use std::thread;
use std::time::{Duration, Instant};

extern "C" {
    fn gettid() -> i32;
}

/// The calling thread's kernel id.
pub fn tid() -> i32 {
    // SAFETY: gettid(2) takes nothing and cannot fail.
    unsafe { gettid() }
}

/// The system call number thread `tid` of this process is in, if any.
fn in_syscall(tid: i32) -> Option<i64> {
    let text = std::fs::read_to_string(format!("/proc/self/task/{tid}/syscall")).ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// Returns once thread `tid` is blocked in futex(2) (number 202 on x86-64),
/// after it said (`about`) that its next call is the wait.
pub fn until_waiting(about: &AtomicI32) -> i32 {
    let tid = loop {
        let t = about.load(Ordering::Acquire);
        if t != 0 {
            break t;
        }
        thread::sleep(Duration::from_micros(200));
    };
    while in_syscall(tid) != Some(202) {
        thread::sleep(Duration::from_micros(200));
    }
    tid
}

/// Says, from the waiting thread, that its next call waits.
pub fn about_to_wait(about: &AtomicI32) -> i32 {
    let me = tid();
    about.store(me, Ordering::Release);
    me
}

/// How long the holders hold once their waiters are seen waiting.
pub const HOLD: Duration = Duration::from_millis(150);

/// Nanoseconds since `start`.
pub fn ns_since(start: Instant) -> u128 {
    start.elapsed().as_nanos()
}
