//! The HTML report: one self-contained page (inline style and script, no
//! network, opens from disk). Per process: a timeline per thread of its
//! running and blocked periods coloured by class, zoomable and pannable,
//! with a tooltip on every period and the handoff from the thread that
//! released a lock, and the critical path drawn over the lanes (see
//! `path_legend` and `page.js`: `drawPath`); per-thread bars of time by
//! class; the blocking call stacks, sortable; and the text report's tables, all after the findings.
//! As in the text report, processes with no lock activity share one line
//! at the end (see `no_activity.rs`).
//!
//! What needs no script is written as HTML here; the timeline is drawn by
//! `html/page.js` from data in the page. The periods are packed (varints,
//! gzipped, base64) so that a run of a million events stays a few MB; the
//! page inflates them with the browser's own `DecompressionStream`.

use super::text;
use super::text_options::TextOptions;
use crate::model::*;
use base64::Engine;
use serde::Serialize;
use std::fmt::Write as _;
use std::io::Write as _;

const STYLE: &str = include_str!("html/page.css");
const SCRIPT: &str = include_str!("html/page.js");

/// Colours of the built-in classes, then of user classes in turn.
const CLASS_COLOURS: [(&str, &str); 8] = [
    ("sync", "#d62728"),
    ("sleep", "#1f77b4"),
    ("io-file", "#2ca02c"),
    ("io-net", "#17becf"),
    ("poll", "#9467bd"),
    ("memory", "#8c564b"),
    ("preempted", "#ff7f0e"),
    ("other", "#7f7f7f"),
];
const USER_COLOURS: [&str; 6] = [
    "#e377c2", "#bcbd22", "#393b79", "#637939", "#8c6d31", "#843c39",
];

fn colour(class: &str, index: usize) -> &'static str {
    CLASS_COLOURS
        .iter()
        .find(|(c, _)| *c == class)
        .map_or(USER_COLOURS[index % USER_COLOURS.len()], |(_, colour)| {
            colour
        })
}

