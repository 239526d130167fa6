//! Plain helpers under the rest of the recorder: memory, stacks, `/proc`,
//! paths, the caller's return addresses.

pub mod caller;
pub mod mapped;
pub(super) mod own_stack;
pub mod path;
pub(super) mod procfs;
