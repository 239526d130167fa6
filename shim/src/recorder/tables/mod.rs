//! The recorder's state: the process-wide object table, each thread's
//! lane and caches, its held locks, and the thread-local state.

pub mod by_lock;
pub(super) mod heap;
pub mod held;
pub mod hot_cache;
pub mod lanes;
pub mod lean_lines;
pub mod objects;
pub mod python_calls;
pub mod python_frame_cache;
pub mod thread_state;
