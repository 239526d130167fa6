//! The locksuit analyzer: reads traces (through `locksuit-format`) into one
//! report model ([`model`]), which the renderers print as text or JSON.

pub mod analysis;
pub mod cli;
pub mod contention;
pub mod families;
pub mod findings;
pub mod load;
pub mod locks;
pub mod model;
pub mod oom;
pub mod render;
pub mod run;
pub mod samples;
pub mod stream;
pub mod symbolize;
