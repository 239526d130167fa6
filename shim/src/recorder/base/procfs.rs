//! Small `/proc` files of this process, read with the shim's own system
//! calls into the caller's buffer. The paths are built in a few bytes of
//! stack: these reads may run on a signal handler's stack.

use crate::sys;
use core::ffi::CStr;

/// Reads the file at `path` into `buf`; the bytes read.
pub fn read<'a>(path: &CStr, buf: &'a mut [u8]) -> Option<&'a [u8]> {
    let fd = sys::open(path, libc::O_RDONLY | libc::O_CLOEXEC, 0).ok()?;
    let n = sys::read(fd, buf).unwrap_or(0);
    sys::close(fd);
    (n > 0).then(|| &buf[..n])
}

/// Reads `/proc/self/task/TID/NAME` (NAME at most 32 bytes) into `buf`.
pub fn read_task_file<'a>(tid: u32, name: &[u8], buf: &'a mut [u8]) -> Option<&'a [u8]> {
    let mut path = [0u8; 64];
    let mut len = 0;
    let mut digits = [0u8; 10];
    for part in [
        &b"/proc/self/task/"[..],
        crate::text::format_u32(tid, &mut digits),
        b"/",
        &name[..name.len().min(32)],
    ] {
        path[len..len + part.len()].copy_from_slice(part);
        len += part.len();
    }
    let path = CStr::from_bytes_until_nul(&path[..=len]).ok()?;
    read(path, buf)
}

/// How many threads this process has now (`/proc/self/stat`), if it can
/// be read.
pub fn threads_in_process() -> Option<u32> {
    let mut buf = [0u8; 512];
    let stat = read(c"/proc/self/stat", &mut buf)?;
    // The name in parentheses may hold anything, `)` included: the fields
    // are counted from the last one. num_threads is field 20, the 18th
    // after the name (field 3 is the first).
    let after_name = &stat[stat.iter().rposition(|&b| b == b')')? + 1..];
    let field = after_name
        .split(|&b| b == b' ')
        .filter(|f| !f.is_empty())
        .nth(17)?;
    u32::try_from(crate::text::decimal(field, 10)?).ok()
}
