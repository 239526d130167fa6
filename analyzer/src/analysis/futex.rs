//! Futex words (locks of lock libraries that make no pthread call: Rust's
//! std and parking_lot, abseil, folly): what each is used for, told by the
//! library functions its waits went through, and what the report can and
//! cannot say of them.
//!
//! Only their contended path is seen: a wait, and the wake that ended it.
//! A word's `acquisitions` are its waits; an acquisition that did not wait
//! made no call. So no finding that needs every acquisition counted
//! (`single-thread-lock`, `unnecessary-lock`, a line's sharing verdict,
//! `over-synchronization`, a share of acquisitions that waited) is drawn
//! for them, and a word a condition variable or a thread parker waits on
//! (nobody holds it) gets no finding about holds or contention.

use crate::model::findings::STATUS_UNJUDGED;
use crate::model::frames::{first_own_frame, is_lock_library_function};
use crate::model::{FutexRole, FutexUse, Lock, LockKind, Site};

/// Words of a library's signalling (threads wait for an event, not for a
/// holder), by a part of a function's name, lower case.
const SIGNAL_WORDS: &[&str] = &[
    "condvar",
    "parker",
    "::park",
    "once",
    "notification",
    "barrier",
    "blockingcounter",
    "event",
    "semaphore",
    "latch",
];

/// Words of a library's locks.
const LOCK_WORDS: &[&str] = &[
    "mutex",
    "rwlock",
    "lock_contended",
    "read_contended",
    "write_contended",
    "lock_slow",
    "lockslow",
    "readerlock",
    "writerlock",
    "spinlock",
    "::lock",
];

/// Functions of libraries that park each waiting thread on a futex word of
/// its own, by a part of their name: abseil's per-thread semaphore,
/// parking_lot's, folly's, and Rust std's thread parker (`thread::park`,
/// the end of `thread::scope`, a channel's wait).
const PARKER_WORDS: &[&str] = &[
    "perthreadsem",
    "parking_lot_core::",
    "threadparker",
    "thread_parking::",
];

/// Whether a wait went through a library's per-thread parking.
fn parks_threads(site: &Site) -> bool {
    let own = first_own_frame(&site.call_chain);
    site.call_chain[..own]
        .iter()
        .filter_map(|f| f.function.as_deref())
        .any(|f| {
            let name = f.to_lowercase();
            PARKER_WORDS.iter().any(|w| name.contains(w))
        })
}

/// The role one library function says, if any (signalling is checked
/// first: `CondVar::Wait(absl::Mutex*)` names a mutex only as an argument).
fn role_of_function(function: &str) -> Option<FutexRole> {
    let name = function
        .split('(')
        .next()
        .unwrap_or(function)
        .to_lowercase();
    if SIGNAL_WORDS.iter().any(|w| name.contains(w)) {
        Some(FutexRole::Signal)
    } else if LOCK_WORDS.iter().any(|w| name.contains(w)) {
        Some(FutexRole::Lock)
    } else {
        None
    }
}

/// The role a wait's call chain says: its library frames, nearest the
/// program's own line first (the library's entry point says what the
/// program called: `Mutex::lock` over the parker it waits in).
fn role_of_chain(site: &Site) -> Option<(FutexRole, String)> {
    let chain = &site.call_chain;
    let own = first_own_frame(chain);
    chain[..own]
        .iter()
        .rev()
        .filter_map(|f| f.function.as_deref())
        .filter(|f| is_lock_library_function(f))
        .find_map(|f| role_of_function(f).map(|r| (r, f.to_string())))
}

/// Sets each futex word's role from the chains of the lines that waited
/// on it (a word both locked and signalled on is a lock).
pub fn classify(locks: &mut [Lock], sites: &[Site]) {
    for lock in locks.iter_mut().filter(|l| l.kind == LockKind::Futex) {
        let mut found: Option<(FutexRole, String)> = None;
        let mut per_thread = false;
        // The waits' lines first: their chains say what the program
        // called (a wake's, only how the lock lets go).
        let mut lines: Vec<&Site> = lock
            .sites
            .iter()
            .filter_map(|s| sites.get(s.index()))
            .collect();
        lines.sort_by_key(|s| s.contended == 0);
        for site in lines {
            per_thread |= parks_threads(site);
            match (role_of_chain(site), &found) {
                (Some(r), None) => found = Some(r),
                (Some((FutexRole::Lock, f)), Some((FutexRole::Signal, _))) => {
                    found = Some((FutexRole::Lock, f))
                }
                _ => {}
            }
        }
        let (role, library) = match found {
            Some((role, f)) => (role, Some(f)),
            None => (FutexRole::Unknown, None),
        };
        lock.rare_mut().futex = Some(FutexUse {
            role,
            library,
            per_thread,
            path: None,
        });
    }
}

