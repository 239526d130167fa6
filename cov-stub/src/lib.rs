//! What a program built with `locksuit cc` links against, so that it runs
//! as it always did without the shim:
//!
//! - the load and store callbacks that clang's
//!   `-fsanitize-coverage=trace-loads,trace-stores` calls, doing nothing;
//!   under `LD_PRELOAD=libsyncshim.so` the shim's callbacks of the same
//!   names come first in the lookup order and record the accesses instead;
//! - the access gate's three thread-local words, which the inline test
//!   `locksuit cc` compiles into every load and store compares: here the
//!   call count and the loads' word are zero, and the stores' word all
//!   ones (they compare the count's complement), so the program never
//!   calls the callbacks at all; the shim's words of the same names come
//!   first and open the gate;
//! - the allocation calls (`malloc`, `calloc`, `realloc`,
//!   `aligned_alloc`, `posix_memalign`, `memalign`) and `free`, which
//!   forward to the next definition in the lookup order (the C library's,
//!   or an allocator the program links before this library) and, when the
//!   shim is loaded, tell it of each block: where it was allocated (the
//!   caller's return address, so the report names heap data by its
//!   allocation line) and when it was freed (so that a block allocated
//!   later at the same address is a new resource).

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

// The access gate's words (see the module comment). In assembly because
// stable Rust cannot define a thread-local with a C name; `build.rs`
// exports them.
#[cfg(target_arch = "x86_64")]
core::arch::global_asm!(
    ".pushsection .tbss,\"awT\",@nobits",
    ".p2align 3",
    ".globl __locksuit_gate_calls",
    ".type __locksuit_gate_calls, @tls_object",
    ".size __locksuit_gate_calls, 8",
    "__locksuit_gate_calls:",
    ".zero 8",
    ".globl __locksuit_gate_skip_loads",
    ".type __locksuit_gate_skip_loads, @tls_object",
    ".size __locksuit_gate_skip_loads, 8",
    "__locksuit_gate_skip_loads:",
    ".zero 8",
    ".popsection",
    ".pushsection .tdata,\"awT\",@progbits",
    ".p2align 3",
    ".globl __locksuit_gate_skip_stores",
    ".type __locksuit_gate_skip_stores, @tls_object",
    ".size __locksuit_gate_skip_stores, 8",
    "__locksuit_gate_skip_stores:",
    ".quad -1",
    ".popsection",
);

extern "C" {
    fn dlsym(handle: *mut c_void, name: *const c_char) -> *mut c_void;
    /// The C library's own, for the calls made while the others are
    /// being looked up (the lookup itself may allocate and free).
    fn __libc_free(block: *mut c_void);
    fn __libc_realloc(block: *mut c_void, size: usize) -> *mut c_void;
    fn __libc_malloc(size: usize) -> *mut c_void;
    fn __libc_calloc(count: usize, size: usize) -> *mut c_void;
    fn __libc_memalign(align: usize, size: usize) -> *mut c_void;
}

const RTLD_NEXT: *mut c_void = -1isize as *mut c_void;
const RTLD_DEFAULT: *mut c_void = core::ptr::null_mut();

type FreeFn = unsafe extern "C" fn(*mut c_void);
type ReallocFn = unsafe extern "C" fn(*mut c_void, usize) -> *mut c_void;
type UsableFn = unsafe extern "C" fn(*mut c_void) -> usize;
type FreedFn = extern "C" fn(*const u8, usize);
type AllocatedFn = extern "C" fn(*const u8, usize, usize);
type MallocFn = unsafe extern "C" fn(usize) -> *mut c_void;
type CallocFn = unsafe extern "C" fn(usize, usize) -> *mut c_void;
type MemalignFn = unsafe extern "C" fn(usize, usize) -> *mut c_void;
type PosixMemalignFn = unsafe extern "C" fn(*mut *mut c_void, usize, usize) -> i32;

