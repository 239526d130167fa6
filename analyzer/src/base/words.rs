//! How numbers and paths read in messages, findings and reports alike.

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

/// The last part of a path: a program's name from its path.
pub fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
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
