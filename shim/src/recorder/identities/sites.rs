//! Call sites: where the program called into the lock API, keyed by the
//! return address into the caller *and* that caller's own return address.
//! The second level tells apart the lines that reach the lock API through
//! one shared wrapper (an out-of-line `std::mutex::lock`, a project's own
//! `lock()` helper); the analyzer then groups sites by the first line in the
//! program's own code.
//!
//! The caller's return address is read from the stack at an offset learned
//! once per return address, from the unwinder (and checked against it); the
//! full call chain is captured once per site and stored in a [`SiteRecord`].
//!
//! Capture happens only in hooks that do not hold a lock the unwinder could
//! need (never in an unlock hook, never after acquiring): libgcc's unwinder
//! takes a pthread mutex of its own.

use crate::recorder::base::caller::{Caller, Offsets, Seen, CONTEXT_DEPTH};
use crate::recorder::identities::{modules, python, python_frames, python_holds};
use crate::recorder::tables::lanes::{timed_slow_work, Lane};
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use locksuit_format::*;

/// Largest accepted distance from the entry stack pointer to a slot.
const MAX_OFFSET: u64 = 0xffff;

const SITE_SLOTS: usize = 1 << 16;
const OFFSET_SLOTS: usize = 1 << 14;
const PROBES: usize = 32;

struct SiteSlot {
    /// `key(ret, context)`, claimed first; 0 = free.
    key: AtomicU64,
    ret: AtomicU64,
    context: AtomicU64,
    /// 0 while the creating thread is still capturing the chain.
    id: AtomicU32,
}

struct OffsetSlot {
    ret: AtomicU64,
    /// Packed offsets; 0 while being learned (published after `learned`).
    offsets: AtomicU64,
    learned: [AtomicU64; CONTEXT_DEPTH - 1],
    /// Whether `ret` is in the CPython interpreter (see `python.rs`):
    /// written before `offsets` is published.
    python: AtomicBool,
}

static SITES: [SiteSlot; SITE_SLOTS] = [const {
    SiteSlot {
        key: AtomicU64::new(0),
        ret: AtomicU64::new(0),
        context: AtomicU64::new(0),
        id: AtomicU32::new(0),
    }
}; SITE_SLOTS];
static OFFSETS: [OffsetSlot; OFFSET_SLOTS] = [const {
    OffsetSlot {
        ret: AtomicU64::new(0),
        offsets: AtomicU64::new(0),
        learned: [const { AtomicU64::new(0) }; CONTEXT_DEPTH - 1],
        python: AtomicBool::new(false),
    }
}; OFFSET_SLOTS];
static NEXT_SITE: AtomicU32 = AtomicU32::new(1);

/// After a `dlclose` a return address may belong to another library: sites
/// and offsets are learned afresh (sites with the new module epoch). Ids
/// keep counting up, so old and new sites stay distinct in the trace.
pub fn forget_all() {
    for slot in SITES.iter() {
        slot.key.store(0, Ordering::Relaxed);
        slot.id.store(0, Ordering::Relaxed);
    }
    for slot in OFFSETS.iter() {
        slot.ret.store(0, Ordering::Relaxed);
        slot.offsets.store(0, Ordering::Relaxed);
    }
}

/// A library was unloaded (`dlclose`): a new module-map epoch, in which
/// modules, sites and offsets are learned afresh.
pub fn library_unloaded() {
    crate::recorder::base::caller::next_epoch();
    modules::map_changed();
    forget_all();
}

/// In a fork child: sites are recorded again in the child's own trace.
/// The tables are 3 MiB: given back, not written (see `mapped::zero`).
pub fn reset_after_fork() {
    // SAFETY: tables of atomics, whose all-zero bits are their empty
    // state; in a fork child before it records, nothing else uses them.
    unsafe {
        crate::recorder::base::mapped::zero(
            SITES.as_ptr() as *mut u8,
            core::mem::size_of_val(&SITES),
        );
        crate::recorder::base::mapped::zero(
            OFFSETS.as_ptr() as *mut u8,
            core::mem::size_of_val(&OFFSETS),
        );
    }
    NEXT_SITE.store(1, Ordering::Relaxed);
}

