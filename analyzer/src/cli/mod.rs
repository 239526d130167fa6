//! The command line: the subcommands, their options and help, and the dispatch
//! to what each does (`output.rs`: what the report-reading commands write;
//! `gate.rs`: `diff` and `history`).
//!
//! Past 600 lines: most of it is the option definitions and their help
//! text, which read best in one place, in the order `--help` shows them.

use crate::findings::Limits;
use crate::load::{self, InputError, Selection};
use crate::model::{Report, SCHEMA};
use crate::render;
use crate::render::layout::Destination;
use crate::stream::StreamFilter;
use crate::symbolize::Symbolizer;
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::ffi::OsString;
use std::path::PathBuf;

mod generate;
mod output;
mod top;
use output::{events, export, flamegraph, print, report, signatures};

/// Exit status: success.
pub const EXIT_OK: i32 = 0;
/// Exit status: a requested gate failed (e.g. `--fail-on-findings`).
pub const EXIT_GATE: i32 = 1;
/// Exit status: bad usage or unreadable input.
pub const EXIT_USAGE: i32 = 2;

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
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
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
    Diff(crate::gate::DiffArgs),
    /// List the runs saved with `report --save`, with their contended share and share
    /// of the threads' time spent waiting (what `diff --against-history` judges).
    History(crate::gate::HistoryArgs),
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

#[derive(Args)]
struct CompilerArgs {
    /// The compiler's own arguments, passed on as they are.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    args: Vec<OsString>,
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    /// Readable tables, as wide as --width.
    Text,
    /// Schema locksuit.report/3 (docs/report-schema.md).
    Json,
    /// One screen: processes recorded, findings by kind, processes with findings.
    Summary,
    /// One self-contained page (use -o FILE): per-thread timelines of running and
    /// blocked time by class, with tooltips and handoffs; time per class; blocking call
    /// stacks; findings; the text report's tables.
    Html,
    /// Folded stacks (`frame;frame;… value`), outermost frame first, one line per stack,
    /// weighted by --weight: what flame-graph tools (inferno, flamegraph.pl, speedscope)
    /// read. Each stack starts with a frame naming its process.
    Folded,
    /// A pprof profile (profile.proto, gzipped; use -o FILE) of the waits, like Go's
    /// mutex profile: contentions/count and delay/nanoseconds per call stack, with
    /// functions, files, lines and modules. `go tool pprof`, Pyroscope and Parca read it.
    Pprof,
    /// The findings as SARIF 2.1.0 (code-scanning UIs show them inline in a pull
    /// request): a rule per finding kind, each finding's line, its call chain as a code
    /// flow; paths under the current directory relative to %SRCROOT%.
    Sarif,
}

#[derive(Clone, Copy, ValueEnum)]
enum EventsFormat {
    Text,
    Json,
    /// With --merged: one JSON object per event and line (docs/merged-stream.md).
    Jsonl,
}

