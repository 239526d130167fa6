//! The recorder's API: what the hooks call (re-exported by the front),
//! and the engagement each call goes through.

pub(super) mod calls;
pub(super) mod conds;
pub(super) mod confinement;
pub(super) mod futex;
pub(super) mod identity;
pub(super) mod lean;
pub(super) mod locks;
pub(super) mod misuse;
pub(super) mod prepared;
pub(super) mod thread_lane;
pub(super) mod threads;
pub(super) mod untimed;
