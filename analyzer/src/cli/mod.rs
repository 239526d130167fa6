//! The command line: the subcommands and their help, and the dispatch to
//! the command that does each (`crate::commands`; their options are in
//! `commands/options.rs`, `gate.rs` and `top.rs`).

use crate::base::exit::*;
use crate::commands::options::{
    CompilerArgs, EventsArgs, ExportArgs, FlamegraphArgs, ReportArgs, RunArgs,
};
use crate::commands::{attach, cc, gate, output, run, top};
use clap::{Parser, Subcommand};

pub mod generate;

const AFTER_HELP: &str = "\
Recording:
  LD_PRELOAD=/abs/path/libsyncshim.so ./app     record any dynamically linked program
  locksuit run -- ./app args                   the same, into a fresh directory, then report
  locksuit run --deadlock-timeout 5 -- ./app   stop it if it stays deadlocked for 5 s

Reading the report:
  deadlock           threads that can never run again (a wait-for cycle, a thread relocking
                     a mutex it holds, a lock whose holder exited, nobody left to wake anyone)
  potential-deadlock concrete locks taken in orders that form a cycle (A then B here, B then
                     A there); one finding lists every cycle through the same lines
  family-order-inversion  locks made at one line taken two at a time, at the same lines,
                     in both address orders, with no cycle seen (transfer(a, b) / (b, a))
  misuse             a lock used against its rules: unlocked while not held or by another
                     thread, destroyed held or waited on, a condition waited on without
                     its mutex held or with two mutexes, a lock relocked by its holder
  single-thread-lock one thread alone took it in this run: an observation (evidence: run),
                     left out below --min-acquisitions in all
  unnecessary-lock   the verdict: one thread alone took it in each of --min-runs runs
                     reported together or saved (--against-history), or the data it
                     guards never left the thread (locksuit cc, LOCKSUIT_DATA_SAMPLE=all)
  unsuitable-site    a line whose locks are rarely shared between threads (sharing ratio
                     below --threshold)
  private-data-under-lock  a line whose critical sections touch only data no other
                     thread touches, under a lock another line needs for shared data
                     (programs built with `locksuit cc`, as the next two)
  disjoint-data      threads wait for a lock whose users each touch only their own data
  read-only-sharing  the data under a lock is only read under it (an rwlock would do)
  false-sharing      data that different threads each use alone shares a cache line
  long-hold          one hold of --long-hold-ms or more that made a thread wait, and
                     whether its holder ran meanwhile or was off the CPU (preempted, blocked)
  starvation         one wait during which others took the lock --starvation times
  high-contention    at least --contention-share of a lock's acquisitions waited (1 ms and
                     1% of the run or more)
  asymmetric-contention  locks of one family taken at one line whose contention differs
                     by --asymmetry x
  over-synchronization   a lock taken --over-sync-per-sec times a second that almost never
                     contends (under 0.1% of acquisitions)
  blocking-under-lock    a thread slept, polled or did I/O holding a lock another thread wanted
  blocking classes   why threads stopped: sync, sleep, io-file, io-net, poll, other, or
                     your own (--classes FILE: `class = glob` lines matched against the
                     blocking call and its stack's functions, most specific first)
  sharing ratio      how evenly a lock's threads engage it: 0 = one thread, 1 = evenly
                     (the others' share over the most it can be, 1 - 1/threads)
  suppressions       --suppress FILE, $LOCKSUIT_SUPPRESS and a locksuit.supp up to the
                     repository's root: [name] entries of kind, lock, frame and module globs;
                     what they match is counted apart, not gated on. A built-in set covers
                     CPython's own locks and glibc's (--no-default-suppressions); entries for
                     the findings left: --gen-suppressions
  names              &variable and its path for a lock in a variable (&table[3],
                     &chop[4].m), else the line that made it (function@file:line, #N
                     within the family made there)

Environment:
  LOCKSUIT_DIR          where traces are written (and where `report` looks by default)
  LOCKSUIT_MAX_MB       size cap of one trace in MiB (default 256)
  LOCKSUIT_HOLD_SAMPLE  also time 1 in N uncontended holds (default 0: only contended)
  LOCKSUIT_EVENTS       contended (default): events for contended operations; all: every one
  LOCKSUIT_MODE         full (default); lean: mutexes counted per line with their contended
                        waits and nothing per hold, for profiling left on (`run --lean`)
  LOCKSUIT_FLIGHT       1: once the trace is full, overwrite the oldest events (keep the end)
  LOCKSUIT_CLOCK        auto (default): calibrated invariant TSC where safe; monotonic
  LOCKSUIT_BLOCK_MIN_US record a sleep, poll, I/O call, join or barrier wait only if it
                        blocked this long (default 50)
  LOCKSUIT_CLASSES      the signature file `report --classes` reads when not given
  LOCKSUIT_SUPPRESS     the suppression file `report --suppress` reads when none is given
  LOCKSUIT_GATE         off: `locksuit cc` calls the shim on every access (clang's sanitizer
                        coverage) instead of behind the access gate
  LOCKSUIT_DATA_SAMPLE  built with `locksuit cc`: N (default 64) records the accesses of
                        each line's first 4 engagements of a lock, then 1 in N, and of
                        each its first 4096; all: every engagement's (exact, much dearer)
  LOCKSUIT_SWITCHES     1: also record the kernel's context switches (preemption, page
                        faults, system calls made around libc)
  LOCKSUIT_POLICY       a recording policy file (docs/policy.md); `run --policy FILE`
  LOCKSUIT_QUIET        1: the shim writes nothing on the program's stderr (its warnings
                        are in the trace and the report either way); `run` sets it

