//! The waits as a pprof profile (profile.proto, gzipped), like Go's mutex
//! profile: sample types `contentions/count` and `delay/nanoseconds`, one
//! sample per blocking stack, locations with function, file and line
//! (inlined frames as several lines of one location), a mapping per
//! module with its file, build id and address range, so a frame locksuit
//! could not name (no symbols) is left as an address in a mapping marked
//! unsymbolized, for `go tool pprof -symbolize=local` to name from the
//! module's debug file. `go tool pprof`, Pyroscope, Parca and Cloud
//! Profiler read it.
//!
//! It profiles the processes with lock activity (all of them if none has
//! any): a program started by a shell wrapper is profiled, not the shell
//! waiting for it. The first mapping, which pprof takes for the program
//! (`File:`), is the program of the process that waited longest for locks.

use crate::model::stacks::{weighted, Weight};
use crate::model::{Frame, Module, Process, Report};
use std::collections::HashMap;

// The messages of profile.proto that a profile needs, by tag.
#[derive(Clone, PartialEq, prost::Message)]
struct Profile {
    #[prost(message, repeated, tag = "1")]
    sample_type: Vec<ValueType>,
    #[prost(message, repeated, tag = "2")]
    sample: Vec<Sample>,
    #[prost(message, repeated, tag = "3")]
    mapping: Vec<Mapping>,
    #[prost(message, repeated, tag = "4")]
    location: Vec<Location>,
    #[prost(message, repeated, tag = "5")]
    function: Vec<Function>,
    #[prost(string, repeated, tag = "6")]
    string_table: Vec<String>,
    #[prost(int64, tag = "9")]
    time_nanos: i64,
    #[prost(int64, tag = "10")]
    duration_nanos: i64,
    #[prost(message, optional, tag = "11")]
    period_type: Option<ValueType>,
    #[prost(int64, tag = "12")]
    period: i64,
    #[prost(int64, tag = "14")]
    default_sample_type: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
struct ValueType {
    #[prost(int64, tag = "1")]
    r#type: i64,
    #[prost(int64, tag = "2")]
    unit: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Sample {
    #[prost(uint64, repeated, tag = "1")]
    location_id: Vec<u64>,
    #[prost(int64, repeated, tag = "2")]
    value: Vec<i64>,
    #[prost(message, repeated, tag = "3")]
    label: Vec<Label>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Label {
    #[prost(int64, tag = "1")]
    key: i64,
    #[prost(int64, tag = "2")]
    str: i64,
    #[prost(int64, tag = "3")]
    num: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Mapping {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(uint64, tag = "2")]
    memory_start: u64,
    #[prost(uint64, tag = "3")]
    memory_limit: u64,
    #[prost(uint64, tag = "4")]
    file_offset: u64,
    #[prost(int64, tag = "5")]
    filename: i64,
    #[prost(int64, tag = "6")]
    build_id: i64,
    #[prost(bool, tag = "7")]
    has_functions: bool,
    #[prost(bool, tag = "8")]
    has_filenames: bool,
    #[prost(bool, tag = "9")]
    has_line_numbers: bool,
    #[prost(bool, tag = "10")]
    has_inline_frames: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Location {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(uint64, tag = "2")]
    mapping_id: u64,
    #[prost(uint64, tag = "3")]
    address: u64,
    #[prost(message, repeated, tag = "4")]
    line: Vec<Line>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Line {
    #[prost(uint64, tag = "1")]
    function_id: u64,
    #[prost(int64, tag = "2")]
    line: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Function {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(int64, tag = "2")]
    name: i64,
    #[prost(int64, tag = "3")]
    system_name: i64,
    #[prost(int64, tag = "4")]
    filename: i64,
}

/// Builds the tables as samples are added: strings, functions, locations
/// and mappings, each given an id on first use.
#[derive(Default)]
struct Builder {
    profile: Profile,
    strings: HashMap<String, i64>,
    functions: HashMap<(String, String), u64>,
    locations: HashMap<(u64, String), u64>,
    /// By module and place (one module loaded at other addresses in two
    /// processes is two mappings).
    mappings: HashMap<(String, u64), u64>,
}

/// Page size for the mapping's limits: pprof reads a page-aligned mapping
/// as the file's loaded segments.
const PAGE: u64 = 4096;

impl Builder {
    fn string(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.strings.get(s) {
            return i;
        }
        let i = self.profile.string_table.len() as i64;
        self.profile.string_table.push(s.to_string());
        self.strings.insert(s.to_string(), i);
        i
    }

    fn function(&mut self, name: &str, file: &str) -> u64 {
        let key = (name.to_string(), file.to_string());
        if let Some(&id) = self.functions.get(&key) {
            return id;
        }
        let id = self.profile.function.len() as u64 + 1;
        let (name, filename) = (self.string(name), self.string(file));
        self.profile.function.push(Function {
            id,
            name,
            system_name: name,
            filename,
        });
        self.functions.insert(key, id);
        id
    }

    /// The mapping of a loaded module: its code segment as the loader
    /// mapped it (whole pages, with the file offset of its first page), as
    /// in /proc/PID/maps, which is what pprof symbolizes against; without
    /// it, the module's whole range from file offset 0 (where the loader
    /// maps the file's first page). With its file and build id; symbolized
    /// until a frame in it is found not to be.
    fn mapping(&mut self, module: &Module) -> u64 {
        let key = (module.path.clone(), module.start);
        if let Some(&id) = self.mappings.get(&key) {
            return id;
        }
        let (memory_start, memory_limit, file_offset) = match module.code {
            Some(code) => {
                let start = module.bias + code.address / PAGE * PAGE;
                let limit = (module.bias + code.address + code.size).div_ceil(PAGE) * PAGE;
                (start, limit, code.file_offset / PAGE * PAGE)
            }
            None => (module.start, module.end.div_ceil(PAGE) * PAGE, 0),
        };
        let (filename, build_id) = (self.string(&module.path), self.string(&module.build_id));
        let id = self.profile.mapping.len() as u64 + 1;
        self.profile.mapping.push(Mapping {
            id,
            memory_start,
            memory_limit,
            file_offset,
            filename,
            build_id,
            has_functions: true,
            has_filenames: true,
            has_line_numbers: true,
            has_inline_frames: true,
        });
        self.mappings.insert(key, id);
        id
    }

    /// A mapping holds a frame locksuit could not name (or place): the
    /// reader should symbolize it.
    fn unsymbolized(&mut self, mapping_id: u64, frame: &Frame) {
        if let Some(m) = self.profile.mapping.get_mut(mapping_id as usize - 1) {
            m.has_functions &= frame.function.is_some();
            m.has_filenames &= frame.file.is_some();
            m.has_line_numbers &= frame.line.is_some();
            m.has_inline_frames &= frame.function.is_some();
        }
    }

    /// The location of one address: its frames (innermost first, the
    /// inlined ones before the function they were inlined into).
    fn location(&mut self, frames: &[&Frame], (pid, modules): (u32, &[Module])) -> u64 {
        let first = frames[0];
        let address = u64::from_str_radix(first.address.trim_start_matches("0x"), 16).unwrap_or(0);
        let key = (
            u64::from(pid) << 48 ^ address,
            crate::model::stacks::frame_name(first),
        );
        if let Some(&id) = self.locations.get(&key) {
            return id;
        }
        let module = modules
            .iter()
            .find(|m| m.start <= address && address < m.end);
        let mapping_id = match module {
            Some(module) if address != 0 => self.mapping(module),
            _ => 0,
        };
        if mapping_id != 0 {
            for f in frames {
                self.unsymbolized(mapping_id, f);
            }
        }
        // No name: no lines, an address for the reader to symbolize (a
        // `module+0x…` line would read as a function's name).
        let named = frames
            .iter()
            .filter(|f| f.function.is_some() || mapping_id == 0);
        let line = named
            .map(|f| {
                let file = f.path.as_deref().or(f.file.as_deref()).unwrap_or("");
                Line {
                    function_id: self.function(&crate::model::stacks::frame_name(f), file),
                    line: i64::from(f.line.unwrap_or(0)),
                }
            })
            .collect();
        let id = self.profile.location.len() as u64 + 1;
        self.profile.location.push(Location {
            id,
            mapping_id,
            address,
            line,
        });
        self.locations.insert(key, id);
        id
    }

    /// The locations of a stack, innermost first: frames of one address
    /// (a function and those inlined into it) make one location.
    fn locations(&mut self, frames: &[Frame], process: (u32, &[Module])) -> Vec<u64> {
        frames
            .chunk_by(|a, b| a.address == b.address)
            .map(|inlined| self.location(&inlined.iter().collect::<Vec<_>>(), process))
            .collect()
    }

    /// A location of a function with no address (the blocking call).
    fn call(&mut self, name: &str) -> u64 {
        let key = (u64::MAX, name.to_string());
        if let Some(&id) = self.locations.get(&key) {
            return id;
        }
        let function_id = self.function(name, "");
        let id = self.profile.location.len() as u64 + 1;
        self.profile.location.push(Location {
            id,
            mapping_id: 0,
            address: 0,
            line: vec![Line {
                function_id,
                line: 0,
            }],
        });
        self.locations.insert(key, id);
        id
    }
}

/// The profile of every process's waits.
fn build(report: &Report) -> Profile {
    let mut b = Builder::default();
    b.string("");
    let value_type = |b: &mut Builder, t: &str, u: &str| ValueType {
        r#type: b.string(t),
        unit: b.string(u),
    };
    b.profile.sample_type = vec![
        value_type(&mut b, "contentions", "count"),
        value_type(&mut b, "delay", "nanoseconds"),
    ];
    b.profile.period_type = Some(value_type(&mut b, "contentions", "count"));
    b.profile.period = 1;
    b.profile.default_sample_type = b.string("delay");
    let (pid_key, exe_key, class_key) = (b.string("pid"), b.string("exe"), b.string("class"));
    let profiled = profiled(report);
    // The program first: pprof names the profile after the first mapping.
    if let Some(program) = profiled.first().and_then(|p| program_module(p)) {
        b.mapping(program);
    }
    let mut start = i64::MAX;
    let mut end = 0i64;
    for p in profiled {
        let p_start = p.start_unix_ns as i64;
        start = start.min(p_start);
        end = end.max(p_start + p.duration_ns.unwrap_or(0) as i64);
        let exe = b.string(crate::base::words::basename(&p.exe));
        for s in weighted(p, Weight::Wait) {
            let mut location_id = Vec::new();
            if let Some(leaf) = s.leaf {
                location_id.push(b.call(leaf));
            }
            location_id.extend(b.locations(s.frames, (p.pid, &p.modules)));
            let mut label = vec![
                Label {
                    key: pid_key,
                    str: 0,
                    num: i64::from(p.pid),
                },
                Label {
                    key: exe_key,
                    str: exe,
                    num: 0,
                },
            ];
            if let Some(class) = s.class {
                let class = b.string(class);
                label.push(Label {
                    key: class_key,
                    str: class,
                    num: 0,
                });
            }
            b.profile.sample.push(Sample {
                location_id,
                value: vec![s.count as i64, s.value as i64],
                label,
            });
        }
    }
    if start != i64::MAX {
        b.profile.time_nanos = start;
        b.profile.duration_nanos = end.saturating_sub(start);
    }
    b.profile
}

/// How long a process's threads waited for its locks.
fn lock_wait_ns(p: &Process) -> u64 {
    p.locks.iter().map(|l| l.wait_ns).sum()
}

/// The processes to profile: those that took a lock or waited on a
/// condition variable (all if none did), the longest lock waits first.
/// A shell that started the program (or `exec`ed it: its trace ends there)
/// took none: its `read` and `waitpid` are not the program's.
fn profiled(report: &Report) -> Vec<&Process> {
    let active = |p: &&Process| {
        p.locks
            .iter()
            .any(|l| l.acquisitions > 0 || l.contended > 0)
            || p.conds.iter().any(|c| c.waits > 0)
    };
    let mut chosen: Vec<&Process> = report.processes.iter().filter(active).collect();
    if chosen.is_empty() {
        chosen = report.processes.iter().collect();
    }
    chosen.sort_by_key(|p| std::cmp::Reverse(lock_wait_ns(p)));
    chosen
}

/// The module of a process's executable, if it was recorded.
fn program_module(p: &Process) -> Option<&Module> {
    p.modules.iter().find(|m| m.path == p.exe)
}

/// Writes the gzipped profile.
pub fn write(report: &Report, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    use prost::Message;
    use std::io::Write;
    let bytes = build(report).encode_to_vec();
    let mut gz = flate2::write::GzEncoder::new(out, flate2::Compression::default());
    gz.write_all(&bytes)?;
    gz.finish()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(function: &str, line: u32, address: &str) -> Frame {
        Frame {
            function: Some(function.into()),
            file: Some("f.c".into()),
            line: Some(line),
            path: Some("/src/f.c".into()),
            address: address.into(),
            module: Some("/bin/prog".into()),
            offset: None,
        }
    }

    fn program() -> Module {
        Module {
            path: "/bin/prog".into(),
            start: 0x1000,
            end: 0x6789,
            bias: 0x1000,
            build_id: "abcd".into(),
            code: None,
        }
    }

    #[test]
    fn frames_without_names_are_addresses_in_an_unsymbolized_mapping() {
        let mut b = Builder::default();
        b.string("");
        let named = [frame("main", 30, "0x5678")];
        b.locations(&named, (1, &[program()]));
        let m = &b.profile.mapping[0];
        assert!(m.has_functions && m.has_line_numbers);
        assert_eq!(
            (m.memory_start, m.memory_limit, m.file_offset),
            (0x1000, 0x7000, 0)
        );
        assert_eq!(b.profile.string_table[m.build_id as usize], "abcd");
        assert_eq!(b.profile.string_table[m.filename as usize], "/bin/prog");
        let bare = Frame {
            function: None,
            file: None,
            line: None,
            path: None,
            offset: Some("prog+0x2345".into()),
            ..frame("", 0, "0x3345")
        };
        let ids = b.locations(&[bare], (1, &[program()]));
        let location = &b.profile.location[ids[0] as usize - 1];
        assert!(location.line.is_empty(), "{location:?}");
        assert_eq!((location.address, location.mapping_id), (0x3345, 1));
        let m = &b.profile.mapping[0];
        assert!(
            !m.has_functions && !m.has_filenames && !m.has_line_numbers,
            "{m:?}"
        );
        assert_eq!(b.profile.mapping.len(), 1);
    }

    #[test]
    fn inlined_frames_are_lines_of_one_location() {
        // `get` inlined into `lookup` at one address; `main` calls it.
        let frames = [
            frame("get", 10, "0x1234"),
            frame("lookup", 20, "0x1234"),
            frame("main", 30, "0x5678"),
        ];
        let mut b = Builder::default();
        b.string("");
        let ids = b.locations(&frames, (1, &[program()]));
        assert_eq!(ids.len(), 2);
        let name_of = |b: &Builder, line: &Line| {
            let f = &b.profile.function[line.function_id as usize - 1];
            b.profile.string_table[f.name as usize].clone()
        };
        let inlined = &b.profile.location[ids[0] as usize - 1];
        assert_eq!(inlined.address, 0x1234);
        let lines: Vec<(String, i64)> = inlined
            .line
            .iter()
            .map(|l| (name_of(&b, l), l.line))
            .collect();
        // pprof's order: the inlined function first, the one it was
        // inlined into last.
        assert_eq!(lines, [("get".into(), 10), ("lookup".into(), 20)]);
        let caller = &b.profile.location[ids[1] as usize - 1];
        assert_eq!(caller.line.len(), 1);
        assert_eq!(name_of(&b, &caller.line[0]), "main");
        assert_eq!(b.profile.mapping.len(), 1, "one module, one mapping");
    }
}
