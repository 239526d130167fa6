//! JSON: the model serialised as schema `locksuit.report/3`.

use crate::model::Report;
use std::io::Write;

/// Writes the report as it is serialised: a million locks make a JSON text
/// of hundreds of megabytes, which is never held in memory whole.
pub fn write(report: &Report, out: &mut dyn Write) -> std::io::Result<()> {
    // The serializer writes a few bytes at a time: into a buffer of a
    // concrete type, not through `dyn Write` each time.
    let mut buffered = std::io::BufWriter::with_capacity(1 << 16, out);
    serde_json::to_writer_pretty(&mut buffered, report).map_err(std::io::Error::from)?;
    buffered.write_all(b"\n")?;
    buffered.flush()
}

/// The report as one string (tests, and tools that want it in memory).
pub fn render(report: &Report) -> String {
    let mut out = Vec::new();
    // Writing to a vector cannot fail, and the model holds only strings,
    // numbers, bools, options and vectors, so serialisation cannot either.
    let _ = write(report, &mut out);
    String::from_utf8(out).unwrap_or_default()
}
