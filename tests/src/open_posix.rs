//! The Open POSIX Test Suite (from the Linux Test Project), as kept next
//! to this repository for the conformance run (tests/tests/conformance.rs):
//! where it is, its tests, building them, and what a test's exit says.

use crate::workspace_root;
use std::collections::hash_map::DefaultHasher;
use std::fmt;
use std::fs;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::SystemTime;

/// The compiler flags the suite's README gives.
const CFLAGS: &[&str] = &["-std=gnu99", "-O1", "-D_GNU_SOURCE", "-w"];
const LIBS: &[&str] = &["-pthread", "-lrt", "-lm"];

/// The suite's directory: `LOCKSUIT_CONFORMANCE_DIR`, or by default
/// `<root>/../shared/conformance/open_posix_testsuite`. `None` (having said
/// so) when it is not there.
pub fn suite_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("LOCKSUIT_CONFORMANCE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("../shared/conformance/open_posix_testsuite"));
    if dir.join("conformance/interfaces").is_dir() {
        Some(fs::canonicalize(&dir).unwrap_or(dir))
    } else {
        println!(
            "SKIPPED: no Open POSIX Test Suite at {} (set LOCKSUIT_CONFORMANCE_DIR)",
            dir.display()
        );
        None
    }
}

/// One test: one C file.
#[derive(Clone, Debug)]
pub struct SuiteTest {
    /// Its path under `conformance/interfaces`, without `.c`:
    /// `pthread_mutex_lock/1-1`, `pthread_key_create/speculative/5-1`.
    pub name: String,
    pub source: PathBuf,
}

impl SuiteTest {
    /// The name of its binary (and so of its traces): the name with `_`
    /// for `/`.
    pub fn bin_name(&self) -> String {
        self.name.replace('/', "_")
    }

    /// Whether it uses system-wide names (`sem_open`, `shm_open`, …),
    /// many of them fixed: two such runs at once would trip on each other.
    pub fn uses_named_objects(&self) -> bool {
        let text = fs::read_to_string(&self.source).unwrap_or_default();
        [
            "sem_open",
            "sem_unlink",
            "shm_open",
            "shm_unlink",
            "mq_open",
        ]
        .iter()
        .any(|f| text.contains(f))
    }
}

/// Every test of the suite: the files named `N-M.c` under
/// `conformance/interfaces` (helper sources such as `testfrmw/testfrmw.c`
/// are not tests), sorted by name.
pub fn suite_tests(suite: &Path) -> Vec<SuiteTest> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<SuiteTest>) {
        let Ok(entries) = fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let path = e.path();
            if path.is_dir() {
                walk(root, &path, out);
                continue;
            }
            let Some(stem) = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_suffix(".c"))
            else {
                continue;
            };
            let is_test = stem
                .split_once('-')
                .is_some_and(|(a, b)| is_number(a) && is_number(b));
            if is_test {
                let rel = path.strip_prefix(root).expect("under the root");
                let name = rel.with_extension("").to_string_lossy().into_owned();
                out.push(SuiteTest { name, source: path });
            }
        }
    }
    fn is_number(s: &str) -> bool {
        !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
    }
    let root = suite.join("conformance/interfaces");
    let mut tests = Vec::new();
    walk(&root, &root, &mut tests);
    tests.sort_by(|a, b| a.name.cmp(&b.name));
    tests
}

fn mtime(p: &Path) -> Option<SystemTime> {
    fs::metadata(p).and_then(|m| m.modified()).ok()
}

/// The newest modification time of the files directly in `dir`.
fn newest_in(dir: &Path) -> Option<SystemTime> {
    fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter_map(|e| mtime(&e.path()))
        .max()
}

/// Built binaries live under `<root>/target/conformance/<key>/`, the key
/// naming the compiler, the flags and the suite, so a change to any of
/// them builds afresh.
pub fn cache_dir(suite: &Path, cc: &str) -> PathBuf {
    let mut h = DefaultHasher::new();
    (cc, CFLAGS, LIBS, suite).hash(&mut h);
    workspace_root()
        .join("target/conformance")
        .join(format!("{:016x}", h.finish()))
}

/// What building the suite gave.
pub struct Built {
    /// Tests that built, with their binary.
    pub built: Vec<(SuiteTest, PathBuf)>,
    /// Tests that did not build, with the compiler's first error line.
    pub failed: Vec<(SuiteTest, String)>,
}

