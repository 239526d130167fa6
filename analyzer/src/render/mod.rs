//! Renderers. Each takes the finished [`crate::model::Report`]; none of them
//! computes anything the model does not already hold.

pub mod chrome;
pub mod critical_path;
pub mod flame;
pub mod folded;
pub mod grid;
pub mod html;
pub mod json;
pub mod layout;
pub mod merged;
pub mod no_activity;
pub mod pprof;
pub mod reasons;
pub mod sarif;
pub mod sections;
pub mod snapshots;
pub mod stops;
pub mod streams;
pub mod summary;
pub mod tables;
pub mod text;
pub mod text_options;
pub mod tree;

/// A process's first two lines in text output: "== exe (pid N)" and the
/// trace it was read from, paths broken only at slashes.
pub fn process_heading(p: &crate::model::Process, width: usize) -> String {
    let pid = layout::glued(&format!("(pid {})", p.pid));
    let mut out = layout::wrap_paths(&format!("{} {pid}", p.exe), width, "== ", "   ");
    out.push_str(&layout::wrap_paths(
        &format!("trace {}", p.trace),
        width,
        "   ",
        "     ",
    ));
    out
}
