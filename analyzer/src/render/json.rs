//! JSON: the model serialised as schema `locksuit.report/1`.

use crate::model::Report;
use std::io::Write;

/// Writes the report as it is serialised: a million locks make a JSON text
/// of hundreds of megabytes, which is never held in memory whole.
pub fn write(report: &Report, out: &mut dyn Write) -> std::io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, report).map_err(std::io::Error::from)?;
    out.write_all(b"\n")
}

/// The report as one string (tests, and tools that want it in memory).
pub fn render(report: &Report) -> String {
    let mut out = Vec::new();
    // Writing to a vector cannot fail, and the model holds only strings,
    // numbers, bools, options and vectors, so serialisation cannot either.
    let _ = write(report, &mut out);
    String::from_utf8(out).unwrap_or_default()
}
