//! Finding and reading traces named on the command line.

use crate::input::mapped::WatchedMap;
use locksuit_format::{read_trace_indexed, BlockIndex, Trace, TraceError};
use std::fs::File;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A user-facing error: one line, naming the file and the problem.
#[derive(Debug)]
pub struct InputError(pub String);

impl std::fmt::Display for InputError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<TraceError> for InputError {
    fn from(e: TraceError) -> Self {
        InputError(e.to_string())
    }
}

pub fn is_trace_name(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("locksuit.") && n.ends_with(".trace"))
}

/// Trace files directly inside `dir`, sorted by name.
pub fn traces_in(dir: &Path) -> Result<Vec<PathBuf>, InputError> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| InputError(format!("{}: cannot list directory: {e}", dir.display())))?;
    let mut found: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| is_trace_name(p) && p.is_file())
        .collect();
    found.sort();
    Ok(found)
}

/// The trace a running process writes: among the files it maps shared
/// (the shim maps its trace so), the locksuit trace whose header names
/// that pid (a child forked a moment ago still maps its parent's). None if
/// there is none (not run under the shim, gone, or another user's process
/// whose mappings cannot be read).
pub fn trace_of_running(pid: u32) -> Option<PathBuf> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    let mut files: Vec<&str> = maps.lines().filter_map(shared_file).collect();
    files.dedup();
    files
        .into_iter()
        .map(PathBuf::from)
        .find(|path| trace_header_pid(path) == Some(pid))
}

/// The file of a shared mapping, from its line in `/proc/PID/maps`
/// ("address perms offset device inode   path"); None for a private or
/// anonymous mapping, or a file deleted since.
fn shared_file(line: &str) -> Option<&str> {
    let mut rest = line;
    let mut perms = "";
    for field in 0..5 {
        rest = rest.trim_start();
        let end = rest.find(' ')?;
        if field == 1 {
            perms = &rest[..end];
        }
        rest = &rest[end..];
    }
    let path = rest.trim_start();
    (perms.contains('s') && path.starts_with('/') && !path.ends_with(" (deleted)")).then_some(path)
}

/// The pid in the header of the locksuit trace at `path`; None if it is
/// not one.
fn trace_header_pid(path: &Path) -> Option<u32> {
    use locksuit_format::{FileHeader, BYTE_ORDER_MARK, MAGIC};
    use std::io::Read;
    // Look before opening: opening a FIFO waits for a writer.
    if !std::fs::metadata(path).ok()?.is_file() {
        return None;
    }
    let mut head = [0u8; core::mem::size_of::<FileHeader>()];
    File::open(path).ok()?.read_exact(&mut head).ok()?;
    let u32_at = |at: usize| {
        let mut b = [0u8; 4];
        b.copy_from_slice(&head[at..at + 4]);
        u32::from_le_bytes(b)
    };
    let trace = head[..8] == MAGIC
        && u32_at(core::mem::offset_of!(FileHeader, byte_order)) == BYTE_ORDER_MARK;
    trace.then(|| u32_at(core::mem::offset_of!(FileHeader, pid)))
}

/// Where `report` and `events` look when no PATH is given:
/// `$LOCKSUIT_DIR`, or else the current directory.
fn default_dir() -> PathBuf {
    std::env::var_os("LOCKSUIT_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// The traces in `dir`, newest first (by modification time, then name).
fn newest_first(dir: &Path) -> Result<Vec<PathBuf>, InputError> {
    let mut dated: Vec<(std::time::SystemTime, PathBuf)> = traces_in(dir)?
        .into_iter()
        .filter_map(|p| Some((p.metadata().ok()?.modified().ok()?, p)))
        .collect();
    dated.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| b.1.cmp(&a.1)));
    if dated.is_empty() {
        return Err(InputError(format!(
            "{}: no locksuit traces (locksuit.*.trace) here; record one with `locksuit run -- CMD` or name a trace",
            dir.display()
        )));
    }
    Ok(dated.into_iter().map(|(_, p)| p).collect())
}

