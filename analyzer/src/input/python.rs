//! Python frames of a site (a CPython interpreter's call into the lock
//! API, see `shim/src/recorder/identities/python.rs`): put on top of the
//! site's native chain, so the site is named by its `.py` line and the
//! Python call chain shows above the interpreter's C frames.

use crate::base::words::basename;
use crate::model::frames::PYTHON_ADDRESS;
use crate::model::Frame;
use locksuit_format::reader::Trace;
use locksuit_format::PyFrame;
use rustc_hash::FxHashMap;

/// The innermost Python frames kept in a chain, and the most frames a
/// chain with them keeps (the C frames nearest the lock call first): a
/// chain stays about as deep as a native one (`MAX_CHAIN_DEPTH`), so the
/// waiting tree nests as deep as before.
const MAX_PYTHON_FRAMES: usize = 24;
const MAX_CHAIN: usize = 48;

/// Each site's Python frames, by raw site id.
pub struct PythonFrames {
    by_site: FxHashMap<u32, Vec<PyFrame>>,
}

impl PythonFrames {
    /// The trace's Python frames (taken out of it).
    pub fn take(trace: &mut Trace) -> Self {
        PythonFrames {
            by_site: std::mem::take(&mut trace.py_frames)
                .into_iter()
                .map(|s| (s.site_id, s.frames))
                .collect(),
        }
    }

    /// `native`, the site's symbolized chain, with the site's Python frames
    /// (if any) on top, innermost first. A Python frame's module is the
    /// module of the native call (the interpreter that ran it).
    pub fn chain(&self, site: u32, mut native: Vec<Frame>) -> Vec<Frame> {
        let Some(frames) = self.by_site.get(&site).filter(|f| !f.is_empty()) else {
            return native;
        };
        let module = native.first().and_then(|f| f.module.clone());
        let mut chain: Vec<Frame> = frames
            .iter()
            .take(MAX_PYTHON_FRAMES)
            .map(|f| Frame {
                function: (!f.function.is_empty()).then(|| f.function.clone()),
                file: (!f.file.is_empty()).then(|| basename(&f.file).to_string()),
                line: (f.line != 0).then_some(f.line),
                path: (!f.file.is_empty()).then(|| f.file.clone()),
                address: PYTHON_ADDRESS.to_string(),
                module: module.clone(),
                offset: None,
            })
            .collect();
        native.truncate(MAX_CHAIN.saturating_sub(chain.len()));
        chain.append(&mut native);
        chain
    }
}
