//! Names for what the program runs: call sites, the module map, symbols,
//! and which of them a policy is interested in.

pub(super) mod image;
pub(super) mod interest;
pub mod modules;
pub(super) mod python;
pub(super) mod python_frames;
pub mod python_holds;
pub mod sites;
pub(super) mod symbols;
