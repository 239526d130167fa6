//! Threads already blocked in a futex wait when attach began. Their waits
//! started before the tracepoints were there, so the recording never sees
//! them begin; a hung program is all such threads. Each is read from
//! /proc: the call and its registers (`/proc/PID/task/TID/syscall`), its
//! stack (`/proc/PID/mem`). A word that is a glibc mutex's names its
//! holder (the mutex's `__owner`, or a PI mutex's word itself); holders
//! that wait in turn, back to the first, are a deadlock.

use std::fs::File;
use std::os::unix::fs::FileExt;

/// Bytes of stack read from the stack pointer (the BPF program's copy's).
const STACK_BYTES: usize = 8192;
const SHORT_STACK_BYTES: usize = 1024;

/// x86-64's futex system call.
const NR_FUTEX: u64 = 202;

/// A thread blocked in a futex wait when attach began.
pub struct Blocked {
    pub tid: u32,
    pub uaddr: u64,
    pub pc: u64,
    pub sp: u64,
    pub stack: Vec<u8>,
    /// The thread that holds the word's lock, where the word says so.
    pub holder: Option<u32>,
}

/// The futex operations that wait (FUTEX_WAIT, WAIT_BITSET, LOCK_PI,
/// WAIT_REQUEUE_PI, LOCK_PI2), and whether the word itself holds the
/// owner's tid (the PI ones).
fn waits(op: u64) -> Option<bool> {
    match op & 0x7f {
        0 | 9 => Some(false),
        6 | 11 | 13 => Some(true),
        _ => None,
    }
}

fn hex(field: &str) -> Option<u64> {
    u64::from_str_radix(field.trim_start_matches("0x"), 16).ok()
}

/// The threads of `pid`.
fn threads(pid: u32) -> Vec<u32> {
    let mut tids: Vec<u32> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    tids.sort_unstable();
    tids
}

/// Reads `len` bytes at `at` of the process's memory, or fewer (`short`)
/// when the stack ends sooner.
fn read(mem: &File, at: u64, len: usize) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; len];
    mem.read_exact_at(&mut buf, at).ok()?;
    Some(buf)
}

/// Every thread of `pid` blocked in a futex wait now, with its holder
/// where the word tells it.
pub fn blocked_threads(pid: u32) -> Vec<Blocked> {
    let Ok(mem) = File::open(format!("/proc/{pid}/mem")) else {
        return Vec::new();
    };
    let tids = threads(pid);
    let mut found = Vec::new();
    for &tid in &tids {
        // "nr arg1 … arg6 sp pc" while in a system call.
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/syscall")) else {
            continue;
        };
        let fields: Vec<&str> = text.split_whitespace().collect();
        if fields.len() < 9 || fields[0].parse::<u64>().ok() != Some(NR_FUTEX) {
            continue;
        }
        let (Some(uaddr), Some(op), Some(sp), Some(pc)) = (
            hex(fields[1]),
            hex(fields[2]),
            hex(fields[7]),
            hex(fields[8]),
        ) else {
            continue;
        };
        let Some(pi) = waits(op) else { continue };
        let stack = read(&mem, sp, STACK_BYTES)
            .or_else(|| read(&mem, sp, SHORT_STACK_BYTES))
            .unwrap_or_default();
        // glibc's pthread_mutex_t: the word (2: locked, with waiters), a
        // count, then the owner's tid; a PI mutex's word is its owner's
        // tid. Taken only when it is another thread of the process.
        let holder = read(&mem, uaddr, 12).and_then(|w| {
            let word = u32::from_ne_bytes(w[0..4].try_into().ok()?);
            let owner = if pi {
                word & 0x3fff_ffff
            } else if word == 2 {
                u32::from_ne_bytes(w[8..12].try_into().ok()?)
            } else {
                return None;
            };
            (owner != tid && tids.binary_search(&owner).is_ok()).then_some(owner)
        });
        found.push(Blocked {
            tid,
            uaddr,
            pc,
            sp,
            stack,
            holder,
        });
    }
    found
}

/// The cycles of threads each waiting for a lock the next holds, each
/// once, as indexes into `blocked`, starting at its lowest tid.
pub fn deadlocks(blocked: &[Blocked]) -> Vec<Vec<usize>> {
    let index_of = |tid: u32| blocked.iter().position(|b| b.tid == tid);
    let mut cycles: Vec<Vec<usize>> = Vec::new();
    for start in 0..blocked.len() {
        let mut path = vec![start];
        let mut at = start;
        while let Some(next) = blocked[at].holder.and_then(index_of) {
            if next == start {
                let lowest = (0..path.len())
                    .min_by_key(|&i| blocked[path[i]].tid)
                    .unwrap_or(0);
                path.rotate_left(lowest);
                if !cycles.contains(&path) {
                    cycles.push(path);
                }
                break;
            }
            if path.contains(&next) || path.len() > blocked.len() {
                break;
            }
            path.push(next);
            at = next;
        }
    }
    cycles
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocked(tid: u32, holder: Option<u32>) -> Blocked {
        Blocked {
            tid,
            uaddr: u64::from(tid) * 16,
            pc: 0,
            sp: 0,
            stack: Vec::new(),
            holder,
        }
    }

    #[test]
    fn a_cycle_of_holders_is_one_deadlock_whatever_thread_it_is_found_from() {
        let threads = [
            blocked(30, Some(10)),
            blocked(10, Some(20)),
            blocked(20, Some(30)),
            blocked(40, Some(10)),
            blocked(50, None),
        ];
        assert_eq!(deadlocks(&threads), vec![vec![1, 2, 0]]);
        assert!(deadlocks(&[blocked(1, Some(2)), blocked(2, None)]).is_empty());
    }

    #[test]
    fn only_waiting_operations_are_waits() {
        assert_eq!(waits(128), Some(false)); // FUTEX_WAIT_PRIVATE
        assert_eq!(waits(9 | 128), Some(false));
        assert_eq!(waits(6 | 128), Some(true)); // FUTEX_LOCK_PI_PRIVATE
        assert_eq!(waits(1 | 128), None); // FUTEX_WAKE_PRIVATE
    }
}