fn key(ret: u64, context: u64) -> u64 {
    (ret ^ context.rotate_left(32)) | 1 // never 0 (0 marks a free slot)
}

fn hash(k: u64, bits: u32) -> usize {
    (k.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - bits)) as usize
}

/// The stack offsets of the call's context for calls returning to
/// `caller.ret`, learned by unwinding the first time, and whether `ret` is
/// in the CPython interpreter (decided then too).
pub fn context_offsets(caller: Caller) -> (Offsets, bool) {
    let home = hash(caller.ret, OFFSET_SLOTS.trailing_zeros());
    let learn = || (learn_offsets(caller), python::is_interpreter(caller.ret));
    for i in 0..PROBES {
        let slot = &OFFSETS[(home + i) & (OFFSET_SLOTS - 1)];
        let cur = slot.ret.load(Ordering::Acquire);
        if cur == caller.ret {
            return match slot.offsets.load(Ordering::Acquire) {
                0 => learn(), // another thread is learning them
                packed => (
                    Offsets {
                        packed,
                        learned: core::array::from_fn(|i| slot.learned[i].load(Ordering::Relaxed)),
                    },
                    slot.python.load(Ordering::Relaxed),
                ),
            };
        }
        if cur == 0 {
            match slot
                .ret
                .compare_exchange(0, caller.ret, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => {
                    let (offsets, python) = learn();
                    for (to, &from) in slot.learned.iter().zip(&offsets.learned) {
                        to.store(from, Ordering::Relaxed);
                    }
                    slot.python.store(python, Ordering::Relaxed);
                    slot.offsets.store(offsets.packed, Ordering::Release);
                    return (offsets, python);
                }
                Err(now) if now == caller.ret => return learn(),
                Err(_) => continue,
            }
        }
    }
    learn()
}

/// Whether `ret` was found to be in the CPython interpreter when its
/// offsets were learned.
fn in_interpreter(ret: u64) -> bool {
    let home = hash(ret, OFFSET_SLOTS.trailing_zeros());
    for i in 0..PROBES {
        let slot = &OFFSETS[(home + i) & (OFFSET_SLOTS - 1)];
        match slot.ret.load(Ordering::Acquire) {
            0 => return false,
            cur if cur == ret => {
                return slot.offsets.load(Ordering::Acquire) != 0
                    && slot.python.load(Ordering::Relaxed)
            }
            _ => {}
        }
    }
    false
}

fn learn_offsets(caller: Caller) -> Offsets {
    let mut frames = [0u64; MAX_CHAIN_DEPTH];
    crate::recorder::tables::thread_state::calling_out(|| capture_chain(caller, &mut frames))
        .map_or(Offsets::NONE, |(_, o)| o)
}

/// The site id for a call from `caller` in `context`, recording the site
/// (with its call chain) the first time. 0 means "unknown site" (table full
/// or no room in the trace).
/// `python_lines`: as the call's context was made (see [`PythonLines`]): a
/// call keyed by its `.py` line gets the Python frames of its own caller
/// with its site; a call from the interpreter that was not (the GIL's) gets
/// none, as any caller's frames would name it after a line it is not at.
pub fn site_id(lane: &mut Lane, caller: Caller, context: u64, python_lines: PythonLines) -> u32 {
    site_id_with(
        lane,
        caller,
        context,
        (None, python_lines != PythonLines::No),
    )
}

/// The site of a call chain the kernel gave (a page fault's, innermost
/// first), recorded as it is the first time: no unwinding.
pub fn site_of_frames(lane: &mut Lane, frames: &[u64]) -> u32 {
    let Some(&ret) = frames.first() else {
        return 0;
    };
    let context = frames
        .iter()
        .skip(1)
        .take(CONTEXT_DEPTH)
        .enumerate()
        .fold(0u64, |c, (level, &f)| {
            c ^ f.rotate_left(16 * level as u32 + 1)
        });
    site_id_with(lane, Caller { ret, sp: 0 }, context, (Some(frames), false))
}