/// Notes where in the program's variable a futex word lies, down through
/// the library's fields (`app::RW.inner.writer_notify`), when its name is
/// the program's object (`&app::RW/writer_notify`).
pub fn placed(lock: &mut Lock, path: String) {
    if let Some(futex) = lock.rare_mut().futex.as_mut() {
        futex.path = Some(path);
    }
}

/// The base name of a futex word that lies in no variable, from `line`,
/// the line that first used it (a heap or thread-local word has no
/// initialisation call): a thread's own parker word is no lock of the
/// program (its waits are that thread's, on whichever lock it waited for),
/// so it is named `parker(LINE)`, for the line where the thread first
/// parked on it.
pub fn line_name(lock: &Lock, line: String) -> String {
    let per_thread = lock
        .rare
        .as_ref()
        .and_then(|r| r.futex.as_ref())
        .is_some_and(|f| f.per_thread);
    if lock.kind == LockKind::Futex && per_thread {
        format!("parker({line})")
    } else {
        line
    }
}

/// Lines that engaged only futex words are not judged: their acquisitions
/// that did not wait are not seen.
pub fn unjudged_sites(sites: &mut [Site], locks: &[Lock]) {
    for site in sites.iter_mut() {
        let only_words = !site.locks.is_empty()
            && site.locks.iter().all(|l| {
                locks
                    .get(l.index())
                    .is_some_and(|l| l.kind == LockKind::Futex)
            });
        if only_words {
            site.status = STATUS_UNJUDGED;
        }
    }
}

/// The once-per-process note on what a futex word's figures mean, when the
/// process has any.
pub fn note(locks: &[Lock]) -> Option<String> {
    let words = locks.iter().filter(|l| l.kind == LockKind::Futex).count();
    let per_thread = locks
        .iter()
        .filter(|l| {
            l.rare
                .as_ref()
                .and_then(|r| r.futex.as_ref())
                .is_some_and(|f| f.per_thread)
        })
        .count();
    (words > 0).then(|| {
        format!(
            "{} futex word{} (locks of libraries that wait through syscall(): Rust's std, parking_lot, abseil, folly) {} seen only when a thread waited: acquisitions that did not wait make no call and are not counted, so these words get no unnecessary-lock, single-thread or sharing verdict, and their 'acquired' figure counts waits{}",
            words,
            if words == 1 { "" } else { "s" },
            if words == 1 { "is" } else { "are" },
            if per_thread > 0 {
                format!("; {per_thread} of them {} a waiting thread's own word, not a lock's (the library parks each waiting thread on a word of its own): such a word is named parker(LINE), for the line that first waited on it, and its waits are that thread's, on whichever of the library's locks (or events) it waited for: one such word is not one lock of the program", if per_thread == 1 { "is" } else { "are" })
            } else {
                String::new()
            }
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_are_told_by_the_library_functions() {
        let lock = Some(FutexRole::Lock);
        let signal = Some(FutexRole::Signal);
        assert_eq!(
            role_of_function("<std::sys::sync::mutex::futex::Mutex>::lock_contended"),
            lock
        );
        assert_eq!(
            role_of_function("<std::sys::sync::rwlock::futex::RwLock>::read_contended"),
            lock
        );
        assert_eq!(
            role_of_function("std::sync::poison::condvar::Condvar::wait"),
            signal
        );
        assert_eq!(
            role_of_function("absl::lts_20220623::CondVar::WaitCommon(absl::lts_20220623::Mutex*)"),
            signal
        );
        assert_eq!(
            role_of_function("absl::lts_20220623::Mutex::LockSlowLoop(absl::SynchWaitParams*)"),
            lock
        );
        assert_eq!(
            role_of_function(
                "<parking_lot::raw_mutex::RawMutex as lock_api::mutex::RawMutex>::lock"
            ),
            lock
        );
        assert_eq!(
            role_of_function("std::sys::sync::thread_parking::futex::Parker::park"),
            signal
        );
        assert_eq!(
            role_of_function("std::sys::pal::unix::futex::futex_wait"),
            None
        );
    }
}
