//! The text report's snapshots (a policy's triggers): for each, what set
//! it off, then one line per thread: what the kernel says it is doing, the
//! wait it is in (or, in any other system call or running, where its
//! copied stack puts it), and the locks it holds with the lines that took
//! them.
//! The full call chains are in JSON.

use super::layout::wrap;
use super::sections::more;
use crate::base::words::{count, duration};
use crate::model::*;

/// Snapshots shown in text; JSON has every one.
const SHOWN: usize = 8;

pub fn section(out: &mut String, p: &Process, width: usize) {
    if p.snapshots.is_empty() {
        return;
    }
    out.push_str(&wrap(
        "Snapshots (a policy's triggers): every thread at the moment",
        width,
        "",
        "",
    ));
    for s in p.snapshots.iter().take(SHOWN) {
        let what = s.object.map_or("a lock".to_string(), |l| l.to_string());
        let mut head = format!(
            "#{} at {}: {} waiting for {what}",
            s.number,
            duration(s.at_ns),
            count(u64::from(s.waiters), "thread", "threads"),
        );
        if s.trigger == "idle-processor" {
            head.push_str(", a wait began while a processor was idle");
        }
        if let Some(idle) = s.idle_processors {
            head.push_str(&format!(
                "; {} idle",
                count(u64::from(idle), "processor", "processors")
            ));
        }
        out.push_str(&wrap(&head, width, "  ", "    "));
        for t in &s.threads {
            out.push_str(&wrap(&thread_line(t), width, "    ", "      "));
        }
        if s.threads_omitted > 0 {
            let line = format!("… and {} more threads, not listed", s.threads_omitted);
            out.push_str(&wrap(&line, width, "    ", "    "));
        }
    }
    more(
        out,
        p.snapshots.len().saturating_sub(SHOWN),
        "snapshots",
        width,
    );
    out.push('\n');
}

/// Frames of a copied stack named in text: the program's own innermost
/// ones (JSON has them all).
const STACK_SHOWN: usize = 3;

/// "`how` f (file:line) ← g ← h" for a copied stack.
fn called_from(how: &str, stack: &SnapshotStack) -> String {
    let from = crate::model::frames::first_own_frame(&stack.frames);
    let own: Vec<&Frame> = stack.frames[from..]
        .iter()
        .filter(|f| {
            !f.module
                .as_deref()
                .is_some_and(crate::model::frames::is_system_module)
        })
        .collect();
    let mut names = own
        .iter()
        .take(STACK_SHOWN)
        .map(|f| crate::model::stacks::frame_name(f));
    let Some(innermost) = names.next() else {
        return String::new();
    };
    let at = match (&own[0].file, own[0].line) {
        (Some(file), Some(line)) => format!(" ({file}:{line})"),
        _ => String::new(),
    };
    let mut text = format!("{how} {innermost}{at}");
    for name in names {
        text.push_str(&format!(" ← {name}"));
    }
    if own.len() > STACK_SHOWN {
        text.push_str(" ← …");
    }
    text
}

fn thread_line(t: &SnapshotThread) -> String {
    let who = match &t.thread_name {
        Some(name) => format!("{} ({name})", t.tid),
        None => t.tid.to_string(),
    };
    let mut line = match t.cpu_ns {
        Some(cpu) => format!("{who}, CPU {}: ", duration(cpu)),
        None => format!("{who}: "),
    };
    if let Some(w) = &t.waiting {
        let what = w.object.clone().unwrap_or_else(|| "a thread".to_string());
        if t.state == "starting-to-wait" {
            line.push_str(&format!("starting to wait for {what}"));
        } else {
            line.push_str(t.state);
            if let Some(call) = &t.syscall {
                line.push_str(&format!(" in {call}"));
            }
            line.push_str(&format!(", waiting {} for {what}", duration(w.waited_ns)));
        }
        if let Some(site) = w.site {
            line.push_str(&format!(" at {site}"));
        }
        if let Some(holder) = w.holder_tid {
            line.push_str(&format!(" (held by {holder})"));
        }
    } else {
        line.push_str(t.state);
        if let Some(call) = &t.syscall {
            line.push_str(&format!(" in {call}"));
        }
        if let Some(stack) = &t.stack {
            let how = match t.syscall {
                Some(_) => ", called from",
                None => " at",
            };
            line.push_str(&called_from(how, stack));
        }
    }
    match &t.holds {
        Some(holds) if !holds.is_empty() => {
            let held: Vec<String> = holds
                .iter()
                .map(|h| {
                    let lock = h.lock.map_or("a lock".to_string(), |l| l.to_string());
                    match h.site {
                        Some(site) => format!("{lock} (taken at {site})"),
                        None => lock,
                    }
                })
                .collect();
            line.push_str(&format!("; holds {}", held.join(", ")));
        }
        Some(_) => {}
        None => line.push_str("; its held locks could not be read"),
    }
    line
}
