//! `libsyncshim.so`: loaded with `LD_PRELOAD`, it interposes the pthread
//! synchronisation API and records what every lock, condition variable and
//! thread did into a crash-safe, memory-mapped trace.
//!
//! Layout, top to bottom (each module uses only those below it;
//! `tests/layering.rs` checks):
//! - [`hooks`]: the exported functions (thin: guard, real call, record, return);
//! - [`intercept`]: the trylock-first acquisition protocol the hooks share;
//! - [`guard`]: the re-entrancy guard every hook enters first;
//! - [`lifecycle`]: the atomic state machine (init, fork, exit);
//! - [`real`]: the table of real functions, resolved in one step;
//! - [`recorder`]: the recording core, callable without LD_PRELOAD;
//! - [`sys`]: the shim's own system calls (raw: never a cancellation point).

// Hooks and the constructor only exist in the real library: a unit-test
// binary must not interpose its own pthread calls.
#[cfg(not(test))]
mod hooks;
#[cfg(not(test))]
mod intercept;
#[cfg(not(test))]
mod spawn;

pub mod callback;
pub mod config;
pub mod diag;
pub mod glibc;
pub mod guard;
pub mod lifecycle;
pub mod policy;
pub mod real;
pub mod recorder;
pub mod sigbus;
pub mod sys;
pub mod text;