/// Escapes text for HTML element content and attribute values.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// JSON made safe inside a `<script>` element: no `<`, `>` or `&` at all
/// (JSON's `\u` escapes), so no name can end the element or open a
/// comment (`<!--<script` would swallow the rest of the page).
fn script_safe(json: &str) -> String {
    json.replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

/// The page for `report`.
pub fn render(report: &Report, o: &TextOptions) -> String {
    let mut page = String::new();
    page.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n");
    page.push_str("<meta name=\"viewport\" content=\"width=device-width\">\n");
    page.push_str("<title>locksuit report</title>\n<style>");
    page.push_str(STYLE);
    page.push_str("</style></head>\n<body>\n<h1>locksuit report</h1>\n");
    let _ = writeln!(
        page,
        "<p class=\"about\">{}; threshold {:.2}. Drag a timeline to pan, turn the wheel over it to zoom, double-click to see it all; point at a period for what it was.</p>",
        match report.processes.len() {
            1 => "1 process".to_string(),
            n => format!("{n} processes"),
        },
        report.threshold
    );
    // As in the text report: the processes with lock activity, the first
    // one on top; those with none share one line after them.
    let (active, idle) = super::no_activity::partition(&report.processes);
    for (i, p) in active.iter().enumerate() {
        crate::model::names::with(&p.names, || process(&mut page, i, p, report.threshold, o));
    }
    if !idle.is_empty() {
        let phrases = super::no_activity::phrases(&idle, !active.is_empty());
        let _ = writeln!(
            page,
            "<p class=\"no-activity\">{}</p>",
            esc(&phrases.join(" "))
        );
    }
    page.push_str("<div id=\"tooltip\" role=\"tooltip\" hidden></div>\n<script>");
    page.push_str(SCRIPT);
    page.push_str("</script>\n</body></html>\n");
    page
}

fn process(page: &mut String, index: usize, p: &Process, threshold: f64, o: &TextOptions) {
    let exe = crate::base::words::basename(&p.exe);
    let _ = writeln!(
        page,
        "<section class=\"process\" id=\"process-{index}\" data-pid=\"{}\">\n<h2>{} <span class=\"pid\">(pid {})</span></h2>",
        p.pid,
        esc(exe),
        p.pid
    );
    let _ = writeln!(
        page,
        "<p class=\"summary\">{}; {} threads; {} locks; {} blocking periods{}.</p>",
        match p.duration_ns {
            Some(ns) if p.ended_by == "detached" => format!(
                "recorded by locksuit attach for {} of its run",
                crate::base::words::duration(ns)
            ),
            Some(ns) => format!("ran {}", crate::base::words::duration(ns)),
            None => format!("ended by {}", p.ended_by),
        },
        p.threads.len(),
        p.locks.len(),
        p.timeline.periods.len(),
        if p.block_min_us > 0 {
            format!(
                " (calls beyond the lock API when they blocked at least {} µs)",
                p.block_min_us
            )
        } else {
            String::new()
        }
    );
    // What to look at first, then the detail it comes from.
    findings(page, p);
    legend(page, p);
    path_legend(page, p, index);
    page.push_str("<h3>Timeline</h3>\n");
    let _ = writeln!(
        page,
        "<div class=\"timeline\" data-process=\"{index}\"><noscript>The timeline needs JavaScript.</noscript></div>"
    );
    bars(page, p);
    stacks(page, p);
    let mut tables = String::new();
    text::process(&mut tables, p, threshold, o);
    let _ = writeln!(
        page,
        "<details class=\"text-report\"><summary>The text report</summary><pre>{}</pre></details>",
        esc(&tables)
    );
    let _ = writeln!(
        page,
        "<script type=\"application/json\" class=\"timeline-data\" data-process=\"{index}\">{}</script>\n</section>",
        script_safe(&timeline_json(p))
    );
}

/// The colours of the classes this process blocked in.
fn legend(page: &mut String, p: &Process) {
    page.push_str("<ul class=\"legend\"><li><span class=\"swatch running\"></span>running</li>");
    let used = |c: &String| p.blocking_stacks.iter().any(|s| s.class == *c);
    for (i, c) in p
        .timeline
        .classes
        .iter()
        .enumerate()
        .filter(|(_, c)| used(c))
    {
        let _ = write!(
            page,
            "<li><span class=\"swatch\" style=\"background:{}\"></span>{}</li>",
            colour(c, i),
            esc(c)
        );
    }
    page.push_str("</ul>\n");
}

fn thread_label(t: &Thread) -> String {
    match &t.name {
        Some(n) => format!("{} ({n})", t.tid),
        None => t.tid.to_string(),
    }
}

/// Per thread: its life split into running and each class, to scale.
fn bars(page: &mut String, p: &Process) {
    page.push_str("<h3>Time per thread</h3>\n<div class=\"bars\">\n");
    let index_of = |class: &str| p.timeline.classes.iter().position(|c| c == class);
    for t in &p.threads {
        let blocked = t
            .blocking_classes
            .iter()
            .fold(0u64, |sum, c| sum.saturating_add(c.total_ns));
        let life = t.running_ns.saturating_add(blocked).max(1);
        let pct = |ns: u64| ns as f64 * 100.0 / life as f64;
        let _ = write!(
            page,
            "<div class=\"bar-row\" data-tid=\"{}\"><span class=\"bar-label\">{}</span><span class=\"bar\">",
            t.tid,
            esc(&thread_label(t))
        );
        let _ = write!(
            page,
            "<span class=\"seg running\" style=\"width:{:.3}%\" title=\"running {}\"></span>",
            pct(t.running_ns),
            crate::base::words::duration(t.running_ns)
        );
        for c in &t.blocking_classes {
            let i = index_of(&c.class).unwrap_or(0);
            let _ = write!(
                page,
                "<span class=\"seg\" data-class=\"{}\" style=\"width:{:.3}%;background:{}\" title=\"{} {} ({} times)\"></span>",
                esc(&c.class),
                pct(c.total_ns),
                colour(&c.class, i),
                esc(&c.class),
                crate::base::words::duration(c.total_ns),
                c.count
            );
        }
        let why: Vec<String> = std::iter::once(format!(
            "running {}",
            crate::base::words::duration(t.running_ns)
        ))
        .chain(
            t.blocking_classes
                .iter()
                .map(|c| format!("{} {}", c.class, crate::base::words::duration(c.total_ns))),
        )
        .collect();
        let _ = writeln!(
            page,
            "</span><span class=\"bar-text\">{}</span></div>",
            esc(&why.join(", "))
        );
    }
    page.push_str("</div>\n");
}

/// The report collated by call stack, sortable by any column.
fn stacks(page: &mut String, p: &Process) {
    page.push_str("<h3>Blocking call stacks</h3>\n");
    if p.blocking_stacks.is_empty() {
        page.push_str("<p>No thread blocked.</p>\n");
        return;
    }
    page.push_str("<table class=\"stacks sortable\"><thead><tr><th data-type=\"text\">call</th><th data-type=\"text\">class</th><th data-type=\"number\">times</th><th data-type=\"number\" aria-sort=\"descending\">total</th><th data-type=\"number\">max</th><th data-type=\"text\">at</th></tr></thead><tbody>\n");
    for s in &p.blocking_stacks {
        let frames: Vec<String> = s.stack.iter().map(frame_text).collect();
        let _ = writeln!(
            page,
            "<tr class=\"stack\" data-class=\"{}\"><td>{}</td><td>{}</td><td data-value=\"{}\">{}</td><td data-value=\"{}\">{}</td><td data-value=\"{}\">{}</td><td><details><summary>{}</summary><ol class=\"frames\">{}</ol></details></td></tr>",
            esc(&s.class),
            esc(&s.api),
            esc(&s.class),
            s.count,
            s.count,
            s.total_ns,
            crate::base::words::duration(s.total_ns),
            s.max_ns,
            crate::base::words::duration(s.max_ns),
            esc(&s.line),
            frames
                .iter()
                .map(|f| format!("<li>{}</li>", esc(f)))
                .collect::<String>()
        );
    }
    page.push_str("</tbody></table>\n");
}

fn frame_text(f: &Frame) -> String {
    let function = f.function.as_deref().unwrap_or("?");
    match (&f.file, f.line) {
        (Some(file), Some(line)) => format!("{function} ({file}:{line})"),
        _ => match &f.offset {
            Some(offset) => format!("{function} [{offset}]"),
            None => format!("{function} [{}]", f.address),
        },
    }
}

fn findings(page: &mut String, p: &Process) {
    let _ = writeln!(page, "<h3>Findings ({})</h3>", p.findings.len());
    if p.findings.is_empty() {
        page.push_str("<p>None.</p>\n");
        return;
    }
    page.push_str("<ol class=\"findings\">\n");
    for f in &p.findings {
        let _ = writeln!(
            page,
            "<li class=\"finding\" data-kind=\"{}\"><span class=\"kind\">{}</span> {}</li>",
            f.kind,
            f.kind,
            esc(&f.message)
        );
    }
    page.push_str("</ol>\n");
}

/// What the script draws the timeline from.
#[derive(Serialize)]
struct TimelineData<'a> {
    classes: &'a [String],
    colours: Vec<&'static str>,
    lanes: Vec<LaneData>,
    stacks: Vec<StackData<'a>>,
    lines: &'a [String],
    locks: Vec<String>,
    /// How many periods `periods` holds.
    count: usize,
    /// The critical path, earliest first: per segment lane, start, end,
    /// kind (index into [`PATH_KINDS`]), lock + 1, waiting line + 1,
    /// ending lane + 1, ender's line + 1 (lines index `path_lines`).
    path: Vec<[u64; 8]>,
    path_kinds: [&'static str; 5],
    path_lines: Vec<String>,
    /// Per period, varints: lane, start (from the previous period's start
    /// in the same lane, else from 0), duration, class, stack, releasing
    /// lane + 1, release line + 1, lock + 1, timed out, lane of the holder
    /// when the wait began + 1. Gzipped, base64.
    periods: String,
}

#[derive(Serialize)]
struct LaneData {
    tid: u32,
    name: String,
    start: u64,
    end: u64,
}

#[derive(Serialize)]
struct StackData<'a> {
    api: &'a str,
    line: &'a str,
    frames: Vec<String>,
}

