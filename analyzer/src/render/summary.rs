//! `--format summary` (and `--summary`): one screen for a whole run of
//! many processes: how many were recorded, the findings by kind, and which
//! processes have findings, i.e. fail `--fail-on-findings`.

use super::layout::{width_of, wrap, wrap_phrases};
use super::no_activity::is_idle;
use crate::base::words::count;
use crate::model::*;
use std::collections::BTreeMap;

/// Processes listed by name before "… and N more".
const LISTED: usize = 10;

fn name(p: &Process) -> String {
    format!("{} (pid {})", crate::base::words::basename(&p.exe), p.pid)
}

/// `label` padded to `column`, then `text`, wrapped under itself.
fn row(label: &str, column: usize, text: &str, width: usize) -> String {
    let pad = column.saturating_sub(width_of(label));
    let first = format!("  {label}{}  ", " ".repeat(pad));
    let rest = " ".repeat(width_of(&first));
    if width_of(&first) + 10 > width {
        // A very long name: the text goes under it.
        let mut out = wrap(label, width, "  ", "  ");
        out.push_str(&wrap(text, width, "      ", "      "));
        return out;
    }
    wrap(text, width, &first, &rest)
}

/// The summary of `report`; `gate` says whether `--fail-on-findings` was
/// asked for (the title of the process list says which failed it).
pub fn render(report: &Report, gate: bool, width: usize) -> String {
    let mut out = String::new();
    let processes = &report.processes;
    let idle: Vec<&Process> = processes.iter().filter(|p| is_idle(p)).collect();
    let active = processes.len() - idle.len();
    out.push_str(&wrap_phrases(
        &[
            format!("locksuit summary (threshold {:.2}):", report.threshold),
            format!(
                "{} recorded,",
                count(processes.len() as u64, "process", "processes")
            ),
            format!("{active} with lock activity"),
        ],
        " ",
        width,
        "",
    ));

    // Findings by kind: how many, over how many locks and processes.
    let mut kinds: BTreeMap<&str, (usize, usize, usize)> = BTreeMap::new();
    for p in processes {
        let mut seen_here = std::collections::BTreeSet::new();
        for f in &p.findings {
            let entry = kinds.entry(f.kind).or_default();
            entry.0 += 1;
            entry.1 += f.locks.len();
            if seen_here.insert(f.kind) {
                entry.2 += 1;
            }
        }
    }
    let total: usize = kinds.values().map(|k| k.0).sum();
    out.push_str(&format!(
        "\nFindings by kind ({}):\n",
        count(total as u64, "finding", "findings")
    ));
    if kinds.is_empty() {
        out.push_str("  none\n");
    }
    let suppressed: u64 = processes
        .iter()
        .flat_map(|p| &p.suppressed)
        .map(|s| s.findings)
        .sum();
    let mut ranked: Vec<(&str, (usize, usize, usize))> = kinds.into_iter().collect();
    ranked.sort_by(|a, b| b.1 .0.cmp(&a.1 .0).then(a.0.cmp(b.0)));
    let kind_column = ranked.iter().map(|(k, _)| width_of(k)).max().unwrap_or(0);
    for (kind, (findings, locks, in_processes)) in &ranked {
        let mut text = findings.to_string();
        if *locks > *findings {
            text.push_str(&format!(" ({locks} locks)"));
        }
        text.push_str(&format!(
            ", in {}",
            count(*in_processes as u64, "process", "processes")
        ));
        out.push_str(&row(kind, kind_column, &text, width));
    }

    if suppressed > 0 {
        out.push_str(&wrap(
            &format!(
                "  and {} suppressed (not counted)",
                count(suppressed, "finding", "findings")
            ),
            width,
            "",
            "    ",
        ));
    }

    // The processes the gate fails, worst first.
    let mut failing: Vec<&Process> = processes
        .iter()
        .filter(|p| !p.findings.is_empty())
        .collect();
    failing.sort_by(|a, b| {
        b.findings
            .len()
            .cmp(&a.findings.len())
            .then(a.pid.cmp(&b.pid))
    });
    let title = if gate {
        "Failed the gate (--fail-on-findings)"
    } else {
        "Processes with findings (these fail --fail-on-findings)"
    };
    out.push_str(&format!("\n{title}: {}\n", failing.len()));
    let names: Vec<String> = failing.iter().map(|p| name(p)).collect();
    let name_column = names
        .iter()
        .take(LISTED)
        .map(|n| width_of(n))
        .max()
        .unwrap_or(0);
    for (p, label) in failing.iter().zip(&names).take(LISTED) {
        let mut by_kind: BTreeMap<&str, usize> = BTreeMap::new();
        for f in &p.findings {
            *by_kind.entry(f.kind).or_default() += 1;
        }
        let kinds: Vec<String> = by_kind
            .iter()
            .map(|(k, n)| {
                if *n > 1 {
                    format!("{k} ×{n}")
                } else {
                    k.to_string()
                }
            })
            .collect();
        let text = format!(
            "{}: {}",
            count(p.findings.len() as u64, "finding", "findings"),
            kinds.join(", ")
        );
        out.push_str(&row(label, name_column, &text, width));
    }
    if failing.len() > LISTED {
        out.push_str(&format!("  … and {} more\n", failing.len() - LISTED));
    }

    for (ended_by, heading) in [
        ("died", "Died without a normal exit"),
        ("running", "Still running when read"),
    ] {
        let listed: Vec<String> = processes
            .iter()
            .filter(|p| p.ended_by == ended_by)
            .map(name)
            .collect();
        if listed.is_empty() {
            continue;
        }
        let line = format!(
            "\n{heading}: {} ({}{})",
            listed.len(),
            listed
                .iter()
                .take(LISTED)
                .cloned()
                .collect::<Vec<_>>()
                .join(", "),
            if listed.len() > LISTED { ", …" } else { "" }
        );
        out.push_str(&wrap(&line, width, "", "  "));
    }
    let dropped: u64 = processes.iter().map(|p| p.dropped_events).sum();
    if dropped > 0 {
        out.push_str(&wrap(
            &format!("{dropped} events could not be recorded (see each process's warnings)"),
            width,
            "",
            "  ",
        ));
    }
    out
}