/// Whether a trace recorded any lock activity: a lock, a condition
/// variable or an engagement. A shell or `env` started along the way
/// records none.
pub fn has_lock_activity(trace: &Trace) -> bool {
    !trace.locks.is_empty() || !trace.conds.is_empty() || !trace.counters.is_empty()
}

/// "sample (pid 12)"
fn process_name(trace: &Trace) -> String {
    format!(
        "{} (pid {})",
        crate::base::words::basename(&trace.header.exe),
        trace.header.pid
    )
}

/// Which processes to report: `--exe` and `--pid` (any of the names, and
/// any of the pids; both when both are given). Empty: every one.
#[derive(Clone, Debug, Default)]
pub struct Selection {
    pub exes: Vec<String>,
    pub pids: Vec<u32>,
}

impl Selection {
    pub fn is_empty(&self) -> bool {
        self.exes.is_empty() && self.pids.is_empty()
    }

    /// An executable matches by its full path or by its file name.
    fn matches(&self, trace: &Trace) -> bool {
        let header = &trace.header;
        let exe = header.exe.trim_end_matches(" (deleted)");
        let name = crate::base::words::basename(exe);
        (self.pids.is_empty() || self.pids.contains(&header.pid))
            && (self.exes.is_empty() || self.exes.iter().any(|e| e == exe || e == name))
    }

    fn describe(&self) -> String {
        let mut parts: Vec<String> = self.exes.iter().map(|e| format!("--exe {e}")).collect();
        parts.extend(self.pids.iter().map(|p| format!("--pid {p}")));
        parts.join(" ")
    }
}

/// What a path that is not a regular file is, for the message refusing it.
fn not_regular(file_type: &std::fs::FileType) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    if file_type.is_file() {
        None
    } else if file_type.is_fifo() {
        Some("a FIFO (named pipe)")
    } else if file_type.is_char_device() {
        Some("a character device")
    } else if file_type.is_block_device() {
        Some("a block device")
    } else if file_type.is_socket() {
        Some("a socket")
    } else if file_type.is_dir() {
        Some("a directory")
    } else {
        Some("not a plain file")
    }
}

fn refuse_unless_regular(path: &Path, file_type: &std::fs::FileType) -> Result<(), InputError> {
    match not_regular(file_type) {
        None => Ok(()),
        Some(what) => Err(InputError(format!(
            "{}: {what}, not a regular file; a locksuit trace is a file",
            path.display()
        ))),
    }
}

/// How many times a trace whose size changed while it was read is read
/// again (its process was still writing it, e.g. finishing its exit).
const REREADS: usize = 3;

/// A trace read from a file mapping, which it keeps for its events.
pub struct Mapped {
    pub trace: Trace,
    pub pages: Pages,
    /// Progress on stderr for a large trace, until the caller is done with it.
    pub progress: crate::base::progress::Progress,
}

/// The mapping a trace is read from.
pub struct Pages(Arc<WatchedMap>);

impl Pages {
    /// Lets go of the mapping's pages read so far. The analysis reads a
    /// trace front to back once, and a trace can be far larger than the
    /// report's memory; the kernel would drop the pages under memory
    /// pressure anyway, this keeps them from counting as ours meanwhile.
    pub fn release(&self) {
        self.0.release();
    }
}

/// What earlier reads learned about the blocks of each trace read again
/// and again while it is written (`--follow`, `top`), by file.
#[derive(Default)]
pub struct LiveIndexes(std::collections::HashMap<(u64, u64), BlockIndex>);

impl LiveIndexes {
    /// A reader has read the events of the trace with `identity` (pid,
    /// start_unix_ns, start_mono_ns) up to `positions`: later reads leave
    /// out the blocks before them (see [`BlockIndex::forget_read`]).
    pub fn forget_read(
        &mut self,
        identity: (u32, u64, u64),
        positions: &locksuit_format::events::LanePositions,
    ) {
        for index in self.0.values_mut().filter(|i| i.describes(identity)) {
            index.forget_read(positions);
        }
    }