#[derive(Args)]
struct ReportOptions {
    /// Sharing ratio below which a line's locking is reported as unsuitable, in [0, 1].
    #[arg(long, default_value = "0.3", value_parser = parse_threshold, value_name = "R")]
    threshold: f64,
    /// Output format; json follows schema locksuit.report/3; summary is one screen for
    /// many processes.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
    /// Text: no line longer than N columns (default: $COLUMNS, else the terminal, else 100
    /// when written to a pipe or a file).
    #[arg(long, value_name = "N", value_parser = render::layout::parse_width)]
    width: Option<usize>,
    /// List only the N highest-ranked findings of each process (text: 20 unless given;
    /// json: all unless given).
    #[arg(long, value_name = "N")]
    top: Option<usize>,
    /// Only processes of this executable (its file name or full path; repeatable).
    #[arg(long = "exe", value_name = "NAME")]
    exes: Vec<String>,
    /// Only the process with this pid (repeatable).
    #[arg(long = "pid", value_name = "N")]
    pids: Vec<u32>,
    /// Exit with status 1 if any process has a finding (`run`: unless the command itself
    /// failed, whose status wins). Suppressed findings do not count.
    #[arg(long)]
    fail_on_findings: bool,
    /// Suppressions: a file of `[name]` entries with `kind`, `lock`, `frame` and `module`
    /// glob lines; the findings an entry matches are left out and counted apart
    /// (repeatable; default: $LOCKSUIT_SUPPRESS). A `locksuit.supp` in the current
    /// directory, or in its parents up to the repository's root, is read as well.
    #[arg(long = "suppress", value_name = "FILE")]
    suppress: Vec<PathBuf>,
    /// Leave out the built-in suppressions (CPython's interpreter locks: the GIL, the import
    /// lock, its runtime state and io buffers, and unsuitable-site at its own lines; lock
    /// calls made by glibc itself).
    #[arg(long)]
    no_default_suppressions: bool,
    /// Instead of the report, print a ready suppression entry for each finding left (to
    /// append to locksuit.supp).
    #[arg(long)]
    gen_suppressions: bool,
    /// After the report, print the one-screen summary (as --format summary) on stderr.
    #[arg(long)]
    summary: bool,
    /// long-hold: a hold this long (ms) at a stretch while a thread waited.
    #[arg(long, default_value = "10", value_name = "MS")]
    long_hold_ms: u64,
    /// high-contention: the share of acquisitions that had to wait, in [0, 1].
    #[arg(long, default_value = "0.1", value_parser = parse_share, value_name = "R")]
    contention_share: f64,
    /// over-synchronization: acquisitions per second of a lock that almost never contends.
    #[arg(long, default_value = "100000", value_name = "N")]
    over_sync_per_sec: f64,
    /// asymmetric-contention: how many times more contended the hottest lock of one line is.
    #[arg(long, default_value = "10", value_name = "X")]
    asymmetry: f64,
    /// starvation: one wait that sat through this many acquisitions by other threads.
    #[arg(long, default_value = "10", value_name = "N")]
    starvation: u32,
    /// single-thread-lock, unnecessary-lock and unsuitable-site: a lock or line engaged
    /// fewer times than this cost the run too little to be worth a finding.
    #[arg(long, default_value = "1000", value_name = "N")]
    min_acquisitions: u64,
    /// unnecessary-lock across runs: how many recorded runs of a program (reported
    /// together, or saved in the history with --against-history) must each have had one
    /// thread alone take a lock before it is called unnecessary.
    #[arg(long, default_value = "5", value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    min_runs: u64,
    /// Blocking classes of your own: a file of `class = glob` lines (e.g.
    /// `database = *sqlite3_step*`) matched against the blocking call and every function
    /// of its stack, most specific first, before the built-in classes (default:
    /// $LOCKSUIT_CLASSES).
    #[arg(long, value_name = "FILE")]
    classes: Option<PathBuf>,
    /// Text tables: order locks and sites by this column (largest first).
    #[arg(long, value_enum, default_value = "wait")]
    sort: crate::render::text::SortKey,
    /// Text: the locks table in mutrace's columns (Locked, Changed, Cont., tot.Time, avg.Time, max.Time).
    #[arg(long, value_enum, default_value = "locksuit")]
    columns: crate::render::text::Columns,
    /// Text: also print the waiting call tree (every blocking stack merged from the
    /// outermost frame in, with share, total, count and longest wait per node).
    #[arg(long)]
    tree: bool,
    /// With --tree: leave out nodes below this share of all the time blocked (1% or 0.01).
    #[arg(long, default_value = "1%", value_parser = parse_percent, value_name = "SHARE")]
    tree_min: f64,
    /// Save this run's summary (per program: locks, sites, findings) in the run history,
    /// for `diff --against-history` and `history`.
    #[arg(long)]
    save: bool,
    #[command(flatten)]
    history: crate::gate::HistoryOptions,
    /// Evidence from the run history: the last N runs saved (--save) of each program
    /// under --label count as runs reported with this one. A lock two threads took in
    /// any of them is shared; one a single thread took in each of --min-runs runs is
    /// unnecessary-lock.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    against_history: Option<u64>,
    /// --format folded: what a stack's value measures.
    #[arg(long, value_enum, default_value = "wait")]
    weight: crate::stacks::Weight,
    /// Write the report to FILE instead of standard output (keeps it apart
    /// from the recorded program's own output under `run`).
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
}

