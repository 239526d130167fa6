//! `locksuit attach PID`: records a running process's futex calls through
//! the kernel (a BPF program on the system-call tracepoints, no code in the
//! process) until `--duration` ends, Ctrl-C, or the process exits; then
//! writes what it saw as a trace every command reads
//! (`locksuit.EXE.PID.trace`, trace.rs) and as JSON
//! (`locksuit-attach.PID.json`, see docs/commands.md), and prints its own
//! report, then `locksuit report`'s of the trace; with `--locks`, also
//! every pthread mutex acquisition and hold through uprobes. Detaching
//! leaves the process as it was.

mod bpf;
mod hung;
mod modules;
mod report;
mod trace;

use crate::base::exit::{EXIT_OK, EXIT_USAGE};
use clap::Args;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

#[derive(Args)]
pub struct AttachArgs {
    /// The process to record (all its threads, also those started while attached).
    #[arg(value_name = "PID")]
    pub pid: u32,
    /// Stop after this many seconds (default: at Ctrl-C or when the process exits).
    #[arg(long, value_name = "S")]
    pub duration: Option<f64>,
    /// Report only these threads.
    #[arg(long, value_name = "TID,...", value_delimiter = ',')]
    pub threads: Vec<u32>,
    /// Directory for the recording: the trace locksuit.EXE.PID.trace, which
    /// every command reads, and locksuit-attach.PID.json (default: the
    /// current one).
    #[arg(short = 'o', long = "dir", value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Also count every pthread mutex acquisition, per mutex and line, with
    /// its hold time: uprobes on the C library's mutex and condition-wait
    /// calls. Costly: each such call of the process stops in the kernel
    /// (a few microseconds; see docs/performance.md).
    #[arg(long)]
    pub locks: bool,
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_interrupt(_signal: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// Whether the process is gone (or a zombie: it runs no more).
fn exited(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X'])),
        Err(_) => true,
    }
}

fn read_name(path: String) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim_end().to_string())
}

pub fn attach(args: AttachArgs) -> i32 {
    let fail = |why: String| {
        eprintln!("locksuit attach: {why}");
        EXIT_USAGE
    };
    if !bpf::built_with_bpf() {
        return fail("this locksuit was built without its BPF programs (no clang-19 at build time); rebuild with clang-19 installed".into());
    }
    let pid = args.pid;
    if exited(pid) {
        return fail(format!("no running process {pid}"));
    }
    let comm = read_name(format!("/proc/{pid}/comm")).unwrap_or_default();
    let exe = std::fs::read_link(format!("/proc/{pid}/exe"))
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    // `--locks` needs the C library's path before attaching; otherwise the
    // modules are read after, so that a missing privilege is said as BPF's.
    let mut libc = None;
    if args.locks {
        match modules::c_library_of(pid) {
            Ok(path) => libc = Some(path),
            Err(why) => return fail(why),
        }
    }
    let mut recorder = match bpf::Recorder::attach(pid, libc.as_deref()) {
        Ok(r) => r,
        Err(why) => return fail(why),
    };
    // After the tracepoints: a wait that began before them is read here.
    let blocked = hung::blocked_threads(pid);
    let mut modules = match modules::read_modules(pid) {
        Ok(m) => m,
        Err(why) => return fail(why),
    };
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(
            libc::SIGINT,
            on_interrupt as *const () as libc::sighandler_t,
        );
    }
    let started = SystemTime::now();
    let start_mono_ns = crate::base::time::monotonic_now_ns();
    let (ppid, cpus) = (parent_of(pid), cpus_of(pid));
    let deadline = args
        .duration
        .map(|s| Instant::now() + Duration::from_secs_f64(s.max(0.0)));
    eprintln!(
        "locksuit: attached to {pid} ({comm}); until {}",
        match args.duration {
            Some(s) => format!("{s} s have passed, Ctrl-C or it exits"),
            None => "Ctrl-C or it exits".into(),
        }
    );
    let mut events = Vec::new();
    let mut names = std::collections::BTreeMap::new();
    // With --locks: where the kernel's uretprobe trampolines are, read
    // while the process lives (it is made at the first probed return).
    let mut trampolines = None;
    loop {
        let before = events.len();
        recorder.drain(&mut events);
        if args.locks && trampolines.is_none() {
            trampolines = modules::uprobes_area(pid);
        }
        for e in &events[before..] {
            names.entry(e.tid).or_insert_with(|| {
                read_name(format!("/proc/{pid}/task/{}/comm", e.tid)).unwrap_or_default()
            });
        }
        // Every thread's name while it lives (one that ends before the
        // recording does is still named in the report).
        if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
            for tid in tasks
                .flatten()
                .filter_map(|t| t.file_name().to_str()?.parse::<u32>().ok())
            {
                names.entry(tid).or_insert_with(|| {
                    read_name(format!("/proc/{pid}/task/{tid}/comm")).unwrap_or_default()
                });
            }
        }
        if STOP.load(Ordering::Relaxed)
            || deadline.is_some_and(|d| Instant::now() >= d)
            || exited(pid)
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    recorder.drain(&mut events);
    let ended = SystemTime::now();
    let end_mono_ns = crate::base::time::monotonic_now_ns();
    // Who waits still as the recording ends (a wait that began before it
    // and ended meanwhile made no event: its end is not seen otherwise).
    let blocked_at_end: Vec<(u32, u64)> = if exited(pid) {
        Vec::new()
    } else {
        hung::blocked_threads(pid)
            .iter()
            .map(|b| (b.tid, b.uaddr))
            .collect()
    };
    let locks = args.locks.then(|| recorder.lock_lines());
    let scheduler_filter = recorder.scheduler_filter();
    let (mut off_cpu, on_cpu) = recorder.scheduler_figures();
    let syscall_probes = recorder.syscall_probes();
    if let Some(trampolines) = &trampolines {
        for e in &mut events {
            e.restore_return_address(trampolines);
        }
    }
    drop(recorder); // detaches
    if let Ok(now) = modules::read_modules(pid) {
        for m in now {
            if !modules.iter().any(|o| o.path == m.path) {
                modules.push(m);
            }
        }
    }
    let mut blocked = blocked;
    if !args.threads.is_empty() {
        events.retain(|e| args.threads.contains(&e.tid));
        blocked.retain(|b| args.threads.contains(&b.tid));
        off_cpu.retain(|o| args.threads.contains(&o.tid));
    }
    for tid in blocked
        .iter()
        .map(|b| b.tid)
        .chain(off_cpu.iter().map(|o| o.tid))
    {
        names.entry(tid).or_insert_with(|| {
            read_name(format!("/proc/{pid}/task/{tid}/comm")).unwrap_or_default()
        });
    }
    let recording = report::Recording {
        pid,
        comm,
        exe,
        started,
        ended,
        modules,
        names,
        events,
        blocked,
        blocked_at_end,
        on_cpu,
        locks,
        off_cpu,
        scheduler_filter,
        syscall_probes,
    };
    let summary = report::summarize(&recording);
    let dir = args.dir.unwrap_or_else(|| PathBuf::from("."));
    let path = dir.join(format!("locksuit-attach.{pid}.json"));
    if let Err(e) = std::fs::create_dir_all(&dir)
        .and_then(|()| std::fs::write(&path, report::to_json(&recording, &summary)))
    {
        return fail(format!("cannot write {}: {e}", path.display()));
    }
    let period = trace::Period {
        start_mono_ns,
        end_mono_ns,
        ppid,
        cpus,
    };
    let made_with = format!(
        "recorded from outside the process by locksuit attach from {} to {} UTC, with {}",
        report::clock(recording.started),
        report::clock(recording.ended),
        recording.with()
    );
    let bytes = trace::build(
        &recording,
        &summary,
        &period,
        &[&made_with, recording.unseen()],
    );
    let name = crate::base::words::basename(&recording.exe).to_string();
    let name = if name.is_empty() {
        recording.comm.clone()
    } else {
        name
    };
    let trace_path = match write_new(&dir, &format!("locksuit.{name}.{pid}"), &bytes) {
        Ok(p) => p,
        Err(e) => return fail(format!("cannot write a trace in {}: {e}", dir.display())),
    };
    print!("{}", report::text(&recording, &summary));
    // Then what `locksuit report` says of the trace, with its defaults.
    println!();
    if let Err(e) = print_trace_report(&trace_path) {
        eprintln!("locksuit: no report of {}: {e}", trace_path.display());
    }
    eprintln!(
        "locksuit: recording written to {} and {} (locksuit report reads it)",
        trace_path.display(),
        path.display()
    );
    EXIT_OK
}

