//! Threads and the process as a whole: registration on first use, names,
//! joins, exit and exec.

use crate::recorder::api::thread_lane::current_lane;
use crate::recorder::base::caller::Caller;
use crate::recorder::tables::held::HeldEntry;
use crate::recorder::tables::lanes::{self, Lane};
use crate::recorder::tables::thread_state::InHook;
use crate::recorder::time::clock::now_ns;
use crate::recorder::trace::file;
use core::ptr::addr_of_mut;
use core::sync::atomic::{AtomicU32, Ordering};
use locksuit_format::*;

/// Threads created so far through `pthread_create` (the last number given).
static CREATED: AtomicU32 = AtomicU32::new(0);

/// The number of a thread about to be created.
pub fn next_create_serial() -> u32 {
    CREATED.fetch_add(1, Ordering::Relaxed).wrapping_add(1)
}

/// The calling thread created thread number `serial`, asking at `asked_ns`.
pub fn thread_created(g: &InHook, serial: u32, asked_ns: u64) {
    if let Some(lane) = current_lane(g) {
        crate::recorder::features::events::thread_moment(lane, EVENT_CREATED, serial, 0, asked_ns);
    }
}

/// The calling thread is ending (thread-local destructor): close its record
/// and give its lane to the next thread.
pub fn thread_ended(g: &InHook) {
    {
        let s = g.thread();
        let lane = s.lane();
        if lane.is_null()
            || s.lane_generation() != crate::recorder::tables::thread_state::generation()
        {
            return;
        }
        // SAFETY: our own registered lane.
        let lane = unsafe { &mut *lane };
        crate::recorder::features::switches::drain(lane, true);
        crate::recorder::features::access::thread_done(lane);
        crate::recorder::features::usage::record_own(lane.thread);
        let serial = s.create_serial();
        if serial != 0 {
            crate::recorder::features::events::thread_moment(
                lane,
                EVENT_EXITED,
                serial,
                0,
                now_ns(),
            );
        }
        if !lane.thread.is_null() {
            // SAFETY: our own thread record, in the live mapping.
            unsafe {
                let t = &mut *lane.thread;
                t.end_ns = now_ns();
                t.shim_call_ps = s.call_cost().mean_ps() as u32;
                // The kernel's name is the last one given, by any means.
                crate::recorder::api::thread_lane::read_own_name(&mut t.name);
                // A wait a cancellation unwound out of is over too.
                AtomicU32::from_ptr(addr_of_mut!(t.wait_kind)).store(0, Ordering::Release);
                t.flags |= THREAD_ENDED;
            }
        }
        s.set_lane(core::ptr::null_mut(), 0);
        lanes::release(lane);
    }
}

/// What a thread is about to block on, published in its thread record (see
/// `ThreadRecord::wait_kind`) so that a reader of the trace sees the waits
/// in progress of a live, hung or killed process.
pub struct PendingWait {
    pub kind: u32,
    pub object: u32,
    pub site: u32,
    pub holder: u32,
    pub since_ns: u64,
    pub target: u64,
    /// A timed wait's deadline, 0 if untimed.
    pub deadline: u64,
}

/// The thread is about to block, holding `held` (innermost last).
pub fn wait_started(lane: &Lane, w: PendingWait, held: &[HeldEntry]) {
    let t = lane.thread;
    if t.is_null() {
        return;
    }
    let mut locks = [0u32; WAIT_HELD];
    let mut sites = [0u32; WAIT_HELD];
    for (i, e) in held.iter().rev().take(WAIT_HELD).enumerate() {
        locks[i] = e.lock_id;
        if !e.counter.is_null() {
            // SAFETY: a counter record of this thread's lane.
            sites[i] = unsafe { (*e.counter).site_id };
        }
    }
    // SAFETY: this thread's own record in the live mapping; readers in
    // other processes see the fields before the kind (Release).
    unsafe {
        addr_of_mut!((*t).wait_held).write_volatile(locks);
        addr_of_mut!((*t).wait_held_sites).write_volatile(sites);
        addr_of_mut!((*t).wait_object).write_volatile(w.object);
        addr_of_mut!((*t).wait_site).write_volatile(w.site);
        addr_of_mut!((*t).wait_holder).write_volatile(w.holder);
        addr_of_mut!((*t).wait_since_ns).write_volatile(w.since_ns);
        addr_of_mut!((*t).wait_target).write_volatile(w.target);
        addr_of_mut!((*t).wait_deadline).write_volatile(w.deadline);
        AtomicU32::from_ptr(addr_of_mut!((*t).wait_kind)).store(w.kind, Ordering::Release);
    }
}

/// The thread stopped blocking (or ended).
pub fn wait_ended(lane: &Lane) {
    let t = lane.thread;
    if !t.is_null() {
        // SAFETY: this thread's own record in the live mapping.
        unsafe { AtomicU32::from_ptr(addr_of_mut!((*t).wait_kind)).store(0, Ordering::Release) };
    }
}

