//! The locksuit analyzer: reads traces (through `locksuit-format`) into one
//! report model ([`model`]), which the renderers print as text or JSON.

pub mod analysis;
pub mod cc;
pub mod classes;
pub mod cli;
pub mod compare;
pub mod contention;
pub mod data;
pub mod deadlocks;
pub mod evidence;
pub mod families;
pub mod findings;
pub mod follow;
pub mod gate;
pub mod history;
pub mod idle;
pub mod line_names;
pub mod load;
pub mod lock_order;
pub mod locks;
pub mod mapped;
pub mod merge;
#[cfg(test)]
mod merge_tests;
pub mod merge_trace;
pub mod misuse;
pub mod model;
pub mod names;
pub mod oom;
pub mod periods;
pub mod place;
mod place_dwarf;
pub mod policy_lines;
pub mod progress;
pub mod reasons;
pub mod render;
pub mod run;
pub mod samples;
pub mod snapshots;
pub mod stacks;
pub mod stops;
pub mod stream;
pub mod symbolize;
pub mod symbols;
pub mod unwind;
pub mod waits;
pub mod watch;
