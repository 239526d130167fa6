//! Python frames of a call site (format version 16): for a site whose
//! native caller is inside a CPython interpreter, the interpreter's frames
//! of the calling thread when the site was first seen, innermost first.

use super::RecordHeader;

/// A site's Python frames. `hdr.aux` = the frames' count; the frames
/// follow, each a [`PyFrameHead`] and then its function's and its file's
/// name (UTF-8, the lengths the head gives, unpadded), the whole padded to
/// [`RECORD_ALIGN`](super::RECORD_ALIGN).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct PyFramesRecord {
    pub hdr: RecordHeader,
    /// The [`SiteRecord`](super::SiteRecord) these frames belong to.
    pub site_id: u32,
    /// Bytes of frames after this struct (heads and names, before padding).
    pub len: u32,
}

/// One Python frame: the line being run, and its names' lengths.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct PyFrameHead {
    /// 0 when the interpreter's location table gives none.
    pub line: u32,
    pub function_len: u16,
    pub file_len: u16,
}

/// The most frames one record holds.
pub const MAX_PY_FRAMES: usize = 48;
/// The longest function name and file name kept (a file name keeps its
/// end: the directories nearest the file).
pub const MAX_PY_FUNCTION: usize = 128;
pub const MAX_PY_FILE: usize = 256;