/// `pthread_setname_np(target, name)` succeeded.
pub fn thread_named(_in_hook: &InHook, target: u64, name: &[u8]) {
    crate::policy::names_changed();
    // SAFETY: pthread_self is always safe.
    if target != unsafe { libc::pthread_self() } as u64 {
        crate::recorder::api::thread_lane::NAMED_UNKNOWN.fetch_add(1, Ordering::Relaxed);
        core::sync::atomic::fence(Ordering::SeqCst);
    }
    let mut fixed = [0u8; THREAD_NAME_MAX];
    let n = name.len().min(THREAD_NAME_MAX - 1);
    fixed[..n].copy_from_slice(&name[..n]);
    lanes::for_each_active(|lane| {
        if lane.thread.is_null() {
            return;
        }
        // SAFETY: reading and writing a live thread record's name; a torn
        // name is the worst a concurrent update can cause.
        unsafe {
            if (*lane.thread).pthread == target {
                (*lane.thread).name = fixed;
            }
        }
    });
    // A thread not known yet takes its name when it registers (see
    // `take_name_given_early`): a record here could not tell it from a
    // later thread that reuses its pthread_t.
}

/// About to join the thread `target` from `caller` (until `deadline`, 0
/// if untimed); returns when the join began.
pub fn join_begin(g: &InHook, target: u64, caller: Caller, deadline: u64) -> JoinStarted {
    let since_ns = now_ns();
    let mut site_id = 0;
    if let Some(lane) = current_lane(g) {
        // The joining line, so a hang in a join can name it (first sight of
        // a line unwinds once, like any other site).
        let site = crate::recorder::tables::lanes::timed_slow_work(lane, |lane| {
            let context = crate::recorder::identities::sites::context_of(
                lane,
                caller,
                crate::recorder::identities::sites::PythonLines::No,
            );
            crate::recorder::identities::sites::site_id(
                lane,
                caller,
                context,
                crate::recorder::identities::sites::PythonLines::No,
            )
        });
        site_id = site;
        let wait = PendingWait {
            kind: WAIT_JOIN,
            object: 0,
            site,
            holder: 0,
            since_ns,
            target,
            deadline,
        };
        wait_started(lane, wait, g.thread().held().entries());
    }
    JoinStarted {
        since_ns,
        site_id,
        target,
    }
}

/// When a join began, at which line, and of which thread.
pub struct JoinStarted {
    since_ns: u64,
    site_id: u32,
    target: u64,
}

/// A join begun as `started` returned `rc`.
pub fn join_finished(g: &InHook, started: JoinStarted, rc: i32) {
    let Some(lane) = current_lane(g) else { return };
    wait_ended(lane);
    let now = now_ns();
    if rc == 0 {
        if !lane.thread.is_null() {
            // SAFETY: our own thread record.
            unsafe {
                (*lane.thread).joins += 1;
                (*lane.thread).join_wait_ns += now.saturating_sub(started.since_ns);
            }
        }
        let span = (started.since_ns, now);
        crate::recorder::features::events::joined(lane, started.site_id, started.target, span);
    }
    if crate::config::calls_timed()
        && now.saturating_sub(started.since_ns) >= crate::config::block_min_ns()
    {
        crate::recorder::api::calls::call_blocked(
            g,
            BlockingCall::Join,
            crate::recorder::api::calls::CallFrom::Site(started.site_id),
            None,
            (started.since_ns, now),
        );
    }
}

/// Fills in the names of live threads from the kernel, for threads named by
/// other means than `pthread_setname_np` (e.g. `prctl`), and their run
/// statistics as of now.
fn capture_live_threads() {
    // Deep work (a `/proc` file per thread), for the whole process.
    crate::recorder::base::own_stack::PROCESS.run_claimed(capture_live_threads_here);
}

fn capture_live_threads_here() {
    let _errno = crate::diag::ErrnoGuard::save();
    lanes::for_each_active(|lane| {
        if lane.thread.is_null() {
            return;
        }
        crate::recorder::features::usage::record_task(lane.thread);
        // SAFETY: live thread record in the mapping.
        let t = unsafe { &mut *lane.thread };
        // The kernel's name is the last one given, by any means.
        let mut buf = [0u8; THREAD_NAME_MAX];
        let n = crate::recorder::base::procfs::read_task_file(
            t.tid,
            b"comm",
            &mut buf[..THREAD_NAME_MAX - 1],
        )
        .map_or(0, <[u8]>::len);
        if n > 0 {
            if buf[n - 1] == b'\n' {
                buf[n - 1] = 0;
            }
            t.name = buf;
        }
    });
}

/// The process is exiting normally; `code` is the status when known.
pub fn process_exit(code: Option<i32>) {
    if let Some(code) = code {
        file::set_exit_code(code);
    }
    capture_live_threads();
    // The exiting thread's sampled shim cost (others write theirs when they
    // end or release a contended lock).
    crate::recorder::tables::thread_state::ThreadState::with(|s| {
        let lane = s.lane();
        if !lane.is_null()
            && s.lane_generation() == crate::recorder::tables::thread_state::generation()
        {
            // SAFETY: this thread's own lane and record, in the live mapping.
            unsafe {
                // The process ends: read the ring to its end, and let it go.
                crate::recorder::features::switches::drain(&mut *lane, true);
                crate::recorder::features::access::write_all(&mut *lane);
                let thread = (*lane).thread;
                if !thread.is_null() {
                    (*thread).shim_call_ps = s.call_cost().mean_ps() as u32;
                }
            }
        }
    });
    file::set_end_time(now_ns());
    file::set_flags(FLAG_COMPLETE);
}

/// About to `exec`. Returns false in a `vfork` child (which shares our
/// memory): the parent's trace must not be touched then.
pub fn exec_starting() -> bool {
    if !file::is_trace_process() {
        return false;
    }
    capture_live_threads();
    file::set_end_time(now_ns());
    file::set_flags(FLAG_EXEC);
    true
}

/// The `exec` failed; the process goes on.
pub fn exec_failed() {
    file::clear_flags(FLAG_EXEC);
}
