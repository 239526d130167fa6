//! `LOCKSUIT_SWITCHES=1`: the kernel's own context-switch records for each
//! thread, for the blocking the hooks cannot see — preemption, page faults,
//! system calls made around libc. This is how the thread-execution seed
//! collects them.
//!
//! Each thread opens, for itself only, a `perf_event_open` dummy software
//! event with `context_switch` records (switch out, with a flag when it was
//! preempted, and switch in), and a major-page-fault event sampled with its
//! user call chain, both into one ring buffer mapped at registration. The
//! switch event's descriptor is closed at once (the mapping keeps it
//! alive); the fault event's is kept, high up and close-on-exec, until the
//! thread ends. User-space only, no privileges: allowed at
//! `perf_event_paranoid` 2. Where the kernel refuses, the shim says so
//! once and records without them.
//!
//! The shim has no thread of its own: a thread drains its own ring on its
//! slow paths (a recorded wait, a recorded blocking call) and when it
//! exits. Each switch-out and the switch-in after it become one event
//! ([`EVENT_SWITCH`]) if the thread was out at least
//! `LOCKSUIT_BLOCK_MIN_US`; the analyzer drops those inside a wait the
//! hooks recorded. A switch ends with a page fault's wait when the fault's
//! sample (taken when the fault is done) comes just after its switch-in.
//! Records a ring had no room for are counted in the trace header, apart
//! from the operations the shim dropped; a ring found full at a drain,
//! whose losses the kernel has not reported yet, is flagged there too.

use crate::recorder::features::events;
use crate::recorder::tables::lanes::Lane;
use crate::recorder::trace::switch_ring::Ring;
use locksuit_format::*;

/// Opens this thread's rings (at registration), if switches are on.
pub fn open(lane: &mut Lane) {
    lane.switches = Ring::open();
}

/// Reads this thread's rings up to what the kernel has written, writing an
/// event per switch-out that lasted long enough; then closes the rings if
/// `closing` (the thread, or the process, is ending).
pub fn drain(lane: &mut Lane, closing: bool) {
    if lane.switches.is_open() {
        // Its buffers and the sites of faults' chains are deep work.
        crate::recorder::tables::lanes::on_own_stack(lane, |lane| drain_open(lane, closing));
    }
}

#[inline(never)]
fn drain_open(lane: &mut Lane, closing: bool) {
    // Out of the lane while it is read, so each switch can be written to it.
    let mut ring = core::mem::replace(&mut lane.switches, Ring::EMPTY);
    ring.drain(closing, |switch| {
        let span = (switch.out_ns, switch.in_ns);
        match switch.fault {
            Some(frames) => {
                let site = crate::recorder::identities::sites::site_of_frames(lane, frames);
                events::switched(lane, site, SWITCH_FAULT, span);
            }
            None => {
                let flags = if switch.preempted {
                    SWITCH_PREEMPTED
                } else {
                    0
                };
                events::switched(lane, 0, flags, span);
            }
        }
    });
    lane.switches = ring;
}
