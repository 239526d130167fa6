//! Loads `locksuit attach`'s BPF program (`analyzer/bpf/futex.bpf.c`, built
//! by `build.rs`), attaches it to the `sys_enter`/`sys_exit` raw
//! tracepoints for one process, and reads its futex calls from the ring
//! buffer; and to `sched_switch`, whose figures of why threads were off
//! their CPU are read at the end. With `--locks`, also uprobes on the C library's mutex calls
//! (see the C file), whose per-mutex, per-line figures are read at the end.
//! Dropping the [`Recorder`] detaches it: nothing was changed in the
//! process.

use aya::maps::{Array, HashMap, MapData, RingBuf};
use aya::programs::{RawTracePoint, TracePoint, UProbe};
use aya::Ebpf;
use std::path::Path;

/// The compiled program; empty when the build had no clang that could
/// compile it (build.rs says so).
static PROGRAM: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/futex.bpf.o"));

/// Bytes of user stack each event carries at most (`STACK_BYTES` in the C).
const STACK_BYTES: usize = 8192;
/// The fixed part of `struct event` before its stack copy.
const HEAD_BYTES: usize = 80;

/// One futex call of the target, as the BPF program saw it.
pub struct Event {
    pub enter_ns: u64,
    pub exit_ns: u64,
    pub uaddr: u64,
    /// User registers at the call: instruction (after the `syscall`),
    /// stack and frame pointers.
    pub ip: u64,
    pub sp: u64,
    pub bp: u64,
    pub ret: i64,
    pub tid: u32,
    pub op: u32,
    /// The return address of the mutex call or condition wait a `--locks`
    /// uretprobe watches in this thread now (0: none): on the stack, the
    /// kernel's trampoline stands in its place.
    pub probed_ret: u64,
    /// The top of the user stack from `sp` up.
    pub stack: Vec<u8>,
}

impl Event {
    fn parse(bytes: &[u8]) -> Option<Event> {
        let word = |i: usize| -> Option<u64> {
            Some(u64::from_ne_bytes(bytes.get(i..i + 8)?.try_into().ok()?))
        };
        let half = |i: usize| -> Option<u32> {
            Some(u32::from_ne_bytes(bytes.get(i..i + 4)?.try_into().ok()?))
        };
        let len = (half(64)? as usize).min(STACK_BYTES);
        Some(Event {
            enter_ns: word(0)?,
            exit_ns: word(8)?,
            uaddr: word(16)?,
            ip: word(24)?,
            sp: word(32)?,
            bp: word(40)?,
            ret: word(48)? as i64,
            tid: half(56)?,
            op: half(60)?,
            probed_ret: word(72)?,
            stack: bytes.get(HEAD_BYTES..HEAD_BYTES + len)?.to_vec(),
        })
    }

    /// Puts the probed call's return address back where a uretprobe's
    /// trampoline (in `trampolines`, the process's `[uprobes]` area)
    /// stands on the stack copy, so that it unwinds as without `--locks`.
    pub fn restore_return_address(&mut self, trampolines: &std::ops::Range<u64>) {
        if self.probed_ret == 0 {
            return;
        }
        for word in self.stack.chunks_exact_mut(8) {
            let value = u64::from_ne_bytes(word.try_into().unwrap_or_default());
            if trampolines.contains(&value) {
                word.copy_from_slice(&self.probed_ret.to_ne_bytes());
            }
        }
    }

    /// The futex command, without the private and clock flags.
    pub fn command(&self) -> u32 {
        self.op & 127
    }

    /// Whether the call waited (or could): FUTEX_WAIT, LOCK_PI, WAIT_BITSET,
    /// WAIT_REQUEUE_PI, LOCK_PI2.
    pub fn is_wait(&self) -> bool {
        matches!(self.command(), 0 | 6 | 9 | 11 | 13)
    }
}

