pub mod by_lock;
pub(super) mod heap;
pub mod held;
pub(super) mod hot_cache;
pub mod lanes;
pub mod objects;
pub mod thread_state;
