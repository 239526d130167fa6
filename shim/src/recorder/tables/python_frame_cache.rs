//! A lane's cache of Python frames as a site's frames record writes them
//! (line, function and file), by code object and instruction.
//!
//! Each new site of a call from the interpreter records the caller's whole
//! Python stack, and reading one frame's names and line through
//! `process_vm_readv` takes about six system calls. A program's sites
//! share most of their frames: CPython's start-up alone made some 700
//! sites, each under the same dozen import machinery frames. A frame found
//! here costs only its part of the one read of the stack's code objects'
//! heads, which also tells whether the code object at that address is
//! still the one the text was made from (a freed code object's address
//! may be reused): its names, location table and first line must be the
//! same. That is judged by the objects' addresses: code of the same
//! qualified name, file and first line whose code object and location
//! table both reuse the addresses of freed ones would be given the old
//! line.
//!
//! Mapped at the lane's first Python frame (about 100 KiB of address
//! space), direct-mapped, written over on a collision; only the lane's
//! thread uses it, on its own stack.

use locksuit_format::{PyFrameHead, MAX_PY_FILE, MAX_PY_FUNCTION};

/// Entries per lane (a power of two).
const ENTRIES: usize = 256;

/// The most bytes one frame's text takes: its head and its names.
pub const FRAME_TEXT: usize = core::mem::size_of::<PyFrameHead>() + MAX_PY_FUNCTION + MAX_PY_FILE;

/// A code object as its head read: the fields a frame's text was made of
/// (qualified name, file name, location table, first line).
pub type CodeCheck = [u64; 4];

#[repr(C)]
struct CachedFrame {
    /// The code object's address; 0: empty.
    code: u64,
    /// The instruction's offset in the code.
    offset: u64,
    check: CodeCheck,
    len: u32,
    text: [u8; FRAME_TEXT],
}

/// A lane's cache: null until its first frame (a lane starts as zero bits).
pub struct PythonFrameCache {
    entries: *mut CachedFrame,
}

impl PythonFrameCache {
    #[cfg(test)]
    fn new() -> Self {
        Self {
            entries: core::ptr::null_mut(),
        }
    }

    /// The entry `(code, offset)` goes to, if the cache is mapped.
    fn place(&self, code: u64, offset: u64) -> Option<*mut CachedFrame> {
        if self.entries.is_null() {
            return None;
        }
        let at = ((code ^ offset.rotate_left(32)).wrapping_mul(0x9e37_79b9_7f4a_7c15)
            >> (64 - ENTRIES.trailing_zeros())) as usize;
        // SAFETY: `at` < ENTRIES, inside the mapping.
        Some(unsafe { self.entries.add(at) })
    }

    /// The frame's text, if cached from the same code object.
    pub fn find(&self, code: u64, offset: u64, check: &CodeCheck) -> Option<&[u8]> {
        // SAFETY: an entry of the mapping, which only this lane's thread
        // uses; no other reference to it is live.
        let e = unsafe { &*self.place(code, offset)? };
        (code != 0 && e.code == code && e.offset == offset && e.check == *check)
            .then(|| &e.text[..e.len as usize])
    }

    /// Caches a frame's text (ignored if longer than [`FRAME_TEXT`], or if
    /// the cache cannot be mapped).
    pub fn remember(&mut self, code: u64, offset: u64, check: &CodeCheck, text: &[u8]) {
        if text.len() > FRAME_TEXT || code == 0 {
            return;
        }
        if self.entries.is_null() {
            match crate::recorder::base::mapped::map_anonymous_zeroed_in_child(
                ENTRIES * core::mem::size_of::<CachedFrame>(),
            ) {
                Some(p) => self.entries = p,
                None => return,
            }
        }
        if let Some(e) = self.place(code, offset) {
            // SAFETY: as in `find`; `&mut self` keeps any found text gone.
            let e = unsafe { &mut *e };
            e.code = code;
            e.offset = offset;
            e.check = *check;
            e.len = text.len() as u32;
            e.text[..text.len()].copy_from_slice(text);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_is_found_only_for_the_same_code_object_and_instruction() {
        let mut frames = PythonFrameCache::new();
        let check = [1, 2, 3, 4];
        assert!(
            frames.find(0x1000, 8, &check).is_none(),
            "nothing mapped yet"
        );
        frames.remember(0x1000, 8, &check, b"frame text");
        assert_eq!(frames.find(0x1000, 8, &check), Some(&b"frame text"[..]));
        assert!(frames.find(0x1000, 10, &check).is_none(), "another line");
        assert!(
            frames.find(0x1000, 8, &[1, 2, 3, 5]).is_none(),
            "another code object at the same address"
        );
        assert!(frames.find(0x2000, 8, &check).is_none());
        frames.remember(0x2000, 8, &check, &[7; FRAME_TEXT + 1]);
        assert!(frames.find(0x2000, 8, &check).is_none(), "too long to keep");
    }
}