fn timeline_json(p: &Process) -> String {
    let t = &p.timeline;
    let name_of = |tid: u32| {
        p.threads
            .iter()
            .find(|th| th.tid == tid)
            .map_or_else(|| tid.to_string(), thread_label)
    };
    let lanes: Vec<LaneData> = t
        .lanes
        .iter()
        .map(|l| LaneData {
            tid: l.tid,
            name: name_of(l.tid),
            start: l.start_ns,
            end: l.end_ns,
        })
        .collect();
    let lane_of: std::collections::HashMap<u32, usize> = t
        .lanes
        .iter()
        .enumerate()
        .map(|(i, l)| (l.tid, i))
        .collect();
    let mut locks: Vec<String> = Vec::new();
    let mut lock_index: std::collections::HashMap<LockId, usize> = Default::default();
    let mut packed = Vec::with_capacity(t.periods.len() * 8);
    let mut last = (usize::MAX, 0u64);
    // A period of a thread with no lane (no thread record) is left out:
    // each lane's periods must stay in start order.
    let periods = t.periods.iter().filter(|p| lane_of.contains_key(&p.tid));
    let count = periods.clone().count();
    for period in periods {
        let lane = lane_of[&period.tid];
        let base = if last.0 == lane { last.1 } else { 0 };
        last = (lane, period.start_ns);
        let lock = period.lock.map_or(0, |l| {
            1 + *lock_index.entry(l).or_insert_with(|| {
                locks.push(l.to_string());
                locks.len() - 1
            })
        });
        let lane_number = |tid: u32| {
            (tid != 0)
                .then(|| lane_of.get(&tid).map(|&i| i + 1))
                .flatten()
                .unwrap_or(0)
        };
        let releaser = lane_number(period.released_by);
        for v in [
            lane as u64,
            period.start_ns.saturating_sub(base),
            period.end_ns.saturating_sub(period.start_ns),
            u64::from(period.class),
            u64::from(period.stack),
            releaser as u64,
            period.released_at.map_or(0, |l| u64::from(l) + 1),
            lock as u64,
            u64::from(period.timed_out),
            lane_number(period.held_by) as u64,
        ] {
            varint(&mut packed, v);
        }
    }
    let (path, path_lines) = path_data(p, &lane_of, &mut locks, &mut lock_index);
    let data = TimelineData {
        classes: &t.classes,
        colours: t
            .classes
            .iter()
            .enumerate()
            .map(|(i, c)| colour(c, i))
            .collect(),
        lanes,
        stacks: p
            .blocking_stacks
            .iter()
            .map(|s| StackData {
                api: &s.api,
                line: &s.line,
                frames: s.stack.iter().map(frame_text).collect(),
            })
            .collect(),
        lines: &t.lines,
        locks,
        count,
        path,
        path_kinds: PATH_KINDS.map(SegmentKind::name),
        path_lines,
        periods: gzip_base64(&packed),
    };
    serde_json::to_string(&data).unwrap_or_else(|_| "{}".to_string())
}

