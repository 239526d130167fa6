//! What each subcommand does: thin drivers over input, analysis and render.

pub mod attach;
pub mod cc;
pub mod follow;
pub mod gate;
pub mod gate_text;
pub mod options;
pub mod output;
pub mod record;
pub mod run;
pub mod top;
pub mod watch;
