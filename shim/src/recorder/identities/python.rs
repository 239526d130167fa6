//! CPython's own frames: for a call whose native caller is inside a CPython
//! interpreter (3.11 and later), the calling thread's Python frames —
//! function, file, line — read from the thread's own frame stack.
//!
//! Only the calling thread changes its frame stack, so it can be read
//! without the GIL (which is often released around a blocking lock call).
//! The interpreter is found once, by `dlsym` of `Py_Version` (exported
//! since 3.11) and `PyGILState_GetThisThreadState` (the calling thread's
//! state, answered without the GIL). The structures' layout comes from the
//! interpreter's `_Py_DebugOffsets` (the start of `_PyRuntime`, 3.13 and
//! later), else from the tables below, checked against the headers of
//! CPython 3.11.7 and 3.12.1 (Debian's 3.11.2 alike).
//!
//! Reads go through `process_vm_readv` (`sys::read_own_memory`), where a
//! wrong pointer fails to read instead of faulting — all of them when a
//! site is first recorded (names, files, location tables). The key made
//! on every call ([`frames_key`]) reads the calling thread's own state and
//! frames directly, once its thread state was checked that way (a system
//! call per frame made a lock-heavy Python program 30 times slower). A
//! thread state is trusted only if its `thread_id` is the calling
//! thread's; walks are capped. Nothing here allocates or takes a lock.

use crate::recorder::tables::lanes::Lane;
use crate::sys::read_own_memory;
use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use locksuit_format::*;

/// Where the fields read lie, in bytes from the start of their struct.
#[derive(Clone, Copy)]
struct Layout {
    /// 3.11, 3.12: `PyThreadState.cframe` and `_PyCFrame.current_frame`;
    /// `None` when the thread state holds the frame itself (3.13).
    ts_cframe: Option<(u32, u32)>,
    ts_frame: u32,
    ts_thread_id: u32,
    fr_previous: u32,
    fr_code: u32,
    fr_instr: u32,
    fr_owner: u32,
    /// The owner value of the C stack's shim frames (3.12 and later).
    owner_cstack: Option<u8>,
    co_filename: u32,
    co_qualname: u32,
    co_firstlineno: u32,
    co_linetable: u32,
    co_code: u32,
    bytes_sval: u32,
    uni_state: u32,
    uni_length: u32,
    uni_ascii_size: u32,
    /// `PyCompactUnicodeObject.utf8_length` and `.utf8`.
    uni_utf8: (u32, u32),
}

/// CPython 3.11 (`Include/cpython/pystate.h`, `Include/internal/pycore_frame.h`,
/// `Include/cpython/code.h`, `Include/cpython/unicodeobject.h`).
const V3_11: Layout = Layout {
    ts_cframe: Some((56, 8)),
    ts_frame: 0,
    ts_thread_id: 152,
    fr_previous: 48,
    fr_code: 32,
    fr_instr: 56,
    fr_owner: 69,
    owner_cstack: None,
    co_filename: 112,
    co_qualname: 128,
    co_firstlineno: 72,
    co_linetable: 136,
    co_code: 184,
    bytes_sval: 32,
    uni_state: 32,
    uni_length: 16,
    uni_ascii_size: 48,
    uni_utf8: (48, 56),
};

/// CPython 3.12.
const V3_12: Layout = Layout {
    ts_cframe: Some((56, 0)),
    ts_frame: 0,
    ts_thread_id: 136,
    fr_previous: 8,
    fr_code: 0,
    fr_instr: 56,
    fr_owner: 70,
    owner_cstack: Some(3),
    co_filename: 112,
    co_qualname: 128,
    co_firstlineno: 68,
    co_linetable: 136,
    co_code: 192,
    bytes_sval: 32,
    uni_state: 32,
    uni_length: 16,
    uni_ascii_size: 40,
    uni_utf8: (40, 48),
};

/// CPython 3.13, when its debug offsets cannot be read.
const V3_13: Layout = Layout {
    ts_cframe: None,
    ts_frame: 72,
    ts_thread_id: 152,
    fr_previous: 8,
    fr_code: 0,
    fr_instr: 56,
    fr_owner: 70,
    owner_cstack: Some(3),
    co_filename: 112,
    co_qualname: 128,
    co_firstlineno: 68,
    co_linetable: 136,
    co_code: 200,
    ..V3_12
};

/// Frames hashed into a call's key: enough for `queue.Queue.get` →
/// `Condition.wait` → the waiter's `acquire` to keep the program's line.
const KEY_FRAMES: usize = 4;
/// Frames walked at most (shim frames included).
const WALK_CAP: usize = 256;