/// Writes `bytes` to `DIR/STEM.trace`, or `STEM.1.trace`, `STEM.2.trace`…
/// if it is taken: a trace already there is never overwritten.
fn write_new(dir: &std::path::Path, stem: &str, bytes: &[u8]) -> std::io::Result<PathBuf> {
    use std::io::Write;
    for n in 0..u32::MAX {
        let path = match n {
            0 => dir.join(format!("{stem}.trace")),
            n => dir.join(format!("{stem}.{n}.trace")),
        };
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(mut f) => return f.write_all(bytes).map(|()| path),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::other(format!(
        "every numbered {stem} is taken"
    )))
}

/// Prints `locksuit report TRACE` as its defaults make it.
fn print_trace_report(trace: &std::path::Path) -> Result<(), String> {
    use crate::commands::options::{build_report, ReportOptions};
    use clap::{Args, FromArgMatches};
    let matches = ReportOptions::augment_args(clap::Command::new("report"))
        .try_get_matches_from(["report"])
        .map_err(|e| e.to_string())?;
    let options = ReportOptions::from_arg_matches(&matches).map_err(|e| e.to_string())?;
    let limits = options.limits().map_err(|e| e.to_string())?;
    let report = build_report(
        &[trace.to_path_buf()],
        &options.selection(),
        (&limits, &[]),
        &crate::input::stream::StreamFilter::Off,
    )
    .map_err(|e| e.to_string())?;
    crate::commands::output::print(report, &options)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// The parent of `pid` (0 if it cannot be read).
fn parent_of(pid: u32) -> u32 {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let (_, rest) = stat.rsplit_once(')')?;
            rest.split_whitespace().nth(1)?.parse().ok()
        })
        .unwrap_or(0)
}

/// Processors `pid` may run on (0 if it cannot be read).
fn cpus_of(pid: u32) -> u32 {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity
    // writes at most its size, given.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(pid as i32, std::mem::size_of::<libc::cpu_set_t>(), &mut set)
            != 0
        {
            return 0;
        }
        libc::CPU_COUNT(&set) as u32
    }
}