fn site_id_with(
    lane: &mut Lane,
    caller: Caller,
    context: u64,
    (given, python): (Option<&[u64]>, bool),
) -> u32 {
    let k = key(caller.ret, context);
    let home = hash(k, SITE_SLOTS.trailing_zeros());
    for i in 0..PROBES {
        let slot = &SITES[(home + i) & (SITE_SLOTS - 1)];
        let cur = slot.key.load(Ordering::Acquire);
        if cur == k {
            let id = slot.id.load(Ordering::Acquire);
            if id != 0
                && slot.ret.load(Ordering::Relaxed) == caller.ret
                && slot.context.load(Ordering::Relaxed) == context
            {
                return id;
            }
            if id == 0 {
                // Being created by another thread right now: record our own
                // copy rather than wait; the analyzer merges them.
                return create_on_own_stack(lane, caller, context, None, (given, python));
            }
            continue; // a key collision: keep probing
        }
        if cur == 0 {
            match slot
                .key
                .compare_exchange(0, k, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => {
                    return create_on_own_stack(lane, caller, context, Some(slot), (given, python))
                }
                Err(now) if now == k => {
                    return create_on_own_stack(lane, caller, context, None, (given, python))
                }
                Err(_) => continue,
            }
        }
    }
    0
}

/// [`create`], on the lane's own stack: unwinding, the chain's modules and
/// symbols are deep work (see `own_stack.rs`).
#[inline(never)]
fn create_on_own_stack(
    lane: &mut Lane,
    caller: Caller,
    context: u64,
    slot: Option<&SiteSlot>,
    chain: (Option<&[u64]>, bool),
) -> u32 {
    crate::recorder::tables::lanes::on_own_stack(lane, |lane| {
        create(lane, caller, context, slot, chain)
    })
}

/// Records a new site: its chain as `given`, else unwound from here, and
/// (`python`) the Python frames of its caller.
fn create(
    lane: &mut Lane,
    caller: Caller,
    context: u64,
    slot: Option<&SiteSlot>,
    (given, python): (Option<&[u64]>, bool),
) -> u32 {
    let id = NEXT_SITE.fetch_add(1, Ordering::Relaxed);
    let mut frames = [0u64; MAX_CHAIN_DEPTH];
    let depth = match given {
        Some(chain) => {
            let depth = chain.len().min(MAX_CHAIN_DEPTH);
            frames[..depth].copy_from_slice(&chain[..depth]);
            depth
        }
        None => crate::recorder::tables::thread_state::calling_out(|| {
            capture_chain(caller, &mut frames)
        })
        .map_or(0, |(d, _)| d),
    };
    let depth = if depth == 0 {
        // No unwind information: keep what we know for certain.
        frames[0] = caller.ret;
        1
    } else {
        // A policy's `depth`: the rest of the chain is left out.
        depth.min(crate::policy::depth())
    };
    modules::ensure_covered(lane, &frames[..depth]);
    let record = SiteRecord {
        hdr: RecordHeader {
            kind: RecordKind::Site as u16,
            size: align_record(site_record_size(depth)) as u16,
            aux: depth as u32,
        },
        id,
        module_epoch: crate::recorder::base::caller::epoch(),
    };
    let mut tail = [0u8; MAX_CHAIN_DEPTH * 8];
    for (i, f) in frames[..depth].iter().enumerate() {
        tail[i * 8..i * 8 + 8].copy_from_slice(&f.to_le_bytes());
    }
    let written = lane.append(&record, &tail[..depth * 8]).is_some();
    let id = if written { id } else { 0 };
    if written {
        crate::recorder::identities::interest::decide_site(id, &frames[..depth]);
    }
    if let Some(slot) = slot {
        if id != 0 {
            slot.ret.store(caller.ret, Ordering::Relaxed);
            slot.context.store(context, Ordering::Relaxed);
            slot.id.store(id, Ordering::Release);
        } else {
            // Could not record it; let a later call try again.
            slot.key.store(0, Ordering::Release);
        }
    }
    // The Python frames after the site is published: reading them takes
    // system calls, and meanwhile other threads would make copies of it.
    if written && python && in_interpreter(caller.ret) {
        python_frames::record_frames(lane, id);
    }
    id
}

/// The caller of the exported hook whose code starts at `hook`, and the
/// call's context, found by unwinding (for hooks whose arguments leave no
/// register for a trampoline to pass the caller in). The context hashes
/// the return addresses above the caller as [`Caller::context`] does, so
/// the callers of a shared helper (Rust's `futex_wait`) are told apart.
pub fn caller_of_hook(hook: u64) -> Option<(Caller, u64)> {
    caller_of_hook_through(hook, CONTEXT_DEPTH)
}

