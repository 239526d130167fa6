//! What the report-reading commands write: the report in each format
//! (`report`, and `run` after recording), the exports (`export`,
//! `flamegraph`) and `events`.

use super::options::*;
use crate::analysis::findings::Limits;
use crate::base::exit::*;
use crate::input::load::InputError;
use crate::input::load::{self, Selection};
use crate::input::stream::StreamFilter;
use crate::input::symbolize::Symbolizer;
use crate::model::Report;
use crate::render;
use crate::render::layout::Destination;
use std::path::PathBuf;

/// Prints the report where the options say (and the summary on stderr if
/// asked for), then saves it to the history if asked; an unwritable output
/// file is bad usage. Returns whether
/// `--fail-on-findings` fails: some process has a finding, whatever
/// `--top` shows.
pub fn print(mut report: Report, options: &ReportOptions) -> Result<bool, InputError> {
    // Saved after printing, so that a history that cannot take the run
    // (locked, damaged) does not cost the report.
    let to_save = match options.save {
        true => Some(crate::commands::gate::summaries_to_save(&report)?),
        false => None,
    };
    let gate_fails =
        options.fail_on_findings && report.processes.iter().any(|p| !p.findings.is_empty());
    // Worked out before --top trims the JSON's findings: it counts them all.
    let summary_on_stderr = options.summary.then(|| {
        let width = render::layout::resolve(options.width, Destination::Stderr);
        render::summary::render(&report, options.fail_on_findings, width)
    });
    let printed = match options.gen_suppressions {
        true => {
            let entries = crate::analysis::suppress::generate(&report);
            write_out(options.output.as_deref(), |out| {
                out.write_all(entries.as_bytes())
            })
        }
        false => print_format(&mut report, options, options.width()),
    };
    if let Some(summary) = summary_on_stderr {
        // Set apart from a JSON report on the same terminal; text ends
        // with a blank line of its own.
        let json_above = matches!(options.format, Format::Json) && options.output.is_none();
        eprint!("{}{summary}", if json_above { "\n" } else { "" });
    }
    printed?;
    if let Some(summaries) = to_save {
        crate::commands::gate::save(&summaries, &options.history)?;
    }
    Ok(gate_fails)
}

fn print_format(
    report: &mut Report,
    options: &ReportOptions,
    width: usize,
) -> Result<(), InputError> {
    match options.format {
        Format::Summary => {
            let text = render::summary::render(report, options.fail_on_findings, width);
            write_out(options.output.as_deref(), |out| {
                out.write_all(text.as_bytes())
            })
        }
        Format::Text => {
            let text = render::text::render(report, &options.text_options(width));
            write_out(options.output.as_deref(), |out| {
                out.write_all(text.as_bytes())
            })
        }
        Format::Html => {
            let page =
                render::html::render(report, &options.text_options(options.width.unwrap_or(120)));
            write_out(options.output.as_deref(), |out| {
                out.write_all(page.as_bytes())
            })
        }
        Format::Folded => write_out(options.output.as_deref(), |out| {
            render::folded::write(report, options.weight, out)
        }),
        Format::Pprof => {
            if options.output.is_none() && std::io::IsTerminal::is_terminal(&std::io::stdout()) {
                return Err(InputError(
                    "--format pprof writes a binary profile: give -o FILE (e.g. -o locks.pb.gz)"
                        .into(),
                ));
            }
            write_out(options.output.as_deref(), |out| {
                render::pprof::write(report, out)
            })
        }
        Format::Sarif => write_out(options.output.as_deref(), |out| {
            serde_json::to_writer_pretty(&mut *out, &render::sarif::render(report))?;
            out.write_all(b"\n")
        }),
        Format::Json => {
            if let Some(top) = options.top {
                for p in &mut report.processes {
                    p.findings.truncate(top);
                }
            }
            write_out(options.output.as_deref(), |out| {
                render::json::write(report, out)
            })
        }
    }
}

/// Writes through `write` to `output`, or to standard output. A report of a
/// million locks is written as it is serialised, never built whole in memory.
pub fn write_out(
    output: Option<&std::path::Path>,
    write: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
) -> Result<(), InputError> {
    use std::io::Write;
    match output {
        Some(path) => {
            let cannot = |e: std::io::Error| {
                InputError(format!("{}: cannot write the report: {e}", path.display()))
            };
            let file = std::fs::File::create(path).map_err(cannot)?;
            let mut out = std::io::BufWriter::new(file);
            write(&mut out).map_err(cannot)?;
            out.flush().map_err(cannot)
        }
        None => {
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::new(stdout.lock());
            // A closed pipe (e.g. `| head`) is not an error worth a message.
            let _ = write(&mut out).and_then(|()| out.flush());
            Ok(())
        }
    }
}

