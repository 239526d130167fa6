//! `locksuit run --policy`: a policy's `sites` may name lines of code
//! (`FILE:LINE`). The shim reads no line tables, so they are resolved here,
//! before the program starts, from the program's DWARF line table into
//! ranges of addresses in its executable file (`PROGRAM@0xLO-0xHI`), which
//! the shim matches against each new site's return addresses (in that
//! program only: a child that runs another one matches none). Lines in shared
//! libraries are not resolved (which libraries load is known only once the
//! program runs).

use std::path::{Path, PathBuf};

/// Longest value of a list key the shim takes (its `policy::parse::LIST_MAX`).
const LIST_MAX: usize = 512;

/// A site item that names a line: `FILE:LINE`.
fn file_line(item: &str) -> Option<(&str, u32)> {
    let (file, line) = item.rsplit_once(':')?;
    let line = line.parse().ok().filter(|&l| l > 0)?;
    (!file.is_empty()).then_some((file, line))
}

/// `program` as `exec` finds it: a name without a slash is looked up in
/// `$PATH`.
pub fn program_path(program: &Path) -> Option<PathBuf> {
    if program.as_os_str().as_encoded_bytes().contains(&b'/') {
        return Some(program.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

/// Whether `path` (from the line table) is `file`, whole path components
/// matched from the end (`cells.c` and `src/cells.c` name `/w/src/cells.c`).
fn names(path: &str, file: &str) -> bool {
    path == file || path.ends_with(&format!("/{file}"))
}

/// The address ranges of `line` of `file` in the executable at `exe`,
/// sorted and merged.
fn ranges_of(
    loader: &addr2line::Loader,
    (file, line): (&str, u32),
) -> Result<Vec<(u64, u64)>, String> {
    let rows = loader
        .find_location_range(0, u64::MAX)
        .map_err(|e| format!("cannot read its line table: {e}"))?;
    let mut ranges: Vec<(u64, u64)> = rows
        .filter(|(_, _, at)| at.line == Some(line) && at.file.is_some_and(|f| names(f, file)))
        .map(|(start, len, _)| (start, start + len))
        .collect();
    ranges.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::new();
    for (lo, hi) in ranges {
        match merged.last_mut() {
            Some(last) if lo <= last.1 => last.1 = last.1.max(hi),
            _ => merged.push((lo, hi)),
        }
    }
    Ok(merged)
}

/// The policy `text` with its `FILE:LINE` sites resolved in `exe`, or
/// `None` when it names no line. An error names the policy line and what
/// is wrong.
pub fn resolve(text: &str, exe: &Path) -> Result<Option<String>, String> {
    let mut loader = None;
    let mut changed = false;
    // The ranges are for this program only (its real file's name, as the
    // shim reads it from /proc/self/exe).
    let real = exe.canonicalize().unwrap_or_else(|_| exe.to_path_buf());
    let program = real
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let mut out = String::with_capacity(text.len());
    for (number, line) in text.lines().enumerate() {
        let code = line.split('#').next().unwrap_or("");
        let value = code
            .split_once('=')
            .filter(|(key, _)| key.trim() == "sites")
            .map(|(_, value)| value);
        let Some(value) = value.filter(|v| v.split(',').any(|i| file_line(i.trim()).is_some()))
        else {
            out.push_str(line);
            out.push('\n');
            continue;
        };
        let loader = match &loader {
            Some(l) => l,
            None => loader.insert(addr2line::Loader::new(exe).map_err(|e| {
                format!(
                    "policy line {}: cannot read {} to find its lines: {e}",
                    number + 1,
                    exe.display()
                )
            })?),
        };
        let mut items: Vec<String> = Vec::new();
        for item in value.split(',').map(str::trim) {
            let Some(wanted) = file_line(item) else {
                items.push(item.to_string());
                continue;
            };
            let ranges = ranges_of(loader, wanted)
                .map_err(|e| format!("policy line {}: {}: {e}", number + 1, exe.display()))?;
            if ranges.is_empty() {
                return Err(format!(
                    "policy line {}: no code at {item} in {} (is it built with -g, and does that line hold code?)",
                    number + 1,
                    exe.display()
                ));
            }
            items.extend(
                ranges
                    .iter()
                    .map(|(lo, hi)| format!("{program}@{lo:#x}-{hi:#x}")),
            );
        }
        let value = items.join(", ");
        if value.len() > LIST_MAX {
            return Err(format!(
                "policy line {}: its lines resolve to {} address ranges ({} bytes), more than a site list holds ({LIST_MAX} bytes): name fewer lines, or their functions",
                number + 1,
                items.len(),
                value.len()
            ));
        }
        changed = true;
        out.push_str(&format!(
            "sites = {value}  # resolved by locksuit run from: {}\n",
            code.split_once('=').map_or("", |(_, v)| v).trim()
        ));
    }
    Ok(changed.then_some(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_told_from_functions() {
        assert_eq!(file_line("cells.c:42"), Some(("cells.c", 42)));
        assert_eq!(file_line("src/a.cpp:7"), Some(("src/a.cpp", 7)));
        assert_eq!(file_line("worker*"), None);
        assert_eq!(file_line("std::mutex"), None);
        assert_eq!(file_line("a.c:0"), None);
        assert!(names("/w/src/cells.c", "cells.c"));
        assert!(names("/w/src/cells.c", "src/cells.c"));
        assert!(!names("/w/src/mycells.c", "cells.c"));
    }

    #[test]
    fn a_policy_without_lines_is_left_as_it_is() {
        let text = "sites = worker*\nmin_wait_us = 10\n";
        assert_eq!(resolve(text, Path::new("/nonexistent")), Ok(None));
    }
}
