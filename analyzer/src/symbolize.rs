//! Offline symbolization: code addresses from the trace are mapped to a
//! module with the recorded module map (so ASLR and PIE do not matter), then
//! to function, file and line with the module's DWARF, falling back to its
//! symbol table.

use crate::model::Frame;
use addr2line::Loader;
use locksuit_format::reader::ModuleInfo;
use std::collections::HashMap;

/// Modules whose frames are not the program's own code: the C and C++
/// runtimes, the loader, and the shim itself.
const SYSTEM_MODULE_PREFIXES: &[&str] = &[
    "libc.so",
    "libc-",
    "libpthread",
    "libstdc++",
    "libgcc_s",
    "ld-linux",
    "ld64.so",
    "libsyncshim",
    "linux-vdso",
    "linux-gate",
];

pub fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

pub fn is_system_module(path: &str) -> bool {
    let base = basename(path);
    SYSTEM_MODULE_PREFIXES.iter().any(|p| base.starts_with(p))
}

#[derive(Default)]
pub struct Symbolizer {
    loaders: HashMap<String, Option<Loader>>,
}

impl Symbolizer {
    fn loader(&mut self, path: &str) -> Option<&Loader> {
        self.loaders
            .entry(path.to_string())
            // Module paths come from the trace: open regular files only, so
            // a damaged path naming a FIFO or device cannot hang us.
            .or_insert_with(|| {
                let regular = std::fs::metadata(path).is_ok_and(|m| m.is_file());
                regular.then(|| Loader::new(path).ok()).flatten()
            })
            .as_ref()
    }

    /// Symbolizes a return address (the call is the instruction before it).
    pub fn frame(&mut self, modules: &[ModuleInfo], exe: &str, return_address: u64) -> Frame {
        let mut frame = Frame {
            function: None,
            file: None,
            line: None,
            path: None,
            address: format!("{return_address:#x}"),
            module: None,
            offset: None,
        };
        let Some(module) = modules
            .iter()
            .find(|m| m.start <= return_address && return_address < m.end)
        else {
            return frame;
        };
        let path = if module.path.is_empty() {
            exe
        } else {
            module.path.as_str()
        };
        frame.module = Some(path.to_string());
        let probe = return_address.saturating_sub(1).wrapping_sub(module.bias);
        let Some(loader) = self.loader(path) else {
            return frame;
        };
        if let Ok(mut frames) = loader.find_frames(probe) {
            // The innermost frame is the (possibly inlined) function that
            // made the call.
            if let Ok(Some(f)) = frames.next() {
                if let Some(name) = f.function.as_ref().and_then(|n| n.demangle().ok()) {
                    frame.function = Some(name.into_owned());
                }
                if let Some(loc) = f.location {
                    if let Some(file) = loc.file {
                        frame.file = Some(basename(file).to_string());
                        frame.path = Some(file.to_string());
                    }
                    frame.line = loc.line;
                }
            }
        }
        // The symbol table is only trusted for the program's own modules: a
        // stripped system library keeps only exported symbols, and the
        // nearest one below a static function is a wrong name.
        if frame.function.is_none() && !is_system_module(path) {
            frame.function = loader
                .find_symbol(probe)
                .map(|s| addr2line::demangle_auto(s.into(), None).into_owned());
        }
        if frame.function.is_none() {
            frame.offset = Some(format!(
                "{}+{:#x}",
                basename(path),
                return_address.wrapping_sub(module.bias)
            ));
        }
        frame
    }
}

/// Index of the first frame in the program's own code (0 if there is none).
pub fn first_own_frame(chain: &[Frame]) -> usize {
    chain
        .iter()
        .position(|f| f.module.as_deref().is_some_and(|m| !is_system_module(m)))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_modules_are_recognised_by_file_name() {
        assert!(is_system_module("/lib/x86_64-linux-gnu/libc.so.6"));
        assert!(is_system_module("/usr/lib/x86_64-linux-gnu/libstdc++.so.6"));
        assert!(is_system_module("/work/target/release/libsyncshim.so"));
        assert!(!is_system_module("/usr/bin/python3.11"));
        assert!(!is_system_module("/home/me/libcrypto-helper.so"));
    }
}
