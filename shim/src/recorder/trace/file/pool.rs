//! Blocks set aside before the program confines itself (seccomp), handed
//! out afterwards with no system call.

use super::*;

/// Blocks reserved and backed before the program confined itself, handed
/// out afterwards with no system call: `POOL_NEXT` up to `POOL_END`.
pub(super) static POOL_NEXT: AtomicU32 = AtomicU32::new(0);
pub(super) static POOL_END: AtomicU32 = AtomicU32::new(0);

/// Most blocks set aside for a confined program (8 MiB): a pool far larger
/// than the activity after a sandbox goes up usually needs, small enough to
/// write at once.
pub(super) const POOL_BLOCKS: u32 = 512;

/// Before the program confines itself: reserves and backs up to
/// [`POOL_BLOCKS`] blocks for afterwards (fewer near the cap or the
/// file-size limit). Returns how many the pool holds.
pub fn fill_pool() -> u32 {
    let Some(reserved) = header_u32(offset_of!(FileHeader, blocks_reserved)) else {
        return 0;
    };
    let left = POOL_END.load(Ordering::Relaxed) - POOL_NEXT.load(Ordering::Relaxed);
    if left >= POOL_BLOCKS / 2 {
        return left; // an earlier confinement's pool is still deep
    }
    let max =
        header_u32(offset_of!(FileHeader, max_blocks)).map_or(0, |m| m.load(Ordering::Relaxed));
    let Some((index, count)) =
        reserve(reserved, |index| POOL_BLOCKS.min(max.saturating_sub(index)))
    else {
        return left;
    };
    let offset = index as usize * BLOCK_SIZE;
    let allowed = blocks_within_file_size_limit(offset, count);
    let mut backed = 0;
    if let Some(fd) = TRACE_FILE.checked_fd() {
        while backed < allowed {
            let at = offset + backed as usize * BLOCK_SIZE;
            let times = (allowed - backed) as usize;
            match sys::pwrite_repeated(fd, &ZEROS, times, at as u64) {
                Ok(n) if n >= BLOCK_SIZE => backed += (n / BLOCK_SIZE) as u32,
                _ => break,
            }
        }
    }
    // What could not be backed goes back, unless another lane reserved after.
    let _ = reserved.compare_exchange(
        index + count,
        index + backed,
        Ordering::AcqRel,
        Ordering::Relaxed,
    );
    if backed == 0 {
        return left;
    }
    BACKED_MIRROR.fetch_max(index + backed, Ordering::AcqRel);
    if let Some(b) = header_u32(offset_of!(FileHeader, blocks_backed)) {
        b.fetch_max(index + backed, Ordering::AcqRel);
    }
    // The old pool's last blocks stay unused: a fresh, larger pool replaces it.
    POOL_END.store(0, Ordering::Release);
    POOL_NEXT.store(index, Ordering::Release);
    POOL_END.store(index + backed, Ordering::Release);
    backed
}

/// Blocks from the pool (at most [`BATCH_BLOCKS`]), for a confined
/// program. An empty pool refuses: the records are dropped and counted.
pub(super) fn from_pool(wanted: u32) -> Result<Reserved, NoBlock> {
    let mut next = POOL_NEXT.load(Ordering::Acquire);
    loop {
        let end = POOL_END.load(Ordering::Acquire);
        if next >= end {
            set_flags(FLAG_CONFINED_FULL);
            return Err(NoBlock::Refused);
        }
        let count = wanted.clamp(1, BATCH_BLOCKS).min(end - next);
        match POOL_NEXT.compare_exchange_weak(
            next,
            next + count,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => return Ok(Reserved { first: next, count }),
            Err(now) => next = now,
        }
    }
}

/// In a fork child: the pool was the parent's trace's.
pub(super) fn forget_pool() {
    POOL_END.store(0, Ordering::Relaxed);
    POOL_NEXT.store(0, Ordering::Relaxed);
}