const UNKNOWN: u8 = 0;
const BUSY: u8 = 1;
const ABSENT: u8 = 2;
const PRESENT: u8 = 3;

static STATE: AtomicU8 = AtomicU8::new(UNKNOWN);
/// The interpreter's module's load bias (see `modules::locate`).
static BIAS: AtomicU64 = AtomicU64::new(0);
static GET_TSTATE: AtomicUsize = AtomicUsize::new(0);
/// The interpreter's minor version (3.x), once found.
static MINOR: AtomicU8 = AtomicU8::new(0);

struct LayoutCell(UnsafeCell<Layout>);
// SAFETY: written once, by the thread that moved STATE from UNKNOWN to
// BUSY, before it publishes PRESENT (release); read only after PRESENT is
// seen (acquire).
unsafe impl Sync for LayoutCell {}
static LAYOUT: LayoutCell = LayoutCell(UnsafeCell::new(V3_12));

type GetTstate = unsafe extern "C" fn() -> usize;

/// Whether the code `ret` returns into is the CPython interpreter's
/// (looked up once per return address by the caller, see `sites.rs`).
pub fn is_interpreter(ret: u64) -> bool {
    if !found() {
        return false;
    }
    crate::recorder::identities::modules::locate(ret)
        .is_some_and(|(bias, _)| bias == BIAS.load(Ordering::Relaxed))
}

fn found() -> bool {
    match STATE.load(Ordering::Acquire) {
        PRESENT => true,
        UNKNOWN => {
            if STATE
                .compare_exchange(UNKNOWN, BUSY, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
            {
                return STATE.load(Ordering::Acquire) == PRESENT;
            }
            let now = if find() { PRESENT } else { ABSENT };
            STATE.store(now, Ordering::Release);
            now == PRESENT
        }
        _ => false,
    }
}

/// Looks the interpreter up (in a fork child it stays where it was).
fn find() -> bool {
    // SAFETY: dlsym with RTLD_DEFAULT and NUL-terminated names.
    let (version, get, runtime) = unsafe {
        (
            libc::dlsym(libc::RTLD_DEFAULT, c"Py_Version".as_ptr()),
            libc::dlsym(
                libc::RTLD_DEFAULT,
                c"PyGILState_GetThisThreadState".as_ptr(),
            ),
            libc::dlsym(libc::RTLD_DEFAULT, c"_PyRuntime".as_ptr()),
        )
    };
    if version.is_null() || get.is_null() {
        return false;
    }
    let Some(hex) = read_u64(version as u64).map(|v| v as u32) else {
        return false;
    };
    let (major, minor) = (hex >> 24, (hex >> 16) & 0xff);
    let layout = match (major, minor) {
        (3, 11) => V3_11,
        (3, 12) => V3_12,
        // Later versions move the debug offsets' fields: not read yet.
        (3, 13) => debug_offsets(runtime as u64, hex).unwrap_or(V3_13),
        _ => return false,
    };
    let Some((bias, _)) = crate::recorder::identities::modules::locate(version as u64) else {
        return false;
    };
    // SAFETY: see `LayoutCell`: this thread holds BUSY.
    unsafe { *LAYOUT.0.get() = layout };
    BIAS.store(bias, Ordering::Relaxed);
    MINOR.store(minor as u8, Ordering::Relaxed);
    GET_TSTATE.store(get as usize, Ordering::Relaxed);
    true
}

/// The layout from `_Py_DebugOffsets` at the start of `_PyRuntime`
/// (`Include/internal/pycore_runtime.h`, 3.13): its cookie, the version it
/// was built for, then each struct's size and fields' offsets.
fn debug_offsets(runtime: u64, hex: u32) -> Option<Layout> {
    if runtime == 0 {
        return None;
    }
    let mut head = [0u8; 576];
    if !read_own_memory(runtime, &mut head) || &head[..8] != b"xdebugpy" {
        return None;
    }
    let at = |o: usize| u64::from_le_bytes(head[o..o + 8].try_into().unwrap_or([0; 8]));
    if at(8) as u32 != hex {
        return None;
    }
    let field = |o: usize| u32::try_from(at(o)).ok().filter(|&v| v < 4096);
    Some(Layout {
        ts_cframe: None,
        ts_frame: field(184)?,
        ts_thread_id: field(192)?,
        fr_previous: field(232)?,
        fr_code: field(240)?,
        fr_instr: field(248)?,
        fr_owner: field(264)?,
        co_filename: field(280)?,
        co_qualname: field(296)?,
        co_linetable: field(304)?,
        co_firstlineno: field(312)?,
        co_code: field(344)?,
        bytes_sval: field(528)?,
        uni_state: field(544)?,
        uni_length: field(552)?,
        uni_ascii_size: field(560)?,
        ..V3_13
    })
}

/// Whether the interpreter found makes its locks of POSIX semaphores
/// (`Python/thread_pthread.h` with `USE_SEMAPHORES`): seen so in 3.11 to
/// 3.13 (3.13's `threading.Lock` is still one; its parking lot's
/// semaphores, one per wait on the waiting thread's stack, are destroyed
/// when the wait ends, which takes them off the held stack). Later
/// versions are not assumed to be.
pub fn locks_are_semaphores() -> bool {
    STATE.load(Ordering::Acquire) == PRESENT && MINOR.load(Ordering::Relaxed) <= 13
}

fn layout() -> Option<&'static Layout> {
    // SAFETY: see `LayoutCell`: PRESENT was published after the write.
    (STATE.load(Ordering::Acquire) == PRESENT).then(|| unsafe { &*LAYOUT.0.get() })
}

