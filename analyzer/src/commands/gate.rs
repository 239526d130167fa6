//! `locksuit diff` and `locksuit history`, and `report --save`: the
//! regression gate over the run history (see `compare.rs`, `history.rs`).

use super::options::{build_report, suppressions, HistoryOptions};
use crate::analysis::findings::Limits;
use crate::analysis::regression::{self, Diff, Rule};
use crate::base::exit::EXIT_USAGE;
use crate::input::compare::{self, Summary};
use crate::input::history::History;
use crate::input::load::InputError;
use crate::input::load::Selection;
use crate::input::stream::StreamFilter;
use crate::model::Report;
use clap::{Args, ValueEnum};
use std::path::{Path, PathBuf};

#[derive(Clone, Copy, ValueEnum)]
pub enum GateFormat {
    Text,
    Json,
}

#[derive(Args)]
pub struct DiffArgs {
    /// The base: a JSON report (`report --format json -o FILE`), a trace file, or a
    /// directory of traces. Leave it out with --against-history.
    #[arg(value_name = "BASE")]
    pub base: Option<PathBuf>,
    /// The current run, as BASE.
    #[arg(value_name = "CUR")]
    pub current: Option<PathBuf>,
    /// Compare CUR with the last N saved runs of the same program and label instead of
    /// with BASE: each measure against their median and spread (1.4826 x the median
    /// absolute deviation).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub against_history: Option<u64>,
    /// A contended or wait share regresses only past the median by more than this share
    /// of it (20% or 0.2), more than --spreads spreads, and one point, and above all base
    /// runs but one. Timing findings (long-hold, starvation, ...) new in CUR count only
    /// when most runs have them or their lock regressed; deadlock, potential-deadlock,
    /// family-order-inversion and misuse count at once.
    #[arg(long, default_value = "20%", value_parser = super::options::parse_percent, value_name = "SHARE")]
    pub threshold: f64,
    /// How many spreads of the base runs a share must pass the median by.
    #[arg(long, default_value = "3", value_parser = parse_spreads, value_name = "K")]
    pub spreads: f64,
    #[arg(long, value_enum, default_value = "text")]
    pub format: GateFormat,
    #[command(flatten)]
    pub history: HistoryOptions,
    /// Suppressions for the sides read from traces, as for `report` (a JSON report or a
    /// saved run has them applied already): so that a finding `report --save` left out is
    /// not new here.
    #[arg(long = "suppress", value_name = "FILE")]
    pub suppress: Vec<PathBuf>,
    /// Leave out the built-in suppressions, as for `report`.
    #[arg(long)]
    pub no_default_suppressions: bool,
}

#[derive(Args)]
pub struct HistoryArgs {
    /// Only runs of this executable (its file name).
    #[arg(long, value_name = "NAME")]
    pub exe: Option<String>,
    /// Only runs under this label.
    #[arg(long, value_name = "LABEL")]
    pub label: Option<String>,
    /// The run history database (as for `report --save`).
    #[arg(long, value_name = "PATH")]
    pub history: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "text")]
    pub format: GateFormat,
}

fn parse_spreads(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(k) if k.is_finite() && k >= 0.0 => Ok(k),
        _ => Err(format!("`{s}` is not a number of spreads (0 or more)")),
    }
}

/// A side of a comparison: a JSON report, or traces reported on now.
fn summaries_of(
    path: &Path,
    traces: &dyn Fn(&Path) -> Result<Report, InputError>,
) -> Result<Vec<Summary>, InputError> {
    let looks_json = path.is_file()
        && std::fs::read(path)
            .map(|b| b.iter().find(|c| !c.is_ascii_whitespace()) == Some(&b'{'))
            .unwrap_or(false);
    let value = if looks_json {
        let text = std::fs::read_to_string(path)
            .map_err(|e| InputError(format!("{}: {e}", path.display())))?;
        serde_json::from_str(&text)
            .map_err(|e| InputError(format!("{}: not a JSON report: {e}", path.display())))?
    } else {
        let report = traces(path)?;
        serde_json::to_value(&report).map_err(|e| InputError(e.to_string()))?
    };
    compare::summaries(&value).map_err(|e| InputError(format!("{}: {e}", path.display())))
}

/// Runs `locksuit diff`; the exit status.
pub fn diff_command(args: DiffArgs, traces: &dyn Fn(&Path) -> Result<Report, InputError>) -> i32 {
    match diffs(&args, traces) {
        Ok(diffs) => {
            let text = match args.format {
                GateFormat::Text => super::gate_text::text(&diffs),
                GateFormat::Json => serde_json::to_string_pretty(&diffs).unwrap_or_default() + "\n",
            };
            // A closed pipe (`| head`) is not an error of the comparison.
            let _ = std::io::Write::write_all(&mut std::io::stdout(), text.as_bytes());
            if diffs.iter().any(|d| d.regressed) {
                crate::base::exit::EXIT_GATE
            } else {
                crate::base::exit::EXIT_OK
            }
        }
        Err(e) => {
            eprintln!("locksuit: {e}");
            crate::base::exit::EXIT_USAGE
        }
    }
}

