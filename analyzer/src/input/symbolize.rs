//! Offline symbolization: code addresses from the trace are mapped to a
//! module with the recorded module map (so ASLR and PIE do not matter), then
//! to function, file and line with the module's DWARF, falling back to its
//! symbol table. A module without DWARF of its own (a stripped distro
//! binary) is read through its separate debug file where one is found
//! ([`crate::input::debug_files`]).

use crate::base::words::basename;
use crate::input::debug_files::{missing_hint, DebugFiles};
use crate::input::place::{Layouts, Place};
use crate::input::symbols::{demangle, SymbolTable};
use crate::model::frames::{is_system_module, Frame};
use addr2line::Loader;
use locksuit_format::reader::ModuleInfo;
use std::collections::{BTreeSet, HashMap, HashSet};

#[derive(Default)]
pub struct Symbolizer {
    loaders: HashMap<String, Option<Loader>>,
    /// Function extents per file, for code without DWARF.
    symbols: HashMap<String, SymbolTable>,
    /// Global and static variables' types per file, read on first need.
    layouts: HashMap<String, Layouts>,
    /// Per (path, recorded identity): why the file is not the one that
    /// ran, or `None` if it is.
    changed: HashMap<(String, Vec<u8>, u64, u64), Option<String>>,
    /// Files found changed since the last [`Symbolizer::take_warnings`].
    changed_seen: BTreeSet<String>,
    /// Separate debug files of modules without DWARF.
    debug: DebugFiles,
    /// Modules whose frames went unnamed for want of debug information,
    /// not yet told how to get it; and those already told (once a report).
    unnamed: BTreeSet<String>,
    hinted: HashSet<String>,
}

/// Why the file at `path` is not the file `module` was loaded from, if it
/// is not: the build id recorded from the loaded image decides; without
/// one, the size and mtime recorded from the file.
pub(crate) fn changed_since_run(path: &str, module: &ModuleInfo) -> Option<String> {
    let meta = std::fs::metadata(path).ok().filter(|m| m.is_file())?;
    if !module.build_id.is_empty() {
        let file_id = std::fs::File::open(path)
            .ok()
            // SAFETY: a read-only private mapping, dropped before returning;
            // a file changed under it can at worst make the build id unreadable.
            .and_then(|f| unsafe { memmap2::Mmap::map(&f) }.ok())
            .and_then(|map| {
                let file = object::File::parse(&*map).ok()?;
                object::Object::build_id(&file)
                    .ok()
                    .flatten()
                    .map(<[u8]>::to_vec)
            });
        return match file_id {
            Some(id) if id == module.build_id => None,
            Some(_) => Some("its build id differs from the one that ran".into()),
            None => Some("it has no build id, but the one that ran had one".into()),
        };
    }
    if module.file_size == 0 {
        return None; // nothing recorded to compare with
    }
    let mtime_ns = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos() as u64);
    (meta.len() != module.file_size || mtime_ns != module.file_mtime_ns)
        .then(|| "its size or modification time differs from the one that ran".into())
}

/// The executable segment of the module's file, if the file is still the
/// one that ran and is an ELF file with one.
pub fn code_segment(path: &str, module: &ModuleInfo) -> Option<crate::model::CodeSegment> {
    use object::{Object, ObjectSegment, SegmentFlags};
    if !is_regular(path) || changed_since_run(path, module).is_some() {
        return None;
    }
    let file = std::fs::File::open(path).ok()?;
    // SAFETY: a read-only private mapping, dropped before returning.
    let map = unsafe { memmap2::Mmap::map(&file) }.ok()?;
    let elf = object::File::parse(&*map).ok()?;
    let code = elf.segments().find(
        |s| matches!(s.flags(), SegmentFlags::Elf { p_flags } if p_flags & object::elf::PF_X != 0),
    )?;
    Some(crate::model::CodeSegment {
        address: code.address(),
        size: code.size(),
        file_offset: code.file_range().0,
    })
}

impl Symbolizer {
    /// Whether the file at `path` is still the one `module` was loaded from
    /// (checked once per file and recorded identity).
    fn unchanged(&mut self, path: &str, module: &ModuleInfo) -> bool {
        let key = (
            path.to_string(),
            module.build_id.clone(),
            module.file_size,
            module.file_mtime_ns,
        );
        let why = self
            .changed
            .entry(key)
            .or_insert_with(|| changed_since_run(path, module));
        match why {
            Some(why) => {
                self.changed_seen.insert(format!(
                    "{path} changed since the run ({why}); its frames are shown as module+offset"
                ));
                false
            }
            None => true,
        }
    }

