pub(super) mod call_timer;
pub(super) mod clock;
pub mod selfcost;
