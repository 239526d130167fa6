//! What an attached recording saw: each futex call's stack, unwound and
//! named like the shim's; waits summed per futex word and line; the text
//! report and the JSON recording (`locksuit.attach/1`).

use super::bpf::Event;
use crate::input::symbolize::Symbolizer;
use crate::input::unwind::StackWalker;
use crate::model::frames::{first_own_frame, Frame};
use locksuit_format::reader::ModuleInfo;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;
use std::time::SystemTime;

pub struct Recording {
    pub pid: u32,
    pub comm: String,
    pub exe: String,
    pub started: SystemTime,
    pub ended: SystemTime,
    pub modules: Vec<ModuleInfo>,
    pub names: BTreeMap<u32, String>,
    pub events: Vec<Event>,
    /// Threads blocked in a futex wait when attach began (see hung.rs).
    pub blocked: Vec<super::hung::Blocked>,
    /// Each thread's time on a CPU while attached (from its first switch
    /// away: a lower bound).
    pub on_cpu: BTreeMap<u32, u64>,
    /// Threads in a futex wait as the recording ended: (tid, word).
    pub blocked_at_end: Vec<(u32, u64)>,
    /// With `--locks`: what the uprobes counted per mutex and line, and
    /// how many entries did not fit their maps.
    pub locks: Option<(Vec<super::bpf::LockLine>, u64)>,
    /// Why threads were off their CPU (sched_switch), per thread and reason.
    pub off_cpu: Vec<super::bpf::OffCpu>,
    /// How the scheduler program told the target's tasks from others'
    /// (`Recorder::scheduler_filter`).
    pub scheduler_filter: &'static str,
    /// Which tracepoints saw the futex calls, and where not the futex
    /// call's own, why not (`Recorder::syscall_probes`).
    pub syscall_probes: (&'static str, Option<String>),
}

/// What the report says the recording was made with, after the system
/// call probes (`Recording::syscall_probes`).
const WITH: &str = " and the sched_switch raw tracepoint (why threads were off their CPU)";
/// The same, with `--locks`.
const WITH_LOCKS: &str = ", the sched_switch raw tracepoint (why threads were off their CPU) and uprobes on the C library's pthread mutex and condition-wait calls";
/// What it cannot say.
const UNSEEN: &str = "not seen when attached (only futex waits and wakes are): acquisitions, hold times, locks that never waited (attach with --locks for pthread mutexes)";
/// What it cannot say with `--locks`.
const UNSEEN_LOCKS: &str = "not seen when attached: acquisitions and holds of locks other than pthread mutexes (rwlocks, semaphores, spinlocks, Rust and other futex-based locks: only their waits), lock order, the holder of each wait";

impl Recording {
    pub fn with(&self) -> String {
        let (probes, why) = &self.syscall_probes;
        let why = why
            .as_ref()
            .map(|why| format!("; not the futex call's own tracepoints: {why}"))
            .unwrap_or_default();
        format!(
            "BPF on {probes} (futex calls, user stacks copied and unwound by call frame information){}{why}",
            if self.locks.is_some() {
                WITH_LOCKS
            } else {
                WITH
            }
        )
    }

    pub fn unseen(&self) -> &'static str {
        if self.locks.is_some() {
            UNSEEN_LOCKS
        } else {
            UNSEEN
        }
    }
}

/// A pthread mutex's acquisitions at one line, seen by `--locks`.
#[derive(Serialize)]
pub struct LockSite {
    pub mutex: String,
    pub site: String,
    pub acquisitions: u64,
    pub hold_ns: u64,
    /// Holds whose end was seen (a hold still open at detach is not).
    pub holds: u64,
    pub max_hold_ns: u64,
}

#[derive(Serialize)]
pub struct Call {
    pub tid: u32,
    pub op: u32,
    pub uaddr: String,
    pub enter_ns: u64,
    pub exit_ns: u64,
    pub ret: i64,
    /// The program's own line the call was made from, if named.
    pub site: Option<String>,
    pub addresses: Vec<String>,
    /// The same addresses, for the trace's site.
    #[serde(skip)]
    pub chain: Vec<u64>,
}

