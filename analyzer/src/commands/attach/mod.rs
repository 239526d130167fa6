//! `locksuit attach PID`: records a running process's futex calls through
//! the kernel (a BPF program on the system-call tracepoints, no code in the
//! process) until `--duration` ends, Ctrl-C, or the process exits; then
//! writes what it saw (`locksuit-attach.PID.json`, see docs/commands.md)
//! and prints its report; with `--locks`, also every pthread mutex
//! acquisition and hold through uprobes. Detaching leaves the process as
//! it was.

mod bpf;
mod hung;
mod modules;
mod report;

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
    /// Directory for the recording, locksuit-attach.PID.json (default: the current one).
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
    let locks = args.locks.then(|| recorder.lock_lines());
    let mut off_cpu = recorder.off_cpu();
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
        locks,
        off_cpu,
    };
    let summary = report::summarize(&recording);
    let dir = args.dir.unwrap_or_else(|| PathBuf::from("."));
    let path = dir.join(format!("locksuit-attach.{pid}.json"));
    if let Err(e) = std::fs::create_dir_all(&dir)
        .and_then(|()| std::fs::write(&path, report::to_json(&recording, &summary)))
    {
        return fail(format!("cannot write {}: {e}", path.display()));
    }
    print!("{}", report::text(&recording, &summary));
    eprintln!("locksuit: recording written to {}", path.display());
    EXIT_OK
}
