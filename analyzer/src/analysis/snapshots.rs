//! A recording policy's snapshots and what it left out, from the trace
//! into the model: each snapshot's parts joined, raw ids turned into report
//! ids, every wait's and hold's call chain attached, and the stacks copied
//! from threads in unrecorded system calls, or running, walked.

use crate::analysis::deadlocks::{kind_name, Ids};
use crate::model::*;
use locksuit_format::reader::Trace;
use locksuit_format::*;
use std::collections::HashMap;

/// What the policy in force did, if one was.
pub fn policy(trace: &Trace) -> Option<PolicyInForce> {
    let header = &trace.header;
    if header.flags & FLAG_POLICY == 0 {
        return None;
    }
    let record = trace.policy.as_ref().map(|(r, _)| *r).unwrap_or_default();
    const RULES: [(usize, &str); 6] = [
        (FILTER_THREAD, "thread"),
        (FILTER_OBJECT, "object"),
        (FILTER_SITE, "site"),
        (FILTER_SHORT, "short-wait"),
        (FILTER_WAITERS, "few-waiters"),
        (FILTER_SAMPLED, "sampled"),
    ];
    Some(PolicyInForce {
        text: trace.policy.as_ref().map(|(_, text)| text.clone()),
        min_wait_us: header.policy_min_wait_us,
        events_filtered: header.events_filtered,
        filtered_by_rule: RULES
            .iter()
            .filter(|&&(i, _)| record.filtered[i] > 0)
            .map(|&(i, rule)| RuleCount {
                rule,
                events: record.filtered[i],
            })
            .collect(),
        snapshots_taken: record.snapshots_taken,
        snapshots_refused: record.snapshots_refused,
    })
}

/// The report's one line on the policy: what it left out, and why that
/// matters for which figures.
pub fn policy_warning(p: &PolicyInForce) -> String {
    let mut said = if p.events_filtered == 0 {
        "no events left out".to_string()
    } else {
        let rules: Vec<String> = p
            .filtered_by_rule
            .iter()
            .map(|r| format!("{} {}", r.rule, r.events))
            .collect();
        let by_rule = if rules.is_empty() {
            String::new()
        } else {
            format!(" (by rule: {})", rules.join(", "))
        };
        format!(
            "{} events left out{by_rule}, so wait distributions, the timeline and who-blocks-whom cover only the events kept",
            p.events_filtered
        )
    };
    if p.snapshots_taken > 0 || p.snapshots_refused > 0 {
        said.push_str(&format!(
            "; {} snapshots taken, {} refused (snapshot_max, interval)",
            p.snapshots_taken, p.snapshots_refused
        ));
    }
    format!("a recording policy was in force (LOCKSUIT_POLICY): {said}; counters are exact")
}

/// The kernel's state letter, in words.
fn state_name(letter: u32) -> &'static str {
    if letter == SNAPSHOT_STATE_STARTING_WAIT {
        return "starting-to-wait";
    }
    match char::from_u32(letter).unwrap_or('?') {
        'R' => "running",
        'S' => "sleeping",
        'D' => "disk-wait",
        'T' | 't' => "stopped",
        'Z' => "zombie",
        'X' => "dead",
        'I' => "idle",
        _ => "unknown",
    }
}

/// A system call's name, for the calls a blocked thread is usually in.
fn syscall_name(nr: i32) -> String {
    let nr = i64::from(nr);
    let known: &[(i64, &str)] = &[
        (libc::SYS_futex, "futex"),
        (libc::SYS_nanosleep, "nanosleep"),
        (libc::SYS_clock_nanosleep, "clock_nanosleep"),
        (libc::SYS_read, "read"),
        (libc::SYS_write, "write"),
        (libc::SYS_ppoll, "ppoll"),
        (libc::SYS_pselect6, "pselect6"),
        (libc::SYS_epoll_pwait, "epoll_pwait"),
        (libc::SYS_wait4, "wait4"),
        (libc::SYS_waitid, "waitid"),
        (libc::SYS_accept, "accept"),
        (libc::SYS_accept4, "accept4"),
        (libc::SYS_recvfrom, "recvfrom"),
        (libc::SYS_recvmsg, "recvmsg"),
        (libc::SYS_sendto, "sendto"),
        (libc::SYS_connect, "connect"),
        (libc::SYS_openat, "openat"),
        (libc::SYS_fsync, "fsync"),
        (libc::SYS_rt_sigtimedwait, "rt_sigtimedwait"),
        #[cfg(target_arch = "x86_64")]
        (libc::SYS_poll, "poll"),
        #[cfg(target_arch = "x86_64")]
        (libc::SYS_select, "select"),
        #[cfg(target_arch = "x86_64")]
        (libc::SYS_epoll_wait, "epoll_wait"),
    ];
    known
        .iter()
        .find(|(n, _)| *n == nr)
        .map_or_else(|| format!("syscall {nr}"), |(_, name)| name.to_string())
}

