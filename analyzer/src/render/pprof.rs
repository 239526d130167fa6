//! The waits as a pprof profile (profile.proto, gzipped), like Go's mutex
//! profile: sample types `contentions/count` and `delay/nanoseconds`, one
//! sample per blocking stack, locations with function, file and line
//! (inlined frames as several lines of one location), a mapping per
//! module. `go tool pprof`, Pyroscope, Parca and Cloud Profiler read it.

use crate::model::{Frame, Report};
use crate::stacks::{weighted, Weight};
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
    #[prost(int64, tag = "5")]
    filename: i64,
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
    mappings: HashMap<String, usize>,
}

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

    fn mapping(&mut self, module: &str, address: u64) -> u64 {
        let at = match self.mappings.get(module) {
            Some(&at) => at,
            None => {
                let filename = self.string(module);
                self.profile.mapping.push(Mapping {
                    id: self.profile.mapping.len() as u64 + 1,
                    memory_start: address,
                    memory_limit: address + 1,
                    filename,
                    has_functions: true,
                    has_filenames: true,
                    has_line_numbers: true,
                    has_inline_frames: true,
                });
                self.mappings
                    .insert(module.to_string(), self.profile.mapping.len() - 1);
                self.profile.mapping.len() - 1
            }
        };
        let m = &mut self.profile.mapping[at];
        m.memory_start = m.memory_start.min(address);
        m.memory_limit = m.memory_limit.max(address + 1);
        m.id
    }

    /// The location of one address: its frames (innermost first, the
    /// inlined ones before the function they were inlined into).
    fn location(&mut self, frames: &[&Frame], pid: u32) -> u64 {
        let first = frames[0];
        let address = u64::from_str_radix(first.address.trim_start_matches("0x"), 16).unwrap_or(0);
        let key = (
            u64::from(pid) << 48 ^ address,
            crate::stacks::frame_name(first),
        );
        if let Some(&id) = self.locations.get(&key) {
            return id;
        }
        let mapping_id = match &first.module {
            Some(module) if address != 0 => self.mapping(module, address),
            _ => 0,
        };
        let line = frames
            .iter()
            .map(|f| {
                let file = f.path.as_deref().or(f.file.as_deref()).unwrap_or("");
                Line {
                    function_id: self.function(&crate::stacks::frame_name(f), file),
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
    fn locations(&mut self, frames: &[Frame], pid: u32) -> Vec<u64> {
        frames
            .chunk_by(|a, b| a.address == b.address)
            .map(|inlined| self.location(&inlined.iter().collect::<Vec<_>>(), pid))
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
    let mut start = i64::MAX;
    let mut end = 0i64;
    for p in &report.processes {
        let p_start = p.start_unix_ns as i64;
        start = start.min(p_start);
        end = end.max(p_start + p.duration_ns.unwrap_or(0) as i64);
        let exe = b.string(crate::symbolize::basename(&p.exe));
        for s in weighted(p, Weight::Wait) {
            let mut location_id = Vec::new();
            if let Some(leaf) = s.leaf {
                location_id.push(b.call(leaf));
            }
            location_id.extend(b.locations(s.frames, p.pid));
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
        let ids = b.locations(&frames, 1);
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
