//! Two `std::sync::Mutex`es taken in opposite orders by two threads, each
//! sure (a `Barrier`) the other has its first before it asks for its
//! second: they hang for good, each in a futex wait. Prints each thread's
//! tid (`ab_tid`, `ba_tid`) before it hangs.

use std::sync::{Barrier, Mutex};
use std::thread;

static A: Mutex<u32> = Mutex::new(0);
static B: Mutex<u32> = Mutex::new(0);
static BOTH_HELD: Barrier = Barrier::new(2);

extern "C" {
    fn gettid() -> i32;
}

fn take(name: &'static str, first: &'static Mutex<u32>, second: &'static Mutex<u32>) {
    let _first = first.lock().unwrap();
    // SAFETY: gettid(2) takes nothing and cannot fail.
    println!("{name}_tid {}", unsafe { gettid() });
    BOTH_HELD.wait();
    let _second = second.lock().unwrap(); // marker: second lock
    unreachable!("{name} took both");
}

fn main() {
    let ab = thread::Builder::new()
        .name("ab".into())
        .spawn(|| take("ab", &A, &B))
        .unwrap();
    let ba = thread::Builder::new()
        .name("ba".into())
        .spawn(|| take("ba", &B, &A))
        .unwrap();
    ab.join().unwrap();
    ba.join().unwrap();
}
