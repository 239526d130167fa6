//! Finding and reading traces named on the command line.

use crate::mapped::WatchedMap;
use locksuit_format::{read_trace_shared, Trace, TraceError};
use std::fs::File;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
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

/// The newest trace in `$LOCKSUIT_DIR`, or else in the current directory.
pub fn default_trace() -> Result<PathBuf, InputError> {
    let dir = std::env::var_os("LOCKSUIT_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));
    let newest = traces_in(&dir)?
        .into_iter()
        .filter_map(|p| Some((p.metadata().ok()?.modified().ok()?, p)))
        .max_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(&b.1)))
        .map(|(_, p)| p);
    newest.ok_or_else(|| {
        InputError(format!(
            "{}: no locksuit traces (locksuit.*.trace) here; record one with `locksuit run -- CMD` or name a trace",
            dir.display()
        ))
    })
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

    /// Runs `read` while a helper thread lets go of the pages every few
    /// milliseconds, and once more after it. Reading a trace's records
    /// touches every block of it (the kernel maps the neighbours of each page
    /// read along with it), so without this the whole file would count as
    /// the analyzer's memory until the end of the read.
    fn while_releasing<T>(&self, read: impl FnOnce() -> T) -> T {
        let done = AtomicBool::new(false);
        let result = std::thread::scope(|scope| {
            let releaser = std::thread::Builder::new()
                .name("release-pages".into())
                .stack_size(64 * 1024)
                .spawn_scoped(scope, || {
                    while !done.load(Ordering::Relaxed) {
                        std::thread::sleep(RELEASE_EVERY);
                        self.release();
                    }
                });
            // Without the helper (no thread to be had) the read is the same.
            let result = read();
            done.store(true, Ordering::Relaxed);
            if let Ok(releaser) = releaser {
                // It only sleeps and calls madvise: it cannot panic.
                let _ = releaser.join();
            }
            result
        });
        self.release();
        result
    }
}

/// How often pages are let go of while a trace is read: the reader maps
/// some 2 GB/s, so a few MB stay mapped at a time. (Measured on a 345,600-
/// lock, 388 MiB trace: every 1 ms kept the peak steady, every 5 or 10 ms
/// let it wander by 50 to 150 MB.)
const RELEASE_EVERY: std::time::Duration = std::time::Duration::from_millis(1);

/// Reads one trace file.
pub fn read(path: &Path) -> Result<Mapped, InputError> {
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
    loop {
        if len == 0 {
            return Err(InputError(format!(
                "{}: empty file, not a locksuit trace (the process may have died before writing its header)",
                path.display()
            )));
        }
        let len_usize = usize::try_from(len)
            .map_err(|_| InputError(format!("{}: too large to map", path.display())))?;
        let map = crate::mapped::map(&file, len_usize, path)
            .map_err(|e| InputError(format!("{}: cannot map: {e}", path.display())))?;
        // Read front to back once: let the kernel read ahead and drop behind.
        let _ = map.advise(memmap2::Advice::Sequential);
        // The trace keeps the mapping: its events are read from it in place.
        let pages = Pages(Arc::new(map));
        match pages.while_releasing(|| read_trace_shared(path, pages.0.clone())) {
            Ok(trace) => return Ok(Mapped { trace, pages }),
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

/// What the command line names, one trace at a time (only one is in
/// memory at once): files are taken as they are (and must be readable),
/// directories contribute every trace inside them (unreadable ones are
/// skipped, unless none is readable). A file named more than once,
/// directly or through its directory, a symlink or a hard link, is read
/// once. Returns what was skipped and why.
pub fn for_each(
    paths: &[PathBuf],
    mut each: impl FnMut(&Path, Mapped),
) -> Result<Vec<String>, InputError> {
    let mut skipped = Vec::new();
    let paths = if paths.is_empty() {
        vec![default_trace()?]
    } else {
        paths.to_vec()
    };
    let mut seen = Seen::default();
    for path in &paths {
        if path.is_dir() {
            let found = traces_in(path)?;
            if found.is_empty() {
                return Err(InputError(format!(
                    "{}: no locksuit traces (locksuit.*.trace) in this directory",
                    path.display()
                )));
            }
            let mut readable = 0;
            let mut first_error = None;
            for trace_path in found {
                if !seen.first_time(&trace_path) {
                    readable += 1;
                    continue;
                }
                crate::oom::working_on(Some(&trace_path));
                match read(&trace_path) {
                    Ok(t) => {
                        readable += 1;
                        each(&trace_path, t);
                    }
                    Err(e) => {
                        first_error.get_or_insert_with(|| e.0.clone());
                        skipped.push(e.0);
                    }
                }
            }
            if readable == 0 {
                return Err(InputError(first_error.unwrap_or_default()));
            }
        } else if seen.first_time(path) {
            crate::oom::working_on(Some(path));
            each(path, read(path)?);
        }
    }
    crate::oom::working_on(None);
    Ok(skipped)
}
