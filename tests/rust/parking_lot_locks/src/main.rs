//! parking_lot's `Mutex`, `RwLock` and `Condvar`, each made to wait inside a
//! critical section: a holder takes the lock, starts its waiter, holds on
//! until the waiter is seen blocked in futex(2), then for `HOLD` more, and
//! lets go. Each waiter times its own wait; every line is `key value`:
//! the tids of holder and waiters and the waits they measured.
//!
//! parking_lot parks a waiting thread on a futex word of its own (in its
//! thread-local data), so every waiter stays alive, asleep, to the end:
//! a later thread made on its freed stack would park on the same word.

#[path = "../../futex_common.rs"]
mod common;

use common::{about_to_wait, ns_since, tid, until_waiting, HOLD};
use parking_lot::{const_mutex, const_rwlock, Condvar, Mutex, RwLock};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

static MUTEX: Mutex<u64> = const_mutex(0);
static RWLOCK: RwLock<u64> = const_rwlock(0);
static READY: Mutex<bool> = const_mutex(false);
static CONDVAR: Condvar = Condvar::new();
static DONE: AtomicBool = AtomicBool::new(false);

/// A waiter: its tid (once it is about to wait) and the wait it measured.
#[derive(Default)]
struct Waiter {
    about: AtomicI32,
    waited: AtomicU64,
    finished: AtomicBool,
}

impl Waiter {
    /// Starts thread `name` running `wait` (which returns the ns it
    /// waited), then sleeping until the program ends.
    fn spawn(name: &str, wait: impl FnOnce(&AtomicI32) -> u128 + Send + 'static) -> Arc<Self> {
        let me = Arc::new(Waiter::default());
        let w = me.clone();
        thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let waited = wait(&w.about);
                w.waited.store(waited as u64, Ordering::Relaxed);
                w.finished.store(true, Ordering::Release);
                while !DONE.load(Ordering::Acquire) {
                    thread::sleep(Duration::from_millis(1));
                }
            })
            .unwrap();
        me
    }

    /// Waits (polling) for its wait to end; prints `<key>_tid`, `<key>_wait_ns`.
    fn report(&self, key: &str) {
        while !self.finished.load(Ordering::Acquire) {
            thread::sleep(Duration::from_micros(200));
        }
        println!("{key}_tid {}", self.about.load(Ordering::Relaxed));
        println!("{key}_wait_ns {}", self.waited.load(Ordering::Relaxed));
    }
}

fn named(name: &str) -> thread::Builder {
    thread::Builder::new().name(name.into())
}

/// `m_holder` holds `MUTEX` while `m_waiter` waits for it.
fn mutex_phase() {
    named("m_holder")
        .spawn(|| {
            let mut guard = MUTEX.lock();
            let waiter = Waiter::spawn("m_waiter", |about| {
                about_to_wait(about);
                let start = Instant::now();
                let mut g = MUTEX.lock(); // marker: mutex waiter
                let waited = ns_since(start);
                *g += 1;
                waited
            });
            until_waiting(&waiter.about);
            let seen = Instant::now();
            thread::sleep(HOLD);
            *guard += 1;
            println!("mutex_held_ns {}", ns_since(seen));
            drop(guard); // marker: mutex holder unlocks
            println!("mutex_holder_tid {}", tid());
            waiter.report("mutex_waiter");
        })
        .unwrap()
        .join()
        .unwrap();
}

/// `rw_writer` holds `RWLOCK` for writing while two readers wait.
fn readers_wait_phase() {
    named("rw_writer")
        .spawn(|| {
            let mut guard = RWLOCK.write();
            let readers: Vec<_> = (1..=2)
                .map(|i| {
                    Waiter::spawn(&format!("rw_reader{i}"), |about| {
                        about_to_wait(about);
                        let start = Instant::now();
                        let g = RWLOCK.read(); // marker: readers wait
                        let waited = ns_since(start);
                        assert_eq!(*g, 1);
                        waited
                    })
                })
                .collect();
            for r in &readers {
                until_waiting(&r.about);
            }
            let seen = Instant::now();
            thread::sleep(HOLD);
            *guard += 1;
            println!("rw_held_ns {}", ns_since(seen));
            drop(guard); // marker: writer unlocks
            println!("rw_writer_tid {}", tid());
            for (i, r) in readers.iter().enumerate() {
                r.report(&format!("rw_reader{}", i + 1));
            }
        })
        .unwrap()
        .join()
        .unwrap();
}

/// `wr_reader` holds `RWLOCK` for reading while `wr_writer` waits.
fn writer_waits_phase() {
    named("wr_reader")
        .spawn(|| {
            let guard = RWLOCK.read();
            let writer = Waiter::spawn("wr_writer", |about| {
                about_to_wait(about);
                let start = Instant::now();
                let mut g = RWLOCK.write(); // marker: writer waits
                let waited = ns_since(start);
                *g += 1;
                waited
            });
            until_waiting(&writer.about);
            let seen = Instant::now();
            thread::sleep(HOLD);
            println!("wr_held_ns {}", ns_since(seen));
            drop(guard); // marker: reader unlocks
            println!("wr_reader_tid {}", tid());
            writer.report("wr_writer");
        })
        .unwrap()
        .join()
        .unwrap();
}

/// `c_waiter` waits on `CONDVAR` until `c_notifier` sets `READY`.
fn condvar_phase() {
    let waiter = Waiter::spawn("c_waiter", |about| {
        let mut ready = READY.lock();
        about_to_wait(about);
        let start = Instant::now();
        while !*ready {
            CONDVAR.wait(&mut ready); // marker: condvar wait
        }
        ns_since(start)
    });
    let w = waiter.clone();
    named("c_notifier")
        .spawn(move || {
            until_waiting(&w.about);
            let seen = Instant::now();
            thread::sleep(HOLD);
            *READY.lock() = true;
            println!("condvar_held_ns {}", ns_since(seen));
            CONDVAR.notify_one(); // marker: condvar notify
            println!("condvar_notifier_tid {}", tid());
        })
        .unwrap()
        .join()
        .unwrap();
    waiter.report("condvar_waiter");
}

fn main() {
    mutex_phase();
    readers_wait_phase();
    writer_waits_phase();
    condvar_phase();
    println!("mutex_count {}", *MUTEX.lock());
    println!("rwlock_count {}", *RWLOCK.read());
    DONE.store(true, Ordering::Release);
}
