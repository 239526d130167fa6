//! Lines in words, and the lines that made locks inside helpers: a site is
//! named by its first line in the program's own code; locks made in a
//! helper that several lines call are named, and grouped into families, by
//! the line that called it (see names.rs for the names built from these).

use crate::model::frames::{first_own_frame, is_python_frame};
use crate::model::Frame;
use rustc_hash::FxHashMap;
use std::collections::{BTreeSet, HashMap};

/// A line's name: `function@file:line`, or `module+0xoffset` without
/// symbols (see above).
pub fn line_name(chain: &[Frame]) -> String {
    let Some(own) = chain.get(first_own_frame(chain)) else {
        return "unknown".to_string();
    };
    match (&own.function, &own.file, own.line) {
        (Some(f), Some(file), Some(line)) => format!("{f}@{file}:{line}"),
        (Some(f), _, _) => f.clone(),
        _ => own.offset.clone().unwrap_or_else(|| own.address.clone()),
    }
}

/// Origins (chain indexes) from here up name the caller of a helper that
/// made the lock (see [`made_by_helpers`]).
pub const MADE_BY_HELPER: u32 = 1 << 30;

/// The raw origin sites of locks made inside a helper that several lines
/// call, each mapped to its caller's line (an index into `callers`).
#[derive(Default)]
pub struct HelperMade {
    by_raw: FxHashMap<u32, u32>,
    pub callers: Vec<String>,
}

impl HelperMade {
    pub fn get(&self, raw: &u32) -> Option<&u32> {
        self.by_raw.get(raw)
    }
}

pub fn made_by_helpers(
    locks: &[locksuit_format::LockRecord],
    line_of_raw: &FxHashMap<u32, usize>,
    caller_line_of_raw: &FxHashMap<u32, String>,
) -> HelperMade {
    // Per line that made locks, the lines that called it.
    let mut callers: FxHashMap<usize, BTreeSet<&str>> = FxHashMap::default();
    for l in locks.iter().filter(|l| l.origin_site != 0) {
        if let (Some(&line), Some(caller)) = (
            line_of_raw.get(&l.origin_site),
            caller_line_of_raw.get(&l.origin_site),
        ) {
            callers.entry(line).or_default().insert(caller);
        }
    }
    let mut out = HelperMade::default();
    let mut index: HashMap<&str, u32> = HashMap::new();
    for l in locks.iter().filter(|l| l.origin_site != 0) {
        let Some(line) = line_of_raw.get(&l.origin_site) else {
            continue;
        };
        if callers.get(line).is_none_or(|c| c.len() < 2) {
            continue; // one caller (or none known): the line itself names them
        }
        let Some(caller) = caller_line_of_raw.get(&l.origin_site) else {
            continue;
        };
        let next = out.callers.len() as u32;
        let i = *index.entry(caller.as_str()).or_insert(next);
        if i == next {
            out.callers.push(caller.clone());
        }
        out.by_raw.insert(l.origin_site, i);
    }
    out
}

/// The line that called a line's function, in the program's own code
/// (`function@file:line`), if known.
pub fn caller_line(chain: &[Frame]) -> Option<String> {
    let first = first_own_frame(chain);
    callers_of(chain, first)?
        .iter()
        .filter(|f| {
            f.module
                .as_deref()
                .is_some_and(|m| !crate::model::frames::is_system_module(m))
        })
        .find(|f| f.function.is_some() || f.offset.is_some())
        .map(|f| match (&f.function, &f.file, f.line) {
            (Some(func), Some(file), Some(line)) => format!("{func}@{file}:{line}"),
            (Some(func), _, _) => func.clone(),
            _ => f.offset.clone().unwrap_or_else(|| f.address.clone()),
        })
}

/// The frames that may have called frame `first`: those above it, and
/// for a `.py` line only the `.py` lines above it. A chain lists the
/// Python frames first, then the native ones from the innermost: what
/// follows the outermost `.py` line is the interpreter's call into the
/// lock function, not its caller (a lock made at one `.py` line through
/// two C functions was taken for a helper's, named by the C function).
fn callers_of(chain: &[Frame], first: usize) -> Option<&[Frame]> {
    let own = chain.get(first)?;
    let above = &chain[first + 1..];
    if !is_python_frame(own) {
        return Some(above);
    }
    let python = above.iter().take_while(|f| is_python_frame(f)).count();
    Some(&above[..python])
}

/// The function that called a line's function, when that is the
/// program's own code too (a helper's caller).
pub fn line_caller(chain: &[Frame]) -> Option<String> {
    let first = first_own_frame(chain);
    let own = chain.get(first)?;
    callers_of(chain, first)?
        .iter()
        .filter(|f| {
            f.module
                .as_deref()
                .is_some_and(|m| !crate::model::frames::is_system_module(m))
        })
        .find_map(|f| {
            f.function
                .clone()
                .filter(|name| Some(name) != own.function.as_ref())
        })
        // The program's entry point calls main: saying so tells nothing.
        .filter(|name| name != "_start")
}