/// `struct lock_key` and `struct lock_stats` of the C file.
#[repr(C)]
#[derive(Clone, Copy)]
struct LockKey {
    mutex: u64,
    ret: u64,
    tid: u32,
    pad: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct LockStats {
    pub acquisitions: u64,
    pub hold_ns: u64,
    pub holds: u64,
    pub max_hold_ns: u64,
}

// SAFETY: plain `repr(C)` integers with no padding, as the C declares them.
unsafe impl aya::Pod for LockKey {}
// SAFETY: as above.
unsafe impl aya::Pod for LockStats {}

/// `struct off_key` and `struct off_stats` of the C file.
#[repr(C)]
#[derive(Clone, Copy)]
struct OffKey {
    tid: u32,
    reason: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct OffStats {
    pub count: u64,
    pub total_ns: u64,
    pub max_ns: u64,
}

/// `struct off_since` of the C file: a live target task's period and its
/// figures so far, per `OFF_*` reason and [`ON_CPU`].
#[repr(C)]
#[derive(Clone, Copy)]
struct OffSince {
    since: u64,
    on_since: u64,
    tid: u32,
    reason: u32,
    periods: [OffStats; PERIOD_KINDS],
}

// SAFETY: plain `repr(C)` integers with no padding, as the C declares them.
unsafe impl aya::Pod for OffKey {}
// SAFETY: as above.
unsafe impl aya::Pod for OffStats {}
// SAFETY: as above (two u64s, two u32s, then u64s: no padding).
unsafe impl aya::Pod for OffSince {}

/// `ON_CPU` of the C file: a task's time on a CPU, kept beside the
/// reasons it was off one.
const ON_CPU: u32 = 4;
/// `PERIOD_KINDS` of the C file: the four reasons and `ON_CPU`.
const PERIOD_KINDS: usize = 5;

/// Why a thread was off its CPU (`OFF_*` in the C file).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub enum OffReason {
    /// Switched out while it could run: waiting for a CPU.
    Preempted,
    /// In a futex call: a lock, condition, join or other futex wait.
    Futex,
    /// Asleep and interruptible: sleeps, polls, pipes, sockets, signals.
    Sleep,
    /// Uninterruptible: disk I/O, page faults, some kernel locks.
    Disk,
}

impl OffReason {
    fn from_raw(raw: u32) -> Option<OffReason> {
        Some(match raw {
            0 => OffReason::Preempted,
            1 => OffReason::Futex,
            2 => OffReason::Sleep,
            3 => OffReason::Disk,
            _ => return None,
        })
    }

    /// Its name in the report and the JSON.
    pub fn name(self) -> &'static str {
        match self {
            OffReason::Preempted => "preempted",
            OffReason::Futex => "futex-wait",
            OffReason::Sleep => "sleeping",
            OffReason::Disk => "uninterruptible",
        }
    }
}

/// One thread's periods off its CPU for one reason.
pub struct OffCpu {
    pub tid: u32,
    pub reason: OffReason,
    pub stats: OffStats,
}

/// What `--locks` saw of one mutex at one line (the caller's return
/// address) in one thread.
pub struct LockLine {
    pub mutex: u64,
    pub ret: u64,
    pub tid: u32,
    pub stats: LockStats,
}

/// The C library functions `--locks` probes: (symbol, entry program,
/// return program).
const LOCK_PROBES: &[(&str, &str, Option<&str>)] = &[
    ("pthread_mutex_lock", "lock_enter", Some("lock_exit")),
    ("pthread_mutex_trylock", "lock_enter", Some("lock_exit")),
    ("pthread_mutex_timedlock", "lock_enter", Some("lock_exit")),
    ("pthread_mutex_unlock", "unlock_enter", None),
    (
        "pthread_cond_wait",
        "cond_wait_enter",
        Some("cond_wait_exit"),
    ),
    (
        "pthread_cond_timedwait",
        "cond_wait_enter",
        Some("cond_wait_exit"),
    ),
];

