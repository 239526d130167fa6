//! The text report's "why threads stopped" tables: each thread's time by
//! blocking class, and the blocking call stacks that cost the most.

use super::grid::{figure, key, words, Grid};
use super::layout::wrap;
use super::sections::{section, TABLE_ROWS};
use crate::base::words::duration;
use crate::model::*;

/// Both tables, when anything blocked.
pub fn tables(out: &mut String, p: &Process, width: usize) {
    if p.blocking_stacks.is_empty() {
        return;
    }
    classes_table(out, p, width);
    idle_lines(out, p, width);
    stacks_table(out, p, width);
}

/// What waiting cost in processors, for the process and its most
/// waited-for locks.
fn idle_lines(out: &mut String, p: &Process, width: usize) {
    let Some(idle) = p.idle_while_waiting.as_ref().filter(|i| i.wait_ns > 0) else {
        return;
    };
    let text = format!(
        "While at least one thread waited on synchronisation ({} of wall-clock time: waits at the same time count once), on average {:.2} of {} processors stood idle (from the timeline: a thread not in a recorded wait counts as running; other processes are not seen).",
        duration(idle.wait_ns),
        idle.idle_processors,
        idle.cpus
    );
    out.push_str(&wrap(&text, width, "", ""));
    for l in idle.by_lock.iter().take(5) {
        let line = format!(
            "while threads waited on {} ({} of waits, added up over the threads): {:.2} idle",
            l.lock,
            duration(l.wait_ns),
            l.idle_processors
        );
        out.push_str(&wrap(&line, width, "  ", "    "));
    }
    out.push('\n');
}

fn classes_table(out: &mut String, p: &Process, width: usize) {
    let mut shown: Vec<&Thread> = p
        .threads
        .iter()
        .filter(|t| !t.blocking_classes.is_empty())
        .collect();
    let blocked = |t: &Thread| {
        t.blocking_classes
            .iter()
            .fold(0u64, |sum, c| sum.saturating_add(c.total_ns))
    };
    shown.sort_by_key(|t| std::cmp::Reverse(blocked(t)));
    let hidden = shown.len().saturating_sub(TABLE_ROWS);
    let mut grid = Grid::new(vec![
        key("thread"),
        figure("running", 1),
        figure("blocked", 0),
        words("why (class time ×times)", 0),
    ]);
    for t in shown.iter().take(TABLE_ROWS) {
        let why: Vec<String> = t
            .blocking_classes
            .iter()
            .map(|c| format!("{} {} ×{}", c.class, duration(c.total_ns), c.count))
            .collect();
        let name = match &t.name {
            Some(n) => format!("{} ({n})", t.tid),
            None => t.tid.to_string(),
        };
        grid.row(vec![
            name.into(),
            duration(t.running_ns).into(),
            duration(blocked(t)).into(),
            why.join(", ").into(),
        ]);
    }
    let title = format!(
        "Why threads stopped: time blocked by class (every lock and condition wait; other calls that blocked at least {} µs)",
        p.block_min_us
    );
    section(out, &title, &grid, hidden, "threads", width);
}

fn stacks_table(out: &mut String, p: &Process, width: usize) {
    let mut grid = Grid::new(vec![
        key("call"),
        words("class", 2),
        figure("times", 1),
        figure("total", 0),
        figure("max", 3),
        words("at", 0),
    ]);
    for s in p.blocking_stacks.iter().take(TABLE_ROWS) {
        grid.row(vec![
            s.api.clone().into(),
            s.class.clone().into(),
            s.count.to_string().into(),
            duration(s.total_ns).into(),
            duration(s.max_ns).into(),
            s.line.clone().into(),
        ]);
    }
    let hidden = p.blocking_stacks.len().saturating_sub(TABLE_ROWS);
    let title = "Blocking call stacks, most time first";
    section(out, title, &grid, hidden, "stacks", width);
}
