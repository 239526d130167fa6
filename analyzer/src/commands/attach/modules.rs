//! The modules of a running process, from `/proc/PID/maps`, as the
//! symbolizer and the stack walker take them (`ModuleInfo`, one map epoch).

use locksuit_format::reader::ModuleInfo;
use object::{Object, ObjectSegment};
use std::collections::BTreeMap;

/// Each file mapped executable or not, with where it was loaded: its
/// lowest to highest mapped address, and the load bias (where the mapping
/// of file offset 0 is, less the page of the segment at offset 0).
pub fn read_modules(pid: u32) -> Result<Vec<ModuleInfo>, String> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .map_err(|e| format!("cannot read /proc/{pid}/maps: {e}"))?;
    // path -> (start, end, start of the offset-0 mapping)
    let mut files: BTreeMap<String, (u64, u64, Option<u64>)> = BTreeMap::new();
    for line in maps.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [range, _perms, offset, _dev, _inode, path, ..] = fields[..] else {
            continue;
        };
        if !path.starts_with('/') {
            continue;
        }
        let Some((start, end)) = range.split_once('-') else {
            continue;
        };
        let (Ok(start), Ok(end), Ok(offset)) = (
            u64::from_str_radix(start, 16),
            u64::from_str_radix(end, 16),
            u64::from_str_radix(offset, 16),
        ) else {
            continue;
        };
        let entry = files.entry(path.to_string()).or_insert((start, end, None));
        entry.0 = entry.0.min(start);
        entry.1 = entry.1.max(end);
        if offset == 0 && entry.2.is_none() {
            entry.2 = Some(start);
        }
    }
    let mut modules = Vec::new();
    for (path, (start, end, base)) in files {
        let Some(base) = base else { continue };
        let Ok(data) = std::fs::read(&path) else {
            continue;
        };
        let Ok(file) = object::File::parse(&*data) else {
            continue; // not an ELF file (a mapped data file)
        };
        let first = file
            .segments()
            .find(|s| s.file_range().0 == 0)
            .map_or(0, |s| s.address() & !0xfff);
        let meta = std::fs::metadata(&path).ok();
        modules.push(ModuleInfo {
            bias: base.wrapping_sub(first),
            start,
            end,
            epoch: 0,
            path: path.clone(),
            file_size: meta.as_ref().map_or(0, |m| m.len()),
            file_mtime_ns: meta
                .and_then(|m| m.modified().ok())
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos() as u64),
            build_id: object::Object::build_id(&file)
                .ok()
                .flatten()
                .map(<[u8]>::to_vec)
                .unwrap_or_default(),
        });
    }
    Ok(modules)
}

/// The C library among a process's modules (`libc.so.6`, or a versioned
/// `libc-2.x.so`), whose mutex calls `--locks` probes.
pub fn c_library(modules: &[ModuleInfo]) -> Option<&str> {
    modules.iter().map(|m| m.path.as_str()).find(|path| {
        let name = path.rsplit('/').next().unwrap_or(path);
        name.starts_with("libc.so") || (name.starts_with("libc-") && name.ends_with(".so"))
    })
}

/// Where the kernel put its uretprobe trampolines in the process (the
/// `[uprobes]` mapping), if it has made them.
pub fn uprobes_area(pid: u32) -> Option<std::ops::Range<u64>> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    let line = maps.lines().find(|l| l.trim_end().ends_with("[uprobes]"))?;
    let (start, end) = line.split_whitespace().next()?.split_once('-')?;
    Some(u64::from_str_radix(start, 16).ok()?..u64::from_str_radix(end, 16).ok()?)
}

/// The C library process `pid` maps, for `--locks`. A process that has just
/// started may not have it mapped yet (its loader is still at work): asked
/// again for up to a second before the answer is no.
pub fn c_library_of(pid: u32) -> Result<std::path::PathBuf, String> {
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(1);
    loop {
        let modules = read_modules(pid)?;
        if let Some(path) = c_library(&modules) {
            return Ok(path.into());
        }
        if std::time::Instant::now() >= give_up {
            return Err(format!(
                "--locks needs the process's C library, and {pid} maps no libc.so (statically linked?)"
            ));
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}