/// The snapshots in the trace, in the order they were taken.
/// `unwound` walks and names a stack the snapshot copied.
pub fn build(
    trace: &Trace,
    ids: &Ids,
    chain: &dyn Fn(u32) -> Vec<Frame>,
    unwound: &mut dyn FnMut(&SnapshotStackRecord, &[u8]) -> SnapshotStack,
    start_ns: u64,
) -> Vec<Snapshot> {
    let mut stacks: HashMap<(u32, u32), SnapshotStack> = trace
        .snapshot_stacks
        .iter()
        .map(|(r, bytes)| ((r.number, r.tid), unwound(r, bytes)))
        .collect();
    let mut snapshots: Vec<Snapshot> = Vec::new();
    for (record, threads) in &trace.snapshots {
        let at = match snapshots.iter().position(|s| s.number == record.number) {
            Some(at) => at,
            None => {
                snapshots.push(Snapshot {
                    number: record.number,
                    at_ns: record.time.saturating_sub(start_ns),
                    trigger: match record.trigger {
                        SNAPSHOT_IDLE => "idle-processor",
                        _ => "waiters",
                    },
                    object: (ids.lock)(record.object),
                    waiters: record.waiters,
                    by_tid: record.tid,
                    by_site: (ids.site)(record.site),
                    idle_processors: (record.idle_cpus != u32::MAX).then_some(record.idle_cpus),
                    threads: Vec::new(),
                    threads_omitted: record.threads_omitted,
                });
                snapshots.len() - 1
            }
        };
        let time = record.time;
        let threads = threads.iter().map(|t| {
            let mut t = thread(t, time, ids, chain);
            t.stack = stacks.remove(&(record.number, t.tid));
            t
        });
        snapshots[at].threads.extend(threads);
    }
    snapshots.sort_by_key(|s| s.number);
    snapshots
}

fn thread(
    t: &locksuit_format::SnapshotThread,
    time: u64,
    ids: &Ids,
    chain: &dyn Fn(u32) -> Vec<Frame>,
) -> crate::model::SnapshotThread {
    let name = String::from_utf8_lossy(
        &t.name[..t.name.iter().position(|&c| c == 0).unwrap_or(t.name.len())],
    )
    .into_owned();
    let waiting = (t.wait_kind != 0).then(|| SnapshotWait {
        waits_in: kind_name(t.wait_kind),
        object: match t.wait_kind {
            WAIT_JOIN => None,
            WAIT_COND => (ids.cond)(t.wait_object),
            _ => (ids.lock)(t.wait_object).map(|l| l.to_string()),
        },
        holder_tid: (t.wait_kind == WAIT_LOCK && t.wait_holder != 0).then_some(t.wait_holder),
        waited_ns: time.saturating_sub(t.wait_since_ns),
        site: (ids.site)(t.wait_site),
        stack: chain(t.wait_site),
    });
    let holds = (t.held_count != HELD_UNKNOWN).then(|| {
        let n = (t.held_count as usize).min(SNAPSHOT_HELD);
        (0..n)
            .map(|i| SnapshotHold {
                lock: (ids.lock)(t.held[i]),
                site: (ids.site)(t.held_sites[i]),
                stack: chain(t.held_sites[i]),
            })
            .collect()
    });
    let switches = t.usage_flags & THREAD_SWITCHES_KNOWN != 0;
    crate::model::SnapshotThread {
        tid: t.tid,
        thread_name: (ids.thread_name)(t.tid).or((!name.is_empty()).then_some(name)),
        state: state_name(t.state),
        syscall: (t.syscall >= 0).then(|| syscall_name(t.syscall)),
        syscall_address: (t.syscall >= 0 && t.pc != 0).then(|| format!("{:#x}", t.pc)),
        waiting,
        holds,
        stack: None,
        cpu_ns: (t.usage_flags & THREAD_USAGE != 0).then_some(t.cpu_ns),
        runnable_ns: (t.usage_flags & THREAD_RUNNABLE_KNOWN != 0).then_some(t.runnable_ns),
        voluntary_switches: switches.then_some(t.voluntary_switches),
        involuntary_switches: switches.then_some(t.involuntary_switches),
    }
}
