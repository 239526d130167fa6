//! The locksuit analyzer: reads traces (through `locksuit-format`) into one
//! report model ([`model`]), which the renderers print as text or JSON.

pub mod analysis;
pub mod base;
pub mod cli;
pub mod commands;
pub mod input;
pub mod model;
pub mod render;
