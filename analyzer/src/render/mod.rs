//! Renderers. Each takes the finished [`crate::model::Report`]; none of them
//! computes anything the model does not already hold.

pub mod chrome;
pub mod diff;
pub mod flame;
pub mod folded;
pub mod html;
pub mod json;
pub mod layout;
pub mod merged;
pub mod no_activity;
pub mod pprof;
pub mod reasons;
pub mod sarif;
pub mod snapshots;
pub mod stops;
pub mod streams;
pub mod summary;
pub mod tables;
pub mod text;
pub mod tree;

/// Nanoseconds as a short human duration.
pub fn duration(ns: u64) -> String {
    let ns = ns as f64;
    if ns >= 1e9 {
        format!("{:.2} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

/// "1 thread", "4 threads".
pub fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

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

#[cfg(test)]
mod tests {
    #[test]
    fn durations_pick_a_readable_unit() {
        assert_eq!(super::duration(0), "0 ns");
        assert_eq!(super::duration(1_500), "1.50 µs");
        assert_eq!(super::duration(200_000_000), "200.00 ms");
        assert_eq!(super::duration(3_000_000_000), "3.00 s");
    }
}
