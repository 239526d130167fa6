//! `locksuit top`: a live view of a running program, refreshed every
//! second from its trace (as `report` reads a live trace): the locks by
//! wait in the last interval and in all, the threads blocked right now and
//! on whom, the hottest lines. Keys: `s` sorts by the interval or the
//! total, `p` pauses, `e` switches the program between events for
//! contended operations and events for every one (a request written into
//! the trace's header, which the shim reads on its slow paths), `q` quits.
//! The view only moves forward: each refresh is a later state of the same
//! trace, and the event pane shows the process's merged stream (see
//! `follow.rs`), so no acquisition appears before the release that let it
//! in.

use super::options::*;
use crate::analysis::findings::Limits;
use crate::base::exit::*;
use crate::commands::follow::Follower;
use crate::input::load::{self, InputError, Selection};
use crate::input::merge::Policy;
use crate::input::stream::StreamFilter;
use crate::input::symbolize::Symbolizer;
use crate::model::{Lock, Process};
use clap::Args;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Modifier, Style};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table};
use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[derive(Args)]
pub struct TopArgs {
    /// A running program's pid (the trace it has open; if it has none, its trace is
    /// looked for in $LOCKSUIT_DIR, else the current directory), a trace file, or a
    /// directory of traces (the newest process with lock activity).
    target: Option<String>,
    /// Seconds between refreshes.
    #[arg(long, default_value = "1", value_parser = parse_timeout, value_name = "SECONDS")]
    interval: f64,
}

/// What is shown, kept between refreshes for the interval's deltas.
struct View {
    process: Option<Process>,
    /// Each lock's total wait at the previous refresh, and now minus then.
    previous: HashMap<String, u64>,
    recent: HashMap<String, u64>,
    by_total: bool,
    paused: bool,
    error: Option<String>,
    /// What `e` last asked the program (`CONTROL_*`), 0 if nothing.
    asked: u32,
    events: Events,
    /// What each read learned about the traces' blocks, for the next.
    live: load::LiveIndexes,
}

/// The event pane: the newest process's merged stream, its latest lines.
struct Events {
    pid: Option<u32>,
    follower: Follower,
    lines: VecDeque<String>,
}

/// Lines the event pane keeps (more than any terminal shows).
const EVENT_LINES: usize = 200;

impl Events {
    fn new() -> Events {
        Events {
            pid: None,
            follower: Follower::new(Policy::Minimal),
            lines: VecDeque::new(),
        }
    }
}

/// Writes a request into the running program's trace header.
fn ask(trace: &str, request: u32) -> Result<(), String> {
    use std::os::unix::fs::FileExt;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(trace)
        .map_err(|e| format!("{trace}: {e}"))?;
    let at = core::mem::offset_of!(locksuit_format::FileHeader, control) as u64;
    file.write_all_at(&request.to_le_bytes(), at)
        .map_err(|e| format!("{trace}: {e}"))
}

fn read(
    target: &(Vec<PathBuf>, Selection),
    symbolizer: &mut Symbolizer,
    (events, live): (&mut Events, &mut load::LiveIndexes),
) -> Result<Option<Process>, InputError> {
    let mut newest: Option<Process> = None;
    load::for_each_live(&target.0, &target.1, live, |path, mapped| {
        let load::Mapped { trace, pages, .. } = mapped;
        // The process whose events are shown: its new events go into the
        // merge, and its raw ids get names.
        let followed = events.pid == Some(trace.header.pid);
        // Not running any more (a trace marked complete may still be
        // written to while exit handlers run).
        let gone = followed && !crate::analysis::process_state::still_running(&trace.header);
        if followed {
            events.follower.take(&trace);
        }
        let p = crate::analysis::process::analyze(
            &path.display().to_string(),
            trace,
            (&Limits::default(), crate::analysis::process::Depth::Records),
            if followed {
                &StreamFilter::Names
            } else {
                &StreamFilter::Off
            },
            symbolizer,
            &mut || pages.release(),
        );
        if followed {
            let lines = &mut events.lines;
            let mut keep = |delivered: &[crate::model::MergedEvent]| {
                lines.extend(delivered.iter().map(crate::render::merged::line));
                let over = lines.len().saturating_sub(EVENT_LINES);
                lines.drain(..over);
                Ok(())
            };
            // Lines kept in memory: writing them cannot fail.
            let _ = events
                .follower
                .deliver(&p.raw_names, p.start_mono_ns, gone, &mut keep);
        }
        if newest
            .as_ref()
            .is_none_or(|n| p.start_unix_ns >= n.start_unix_ns)
            && !p.locks.is_empty()
        {
            newest = Some(p);
        }
    })?;
    Ok(newest)
}