const PATH_KINDS: [SegmentKind; 5] = [
    SegmentKind::Running,
    SegmentKind::Holding,
    SegmentKind::Waiting,
    SegmentKind::Join,
    SegmentKind::Cond,
];

type PathRows = (Vec<[u64; 8]>, Vec<String>);

/// The critical path's segments for the script, in lanes (a segment of a
/// thread with no lane is left out).
fn path_data(
    p: &Process,
    lane_of: &std::collections::HashMap<u32, usize>,
    locks: &mut Vec<String>,
    lock_index: &mut std::collections::HashMap<LockId, usize>,
) -> PathRows {
    let Some(c) = &p.critical_path else {
        return Default::default();
    };
    let mut lines: Vec<String> = Vec::new();
    let mut line_index: std::collections::HashMap<String, usize> = Default::default();
    let mut line = |l: &Option<String>| -> u64 {
        l.as_deref().map_or(0, |l| {
            1 + *line_index.entry(l.to_string()).or_insert_with(|| {
                lines.push(l.to_string());
                lines.len() - 1
            }) as u64
        })
    };
    let rows = c
        .segments
        .iter()
        .filter_map(|s| {
            let lane = *lane_of.get(&s.tid)?;
            let lock = s.lock.map_or(0, |l| {
                1 + *lock_index.entry(l).or_insert_with(|| {
                    locks.push(l.to_string());
                    locks.len() - 1
                }) as u64
            });
            let ender = lane_of.get(&s.ended_by).map_or(0, |&i| i as u64 + 1);
            Some([
                lane as u64,
                s.start_ns,
                s.end_ns,
                PATH_KINDS.iter().position(|k| *k == s.kind).unwrap_or(0) as u64,
                lock,
                line(&s.line),
                ender,
                line(&s.ender_line),
            ])
        })
        .collect::<Vec<[u64; 8]>>();
    let mut rows = rows;
    if rows.len() > PATH_SEGMENTS_DRAWN {
        // A path through a million short waits would make the page its
        // size: the longest segments are what a reader looks for.
        rows.sort_unstable_by_key(|r| std::cmp::Reverse(r[2].saturating_sub(r[1])));
        rows.truncate(PATH_SEGMENTS_DRAWN);
        rows.sort_unstable_by_key(|r| r[1]);
    }
    (rows, lines)
}

