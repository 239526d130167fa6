//! The modules a process had loaded, as the shim recorded them: what a
//! profile needs to let its reader symbolize addresses later.

/// One loaded module (the program or a shared library).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Module {
    /// The file it was loaded from.
    pub path: String,
    /// Its addresses in the process: from its first mapping's start to its
    /// last mapping's end.
    pub start: u64,
    pub end: u64,
    /// Load bias: a run-time address minus the address in the file.
    pub bias: u64,
    /// Its GNU build id in hex; empty when it had none.
    pub build_id: String,
    /// Its code (the executable segment), read from its file when that is
    /// still the one that ran: profile readers symbolize against a mapping
    /// of one segment, with that segment's file offset.
    pub code: Option<CodeSegment>,
}

/// An executable `PT_LOAD` segment: its address in the file, its size in
/// memory and its offset in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodeSegment {
    pub address: u64,
    pub size: u64,
    pub file_offset: u64,
}

/// The modules of a trace's module map, the program's under `exe` when
/// the map has no path for it; one entry per module and place, whatever
/// the map's epochs.
pub fn from_trace(
    modules: &[locksuit_format::reader::ModuleInfo],
    exe: &str,
    code: &dyn Fn(&str, &locksuit_format::reader::ModuleInfo) -> Option<CodeSegment>,
) -> Vec<Module> {
    let mut out: Vec<Module> = Vec::new();
    for m in modules {
        let path = if m.path.is_empty() { exe } else { &m.path };
        let module = Module {
            path: path.to_string(),
            code: code(path, m),
            start: m.start,
            end: m.end,
            bias: m.bias,
            build_id: m.build_id.iter().map(|b| format!("{b:02x}")).collect(),
        };
        if !out.contains(&module) {
            out.push(module);
        }
    }
    out
}
