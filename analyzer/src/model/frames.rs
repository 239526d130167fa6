//! A frame of a call chain, and which frames are the program's own code
//! (not the C and C++ runtimes', the loader's or the shim's).

use crate::base::words::basename;
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct Frame {
    pub function: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
    /// Full source path as recorded in the debug information.
    pub path: Option<String>,
    pub address: String,
    pub module: Option<String>,
    /// `module+0xoffset` when no function name is known.
    pub offset: Option<String>,
}

/// Modules whose frames are not the program's own code: the C and C++
/// runtimes, the loader, and the shim itself.
const SYSTEM_MODULE_PREFIXES: &[&str] = &[
    "libc.so",
    "libc-",
    "libpthread",
    "libstdc++",
    "libgcc_s",
    "ld-linux",
    "ld64.so",
    "libsyncshim",
    "linux-vdso",
    "linux-gate",
];

pub fn is_system_module(path: &str) -> bool {
    let base = basename(path);
    SYSTEM_MODULE_PREFIXES.iter().any(|p| base.starts_with(p))
}

/// Source files of the C and C++ runtimes' headers: functions from them
/// (`std::mutex::lock`, `__gthread_mutex_lock`, …) are not the program's
/// own lines, whether inlined or compiled into the program.
pub fn is_system_header(path: &str) -> bool {
    path.starts_with("/usr/include/")
        || path.starts_with("/usr/lib/gcc/")
        || path.contains("/include/c++/")
        // Rust's standard library, compiled into the program: its sources
        // are named by the compiler's commit, `/rustc/<hash>/library/…`.
        || (path.starts_with("/rustc/") && path.contains("/library/"))
}

/// Lock libraries compiled into the program or its libraries, known by
/// their functions' names: their locks wait through `syscall()`, so a
/// wait's first frames are theirs, and the line that took the lock is the
/// first frame past them.
const LOCK_LIBRARY_PREFIXES: &[&str] = &[
    "parking_lot::",
    "parking_lot_core::",
    "lock_api::",
    "absl::",
    // abseil's C-linkage hooks (`AbslInternalPerThreadSemWait_lts_…`).
    "AbslInternal",
    "folly::",
    "std::sys::sync::",
];