#[derive(Args)]
struct ReportArgs {
    /// Trace files or directories of traces.
    paths: Vec<PathBuf>,
    #[command(flatten)]
    options: ReportOptions,
}

#[derive(Args)]
struct EventsArgs {
    /// Trace files or directories of traces (default: as for `report`).
    paths: Vec<PathBuf>,
    /// Only these objects (report ids such as L3 or C1; repeatable). An id that no
    /// process has is bad usage (exit 2).
    #[arg(long = "object", value_name = "ID")]
    objects: Vec<String>,
    /// Output format; json is the report schema with a `streams` field per process.
    #[arg(long, value_enum, default_value = "text")]
    format: EventsFormat,
    /// One stream per process instead of one per object: every thread's events merged
    /// into an order that could have happened (happened-before, never clocks across
    /// threads; docs/merged-stream.md).
    #[arg(long, conflicts_with = "objects")]
    merged: bool,
    /// --merged: minimal delivers each event as soon as it may go; concurrent delivers in
    /// steps of mutually concurrent events; adjusted raises timestamps just enough to
    /// agree with the delivery order and says by how much.
    #[arg(long, value_enum, default_value = "minimal", requires = "merged")]
    policy: crate::merge::Policy,
    /// --merged: follow a running program's trace (one process): each event is written
    /// as soon as it is valid, and the stream ends when the process does.
    #[arg(long, requires = "merged")]
    follow: bool,
    /// Text: no line longer than N columns (default: as for `report`).
    #[arg(long, value_name = "N", value_parser = render::layout::parse_width)]
    width: Option<usize>,
    /// Write to FILE instead of standard output.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
}

#[derive(Clone, Copy, ValueEnum)]
enum ExportFormat {
    /// Chrome trace-event JSON (Perfetto, chrome://tracing).
    Chrome,
}

#[derive(Args)]
struct ExportArgs {
    /// Trace files or directories of traces (default: as for `report`).
    paths: Vec<PathBuf>,
    #[arg(long, value_enum, default_value = "chrome")]
    format: ExportFormat,
    /// Blocking classes of your own (as for `report --classes`).
    #[arg(long, value_name = "FILE")]
    classes: Option<PathBuf>,
    /// Write to FILE instead of standard output.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
}

#[derive(Args)]
struct FlamegraphArgs {
    /// Trace files or directories of traces (default: as for `report`).
    paths: Vec<PathBuf>,
    /// What a stack's width measures.
    #[arg(long, value_enum, default_value = "wait")]
    weight: crate::stacks::Weight,
    /// Blocking classes of your own (as for `report --classes`).
    #[arg(long, value_name = "FILE")]
    classes: Option<PathBuf>,
    /// Write the SVG to FILE instead of standard output.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
}

#[derive(Args)]
struct RunArgs {
    #[command(flatten)]
    options: ReportOptions,
    /// Directory for the traces (created with mode 0700 if missing).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// The shim to preload (default: libsyncshim.so next to this binary, or $LOCKSUIT_SHIM).
    #[arg(long, value_name = "PATH")]
    shim: Option<PathBuf>,
    /// A recording policy for the command and its children (sets $LOCKSUIT_POLICY; see
    /// docs/policy.md): which processes, threads, objects and sites to record, thresholds,
    /// snapshot triggers, sampling and call-chain depth. Counters stay exact.
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
    /// Watch for deadlocks while the command runs: one that lasts this many
    /// seconds is explained on stderr, acted on (--on-deadlock), reported,
    /// and `run` exits 1.
    #[arg(long, value_name = "SECONDS", value_parser = parse_timeout)]
    deadlock_timeout: Option<f64>,
    /// What to do with a deadlocked process: kill it, abort it (a core dump
    /// for a debugger), or keep it hanging until you stop it.
    #[arg(
        long,
        value_enum,
        default_value = "kill",
        requires = "deadlock_timeout"
    )]
    on_deadlock: crate::watch::OnDeadlock,
    /// The command to record, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    command: Vec<OsString>,
}