fn read_u64(addr: u64) -> Option<u64> {
    let mut b = [0u8; 8];
    read_own_memory(addr, &mut b).then(|| u64::from_le_bytes(b))
}

fn word(buf: &[u8], at: u32) -> u64 {
    let at = at as usize;
    buf.get(at..at + 8)
        .map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
}

/// The interpreter's thread state of the calling thread (0: none), as
/// `PyGILState_GetThisThreadState` says (not yet checked).
fn this_thread_state() -> u64 {
    let get = GET_TSTATE.load(Ordering::Relaxed);
    if get == 0 {
        return 0;
    }
    // SAFETY: the address of `PyGILState_GetThisThreadState`, which takes
    // nothing, returns a pointer (or NULL) and takes no lock.
    unsafe { core::mem::transmute::<usize, GetTstate>(get)() as u64 }
}

/// The calling thread's innermost Python frame (0: none), read through
/// `process_vm_readv`, checking that the interpreter's thread state is this
/// thread's.
fn top_frame(l: &Layout) -> u64 {
    top_frame_checked(l, this_thread_state()).unwrap_or(0)
}

/// [`top_frame`] from thread state `tstate`: `None` if it is not this
/// thread's (or none).
fn top_frame_checked(l: &Layout, tstate: u64) -> Option<u64> {
    if tstate == 0 {
        return None;
    }
    let mut ts = [0u8; 256];
    let need = (l
        .ts_thread_id
        .max(l.ts_frame)
        .max(l.ts_cframe.map_or(0, |c| c.0))
        + 8) as usize;
    if need > ts.len() || !read_own_memory(tstate, &mut ts[..need]) {
        return None;
    }
    // SAFETY: pthread_self reads the thread pointer; it cannot fail.
    if word(&ts, l.ts_thread_id) != unsafe { libc::pthread_self() } as u64 {
        return None; // not this thread's state, or not a thread state at all
    }
    Some(match l.ts_cframe {
        Some((cframe, current)) => match word(&ts, cframe) {
            0 => 0,
            cf => read_u64(cf + u64::from(current)).unwrap_or(0),
        },
        None => word(&ts, l.ts_frame),
    })
}

/// What a frame says of itself: its previous frame, code object, the
/// address of its instruction and whether it is a C stack's shim frame.
struct FrameHead {
    previous: u64,
    code: u64,
    instr: u64,
    shim: bool,
}

fn frame_head(l: &Layout, frame: u64) -> Option<FrameHead> {
    let mut b = [0u8; 80];
    let need = (l.fr_previous.max(l.fr_code).max(l.fr_instr) + 8).max(l.fr_owner + 1) as usize;
    if need > b.len() || !read_own_memory(frame, &mut b[..need]) {
        return None;
    }
    let owner = b[l.fr_owner as usize];
    Some(FrameHead {
        previous: word(&b, l.fr_previous),
        // 3.13 tags `f_executable` in its low bits in later releases.
        code: word(&b, l.fr_code) & !7,
        instr: word(&b, l.fr_instr),
        shim: l.owner_cstack == Some(owner),
    })
}