/// The loaded, attached program.
pub struct Recorder {
    // Kept for its links: dropping it detaches the program.
    ebpf: Ebpf,
    ring: RingBuf<MapData>,
    /// Which tracepoints see the futex calls, in words, and where not
    /// the futex call's own, why not.
    syscall_probes: (&'static str, Option<String>),
}

/// The futex system call's own tracepoints, which only futex calls run.
const FUTEX_TRACEPOINTS: &str = "the syscalls:sys_enter_futex/sys_exit_futex tracepoints";
/// Every system call's, where those cannot be found.
const RAW_SYSCALL_TRACEPOINTS: &str = "the sys_enter/sys_exit raw tracepoints";

/// Whether the futex call's own tracepoints can be found (or why not):
/// tracefs has them (their ids are read from it). Where tracefs is not
/// mounted, it is mounted for this thread alone, in a mount namespace of
/// its own that nothing else sees. `LOCKSUIT_ATTACH_RAW_SYSCALLS=1` says not
/// to (the way every system call is probed, kept for kernels without them).
fn futex_tracepoints_found() -> Result<(), String> {
    if std::env::var_os("LOCKSUIT_ATTACH_RAW_SYSCALLS").is_some_and(|v| v != "0" && !v.is_empty()) {
        return Err("LOCKSUIT_ATTACH_RAW_SYSCALLS asked for these".into());
    }
    const TRACEFS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];
    let found = || {
        TRACEFS.iter().any(|t| {
            Path::new(t)
                .join("events/syscalls/sys_enter_futex/id")
                .exists()
        })
    };
    if found() {
        return Ok(());
    }
    let mounted = TRACEFS
        .iter()
        .any(|t| std::fs::read_dir(t).is_ok_and(|mut entries| entries.next().is_some()));
    if mounted {
        return Err("tracefs has no syscalls:sys_enter_futex".into());
    }
    // SAFETY: unshare and mount take no pointers but the NUL-terminated
    // literals below. From unshare on, this thread has a mount namespace
    // of its own for the rest of its life (a copy of the one it had, with
    // its own working directory and root, the same places): it does not see
    // mounts made elsewhere after this, nor does anything else see its own.
    unsafe {
        if libc::unshare(libc::CLONE_NEWNS) != 0 {
            return Err(format!(
                "tracefs is not mounted and could not be for attach alone: {}",
                std::io::Error::last_os_error()
            ));
        }
        // Private, so that the mount below is not passed on to the
        // namespace this one was copied from.
        let private = libc::mount(
            core::ptr::null(),
            c"/".as_ptr(),
            core::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            core::ptr::null(),
        ) == 0;
        if !private
            || libc::mount(
                c"nodev".as_ptr(),
                c"/sys/kernel/tracing".as_ptr(),
                c"tracefs".as_ptr(),
                0,
                core::ptr::null(),
            ) != 0
        {
            return Err(format!(
                "tracefs is not mounted and could not be for attach alone: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    if found() {
        Ok(())
    } else {
        Err("tracefs has no syscalls:sys_enter_futex".into())
    }
}

/// An error and its sources, in one line.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text = format!("{text}: {s}");
        source = s.source();
    }
    text
}

/// Why a program could not be loaded or attached, short enough for the
/// report's "with" line (a verifier's log is many lines: its first).
fn short_reason(e: &dyn std::error::Error) -> String {
    let text = error_chain(e);
    let first = text.lines().next().unwrap_or_default();
    first.chars().take(160).collect()
}

/// Loads and attaches the futex call's tracepoint programs; on any failure
/// takes back what it did.
fn attach_futex_tracepoints(ebpf: &mut Ebpf) -> Result<(), String> {
    let mut attach = |program: &str, name: &str| -> Result<(), String> {
        let p: &mut TracePoint = ebpf
            .program_mut(program)
            .ok_or("the BPF program lacks a part")?
            .try_into()
            .map_err(|e| short_reason(&e))?;
        p.load()
            .map_err(|e| format!("loading {program}: {}", short_reason(&e)))?;
        p.attach("syscalls", name)
            .map(drop)
            .map_err(|e| format!("attaching {program}: {}", short_reason(&e)))
    };
    let done = attach("futex_call", "sys_enter_futex")
        .and_then(|()| attach("futex_return", "sys_exit_futex"));
    if done.is_err() {
        for program in ["futex_call", "futex_return"] {
            if let Some(p) = ebpf
                .program_mut(program)
                .and_then(|p| <&mut TracePoint>::try_from(p).ok())
            {
                let _ = p.unload();
            }
        }
    }
    done
}

/// Whether this build carries its BPF program.
pub fn built_with_bpf() -> bool {
    !PROGRAM.is_empty()
}

impl Recorder {
    /// Loads and attaches the program for process `pid`, with uprobes on
    /// the mutex calls of the C library at `locks` if given; the error is
    /// one line saying what is missing.
    pub fn attach(pid: u32, locks: Option<&Path>) -> Result<Recorder, String> {
        let why = |what: &str, e: &dyn std::error::Error| {
            let text = error_chain(e);
            // SAFETY: geteuid has no preconditions and cannot fail.
            let root = unsafe { libc::geteuid() } == 0;
            let hint = if !root || text.contains("Operation not permitted") {
                " (needs root, or CAP_BPF and CAP_PERFMON)"
            } else {
                ""
            };
            format!("cannot {what}: {text}{hint}")
        };
        let mut ebpf = Ebpf::load(PROGRAM).map_err(|e| why("load the BPF program", &e))?;
        let mut config: Array<_, u32> = ebpf
            .map_mut("config")
            .ok_or("the BPF program has no config map")?
            .try_into()
            .map_err(|e| why("open the config map", &e))?;
        config
            .set(0, pid, 0)
            .map_err(|e| why("set the target process", &e))?;
        let futex_tracepoints =
            futex_tracepoints_found().and_then(|()| attach_futex_tracepoints(&mut ebpf));
        let by_futex_tracepoints = futex_tracepoints.is_ok();
        let raw: &[(&str, &str)] = if by_futex_tracepoints {
            &[("on_switch", "sched_switch")]
        } else {
            &[
                ("futex_enter", "sys_enter"),
                ("futex_exit", "sys_exit"),
                ("on_switch", "sched_switch"),
            ]
        };
        for &(program, tracepoint) in raw {
            let p: &mut RawTracePoint = ebpf
                .program_mut(program)
                .ok_or("the BPF program lacks a part")?
                .try_into()
                .map_err(|e| why("find the BPF program", &e))?;
            p.load().map_err(|e| why(&format!("load {program}"), &e))?;
            p.attach(tracepoint)
                .map_err(|e| why(&format!("attach to raw tracepoint {tracepoint}"), &e))?;
        }
        if let Some(libc) = locks {
            // Each program is loaded once, and attached to every function
            // it serves.
            let mut loaded = Vec::new();
            for &(symbol, entry, exit) in LOCK_PROBES {
                for program in std::iter::once(entry).chain(exit) {
                    let p: &mut UProbe = ebpf
                        .program_mut(program)
                        .ok_or("the BPF program lacks a part")?
                        .try_into()
                        .map_err(|e| why("find the BPF program", &e))?;
                    if !loaded.contains(&program) {
                        p.load().map_err(|e| why(&format!("load {program}"), &e))?;
                        loaded.push(program);
                    }
                    p.attach(Some(symbol), 0, libc, Some(pid as i32))
                        .map_err(|e| {
                            why(
                                &format!("put a uprobe on {symbol} in {}", libc.display()),
                                &e,
                            )
                        })?;
                }
            }
        }
        let ring = RingBuf::try_from(ebpf.take_map("events").ok_or("no events map")?)
            .map_err(|e| why("open the ring buffer", &e))?;
        let syscall_probes = match futex_tracepoints {
            Ok(()) => (FUTEX_TRACEPOINTS, None),
            Err(why) => (RAW_SYSCALL_TRACEPOINTS, Some(why)),
        };
        Ok(Recorder {
            ebpf,
            ring,
            syscall_probes,
        })
    }