    /// The variable holding `address` (a lock in a global or static): its
    /// name, the offset into it and its size, if a recorded module's symbols
    /// say so.
    pub fn variable(
        &mut self,
        modules: &[ModuleInfo],
        exe: &str,
        address: u64,
    ) -> Option<(String, u64, u64)> {
        let (path, file_address) = self.data_module(modules, exe, address)?;
        let (name, offset, size) = self.symbol_table(path).lookup_data(file_address)?;
        Some((demangle(name), offset, size))
    }

    /// The file of the module `address` (a variable's) lies in, as it ran,
    /// and the address in that file (the module's bias taken off: DW_OP_addr
    /// and symbols hold file addresses); `None` if no recorded module holds
    /// it, or its file changed since.
    fn data_module<'m>(
        &mut self,
        modules: &'m [ModuleInfo],
        exe: &'m str,
        address: u64,
    ) -> Option<(&'m str, u64)> {
        let module = module_at(modules, address, u32::MAX)?;
        let path = if module.path.is_empty() {
            exe
        } else {
            module.path.as_str()
        };
        self.unchanged(path, module)
            .then(|| (path, address.wrapping_sub(module.bias)))
    }

    fn symbol_table(&mut self, path: &str) -> &SymbolTable {
        if !self.symbols.contains_key(path) {
            // A stripped module's debug file has its full symbol table.
            let (source, _) = self.debug_source(path);
            self.symbols
                .insert(path.to_string(), SymbolTable::load(&source));
        }
        &self.symbols[path]
    }

    /// The file to read the module at `path`'s DWARF and symbols from (its
    /// separate debug file, if it has none itself and one is found, else
    /// itself), and the dwz file that debug file shares DWARF with. The C
    /// and C++ runtimes are not looked up: their frames are skipped.
    fn debug_source(&mut self, path: &str) -> (String, Option<String>) {
        if is_system_module(path) {
            return (path.to_string(), None);
        }
        match self.debug.for_module(path) {
            Some(debug) => (
                debug.path.display().to_string(),
                debug.sup.as_ref().map(|s| s.display().to_string()),
            ),
            None => (path.to_string(), None),
        }
    }

    /// Where `address` lies in a global or static variable, for an object
    /// (lock, condition variable) of `object_size` bytes (0: unknown): its
    /// path through the variable's type where the module's DWARF describes
    /// it (`chop[4].m`), else the variable's symbol and the offset into it.
    /// The module's variables are read once, then each lookup is a binary
    /// search and a step per member or element.
    pub fn place(
        &mut self,
        modules: &[ModuleInfo],
        exe: &str,
        address: u64,
        object_size: u64,
    ) -> Option<Place> {
        let (path, file_address) = self.data_module(modules, exe, address)?;
        if !self.layouts.contains_key(path) {
            // The same file the frames' Loader reads its DWARF from.
            let (source, _) = self.debug_source(path);
            let layouts = is_regular(&source)
                .then(|| std::fs::File::open(&source).ok())
                .flatten()
                .map(|f| crate::input::place_dwarf::load(&f))
                .unwrap_or_default();
            self.layouts.insert(path.to_string(), layouts);
        }
        if let Some(place) = self.layouts[path].place(file_address, object_size) {
            return Some(place);
        }
        let (name, offset, size) = self.symbol_table(path).lookup_data(file_address)?;
        Some(Place::of_symbol(demangle(name), offset, size, object_size))
    }

    /// Warnings since the last call: module files changed since the run,
    /// debug files that could not be used, and how to get the names of
    /// modules that had none (once a report).
    pub fn take_warnings(&mut self) -> Vec<String> {
        let mut warnings: Vec<String> =
            std::mem::take(&mut self.changed_seen).into_iter().collect();
        warnings.extend(self.debug.take_notes());
        let unnamed: Vec<String> = std::mem::take(&mut self.unnamed)
            .into_iter()
            .filter(|m| self.hinted.insert(m.clone()))
            .collect();
        let unnamed: Vec<&str> = unnamed.iter().map(String::as_str).collect();
        warnings.extend(missing_hint(&unnamed, &self.debug.dirs_shown()));
        warnings
    }

    fn loader(&mut self, path: &str) -> Option<&Loader> {
        if !self.loaders.contains_key(path) {
            let (source, sup) = self.debug_source(path);
            // Module paths come from the trace: open regular files only, so
            // a damaged path naming a FIFO or device cannot hang us.
            let loader = is_regular(&source)
                .then(|| match Loader::new_with_sup(&source, sup.as_ref()) {
                    Ok(loader) => Some(loader),
                    Err(e) => {
                        if source != path {
                            self.debug.unusable(&source, path, &e.to_string());
                        }
                        None
                    }
                })
                .flatten();
            self.loaders.insert(path.to_string(), loader);
        }
        self.loaders[path].as_ref()
    }

    /// Symbolizes a return address (the call is the instruction before it)
    /// into its frames, innermost first: the functions inlined at the call,
    /// then the function that contains it.
    /// `epoch` is the module-map epoch the address was captured in: after a
    /// `dlclose`, another library may occupy the same addresses.
    pub fn frames(
        &mut self,
        modules: &[ModuleInfo],
        exe: &str,
        return_address: u64,
        epoch: u32,
    ) -> Vec<Frame> {
        let bare = Frame {
            function: None,
            file: None,
            line: None,
            path: None,
            address: format!("{return_address:#x}"),
            module: None,
            offset: None,
        };
        let Some(module) = module_at(modules, return_address, epoch) else {
            return vec![bare];
        };
        let path = if module.path.is_empty() {
            exe
        } else {
            module.path.as_str()
        };
        let unnamed = Frame {
            module: Some(path.to_string()),
            offset: Some(format!(
                "{}+{:#x}",
                basename(path),
                return_address.wrapping_sub(module.bias)
            )),
            ..bare
        };
        let probe = return_address.saturating_sub(1).wrapping_sub(module.bias);
        if !self.unchanged(path, module) {
            return vec![unnamed];
        }
        let Some(loader) = self.loader(path) else {
            return vec![unnamed];
        };
        let mut frames = Vec::new();
        if let Ok(mut iter) = loader.find_frames(probe) {
            while let Ok(Some(f)) = iter.next() {
                let mut frame = Frame {
                    offset: None,
                    ..unnamed.clone()
                };
                frame.function = f
                    .function
                    .as_ref()
                    .and_then(|n| n.demangle().ok())
                    .map(|n| n.into_owned());
                if let Some(loc) = f.location {
                    if let Some(file) = loc.file {
                        frame.file = Some(basename(file).to_string());
                        frame.path = Some(file.to_string());
                    }
                    frame.line = loc.line;
                }
                frames.push(frame);
                // A damaged trace cannot make this loop long: DWARF inline
                // depth is bounded by the file, but keep it sane anyway.
                if frames.len() >= 64 {
                    break;
                }
            }
        }
        if frames.is_empty() || frames.iter().all(|f| f.function.is_none()) {
            // No DWARF here: a symbol names the address only if its extent
            // holds it (in a stripped file the nearest symbol below a
            // static function is another function). System libraries are
            // left as module+offset: their frames are skipped anyway.
            let system = is_system_module(path);
            if !system && self.debug.missing(path) {
                self.unnamed.insert(path.to_string());
            }
            let name = (!system)
                .then(|| self.symbol_table(path).lookup(probe).map(demangle))
                .flatten();
            return vec![match name {
                Some(name) => Frame {
                    function: Some(name),
                    offset: None,
                    ..unnamed
                },
                None => unnamed,
            }];
        }
        frames
    }
}

/// Whether `path` is a regular file. Module paths come from the trace: a
/// damaged path naming a FIFO or device must not be opened (which could
/// hang), so this is asked first.
fn is_regular(path: &str) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file())
}

/// The module that held `address` in module-map `epoch`: the newest one
/// recorded no later than that epoch covering it; failing that (a damaged
/// trace), the newest covering it at all.
pub fn module_at(modules: &[ModuleInfo], address: u64, epoch: u32) -> Option<&ModuleInfo> {
    let covering = || {
        modules
            .iter()
            .filter(|m| m.start <= address && address < m.end)
    };
    covering()
        .filter(|m| m.epoch <= u64::from(epoch))
        .max_by_key(|m| m.epoch)
        .or_else(|| covering().max_by_key(|m| m.epoch))
}
