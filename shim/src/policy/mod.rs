//! `LOCKSUIT_POLICY=FILE`: what to record, read once at start-up (see
//! docs/policy.md for every key). Rules only thin events and add
//! snapshots: every counter stays exact whatever the policy.
//!
//! - what to record: `processes`, `threads`, `objects`, `sites`;
//! - thresholds: `min_wait_us`, `min_waiters`;
//! - triggers: `snapshot_waiters`, `snapshot_step`, `snapshot_on_idle`,
//!   `snapshot_max`, `snapshot_interval_ms`;
//! - sampling: `sample_every`, `sample_period_ms`; and `depth`.
//!
//! A file that cannot be read, an unknown key or a bad value gets one line
//! on stderr naming the file and line, and recording goes on with the
//! defaults (the whole file ignored). Parsed without allocating; read on
//! slow paths only (first sight of an object or site, an event, a wait).

mod parse;

use crate::config::getenv;
use crate::diag::{warn_once, Warning};
use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use parse::{parse_line, trim, Line, ListKey, NumberKey, LIST_MAX};

const TEXT_MAX: usize = 4096;

/// Bytes set once while the process initialises (one thread), read after.
struct Bytes<const N: usize> {
    bytes: UnsafeCell<[u8; N]>,
    len: AtomicUsize,
}

// SAFETY: written only during initialisation, before any reader (the
// lifecycle state machine publishes it with Release/Acquire).
unsafe impl<const N: usize> Sync for Bytes<N> {}

impl<const N: usize> Bytes<N> {
    const fn new() -> Self {
        Self {
            bytes: UnsafeCell::new([0; N]),
            len: AtomicUsize::new(0),
        }
    }

    /// Initialisation only (one thread, before any reader).
    fn set(&self, value: &[u8]) {
        let n = value.len().min(N);
        // SAFETY: initialisation runs on one thread, before any reader.
        unsafe { (&mut *self.bytes.get())[..n].copy_from_slice(&value[..n]) };
        self.len.store(n, Ordering::Release);
    }

    fn get(&self) -> &[u8] {
        let len = self.len.load(Ordering::Acquire);
        // SAFETY: written once before its length was published.
        unsafe { &(&*self.bytes.get())[..len] }
    }

    fn is_set(&self) -> bool {
        self.len.load(Ordering::Relaxed) != 0
    }

    fn items(&self) -> impl Iterator<Item = &[u8]> {
        self.get().split(|&c| c == b',').map(trim)
    }
}

/// The list keys' values, by `ListKey`.
static LISTS: [Bytes<LIST_MAX>; 4] = [const { Bytes::new() }; 4];
/// The number keys' values, by `NumberKey`.
static NUMBERS: [AtomicU64; 10] = [const { AtomicU64::new(0) }; 10];
/// The policy's text, for the trace.
static TEXT: Bytes<TEXT_MAX> = Bytes::new();
static IN_FORCE: AtomicBool = AtomicBool::new(false);
/// Bumped by every `pthread_setname_np`: a thread's cached decision (see
/// `keeps_thread`) is made again after it. Starts at 1 (0: never decided).
static NAMES: AtomicU32 = AtomicU32::new(1);

fn list(key: ListKey) -> &'static Bytes<LIST_MAX> {
    &LISTS[key as usize]
}

fn number(key: NumberKey) -> u64 {
    NUMBERS[key as usize].load(Ordering::Relaxed)
}

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