fn diffs(
    args: &DiffArgs,
    traces: &dyn Fn(&Path) -> Result<Report, InputError>,
) -> Result<Vec<Diff>, InputError> {
    let usage = |m: &str| Err(InputError(m.to_string()));
    let (current, base) = match (&args.base, &args.current, args.against_history) {
        (Some(cur), None, Some(n)) => {
            let current = summaries_of(cur, traces)?;
            let h = History::open(&args.history.path()?, false).map_err(InputError)?;
            let mut bases = Vec::new();
            for c in &current {
                let runs = h
                    .runs(Some(&c.exe), Some(&args.history.label), Some(n as usize))
                    .map_err(InputError)?;
                if runs.is_empty() {
                    return Err(InputError(format!(
                        "no saved runs of {} under the label {:?} to compare with (save some with `report --save`)",
                        c.exe, args.history.label
                    )));
                }
                bases.push(runs.into_iter().map(|r| r.summary).collect());
            }
            (current, bases)
        }
        (Some(_), Some(_), Some(_)) => {
            return usage("give either BASE and CUR, or --against-history N and CUR")
        }
        (Some(base), Some(cur), None) => {
            let one_each = summaries_of(base, traces)?.into_iter().map(|b| vec![b]);
            (summaries_of(cur, traces)?, one_each.collect())
        }
        _ => return usage("give BASE and CUR, or --against-history N and CUR"),
    };
    // Each side's runs of one program: one base, or the saved runs.
    let base: Vec<Vec<Summary>> = base;
    let pairs: Vec<(&[Summary], &Summary)> = current
        .iter()
        .filter_map(|c| {
            base.iter()
                .find(|b| b.first().is_some_and(|b| b.exe == c.exe))
                .map(|b| (b.as_slice(), c))
        })
        .collect();
    if pairs.is_empty() {
        let names = |s: &mut dyn Iterator<Item = &Summary>| {
            s.map(|s| s.exe.clone()).collect::<Vec<_>>().join(", ")
        };
        return Err(InputError(format!(
            "the base records {} and the current run {}: different programs, nothing to compare",
            names(&mut base.iter().flatten()),
            names(&mut current.iter())
        )));
    }
    let rule = Rule {
        threshold: args.threshold,
        spreads: args.spreads,
    };
    Ok(pairs
        .into_iter()
        .map(|(b, c)| regression::diff(b, c, rule))
        .collect())
}

/// What `report --save` keeps of a report: taken before printing, which
/// may trim the report (`--top`).
pub fn summaries_to_save(report: &Report) -> Result<Vec<Summary>, InputError> {
    let value = serde_json::to_value(report).map_err(|e| InputError(e.to_string()))?;
    compare::summaries(&value).map_err(InputError)
}

/// `report --save`: the report's summaries into the history; says where on
/// stderr.
pub fn save(summaries: &[Summary], options: &HistoryOptions) -> Result<(), InputError> {
    let path = options.path()?;
    let mut h = History::open(&path, true).map_err(InputError)?;
    let ids = h.save(summaries, &options.label).map_err(InputError)?;
    for (s, id) in summaries.iter().zip(ids) {
        eprintln!(
            "locksuit: saved run {id} of {} (label {}) in {}",
            s.exe,
            options.label,
            path.display()
        );
    }
    Ok(())
}

/// Runs `locksuit history`; the exit status.
pub fn history_command(args: HistoryArgs) -> i32 {
    let options = HistoryOptions {
        history: args.history.clone(),
        label: String::new(),
    };
    let listed = options.path().and_then(|path| {
        let h = History::open(&path, false).map_err(InputError)?;
        h.runs(args.exe.as_deref(), args.label.as_deref(), None)
            .map_err(InputError)
    });
    match listed {
        Ok(runs) => {
            match args.format {
                GateFormat::Json => {
                    let rows: Vec<serde_json::Value> = runs
                        .iter()
                        .map(|r| {
                            serde_json::json!({
                                "id": r.id, "exe": r.exe, "label": r.label,
                                "saved_unix": r.saved_unix, "saved_utc": r.saved_utc,
                                "summary": r.summary,
                            })
                        })
                        .collect();
                    let text = serde_json::to_string_pretty(&rows).unwrap_or_default() + "\n";
                    let _ = std::io::Write::write_all(&mut std::io::stdout(), text.as_bytes());
                }
                GateFormat::Text => {
                    let text = super::gate_text::runs(&runs);
                    let _ = std::io::Write::write_all(&mut std::io::stdout(), text.as_bytes());
                }
            }
            crate::base::exit::EXIT_OK
        }
        Err(e) => {
            eprintln!("locksuit: {e}");
            crate::base::exit::EXIT_USAGE
        }
    }
}

/// `locksuit diff`: each side's report is built from its traces with the
/// suppressions in force, then compared.
pub fn diff(args: DiffArgs) -> i32 {
    let suppressions = match suppressions(&args.suppress, args.no_default_suppressions) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("locksuit: {e}");
            return EXIT_USAGE;
        }
    };
    diff_command(args, &|path| {
        let mut report = build_report(
            &[path.to_path_buf()],
            &Selection::default(),
            (&Limits::default(), &[]),
            &StreamFilter::Off,
        )?;
        crate::analysis::suppress::apply(&mut report, &suppressions);
        Ok(report)
    })
}
