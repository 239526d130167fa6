//! The limits findings are judged under: report-time settings, so one
//! trace can be judged under any of them.

/// Report-time limits, each with its CLI option and default.
#[derive(Clone, Debug)]
pub struct Limits {
    /// `--threshold`: sharing ratio below which a site is unsuitable.
    pub threshold: f64,
    /// `--long-hold-ms`: a hold at least this long while others waited.
    pub long_hold_ns: u64,
    /// `--contention-share`: contended share of acquisitions that is high
    /// (with at least 1 ms of waiting in all).
    pub contention_share: f64,
    /// `--over-sync-per-sec`: acquisitions per second of a lock that almost
    /// never contends (below 0.1 %) above which the lock itself is the cost.
    pub over_sync_per_sec: f64,
    /// `--asymmetry`: ratio between the most and the least contended locks
    /// engaged at one line that makes their contention asymmetric.
    pub asymmetry: f64,
    /// `--starvation`: how many acquisitions by other threads one wait may
    /// sit through before the waiting thread counts as starved.
    pub starvation: u32,
    /// `--min-acquisitions`: a lock (or a line) engaged fewer times costs
    /// the run too little for `single-thread-lock`, `unnecessary-lock` or
    /// `unsuitable-site`.
    pub min_acquisitions: u64,
    /// `--min-runs`: recorded runs, each with one thread alone taking a
    /// lock, that make it `unnecessary-lock` (see `evidence.rs`).
    pub min_runs: u64,
    /// `--classes`: the user's blocking-class signatures.
    pub signatures: std::sync::Arc<crate::analysis::classes::Signatures>,
    /// Thread names known from elsewhere, by (pid, tid): the kernel's, read
    /// while the process was alive (`run --deadlock-timeout` reads them
    /// before it stops a hung process), for threads named where the shim
    /// could not see it (`prctl(PR_SET_NAME)`).
    pub thread_names: std::sync::Arc<std::collections::BTreeMap<(u32, u32), String>>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            threshold: 0.3,
            long_hold_ns: 10_000_000,
            contention_share: 0.10,
            over_sync_per_sec: 100_000.0,
            asymmetry: 10.0,
            starvation: 10,
            min_acquisitions: 1000,
            min_runs: 5,
            signatures: Default::default(),
            thread_names: Default::default(),
        }
    }
}