    fn of(&mut self, file: &File) -> Option<&mut BlockIndex> {
        use std::os::unix::fs::MetadataExt;
        let meta = file.metadata().ok()?;
        Some(self.0.entry((meta.dev(), meta.ino())).or_default())
    }
}

/// Reads one trace file.
pub fn read(path: &Path) -> Result<Mapped, InputError> {
    read_again(path, None)
}

/// Reads one trace file, with what earlier reads of it learned if `live`.
fn read_again(path: &Path, mut live: Option<&mut LiveIndexes>) -> Result<Mapped, InputError> {
    // Look before opening: opening a FIFO waits for a writer, and opening a
    // device may do something.
    let meta = std::fs::metadata(path).map_err(|e| {
        InputError(match e.kind() {
            std::io::ErrorKind::NotFound => {
                format!("{}: no such file or directory", path.display())
            }
            _ => format!("{}: cannot open: {e}", path.display()),
        })
    })?;
    refuse_unless_regular(path, &meta.file_type())?;
    // Non-blocking, in case the name was swapped for a FIFO since; checked
    // again on what was actually opened.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| InputError(format!("{}: cannot open: {e}", path.display())))?;
    let stat = |file: &File| {
        file.metadata()
            .map_err(|e| InputError(format!("{}: cannot stat: {e}", path.display())))
    };
    let meta = stat(&file)?;
    refuse_unless_regular(path, &meta.file_type())?;
    let mut len = meta.len();
    let mut rereads = 0;
    let progress = crate::base::progress::Progress::for_trace(path, len);
    loop {
        if len == 0 {
            return Err(InputError(format!(
                "{}: empty file, not a locksuit trace (the process may have died before writing its header)",
                path.display()
            )));
        }
        let len_usize = usize::try_from(len)
            .map_err(|_| InputError(format!("{}: too large to map", path.display())))?;
        let map = crate::input::mapped::map(&file, len_usize, path)
            .map_err(|e| InputError(format!("{}: cannot map: {e}", path.display())))?;
        // Read front to back once: let the kernel read ahead and drop behind.
        let _ = map.advise(memmap2::Advice::Sequential);
        // The trace keeps the mapping: its events are read from it in place.
        let pages = Pages(Arc::new(map));
        // The reader lets go of the pages it has read every few MiB: reading
        // the records touches every block of the trace (and the kernel maps
        // the neighbours of each page read along with it), so otherwise the
        // whole file would count as the analyzer's memory until the end.
        let mut fresh = BlockIndex::default();
        let index = match live.as_deref_mut().and_then(|l| l.of(&file)) {
            Some(index) => index,
            None => &mut fresh,
        };
        let read = read_trace_indexed(path, pages.0.clone(), &mut || pages.release(), index);
        pages.release();
        match read {
            Ok(trace) => {
                return Ok(Mapped {
                    trace,
                    pages,
                    progress,
                })
            }
            Err(e) => {
                // A finished trace that looked cut may just have grown after
                // it was mapped (threads still writing while the process
                // exits): if the size moved, read it again.
                let now = stat(&file)?.len();
                if now == len || rereads == REREADS {
                    return Err(e.into());
                }
                rereads += 1;
                len = now;
            }
        }
    }
}

/// The files already taken, by device and inode.
#[derive(Default)]
struct Seen(std::collections::HashSet<(u64, u64)>);

impl Seen {
    /// True the first time `path`'s file is offered (and for a path that
    /// cannot be looked up, whose reading then says why).
    fn first_time(&mut self, path: &Path) -> bool {
        use std::os::unix::fs::MetadataExt;
        match std::fs::metadata(path) {
            Ok(m) => self.0.insert((m.dev(), m.ino())),
            Err(_) => true,
        }
    }
}

/// Walks what the command line names, handing each selected trace on.
struct Walk<'a, F: FnMut(&Path, Mapped)> {
    selection: &'a Selection,
    /// Set when the traces are read again and again (see [`for_each_live`]).
    live: Option<&'a mut LiveIndexes>,
    each: F,
    seen: Seen,
    /// Traces that could not be read, and why.
    skipped: Vec<String>,
    /// Processes read but not selected, by name.
    unselected: Vec<String>,
    /// Processes handed on.
    taken: usize,
}

