//! For `locksuit attach` (tests/tests/attach.rs): once the file named by
//! the first argument exists, a holder takes Rust std's `Mutex`, starts a
//! waiter, holds on until the waiter is seen blocked in futex(2), then for
//! `HOLD` more, and lets go. The waiter times its own `lock()` call. Every
//! line is `key value`: the waiter's tid, what it measured, and how long
//! the holder held on after it saw the waiter blocked.

#[path = "futex_common.rs"]
mod common;

use common::{about_to_wait, ns_since, until_waiting, HOLD};
use std::sync::atomic::AtomicI32;
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

static MUTEX: Mutex<u64> = Mutex::new(0);

fn main() {
    let go = std::env::args().nth(1).expect("the go file");
    while !std::path::Path::new(&go).exists() {
        thread::sleep(Duration::from_millis(1));
    }
    let about = AtomicI32::new(0);
    let (waited, held) = thread::scope(|s| {
        let mut guard = MUTEX.lock().unwrap();
        let waiter = s.spawn(|| {
            about_to_wait(&about);
            let start = Instant::now();
            let mut g = MUTEX.lock().unwrap(); // marker: attach wait
            let waited = ns_since(start);
            *g += 1;
            waited
        });
        until_waiting(&about);
        let seen = Instant::now();
        thread::sleep(HOLD);
        let held = ns_since(seen);
        *guard += 1;
        drop(guard);
        (waiter.join().unwrap(), held)
    });
    println!("mutex_count {}", *MUTEX.lock().unwrap());
    println!("waited-ns {waited}");
    println!("held-ns {held}");
}