/// [`caller_of_hook`] with a context of `levels` return addresses above
/// the caller: a lock library's futex call sits several frames below the
/// program's line (abseil's `Mutex::Lock` waits seven frames down), and
/// every line that takes its locks would share a shorter context.
pub fn caller_of_hook_through(hook: u64, levels: usize) -> Option<(Caller, u64)> {
    let mut found: Option<usize> = None;
    let mut ret = 0u64;
    let mut context = 0u64;
    crate::recorder::tables::thread_state::calling_out(|| {
        // SAFETY: as in `capture_chain`.
        unsafe {
            backtrace::trace_unsynchronized(|frame| {
                let ip = frame.ip() as u64;
                match found {
                    None => {
                        if frame.symbol_address() as u64 == hook {
                            found = Some(0);
                        }
                        true
                    }
                    Some(0) => {
                        ret = ip;
                        found = Some(1);
                        ip != 0
                    }
                    Some(level) => {
                        context ^= ip.rotate_left(16 * (level as u32 - 1) + 1);
                        found = Some(level + 1);
                        ip != 0 && level < levels
                    }
                }
            });
        }
    });
    (ret != 0).then_some((Caller { ret, sp: 0 }, context))
}

/// Unwinds once, so that the unwinder's first-use setup (which makes
/// system calls) is done before the program confines itself.
pub fn warm_unwinder() {
    crate::recorder::tables::thread_state::calling_out(|| {
        // SAFETY: as in `capture_chain`.
        unsafe { backtrace::trace_unsynchronized(|frame| frame.ip() as usize != 0) };
    });
}

/// Unwinds the current stack into `frames`, starting at the frame that
/// returns to `caller.ret` (so the shim's own frames are left out). Returns
/// the depth and the offsets from `caller.sp` of the slots holding the next
/// return addresses (each checked against the unwinder), or `None` if
/// `caller.ret` was not found (no unwind information).
fn capture_chain(caller: Caller, frames: &mut [u64; MAX_CHAIN_DEPTH]) -> Option<(usize, Offsets)> {
    let mut depth = 0usize;
    let mut seen = 0usize;
    // cfas[i]: the CFA of frames[i]'s function.
    let mut cfas = [0u64; CONTEXT_DEPTH];
    // SAFETY: trace_unsynchronized must not run concurrently with itself on
    // the same thread in a way that breaks the unwinder; the hook guard makes
    // our calls non-reentrant per thread, and libgcc's unwinder is thread-safe.
    unsafe {
        backtrace::trace_unsynchronized(|frame| {
            seen += 1;
            let ip = frame.ip() as u64;
            if ip == 0 {
                return false; // the outermost frame
            }
            if depth == 0 && ip != caller.ret {
                // The shim's own frames sit below the caller's; give up if
                // the caller never shows up in a sane depth.
                return seen < 16;
            }
            if (1..=CONTEXT_DEPTH).contains(&depth) {
                // libgcc reports, with each frame, the CFA of the frame
                // below it.
                cfas[depth - 1] = frame.sp() as u64;
            }
            frames[depth] = ip;
            depth += 1;
            depth < MAX_CHAIN_DEPTH
        });
    }
    if depth == 0 {
        return None;
    }
    // A function's return address sits just below its frame's CFA (x86_64:
    // pushed by `call`; aarch64: the frame record's saved x30, by
    // convention). Trust a slot only if it holds what the unwinder found.
    let mut levels = [0xffffu16; CONTEXT_DEPTH];
    for (level, &cfa) in cfas.iter().enumerate() {
        let slot = cfa.wrapping_sub(8);
        let offset = slot.wrapping_sub(caller.sp);
        let checked = level + 1 < depth
            && cfa != 0
            && slot > caller.sp
            && offset < MAX_OFFSET
            // SAFETY: the slot lies between our entry stack pointer and a
            // caller's CFA, inside the live stack of this thread.
            && unsafe { core::ptr::read_volatile(slot as *const u64) } == frames[level + 1];
        if !checked {
            break;
        }
        levels[level] = offset as u16;
    }
    let learned = core::array::from_fn(|i| frames[i + 1]);
    Some((depth, Offsets::from_levels(&levels, learned)))
}

