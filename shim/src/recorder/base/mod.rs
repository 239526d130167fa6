pub mod caller;
pub mod mapped;
pub(super) mod own_stack;
pub mod path;
pub(super) mod procfs;
