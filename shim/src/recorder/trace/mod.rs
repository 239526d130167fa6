//! The trace file: its blocks and header, the reader's control word, the
//! check for a copy of it, and the kernel rings that feed it.

pub(super) mod control;
pub mod copied;
pub mod file;
pub mod switch_ring;
