//! The live heap blocks of a `locksuit cc` build (liblocksuit_cov.so tells
//! of each allocation and free): start, size and the allocating call's
//! return address, so that the first touch of a granule under a lock can
//! say which line allocated its block (`access.rs` writes it into the
//! granule's record). Open addressing by start, 1 Mi entries (24 MiB
//! reserved, touched lazily); beyond, blocks are named by address. Blocks
//! are shared with a fork child, so the table is too.

use core::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

/// One live block.
#[repr(C)]
struct LiveBlock {
    /// The block's start; 0 = empty, `GONE` = freed.
    start: AtomicU64,
    size: AtomicU64,
    pc: AtomicU64,
}

const BLOCK_SLOTS: usize = 1 << 20;
const PROBES: usize = 32;
const GONE: u64 = u64::MAX;
/// How far before a granule its block's start is looked for.
const BLOCK_REACH: u64 = 4096;
static BLOCKS: AtomicPtr<LiveBlock> = AtomicPtr::new(core::ptr::null_mut());
/// The lowest start and highest end of any block allocated so far: an
/// address outside (a global, say) is in no block, and is not looked for.
static LOWEST: AtomicU64 = AtomicU64::new(u64::MAX);
static HIGHEST: AtomicU64 = AtomicU64::new(0);

/// Blocks that start within one KiB of each other sit side by side in the
/// table (as granules do in `access.rs`): fewer of its pages are touched.
fn block_hash(start: u64) -> usize {
    const RUN_SHIFT: u32 = 64 - (BLOCK_SLOTS.trailing_zeros() - RUN.trailing_zeros());
    let run = (start >> 10).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> RUN_SHIFT;
    run as usize * RUN + ((start >> 4) as usize % RUN)
}

/// Block starts in a KiB of memory (16-byte steps): a run of the table.
const RUN: usize = 64;

/// The `i`th entry of the probe sequence from `home`: the same place in
/// the following runs (see `access.rs`'s `probe`).
#[inline]
fn probe(home: usize, i: usize) -> usize {
    (home + i * RUN) & (BLOCK_SLOTS - 1)
}

fn blocks() -> Option<*mut LiveBlock> {
    crate::recorder::base::mapped::mapped_once(
        &BLOCKS,
        BLOCK_SLOTS * core::mem::size_of::<LiveBlock>(),
    )
}

/// The entry of the live block starting at `start`, if any.
fn live_block(table: *mut LiveBlock, start: u64) -> Option<&'static LiveBlock> {
    let home = block_hash(start);
    for i in 0..PROBES {
        // SAFETY: the index is masked into the table.
        let entry = unsafe { &*table.add(probe(home, i)) };
        match entry.start.load(Ordering::Acquire) {
            0 => return None,
            cur if cur == start => return Some(entry),
            _ => {}
        }
    }
    None
}

/// A heap block of `size` bytes at `address` was allocated by the call
/// returning to `pc`.
pub fn block_allocated(address: u64, size: u64, pc: u64) {
    let Some(table) = blocks() else { return };
    if address == 0 || address == GONE {
        return;
    }
    // Read first: most allocations move neither bound, and the line stays
    // shared between the threads.
    if address < LOWEST.load(Ordering::Relaxed) {
        LOWEST.fetch_min(address, Ordering::Relaxed);
    }
    let end = address.saturating_add(size);
    if end > HIGHEST.load(Ordering::Relaxed) {
        HIGHEST.fetch_max(end, Ordering::Relaxed);
    }
    let home = block_hash(address);
    for i in 0..PROBES {
        // SAFETY: the index is masked into the table.
        let entry = unsafe { &*table.add(probe(home, i)) };
        let cur = entry.start.load(Ordering::Acquire);
        let claimed = cur == address
            || ((cur == 0 || cur == GONE)
                && entry
                    .start
                    .compare_exchange(cur, address, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok());
        if claimed {
            entry.size.store(size, Ordering::Relaxed);
            entry.pc.store(pc, Ordering::Release);
            return;
        }
    }
}

/// The allocating call of the live block that holds `address` (0: none
/// known), looked for at most `BLOCK_REACH` bytes back.
pub fn allocated_by(address: u64) -> u64 {
    let table = BLOCKS.load(Ordering::Acquire);
    if table.is_null()
        || address < LOWEST.load(Ordering::Relaxed)
        || address >= HIGHEST.load(Ordering::Relaxed)
    {
        return 0;
    }
    let mut start = address & !15;
    loop {
        if let Some(entry) = live_block(table, start) {
            let pc = entry.pc.load(Ordering::Acquire);
            if address < start.saturating_add(entry.size.load(Ordering::Relaxed)) {
                return pc;
            }
            return 0; // the block before it ends short of it
        }
        if address - start >= BLOCK_REACH || start < 16 {
            return 0;
        }
        start -= 16;
    }
}

/// The block at `address` was freed.
pub fn block_gone(address: u64) {
    let table = BLOCKS.load(Ordering::Acquire);
    if table.is_null() {
        return;
    }
    if let Some(entry) = live_block(table, address) {
        entry.start.store(GONE, Ordering::Release);
    }
}
