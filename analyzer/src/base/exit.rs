//! The exit statuses every command returns (see README's "In CI").

/// Exit status: success.
pub const EXIT_OK: i32 = 0;
/// Exit status: a requested gate failed (e.g. `--fail-on-findings`).
pub const EXIT_GATE: i32 = 1;
/// Exit status: bad usage or unreadable input.
pub const EXIT_USAGE: i32 = 2;
