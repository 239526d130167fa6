//! Helpers every stage may use; they use nothing of the analyzer's.

pub mod exit;
pub mod oom;
pub mod progress;
pub mod stats;
pub mod time;
pub mod words;