#[derive(Serialize)]
pub struct Site {
    pub uaddr: String,
    pub site: String,
    pub waits: u64,
    pub wait_ns: u64,
    pub max_wait_ns: u64,
    pub threads: usize,
    pub chain: Vec<String>,
}

#[derive(Serialize)]
pub struct Wake {
    pub uaddr: String,
    pub site: String,
    pub wakes: u64,
    pub woken: i64,
}

/// A thread blocked in a futex wait when attach began.
#[derive(Serialize)]
pub struct BlockedAt {
    pub tid: u32,
    pub uaddr: String,
    pub site: String,
    pub chain: Vec<String>,
    /// The thread holding the word's lock (a glibc mutex's owner), if known.
    pub holder: Option<u32>,
    /// Its stack's addresses, for the trace's site.
    #[serde(skip)]
    pub addresses: Vec<u64>,
}

pub struct Summary {
    pub calls: Vec<Call>,
    pub sites: Vec<Site>,
    pub wakes: Vec<Wake>,
    pub blocked: Vec<BlockedAt>,
    /// Cycles of `blocked` (indexes), each waiting for the next's lock.
    pub deadlocks: Vec<Vec<usize>>,
    /// `--locks`: per mutex and line, most held first.
    pub locks: Vec<LockSite>,
    /// `--locks`: map entries that did not fit (acquisitions not counted).
    pub locks_lost: u64,
}

/// The program's own line of a stack, and its chain from there.
fn named_stack(
    symbolizer: &mut Symbolizer,
    r: &Recording,
    walked: &[u64],
) -> (Option<String>, Vec<String>) {
    let mut chain = Vec::new();
    for &address in walked {
        chain.extend(symbolizer.frames(&r.modules, &r.exe, address, 0));
    }
    let own = first_own_frame(&chain);
    let site = chain.get(own).filter(|f| f.line.is_some()).map(frame_text);
    let rest = chain.iter().skip(own).take(8).map(frame_text).collect();
    (site, rest)
}

fn frame_text(f: &Frame) -> String {
    let function = f.function.as_deref().unwrap_or("??");
    match (&f.file, f.line) {
        (Some(file), Some(line)) => format!("{function} at {file}:{line}"),
        _ => match &f.offset {
            Some(offset) => format!("{function} ({offset})"),
            None => format!("{function} ({})", f.address),
        },
    }
}

