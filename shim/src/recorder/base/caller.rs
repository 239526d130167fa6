//! Where a hooked call came from: its return address, and the context read
//! off the stack above it (see [`Caller::context`]). Plain data; learning
//! the offsets it is read at is `sites.rs`'s work.

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Where a hooked call came from.
#[derive(Clone, Copy)]
pub struct Caller {
    /// Return address into the function that called the hook.
    pub ret: u64,
    /// Stack pointer at the hook's entry.
    pub sp: u64,
}

impl Caller {
    #[inline]
    pub fn new(ret: usize, sp: usize) -> Self {
        Caller {
            ret: ret as u64,
            sp: sp as u64,
        }
    }

    /// The call's context: a hash of up to [`CONTEXT_DEPTH`] return
    /// addresses up the stack (the caller's caller and beyond), read at the
    /// offsets learned for this return address. 0 when none is known.
    ///
    /// Level 0 sits in the frame of the function that called the hook, which
    /// is the same function at the same point for every call returning to
    /// `ret`, so its offset always holds. A deeper level was learned on one
    /// call path; it is read only while every return address below it equals
    /// the one seen on that path — then the frames in between are the same
    /// functions, live on this stack, and the slot is where it was.
    #[inline]
    pub fn context(&self, offsets: &Offsets) -> u64 {
        let mut context = 0u64;
        self.walk(offsets, |level, _, ret| {
            // Rotations keep the levels apart without a multiply chain.
            context ^= ret.rotate_left(16 * level as u32 + 1);
        });
        context
    }

    /// The call's context, with the words it was made of and where they
    /// were read, for the hot cache to compare on later calls (see
    /// `hot_cache.rs`): the places past its depth repeat level 0, so that
    /// a hit compares a fixed number of them with no test of the depth.
    pub fn seen(&self, offsets: &Offsets) -> Seen {
        let mut seen = Seen {
            context: 0,
            depth: 0,
            epoch: epoch(),
            offsets: [0; CONTEXT_DEPTH],
            above: [0; CONTEXT_DEPTH],
        };
        self.walk(offsets, |level, offset, ret| {
            seen.context ^= ret.rotate_left(16 * level as u32 + 1);
            if level == 0 {
                seen.offsets = [u32::from(offset); CONTEXT_DEPTH];
                seen.above = [ret; CONTEXT_DEPTH];
            } else {
                seen.offsets[level] = u32::from(offset);
                seen.above[level] = ret;
            }
            seen.depth = level as u32 + 1;
        });
        seen
    }

    /// A context of no levels: the call is its return address alone.
    pub fn seen_alone(&self) -> Seen {
        Seen {
            context: 0,
            depth: 0,
            epoch: epoch(),
            offsets: [0; CONTEXT_DEPTH],
            above: [0; CONTEXT_DEPTH],
        }
    }

    /// Reads the context's return addresses, level by level, as far as they
    /// apply (see [`Caller::context`]).
    #[inline(always)]
    fn walk(&self, offsets: &Offsets, mut visit: impl FnMut(usize, u16, u64)) {
        for level in 0..CONTEXT_DEPTH {
            let Some(offset) = offsets.get(level) else {
                break;
            };
            // SAFETY: see `context`: the slot is in a frame that is live on
            // this thread's stack while the call is in progress (level 0:
            // the caller's own frame; deeper: frames the chain check
            // vouched for).
            let ret =
                unsafe { core::ptr::read_volatile((self.sp + u64::from(offset)) as *const u64) };
            visit(level, offset, ret);
            if level + 1 < CONTEXT_DEPTH && ret != offsets.learned[level] {
                break; // another path from here on: deeper offsets do not apply
            }
        }
    }
}

/// A call's context, and the return addresses it was made from: `depth`
/// levels, read at `offsets` above the entry stack pointer, learned in
/// module-map `epoch` (the places past `depth` repeat level 0; all zero
/// for a context of none).
pub struct Seen {
    pub context: u64,
    pub depth: u32,
    pub epoch: u32,
    pub offsets: [u32; CONTEXT_DEPTH],
    pub above: [u64; CONTEXT_DEPTH],
}

/// How many return addresses above the caller make up a call's context:
/// enough to see through `unique_lock` → `unique_lock::lock` →
/// `std::mutex::lock` → `__gthread_mutex_lock` when those are compiled out
/// of line (`-O0`).
pub const CONTEXT_DEPTH: usize = 4;

/// Learned stack offsets of the context's return addresses, packed 16 bits
/// per level (`0xffff` = unknown from that level on; never all 0 once
/// learned, as a slot is always above the entry stack pointer), and the
/// return addresses found at levels 0..3 on the path they were learned on.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Offsets {
    pub(in crate::recorder) packed: u64,
    pub(in crate::recorder) learned: [u64; CONTEXT_DEPTH - 1],
}

impl Offsets {
    pub const NONE: Offsets = Offsets {
        packed: u64::MAX,
        learned: [0; CONTEXT_DEPTH - 1],
    };

    pub(in crate::recorder) fn from_levels(
        levels: &[u16; CONTEXT_DEPTH],
        learned: [u64; CONTEXT_DEPTH - 1],
    ) -> Offsets {
        let mut packed = 0u64;
        for (i, &o) in levels.iter().enumerate() {
            packed |= u64::from(o) << (16 * i);
        }
        Offsets { packed, learned }
    }

    #[inline]
    fn get(&self, level: usize) -> Option<u16> {
        let o = (self.packed >> (16 * level)) as u16;
        (o != 0xffff).then_some(o)
    }
}

/// The module-map epoch: bumped by every `dlclose`, after which a return
/// address may belong to another library, so what was learned about it
/// (offsets, sites, modules) is learned afresh. Recorded with modules and sites.
static EPOCH: AtomicU32 = AtomicU32::new(0);

/// The epoch shifted above every user-space address, kept beside it for
/// keys that fold it into a return address in one instruction (lean
/// mode's lines, `lean_lines.rs`): 16 bits of it.
static EPOCH_KEY: AtomicU64 = AtomicU64::new(0);

pub fn epoch() -> u32 {
    EPOCH.load(Ordering::Acquire)
}

/// `ret` with the current epoch folded in above bit 48 (see [`EPOCH_KEY`]).
#[inline(always)]
pub fn epoch_key(ret: u64) -> u64 {
    ret ^ EPOCH_KEY.load(Ordering::Relaxed)
}

/// A library was unloaded: a new epoch begins.
pub fn next_epoch() {
    EPOCH_KEY.fetch_add(1 << 48, Ordering::AcqRel);
    EPOCH.fetch_add(1, Ordering::AcqRel);
}

/// In a fork child: the child's trace starts at epoch 0.
pub fn set_epoch(epoch: u32) {
    EPOCH_KEY.store((epoch as u64) << 48, Ordering::Relaxed);
    EPOCH.store(epoch, Ordering::Relaxed);
}