Exit status:
  0  success
  1  a requested gate failed (--fail-on-findings found something)
  2  bad usage or unreadable input (the message names the file and the problem; for a
     malformed suppression file, FILE:LINE)
  `run` exits with the command's own status, or 128+N if a signal N killed it; 1 if it
  stopped the command for a deadlock (--deadlock-timeout).";

#[derive(Parser)]
#[command(
    name = "locksuit",
    version,
    about = "Finds the locks a program pays for without need, and the ones that serialize its threads.",
    after_help = AFTER_HELP
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Report on recorded traces.
    ///
    /// PATH is a trace file or a directory (every locksuit.*.trace in it). With no PATH,
    /// the newest trace in $LOCKSUIT_DIR (or else the current directory) that recorded any
    /// lock activity, named on stderr; with --exe or --pid, every matching trace there. A
    /// file named twice (or also through its directory) is read once. A trace whose program
    /// is still running is read as far as it was written. Processes that recorded no lock
    /// activity (a shell, `env`) share one line at the end of a text report.
    Report(ReportArgs),
    /// Record a command and all its children, then report on every process.
    ///
    /// Traces go to a fresh directory, mode 0700 (./locksuit-run.N unless --dir is given),
    /// which is kept so the same run can be reported again, e.g. at another threshold.
    /// Ctrl-C reaches the command; SIGTERM, SIGHUP, SIGINT and SIGQUIT sent to locksuit
    /// alone (kill) are passed on to it. Either way locksuit waits for it, then reports.
    Run(RunArgs),
    /// Record a running process through the kernel (BPF; root), then report on it.
    ///
    /// Every futex wait and wake of all its threads (also those started while attached),
    /// with the user stack of each, until --duration ends, Ctrl-C, or it exits; nothing is
    /// loaded into the process, and detaching leaves it as it was. Writes
    /// DIR/locksuit-attach.PID.json and prints the futex waits by word and line. Without
    /// BPF (not root, no clang at build time) it says what is missing and exits 2.
    Attach(attach::AttachArgs),
    /// Print each lock's and condition variable's events in causal order.
    ///
    /// Events are ordered by the object's own sequence number (its releases or notifies so
    /// far), never by when they were written or by comparing clocks across threads. Each
    /// release names the thread it handed the lock to; each request names the holder. The
    /// default recording mode writes events for contended operations only; record with
    /// LOCKSUIT_EVENTS=all to see every acquisition and release.
    Events(EventsArgs),
    /// Export the timeline of every blocking period for other tools.
    ///
    /// --format chrome writes Chrome trace-event JSON, which Perfetto (ui.perfetto.dev)
    /// and chrome://tracing open: one track per thread, one slice per blocking period
    /// (category: its blocking class; arguments: its line, lock and call stack), and a
    /// flow arrow from the thread that released a lock to the wait it ended.
    Export(ExportArgs),
    /// Draw a flame graph (SVG) of the call stacks, weighted by --weight.
    ///
    /// Wait (the default): where threads blocked, and for how long: contended lock waits
    /// and every recorded blocking period, the blocking call on top. Hold, contentions,
    /// acquisitions: the lines that engaged locks. Drawn by the inferno crate; the same
    /// stacks as `report --format folded`.
    Flamegraph(FlamegraphArgs),
    /// Compare two runs, or a run with the spread of the last N saved runs; exit 1 if
    /// anything regressed.
    ///
    /// BASE and CUR are JSON reports (`report --format json -o FILE`), trace files or
    /// directories; --against-history N takes the last N saved runs as the base. Locks,
    /// sites and findings are matched by their stable names, per program. Each measure
    /// is held to the base runs' median and spread (1.4826 x the median absolute
    /// deviation). A regression: a lock's or site's contended share (by at least 5
    /// contended acquisitions) or share of the threads' time spent waiting (with 1 ms of
    /// waiting) past the median by the most of --spreads spreads, --threshold and 1
    /// point, and above all base runs but one (all, with fewer than three); a new
    /// deadlock, potential-deadlock, family-order-inversion or misuse finding; a new
    /// timing finding (long-hold, starvation, high-contention, ...) that most base runs
    /// and CUR have, or whose lock or site regressed. Wait and hold per acquisition and
    /// acquisitions are told, never a regression. Each verdict is printed with its
    /// numbers. Exit status: 0 no regression, 1 regressed, 2 bad input (different
    /// programs, other schema versions, an unreadable history).
    Diff(gate::DiffArgs),
    /// List the runs saved with `report --save`, with their contended share and share
    /// of the threads' time spent waiting (what `diff --against-history` judges).
    History(gate::HistoryArgs),
    /// The C compiler (clang) with access instrumentation, for data-level suitability:
    /// `CC="locksuit cc" make`.
    ///
    /// Every load and store calls the shim, which records those made while a lock is
    /// held: the report then judges each line by what its critical sections touched.
    /// Without the shim the program runs as before. The compiler: $LOCKSUIT_CC, else
    /// clang-19, else clang.
    #[command(disable_help_flag = true)]
    Cc(CompilerArgs),
    /// The C++ compiler (clang++) with access instrumentation; as `cc` ($LOCKSUIT_CXX).
    #[command(name = "c++", disable_help_flag = true)]
    Cxx(CompilerArgs),
    /// A live view of a running program: locks by wait in the last interval and in all,
    /// threads blocked now and on whom, the hottest lines; refreshed every second.
    ///
    /// Keys: s sorts by the interval or the total, p pauses, q quits.
    Top(top::TopArgs),
    /// Write locksuit's man pages or a shell's completion script (made from these options).
    Generate(generate::GenerateArgs),
}

