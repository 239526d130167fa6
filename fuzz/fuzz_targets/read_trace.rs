//! Any bytes: the reader must return an error or a trace, and a trace must
//! go through analysis and both renderers, without panicking, hanging or
//! allocating without bound.
#![no_main]

use libfuzzer_sys::fuzz_target;
use locksuit::analysis::analyze;
use locksuit::findings::Limits;
use locksuit::model::{Report, SCHEMA};
use locksuit::render;
use locksuit::stream::StreamFilter;
use locksuit::symbolize::Symbolizer;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(trace) = locksuit_format::read_trace_bytes(Path::new("fuzz.trace"), data) else {
        return;
    };
    let mut symbolizer = Symbolizer::default();
    // Streams too: they walk every event of every object.
    let process = analyze(
        "fuzz.trace",
        trace,
        &Limits::default(),
        &StreamFilter::All,
        &mut symbolizer,
        &mut || {},
    );
    let report = Report {
        schema: SCHEMA,
        threshold: 0.3,
        processes: vec![process],
    };
    let _ = render::json::render(&report);
    let _ = render::streams::render(&report);
    let _ = render::text::render(&report, render::text::SortKey::Wait, render::text::Columns::Mutrace);
});
