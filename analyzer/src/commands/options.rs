//! The report options and arguments the report-reading commands share,
//! their parsers, and the report they build from traces.
//!
//! Past 600 lines: most of it is the option definitions and their help
//! text, which read best in one place, in the order `--help` shows them.

use crate::analysis::findings::Limits;
use crate::input::load::{self, InputError, Selection};
use crate::input::stream::StreamFilter;
use crate::input::symbolize::Symbolizer;
use crate::model::{Report, SCHEMA};
use crate::render;
use crate::render::layout::Destination;
use clap::{Args, ValueEnum};
use std::ffi::OsString;
use std::path::PathBuf;

#[derive(Args)]
pub struct CompilerArgs {
    /// The compiler's own arguments, passed on as they are.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<OsString>,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum Format {
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
pub enum EventsFormat {
    Text,
    Json,
    /// With --merged: one JSON object per event and line (docs/merged-stream.md).
    Jsonl,
}

#[derive(Args)]
pub struct ReportOptions {
    /// Sharing ratio below which a line's locking is reported as unsuitable, in [0, 1].
    #[arg(long, default_value = "0.3", value_parser = parse_threshold, value_name = "R")]
    pub threshold: f64,
    /// Output format; json follows schema locksuit.report/3; summary is one screen for
    /// many processes.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    /// Text: no line longer than N columns (default: $COLUMNS, else the terminal, else 100
    /// when written to a pipe or a file).
    #[arg(long, value_name = "N", value_parser = render::layout::parse_width)]
    pub width: Option<usize>,
    /// List only the N highest-ranked findings of each process (text: 20 unless given;
    /// json: all unless given).
    #[arg(long, value_name = "N")]
    pub top: Option<usize>,
    /// Only processes of this executable (its file name or full path; repeatable).
    #[arg(long = "exe", value_name = "NAME")]
    pub exes: Vec<String>,
    /// Only the process with this pid (repeatable).
    #[arg(long = "pid", value_name = "N")]
    pub pids: Vec<u32>,
    /// Exit with status 1 if any process has a finding (`run`: unless the command itself
    /// failed, whose status wins). Suppressed findings do not count.
    #[arg(long)]
    pub fail_on_findings: bool,
    /// Suppressions: a file of `[name]` entries with `kind`, `lock`, `frame` and `module`
    /// glob lines; the findings an entry matches are left out and counted apart
    /// (repeatable; default: $LOCKSUIT_SUPPRESS). A `locksuit.supp` in the current
    /// directory, or in its parents up to the repository's root, is read as well.
    #[arg(long = "suppress", value_name = "FILE")]
    pub suppress: Vec<PathBuf>,
    /// Leave out the built-in suppressions (CPython's interpreter locks: the GIL, the import
    /// lock, its runtime state and io buffers, and unsuitable-site at its own lines; lock
    /// calls made by glibc itself).
    #[arg(long)]
    pub no_default_suppressions: bool,
    /// Instead of the report, print a ready suppression entry for each finding left (to
    /// append to locksuit.supp).
    #[arg(long)]
    pub gen_suppressions: bool,
    /// After the report, print the one-screen summary (as --format summary) on stderr.
    #[arg(long)]
    pub summary: bool,
    /// long-hold: a hold this long (ms) at a stretch while a thread waited.
    #[arg(long, default_value = "10", value_name = "MS")]
    pub long_hold_ms: u64,
    /// high-contention: the share of acquisitions that had to wait, in [0, 1].
    #[arg(long, default_value = "0.1", value_parser = parse_share, value_name = "R")]
    pub contention_share: f64,
    /// over-synchronization: acquisitions per second of a lock that almost never contends.
    #[arg(long, default_value = "100000", value_name = "N")]
    pub over_sync_per_sec: f64,
    /// asymmetric-contention: how many times more contended the hottest lock of one line is.
    #[arg(long, default_value = "10", value_name = "X")]
    pub asymmetry: f64,
    /// starvation: one wait that sat through this many acquisitions by other threads.
    #[arg(long, default_value = "10", value_name = "N")]
    pub starvation: u32,
    /// single-thread-lock, unnecessary-lock and unsuitable-site: a lock or line engaged
    /// fewer times than this cost the run too little to be worth a finding.
    #[arg(long, default_value = "1000", value_name = "N")]
    pub min_acquisitions: u64,
    /// unnecessary-lock across runs: how many recorded runs of a program (reported
    /// together, or saved in the history with --against-history) must each have had one
    /// thread alone take a lock before it is called unnecessary.
    #[arg(long, default_value = "5", value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub min_runs: u64,
    /// Blocking classes of your own: a file of `class = glob` lines (e.g.
    /// `database = *sqlite3_step*`) matched against the blocking call and every function
    /// of its stack, most specific first, before the built-in classes (default:
    /// $LOCKSUIT_CLASSES).
    #[arg(long, value_name = "FILE")]
    pub classes: Option<PathBuf>,
    /// Text tables: order locks and sites by this column (largest first).
    #[arg(long, value_enum, default_value = "wait")]
    pub sort: crate::render::text_options::SortKey,
    /// Text: the locks table in mutrace's columns (Locked, Changed, Cont., tot.Time, avg.Time, max.Time).
    #[arg(long, value_enum, default_value = "locksuit")]
    pub columns: crate::render::text_options::Columns,
    /// Text: also print the waiting call tree (every blocking stack merged from the
    /// outermost frame in, with share, total, count and longest wait per node).
    #[arg(long)]
    pub tree: bool,
    /// With --tree: leave out nodes below this share of all the time blocked (1% or 0.01).
    #[arg(long, default_value = "1%", value_parser = parse_percent, value_name = "SHARE")]
    pub tree_min: f64,
    /// Save this run's summary (per program: locks, sites, findings) in the run history,
    /// for `diff --against-history` and `history`.
    #[arg(long)]
    pub save: bool,
    #[command(flatten)]
    pub history: HistoryOptions,
    /// Evidence from the run history: the last N runs saved (--save) of each program
    /// under --label count as runs reported with this one. A lock two threads took in
    /// any of them is shared; one a single thread took in each of --min-runs runs is
    /// unnecessary-lock.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub against_history: Option<u64>,
    /// --format folded: what a stack's value measures.
    #[arg(long, value_enum, default_value = "wait")]
    pub weight: crate::model::stacks::Weight,
    /// Write the report to FILE instead of standard output (keeps it apart
    /// from the recorded program's own output under `run`).
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(Args)]
pub struct ReportArgs {
    /// Trace files or directories of traces.
    #[arg(value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    #[command(flatten)]
    pub options: ReportOptions,
}

#[derive(Args)]
pub struct EventsArgs {
    /// Trace files or directories of traces (default: as for `report`).
    #[arg(value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// Only these objects (report ids such as L3 or C1; repeatable). An id that no
    /// process has is bad usage (exit 2).
    #[arg(long = "object", value_name = "ID")]
    pub objects: Vec<String>,
    /// Output format; json is the report schema with a `streams` field per process.
    #[arg(long, value_enum, default_value = "text")]
    pub format: EventsFormat,
    /// One stream per process instead of one per object: every thread's events merged
    /// into an order that could have happened (happened-before, never clocks across
    /// threads; docs/merged-stream.md).
    #[arg(long, conflicts_with = "objects")]
    pub merged: bool,
    /// --merged: minimal delivers each event as soon as it may go; concurrent delivers in
    /// steps of mutually concurrent events; adjusted raises timestamps just enough to
    /// agree with the delivery order and says by how much.
    #[arg(long, value_enum, default_value = "minimal", requires = "merged")]
    pub policy: crate::input::merge::Policy,
    /// --merged: follow a running program's trace (one process): each event is written
    /// as soon as it is valid, and the stream ends when the process does.
    #[arg(long, requires = "merged")]
    pub follow: bool,
    /// Text: no line longer than N columns (default: as for `report`).
    #[arg(long, value_name = "N", value_parser = render::layout::parse_width)]
    pub width: Option<usize>,
    /// Write to FILE instead of standard output.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum ExportFormat {
    /// Chrome trace-event JSON (Perfetto, chrome://tracing).
    Chrome,
}

#[derive(Args)]
pub struct ExportArgs {
    /// Trace files or directories of traces (default: as for `report`).
    #[arg(value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// Output format (one so far): chrome, the trace-event JSON that Perfetto and
    /// chrome://tracing open.
    #[arg(long, value_enum, default_value = "chrome")]
    pub format: ExportFormat,
    /// Blocking classes of your own (as for `report --classes`).
    #[arg(long, value_name = "FILE")]
    pub classes: Option<PathBuf>,
    /// Write to FILE instead of standard output.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(Args)]
pub struct FlamegraphArgs {
    /// Trace files or directories of traces (default: as for `report`).
    #[arg(value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// What a stack's width measures.
    #[arg(long, value_enum, default_value = "wait")]
    pub weight: crate::model::stacks::Weight,
    /// Blocking classes of your own (as for `report --classes`).
    #[arg(long, value_name = "FILE")]
    pub classes: Option<PathBuf>,
    /// Write the SVG to FILE instead of standard output.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub options: ReportOptions,
    /// Directory for the traces (created with mode 0700 if missing).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// The shim to preload (default: libsyncshim.so next to this binary, or $LOCKSUIT_SHIM).
    #[arg(long, value_name = "PATH")]
    pub shim: Option<PathBuf>,
    /// A recording policy for the command and its children (sets $LOCKSUIT_POLICY; see
    /// docs/policy.md): which processes, threads, objects and sites to record, thresholds,
    /// snapshot triggers, sampling and call-chain depth. Counters stay exact.
    #[arg(long, value_name = "FILE")]
    pub policy: Option<PathBuf>,
    /// Record lean (sets $LOCKSUIT_MODE=lean), the mode for profiling left on:
    /// each mutex's acquisitions per line, its contended waits and who blocked
    /// whom, at about half the full mode's cost per lock call; no hold times
    /// of uncontended holds, lock order, blocking under a mutex or owner
    /// changes (the report says so). `--format pprof` of such a trace is what a
    /// continuous-profiling backend (Pyroscope, Parca) ingests.
    #[arg(long)]
    pub lean: bool,
    /// Watch for deadlocks while the command runs: one that lasts this many
    /// seconds is explained on stderr, acted on (--on-deadlock), reported,
    /// and `run` exits 1.
    #[arg(long, value_name = "SECONDS", value_parser = parse_timeout)]
    pub deadlock_timeout: Option<f64>,
    /// What to do with a deadlocked process: kill it, abort it (a core dump
    /// for a debugger), or keep it hanging until you stop it.
    #[arg(
        long,
        value_enum,
        default_value = "kill",
        requires = "deadlock_timeout"
    )]
    pub on_deadlock: crate::commands::watch::OnDeadlock,
    /// The command to record, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

pub fn parse_threshold(s: &str) -> Result<f64, String> {
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

pub fn parse_timeout(s: &str) -> Result<f64, String> {
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

pub fn parse_share(s: &str) -> Result<f64, String> {
    parse_threshold(s).map_err(|e| e.replace("the threshold is a sharing ratio", "it is a share"))
}

/// Where the history is and which runs count.
#[derive(Args, Clone)]
pub struct HistoryOptions {
    /// The run history database (default: $XDG_DATA_HOME/locksuit/history.db, else
    /// ~/.local/share/locksuit/history.db).
    #[arg(long, value_name = "PATH")]
    pub history: Option<PathBuf>,
    /// The label runs are saved and compared under (e.g. ci-main): runs of one program
    /// under other labels are kept apart.
    #[arg(long, default_value = "default", value_name = "LABEL")]
    pub label: String,
}

impl HistoryOptions {
    pub fn path(&self) -> Result<PathBuf, InputError> {
        self.history.clone().or_else(crate::input::history::default_path).ok_or_else(|| {
            InputError("no place for the run history: set HOME or XDG_DATA_HOME, or give --history PATH".into())
        })
    }
}

impl ReportOptions {
    /// The text renderers' options, at `width` columns.
    pub fn text_options(&self, width: usize) -> render::text_options::TextOptions {
        render::text_options::TextOptions {
            sort: self.sort,
            columns: self.columns,
            width,
            top: self.top.unwrap_or(render::text_options::DEFAULT_TOP),
            tree: self.tree.then_some(self.tree_min),
        }
    }

    pub fn selection(&self) -> Selection {
        Selection {
            exes: self.exes.clone(),
            pids: self.pids.clone(),
        }
    }

    pub fn width(&self) -> usize {
        let to = if self.output.is_some() {
            Destination::File
        } else {
            Destination::Stdout
        };
        render::layout::resolve(self.width, to)
    }

    /// The runs `--against-history` asks for as evidence (none without it).
    pub fn prior_runs(&self) -> Result<Vec<crate::analysis::evidence::PriorRun>, InputError> {
        let Some(last) = self.against_history else {
            return Ok(Vec::new());
        };
        let path = self.history.path()?;
        let history = crate::input::history::History::open(&path, false).map_err(InputError)?;
        let runs = history
            .last_of_each(&self.history.label, last as usize)
            .map_err(InputError)?;
        Ok(runs
            .into_iter()
            .map(|r| crate::analysis::evidence::PriorRun {
                exe: r.summary.exe,
                identities: r.summary.identities,
                lines: r
                    .summary
                    .locks
                    .iter()
                    .map(|(name, figures)| (name.clone(), figures.lines.clone()))
                    .collect(),
                locks: r
                    .summary
                    .locks
                    .into_iter()
                    .map(|(name, figures)| (name, figures.threads))
                    .collect(),
            })
            .collect())
    }

    pub fn suppressions(&self) -> Result<crate::analysis::suppress::Suppressions, InputError> {
        suppressions(&self.suppress, self.no_default_suppressions)
    }

    pub fn limits(&self) -> Result<Limits, InputError> {
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
pub fn suppressions(
    files: &[PathBuf],
    no_default: bool,
) -> Result<crate::analysis::suppress::Suppressions, InputError> {
    let files = match files.is_empty() {
        true => std::env::var_os("LOCKSUIT_SUPPRESS")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .into_iter()
            .collect(),
        false => files.to_vec(),
    };
    crate::analysis::suppress::Suppressions::gather(&crate::analysis::suppress::Sources {
        built_in: !no_default,
        files,
        project_from: std::env::current_dir().ok(),
    })
    .map_err(InputError)
}

/// The report of every trace in `paths` (that `selection` takes), with
/// the evidence of each program's runs joined (see `evidence.rs`): those
/// in the report, and `prior` ones from the history.
pub fn build_report(
    paths: &[PathBuf],
    selection: &Selection,
    (limits, prior): (&Limits, &[crate::analysis::evidence::PriorRun]),
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
        processes.push(crate::analysis::process::analyze(
            &path.display().to_string(),
            trace,
            (limits, crate::analysis::process::Depth::Full),
            streams,
            &mut symbolizer,
            &mut || {
                pages.release();
                progress.events_read(crate::analysis::contention::PROGRESS_EVERY);
            },
        ));
        progress.finish();
    })?;
    for skipped in &skipped {
        eprintln!("locksuit: warning: skipped {skipped}");
    }
    crate::analysis::evidence::join(&mut processes, prior, limits);
    Ok(Report {
        schema: SCHEMA,
        threshold: limits.threshold,
        processes,
    })
}

/// The user's blocking-class signatures: `--classes FILE`, else
/// `$LOCKSUIT_CLASSES`, else none.
pub fn signatures(
    file: Option<PathBuf>,
) -> Result<crate::analysis::classes::Signatures, InputError> {
    match file.or_else(|| std::env::var_os("LOCKSUIT_CLASSES").map(PathBuf::from)) {
        Some(path) => crate::analysis::classes::Signatures::load(&path).map_err(InputError),
        None => Ok(crate::analysis::classes::Signatures::default()),
    }
}
