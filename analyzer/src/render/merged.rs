//! `locksuit events --merged`: each process's merged stream (see
//! `merge.rs`) as text, JSON lines or one JSON document.

use super::layout::wrap;
use crate::base::words::duration;
use crate::model::{MergedEvent, Perturbation, Process};
use std::io::Write;

/// One event as a line of text.
pub fn line(e: &MergedEvent) -> String {
    let mut s = format!("{:>6} ", e.n);
    if let Some(step) = e.step {
        s.push_str(&format!("step {step:<5} "));
    }
    let at = e.adjusted_ts_ns.unwrap_or(e.ts_ns);
    s.push_str(&format!("{:>10}  {}", duration(at), e.tid));
    if let Some(name) = &e.thread {
        s.push_str(&format!(" ({name})"));
    }
    s.push_str(&format!(" {}", e.kind));
    if let Some(peer) = e.peer_tid {
        s.push_str(&format!(" thread {peer}"));
    }
    if let Some(object) = &e.object {
        s.push_str(&format!(" {object} #{}", e.object_seq));
    }
    if let Some(site) = &e.site {
        s.push_str(&format!(" at {site}"));
    }
    if let Some(adj) = e.adjustment_ns.filter(|&a| a > 0) {
        s.push_str(&format!(" (moved {} later)", duration(adj)));
    }
    if e.released_early {
        s.push_str(" [released early: what it follows was not recorded]");
    }
    s
}

/// One event as a wrapped text line (`--follow`).
pub fn line_wrapped(e: &MergedEvent, width: usize) -> String {
    wrap(&line(e), width, "", "          ")
}

/// What follows a process's events in text: how many were released early,
/// and (`adjusted`) each thread's perturbation.
pub fn text_end(early: usize, perturbation: &[Perturbation], width: usize) -> String {
    let mut out = String::new();
    if early > 0 {
        out.push_str(&wrap(
            &format!("{early} events released early: something they follow was not recorded (dropped, overwritten or left out by a policy)"),
            width,
            "   ",
            "   ",
        ));
    }
    for t in perturbation {
        out.push_str(&wrap(
            &format!(
                "thread {}: {} of {} events moved, {} in all, at most {}",
                t.tid,
                t.adjusted,
                t.events,
                duration(t.total_ns),
                duration(t.largest_ns)
            ),
            width,
            "   ",
            "     ",
        ));
    }
    out.push('\n');
    out
}

/// How [`Streamed`] writes.
#[derive(Clone, Copy)]
pub enum StreamFormat {
    Jsonl,
    /// Wrapped at this width.
    Text(usize),
    /// One document: `{"processes": [{"events", "exe", "perturbation", "pid",
    /// "released_early"}]}`.
    Json,
}

/// Each process's merged stream written as it is delivered, so that no
/// format needs the whole stream in memory: `begin`, then per process
/// `process`, its `event`s and `end_process`, then `finish`.
pub struct Streamed<W: Write> {
    out: W,
    format: StreamFormat,
    processes: usize,
    events: usize,
    early: usize,
}

/// `text` as pretty JSON whose lines after the first are indented by
/// `indent` spaces (to nest it in a document written by hand).
fn nested(value: &serde_json::Value, indent: usize) -> std::io::Result<String> {
    let text = serde_json::to_string_pretty(value).map_err(std::io::Error::from)?;
    Ok(text.replace('\n', &format!("\n{}", " ".repeat(indent))))
}

impl<W: Write> Streamed<W> {
    pub fn new(out: W, format: StreamFormat) -> Self {
        Streamed {
            out,
            format,
            processes: 0,
            events: 0,
            early: 0,
        }
    }

    pub fn begin(&mut self) -> std::io::Result<()> {
        match self.format {
            StreamFormat::Json => self.out.write_all(b"{\n  \"processes\": ["),
            _ => Ok(()),
        }
    }

    pub fn process(&mut self, _p: &Process) -> std::io::Result<()> {
        self.events = 0;
        self.early = 0;
        self.processes += 1;
        match self.format {
            StreamFormat::Json => {
                let comma = if self.processes > 1 { "," } else { "" };
                write!(self.out, "{comma}\n    {{\n      \"events\": [")
            }
            _ => Ok(()),
        }
    }

    pub fn event(&mut self, p: &Process, e: &MergedEvent) -> std::io::Result<()> {
        self.events += 1;
        self.early += usize::from(e.released_early);
        match self.format {
            StreamFormat::Jsonl => {
                let mut line = serde_json::to_value(e).map_err(std::io::Error::from)?;
                line["pid"] = p.pid.into();
                serde_json::to_writer(&mut self.out, &line).map_err(std::io::Error::from)?;
                self.out.write_all(b"\n")
            }
            StreamFormat::Text(width) => {
                // A process with no events gets no heading.
                if self.events == 1 {
                    self.out
                        .write_all(super::process_heading(p, width).as_bytes())?;
                }
                self.out.write_all(line_wrapped(e, width).as_bytes())
            }
            StreamFormat::Json => {
                let comma = if self.events > 1 { "," } else { "" };
                let value = serde_json::to_value(e).map_err(std::io::Error::from)?;
                write!(self.out, "{comma}\n        {}", nested(&value, 8)?)
            }
        }
    }

    pub fn end_process(
        &mut self,
        p: &Process,
        perturbation: &[Perturbation],
    ) -> std::io::Result<()> {
        match self.format {
            StreamFormat::Jsonl => Ok(()),
            StreamFormat::Text(width) if self.events > 0 => self
                .out
                .write_all(text_end(self.early, perturbation, width).as_bytes()),
            StreamFormat::Text(_) => Ok(()),
            StreamFormat::Json => {
                let close = if self.events > 0 { "\n      ]" } else { "]" };
                let perturbation =
                    serde_json::to_value(perturbation).map_err(std::io::Error::from)?;
                write!(
                    self.out,
                    "{close},\n      \"exe\": {},\n      \"perturbation\": {},\n      \"pid\": {},\n      \"released_early\": {}\n    }}",
                    serde_json::Value::from(p.exe.as_str()),
                    nested(&perturbation, 6)?,
                    p.pid,
                    self.early
                )
            }
        }
    }

    pub fn finish(mut self) -> std::io::Result<()> {
        if let StreamFormat::Json = self.format {
            let close: &[u8] = if self.processes > 0 {
                b"\n  ]\n}\n"
            } else {
                b"]\n}\n"
            };
            self.out.write_all(close)?;
        }
        self.out.flush()
    }
}
