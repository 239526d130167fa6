//! What a thread writes beyond its counters, each a feature the hooks'
//! calls switch on: events, the lock-order graph, snapshots, switches,
//! data access.

pub mod access;
pub(super) mod events;
pub(super) mod filter;
pub(super) mod lock_order;
pub(super) mod ratios;
pub(super) mod snapshot;
pub(super) mod snapshot_stack;
pub mod switches;
pub(super) mod usage;