/// Whether `function` (demangled) belongs to a lock library: its own
/// name, or a trait method of one of its types (`<parking_lot::RawMutex
/// as lock_api::RawMutex>::lock`).
pub fn is_lock_library_function(function: &str) -> bool {
    let name = function.trim_start_matches('<');
    LOCK_LIBRARY_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// Lock libraries' shared objects: their frames are theirs even where a
/// function has no name (a local function, no debug information).
const LOCK_LIBRARY_MODULES: &[&str] = &["libabsl_", "libfolly"];

fn is_lock_library_module(path: &str) -> bool {
    let base = basename(path);
    LOCK_LIBRARY_MODULES.iter().any(|p| base.starts_with(p))
}

/// The `address` of a Python frame (a `.py` line a CPython interpreter
/// ran, see `input/python.rs`): it has no machine address.
pub const PYTHON_ADDRESS: &str = "python";

pub fn is_python_frame(f: &Frame) -> bool {
    f.address == PYTHON_ADDRESS
}

/// A file of a Python interpreter's own library (`threading.py`,
/// `queue.py`, frozen modules), not of the program: the standard library
/// directory `…/lib/python3.N/`, outside its `site-packages`.
pub fn is_python_library(path: &str) -> bool {
    if path.starts_with("<frozen ") {
        return true;
    }
    let Some(at) = path.find("/lib/python3.") else {
        return false;
    };
    let rest = &path[at + "/lib/python3.".len()..];
    let Some(slash) = rest.find('/') else {
        return false;
    };
    rest[..slash].bytes().all(|b| b.is_ascii_digit())
        && !rest[slash..].contains("/site-packages/")
        && !rest[slash..].contains("/dist-packages/")
}

/// Index of the first frame in the program's own code (0 if there is none).
/// In a chain with Python frames on top, the first of them outside the
/// interpreter's library (else the innermost Python frame): the native
/// frames below are the interpreter's.
pub fn first_own_frame(chain: &[Frame]) -> usize {
    if chain.first().is_some_and(is_python_frame) {
        return chain
            .iter()
            .take_while(|f| is_python_frame(f))
            .position(|f| !f.path.as_deref().is_some_and(is_python_library))
            .unwrap_or(0);
    }
    chain
        .iter()
        .position(|f| {
            f.module
                .as_deref()
                .is_some_and(|m| !is_system_module(m) && !is_lock_library_module(m))
                && !f.path.as_deref().is_some_and(is_system_header)
                && !f.function.as_deref().is_some_and(is_lock_library_function)
        })
        .unwrap_or(0)
}

/// Whether a lock made at `chain` was made by Python's library while an
/// `import` ran: the import machinery (`_find_and_load`) lies between the
/// making frame and the program's own line (a module of the program's own
/// is its own line).
pub fn made_by_library_import(chain: &[Frame]) -> bool {
    let own = first_own_frame(chain);
    chain[..own.min(chain.len())]
        .iter()
        .any(|f| f.function.as_deref() == Some("_find_and_load"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_modules_are_recognised_by_file_name() {
        assert!(is_system_module("/lib/x86_64-linux-gnu/libc.so.6"));
        assert!(is_system_module("/usr/lib/x86_64-linux-gnu/libstdc++.so.6"));
        assert!(is_system_module("/work/target/release/libsyncshim.so"));
        assert!(!is_system_module("/usr/bin/python3.11"));
        assert!(!is_system_module("/home/me/libcrypto-helper.so"));
        assert!(is_lock_library_module(
            "/lib/x86_64-linux-gnu/libabsl_synchronization.so.20220623"
        ));
    }

    #[test]
    fn lock_libraries_are_known_by_their_functions() {
        assert!(is_lock_library_function(
            "<parking_lot::raw_mutex::RawMutex as lock_api::mutex::RawMutex>::lock"
        ));
        assert!(is_lock_library_function(
            "parking_lot_core::parking_lot::park"
        ));
        assert!(is_lock_library_function(
            "absl::lts_20220623::Mutex::Lock()"
        ));
        assert!(is_lock_library_function(
            "<std::sys::sync::mutex::futex::Mutex>::lock_contended"
        ));
        assert!(is_lock_library_function(
            "AbslInternalPerThreadSemWait_debian3"
        ));
        assert!(!is_lock_library_function("my_crate::parking_lot_stats"));
        assert!(!is_lock_library_function("std::thread::sleep"));
    }

    #[test]
    fn the_python_library_is_not_own_code() {
        assert!(is_python_library("/usr/lib/python3.11/threading.py"));
        assert!(is_python_library(
            "/root/.pyenv/versions/3.12.1/lib/python3.12/queue.py"
        ));
        assert!(is_python_library("<frozen importlib._bootstrap>"));
        assert!(!is_python_library("/usr/lib/python3/dist-packages/foo.py"));
        assert!(!is_python_library(
            "/usr/local/lib/python3.11/site-packages/foo.py"
        ));
        assert!(!is_python_library("/home/me/lib/python3.x/app.py"));
        assert!(!is_python_library("/home/me/app.py"));
    }

    #[test]
    fn runtime_headers_are_not_own_code() {
        assert!(is_system_header("/usr/include/c++/12/bits/std_mutex.h"));
        assert!(is_system_header(
            "/usr/include/x86_64-linux-gnu/c++/12/bits/gthr-default.h"
        ));
        assert!(is_system_header("/opt/gcc-13/include/c++/13/shared_mutex"));
        assert!(!is_system_header("/home/me/src/include/mutex.h"));
    }
}
