//! Stacks in the folded format flame-graph tools read (`inferno`,
//! Brendan Gregg's `flamegraph.pl`, speedscope): one line per stack,
//! frames from the outermost in, separated by `;`, then its value. Each
//! process's stacks start with a frame naming it, so several processes
//! make one graph.

use crate::model::stacks::{frame_name, weighted, Weight};
use crate::model::Report;

/// Folded lines of every process's stacks under `weight`.
pub fn lines(report: &Report, weight: Weight) -> Vec<String> {
    let mut lines = Vec::new();
    for p in &report.processes {
        let process = format!("{} (pid {})", crate::base::words::basename(&p.exe), p.pid);
        for s in weighted(p, weight) {
            let frames = s.frames.iter().rev().map(frame_name);
            let mut line = clean(&process);
            for name in frames.chain(s.leaf.map(str::to_string)) {
                line.push(';');
                line.push_str(&clean(&name));
            }
            line.push_str(&format!(" {}", s.value));
            lines.push(line);
        }
    }
    lines
}

/// A frame as one field: no separators of the format inside it.
fn clean(name: &str) -> String {
    name.replace(';', ":").replace(['\n', '\r'], " ")
}

pub fn write(report: &Report, weight: Weight, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    for line in lines(report, weight) {
        writeln!(out, "{line}")?;
    }
    Ok(())
}