/// Whether a call from the CPython interpreter is told apart by its `.py`
/// line (CPython's own locks are semaphores: `threading.Lock` and its kin,
/// and in 3.13 also a waiting thread's parking semaphore). Other calls
/// from the interpreter (the GIL's mutex and condition, its internal
/// mutexes) keep the lane's and the hot cache's shortcuts: they gain
/// nothing from a `.py` line of their own.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum PythonLines {
    No,
    /// Keyed by its `.py` line (a semaphore's initialisation: the line
    /// that made a CPython lock), the thread's last lock call left to be
    /// judged by its next one.
    Keyed,
    /// Keyed, and the thread's last lock call judged now (its lock calls,
    /// and its blocking calls: recorded only when they blocked, and a sleep
    /// under a CPython lock is found under it, at its `.py` line).
    Judged,
}

/// The call's context (see [`Caller::context`]), learning and caching the
/// stack offsets it is read at on the first sight of the return address.
pub fn context_of(lane: &mut Lane, caller: Caller, python_lines: PythonLines) -> u64 {
    match lane.offsets_of(caller.ret) {
        Some(offsets) => caller.context(&offsets),
        None => seen_unremembered(lane, caller, python_lines).context,
    }
}

/// The call's context and what it was read from (see [`Caller::seen`]).
#[inline]
pub fn seen_of(lane: &mut Lane, caller: Caller, python_lines: PythonLines) -> Seen {
    match lane.offsets_of(caller.ret) {
        Some(offsets) => caller.seen(&offsets),
        None => seen_unremembered(lane, caller, python_lines),
    }
}

/// An epoch no call path is ever in: a call keyed by its `.py` line says
/// so in its [`Seen`], and is cached by that (`python_calls.rs`), never in
/// the hot cache.
pub const PYTHON_CALL: u32 = u32::MAX;

/// The call's context when the lane does not know its return address: the
/// offsets are learned (or found in the global table) and the lane
/// remembers them — unless the caller is the CPython interpreter, whose
/// calls from every `.py` line share one native path: their context also
/// hashes the thread's innermost Python frames (`python::frames_key`), and
/// the lane keeps their offsets apart, so that such a call never takes the
/// lane's or the hot cache's shortcuts and programs without an interpreter
/// never pay for the look.
#[cold]
#[inline(never)]
fn seen_unremembered(lane: &mut Lane, caller: Caller, python_lines: PythonLines) -> Seen {
    if crate::config::lean() && python_lines == PythonLines::No {
        // Lean mode keys a call by its line alone: one line, one counter,
        // whichever way it was reached (its mutex lookups compare no path).
        // Semaphores (CPython's locks) keep their `.py` lines.
        lane.remember_offsets(caller.ret, Offsets::NONE);
        return caller.seen_alone();
    }
    if let Some(offsets) = lane.python_offsets_of(caller.ret) {
        // Shallow work: no need for the lane's own stack.
        return python_seen(lane, caller, &offsets, python_lines);
    }
    timed_slow_work(lane, |lane| {
        let (offsets, python) = context_offsets(caller);
        if python && python_lines != PythonLines::No {
            lane.remember_python_offsets(caller.ret, offsets);
            python_seen(lane, caller, &offsets, python_lines)
        } else {
            lane.remember_offsets(caller.ret, offsets);
            caller.seen(&offsets)
        }
    })
}

/// The Python arm of a call's context: its `.py` frames hashed in. The
/// thread's previous call from the interpreter on a lock is judged now
/// (its hold of a CPython lock, see `python_holds.rs`).
fn python_seen(
    lane: &mut Lane,
    caller: Caller,
    offsets: &Offsets,
    python_lines: PythonLines,
) -> Seen {
    let mut seen = caller.seen(offsets);
    if python_lines != PythonLines::No {
        seen.context ^= python::frames_key(&mut lane.py_tstate);
        seen.epoch = PYTHON_CALL;
    }
    if python_lines == PythonLines::Judged {
        python_holds::settle(lane);
    }
    seen
}