/// Reads and applies `$LOCKSUIT_POLICY`, once, while the process
/// initialises.
pub fn load() {
    let Some(path) = getenv(c"LOCKSUIT_POLICY") else {
        return;
    };
    let mut text = [0u8; TEXT_MAX];
    let mut name = crate::recorder::base::path::PathBuf::new();
    name.push(path);
    // Never blocks start-up (a FIFO), reads a regular file to its end.
    let flags = libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NONBLOCK;
    let read = crate::sys::open(name.c_str(), flags, 0)
        .ok()
        .and_then(|fd| {
            let regular = crate::sys::fstat(fd).is_some_and(|s| s.regular);
            let mut len = 0;
            while regular && len < TEXT_MAX {
                match crate::sys::read(fd, &mut text[len..]) {
                    Ok(0) => break,
                    Ok(n) => len += n,
                    Err(libc::EINTR) => continue,
                    Err(_) => {
                        len = usize::MAX;
                        break;
                    }
                }
            }
            crate::sys::close(fd);
            (regular && len != usize::MAX).then_some(len)
        });
    let Some(len) = read else {
        return refuse(path, 0, b"cannot be read");
    };
    if len == TEXT_MAX {
        return refuse(path, 0, b"is longer than 4096 bytes");
    }
    // Check every line before applying any: a bad file changes nothing.
    for (i, line) in text[..len].split(|&c| c == b'\n').enumerate() {
        if let Line::Bad(why) = parse_line(line) {
            return refuse(path, i + 1, why);
        }
    }
    for (key, default) in [(NumberKey::SnapshotMax, 16), (NumberKey::SampleEvery, 1)] {
        NUMBERS[key as usize].store(default, Ordering::Relaxed);
    }
    NUMBERS[NumberKey::Depth as usize]
        .store(locksuit_format::MAX_CHAIN_DEPTH as u64, Ordering::Relaxed);
    for line in text[..len].split(|&c| c == b'\n') {
        match parse_line(line) {
            Line::List(key, value) => list(key).set(value),
            Line::Number(key, n) => NUMBERS[key as usize].store(n, Ordering::Relaxed),
            Line::Empty | Line::Bad(_) => {}
        }
    }
    TEXT.set(&text[..len]);
    IN_FORCE.store(true, Ordering::Release);
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
        put(b":");
        put(crate::text::format_u32(line as u32, &mut [0; 10]));
    }
    put(b": ");
    put(why);
    put(b"; recording with the default policy");
    warn_once(Warning::Policy, &msg[..len]);
}

/// Whether a policy file was read and applied.
pub fn in_force() -> bool {
    IN_FORCE.load(Ordering::Acquire)
}

/// The policy file's text (empty when none is in force).
pub fn text() -> &'static [u8] {
    TEXT.get()
}

/// The executable's file name, for the sites given as its address ranges.
static EXE_NAME: Bytes<256> = Bytes::new();

/// Whether a process running `exe` (its path) is to be recorded.
/// Initialisation only (one thread).
pub fn process_selected(exe: &[u8]) -> bool {
    EXE_NAME.set(exe.rsplit(|&c| c == b'/').next().unwrap_or(exe));
    let processes = list(ListKey::Processes);
    if !processes.is_set() {
        return true;
    }
    let name = exe.rsplit(|&c| c == b'/').next().unwrap_or(exe);
    processes.items().any(|glob| glob_matches(glob, name))
}

/// A thread was named: decisions by name are made again.
pub fn names_changed() {
    NAMES.fetch_add(1, Ordering::Relaxed);
}

/// Whether the events of the calling thread (`tid`) are written. `cached`
/// is the thread's (generation, decision), remade when a thread was named
/// since: its name is asked of the kernel then (a system call, on this
/// slow path only, and only while the policy names threads). An item of
/// digits names a thread by its tid.
pub fn keeps_thread(cached: &mut (u32, bool), tid: u32) -> bool {
    let threads = list(ListKey::Threads);
    if !threads.is_set() {
        return true;
    }
    let names = NAMES.load(Ordering::Relaxed);
    if cached.0 != names {
        let mut name = [0u8; 16];
        // SAFETY: PR_GET_NAME writes at most 16 bytes into `name`.
        let _ = crate::sys::sys!(libc::SYS_prctl, libc::PR_GET_NAME, name.as_mut_ptr());
        let len = name.iter().position(|&c| c == 0).unwrap_or(name.len());
        let keep = threads.items().any(|item| match tid_of(item) {
            Some(t) => t == tid,
            None => glob_matches(item, &name[..len]),
        });
        *cached = (names, keep);
    }
    cached.1
}

fn tid_of(item: &[u8]) -> Option<u32> {
    crate::text::decimal(item, 10).and_then(|v| u32::try_from(v).ok())
}

/// Whether the policy picks objects of interest (then every new object is
/// asked about once, with [`object_selected`]).
pub fn objects_ruled() -> bool {
    list(ListKey::Objects).is_set()
}

/// Whether an object is of interest: an item `kind:KIND` matches its kind
/// (`mutex`, `rwlock`, `spin`, `cond`, `sem`, `barrier`), `0xADDR` its
/// address, and any other item (a glob; a leading `&` is ignored, as in
/// the report's names) the variable it lies in, `symbol`, when known.
pub fn object_selected(kind: &[u8], addr: u64, symbol: Option<&[u8]>) -> bool {
    list(ListKey::Objects).items().any(|item| {
        if let Some(k) = item.strip_prefix(b"kind:") {
            return trim(k) == kind;
        }
        if let Some(hex) = item.strip_prefix(b"0x") {
            return crate::text::hex(hex) == Some(addr);
        }
        let glob = item.strip_prefix(b"&").unwrap_or(item);
        symbol.is_some_and(|name| glob_matches(glob, name))
    })
}