/// A hash of the calling thread's innermost Python frames (code object and
/// instruction of each), or 0 without any: what tells apart the `.py`
/// lines that reach the same native call. Made on every call from the
/// interpreter, so it reads memory directly rather than through a system
/// call — but only what the interpreter keeps for this very thread: its
/// thread state, once `trusted` (checked through `process_vm_readv` to be
/// this thread's, the first time the thread shows it; cached by the
/// caller), and the frames that state chains, which only this thread
/// changes and which stay in place while it is inside our hook.
pub fn frames_key(trusted: &mut u64) -> u64 {
    let Some(l) = layout() else { return 0 };
    let tstate = this_thread_state();
    if tstate == 0 {
        return 0;
    }
    if tstate != *trusted {
        if top_frame_checked(l, tstate).is_none() {
            return 0;
        }
        *trusted = tstate;
    }
    // SAFETY (each read below): fields of this thread's own live thread
    // state (checked above) and of the frames it chains, at the offsets of
    // this interpreter's version; see the function's comment.
    let read = |addr: u64| unsafe { core::ptr::read_volatile(addr as *const u64) };
    let mut frame = match l.ts_cframe {
        Some((cframe, current)) => match read(tstate + u64::from(cframe)) {
            0 => 0,
            cf if plausible(cf) => read(cf + u64::from(current)),
            _ => 0,
        },
        None => read(tstate + u64::from(l.ts_frame)),
    };
    let (mut key, mut used) = (0u64, 0usize);
    for _ in 0..WALK_CAP {
        if !plausible(frame) || used == KEY_FRAMES {
            break;
        }
        // SAFETY: as above: a frame of this thread's chain.
        let owner =
            unsafe { core::ptr::read_volatile((frame + u64::from(l.fr_owner)) as *const u8) };
        if l.owner_cstack != Some(owner) {
            let code = read(frame + u64::from(l.fr_code)) & !7;
            let instr = read(frame + u64::from(l.fr_instr));
            let word = code ^ instr.wrapping_sub(code).rotate_left(40);
            key ^= word
                .wrapping_mul(0x9e37_79b9_7f4a_7c15)
                .rotate_left(13 * used as u32 + 1);
            used += 1;
        }
        frame = read(frame + u64::from(l.fr_previous));
    }
    key
}

/// A pointer that may be a frame's: in user space, above the first page,
/// aligned.
fn plausible(p: u64) -> bool {
    (4096..1 << 47).contains(&p) && p.is_multiple_of(8)
}

/// Records the calling thread's Python frames for site `site_id`.
pub fn record_frames(lane: &mut Lane, site_id: u32) {
    let Some(l) = layout() else { return };
    let mut body = [0u8; 8192];
    let (mut len, mut count) = (0usize, 0usize);
    let mut frame = top_frame(l);
    for _ in 0..WALK_CAP {
        if frame == 0 || count == MAX_PY_FRAMES {
            break;
        }
        let Some(head) = frame_head(l, frame) else {
            break;
        };
        frame = head.previous;
        if head.shim || head.code == 0 {
            continue;
        }
        let Some(n) = write_frame(l, &head, &mut body[len..]) else {
            break; // no room left
        };
        len += n;
        count += 1;
    }
    if count == 0 {
        return;
    }
    let record = PyFramesRecord {
        hdr: RecordHeader {
            kind: RecordKind::PyFrames as u16,
            size: align_record(core::mem::size_of::<PyFramesRecord>() + len) as u16,
            aux: count as u32,
        },
        site_id,
        len: len as u32,
    };
    let _ = lane.append(&record, &body[..len]);
}

/// One frame's head and names into `out`; the bytes written, or `None`
/// when they do not fit.
fn write_frame(l: &Layout, head: &FrameHead, out: &mut [u8]) -> Option<usize> {
    let mut code = [0u8; 256];
    let need = (l
        .co_filename
        .max(l.co_qualname)
        .max(l.co_linetable)
        .max(l.co_firstlineno)
        + 8) as usize;
    if need > code.len() || !read_own_memory(head.code, &mut code[..need]) {
        return None;
    }
    let first_line = word(&code, l.co_firstlineno) as u32;
    let offset = head.instr.wrapping_sub(head.code + u64::from(l.co_code));
    let line = if offset < 1 << 30 {
        line_of(l, word(&code, l.co_linetable), first_line, offset)
    } else {
        0 // an incomplete frame (3.11): its instruction is not yet set
    };
    let h = core::mem::size_of::<PyFrameHead>();
    if out.len() < h + 64 {
        return None;
    }
    let rest = &mut out[h..];
    let f = text(l, word(&code, l.co_qualname), rest, MAX_PY_FUNCTION, false);
    let n = text(
        l,
        word(&code, l.co_filename),
        rest.get_mut(f..)?,
        MAX_PY_FILE,
        true,
    );
    let frame = PyFrameHead {
        line,
        function_len: f as u16,
        file_len: n as u16,
    };
    out[..4].copy_from_slice(&frame.line.to_le_bytes());
    out[4..6].copy_from_slice(&frame.function_len.to_le_bytes());
    out[6..8].copy_from_slice(&frame.file_len.to_le_bytes());
    Some(h + f + n)
}

