//! A site's Python frames: when a call from the interpreter makes a new
//! site, the calling thread's Python stack (function, file and line of
//! each frame) is recorded with it.
//!
//! The frames of a thread state checked to be the thread's own are read
//! directly, as the key made on every call reads them (`python.rs`); what
//! they point to (code objects, names, location tables) through
//! `process_vm_readv`, where a wrong pointer fails to read instead of
//! faulting. The code objects' heads of a whole stack are read in one
//! call, and a frame whose text the lane cached from the same code object
//! (`python_frame_cache.rs`) is not read further: CPython's start-up made
//! some 700 sites, each under the same import machinery frames, and read
//! them in 220,000 reads (each with a `getpid`; 0.31 s, where the
//! interpreter starts in 0.04 s).

use super::python::{
    frame_head_trusted, layout, plausible, top_frame_trusted, trusted_state, word, FrameHead,
    Layout, WALK_CAP,
};
use crate::recorder::tables::lanes::Lane;
use crate::recorder::tables::python_frame_cache::{PythonFrameCache, FRAME_TEXT};
use crate::sys::read_own_memory;
use locksuit_format::*;

/// The most bytes of a code object's head read (the fields a frame's text
/// is made of end at 144 in 3.11 to 3.13).
const CODE_HEAD: usize = 192;

/// Records the calling thread's Python frames for site `site_id`.
pub fn record_frames(lane: &mut Lane, site_id: u32) {
    let Some(l) = layout() else { return };
    let mut heads = [const { None::<FrameHead> }; MAX_PY_FRAMES];
    let found = stack(l, &mut lane.py_tstate, &mut heads);
    let need = (l
        .co_filename
        .max(l.co_qualname)
        .max(l.co_linetable)
        .max(l.co_firstlineno)
        + 8) as usize;
    if need > CODE_HEAD {
        return;
    }
    let mut codes = [0u8; MAX_PY_FRAMES * CODE_HEAD];
    let addrs =
        core::array::from_fn::<u64, MAX_PY_FRAMES, _>(|i| heads[i].as_ref().map_or(0, |h| h.code));
    // The heads read before the first that could not be (the kernel stops
    // there): the frames after it are left out, as a failed read of each
    // left them out.
    let read = crate::sys::read_own_memory_each(&addrs[..found], need, &mut codes);
    let mut body = [0u8; 8192];
    let (mut len, mut count) = (0usize, 0usize);
    for (i, head) in heads[..read].iter().flatten().enumerate() {
        let code = &codes[i * need..(i + 1) * need];
        let Some(n) = write_frame(l, head, code, &mut body[len..], &mut lane.py_frames) else {
            break; // no room left
        };
        len += n;
        count += 1;
    }
    if count == 0 {
        return;
    }
    let record = PyFramesRecord {
        hdr: RecordHeader::with_body::<PyFramesRecord>(RecordKind::PyFrames, len, count as u32),
        site_id,
        len: len as u32,
    };
    let _ = lane.append(&record, &body[..len]);
}

/// The calling thread's Python frames with code, innermost first, into
/// `heads`; how many. Only a thread state checked to be the thread's own
/// is walked (directly, see the module's comment): one that is not, or
/// none, has no frames of the thread's.
fn stack(l: &Layout, trusted: &mut u64, heads: &mut [Option<FrameHead>; MAX_PY_FRAMES]) -> usize {
    let Some(tstate) = trusted_state(l, trusted) else {
        return 0;
    };
    let mut frame = top_frame_trusted(l, tstate);
    let mut count = 0;
    for _ in 0..WALK_CAP {
        if !plausible(frame) || count == MAX_PY_FRAMES {
            break;
        }
        let head = frame_head_trusted(l, frame);
        frame = head.previous;
        if head.shim || head.code == 0 {
            continue;
        }
        heads[count] = Some(head);
        count += 1;
    }
    count
}

/// One frame's head and names into `out`, from its code object's head
/// `code`; the bytes written, or `None` when they do not fit.
fn write_frame(
    l: &Layout,
    head: &FrameHead,
    code: &[u8],
    out: &mut [u8],
    cache: &mut PythonFrameCache,
) -> Option<usize> {
    let first_line = word(code, l.co_firstlineno) as u32;
    let offset = head.instr.wrapping_sub(head.code + u64::from(l.co_code));
    let check = [
        l.co_qualname,
        l.co_filename,
        l.co_linetable,
        l.co_firstlineno,
    ]
    .map(|at| word(code, at));
    if let Some(text) = cache.find(head.code, offset, &check) {
        // Written only where a frame read afresh would be, the same text.
        if out.len() >= core::mem::size_of::<PyFrameHead>() + 64 && text.len() <= out.len() {
            out[..text.len()].copy_from_slice(text);
            return Some(text.len());
        }
    }
    let line = if offset < 1 << 30 {
        line_of(l, word(code, l.co_linetable), first_line, offset)
    } else {
        0 // an incomplete frame (3.11): its instruction is not yet set
    };
    let h = core::mem::size_of::<PyFrameHead>();
    if out.len() < h + 64 {
        return None;
    }
    let rest = &mut out[h..];
    let f = text(l, word(code, l.co_qualname), rest, MAX_PY_FUNCTION, false);
    let n = text(
        l,
        word(code, l.co_filename),
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
    // Not cached: names cut by the room left (they would be cut for later
    // sites too), and anything that could not be read (a name with no
    // UTF-8 form yet, a location table that failed to read: a later read
    // may find them).
    let (qualname, filename) = (word(code, l.co_qualname), word(code, l.co_filename));
    let whole = (f > 0 || qualname == 0) && (n > 0 || filename == 0) && line != 0;
    if out.len() >= FRAME_TEXT && whole {
        cache.remember(head.code, offset, &check, &out[..h + f + n]);
    }
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