fn parse_threshold(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("`{s}` is not a number; give a ratio between 0 and 1, e.g. 0.3"))?;
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!(
            "{v} is outside [0, 1]; the threshold is a sharing ratio"
        ))
    }
}

fn parse_timeout(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(v),
        _ => Err(format!(
            "`{s}` is not a number of seconds above 0, e.g. 5 or 0.5"
        )),
    }
}

/// A share written as a percentage (`1%`) or a ratio (`0.01`).
pub fn parse_percent(s: &str) -> Result<f64, String> {
    match s.strip_suffix('%') {
        Some(pct) => match pct.trim().parse::<f64>() {
            Ok(v) if (0.0..=100.0).contains(&v) => Ok(v / 100.0),
            _ => Err(format!("`{s}` is not a percentage from 0% to 100%")),
        },
        None => parse_share(s),
    }
}

fn parse_share(s: &str) -> Result<f64, String> {
    parse_threshold(s).map_err(|e| e.replace("the threshold is a sharing ratio", "it is a share"))
}

impl ReportOptions {
    /// The text renderers' options, at `width` columns.
    fn text_options(&self, width: usize) -> render::text::TextOptions {
        render::text::TextOptions {
            sort: self.sort,
            columns: self.columns,
            width,
            top: self.top.unwrap_or(render::text::DEFAULT_TOP),
            tree: self.tree.then_some(self.tree_min),
        }
    }

    fn selection(&self) -> Selection {
        Selection {
            exes: self.exes.clone(),
            pids: self.pids.clone(),
        }
    }

    fn width(&self) -> usize {
        let to = if self.output.is_some() {
            Destination::File
        } else {
            Destination::Stdout
        };
        render::layout::resolve(self.width, to)
    }

    /// The runs `--against-history` asks for as evidence (none without it).
    fn prior_runs(&self) -> Result<Vec<crate::evidence::PriorRun>, InputError> {
        let Some(last) = self.against_history else {
            return Ok(Vec::new());
        };
        let path = self.history.path()?;
        let history = crate::history::History::open(&path, false).map_err(InputError)?;
        let runs = history
            .last_of_each(&self.history.label, last as usize)
            .map_err(InputError)?;
        Ok(runs
            .into_iter()
            .map(|r| crate::evidence::PriorRun {
                exe: r.summary.exe,
                identities: r.summary.identities,
                locks: r
                    .summary
                    .locks
                    .into_iter()
                    .map(|(name, figures)| (name, figures.threads))
                    .collect(),
            })
            .collect())
    }

    fn suppressions(&self) -> Result<crate::suppress::Suppressions, InputError> {
        suppressions(&self.suppress, self.no_default_suppressions)
    }

    fn limits(&self) -> Result<Limits, InputError> {
        let signatures = signatures(self.classes.clone())?;
        Ok(Limits {
            threshold: self.threshold,
            long_hold_ns: self.long_hold_ms.saturating_mul(1_000_000),
            contention_share: self.contention_share,
            over_sync_per_sec: self.over_sync_per_sec,
            asymmetry: self.asymmetry,
            starvation: self.starvation,
            min_acquisitions: self.min_acquisitions,
            min_runs: self.min_runs,
            signatures: std::sync::Arc::new(signatures),
            thread_names: Default::default(),
        })
    }
}

/// The suppressions in force: the built-in set unless turned off, `files`
/// (else `$LOCKSUIT_SUPPRESS`), and the project's `locksuit.supp`.
fn suppressions(
    files: &[PathBuf],
    no_default: bool,
) -> Result<crate::suppress::Suppressions, InputError> {
    let files = match files.is_empty() {
        true => std::env::var_os("LOCKSUIT_SUPPRESS")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .into_iter()
            .collect(),
        false => files.to_vec(),
    };
    crate::suppress::Suppressions::gather(&crate::suppress::Sources {
        built_in: !no_default,
        files,
        project_from: std::env::current_dir().ok(),
    })
    .map_err(InputError)
}