impl<F: FnMut(&Path, Mapped)> Walk<'_, F> {
    /// Hands `mapped` on if the selection takes it.
    fn offer(&mut self, path: &Path, mapped: Mapped) {
        if self.selection.matches(&mapped.trace) {
            self.taken += 1;
            (self.each)(path, mapped);
        } else {
            self.unselected.push(process_name(&mapped.trace));
        }
    }

    /// A file named on the command line: it must be readable.
    fn file(&mut self, path: &Path) -> Result<(), InputError> {
        if self.seen.first_time(path) {
            crate::base::oom::working_on(Some(path));
            let mapped = read_again(path, self.live.as_deref_mut())?;
            self.offer(path, mapped);
        }
        Ok(())
    }

    /// Every trace in a directory; unreadable ones are skipped, unless
    /// none is readable.
    fn directory(&mut self, dir: &Path, found: Vec<PathBuf>) -> Result<(), InputError> {
        if found.is_empty() {
            return Err(InputError(format!(
                "{}: no locksuit traces (locksuit.*.trace) in this directory",
                dir.display()
            )));
        }
        let mut readable = 0;
        let mut first_error = None;
        for trace_path in found {
            if !self.seen.first_time(&trace_path) {
                readable += 1;
                continue;
            }
            crate::base::oom::working_on(Some(&trace_path));
            match read_again(&trace_path, self.live.as_deref_mut()) {
                Ok(t) => {
                    readable += 1;
                    self.offer(&trace_path, t);
                }
                Err(e) => {
                    first_error.get_or_insert_with(|| e.0.clone());
                    self.skipped.push(e.0);
                }
            }
        }
        if readable == 0 {
            return Err(InputError(first_error.unwrap_or_default()));
        }
        Ok(())
    }

    /// No PATH and no selection: the newest trace in the default directory
    /// that recorded any lock activity (or the newest of all, if none did),
    /// said on stderr, with the newer ones that recorded nothing.
    fn newest_active(&mut self, dir: &Path) -> Result<(), InputError> {
        let candidates = newest_first(dir)?;
        let total = candidates.len();
        let mut idle: Vec<String> = Vec::new();
        let mut newest_idle: Option<(PathBuf, Mapped)> = None;
        let mut first_error = None;
        for path in candidates {
            crate::base::oom::working_on(Some(&path));
            let mapped = match read_again(&path, self.live.as_deref_mut()) {
                Ok(m) => m,
                Err(e) => {
                    first_error.get_or_insert_with(|| e.0.clone());
                    self.skipped.push(e.0);
                    continue;
                }
            };
            if !has_lock_activity(&mapped.trace) {
                idle.push(process_name(&mapped.trace));
                newest_idle.get_or_insert((path, mapped));
                continue;
            }
            let newer = if idle.is_empty() {
                String::new()
            } else {
                format!("; newer traces that recorded none: {}", idle.join(", "))
            };
            if crate::base::progress::stderr_free() {
                eprintln!(
                    "locksuit: reporting on {}, the newest trace in {} with lock activity{newer}",
                    path.display(),
                    dir.display()
                );
            }
            (self.each)(&path, mapped);
            return Ok(());
        }
        let Some((newest, mapped)) = newest_idle else {
            return Err(InputError(first_error.unwrap_or_default()));
        };
        if crate::base::progress::stderr_free() {
            eprintln!(
            "locksuit: none of the {total} traces in {} recorded lock activity; reporting on the newest, {}",
            dir.display(),
            newest.display()
        );
        }
        (self.each)(&newest, mapped);
        Ok(())
    }
}

/// What the command line names, one trace at a time (only one is in
/// memory at once): files are taken as they are (and must be readable),
/// directories contribute every trace inside them (unreadable ones are
/// skipped, unless none is readable). A file named more than once,
/// directly or through its directory, a symlink or a hard link, is read
/// once. With no PATH, the default directory (see [`default_dir`]): the
/// newest trace there with lock activity, or, with a selection, every trace
/// there. Only the processes `selection` takes are handed on; if it takes
/// none, that is an error naming the processes there were. Returns what was
/// skipped and why.
pub fn for_each(
    paths: &[PathBuf],
    selection: &Selection,
    each: impl FnMut(&Path, Mapped),
) -> Result<Vec<String>, InputError> {
    walk(paths, selection, None, each)
}