pub fn summarize(r: &Recording) -> Summary {
    let mut walker = StackWalker::new(&r.modules, &r.exe);
    let mut symbolizer = Symbolizer::default();
    let mut named: HashMap<u64, Vec<Frame>> = HashMap::new();
    let mut calls = Vec::new();
    // (uaddr, site) -> (site summary, threads)
    let mut sites: BTreeMap<(u64, String), (Site, Vec<u32>)> = BTreeMap::new();
    let mut wakes: BTreeMap<(u64, String), Wake> = BTreeMap::new();
    for e in &r.events {
        // The kernel saved the frame pointer at the call: a frame that
        // needs it is unwound exactly, not by searching the copy.
        let at = crate::input::unwind::StoppedAt::InCallWithBp;
        let walked = walker.walk((e.ip, e.sp, e.bp), at, &e.stack, 0);
        let mut chain = Vec::new();
        for &address in &walked.addresses {
            let frames = named
                .entry(address)
                .or_insert_with(|| symbolizer.frames(&r.modules, &r.exe, address, 0));
            chain.extend(frames.iter().cloned());
        }
        let own = first_own_frame(&chain);
        let site = chain.get(own).filter(|f| f.line.is_some()).map(frame_text);
        let key = site.clone().unwrap_or_else(|| "(unnamed)".into());
        let uaddr = format!("{:#x}", e.uaddr);
        if e.is_wait() {
            let wait = e.exit_ns.saturating_sub(e.enter_ns);
            let (s, threads) = sites.entry((e.uaddr, key.clone())).or_insert_with(|| {
                let chain = chain.iter().skip(own).take(8).map(frame_text).collect();
                let s = Site {
                    uaddr: uaddr.clone(),
                    site: key.clone(),
                    waits: 0,
                    wait_ns: 0,
                    max_wait_ns: 0,
                    threads: 0,
                    chain,
                };
                (s, Vec::new())
            });
            s.waits += 1;
            s.wait_ns += wait;
            s.max_wait_ns = s.max_wait_ns.max(wait);
            if !threads.contains(&e.tid) {
                threads.push(e.tid);
                s.threads = threads.len();
            }
        } else {
            let w = wakes.entry((e.uaddr, key.clone())).or_insert_with(|| Wake {
                uaddr: uaddr.clone(),
                site: key.clone(),
                wakes: 0,
                woken: 0,
            });
            w.wakes += 1;
            w.woken += e.ret.max(0);
        }
        calls.push(Call {
            tid: e.tid,
            op: e.op,
            uaddr,
            enter_ns: e.enter_ns,
            exit_ns: e.exit_ns,
            ret: e.ret,
            site,
            addresses: walked.addresses.iter().map(|a| format!("{a:#x}")).collect(),
            chain: walked.addresses,
        });
    }
    let mut sites: Vec<Site> = sites.into_values().map(|(s, _)| s).collect();
    sites.sort_by_key(|s| std::cmp::Reverse(s.wait_ns));
    let mut wakes: Vec<Wake> = wakes.into_values().collect();
    wakes.sort_by_key(|w| std::cmp::Reverse(w.woken));
    // Read from user space, the frame pointer is not known: as a snapshot's.
    let in_call = crate::input::unwind::StoppedAt::InCall;
    let blocked = r
        .blocked
        .iter()
        .map(|b| {
            let walked = walker.walk((b.pc, b.sp, 0), in_call, &b.stack, 0);
            let (site, chain) = named_stack(&mut symbolizer, r, &walked.addresses);
            BlockedAt {
                tid: b.tid,
                uaddr: format!("{:#x}", b.uaddr),
                site: site.unwrap_or_else(|| "(unnamed)".into()),
                chain,
                holder: b.holder,
                addresses: walked.addresses.clone(),
            }
        })
        .collect();
    let (locks, locks_lost) = match &r.locks {
        Some((lines, lost)) => (lock_sites(&mut symbolizer, r, lines), *lost),
        None => (Vec::new(), 0),
    };
    Summary {
        calls,
        sites,
        wakes,
        blocked,
        deadlocks: super::hung::deadlocks(&r.blocked),
        locks,
        locks_lost,
    }
}

/// `--locks`' figures named by the program's line: a return address into
/// a wrapper of the C library's (a C++ `std::mutex`) is named by the
/// wrapper's line, as the address says no more.
fn lock_sites(
    symbolizer: &mut Symbolizer,
    r: &Recording,
    lines: &[super::bpf::LockLine],
) -> Vec<LockSite> {
    let mut by_site: BTreeMap<(u64, String), LockSite> = BTreeMap::new();
    for line in lines {
        let (site, chain) = named_stack(symbolizer, r, &[line.ret]);
        // Without a line (a library with no debug information: the
        // loader's own lock calls), its function or module and offset.
        let site = site
            .or_else(|| chain.into_iter().next())
            .unwrap_or_else(|| format!("{:#x}", line.ret));
        let s = by_site
            .entry((line.mutex, site.clone()))
            .or_insert_with(|| LockSite {
                mutex: format!("{:#x}", line.mutex),
                site,
                acquisitions: 0,
                hold_ns: 0,
                holds: 0,
                max_hold_ns: 0,
            });
        s.acquisitions += line.stats.acquisitions;
        s.hold_ns += line.stats.hold_ns;
        s.holds += line.stats.holds;
        s.max_hold_ns = s.max_hold_ns.max(line.stats.max_hold_ns);
    }
    let mut sites: Vec<LockSite> = by_site.into_values().collect();
    sites.sort_by_key(|s| {
        (
            std::cmp::Reverse(s.hold_ns),
            std::cmp::Reverse(s.acquisitions),
        )
    });
    sites
}

