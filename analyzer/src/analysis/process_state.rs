//! What the trace's header and /proc say about its process: whether it
//! still runs, its live threads' names, and what a confinement cost.

use locksuit_format::reader::Trace;
use locksuit_format::*;

/// What a confinement (seccomp, the TSC turned off) cost the trace.
pub fn confinement_warnings(header: &locksuit_format::reader::HeaderInfo) -> Vec<String> {
    let mut out = Vec::new();
    let at =
        crate::base::words::duration(header.confined_mono_ns.saturating_sub(header.start_mono_ns));
    if header.flags & FLAG_CONFINED != 0 {
        let refused = match header.own_calls_refused {
            0 => String::new(),
            n => format!(" ({n} of its own calls not made)"),
        };
        out.push(format!(
            "the program confined itself with seccomp {at} after it started: from then on the shim made no system call of its own{refused}, so the trace grew only into blocks set aside before, and thread CPU times, context switches and blocking-call classes by file type are missing after that point{}",
            match (header.flags & FLAG_EXEC != 0, header.flags & FLAG_CONFINED_SANDBOX != 0) {
                (true, true) => "; it then exec'd another program, which inherited the sandbox's filter and was not recorded",
                (true, false) => "; it then exec'd another program, recorded in a trace of its own (the filter was installed with privileges, not as a sandbox's)",
                _ => "",
            }
        ));
    }
    if header.flags & FLAG_CONFINED_FULL != 0 {
        out.push(
            "confined, the trace used up the blocks set aside for it: later records were dropped (counted below)"
                .into(),
        );
    }
    if header.flags & FLAG_CUT != 0 {
        let cut =
            crate::base::words::duration(header.cut_mono_ns.saturating_sub(header.start_mono_ns));
        out.push(format!(
            "the trace file was cut (truncated) while the program ran, {cut} after it started: what it held then is lost (threads, locks and counts from before are missing or partial, and the header's counters restart from the start); what was recorded after the cut is here"
        ));
    }
    if header.flags & FLAG_CLOCK_COARSE != 0 {
        out.push(format!(
            "a thread turned its TSC off (seccomp strict mode or PR_SET_TSC) {at} after the start: from then on times come from the coarse clock, at the kernel tick's resolution (1 to 10 ms); short waits and holds read as 0"
        ));
    }
    out
}

/// Whether the process that wrote an unfinished trace is alive: its pid
/// runs the same program and started when the trace did (a pid may have
/// been reused since).
pub fn still_running(header: &locksuit_format::reader::HeaderInfo) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{}/stat", header.pid)) else {
        return false;
    };
    // Fields after the command name (which may hold spaces) in parentheses;
    // the start time is field 22, in clock ticks since boot.
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
        return false;
    };
    let Some(start_ticks) = rest
        .split_whitespace()
        .nth(19)
        .and_then(|f| f.parse::<u64>().ok())
    else {
        return false;
    };
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    let started_ns = start_ticks.saturating_mul(1_000_000_000 / hz);
    // The shim starts as the program loads: within seconds of exec.
    let same_start = started_ns.abs_diff(header.start_mono_ns) < 10_000_000_000;
    let exe = std::fs::read_link(format!("/proc/{}/exe", header.pid)).ok();
    let recorded = header.exe.trim_end_matches(" (deleted)");
    let same_program = exe.is_some_and(|e| {
        let e = e.to_string_lossy();
        e.trim_end_matches(" (deleted)") == recorded
    });
    same_start && same_program
}

/// The names of the live process `pid`'s threads that were named: those
/// whose kernel name differs from the main thread's (a new thread starts
/// with its creator's name; the main thread's is the program's).
pub fn live_thread_names(pid: u32) -> std::collections::BTreeMap<u32, String> {
    let comm = |tid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm"))
            .ok()
            .map(|c| c.trim_end_matches('\n').to_string())
    };
    let Some(program) = comm(pid) else {
        return Default::default();
    };
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Default::default();
    };
    tasks
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&tid| tid != pid)
        .filter_map(|tid| Some((tid, comm(tid)?)))
        .filter(|(_, name)| *name != program)
        .collect()
}

/// Whether the live process `pid` has threads its trace does not record.
pub fn unrecorded_threads(trace: &Trace, pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    let recorded = crate::analysis::waits::live_threads(trace);
    tasks
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .any(|tid| !recorded.contains(&tid))
}
