//! Four threads fight over one Rust `std::sync::Mutex` (a futex word:
//! every contended wait and wake goes through the shim's `syscall` hook,
//! which unwinds to find the line). Timed whole by farm-bench; see
//! docs/performance.md, "Futex words".
use std::sync::{Arc, Mutex};
use std::thread;
fn main() {
    let m = Arc::new(Mutex::new(0u64));
    let hs: Vec<_> = (0..4).map(|_| { let m = m.clone(); thread::spawn(move || {
        for i in 0..3_000_000u64 { let mut g = m.lock().unwrap(); *g = g.wrapping_add(i); for _ in 0..200 { std::hint::black_box(&mut *g); } }
    })}).collect();
    for h in hs { h.join().unwrap(); }
    println!("{}", *m.lock().unwrap());
}
