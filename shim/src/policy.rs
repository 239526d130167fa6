//! `LOCKSUIT_POLICY=FILE`: what to record, read once at start-up (see
//! docs/policy.md). A line is `key = value`; `#` starts a comment.
//!
//! - `processes = GLOB[, GLOB…]`: record only processes whose executable's
//!   file name matches one of them (`*` and `?`); others run unrecorded,
//!   with no trace file. Default: every process.
//! - `threads = GLOB[, GLOB…]`: write events only for threads whose name
//!   (the kernel's, when the event is written) matches; every thread's
//!   counters stay exact.
//! - `min_wait_us = N`: write a wait's events (lock waits, timeouts,
//!   condition waits, blocking calls) only if it lasted at least N µs. The
//!   counters stay exact; the trace counts the events left out.
//!
//! A file that cannot be read, an unknown key or a bad value gets one line
//! on stderr naming the file and line, and recording goes on with the
//! defaults (the whole file ignored). Parsed without allocating.

use crate::config::getenv;
use crate::diag::{warn_once, Warning};
use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

const TEXT_MAX: usize = 4096;

/// The `processes` globs, as written (comma-separated), set once while the
/// process initialises (one thread), read after.
struct Globs {
    bytes: UnsafeCell<[u8; 512]>,
    len: AtomicUsize,
}

// SAFETY: written only during initialisation, before any reader (the
// lifecycle state machine publishes it with Release/Acquire).
unsafe impl Sync for Globs {}

static PROCESSES: Globs = Globs {
    bytes: UnsafeCell::new([0; 512]),
    len: AtomicUsize::new(0),
};
static HAS_PROCESSES: AtomicBool = AtomicBool::new(false);
static THREADS: Globs = Globs {
    bytes: UnsafeCell::new([0; 512]),
    len: AtomicUsize::new(0),
};
static HAS_THREADS: AtomicBool = AtomicBool::new(false);
/// Bumped by every `pthread_setname_np`: a thread's cached decision (see
/// `keeps_thread`) is made again after it. Starts at 1 (0: never decided).
static NAMES: AtomicU32 = AtomicU32::new(1);
static MIN_WAIT_NS: AtomicU64 = AtomicU64::new(0);

/// Whether `name` matches `glob` (`*`: any run, `?`: any one byte).
pub fn glob_matches(glob: &[u8], name: &[u8]) -> bool {
    let (mut g, mut n) = (0, 0);
    let (mut star, mut star_n) = (usize::MAX, 0);
    while n < name.len() {
        if g < glob.len() && (glob[g] == b'?' || glob[g] == name[n]) {
            g += 1;
            n += 1;
        } else if g < glob.len() && glob[g] == b'*' {
            star = g;
            star_n = n;
            g += 1;
        } else if star != usize::MAX {
            g = star + 1;
            star_n += 1;
            n = star_n;
        } else {
            return false;
        }
    }
    glob[g..].iter().all(|&c| c == b'*')
}

fn trim(mut s: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = s {
        if !first.is_ascii_whitespace() {
            break;
        }
        s = rest;
    }
    while let [rest @ .., last] = s {
        if !last.is_ascii_whitespace() {
            break;
        }
        s = rest;
    }
    s
}