/// Whether the policy picks sites of interest (then every new site is
/// asked about once, with [`site_selected`]).
pub fn sites_ruled() -> bool {
    list(ListKey::Sites).is_set()
}

/// Whether a call chain running through `function` makes a site of interest.
pub fn site_selected(function: &[u8]) -> bool {
    list(ListKey::Sites)
        .items()
        .any(|glob| glob_matches(glob, function))
}

/// Whether the policy names address ranges of the executable as sites.
pub fn site_ranges_ruled() -> bool {
    list(ListKey::Sites)
        .items()
        .any(|item| parse::address_range(item).is_some())
}

/// Whether `offset` (an address in the executable file) lies in one of the
/// policy's site ranges.
pub fn site_offset_selected(offset: u64) -> bool {
    let exe = EXE_NAME.get();
    list(ListKey::Sites)
        .items()
        .filter_map(parse::address_range)
        .any(|(program, lo, hi)| program == exe && (lo..hi).contains(&offset))
}

/// Waits shorter than this write no events (0: every wait does).
#[inline]
pub fn min_wait_ns() -> u64 {
    number(NumberKey::MinWaitUs).saturating_mul(1000)
}

/// Waits that began with fewer threads waiting (itself included) write no
/// events (0: every wait does).
#[inline]
pub fn min_waiters() -> u32 {
    u32::try_from(number(NumberKey::MinWaiters)).unwrap_or(u32::MAX)
}

/// Every how many events of a kind a thread writes one (1: all).
pub fn sample_every() -> u64 {
    number(NumberKey::SampleEvery).max(1)
}

/// A thread writes at most one event of a kind per this period (0: no limit).
pub fn sample_period_ns() -> u64 {
    number(NumberKey::SamplePeriodMs).saturating_mul(1_000_000)
}

/// Frames of a call chain to keep (1 to 32).
pub fn depth() -> usize {
    match number(NumberKey::Depth) {
        0 => locksuit_format::MAX_CHAIN_DEPTH,
        d => (d as usize).min(locksuit_format::MAX_CHAIN_DEPTH),
    }
}

/// The snapshot triggers.
#[derive(Clone, Copy)]
pub struct Triggers {
    /// Snapshot when the waiters on one object reach this (0: never)…
    pub waiters: u32,
    /// …and each time they reach this many more than at its last snapshot.
    pub step: u32,
    /// Snapshot when a wait on an object of interest begins while a
    /// processor is idle.
    pub on_idle: bool,
    pub max: u32,
    pub interval_ns: u64,
}

/// The snapshot triggers, or `None` when the policy sets none.
#[inline]
pub fn triggers() -> Option<Triggers> {
    let waiters = u32::try_from(number(NumberKey::SnapshotWaiters)).unwrap_or(u32::MAX);
    let on_idle = number(NumberKey::SnapshotOnIdle) != 0;
    if waiters == 0 && !on_idle {
        return None;
    }
    let step = u32::try_from(number(NumberKey::SnapshotStep)).unwrap_or(u32::MAX);
    Some(Triggers {
        waiters,
        step: if step == 0 { waiters.max(1) } else { step },
        on_idle,
        max: u32::try_from(number(NumberKey::SnapshotMax)).unwrap_or(u32::MAX),
        interval_ns: number(NumberKey::SnapshotIntervalMs).saturating_mul(1_000_000),
    })
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
    fn objects_match_by_kind_address_or_variable() {
        list(ListKey::Objects).set(b"kind:rwlock, 0x1f00, &queue_*");
        assert!(object_selected(b"rwlock", 1, None));
        assert!(object_selected(b"mutex", 0x1f00, None));
        assert!(object_selected(b"mutex", 2, Some(b"queue_lock")));
        assert!(!object_selected(b"mutex", 2, Some(b"total_lock")));
        assert!(!object_selected(b"mutex", 2, None));
        assert_eq!(tid_of(b"1234"), Some(1234));
        assert_eq!(tid_of(b"worker"), None);
    }
}
