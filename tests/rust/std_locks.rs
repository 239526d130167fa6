//! Rust's std locks block through `syscall(SYS_futex, …)`, out of the
//! pthread hooks' sight. `holder` takes a `Mutex` and sleeps 100 ms; `waiter`
//! waits for it; `notified` waits on a `Condvar` that main notifies after
//! 60 ms. Each measures its own wait and prints it (`name_ns N`).

use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

fn main() {
    let lock = Arc::new(Mutex::new(0u64));
    let held = Arc::new((Mutex::new(false), Condvar::new()));
    let ready = Arc::new((Mutex::new(false), Condvar::new()));

    let holder = {
        let (lock, held) = (lock.clone(), held.clone());
        thread::Builder::new()
            .name("holder".into())
            .spawn(move || {
                let mut guard = lock.lock().unwrap();
                *held.0.lock().unwrap() = true;
                held.1.notify_all();
                let start = Instant::now();
                thread::sleep(Duration::from_millis(100));
                let slept = start.elapsed();
                *guard += 1;
                slept
            })
            .unwrap()
    };
    {
        let mut is_held = held.0.lock().unwrap();
        while !*is_held {
            is_held = held.1.wait(is_held).unwrap();
        }
    }
    let waiter = {
        let lock = lock.clone();
        thread::Builder::new()
            .name("waiter".into())
            .spawn(move || {
                let start = Instant::now();
                let mut guard = lock.lock().unwrap(); // marker: rust waiter
                let waited = start.elapsed();
                *guard += 1;
                waited
            })
            .unwrap()
    };
    let notified = {
        let ready = ready.clone();
        thread::Builder::new()
            .name("notified".into())
            .spawn(move || {
                let start = Instant::now();
                let mut is_ready = ready.0.lock().unwrap();
                while !*is_ready {
                    is_ready = ready.1.wait(is_ready).unwrap(); // marker: rust condvar
                }
                start.elapsed()
            })
            .unwrap()
    };
    thread::sleep(Duration::from_millis(60));
    *ready.0.lock().unwrap() = true;
    ready.1.notify_all();
    let slept = holder.join().unwrap();
    let waited = waiter.join().unwrap();
    let notified_after = notified.join().unwrap();
    println!("holder_sleep_ns {}", slept.as_nanos());
    println!("waiter_ns {}", waited.as_nanos());
    println!("notified_ns {}", notified_after.as_nanos());
    println!("count {}", *lock.lock().unwrap());
}