fn refresh(view: &mut View, target: &(Vec<PathBuf>, Selection), symbolizer: &mut Symbolizer) {
    match read(target, symbolizer, (&mut view.events, &mut view.live)) {
        Ok(p) => {
            // Another process is the newest now: its stream from the start,
            // from the next refresh on.
            if let Some(p) = p.as_ref().filter(|p| view.events.pid != Some(p.pid)) {
                view.events = Events::new();
                view.events.pid = Some(p.pid);
            }
            if let Some(p) = &p {
                crate::model::names::with(&p.names, || {
                    let now: HashMap<String, u64> = p
                        .locks
                        .iter()
                        .map(|l| (l.id.to_string(), l.wait_ns))
                        .collect();
                    view.recent = now
                        .iter()
                        .map(|(k, &v)| {
                            (
                                k.clone(),
                                v.saturating_sub(*view.previous.get(k).unwrap_or(&0)),
                            )
                        })
                        .collect();
                    view.previous = now;
                });
            }
            view.process = p.or(view.process.take());
            view.error = None;
        }
        Err(e) => view.error = Some(e.to_string()),
    }
}

/// Whether `e` asks the program to record every operation (else to go
/// back to contended ones): unless that was asked last, or it records
/// every operation from the start.
fn asks_for_every_operation(view: &View, p: &Process) -> bool {
    view.asked != locksuit_format::CONTROL_EVENTS_ALL
        && !(view.asked == 0 && p.events_mode == "all")
}

