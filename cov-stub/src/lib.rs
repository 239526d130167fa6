//! What a program built with `locksuit cc` links against, so that it runs
//! as it always did without the shim:
//!
//! - the load and store callbacks that clang's
//!   `-fsanitize-coverage=trace-loads,trace-stores` calls, doing nothing;
//!   under `LD_PRELOAD=libsyncshim.so` the shim's callbacks of the same
//!   names come first in the lookup order and record the accesses instead;
//! - `free` and `realloc`, which forward to the next definition in the
//!   lookup order (the C library's, or an allocator the program links
//!   before this library) and, when the shim is loaded, tell it which heap
//!   block was freed, so that a block allocated later at the same address
//!   is a new resource.

use core::ffi::{c_char, c_void};
use core::sync::atomic::{AtomicUsize, Ordering};

macro_rules! nothing {
    ($($name:ident),*) => {$(
        #[no_mangle]
        pub extern "C" fn $name(_address: *const u8) {}
    )*};
}

nothing!(
    __sanitizer_cov_load1,
    __sanitizer_cov_load2,
    __sanitizer_cov_load4,
    __sanitizer_cov_load8,
    __sanitizer_cov_load16,
    __sanitizer_cov_store1,
    __sanitizer_cov_store2,
    __sanitizer_cov_store4,
    __sanitizer_cov_store8,
    __sanitizer_cov_store16
);

extern "C" {
    fn dlsym(handle: *mut c_void, name: *const c_char) -> *mut c_void;
    /// The C library's own, for the calls made while the others are
    /// being looked up (the lookup itself may free).
    fn __libc_free(block: *mut c_void);
    fn __libc_realloc(block: *mut c_void, size: usize) -> *mut c_void;
}

const RTLD_NEXT: *mut c_void = -1isize as *mut c_void;
const RTLD_DEFAULT: *mut c_void = core::ptr::null_mut();

type FreeFn = unsafe extern "C" fn(*mut c_void);
type ReallocFn = unsafe extern "C" fn(*mut c_void, usize) -> *mut c_void;
type UsableFn = unsafe extern "C" fn(*mut c_void) -> usize;
type FreedFn = extern "C" fn(*const u8, usize);

/// Looked up once, at load time (see `INIT`); 0 until then, or if absent.
static REAL_FREE: AtomicUsize = AtomicUsize::new(0);
static REAL_REALLOC: AtomicUsize = AtomicUsize::new(0);
static USABLE_SIZE: AtomicUsize = AtomicUsize::new(0);
/// The shim's `locksuit_block_freed`, 0 when the shim is not loaded.
static BLOCK_FREED: AtomicUsize = AtomicUsize::new(0);

extern "C" fn resolve() {
    // SAFETY: dlsym with NUL-terminated names; a missing name gives null.
    unsafe {
        let look = |handle, name: &[u8]| dlsym(handle, name.as_ptr().cast()) as usize;
        REAL_FREE.store(look(RTLD_NEXT, b"free\0"), Ordering::Release);
        REAL_REALLOC.store(look(RTLD_NEXT, b"realloc\0"), Ordering::Release);
        USABLE_SIZE.store(
            look(RTLD_DEFAULT, b"malloc_usable_size\0"),
            Ordering::Release,
        );
        BLOCK_FREED.store(
            look(RTLD_DEFAULT, b"locksuit_block_freed\0"),
            Ordering::Release,
        );
    }
}

/// Runs when the library is loaded, before the program's own code.
#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = resolve;

/// Tells the shim (if loaded) that `block` is about to be freed.
///
/// # Safety
/// `block` is a live heap block of the allocator in use.
unsafe fn tell_freed(block: *mut c_void) {
    let (freed, usable) = (
        BLOCK_FREED.load(Ordering::Acquire),
        USABLE_SIZE.load(Ordering::Acquire),
    );
    if block.is_null() || freed == 0 || usable == 0 {
        return;
    }
    // SAFETY: both were looked up by name with these signatures.
    let (freed, usable) = unsafe {
        (
            core::mem::transmute::<usize, FreedFn>(freed),
            core::mem::transmute::<usize, UsableFn>(usable),
        )
    };
    // SAFETY: the caller's block is live.
    freed(block.cast(), unsafe { usable(block) });
}

/// # Safety
/// As the C library's `free`.
#[no_mangle]
pub unsafe extern "C" fn free(block: *mut c_void) {
    // SAFETY: forwarding the caller's block, live until the real free.
    unsafe {
        tell_freed(block);
        match REAL_FREE.load(Ordering::Acquire) {
            0 => __libc_free(block),
            real => core::mem::transmute::<usize, FreeFn>(real)(block),
        }
    }
}

/// # Safety
/// As the C library's `realloc`.
#[no_mangle]
pub unsafe extern "C" fn realloc(block: *mut c_void, size: usize) -> *mut c_void {
    let watched = !block.is_null() && BLOCK_FREED.load(Ordering::Acquire) != 0;
    let usable = USABLE_SIZE.load(Ordering::Acquire);
    let before = if watched && usable != 0 {
        // SAFETY: the caller's block is live; looked up with this signature.
        unsafe { core::mem::transmute::<usize, UsableFn>(usable)(block) }
    } else {
        0
    };
    // SAFETY: forwarding the caller's arguments unchanged.
    let moved = unsafe {
        match REAL_REALLOC.load(Ordering::Acquire) {
            0 => __libc_realloc(block, size),
            real => core::mem::transmute::<usize, ReallocFn>(real)(block, size),
        }
    };
    // The old block is gone when the data moved, or when size 0 freed it.
    let gone = moved != block && (!moved.is_null() || size == 0);
    if watched && before != 0 && gone {
        let freed = BLOCK_FREED.load(Ordering::Acquire);
        // SAFETY: looked up by name with this signature; the shim only
        // looks at the address, never at the (now freed) memory.
        unsafe { core::mem::transmute::<usize, FreedFn>(freed)(block.cast(), before) };
    }
    moved
}
