pub(super) mod control;
pub mod copied;
pub mod file;
pub mod switch_ring;
