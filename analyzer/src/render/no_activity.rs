//! Processes that recorded no lock activity (a shell, `env`): the text
//! report and the HTML page give them one shared line instead of a report
//! each; the summary counts them. One rule, one wording, for all three.

use crate::model::*;

/// A process that recorded no lock activity: it gets one mention in a
/// shared line instead of a report of empty tables. What a single thread
/// blocked in (a shell reading its script, waiting for its children) does
/// not make it active: why threads stop is a question for programs with
/// threads; a multithreaded one's blocking is shown.
pub fn is_idle(p: &Process) -> bool {
    let threads_blocked = p.threads.len() > 1
        && p.blocking_stacks
            .iter()
            .any(|s| !matches!(s.api.as_str(), "wait" | "waitpid" | "wait4" | "waitid"));
    p.locks.is_empty()
        && p.conds.is_empty()
        && p.findings.is_empty()
        && p.dropped_events == 0
        && !threads_blocked
}

/// The processes with lock activity, then those without, each in report
/// order.
pub fn partition(processes: &[Process]) -> (Vec<&Process>, Vec<&Process>) {
    processes.iter().partition(|p| !is_idle(p))
}

/// The shared line as phrases, each kept whole when wrapped: "2 processes
/// recorded no lock activity:", "sh ×2 (pids 12, 14),", "env (pid 13)";
/// `others` says whether processes with activity were reported before it.
pub fn phrases(idle: &[&Process], others: bool) -> Vec<String> {
    let mut by_exe: Vec<(&str, Vec<String>)> = Vec::new();
    for p in idle {
        let exe = crate::base::words::basename(&p.exe);
        let pid = match p.ended_by {
            "died" | "running" => format!("{} {}", p.pid, p.ended_by),
            _ => p.pid.to_string(),
        };
        match by_exe.iter_mut().find(|(e, _)| *e == exe) {
            Some((_, pids)) => pids.push(pid),
            None => by_exe.push((exe, vec![pid])),
        }
    }
    let groups: Vec<String> = by_exe
        .iter()
        .map(|(exe, pids)| match pids.as_slice() {
            [one] => format!("{exe} (pid {one})"),
            many if many.len() <= 4 => format!("{exe} ×{} (pids {})", many.len(), many.join(", ")),
            many => format!("{exe} ×{} (pids {}, …)", many.len(), many[..3].join(", ")),
        })
        .collect();
    let head = format!(
        "{}{} recorded no lock activity:",
        idle.len(),
        match (idle.len(), others) {
            (1, false) => " process",
            (1, true) => " more process",
            (_, false) => " processes",
            (_, true) => " more processes",
        }
    );
    let mut phrases = vec![head];
    let last = groups.len().saturating_sub(1);
    for (i, g) in groups.into_iter().enumerate() {
        phrases.push(if i < last { format!("{g},") } else { g });
    }
    phrases
}