fn draw(frame: &mut ratatui::Frame, view: &View) {
    let [head, locks, blocked, lines, stream] = Layout::vertical([
        Constraint::Length(4),
        Constraint::Percentage(30),
        Constraint::Percentage(15),
        Constraint::Percentage(20),
        Constraint::Min(4),
    ])
    .areas(frame.area());
    let Some(p) = &view.process else {
        let text = view
            .error
            .clone()
            .unwrap_or_else(|| "waiting for a trace with lock activity…".into());
        frame.render_widget(
            Paragraph::new(text)
                .block(Block::default().borders(Borders::ALL).title("locksuit top")),
            head,
        );
        return;
    };
    crate::model::names::with(&p.names, || {
        let state = match p.ended_by {
            "running" => "running",
            "exit" => "exited",
            other => other,
        };
        let title = format!(
            "locksuit top: {} (pid {}) {state}{}",
            crate::base::words::basename(&p.exe),
            p.pid,
            if view.paused { ", paused" } else { "" },
        );
        // A line of its own, short enough for 80 columns whatever the
        // program's name: what each key does next.
        // `e` steers a program the shim records; a trace that is finished
        // (or was written by attach) has nobody to ask.
        let steer = if p.ended_by == "running" {
            format!(
                "e: record {}  ",
                if asks_for_every_operation(view, p) {
                    "every operation"
                } else {
                    "contended only"
                }
            )
        } else {
            String::new()
        };
        let keys = format!(
            "s: sort by {}  p: {}  {steer}q: quit",
            if view.by_total {
                "last interval"
            } else {
                "total"
            },
            if view.paused { "resume" } else { "pause" },
        );
        let summary = format!(
            "{} threads, {} locks, {} events ({}){}",
            p.threads.len(),
            p.locks.len(),
            p.events,
            // What the program does, not what was asked: a request shows as
            // pending until the shim has applied it (its trace says
            // "switched").
            match (view.asked, p.events_mode) {
                _ if p.recording == "attached" => "futex waits and wakes, seen from outside",
                (locksuit_format::CONTROL_EVENTS_ALL, "switched") => "recording every operation",
                (locksuit_format::CONTROL_EVENTS_CONTENDED, "switched") =>
                    "recording contended operations",
                (locksuit_format::CONTROL_EVENTS_ALL, _) =>
                    "asked to record every operation; waiting for the program",
                (_, "contended") => "recording contended operations",
                (_, "all") => "recording every operation",
                _ => "recording mode switched",
            },
            view.error
                .as_ref()
                .map_or(String::new(), |e| format!("   ({e})"))
        );
        let head_lines = vec![
            ratatui::text::Line::from(summary),
            ratatui::text::Line::from(keys),
        ];
        frame.render_widget(
            Paragraph::new(head_lines).block(Block::default().borders(Borders::ALL).title(title)),
            head,
        );

        let mut rows: Vec<&Lock> = p.locks.iter().collect();
        let recent = |l: &Lock| *view.recent.get(&l.id.to_string()).unwrap_or(&0);
        if view.by_total {
            rows.sort_by_key(|l| std::cmp::Reverse(l.wait_ns));
        } else {
            rows.sort_by(|a, b| recent(b).cmp(&recent(a)).then(b.wait_ns.cmp(&a.wait_ns)));
        }
        let lock_rows = rows.iter().map(|l| {
            Row::new(vec![
                Cell::from(l.id.to_string()),
                Cell::from(crate::base::words::duration(recent(l))),
                Cell::from(crate::base::words::duration(l.wait_ns)),
                Cell::from(l.contended.to_string()),
                Cell::from(l.acquisitions.to_string()),
            ])
        });
        let header = Row::new(vec![
            "lock",
            "wait (interval)",
            "wait (total)",
            "contended",
            "acquired",
        ])
        .style(Style::default().add_modifier(Modifier::BOLD));
        let widths = [
            Constraint::Percentage(36),
            Constraint::Percentage(16),
            Constraint::Percentage(16),
            Constraint::Percentage(16),
            Constraint::Percentage(16),
        ];
        frame.render_widget(
            Table::new(lock_rows, widths)
                .header(header)
                .block(Block::default().borders(Borders::ALL).title("Locks")),
            locks,
        );

        let blocked_rows = p.blocked.iter().map(|b| {
            Row::new(vec![
                Cell::from(match &b.thread_name {
                    Some(n) => format!("{} ({n})", b.tid),
                    None => b.tid.to_string(),
                }),
                Cell::from(format!(
                    "{} {}",
                    b.waits_in,
                    b.object.clone().unwrap_or_default()
                )),
                Cell::from(
                    b.holder_tid
                        .map_or(String::new(), |t| format!("held by {t}")),
                ),
                Cell::from(
                    b.waited_ns
                        .map_or(String::new(), crate::base::words::duration),
                ),
            ])
        });
        let header = Row::new(vec!["thread", "waits for", "holder", "for"])
            .style(Style::default().add_modifier(Modifier::BOLD));
        let widths = [
            Constraint::Percentage(30),
            Constraint::Percentage(35),
            Constraint::Percentage(20),
            Constraint::Percentage(15),
        ];
        frame.render_widget(
            Table::new(blocked_rows, widths)
                .header(header)
                .block(Block::default().borders(Borders::ALL).title("Blocked now")),
            blocked,
        );

        let mut sites: Vec<_> = p.sites.iter().collect();
        sites.sort_by_key(|s| std::cmp::Reverse(s.wait_ns));
        let site_rows = sites.iter().map(|s| {
            Row::new(vec![
                Cell::from(s.id.to_string()),
                Cell::from(crate::base::words::duration(s.wait_ns)),
                Cell::from(s.contended.to_string()),
                Cell::from(s.engagements.to_string()),
            ])
        });
        let header = Row::new(vec!["line", "wait (total)", "contended", "engaged"])
            .style(Style::default().add_modifier(Modifier::BOLD));
        let widths = [
            Constraint::Percentage(52),
            Constraint::Percentage(16),
            Constraint::Percentage(16),
            Constraint::Percentage(16),
        ];
        frame.render_widget(
            Table::new(site_rows, widths).header(header).block(
                Block::default()
                    .borders(Borders::ALL)
                    .title("Hottest lines"),
            ),
            lines,
        );

        // The newest lines that fit, oldest first.
        let fits = usize::from(stream.height.saturating_sub(2));
        let skip = view.events.lines.len().saturating_sub(fits);
        let text: Vec<ratatui::text::Line> = view
            .events
            .lines
            .iter()
            .skip(skip)
            .map(|l| ratatui::text::Line::from(l.as_str()))
            .collect();
        frame.render_widget(
            Paragraph::new(text).block(
                Block::default()
                    .borders(Borders::ALL)
                    .title("Events, in causal order"),
            ),
            stream,
        );
    });
}