pub fn report(args: ReportArgs) -> i32 {
    let options = &args.options;
    let built = options.suppressions().and_then(|suppressions| {
        let limits = options.limits()?;
        let prior = options.prior_runs()?;
        let mut report = build_report(
            &args.paths,
            &options.selection(),
            (&limits, &prior),
            &StreamFilter::Off,
        )?;
        crate::analysis::suppress::apply(&mut report, &suppressions);
        Ok(report)
    });
    match built.and_then(|report| print(report, options)) {
        Ok(true) => EXIT_GATE,
        Ok(false) => EXIT_OK,
        Err(e) => {
            eprintln!("locksuit: {e}");
            EXIT_USAGE
        }
    }
}

pub fn export(args: ExportArgs) -> i32 {
    let ExportFormat::Chrome = args.format;
    write_from_traces(
        &args.paths,
        args.classes,
        args.output.as_deref(),
        |report, out| {
            serde_json::to_writer(&mut *out, &render::chrome::render(report))?;
            out.write_all(b"\n")
        },
    )
}

pub fn flamegraph(args: FlamegraphArgs) -> i32 {
    write_from_traces(
        &args.paths,
        args.classes,
        args.output.as_deref(),
        |report, out| render::flame::write(report, args.weight, out),
    )
}

/// Reports on `paths` (with the user's blocking classes) and writes what
/// `render` makes of it to `output`; the exit status.
fn write_from_traces(
    paths: &[PathBuf],
    classes: Option<PathBuf>,
    output: Option<&std::path::Path>,
    render: impl FnOnce(&Report, &mut dyn std::io::Write) -> std::io::Result<()>,
) -> i32 {
    let written = signatures(classes)
        .map(|signatures| Limits {
            signatures: std::sync::Arc::new(signatures),
            ..Limits::default()
        })
        .and_then(|limits| {
            build_report(
                paths,
                &Selection::default(),
                (&limits, &[]),
                &StreamFilter::Off,
            )
        })
        .and_then(|report| write_out(output, |out| render(&report, out)));
    match written {
        Ok(()) => EXIT_OK,
        Err(e) => {
            eprintln!("locksuit: {e}");
            EXIT_USAGE
        }
    }
}

pub fn events(args: EventsArgs) -> i32 {
    if args.merged {
        return merged_events(args);
    }
    if matches!(args.format, EventsFormat::Jsonl) {
        eprintln!("locksuit: error: --format jsonl is for --merged\ntry 'locksuit events --help'");
        return EXIT_USAGE;
    }
    let filter = if args.objects.is_empty() {
        StreamFilter::All
    } else {
        StreamFilter::Only(args.objects.clone())
    };
    let selection = Selection::default();
    let printed = build_report(&args.paths, &selection, (&Limits::default(), &[]), &filter).and_then(|mut report| {
        check_objects(&report, &args.objects)?;
        let silent: Vec<&str> = args
            .objects
            .iter()
            .filter(|id| {
                !report
                    .processes
                    .iter()
                    .any(|p| p.streams.iter().any(|s| &&s.object == id))
            })
            .map(String::as_str)
            .collect();
        if !silent.is_empty() {
            eprintln!(
                "locksuit: warning: no events recorded for {} (record with LOCKSUIT_EVENTS=all to see uncontended ones)",
                silent.join(", ")
            );
        }
        render::streams::relate_deadlines(&mut report);
        match args.format {
            EventsFormat::Text => {
                let width = text_width(&args);
                let text = render::streams::render(&report, width);
                write_out(args.output.as_deref(), |out| out.write_all(text.as_bytes()))
            }
            EventsFormat::Json | EventsFormat::Jsonl => write_out(args.output.as_deref(), |out| {
                render::json::write(&report, out)
            }),
        }
    });
    match printed {
        Ok(()) => EXIT_OK,
        Err(e) => {
            eprintln!("locksuit: {e}");
            EXIT_USAGE
        }
    }
}

/// An `--object` id that no process in the report has (no lock or
/// condition variable by that id) is bad usage, not an empty answer.
fn check_objects(report: &Report, objects: &[String]) -> Result<(), InputError> {
    let unknown: Vec<&str> = objects
        .iter()
        .filter(|id| {
            !report.processes.iter().any(|p| {
                crate::model::names::with(&p.names, || {
                    p.locks.iter().any(|l| l.id.to_string() == **id)
                        || p.conds.iter().any(|c| c.id == **id)
                })
            })
        })
        .map(String::as_str)
        .collect();
    if unknown.is_empty() {
        return Ok(());
    }
    let traces = match report.processes.as_slice() {
        [only] => only.trace.clone(),
        all => format!("none of the {} traces", all.len()),
    };
    Err(InputError(format!(
        "{traces}: no lock or condition variable {} (ids are as in the report, e.g. &total_lock or worker@main.c:40#2)",
        unknown.join(", ")
    )))
}

/// `locksuit events --merged`: each process's one stream.
fn merged_events(args: EventsArgs) -> i32 {
    if args.follow {
        return followed_events(args);
    }
    streamed_events(&args)
}

