//! Reading what the shim recorded: finding, mapping, merging and reading
//! traces, symbols, unwinding, debug files, places, and saved runs.

pub mod compare;
pub mod debug_files;
pub mod history;
pub mod load;
pub mod mapped;
pub mod merge;
#[cfg(test)]
mod merge_tests;
pub mod merge_trace;
pub mod place;
mod place_dwarf;
pub mod policy_lines;
pub mod python;
pub mod stream;
pub mod symbolize;
pub mod symbols;
pub mod unwind;
