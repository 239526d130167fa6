//! Each thread's run statistics, for the report's per-thread table: CPU
//! time, voluntary and involuntary context switches, and time runnable but
//! not running (waiting for a CPU). A thread's are read when it ends and,
//! for the threads still alive, when the process exits (and for a
//! snapshot, every thread's so far): never on a hot path. The kernel's `/proc/self/task/TID/schedstat` gives CPU and
//! run-queue time in nanoseconds, `status` the switch counts; a thread
//! reading its own takes `getrusage(RUSAGE_THREAD)` for the switches.

use crate::recorder::base::procfs::read_task_file;
use crate::sys;
use crate::text::leading_decimal as number;
use core::ptr::addr_of_mut;
use locksuit_format::*;

/// What was read; `None` where the kernel did not say.
#[derive(Default)]
pub struct Usage {
    pub cpu_ns: Option<u64>,
    pub runnable_ns: Option<u64>,
    pub switches: Option<(u64, u64)>,
}

/// `schedstat`: "<ns on CPU> <ns waiting on a run queue> <timeslices>".
fn schedstat(tid: u32) -> Option<(u64, u64)> {
    let mut buf = [0u8; 96];
    let text = read_task_file(tid, b"schedstat", &mut buf)?;
    let (cpu, rest) = number(text)?;
    let (waiting, _) = number(rest.strip_prefix(b" ")?)?;
    Some((cpu, waiting))
}

/// Thread `tid`'s time on a processor so far (ns): unchanged between two
/// reads only if it did not run in between.
pub fn cpu_ns(tid: u32) -> Option<u64> {
    schedstat(tid).map(|(cpu, _)| cpu)
}

/// The value after `key` on its line of `status`.
fn status_value(status: &[u8], key: &[u8]) -> Option<u64> {
    let at = status.windows(key.len()).position(|w| w == key)?;
    let rest = &status[at + key.len()..];
    let start = rest.iter().position(|b| b.is_ascii_digit())?;
    number(&rest[start..]).map(|(v, _)| v)
}

fn switches_from_status(tid: u32) -> Option<(u64, u64)> {
    let mut buf = [0u8; 2048];
    let status = read_task_file(tid, b"status", &mut buf)?;
    Some((
        status_value(status, b"\nvoluntary_ctxt_switches:")?,
        status_value(status, b"\nnonvoluntary_ctxt_switches:")?,
    ))
}

/// The calling thread's own figures.
pub fn own(tid: u32) -> Usage {
    let mut usage = Usage::default();
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut ru: libc::rusage = unsafe { core::mem::zeroed() };
    let rc = sys::sys!(
        libc::SYS_getrusage,
        libc::RUSAGE_THREAD,
        &mut ru as *mut libc::rusage
    );
    if rc == 0 {
        let us = |t: libc::timeval| t.tv_sec.max(0) as u64 * 1_000_000 + t.tv_usec.max(0) as u64;
        usage.cpu_ns = Some((us(ru.ru_utime) + us(ru.ru_stime)) * 1000);
        usage.switches = Some((ru.ru_nvcsw.max(0) as u64, ru.ru_nivcsw.max(0) as u64));
    }
    if let Some((cpu, waiting)) = schedstat(tid) {
        usage.cpu_ns = Some(cpu);
        usage.runnable_ns = Some(waiting);
    }
    usage
}

/// Another live thread's figures.
pub fn of_task(tid: u32) -> Usage {
    let (cpu_ns, runnable_ns) = match schedstat(tid) {
        Some((cpu, waiting)) => (Some(cpu), Some(waiting)),
        None => (None, None),
    };
    Usage {
        cpu_ns,
        runnable_ns,
        switches: switches_from_status(tid),
    }
}

fn store(t: *mut ThreadRecord, usage: &Usage) {
    // SAFETY: a live thread record in the mapping; only these fields and
    // flags are written, each whole (a reader sees the old or new value).
    unsafe {
        let mut flags = 0;
        if let Some(cpu) = usage.cpu_ns {
            addr_of_mut!((*t).cpu_ns).write_volatile(cpu);
            flags |= THREAD_USAGE;
        }
        if let Some(waiting) = usage.runnable_ns {
            addr_of_mut!((*t).runnable_ns).write_volatile(waiting);
            flags |= THREAD_RUNNABLE_KNOWN;
        }
        if let Some((voluntary, involuntary)) = usage.switches {
            addr_of_mut!((*t).voluntary_switches).write_volatile(voluntary);
            addr_of_mut!((*t).involuntary_switches).write_volatile(involuntary);
            flags |= THREAD_SWITCHES_KNOWN;
        }
        let all = addr_of_mut!((*t).flags);
        all.write_volatile(all.read_volatile() | flags);
    }
}

/// The calling thread is ending: its own figures into its record.
pub fn record_own(t: *mut ThreadRecord) {
    if t.is_null() {
        return;
    }
    let _errno = crate::diag::ErrnoGuard::save();
    // SAFETY: the caller's own live record.
    let tid = unsafe { (*t).tid };
    store(t, &own(tid));
}

/// The process is exiting: a live thread's figures into its record.
pub fn record_task(t: *mut ThreadRecord) {
    if t.is_null() {
        return;
    }
    let _errno = crate::diag::ErrnoGuard::save();
    // SAFETY: a live record in the mapping.
    let tid = unsafe { (*t).tid };
    store(t, &of_task(tid));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_fields_are_parsed() {
        let status = b"Name:\tx\nvoluntary_ctxt_switches:\t17\nnonvoluntary_ctxt_switches:\t3\n";
        assert_eq!(
            status_value(status, b"\nvoluntary_ctxt_switches:"),
            Some(17)
        );
        assert_eq!(
            status_value(status, b"\nnonvoluntary_ctxt_switches:"),
            Some(3)
        );
    }

    #[test]
    fn this_thread_has_figures() {
        // SAFETY: gettid has no arguments.
        let tid = sys::sys!(libc::SYS_gettid) as u32;
        let usage = own(tid);
        assert!(usage.cpu_ns.is_some());
        assert!(usage.switches.is_some());
    }
}