/// Builds every test of the suite, `jobs` at a time, with the README's
/// command. A binary newer than its source, the files next to it, the
/// suite's `include/`, `lib/` and `conformance/interfaces/testfrmw/` is
/// kept. Failures are not kept: they are quick to find again, and a file
/// added to the suite later (say `testfrmw/`) must be seen.
pub fn build_suite(suite: &Path, tests: &[SuiteTest], jobs: usize) -> Built {
    let cc = std::env::var("CC").unwrap_or_else(|_| "gcc".to_string());
    let out_dir = cache_dir(suite, &cc).join("bin");
    fs::create_dir_all(&out_dir).expect("create the conformance cache");
    let shared_newest = [
        newest_in(&suite.join("include")),
        newest_in(&suite.join("lib")),
        newest_in(&suite.join("conformance/interfaces/testfrmw")),
    ]
    .into_iter()
    .flatten()
    .max();
    let next = AtomicUsize::new(0);
    let results: Vec<Result<PathBuf, String>> = thread::scope(|s| {
        let workers: Vec<_> = (0..jobs.max(1))
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(t) = tests.get(i) else { break };
                        mine.push((i, build_one(suite, t, &cc, &out_dir, shared_newest)));
                    }
                    mine
                })
            })
            .collect();
        let mut all: Vec<_> = workers
            .into_iter()
            .flat_map(|w| w.join().expect("build worker"))
            .collect();
        all.sort_by_key(|(i, _)| *i);
        all.into_iter().map(|(_, r)| r).collect()
    });
    let mut built = Built {
        built: Vec::new(),
        failed: Vec::new(),
    };
    for (t, r) in tests.iter().zip(results) {
        match r {
            Ok(bin) => built.built.push((t.clone(), bin)),
            Err(why) => built.failed.push((t.clone(), why)),
        }
    }
    built
}

fn build_one(
    suite: &Path,
    t: &SuiteTest,
    cc: &str,
    out_dir: &Path,
    shared_newest: Option<SystemTime>,
) -> Result<PathBuf, String> {
    let out = out_dir.join(t.bin_name());
    let test_dir = t.source.parent().expect("a test is in a directory");
    let newest = [mtime(&t.source), newest_in(test_dir), shared_newest]
        .into_iter()
        .flatten()
        .max();
    if let (Some(built), Some(newest)) = (mtime(&out), newest) {
        if built >= newest {
            return Ok(out);
        }
    }
    let tmp = out_dir.join(format!(".{}.tmp.{}", t.bin_name(), std::process::id()));
    let result = Command::new(cc)
        .args(CFLAGS)
        .arg("-I")
        .arg(suite.join("include"))
        .arg("-I")
        .arg(test_dir)
        .arg("-o")
        .arg(&tmp)
        .arg(&t.source)
        .arg(suite.join("lib/common.c"))
        .args(LIBS)
        .output()
        .unwrap_or_else(|e| panic!("cannot run the C compiler `{cc}`: {e}"));
    if !result.status.success() {
        let _ = fs::remove_file(&tmp);
        let err = String::from_utf8_lossy(&result.stderr);
        // The first error, without the file name and place before it.
        let first = err
            .lines()
            .find_map(|l| l.find("error").map(|at| &l[at..]))
            .or_else(|| err.lines().next())
            .unwrap_or("no message");
        return Err(first.trim().to_string());
    }
    fs::rename(&tmp, &out).expect("move the built test into place");
    Ok(out)
}

/// How a run of a test ended: its exit status, which the suite gives a
/// meaning (posixtest.h), or a signal, or still running at the deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Outcome {
    Pass,
    Fail,
    Unresolved,
    Unsupported,
    Untested,
    /// An exit status the suite does not define.
    Exit(i32),
    Signal(i32),
    Timeout,
}

impl Outcome {
    /// The outcome of a run that ended with `status` (`None`: timed out).
    pub fn of(status: Option<ExitStatus>) -> Outcome {
        use std::os::unix::process::ExitStatusExt;
        let Some(status) = status else {
            return Outcome::Timeout;
        };
        match (status.code(), status.signal()) {
            (Some(0), _) => Outcome::Pass,
            (Some(1), _) => Outcome::Fail,
            (Some(2), _) => Outcome::Unresolved,
            (Some(4), _) => Outcome::Unsupported,
            (Some(5), _) => Outcome::Untested,
            (Some(n), _) => Outcome::Exit(n),
            (None, Some(sig)) => Outcome::Signal(sig),
            (None, None) => unreachable!("a process that ended neither exited nor was killed"),
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Pass => write!(f, "PASS"),
            Outcome::Fail => write!(f, "FAIL"),
            Outcome::Unresolved => write!(f, "UNRESOLVED"),
            Outcome::Unsupported => write!(f, "UNSUPPORTED"),
            Outcome::Untested => write!(f, "UNTESTED"),
            Outcome::Exit(n) => write!(f, "exit {n}"),
            Outcome::Signal(n) => write!(f, "signal {n}"),
            Outcome::Timeout => write!(f, "timeout"),
        }
    }
}