/// What a line said, or what is wrong with it.
enum Line<'a> {
    Empty,
    Processes(&'a [u8]),
    Threads(&'a [u8]),
    MinWaitUs(u64),
    Bad(&'static [u8]),
}

fn parse_line(raw: &[u8]) -> Line<'_> {
    let line = match raw.iter().position(|&c| c == b'#') {
        Some(at) => &raw[..at],
        None => raw,
    };
    let line = trim(line);
    if line.is_empty() {
        return Line::Empty;
    }
    let Some(eq) = line.iter().position(|&c| c == b'=') else {
        return Line::Bad(b"expected 'key = value'");
    };
    let (key, value) = (trim(&line[..eq]), trim(&line[eq + 1..]));
    match key {
        b"processes" if !value.is_empty() && value.len() <= 512 => Line::Processes(value),
        b"processes" => Line::Bad(b"processes needs one or more globs (at most 512 bytes)"),
        b"threads" if !value.is_empty() && value.len() <= 512 => Line::Threads(value),
        b"threads" => Line::Bad(b"threads needs one or more globs (at most 512 bytes)"),
        b"min_wait_us" => {
            let digits = value.iter().all(u8::is_ascii_digit);
            if value.is_empty() || !digits || value.len() > 12 {
                return Line::Bad(b"min_wait_us must be a whole number of microseconds");
            }
            Line::MinWaitUs(value.iter().fold(0, |v, &d| v * 10 + u64::from(d - b'0')))
        }
        _ => Line::Bad(b"unknown key (known: processes, threads, min_wait_us)"),
    }
}

/// Reads and applies `$LOCKSUIT_POLICY`, once, while the process
/// initialises.
pub fn load() {
    let Some(path) = getenv(c"LOCKSUIT_POLICY") else {
        return;
    };
    let mut text = [0u8; TEXT_MAX];
    let mut name = crate::recorder::path::PathBuf::new();
    name.push(path);
    let read = crate::sys::open(name.c_str(), libc::O_RDONLY | libc::O_CLOEXEC, 0)
        .ok()
        .and_then(|fd| {
            let n = crate::sys::read(fd, &mut text);
            crate::sys::close(fd);
            n.ok()
        });
    let Some(len) = read else {
        return refuse(path, 0, b"cannot be read");
    };
    if len == TEXT_MAX {
        return refuse(path, 0, b"is longer than 4096 bytes");
    }
    let (mut processes, mut threads, mut min_wait_us) = (None, None, 0u64);
    for (i, line) in text[..len].split(|&c| c == b'\n').enumerate() {
        match parse_line(line) {
            Line::Empty => {}
            Line::Processes(globs) => processes = Some(globs),
            Line::Threads(globs) => threads = Some(globs),
            Line::MinWaitUs(us) => min_wait_us = us,
            Line::Bad(why) => return refuse(path, i + 1, why),
        }
    }
    for (globs, into, has) in [
        (processes, &PROCESSES, &HAS_PROCESSES),
        (threads, &THREADS, &HAS_THREADS),
    ] {
        if let Some(globs) = globs {
            // SAFETY: initialisation runs on one thread, before any reader.
            unsafe { (&mut *into.bytes.get())[..globs.len()].copy_from_slice(globs) };
            into.len.store(globs.len(), Ordering::Release);
            has.store(true, Ordering::Release);
        }
    }
    MIN_WAIT_NS.store(min_wait_us.saturating_mul(1000), Ordering::Relaxed);
}

#[cold]
fn refuse(path: &[u8], line: usize, why: &[u8]) {
    let mut msg = [0u8; 480];
    let mut len = 0;
    let mut put = |bytes: &[u8]| {
        let n = bytes.len().min(msg.len() - len);
        msg[len..len + n].copy_from_slice(&bytes[..n]);
        len += n;
    };
    put(b"LOCKSUIT_POLICY: ");
    put(&path[..path.len().min(300)]);
    if line > 0 {
        let mut digits = [0u8; 10];
        let mut n = line;
        let mut at = digits.len();
        while n > 0 && at > 0 {
            at -= 1;
            digits[at] = b'0' + (n % 10) as u8;
            n /= 10;
        }
        put(b":");
        put(&digits[at..]);
    }
    put(b": ");
    put(why);
    put(b"; recording with the default policy");
    warn_once(Warning::Policy, &msg[..len]);
}

fn any_matches(globs: &Globs, name: &[u8]) -> bool {
    let len = globs.len.load(Ordering::Acquire);
    // SAFETY: written once before its flag was published.
    let globs = unsafe { &(&*globs.bytes.get())[..len] };
    globs
        .split(|&c| c == b',')
        .map(trim)
        .any(|glob| glob_matches(glob, name))
}

/// Whether a process running `exe` (its path) is to be recorded.
pub fn process_selected(exe: &[u8]) -> bool {
    if !HAS_PROCESSES.load(Ordering::Acquire) {
        return true;
    }
    let name = exe.rsplit(|&c| c == b'/').next().unwrap_or(exe);
    any_matches(&PROCESSES, name)
}

/// A thread was named: decisions by name are made again.
pub fn names_changed() {
    NAMES.fetch_add(1, Ordering::Relaxed);
}

/// Whether the calling thread's events are written. `cached` is the
/// thread's (generation, decision), remade when a thread was named since:
/// its name is asked of the kernel then (a system call, on this slow path
/// only, and only while the policy names threads).
pub fn keeps_thread(cached: &mut (u32, bool)) -> bool {
    if !HAS_THREADS.load(Ordering::Relaxed) {
        return true;
    }
    let names = NAMES.load(Ordering::Relaxed);
    if cached.0 != names {
        let mut name = [0u8; 16];
        let _ = crate::sys::sys!(libc::SYS_prctl, libc::PR_GET_NAME, name.as_mut_ptr());
        let len = name.iter().position(|&c| c == 0).unwrap_or(name.len());
        *cached = (names, any_matches(&THREADS, &name[..len]));
    }
    cached.1
}

/// Waits shorter than this write no events (0: every wait does).
#[inline]
pub fn min_wait_ns() -> u64 {
    MIN_WAIT_NS.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_file_names() {
        assert!(glob_matches(b"*", b"anything"));
        assert!(glob_matches(b"test_*", b"test_locks"));
        assert!(!glob_matches(b"test_*", b"make"));
        assert!(glob_matches(b"t?ny", b"tiny"));
        assert!(glob_matches(b"*lock*", b"deadlock"));
        assert!(!glob_matches(b"a*b", b"ac"));
    }

    #[test]
    fn lines_are_parsed_or_refused() {
        assert!(matches!(parse_line(b"  # a comment"), Line::Empty));
        assert!(matches!(
            parse_line(b"processes = tiny, test_*"),
            Line::Processes(b"tiny, test_*")
        ));
        assert!(matches!(
            parse_line(b"min_wait_us = 250 # short waits out"),
            Line::MinWaitUs(250)
        ));
        assert!(matches!(parse_line(b"min_wait_us = 2.5"), Line::Bad(_)));
        assert!(matches!(
            parse_line(b"threads = worker*"),
            Line::Threads(b"worker*")
        ));
        assert!(matches!(parse_line(b"waiters = 3"), Line::Bad(_)));
        assert!(matches!(parse_line(b"no equals"), Line::Bad(_)));
    }
}