fn unix_ns(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// `HH:MM:SS.mmm` UTC.
pub fn clock(t: SystemTime) -> String {
    let ms = unix_ns(t) / 1_000_000;
    let s = ms / 1000;
    format!(
        "{:02}:{:02}:{:02}.{:03}",
        s / 3600 % 24,
        s / 60 % 60,
        s % 60,
        ms % 1000
    )
}

pub fn text(r: &Recording, s: &Summary) -> String {
    let mut out = String::new();
    let seconds = r
        .ended
        .duration_since(r.started)
        .map_or(0.0, |d| d.as_secs_f64());
    let _ = writeln!(
        out,
        "Attached to {} ({}, {}) from {} to {} UTC ({seconds:.2} s), with {}.",
        r.pid,
        r.comm,
        r.exe,
        clock(r.started),
        clock(r.ended),
        r.with()
    );
    let _ = writeln!(out, "{}.", capitalize(r.unseen()));
    if r.locks.is_some() {
        let acquisitions: u64 = s.locks.iter().map(|l| l.acquisitions).sum();
        let _ =
            writeln!(
            out,
            "\nPthread mutex acquisitions (--locks): {acquisitions} at {} lines of {} mutexes{}",
            s.locks.len(),
            s.locks
                .iter()
                .map(|l| &l.mutex)
                .collect::<std::collections::BTreeSet<_>>()
                .len(),
            if s.locks_lost > 0 {
                format!("; {} did not fit the probes' tables and are not counted", s.locks_lost)
            } else {
                String::new()
            }
        );
        for l in s.locks.iter().take(20) {
            let mean = l.hold_ns.checked_div(l.holds).unwrap_or(0);
            let _ = writeln!(
                out,
                "  {:>10.3} ms held  {:>8} acquisitions  mean {:.3} ms  max {:.3} ms  mutex {}  {}",
                l.hold_ns as f64 / 1e6,
                l.acquisitions,
                mean as f64 / 1e6,
                l.max_hold_ns as f64 / 1e6,
                l.mutex,
                l.site
            );
        }
        if s.locks.len() > 20 {
            let _ = writeln!(
                out,
                "  ({} more lines in the JSON recording)",
                s.locks.len() - 20
            );
        }
    }
    let waits: u64 = s.sites.iter().map(|x| x.waits).sum();
    let wait_ns: u64 = s.sites.iter().map(|x| x.wait_ns).sum();
    let waiting: std::collections::BTreeSet<u32> = r
        .events
        .iter()
        .filter(|e| e.is_wait())
        .map(|e| e.tid)
        .collect();
    let _ = writeln!(
        out,
        "\nFutex waits: {waits} in {} threads, {:.3} ms in all",
        waiting.len(),
        wait_ns as f64 / 1e6
    );
    for site in &s.sites {
        let _ = writeln!(
            out,
            "  {:>10.3} ms  {:>6} waits  max {:.3} ms  {} threads  word {}  {}",
            site.wait_ns as f64 / 1e6,
            site.waits,
            site.max_wait_ns as f64 / 1e6,
            site.threads,
            site.uaddr,
            site.site
        );
        for frame in site.chain.iter().skip(1) {
            let _ = writeln!(out, "      called from {frame}");
        }
    }
    if !s.blocked.is_empty() {
        let _ = writeln!(
            out,
            "\nBlocked when attached (waits that began before; how long they had lasted is not known):"
        );
        for b in &s.blocked {
            let held = match b.holder {
                Some(h) => format!(", held by thread {}", thread_text(r, h)),
                None => String::new(),
            };
            let _ = writeln!(
                out,
                "  thread {} waits on word {} at {}{held}",
                thread_text(r, b.tid),
                b.uaddr,
                b.site
            );
        }
    }
    for cycle in &s.deadlocks {
        let steps: Vec<String> = cycle
            .iter()
            .map(|&i| {
                let b = &s.blocked[i];
                format!(
                    "thread {} waits at {} for the mutex at {}, held by thread {}",
                    thread_text(r, b.tid),
                    b.site,
                    b.uaddr,
                    b.holder.map_or_else(|| "?".into(), |h| thread_text(r, h))
                )
            })
            .collect();
        let _ = writeln!(out, "\nDeadlock: {}; none can go on.", steps.join("; "));
    }
    if !r.off_cpu.is_empty() {
        let _ = writeln!(
            out,
            "\nWhy threads stopped (time off their CPU while attached: preempted = runnable, waiting for a CPU; futex-wait = in a futex call; sleeping = interruptible sleep, poll, pipe, socket; uninterruptible = disk I/O, page faults):"
        );
        for o in &r.off_cpu {
            let _ = writeln!(
                out,
                "  thread {:<24} {:<16} {:>10.3} ms in {:>6} periods, longest {:.3} ms",
                thread_text(r, o.tid),
                o.reason.name(),
                o.stats.total_ns as f64 / 1e6,
                o.stats.count,
                o.stats.max_ns as f64 / 1e6
            );
        }
    }
    if !s.wakes.is_empty() {
        let _ = writeln!(out, "\nFutex wakes that woke or moved threads:");
        for w in &s.wakes {
            let _ = writeln!(
                out,
                "  {:>6} wakes  {:>6} woken  word {}  {}",
                w.wakes, w.woken, w.uaddr, w.site
            );
        }
    }
    out
}

/// `TID (name)`.
fn thread_text(r: &Recording, tid: u32) -> String {
    match r.names.get(&tid).filter(|n| !n.is_empty()) {
        Some(name) => format!("{tid} ({name})"),
        None => tid.to_string(),
    }
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

pub fn to_json(r: &Recording, s: &Summary) -> String {
    #[derive(Serialize)]
    struct Module<'a> {
        path: &'a str,
        start: String,
        end: String,
        bias: String,
    }
    let value = serde_json::json!({
        "schema": "locksuit.attach/1",
        "pid": r.pid,
        "comm": r.comm,
        "exe": r.exe,
        "started_unix_ns": unix_ns(r.started),
        "ended_unix_ns": unix_ns(r.ended),
        "with": r.with(),
        "unseen": r.unseen(),
        "scheduler_filter": r.scheduler_filter,
        "off_cpu": r.off_cpu.iter().map(|o| serde_json::json!({
            "tid": o.tid,
            "reason": o.reason.name(),
            "periods": o.stats.count,
            "total_ns": o.stats.total_ns,
            "max_ns": o.stats.max_ns,
        })).collect::<Vec<_>>(),
        "locks": r.locks.as_ref().map(|_| &s.locks),
        "locks_lost": r.locks.as_ref().map(|_| s.locks_lost),
        "threads": r.names.iter().map(|(tid, name)| serde_json::json!({"tid": tid, "name": name})).collect::<Vec<_>>(),
        "modules": r.modules.iter().map(|m| Module {
            path: &m.path,
            start: format!("{:#x}", m.start),
            end: format!("{:#x}", m.end),
            bias: format!("{:#x}", m.bias),
        }).collect::<Vec<_>>(),
        "sites": s.sites,
        "wakes": s.wakes,
        "blocked_at_attach": s.blocked,
        "deadlocks": s.deadlocks.iter().map(|c| c.iter().map(|&i| s.blocked[i].tid).collect::<Vec<_>>()).collect::<Vec<_>>(),
        "calls": s.calls,
    });
    serde_json::to_string_pretty(&value).unwrap_or_default() + "\n"
}
