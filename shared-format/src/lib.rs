//! The locksuit trace format: the single source of truth for the layout that
//! `libsyncshim.so` writes and `locksuit` reads.
//!
//! A trace is one file per process, memory-mapped by the shim with
//! `MAP_SHARED`, so everything the shim stored survives SIGKILL or a crash.
//! It is a sequence of fixed-size blocks:
//!
//! * block 0 holds the [`FileHeader`];
//! * every other block belongs to one *lane*, a per-thread append-only stream
//!   of records. A lane is recycled when its thread exits, so a lane holds the
//!   records of several threads in sequence, each introduced by a
//!   [`ThreadRecord`].
//!
//! Counters ([`CounterRecord`], [`CondRecord`]) are appended once and then
//! updated in place by the one thread that owns them; the reader sees their
//! latest values. All integers are little-endian (the only byte order the
//! shim supports); the header carries a byte-order marker so a foreign trace
//! is rejected rather than misread.

pub mod access;
pub mod block_index;
pub mod calls;
pub mod events;
pub mod layout;
pub mod policy;
pub mod reader;
pub mod writer;

pub use access::*;
pub use calls::{
    fd_kind_name, BlockingCall, FD_DEVICE, FD_FILE, FD_NONE, FD_OTHER, FD_PIPE, FD_SOCKET,
};
pub use events::{emission_time, Events, TraceBytes};
pub use layout::*;
pub use policy::*;
pub use reader::{
    read_trace, read_trace_bytes, read_trace_indexed, read_trace_releasing, read_trace_shared,
    BlockIndex, PyFrame, PySiteFrames, Trace, TraceError,
};
