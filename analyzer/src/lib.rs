//! The locksuit analyzer: reads traces (through `locksuit-format`) into one
//! report model ([`model`]), which the renderers print as text or JSON.
//!
//! One folder per stage, top to bottom; a stage uses only stages below it,
//! never one above, and `tests/layering.rs` fails on any circle or upward
//! use:
//!
//! 1. [`cli`]: clap's root (`Cli`, `Command`) and the dispatch to a
//!    command; may use `commands` and `base`.
//! 2. [`commands`]: one thin driver per subcommand (run and its recording,
//!    report/events/export/flamegraph output, watch, follow, top, diff and
//!    history through the gate, cc) and the options they share; may use
//!    everything below.
//! 3. [`analysis`]: one module per question a report answers (contention,
//!    lock order and deadlocks, why threads stopped, data level, reasons,
//!    families, misuse, evidence, findings, suppressions, regressions…), and
//!    `process.rs`, the pass that asks them of one trace; may use `input`,
//!    `model` and `base`.
//! 4. [`render`]: the renderers (text, JSON, HTML, Chrome, SARIF, pprof,
//!    folded, flame graphs); a sibling of `analysis` that neither sees: they
//!    read the model only, and `base`.
//! 5. [`input`]: finding, mapping, merging and reading traces, symbols,
//!    unwinding, debug files, places, and the saved runs of the history; may
//!    use `model` and `base`.
//! 6. [`model`]: the report model, its ids and names, frames and stacks: the
//!    words every stage above speaks (the input stage builds its frames and
//!    streams, the analysis fills it, the renderers read it); may use `base`.
//! 7. [`base`]: helpers for all (the clock, exit codes, out-of-memory
//!    handling, progress, how numbers and paths read); uses nothing above.
//!
//! Below them all is the format crate, `locksuit-format`.

pub mod analysis;
pub mod base;
pub mod cli;
pub mod commands;
pub mod input;
pub mod model;
pub mod render;