    /// Every thread's figures so far, per kind of period (`OFF_*`, `ON_CPU`):
    /// of tasks that ended (`off_cpu`) and of live ones (their entries in
    /// `off_tasks`), a thread's summed. A period still open is not in them.
    fn periods(&self) -> std::collections::BTreeMap<(u32, u32), OffStats> {
        let mut periods: std::collections::BTreeMap<(u32, u32), OffStats> = Default::default();
        let mut add = |tid: u32, kind: u32, stats: &OffStats| {
            if stats.count == 0 {
                return;
            }
            let sum = periods.entry((tid, kind)).or_default();
            sum.count += stats.count;
            sum.total_ns += stats.total_ns;
            sum.max_ns = sum.max_ns.max(stats.max_ns);
        };
        if let Some(map) = self.ebpf.map("off_cpu") {
            if let Ok(ended) = HashMap::<_, OffKey, OffStats>::try_from(map) {
                for (key, stats) in ended.iter().flatten() {
                    add(key.tid, key.reason, &stats);
                }
            }
        }
        if let Some(map) = self.ebpf.map("off_tasks") {
            if let Ok(live) = HashMap::<_, u64, OffSince>::try_from(map) {
                for (_, task) in live.iter().flatten() {
                    for (kind, stats) in task.periods.iter().enumerate() {
                        add(task.tid, kind as u32, stats);
                    }
                }
            }
        }
        periods
    }

