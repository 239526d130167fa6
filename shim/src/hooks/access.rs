//! The load and store callbacks of a program built with `locksuit cc`: they
//! replace the do-nothing ones of liblocksuit_cov.so. A load by a thread
//! that holds no lock ends at the first test, and shuts the access gate
//! for loads until the thread's next lock operation (the program then
//! makes no call for them at all); a store then is looked up only once some
//! data was touched under a lock (it marks data written without its lock);
//! an access under a lock is recorded (see `recorder::features::access`). The
//! program's memory is only looked at by address, never read.

use crate::guard::{self, HookGuard};
use crate::recorder;

#[inline(always)]
fn accessed(address: *const u8, write: bool) {
    if !guard::thread_holds_a_lock() {
        if !write {
            guard::close_load_gate();
        } else if recorder::data_recorded() {
            stored_unlocked(address);
        }
        return;
    }
    if let Some(g) = HookGuard::enter_quietly() {
        if !recorder::accessed(&g, address as u64, write) {
            // An engagement left out by sampling: none of its accesses
            // need a call (once out of the hook, see `close_gates`).
            drop(g);
            guard::close_gates();
        }
    }
}

#[inline(never)]
fn stored_unlocked(address: *const u8) {
    if let Some(g) = HookGuard::enter_quietly() {
        recorder::stored_unlocked(&g, address as u64);
    }
}

macro_rules! callbacks {
    ($($name:ident => $write:expr),* $(,)?) => {$(
        #[no_mangle]
        pub extern "C" fn $name(address: *const u8) {
            accessed(address, $write);
        }
    )*};
}

callbacks!(
    __sanitizer_cov_load1 => false,
    __sanitizer_cov_load2 => false,
    __sanitizer_cov_load4 => false,
    __sanitizer_cov_load8 => false,
    __sanitizer_cov_load16 => false,
    __sanitizer_cov_store1 => true,
    __sanitizer_cov_store2 => true,
    __sanitizer_cov_store4 => true,
    __sanitizer_cov_store8 => true,
    __sanitizer_cov_store16 => true,
);

/// liblocksuit_cov.so's `free` and `realloc` call this (found by name, so
/// only when the shim is loaded) with each heap block they free: its
/// granules become a finished resource of their own.
#[no_mangle]
pub extern "C" fn locksuit_block_freed(address: *const u8, size: usize) {
    if let Some(_g) = HookGuard::enter_quietly() {
        recorder::block_freed(address as u64, size as u64);
    }
}

/// liblocksuit_cov.so's allocation calls call this with each block and
/// the return address of the call that allocated it.
#[no_mangle]
pub extern "C" fn locksuit_block_allocated(address: *const u8, size: usize, caller: usize) {
    if let Some(_g) = HookGuard::enter_quietly() {
        recorder::block_allocated(address as u64, size as u64, caller as u64);
    }
}