/// The report of every trace in `paths` (that `selection` takes), with
/// the evidence of each program's runs joined (see `evidence.rs`): those
/// in the report, and `prior` ones from the history.
fn build_report(
    paths: &[PathBuf],
    selection: &Selection,
    (limits, prior): (&Limits, &[crate::evidence::PriorRun]),
    streams: &StreamFilter,
) -> Result<Report, InputError> {
    let mut symbolizer = Symbolizer::default();
    let mut processes = Vec::new();
    // One trace at a time: each is read, turned into its model and let go of
    // before the next is read.
    let skipped = load::for_each(paths, selection, |path, mapped| {
        let load::Mapped {
            trace,
            pages,
            progress,
        } = mapped;
        processes.push(crate::analysis::analyze(
            &path.display().to_string(),
            trace,
            (limits, crate::analysis::Depth::Full),
            streams,
            &mut symbolizer,
            &mut || {
                pages.release();
                progress.events_read(crate::contention::PROGRESS_EVERY);
            },
        ));
        progress.finish();
    })?;
    for skipped in &skipped {
        eprintln!("locksuit: warning: skipped {skipped}");
    }
    crate::evidence::join(&mut processes, prior, limits);
    Ok(Report {
        schema: SCHEMA,
        threshold: limits.threshold,
        processes,
    })
}

fn run(args: RunArgs) -> i32 {
    let watch = args
        .deadlock_timeout
        .map(|seconds| crate::run::DeadlockWatch {
            timeout: std::time::Duration::from_secs_f64(seconds),
            on_deadlock: args.on_deadlock,
        });
    // Read before the command runs: a malformed file must not cost a run.
    let suppressions = match args.options.suppressions() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("locksuit: {e}");
            return EXIT_USAGE;
        }
    };
    let recorded = match crate::run::record(
        &args.command,
        (args.dir.as_deref(), args.shim.as_deref()),
        args.policy.as_deref(),
        watch,
    ) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("locksuit: {e}");
            return EXIT_USAGE;
        }
    };
    let options = &args.options;
    // A process it stopped for a deadlock: the names its threads had.
    let thread_names: std::collections::BTreeMap<(u32, u32), String> = recorded
        .deadlock
        .iter()
        .flat_map(|d| {
            d.thread_names
                .iter()
                .map(|(&tid, n)| ((d.pid, tid), n.clone()))
        })
        .collect();
    let printed = options
        .limits()
        .map(|limits| Limits {
            thread_names: std::sync::Arc::new(thread_names),
            ..limits
        })
        .and_then(|limits| Ok((limits, options.prior_runs()?)))
        .and_then(|(limits, prior)| {
            build_report(
                std::slice::from_ref(&recorded.dir),
                &options.selection(),
                (&limits, &prior),
                &StreamFilter::Off,
            )
        })
        .and_then(|mut report| {
            crate::suppress::apply(&mut report, &suppressions);
            print(report, options)
        });
    let gate_failed = match printed {
        Ok(failed) => failed,
        Err(e) => {
            eprintln!("locksuit: no report: {e}");
            false
        }
    };
    eprintln!("locksuit: traces kept in {}", recorded.dir.display());
    if recorded.deadlock.is_some() {
        return EXIT_GATE; // it deadlocked: 1, whatever the stopped command returned
    }
    // The command's own failure wins; then the gate.
    match recorded.exit_status {
        EXIT_OK if gate_failed => EXIT_GATE,
        status => status,
    }
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
        Command::Report(args) => report(args),
        Command::Run(args) => run(args),
        Command::Events(args) => events(args),
        Command::Export(args) => export(args),
        Command::Flamegraph(args) => flamegraph(args),
        Command::Diff(args) => {
            let suppressions = match suppressions(&args.suppress, args.no_default_suppressions) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("locksuit: {e}");
                    return EXIT_USAGE;
                }
            };
            crate::gate::diff_command(args, &|path| {
                let mut report = build_report(
                    &[path.to_path_buf()],
                    &Selection::default(),
                    (&Limits::default(), &[]),
                    &StreamFilter::Off,
                )?;
                crate::suppress::apply(&mut report, &suppressions);
                Ok(report)
            })
        }
        Command::History(args) => crate::gate::history_command(args),
        Command::Cc(args) => crate::cc::run(&args.args, false),
        Command::Cxx(args) => crate::cc::run(&args.args, true),
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
