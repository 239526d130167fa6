//! Where a trace goes: its directory (created like `mkdir -p`, mode 0700),
//! its name (`locksuit.<exe>.<pid>[.N].trace`, shortened to fit the file
//! name limit), created fresh (never overwriting, never through a symlink)
//! with mode 0600 whatever the umask.

use crate::config;
use crate::diag::{warn_once, Warning};
use crate::sys;

/// A small path builder over a stack buffer (the shim never allocates).
pub struct PathBuf {
    buf: [u8; PATH_CAPACITY],
    len: usize,
}

const PATH_CAPACITY: usize = 4096 + 256;
/// The longest file name most file systems accept (NAME_MAX).
const NAME_MAX: usize = 255;

impl Default for PathBuf {
    fn default() -> Self {
        Self::new()
    }
}

impl PathBuf {
    pub const fn new() -> Self {
        PathBuf {
            buf: [0; PATH_CAPACITY],
            len: 0,
        }
    }

    pub fn push(&mut self, bytes: &[u8]) -> &mut Self {
        // Keep one byte for the terminating NUL.
        let n = bytes.len().min(self.buf.len() - 1 - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&bytes[..n]);
        self.len += n;
        self
    }

    pub fn push_u32(&mut self, v: u32) -> &mut Self {
        self.push(crate::text::format_u32(v, &mut [0; 10]))
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    pub fn truncate(&mut self, len: usize) {
        self.len = len.min(self.len);
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The path as a C string, for system calls (cut at an interior NUL).
    pub fn c_str(&mut self) -> &core::ffi::CStr {
        self.buf[self.len] = 0;
        core::ffi::CStr::from_bytes_until_nul(&self.buf[..=self.len]).unwrap_or_default()
    }
}

/// Creates `dir` and any missing parents, each new one with mode 0700
/// (set explicitly: the umask must not make it unusable, nor wider).
fn make_dirs(dir: &PathBuf) {
    let path = dir.as_bytes();
    let ends = path
        .iter()
        .enumerate()
        .skip(1)
        .filter(|&(_, &b)| b == b'/')
        .map(|(i, _)| i)
        .chain(core::iter::once(path.len()));
    for end in ends {
        let mut prefix = PathBuf::new();
        prefix.push(&path[..end]);
        let p = prefix.c_str();
        if sys::mkdir(p, 0o700).is_ok() {
            let _ = sys::chmod(p, 0o700);
        }
    }
}

/// The program's file name, shortened so `locksuit.<name>.<pid>.<N>.trace`
/// stays within NAME_MAX.
fn base_name(exe: &[u8]) -> &[u8] {
    // A program whose file was replaced after exec reads as "… (deleted)";
    // the trace is still named after the program.
    let exe = exe.strip_suffix(b" (deleted)").unwrap_or(exe);
    let name = match exe.iter().rposition(|&b| b == b'/') {
        Some(i) => &exe[i + 1..],
        None if exe.is_empty() => b"unknown",
        None => exe,
    };
    // "locksuit." + name + "." + pid (10) + "." + attempt (2) + ".trace"
    const FIXED: usize = 9 + 1 + 10 + 1 + 2 + 6;
    &name[..name.len().min(NAME_MAX - FIXED)]
}

/// Opens a fresh trace (never overwriting) in the first usable directory;
/// returns the descriptor and the absolute path it was created at.
pub fn open_trace_file(exe: &[u8]) -> Option<(i32, PathBuf)> {
    let base_name = base_name(exe);
    let mut dir = PathBuf::new();
    let mut explicit = false;
    if let Some(d) = config::getenv(c"LOCKSUIT_DIR").filter(|d| !d.is_empty()) {
        explicit = true;
        absolute(&mut dir, d);
        make_dirs(&dir);
    } else {
        absolute(&mut dir, b".");
    }
    if let Some(fd) = try_open_in(&mut dir, base_name) {
        return Some((fd, dir));
    }
    // Fall back to $TMPDIR or /tmp.
    let mut tmp = PathBuf::new();
    absolute(
        &mut tmp,
        config::getenv(c"TMPDIR")
            .filter(|d| !d.is_empty())
            .unwrap_or(b"/tmp"),
    );
    let fd = try_open_in(&mut tmp, base_name)?;
    let mut msg = PathBuf::new();
    msg.push(if explicit {
        b"cannot write a trace in LOCKSUIT_DIR; writing it to ".as_slice()
    } else {
        b"cannot write a trace in the current directory; writing it to ".as_slice()
    })
    .push(tmp.as_bytes());
    warn_once(Warning::FallbackDir, msg.as_bytes());
    Some((fd, tmp))
}

/// `path` made absolute against the current directory, so the trace can be
/// found again (to reopen it) after the program changes directory.
fn absolute(out: &mut PathBuf, path: &[u8]) {
    if path.first() != Some(&b'/') {
        let mut cwd = [0u8; 4096];
        if let Ok(n) = sys::getcwd(&mut cwd) {
            // The kernel's length counts the terminating NUL.
            let n = cwd[..n].iter().position(|&b| b == 0).unwrap_or(n);
            out.push(&cwd[..n]);
            if path == b"." {
                return;
            }
            out.push(b"/");
        }
    }
    out.push(path);
}

fn try_open_in(dir: &mut PathBuf, base_name: &[u8]) -> Option<i32> {
    let pid = crate::sys::getpid().unwrap_or(0);
    dir.push(b"/locksuit.")
        .push(base_name)
        .push(b".")
        .push_u32(pid);
    let stem = dir.len();
    for attempt in 0..100u32 {
        dir.truncate(stem);
        if attempt > 0 {
            dir.push(b".").push_u32(attempt);
        }
        dir.push(b".trace");
        let flags =
            libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        match sys::open(dir.c_str(), flags, 0o600) {
            Ok(fd) => {
                // 0600 whatever the umask: the user must be able to read it,
                // and nobody else.
                let _ = sys::fchmod(fd, 0o600);
                return Some(fd);
            }
            Err(libc::EEXIST) => continue,
            Err(_) => return None,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_program_names_are_shortened_to_fit_a_file_name() {
        let long = [b'x'; 300];
        let name = base_name(&long);
        assert!(9 + name.len() + 1 + 10 + 1 + 2 + 6 <= NAME_MAX);
        assert_eq!(base_name(b"/usr/bin/app (deleted)"), b"app");
        assert_eq!(base_name(b""), b"unknown");
    }

    #[test]
    fn missing_parents_are_created_0700() {
        let mut root = PathBuf::new();
        root.push(b"/tmp/locksuit-path-test-")
            .push_u32(std::process::id());
        let root_str = std::str::from_utf8(root.as_bytes()).unwrap().to_string();
        let _ = std::fs::remove_dir_all(&root_str);
        let mut dir = PathBuf::new();
        dir.push(root.as_bytes()).push(b"/a/b");
        make_dirs(&dir);
        use std::os::unix::fs::PermissionsExt;
        for p in [root_str.clone(), format!("{root_str}/a/b")] {
            let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o700, "{p}");
        }
        std::fs::remove_dir_all(&root_str).unwrap();
    }
}