/// Entry point; returns the process exit status.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // --help and --version: clap prints them as they are.
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            return EXIT_OK;
        }
        Err(e) => {
            eprintln!("{}", usage_error(&e));
            return EXIT_USAGE;
        }
    };
    match cli.command {
        Command::Report(args) => output::report(args),
        Command::Run(args) => run::run(args),
        Command::Attach(args) => attach::attach(args),
        Command::Events(args) => output::events(args),
        Command::Export(args) => output::export(args),
        Command::Flamegraph(args) => output::flamegraph(args),
        Command::Diff(args) => gate::diff(args),
        Command::History(args) => gate::history_command(args),
        Command::Cc(args) => cc::run(&args.args, false),
        Command::Cxx(args) => cc::run(&args.args, true),
        Command::Top(args) => top::top(args),
        Command::Generate(args) => generate::generate(args),
    }
}

/// A usage error as two lines: clap's message (its details and tip folded
/// in) on one, then where to read more. Clap's own rendering takes five or
/// six lines.
fn usage_error(e: &clap::Error) -> String {
    use clap::CommandFactory;
    let message = if e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        "no command given (report, run or events)".to_string()
    } else {
        let rendered = e.render().to_string();
        let mut parts: Vec<String> = Vec::new();
        for line in rendered.lines().map(str::trim).filter(|l| !l.is_empty()) {
            if line.starts_with("Usage:") || line.starts_with("For more information") {
                break;
            }
            if let Some(text) = line.strip_prefix("error:") {
                parts.push(text.trim().to_string());
            } else if let Some(tip) = line.strip_prefix("tip:") {
                parts.push(format!("({})", tip.trim()));
            } else {
                parts.push(line.to_string());
            }
        }
        parts.join(" ")
    };
    // The subcommand named on the command line, if any, for its own --help.
    let names: Vec<String> = Cli::command()
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .collect();
    let command = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .filter(|a| names.contains(a))
        .map_or("locksuit".to_string(), |sub| format!("locksuit {sub}"));
    format!("locksuit: error: {message}\ntry '{command} --help'")
}