/// A `str` object's text as UTF-8 into `out` (at most `max` bytes; the end
/// when `keep_end`): compact ASCII strings, or others whose UTF-8 form the
/// interpreter keeps. The bytes written (0 for anything else).
fn text(l: &Layout, obj: u64, out: &mut [u8], max: usize, keep_end: bool) -> usize {
    if obj == 0 {
        return 0;
    }
    let mut head = [0u8; 96];
    let need = (l.uni_ascii_size.max(l.uni_utf8.1 + 8)) as usize;
    if need > head.len() || !read_own_memory(obj, &mut head[..need]) {
        return 0;
    }
    let state = head[l.uni_state as usize];
    // `state`'s bit fields, 3.11 to 3.13: interned (2 bits), kind (3),
    // compact, ascii: `compact` is bit 5, `ascii` bit 6.
    let (compact, ascii) = (state & 1 << 5 != 0, state & 1 << 6 != 0);
    let (data, len) = match (compact, ascii) {
        (true, true) => (
            obj + u64::from(l.uni_ascii_size),
            word(&head, l.uni_length) as usize,
        ),
        (true, false) => (
            word(&head, l.uni_utf8.1),
            word(&head, l.uni_utf8.0) as usize,
        ),
        _ => return 0,
    };
    if data == 0 || len > 1 << 20 {
        return 0;
    }
    let take = len.min(max).min(out.len());
    let from = if keep_end {
        data + (len - take) as u64
    } else {
        data
    };
    if take == 0 || !read_own_memory(from, &mut out[..take]) {
        return 0;
    }
    // Cut at a character boundary.
    let mut end = take;
    while end > 0 && core::str::from_utf8(&out[..end]).is_err() {
        end -= 1;
    }
    let mut start = 0;
    while start < end && core::str::from_utf8(&out[start..end]).is_err() {
        start += 1;
    }
    if start > 0 {
        out.copy_within(start..end, 0);
    }
    end - start
}

/// The line of the instruction `offset` bytes into the code, from the
/// code object's location table (PEP 626's format, 3.11 and later: one
/// entry per run of code units, its first byte `1ccccnnn`: code `c`, `n + 1`
/// units). 0 when the table says none.
fn line_of(l: &Layout, table: u64, first_line: u32, offset: u64) -> u32 {
    let mut head = [0u8; 48];
    if table == 0 || !read_own_memory(table, &mut head[..l.bytes_sval as usize]) {
        return 0;
    }
    let size = word(&head, 16) as usize; // `ob_size`
    let mut bytes = [0u8; 4096];
    let size = size.min(bytes.len());
    if !read_own_memory(table + u64::from(l.bytes_sval), &mut bytes[..size]) {
        return 0;
    }
    let bytes = &bytes[..size];
    let (mut at, mut start, mut line) = (0usize, 0u64, i64::from(first_line));
    while at < bytes.len() {
        let first = bytes[at];
        let code = (first >> 3) & 15;
        let end = start + 2 * (u64::from(first & 7) + 1);
        let delta = match code {
            13 | 14 => signed_varint(&bytes[at + 1..]),
            11 => 1,
            12 => 2,
            _ => 0,
        };
        line += delta;
        if offset < end {
            return if code == 15 {
                0
            } else {
                u32::try_from(line).unwrap_or(0)
            };
        }
        start = end;
        at += 1;
        while at < bytes.len() && bytes[at] & 0x80 == 0 {
            at += 1;
        }
    }
    0
}

fn signed_varint(bytes: &[u8]) -> i64 {
    let (mut value, mut shift) = (0u64, 0u32);
    for &b in bytes.iter().take(10) {
        value |= u64::from(b & 63) << shift;
        shift += 6;
        if b & 64 == 0 {
            break;
        }
    }
    if value & 1 != 0 {
        -((value >> 1) as i64)
    } else {
        (value >> 1) as i64
    }
}
