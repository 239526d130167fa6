//! The time base: the clock, timing a blocking call, the shim's own cost.
//! Below the trace file: what they learn goes up through hooks set at start.

pub(super) mod call_timer;
pub(super) mod clock;
pub mod selfcost;