    /// Which tracepoints see the futex calls, in words (and, where not
    /// the futex call's own, why not).
    pub fn syscall_probes(&self) -> (&'static str, Option<String>) {
        self.syscall_probes.clone()
    }

    /// How the scheduler program told the target's switched-in tasks from
    /// others' (`config[CONFIG_TGID_CHECK]` of the C file): "by-process"
    /// when reading a task's process from the kernel's task was seen to give
    /// the target's id (the kernel's BTF placed the read), "lookup" when it
    /// was not (every switched-in task looked up), "unchecked" when no
    /// target thread left its CPU.
    pub fn scheduler_filter(&self) -> &'static str {
        let check = self
            .ebpf
            .map("config")
            .and_then(|map| Array::<_, u32>::try_from(map).ok())
            .and_then(|config| config.get(&1, 0).ok());
        match check {
            Some(1) => "by-process",
            Some(2) => "lookup",
            _ => "unchecked",
        }
    }

    /// The scheduler program's figures, at the end of the recording: why
    /// the process's threads were off their CPU, per thread and reason (a
    /// period still open is not in them), and each thread's time on a CPU
    /// (from its first switch away after attach: a lower bound). The
    /// program is detached first: it deletes an ended task's entry, and a
    /// hash map read while entries go may skip or repeat some.
    pub fn scheduler_figures(&mut self) -> (Vec<OffCpu>, std::collections::BTreeMap<u32, u64>) {
        if let Some(p) = self
            .ebpf
            .program_mut("on_switch")
            .and_then(|p| <&mut RawTracePoint>::try_from(p).ok())
        {
            let _ = p.unload();
        }
        let periods = self.periods();
        let on_cpu = periods
            .iter()
            .filter(|((_, kind), _)| *kind == ON_CPU)
            .map(|(&(tid, _), stats)| (tid, stats.total_ns))
            .collect();
        let off_cpu = periods
            .into_iter()
            .filter_map(|((tid, kind), stats)| {
                let reason = OffReason::from_raw(kind)?;
                Some(OffCpu { tid, reason, stats })
            })
            .collect();
        (off_cpu, on_cpu)
    }

    /// What `--locks` counted so far, per mutex and line, and how many
    /// entries did not fit its maps.
    pub fn lock_lines(&self) -> (Vec<LockLine>, u64) {
        let mut lines = Vec::new();
        if let Some(map) = self.ebpf.map("lock_stats") {
            if let Ok(stats) = HashMap::<_, LockKey, LockStats>::try_from(map) {
                for (key, stats) in stats.iter().flatten() {
                    lines.push(LockLine {
                        mutex: key.mutex,
                        ret: key.ret,
                        tid: key.tid,
                        stats,
                    });
                }
            }
        }
        let lost = self
            .ebpf
            .map("lock_lost")
            .and_then(|m| Array::<_, u64>::try_from(m).ok())
            .and_then(|a| a.get(&0, 0).ok())
            .unwrap_or(0);
        (lines, lost)
    }

    /// Every event the ring buffer holds now.
    pub fn drain(&mut self, into: &mut Vec<Event>) {
        while let Some(item) = self.ring.next() {
            if let Some(event) = Event::parse(&item) {
                into.push(event);
            }
        }
    }
}
