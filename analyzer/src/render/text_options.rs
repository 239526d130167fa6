//! How the text report is laid out: the order and columns of its tables,
//! its width, and how many findings it lists.

use super::sections::TABLE_ROWS;

/// Which column orders the locks and sites tables (largest first).
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum SortKey {
    /// Total time threads waited.
    Wait,
    /// Total timed hold time.
    Hold,
    Acquisitions,
    Contended,
    /// Owner changes.
    Changes,
    /// 99th percentile of contended waits.
    P99,
    /// Longest contended wait.
    Max,
    Threads,
}

/// The locks table's columns.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum Columns {
    Locksuit,
    /// mutrace's: Locked, Changed, Cont., tot.Time, avg.Time, max.Time.
    Mutrace,
}

/// How the text report is laid out.
#[derive(Clone, Copy, Debug)]
pub struct TextOptions {
    pub sort: SortKey,
    pub columns: Columns,
    /// No line is longer than this many columns.
    pub width: usize,
    /// Findings listed per process, highest ranked first.
    pub top: usize,
    /// `--tree`: print the waiting call tree, leaving out nodes below this
    /// share of all the time blocked.
    pub tree: Option<f64>,
}

/// Findings listed per process unless `--top` says otherwise.
pub const DEFAULT_TOP: usize = TABLE_ROWS;