pub fn top(args: TopArgs) -> i32 {
    let target = match &args.target {
        Some(t) if !t.is_empty() && t.chars().all(|c| c.is_ascii_digit()) => {
            let pid = t.parse().unwrap_or(0);
            // The trace it has open, wherever that is; else looked for
            // where `report` looks.
            let paths = load::trace_of_running(pid).into_iter().collect();
            (
                paths,
                Selection {
                    exes: Vec::new(),
                    pids: vec![pid],
                },
            )
        }
        Some(path) => (vec![PathBuf::from(path)], Selection::default()),
        None => (Vec::new(), Selection::default()),
    };
    if !std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        eprintln!("locksuit: top draws on a terminal; for a report of a running program use `locksuit report`");
        return EXIT_USAGE;
    }
    crate::base::oom::reuse_memory_between_reads();
    let mut symbolizer = Symbolizer::default();
    let mut view = View {
        process: None,
        previous: HashMap::new(),
        recent: HashMap::new(),
        by_total: false,
        paused: false,
        error: None,
        asked: 0,
        events: Events::new(),
        live: load::LiveIndexes::default(),
    };
    refresh(&mut view, &target, &mut symbolizer);
    if view.process.is_none() {
        if let Some(e) = &view.error {
            eprintln!("locksuit: {e}");
            return EXIT_USAGE;
        }
    }
    // The terminal is the view's from here on: nothing else writes to it.
    crate::base::progress::screen_taken(true);
    let mut terminal = ratatui::init();
    let interval = Duration::from_secs_f64(args.interval);
    let mut last = Instant::now();
    let result = loop {
        if let Err(e) = terminal.draw(|f| draw(f, &view)) {
            break Err(e);
        }
        let wait = interval.saturating_sub(last.elapsed());
        match event::poll(wait) {
            Ok(true) => {
                if let Ok(Event::Key(key)) = event::read() {
                    if key.kind != KeyEventKind::Press {
                        continue;
                    }
                    match key.code {
                        KeyCode::Char('q') | KeyCode::Esc => break Ok(()),
                        KeyCode::Char('s') => view.by_total = !view.by_total,
                        KeyCode::Char('p') => view.paused = !view.paused,
                        KeyCode::Char('e') => {
                            if let Some(p) =
                                view.process.as_ref().filter(|p| p.ended_by == "running")
                            {
                                let request = if asks_for_every_operation(&view, p) {
                                    locksuit_format::CONTROL_EVENTS_ALL
                                } else {
                                    locksuit_format::CONTROL_EVENTS_CONTENDED
                                };
                                match ask(&p.trace, request) {
                                    Ok(()) => view.asked = request,
                                    Err(e) => view.error = Some(e),
                                }
                            }
                        }
                        _ => {}
                    }
                }
            }
            Ok(false) => {}
            Err(e) => break Err(e),
        }
        if last.elapsed() >= interval {
            last = Instant::now();
            if !view.paused {
                refresh(&mut view, &target, &mut symbolizer);
            }
        }
    };
    ratatui::restore();
    crate::base::progress::screen_taken(false);
    match result {
        Ok(()) => EXIT_OK,
        Err(e) => {
            eprintln!("locksuit: top: {e}");
            EXIT_USAGE
        }
    }
}
