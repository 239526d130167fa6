//! What a report answers, one module per question.

pub mod classes;
pub mod conds;
pub mod contention;
pub mod data;
pub mod deadlocks;
pub mod evidence;
pub mod families;
pub mod findings;
pub mod idle;
pub mod line_names;
pub mod lock_order;
pub mod locks;
pub mod misuse;
pub mod periods;
pub mod process;
pub mod process_state;
pub mod reasons;
pub mod regression;
pub mod samples;
pub mod sharing;
pub mod sites;
pub mod snapshots;
pub mod stops;
pub mod suppress;
pub mod waits;