/// At most this many of the path's segments are drawn (the longest).
const PATH_SEGMENTS_DRAWN: usize = 20_000;

/// What the timeline's critical path shows, and the switch that hides it.
fn path_legend(page: &mut String, p: &Process, index: usize) {
    let Some(c) = p.critical_path.as_ref().filter(|c| !c.segments.is_empty()) else {
        return;
    };
    let on_path: Vec<String> = c
        .locks
        .iter()
        .filter(|l| l.wait_ns + l.hold_ns > 0)
        .take(3)
        .map(|l| {
            format!(
                "{} ({} waiting, {} held)",
                l.lock,
                crate::base::words::duration(l.wait_ns),
                crate::base::words::duration(l.hold_ns)
            )
        })
        .collect();
    let _ = writeln!(
        page,
        "<div class=\"path-legend\" data-process=\"{index}\" data-segments=\"{}\"><label><input type=\"checkbox\" class=\"path-toggle\" data-process=\"{index}\" checked> Critical path</label> <span class=\"swatch path-running\"></span>running <span class=\"swatch path-holding\"></span>in a critical section <span class=\"swatch path-waiting\"></span>waiting <span class=\"path-jump\">│</span> where it goes on in the thread that ended the wait. <span class=\"path-about\">{} segments, {} of a {} run{}.</span></div>",
        c.segments.len().min(PATH_SEGMENTS_DRAWN),
        if c.segments.len() > PATH_SEGMENTS_DRAWN {
            format!(
                "{} (the {PATH_SEGMENTS_DRAWN} longest drawn)",
                c.segments.len()
            )
        } else {
            c.segments.len().to_string()
        },
        crate::base::words::duration(c.length_ns),
        crate::base::words::duration(c.run_ns),
        if on_path.is_empty() {
            String::new()
        } else {
            format!("; on it: {}", esc(&on_path.join(", ")))
        }
    );
}

/// LEB128: seven bits a byte, low first, high bit set on all but the last.
fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn gzip_base64(bytes: &[u8]) -> String {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    // Writing to memory cannot fail.
    let _ = gz.write_all(bytes);
    let compressed = gz.finish().unwrap_or_default();
    base64::engine::general_purpose::STANDARD.encode(compressed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_are_leb128() {
        let mut out = Vec::new();
        for v in [0, 1, 127, 128, 300, u64::from(u32::MAX) + 5] {
            varint(&mut out, v);
        }
        assert_eq!(
            out,
            vec![0, 1, 127, 0x80, 1, 0xac, 2, 0x84, 0x80, 0x80, 0x80, 0x10]
        );
    }

    #[test]
    fn script_data_cannot_end_its_element_or_open_a_comment() {
        let json = serde_json::to_string(&["<!--<script>", "</script>", "a&b"]).unwrap();
        let safe = script_safe(&json);
        assert!(!safe.contains('<') && !safe.contains('>') && !safe.contains('&'));
        let back: Vec<String> = serde_json::from_str(&safe).unwrap();
        assert_eq!(back, ["<!--<script>", "</script>", "a&b"]);
    }

    #[test]
    fn text_is_escaped_for_elements_and_attributes() {
        assert_eq!(esc("a<b>&\"'"), "a&lt;b&gt;&amp;&quot;&#39;");
    }
}