/// Where `events` writes: `-o FILE`, else standard output.
fn events_out(args: &EventsArgs) -> Result<Box<dyn std::io::Write>, i32> {
    Ok(match &args.output {
        Some(path) => match std::fs::File::create(path) {
            Ok(file) => Box::new(file),
            Err(e) => {
                eprintln!("locksuit: {}: cannot write: {e}", path.display());
                return Err(EXIT_USAGE);
            }
        },
        None => Box::new(std::io::stdout().lock()),
    })
}

/// `locksuit events --merged`: each process's stream written as it is
/// delivered, one trace at a time, so memory stays what the merge holds
/// back whatever the trace's length.
fn streamed_events(args: &EventsArgs) -> i32 {
    use render::merged::{StreamFormat, Streamed};
    let out = match events_out(args) {
        Ok(out) => out,
        Err(code) => return code,
    };
    let format = match args.format {
        EventsFormat::Jsonl => StreamFormat::Jsonl,
        EventsFormat::Json => StreamFormat::Json,
        EventsFormat::Text => StreamFormat::Text(text_width(args)),
    };
    let mut writer = Streamed::new(std::io::BufWriter::new(out), format);
    let mut failed: Option<std::io::Error> = writer.begin().err();
    let mut symbolizer = Symbolizer::default();
    let walked = load::for_each(&args.paths, &Selection::default(), |path, mapped| {
        if failed.is_some() {
            return;
        }
        let load::Mapped {
            trace,
            pages,
            progress,
        } = mapped;
        // What the merge needs, kept from the analysis, which consumes the
        // trace (the events are a shared view of the mapping: no copy).
        let events = trace.events.clone();
        let threads = trace.threads.clone();
        let kinds = crate::input::merge_trace::object_kinds(&trace);
        let p = crate::analysis::process::analyze(
            &path.display().to_string(),
            trace,
            (&Limits::default(), crate::analysis::process::Depth::Records),
            &StreamFilter::Names,
            &mut symbolizer,
            &mut || {
                pages.release();
                progress.events_read(crate::analysis::contention::PROGRESS_EVERY);
            },
        );
        progress.finish();
        let names = &p.raw_names;
        let object = |raw: u32| names.objects.get(&raw).cloned();
        let site = |raw: u32| names.sites.get(&raw).cloned();
        let thread = |tid: u32| names.threads.get(&tid).cloned();
        let input = crate::input::merge_trace::Input {
            events: &events,
            threads: &threads,
            kinds,
        };
        let written = writer.process(&p).and_then(|()| {
            crate::input::merge_trace::stream(
                input,
                args.policy,
                (&object, &site, &thread),
                p.start_mono_ns,
                &mut |e| writer.event(&p, &e),
            )
        });
        failed = written
            .and_then(|perturbation| writer.end_process(&p, &perturbation))
            .err();
    });
    let finished = writer.finish();
    let skipped = match walked {
        Ok(skipped) => skipped,
        Err(e) => {
            eprintln!("locksuit: {e}");
            return EXIT_USAGE;
        }
    };
    if let Some(e) = failed.or(finished.err()) {
        // A closed pipe (e.g. `| head`) is not an error worth a message.
        if args.output.is_some() || e.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("locksuit: cannot write: {e}");
            return EXIT_USAGE;
        }
    }
    for skipped in &skipped {
        eprintln!("locksuit: warning: skipped {skipped}");
    }
    EXIT_OK
}

/// `locksuit events --merged --follow`: one line per event, what each read
/// of the trace delivered written and flushed at once (a write per event
/// would cost a system call each, which at a busy program's rate is most
/// of the follower's time).
fn followed_events(args: EventsArgs) -> i32 {
    use std::io::Write;
    // To -o FILE when given, as to standard output.
    let mut out = match events_out(&args) {
        Ok(out) => std::io::BufWriter::with_capacity(1 << 16, out),
        Err(code) => return code,
    };
    let width = text_width(&args);
    let jsonl = matches!(args.format, EventsFormat::Jsonl | EventsFormat::Json);
    let mut emit = |events: &[crate::model::MergedEvent]| -> std::io::Result<()> {
        for e in events {
            if jsonl {
                serde_json::to_writer(&mut out, e)?;
                out.write_all(b"\n")?;
            } else {
                out.write_all(render::merged::line_wrapped(e, width).as_bytes())?;
            }
        }
        out.flush()
    };
    match crate::commands::follow::follow(&args.paths, args.policy, &mut emit) {
        Ok(()) => EXIT_OK,
        Err(e) => {
            eprintln!("locksuit: {e}");
            EXIT_USAGE
        }
    }
}

/// `events` in text: `--width`, else what the destination suggests.
fn text_width(args: &EventsArgs) -> usize {
    let to = if args.output.is_some() {
        Destination::File
    } else {
        Destination::Stdout
    };
    render::layout::resolve(args.width, to)
}