/// Looked up once, at load time (see `INIT`); 0 until then, or if absent.
static REAL_FREE: AtomicUsize = AtomicUsize::new(0);
static REAL_REALLOC: AtomicUsize = AtomicUsize::new(0);
static USABLE_SIZE: AtomicUsize = AtomicUsize::new(0);
static REAL_MALLOC: AtomicUsize = AtomicUsize::new(0);
static REAL_CALLOC: AtomicUsize = AtomicUsize::new(0);
static REAL_ALIGNED_ALLOC: AtomicUsize = AtomicUsize::new(0);
static REAL_MEMALIGN: AtomicUsize = AtomicUsize::new(0);
static REAL_POSIX_MEMALIGN: AtomicUsize = AtomicUsize::new(0);
/// The shim's `locksuit_block_freed` and `locksuit_block_allocated`, 0
/// when the shim is not loaded.
static BLOCK_FREED: AtomicUsize = AtomicUsize::new(0);
static BLOCK_ALLOCATED: AtomicUsize = AtomicUsize::new(0);

extern "C" fn resolve() {
    // SAFETY: dlsym with NUL-terminated names; a missing name gives null.
    unsafe {
        let look = |handle, name: &[u8]| dlsym(handle, name.as_ptr().cast()) as usize;
        REAL_FREE.store(look(RTLD_NEXT, b"free\0"), Ordering::Release);
        REAL_REALLOC.store(look(RTLD_NEXT, b"realloc\0"), Ordering::Release);
        REAL_MALLOC.store(look(RTLD_NEXT, b"malloc\0"), Ordering::Release);
        REAL_CALLOC.store(look(RTLD_NEXT, b"calloc\0"), Ordering::Release);
        REAL_ALIGNED_ALLOC.store(look(RTLD_NEXT, b"aligned_alloc\0"), Ordering::Release);
        REAL_MEMALIGN.store(look(RTLD_NEXT, b"memalign\0"), Ordering::Release);
        REAL_POSIX_MEMALIGN.store(look(RTLD_NEXT, b"posix_memalign\0"), Ordering::Release);
        BLOCK_ALLOCATED.store(
            look(RTLD_DEFAULT, b"locksuit_block_allocated\0"),
            Ordering::Release,
        );
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

/// Exports `$name` as a trampoline that adds its caller's return address
/// as one more argument (in `$x86` / `$arm`, the register after the last
/// one) and jumps to `$handler`: the allocation's line, at no cost.
macro_rules! with_caller {
    ($name:ident($($arg:ident: $ty:ty),*) -> $ret:ty => $handler:ident, x86_64: $x86:literal, aarch64: $arm:literal) => {
        /// # Safety
        /// As the C library's function of this name.
        #[unsafe(no_mangle)]
        #[unsafe(naked)]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
            #[cfg(target_arch = "x86_64")]
            core::arch::naked_asm!(
                concat!("mov ", $x86, ", qword ptr [rsp]"),
                "jmp {h}",
                h = sym $handler
            );
            #[cfg(target_arch = "aarch64")]
            core::arch::naked_asm!(concat!("mov ", $arm, ", x30"), "b {h}", h = sym $handler);
        }
    };
}

/// The real function stored in `cell`, or `fallback` before it was
/// looked up (or if it is missing).
///
/// # Safety
/// `cell` holds 0 or a function of type `F`.
unsafe fn real<F: Copy>(cell: &AtomicUsize, fallback: F) -> F {
    match cell.load(Ordering::Acquire) {
        0 => fallback,
        // SAFETY: as the caller promises; `F` is a function pointer type.
        f => unsafe { core::mem::transmute_copy::<usize, F>(&f) },
    }
}

/// Tells the shim (if loaded) that `block` of `size` bytes was allocated
/// by the call returning to `caller`.
fn tell_allocated(block: *mut c_void, size: usize, caller: usize) {
    let allocated = BLOCK_ALLOCATED.load(Ordering::Acquire);
    if !block.is_null() && allocated != 0 {
        // SAFETY: looked up by name with this signature.
        let allocated = unsafe { core::mem::transmute::<usize, AllocatedFn>(allocated) };
        allocated(block.cast(), size, caller);
    }
}

with_caller!(malloc(size: usize) -> *mut c_void => malloc_with_caller, x86_64: "rsi", aarch64: "x1");
extern "C" fn malloc_with_caller(size: usize, caller: usize) -> *mut c_void {
    // SAFETY: forwarding the caller's argument to the next malloc.
    let block = unsafe { real::<MallocFn>(&REAL_MALLOC, __libc_malloc)(size) };
    tell_allocated(block, size, caller);
    block
}

with_caller!(calloc(count: usize, size: usize) -> *mut c_void => calloc_with_caller, x86_64: "rdx", aarch64: "x2");
extern "C" fn calloc_with_caller(count: usize, size: usize, caller: usize) -> *mut c_void {
    // SAFETY: forwarding the caller's arguments to the next calloc.
    let block = unsafe { real::<CallocFn>(&REAL_CALLOC, __libc_calloc)(count, size) };
    tell_allocated(block, count.saturating_mul(size), caller);
    block
}

with_caller!(aligned_alloc(align: usize, size: usize) -> *mut c_void => aligned_alloc_with_caller, x86_64: "rdx", aarch64: "x2");
extern "C" fn aligned_alloc_with_caller(align: usize, size: usize, caller: usize) -> *mut c_void {
    // SAFETY: forwarding the caller's arguments to the next aligned_alloc.
    let block = unsafe { real::<MemalignFn>(&REAL_ALIGNED_ALLOC, __libc_memalign)(align, size) };
    tell_allocated(block, size, caller);
    block
}

with_caller!(memalign(align: usize, size: usize) -> *mut c_void => memalign_with_caller, x86_64: "rdx", aarch64: "x2");
extern "C" fn memalign_with_caller(align: usize, size: usize, caller: usize) -> *mut c_void {
    // SAFETY: forwarding the caller's arguments to the next memalign.
    let block = unsafe { real::<MemalignFn>(&REAL_MEMALIGN, __libc_memalign)(align, size) };
    tell_allocated(block, size, caller);
    block
}

/// glibc's own `posix_memalign` for the calls made before the lookup.
extern "C" fn posix_memalign_fallback(out: *mut *mut c_void, align: usize, size: usize) -> i32 {
    // SAFETY: the C library's memalign; `out` is the caller's.
    let block = unsafe { __libc_memalign(align, size) };
    if block.is_null() {
        return libc_enomem();
    }
    // SAFETY: the caller passed a valid place for the result.
    unsafe { *out = block };
    0
}

fn libc_enomem() -> i32 {
    12 // ENOMEM on Linux
}

with_caller!(posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> i32 => posix_memalign_with_caller, x86_64: "rcx", aarch64: "x3");
extern "C" fn posix_memalign_with_caller(
    out: *mut *mut c_void,
    align: usize,
    size: usize,
    caller: usize,
) -> i32 {
    let fallback: PosixMemalignFn = posix_memalign_fallback;
    // SAFETY: forwarding the caller's arguments to the next posix_memalign.
    let rc = unsafe { real::<PosixMemalignFn>(&REAL_POSIX_MEMALIGN, fallback)(out, align, size) };
    if rc == 0 {
        // SAFETY: on success the result was stored there.
        tell_allocated(unsafe { *out }, size, caller);
    }
    rc
}

with_caller!(realloc(block: *mut c_void, size: usize) -> *mut c_void => realloc_with_caller, x86_64: "rdx", aarch64: "x2");
extern "C" fn realloc_with_caller(block: *mut c_void, size: usize, caller: usize) -> *mut c_void {
    // The old block is told freed before the real call: once it returns,
    // another thread may already have been given that address. If the
    // call fails, the block is still the program's: told allocated again.
    let before = if block.is_null() || BLOCK_FREED.load(Ordering::Acquire) == 0 {
        0
    } else {
        match USABLE_SIZE.load(Ordering::Acquire) {
            0 => 0,
            // SAFETY: the caller's block is live; looked up with this signature.
            usable => unsafe { core::mem::transmute::<usize, UsableFn>(usable)(block) },
        }
    };
    if before != 0 {
        let freed = BLOCK_FREED.load(Ordering::Acquire);
        // SAFETY: looked up by name with this signature; the shim only
        // looks at the address.
        unsafe { core::mem::transmute::<usize, FreedFn>(freed)(block.cast(), before) };
    }
    // SAFETY: forwarding the caller's arguments unchanged.
    let moved = unsafe { real::<ReallocFn>(&REAL_REALLOC, __libc_realloc)(block, size) };
    if !moved.is_null() {
        tell_allocated(moved, size, caller);
    } else if size != 0 && before != 0 {
        tell_allocated(block, before, caller);
    }
    moved
}