/// [`for_each`] for a reader that reads the same live traces again and
/// again: each read touches only the blocks that may have changed since
/// the last one (`live` keeps what was learned).
pub fn for_each_live(
    paths: &[PathBuf],
    selection: &Selection,
    live: &mut LiveIndexes,
    each: impl FnMut(&Path, Mapped),
) -> Result<Vec<String>, InputError> {
    walk(paths, selection, Some(live), each)
}

fn walk(
    paths: &[PathBuf],
    selection: &Selection,
    live: Option<&mut LiveIndexes>,
    each: impl FnMut(&Path, Mapped),
) -> Result<Vec<String>, InputError> {
    let mut walk = Walk {
        selection,
        live,
        each,
        seen: Seen::default(),
        skipped: Vec::new(),
        unselected: Vec::new(),
        taken: 0,
    };
    if paths.is_empty() {
        let dir = default_dir();
        if selection.is_empty() {
            walk.newest_active(&dir)?;
        } else {
            let found = newest_first(&dir)?;
            walk.directory(&dir, found)?;
        }
    }
    for path in paths {
        if path.is_dir() {
            let found = traces_in(path)?;
            walk.directory(path, found)?;
        } else {
            walk.file(path)?;
        }
    }
    crate::base::oom::working_on(None);
    if !selection.is_empty() && walk.taken == 0 {
        let mut recorded = walk.unselected.clone();
        recorded.sort();
        recorded.dedup();
        let shown = recorded.len().min(8);
        let more = if recorded.len() > shown { ", …" } else { "" };
        return Err(InputError(format!(
            "no recorded process matches {} (recorded: {}{more})",
            selection.describe(),
            recorded[..shown].join(", ")
        )));
    }
    Ok(walk.skipped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_shared_mappings_of_existing_files_are_trace_candidates() {
        let maps = "\
7f00-7f10 rw-s 00000000 08:01 123    /runs/a dir/locksuit.app.12.trace
7f10-7f20 r-xp 00000000 08:01 456    /usr/lib/libc.so.6
7f20-7f30 rw-s 00000000 00:00 0 
7f30-7f40 rw-s 00000000 08:01 789    /runs/locksuit.app.12.1.trace (deleted)
7f40-7f50 rw-p 00000000 00:00 0      [heap]";
        let files: Vec<&str> = maps.lines().filter_map(shared_file).collect();
        assert_eq!(files, ["/runs/a dir/locksuit.app.12.trace"]);
    }

    #[test]
    fn a_file_is_a_trace_of_a_pid_only_with_the_magic_and_that_pid_in_its_header() {
        use locksuit_format::{FileHeader, BYTE_ORDER_MARK, MAGIC};
        let dir = std::env::temp_dir().join(format!("locksuit-load-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut head = vec![0u8; core::mem::size_of::<FileHeader>()];
        head[..8].copy_from_slice(&MAGIC);
        let byte_order = core::mem::offset_of!(FileHeader, byte_order);
        head[byte_order..byte_order + 4].copy_from_slice(&BYTE_ORDER_MARK.to_le_bytes());
        let pid = core::mem::offset_of!(FileHeader, pid);
        head[pid..pid + 4].copy_from_slice(&4242u32.to_le_bytes());
        let trace = dir.join("trace");
        std::fs::write(&trace, &head).unwrap();
        assert_eq!(trace_header_pid(&trace), Some(4242));
        head[0] = b'X';
        std::fs::write(&trace, &head).unwrap();
        assert_eq!(trace_header_pid(&trace), None);
        std::fs::write(&trace, b"LOCKSUIT").unwrap();
        assert_eq!(trace_header_pid(&trace), None, "too short for a header");
        assert_eq!(trace_header_pid(&dir), None, "a directory");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
