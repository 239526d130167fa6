//! Rust std's `Mutex`, `RwLock` and `Condvar`, each made to wait inside a
//! critical section: a holder takes the lock, starts its waiter, holds on
//! until the waiter is seen blocked in futex(2), then for `HOLD` more, and
//! lets go. Each waiter times its own wait; every line is `key value`:
//! the tids of holder and waiters and the waits they measured.

#[path = "futex_common.rs"]
mod common;

use common::{about_to_wait, ns_since, tid, until_waiting, HOLD};
use std::sync::atomic::AtomicI32;
use std::sync::{Condvar, Mutex, RwLock};
use std::thread;
use std::time::Instant;

static MUTEX: Mutex<u64> = Mutex::new(0);
static RWLOCK: RwLock<u64> = RwLock::new(0);
static READY: Mutex<bool> = Mutex::new(false);
static CONDVAR: Condvar = Condvar::new();

fn named(name: &str) -> thread::Builder {
    thread::Builder::new().name(name.into())
}

/// `m_holder` holds `MUTEX` while `m_waiter` waits for it.
fn mutex_phase() {
    let about = AtomicI32::new(0);
    thread::scope(|s| { // marker: scope parks
        named("m_holder")
            .spawn_scoped(s, || {
                let mut guard = MUTEX.lock().unwrap();
                let waiter = named("m_waiter")
                    .spawn_scoped(s, || {
                        let me = about_to_wait(&about);
                        let start = Instant::now();
                        let mut g = MUTEX.lock().unwrap(); // marker: mutex waiter
                        let waited = ns_since(start);
                        *g += 1;
                        (me, waited)
                    })
                    .unwrap();
                until_waiting(&about);
                let seen = Instant::now();
                thread::sleep(HOLD); // marker: mutex holder sleeps
                *guard += 1;
                println!("mutex_held_ns {}", ns_since(seen));
                drop(guard); // marker: mutex holder unlocks
                let (waiter_tid, waited) = waiter.join().unwrap();
                println!("mutex_holder_tid {}", tid());
                println!("mutex_waiter_tid {waiter_tid}");
                println!("mutex_waiter_wait_ns {waited}");
            })
            .unwrap();
    });
}

/// `rw_writer` holds `RWLOCK` for writing while two readers wait.
fn readers_wait_phase() {
    let about = [AtomicI32::new(0), AtomicI32::new(0)];
    thread::scope(|s| {
        named("rw_writer")
            .spawn_scoped(s, || {
                let mut guard = RWLOCK.write().unwrap();
                let readers: Vec<_> = about
                    .iter()
                    .enumerate()
                    .map(|(i, about)| {
                        named(&format!("rw_reader{}", i + 1))
                            .spawn_scoped(s, move || {
                                let me = about_to_wait(about);
                                let start = Instant::now();
                                let g = RWLOCK.read().unwrap(); // marker: readers wait
                                let waited = ns_since(start);
                                assert_eq!(*g, 1);
                                (me, waited)
                            })
                            .unwrap()
                    })
                    .collect();
                for a in &about {
                    until_waiting(a);
                }
                let seen = Instant::now();
                thread::sleep(HOLD); // marker: writer holds
                *guard += 1;
                println!("rw_held_ns {}", ns_since(seen));
                drop(guard); // marker: writer unlocks
                println!("rw_writer_tid {}", tid());
                for (i, r) in readers.into_iter().enumerate() {
                    let (reader_tid, waited) = r.join().unwrap();
                    println!("rw_reader{}_tid {reader_tid}", i + 1);
                    println!("rw_reader{}_wait_ns {waited}", i + 1);
                }
            })
            .unwrap();
    });
}

/// `wr_reader` holds `RWLOCK` for reading while `wr_writer` waits.
fn writer_waits_phase() {
    let about = AtomicI32::new(0);
    thread::scope(|s| {
        named("wr_reader")
            .spawn_scoped(s, || {
                let guard = RWLOCK.read().unwrap();
                let writer = named("wr_writer")
                    .spawn_scoped(s, || {
                        let me = about_to_wait(&about);
                        let start = Instant::now();
                        let mut g = RWLOCK.write().unwrap(); // marker: writer waits
                        let waited = ns_since(start);
                        *g += 1;
                        (me, waited)
                    })
                    .unwrap();
                until_waiting(&about);
                let seen = Instant::now();
                thread::sleep(HOLD); // marker: reader holds
                println!("wr_held_ns {}", ns_since(seen));
                drop(guard); // marker: reader unlocks
                let (writer_tid, waited) = writer.join().unwrap();
                println!("wr_reader_tid {}", tid());
                println!("wr_writer_tid {writer_tid}");
                println!("wr_writer_wait_ns {waited}");
            })
            .unwrap();
    });
}

/// `c_waiter` waits on `CONDVAR` until `c_notifier` sets `READY`.
fn condvar_phase() {
    let about = AtomicI32::new(0);
    thread::scope(|s| {
        let waiter = named("c_waiter")
            .spawn_scoped(s, || {
                let mut ready = READY.lock().unwrap();
                let me = about_to_wait(&about);
                let start = Instant::now();
                while !*ready {
                    ready = CONDVAR.wait(ready).unwrap(); // marker: condvar wait
                }
                (me, ns_since(start))
            })
            .unwrap();
        named("c_notifier")
            .spawn_scoped(s, || {
                until_waiting(&about);
                let seen = Instant::now();
                thread::sleep(HOLD);
                *READY.lock().unwrap() = true;
                println!("condvar_held_ns {}", ns_since(seen));
                CONDVAR.notify_one(); // marker: condvar notify
                println!("condvar_notifier_tid {}", tid());
            })
            .unwrap()
            .join()
            .unwrap();
        let (waiter_tid, waited) = waiter.join().unwrap();
        println!("condvar_waiter_tid {waiter_tid}");
        println!("condvar_waiter_wait_ns {waited}");
    });
}

fn main() {
    mutex_phase();
    readers_wait_phase();
    writer_waits_phase();
    condvar_phase();
    println!("mutex_count {}", *MUTEX.lock().unwrap());
    println!("rwlock_count {}", *RWLOCK.read().unwrap());
}
