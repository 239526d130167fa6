//! Harness for locksuit's end-to-end tests.
//!
//! The tests compile small C programs from `tests/c/` whose lock behaviour is
//! known exactly, run them with `LD_PRELOAD=libsyncshim.so`, and check the
//! numbers in `locksuit report --format json` against that ground truth.
//!
//! The shim and the analyzer are not built by this crate: run
//! `cargo build --release` at the workspace root first.
//!
//! Environment knobs:
//! - `CC`: the C compiler (default `cc`).
//! - `LOCKSUIT_TEST_SHIM`, `LOCKSUIT_TEST_BIN`: use a shim / analyzer other
//!   than `<root>/target/release/{libsyncshim.so,locksuit}`.
//!
//! Past 600 lines: the harness every test file shares, many small helpers
//! that stand alone (build, run under the shim, read a report); one
//! `use locksuit_tests::*` gives a test all of them.

use std::collections::BTreeSet;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant, SystemTime};

pub use serde_json::Value;

pub mod deadline;
pub mod instrumented;
pub mod module_graph;
pub mod open_posix;
pub mod rust_programs;
pub use deadline::*;
pub use instrumented::*;
pub use rust_programs::*;

/// How long any single child process may run before the harness kills it.
pub const CHILD_TIMEOUT: Duration = Duration::from_secs(60);

/// Run directories of finished test processes are deleted once older than this.
pub const KEEP_RUNS_FOR: Duration = Duration::from_secs(10 * 60);

static COUNTER: AtomicUsize = AtomicUsize::new(0);

fn next_id() -> usize {
    COUNTER.fetch_add(1, Ordering::Relaxed)
}

// ---------------------------------------------------------------------------
// Paths
// ---------------------------------------------------------------------------

/// The workspace root: the parent of this crate's directory.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent directory")
        .to_path_buf()
}

/// `<root>/tests/c`, where the C (and Python) test programs live.
pub fn c_dir() -> PathBuf {
    workspace_root().join("tests").join("c")
}

fn built_artifact(env_override: &str, file: &str) -> PathBuf {
    let path = match std::env::var_os(env_override) {
        Some(p) => PathBuf::from(p),
        None => workspace_root().join("target").join("release").join(file),
    };
    if !path.is_file() {
        panic!(
            "{} not found.\nRun `cargo build --release` at the workspace root ({}) \
             before running these tests (or point {} at it).",
            path.display(),
            workspace_root().display(),
            env_override
        );
    }
    path
}

/// Absolute path of the LD_PRELOAD library, `<root>/target/release/libsyncshim.so`.
pub fn shim_path() -> PathBuf {
    let p = built_artifact("LOCKSUIT_TEST_SHIM", "libsyncshim.so");
    fs::canonicalize(&p).unwrap_or(p)
}

/// Absolute path of the analyzer CLI, `<root>/target/release/locksuit`.
pub fn locksuit_path() -> PathBuf {
    let p = built_artifact("LOCKSUIT_TEST_BIN", "locksuit");
    fs::canonicalize(&p).unwrap_or(p)
}

// ---------------------------------------------------------------------------
// Building the C programs
// ---------------------------------------------------------------------------

fn mtime(p: &Path) -> Option<SystemTime> {
    fs::metadata(p).and_then(|m| m.modified()).ok()
}

/// Compiles `tests/c/<name>.c` into `<root>/target/c-tests/<name>` and returns
/// the binary's path. Rebuilds only when the source (or any header in
/// `tests/c/`) is newer than the binary. Safe to call from parallel tests:
/// each compilation writes a private temporary file that is then renamed.
pub fn build_c(name: &str) -> PathBuf {
    let src = c_dir().join(format!("{name}.c"));
    build_c_source(&src, name)
}

/// Like [`build_c`] but for any C source file (e.g. `examples/sample.c`).
/// The binary is `<root>/target/c-tests/<out_name>`.
pub fn build_c_source(src: &Path, out_name: &str) -> PathBuf {
    build_c_with(src, out_name, &[], &[])
}

// ---------------------------------------------------------------------------
// Directories and traces
// ---------------------------------------------------------------------------

/// Removes run directories left behind by test processes that no longer
/// exist (their name starts with the pid of the process that made them) and
/// that are older than [`KEEP_RUNS_FOR`]. Directories of live processes, e.g.
/// a concurrent `cargo test`, and of the current `cargo test` invocation's
/// other test binaries are kept, so a failure can be inspected afterwards.
fn prune_stale_runs(runs: &Path) {
    let Ok(entries) = fs::read_dir(runs) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let old_enough = e
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > KEEP_RUNS_FOR);
        if old_enough && pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = fs::remove_dir_all(e.path());
        }
    }
}

/// A new, empty directory `<root>/target/test-runs/<pid>-<n>-<tag>`, unique per call.
/// The first call in a process also deletes run directories of finished test
/// processes older than [`KEEP_RUNS_FOR`], so traces do not pile up.
pub fn fresh_dir(tag: &str) -> PathBuf {
    static PRUNE: std::sync::Once = std::sync::Once::new();
    let runs = workspace_root().join("target").join("test-runs");
    PRUNE.call_once(|| prune_stale_runs(&runs));
    let dir = runs.join(format!("{}-{}-{}", std::process::id(), next_id(), tag));
    if dir.exists() {
        fs::remove_dir_all(&dir).expect("remove stale run directory");
    }
    fs::create_dir_all(&dir).expect("create run directory");
    dir
}

/// Files named `locksuit.*.trace` directly in `dir`, sorted.
pub fn traces_in(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read_dir {}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.is_file()
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("locksuit.") && n.ends_with(".trace"))
        })
        .collect();
    v.sort();
    v
}

/// The single trace in `dir`; panics (listing the directory) if there is not exactly one.
pub fn only_trace(dir: &Path) -> PathBuf {
    let t = traces_in(dir);
    assert_eq!(
        t.len(),
        1,
        "expected exactly one trace in {}, found {:?}",
        dir.display(),
        t
    );
    t.into_iter().next().unwrap()
}

// ---------------------------------------------------------------------------
// Running processes
// ---------------------------------------------------------------------------

/// Runs `cmd` with stdout/stderr captured, killing it after [`CHILD_TIMEOUT`].
pub fn run_captured(mut cmd: Command) -> Output {
    let desc = format!("{cmd:?}");
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot spawn {desc}: {e}"));
    let mut out_pipe = child.stdout.take().unwrap();
    let mut err_pipe = child.stderr.take().unwrap();
    let out_t = thread::spawn(move || {
        let mut b = Vec::new();
        let _ = out_pipe.read_to_end(&mut b);
        b
    });
    let err_t = thread::spawn(move || {
        let mut b = Vec::new();
        let _ = err_pipe.read_to_end(&mut b);
        b
    });
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait for child") {
            break st;
        }
        if start.elapsed() > CHILD_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{desc} did not finish within {CHILD_TIMEOUT:?}; killed it");
        }
        thread::sleep(Duration::from_millis(5));
    };
    Output {
        status,
        stdout: out_t.join().unwrap(),
        stderr: err_t.join().unwrap(),
    }
}

/// What [`run_measured`] saw.
pub struct Measured {
    pub status: std::process::ExitStatus,
    /// Standard output, written to a file (it can be hundreds of MB).
    pub stdout: PathBuf,
    pub stderr: String,
    /// The child's peak resident memory (ru_maxrss), in KiB.
    pub max_rss_kb: u64,
}

/// Runs `cmd` with its standard output into the file `stdout` and returns
/// its status and its own peak resident memory, from wait4(2). Killed after
/// [`CHILD_TIMEOUT`].
// wait4 reaps the child, which clippy does not see.
#[allow(clippy::zombie_processes)]
pub fn run_measured(mut cmd: Command, stdout: &Path) -> Measured {
    use std::os::unix::process::ExitStatusExt;
    let desc = format!("{cmd:?}");
    let err_path = stdout.with_extension("stderr");
    let out = fs::File::create(stdout).expect("create the stdout file");
    let err = fs::File::create(&err_path).expect("create the stderr file");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot spawn {desc}: {e}"));
    let pid = child.id() as libc::pid_t;
    let start = Instant::now();
    let (status, usage) = loop {
        let mut status = 0;
        // SAFETY: an all-zero rusage is a valid value for wait4 to fill.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `pid` is our child, not yet reaped (only this loop
        // waits for it); `status` and `usage` are valid for writing.
        let done = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        assert!(done >= 0, "wait4 for {desc} failed");
        if done == pid {
            break (status, usage);
        }
        if start.elapsed() > CHILD_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{desc} did not finish within {CHILD_TIMEOUT:?}; killed it");
        }
        thread::sleep(Duration::from_millis(5));
    };
    Measured {
        status: std::process::ExitStatus::from_raw(status),
        stdout: stdout.to_path_buf(),
        stderr: fs::read_to_string(&err_path).unwrap_or_default(),
        max_rss_kb: usage.ru_maxrss as u64,
    }
}

/// Runs `bin args…` with `LD_PRELOAD=<abs shim>` and `LOCKSUIT_DIR=<dir>`.
pub fn run_under_shim<S: AsRef<std::ffi::OsStr>>(bin: &Path, args: &[S], dir: &Path) -> Output {
    run_under_shim_env(bin, args, dir, &[])
}

/// Like [`run_under_shim`], with extra environment variables (e.g. `LOCKSUIT_*` settings).
pub fn run_under_shim_env<S: AsRef<std::ffi::OsStr>>(
    bin: &Path,
    args: &[S],
    dir: &Path,
    env: &[(&str, &str)],
) -> Output {
    let shim = shim_path();
    let dir_abs = fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let mut cmd = Command::new(bin);
    cmd.args(args)
        .env("LD_PRELOAD", &shim)
        .env("LOCKSUIT_DIR", &dir_abs)
        .env_remove("LOCKSUIT_QUIET")
        .envs(env.iter().copied());
    run_captured(cmd)
}

/// Runs `bin args…` without the shim.
pub fn run_plain<S: AsRef<std::ffi::OsStr>>(bin: &Path, args: &[S]) -> Output {
    let mut cmd = Command::new(bin);
    cmd.args(args)
        .env_remove("LD_PRELOAD")
        .env_remove("LOCKSUIT_DIR");
    run_captured(cmd)
}

/// Runs `locksuit args…` (no shim, no LOCKSUIT_DIR) and returns its output.
/// Without `DEBUGINFOD_URLS` (Debian's profile may set it): a report of a
/// stripped test program must not reach for the network.
pub fn run_locksuit<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Output {
    let mut cmd = Command::new(locksuit_path());
    cmd.args(args)
        .env_remove("LD_PRELOAD")
        .env_remove("LOCKSUIT_DIR")
        .env_remove("DEBUGINFOD_URLS");
    run_captured(cmd)
}

/// A readable dump of a process's result, for assertion messages.
pub fn describe(out: &Output) -> String {
    format!(
        "status: {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Asserts the process exited normally with status 0.
pub fn assert_success(out: &Output, what: &str) {
    assert!(out.status.success(), "{what} failed\n{}", describe(out));
}

/// `locksuit report <paths…> --format json [--threshold R]`: asserts exit 0 and parses stdout.
pub fn report_json(paths: &[&Path], threshold: Option<f64>) -> Value {
    let threshold = threshold.map(|t| t.to_string());
    let extra: Vec<&str> = match &threshold {
        Some(t) => vec!["--threshold", t],
        None => Vec::new(),
    };
    report_json_with(paths, &extra)
}

/// `locksuit report <paths…> --format json <extra…>`: asserts exit 0 and
/// parses stdout.
pub fn report_json_with(paths: &[&Path], extra: &[&str]) -> Value {
    let mut args: Vec<std::ffi::OsString> = vec!["report".into()];
    for p in paths {
        args.push(p.as_os_str().to_owned());
    }
    args.push("--format".into());
    args.push("json".into());
    args.extend(extra.iter().map(|a| a.into()));
    let out = run_locksuit(&args);
    assert!(
        out.status.success(),
        "locksuit {:?} failed\n{}",
        args,
        describe(&out)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "locksuit {:?} printed invalid JSON: {e}\n{}",
            args,
            describe(&out)
        )
    });
    assert_eq!(
        v["schema"].as_str(),
        Some("locksuit.report/3"),
        "unexpected schema in report: {}",
        v["schema"]
    );
    v
}

// ---------------------------------------------------------------------------
// Ground truth from the C sources and from program output
// ---------------------------------------------------------------------------

/// 1-based line number of the unique line of `tests/c/<c_file>` containing `marker`.
pub fn line_of(c_file: &str, marker: &str) -> u64 {
    line_in(&c_dir().join(c_file), marker)
}

/// 1-based line number of the unique line of `path` containing `marker`.
pub fn line_in(path: &Path, marker: &str) -> u64 {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let hits: Vec<usize> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| l.contains(marker))
        .map(|(i, _)| i + 1)
        .collect();
    assert_eq!(
        hits.len(),
        1,
        "marker {marker:?} must occur on exactly one line of {}, found on lines {hits:?}",
        path.display()
    );
    hits[0] as u64
}

/// Program stdout as a string.
pub fn stdout_str(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A program's stdout lines with what differs from run to run masked: the
/// value of its `pid N` line, of times it measured (`…-ns N`) and every
/// `0x…` address (ASLR). What each line says stays, so runs with and
/// without the shim compare line by line.
pub fn stable_stdout(out: &Output) -> Vec<String> {
    stdout_str(out)
        .lines()
        .map(|line| {
            if let Some((key, _)) = line.split_once(' ') {
                if key == "pid" || key.ends_with("-ns") {
                    return format!("{key} …");
                }
            }
            line.split(' ')
                .map(|word| {
                    if word.starts_with("0x") {
                        "0x…"
                    } else {
                        word
                    }
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

/// Starts `bin` under the shim, its traces in `dir`, and returns once it
/// printed its first line, which must be `ready` (a program that keeps
/// running until stopped, e.g. tests/c/top_target.c).
pub fn spawn_ready_under_shim(bin: &Path, dir: &Path) -> std::process::Child {
    use std::io::{BufRead, BufReader};
    let mut child = Command::new(bin)
        .env("LD_PRELOAD", shim_path())
        .env("LOCKSUIT_DIR", dir)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
    let mut ready = String::new();
    if let Some(out) = child.stdout.take() {
        BufReader::new(out).read_line(&mut ready).unwrap();
    }
    assert_eq!(ready, "ready\n", "{} did not start", bin.display());
    child
}

/// Stops a child with SIGTERM and checks it then exited successfully.
pub fn terminate(mut child: std::process::Child) {
    // SAFETY: kill(2) with our own child's pid; it cannot touch our memory.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(child.wait().unwrap().success());
}

/// Writes a recording policy (docs/policy.md) into `dir`; returns its
/// absolute path, for `LOCKSUIT_POLICY`.
pub fn write_policy(dir: &Path, text: &str) -> String {
    let file = dir.join("policy.txt");
    fs::write(&file, text).unwrap();
    file.canonicalize().unwrap().to_str().unwrap().to_string()
}

/// The value after `key ` on the line of `stdout` that starts with `key `.
/// Programs print lines such as `shared 0x55d0c3a4b040`.
pub fn stdout_value(stdout: &str, key: &str) -> String {
    let prefix = format!("{key} ");
    let hits: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .collect();
    assert_eq!(
        hits.len(),
        1,
        "expected exactly one line `{key} …` in program output:\n{stdout}"
    );
    hits[0].trim().to_string()
}

/// The id of the one lock recorded at `addr` in a trace read with
/// `locksuit_format::read_trace` (for tests that look at raw events).
pub fn trace_lock_id(trace: &locksuit_format::reader::Trace, addr: u64) -> u32 {
    let ids: Vec<u32> = trace
        .locks
        .iter()
        .filter(|l| l.address == addr)
        .map(|l| l.id)
        .collect();
    assert_eq!(ids.len(), 1, "one lock record at {addr:#x}: {ids:?}");
    ids[0]
}

/// Parses `0x…` (as printed by `%p`, or in the JSON report) into a number.
pub fn parse_addr(s: &str) -> u64 {
    let h = s
        .strip_prefix("0x")
        .or_else(|| s.strip_prefix("0X"))
        .unwrap_or_else(|| panic!("address {s:?} does not start with 0x"));
    u64::from_str_radix(h, 16).unwrap_or_else(|e| panic!("address {s:?}: {e}"))
}

// ---------------------------------------------------------------------------
// JSON helpers
// ---------------------------------------------------------------------------

/// A field that must be an array.
pub fn arr<'a>(v: &'a Value, field: &str) -> &'a Vec<Value> {
    v[field]
        .as_array()
        .unwrap_or_else(|| panic!("field {field:?} is not an array in {}", short(v)))
}

/// A field that must be a non-negative integer.
pub fn u64_of(v: &Value, field: &str) -> u64 {
    v[field]
        .as_u64()
        .unwrap_or_else(|| panic!("field {field:?} is not an unsigned integer in {}", short(v)))
}

/// A field that must be a number.
pub fn f64_of(v: &Value, field: &str) -> f64 {
    v[field]
        .as_f64()
        .unwrap_or_else(|| panic!("field {field:?} is not a number in {}", short(v)))
}

/// A field that must be a string.
pub fn str_of<'a>(v: &'a Value, field: &str) -> &'a str {
    v[field]
        .as_str()
        .unwrap_or_else(|| panic!("field {field:?} is not a string in {}", short(v)))
}

/// A compact rendering of a JSON value for messages (truncated).
pub fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 2000 {
        format!("{}… ({} bytes)", &s[..2000], s.len())
    } else {
        s
    }
}

/// All processes of a report.
pub fn processes(report: &Value) -> &Vec<Value> {
    arr(report, "processes")
}

/// How the shim judges blocking calls on this machine: the
/// `block_detection` of a small program's report, "switched-out" where the
/// kernel clears glibc's rseq pointer when it switches a thread out (as
/// kernels up to 6.18 do on the way out of a system call), else
/// "duration". Tests compare with it, so that a process whose check went
/// wrong is told from a kernel without the feature.
pub fn block_detection_here() -> String {
    let bin = build_c("tiny");
    let dir = fresh_dir("block-detection-here");
    let out = run_under_shim(&bin, &[] as &[&str], &dir);
    assert_success(&out, "tiny");
    let report = report_json(&[&dir], None);
    str_of(only_process(&report), "block_detection").to_string()
}

/// Whether this machine should let the shim judge blocking calls by
/// switches: a kernel that clears the rseq pointer on the way out of a
/// system call (4.18 to 6.18; the rework planned after 6.18 may not) and a
/// glibc that registers threads for rseq and says where (2.35 and later).
/// There `block_detection_here` must be "switched-out".
pub fn rseq_timing_expected() -> bool {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let version = |text: &str| -> (u32, u32) {
        let mut parts = text.trim().split(['.', '-']);
        let major = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
        let minor = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
        (major, minor)
    };
    // SAFETY: gnu_get_libc_version returns a static NUL-terminated string.
    let glibc = unsafe { std::ffi::CStr::from_ptr(libc::gnu_get_libc_version()) };
    let kernel = version(&release);
    ((4, 18)..=(6, 18)).contains(&kernel) && version(&glibc.to_string_lossy()) >= (2, 35)
}

/// The only process of a report; panics if there is not exactly one.
pub fn only_process(report: &Value) -> &Value {
    let p = processes(report);
    assert_eq!(p.len(), 1, "expected exactly one process in report");
    &p[0]
}

/// The one process of the report whose executable is a Python interpreter
/// (the interpreter may start helpers, which are left out).
pub fn only_python_process(report: &Value) -> &Value {
    let py: Vec<&Value> = processes(report)
        .iter()
        .filter(|p| p["exe"].as_str().is_some_and(|e| e.contains("python")))
        .collect();
    assert_eq!(
        py.len(),
        1,
        "exactly one python process; exes: {:?}",
        processes(report)
            .iter()
            .map(|p| p["exe"].clone())
            .collect::<Vec<_>>()
    );
    py[0]
}

/// The process with the given pid.
pub fn process_by_pid(report: &Value, pid: u64) -> &Value {
    let hits: Vec<&Value> = processes(report)
        .iter()
        .filter(|p| p["pid"].as_u64() == Some(pid))
        .collect();
    assert_eq!(
        hits.len(),
        1,
        "expected exactly one process with pid {pid}; pids in report: {:?}",
        processes(report)
            .iter()
            .map(|p| p["pid"].clone())
            .collect::<Vec<_>>()
    );
    hits[0]
}

/// All locks of a process.
pub fn locks(process: &Value) -> &Vec<Value> {
    arr(process, "locks")
}

/// All sites of a process.
pub fn sites(process: &Value) -> &Vec<Value> {
    arr(process, "sites")
}

/// All findings of a process.
pub fn findings(process: &Value) -> &Vec<Value> {
    arr(process, "findings")
}

/// All locks whose `address` equals `addr` (compared numerically; `addr` as printed by `%p`).
pub fn locks_at<'a>(process: &'a Value, addr: &str) -> Vec<&'a Value> {
    let want = parse_addr(addr);
    locks(process)
        .iter()
        .filter(|l| l["address"].as_str().map(parse_addr) == Some(want))
        .collect()
}

/// The unique lock at `addr`; panics if there are none or several.
pub fn lock_by_address<'a>(process: &'a Value, addr: &str) -> &'a Value {
    let hits = locks_at(process, addr);
    assert_eq!(
        hits.len(),
        1,
        "expected exactly one lock at {addr}, found {}: {:?}",
        hits.len(),
        hits.iter().map(|l| short(l)).collect::<Vec<_>>()
    );
    hits[0]
}

/// The lock with the given id.
pub fn lock_by_id<'a>(process: &'a Value, id: &str) -> &'a Value {
    locks(process)
        .iter()
        .find(|l| l["id"].as_str() == Some(id))
        .unwrap_or_else(|| panic!("no lock with id {id:?}"))
}

/// The site with the given id.
pub fn site_by_id<'a>(process: &'a Value, id: &str) -> &'a Value {
    sites(process)
        .iter()
        .find(|s| s["id"].as_str() == Some(id))
        .unwrap_or_else(|| panic!("no site with id {id:?}"))
}

/// The id of a lock / site / finding.
pub fn id_of(v: &Value) -> &str {
    str_of(v, "id")
}

/// Sites that engaged the lock with id `lock_id` (sites whose `locks` list contains it).
pub fn sites_of_lock<'a>(process: &'a Value, lock_id: &str) -> Vec<&'a Value> {
    sites(process)
        .iter()
        .filter(|s| {
            s["locks"]
                .as_array()
                .is_some_and(|ls| ls.iter().any(|l| l.as_str() == Some(lock_id)))
        })
        .collect()
}

/// Findings about the lock `lock_id`: its own (`lock`), or its family's
/// (`locks` lists every lock a finding covers).
pub fn findings_for_lock<'a>(process: &'a Value, lock_id: &str) -> Vec<&'a Value> {
    findings(process)
        .iter()
        .filter(|f| {
            f["lock"].as_str() == Some(lock_id)
                || f["locks"]
                    .as_array()
                    .is_some_and(|ls| ls.iter().any(|l| l.as_str() == Some(lock_id)))
        })
        .collect()
}

/// Findings of the given kind about the lock `lock_id`.
pub fn findings_of_kind_for_lock<'a>(
    process: &'a Value,
    kind: &str,
    lock_id: &str,
) -> Vec<&'a Value> {
    findings_for_lock(process, lock_id)
        .into_iter()
        .filter(|f| f["kind"].as_str() == Some(kind))
        .collect()
}

/// Findings that say one thread alone took the lock `lock_id`: the
/// observation of one run (`single-thread-lock`) or the verdict with more
/// evidence (`unnecessary-lock`).
pub fn findings_taken_alone<'a>(process: &'a Value, lock_id: &str) -> Vec<&'a Value> {
    findings_for_lock(process, lock_id)
        .into_iter()
        .filter(|f| {
            let kind = f["kind"].as_str();
            kind == Some("single-thread-lock") || kind == Some("unnecessary-lock")
        })
        .collect()
}

/// Findings that list the site `site_id`.
pub fn findings_for_site<'a>(process: &'a Value, site_id: &str) -> Vec<&'a Value> {
    findings(process)
        .iter()
        .filter(|f| {
            f["sites"]
                .as_array()
                .is_some_and(|ss| ss.iter().any(|s| s.as_str() == Some(site_id)))
        })
        .collect()
}

/// The sites a finding lists, resolved to site objects.
pub fn finding_sites<'a>(process: &'a Value, finding: &Value) -> Vec<&'a Value> {
    arr(finding, "sites")
        .iter()
        .map(|s| {
            site_by_id(
                process,
                s.as_str()
                    .unwrap_or_else(|| panic!("site id not a string in {}", short(finding))),
            )
        })
        .collect()
}

/// Whether a site is at `function` in a file ending with `file_suffix` on `line`.
pub fn site_is_at(site: &Value, function: &str, file_suffix: &str, line: u64) -> bool {
    site["function"].as_str() == Some(function)
        && site["file"]
            .as_str()
            .is_some_and(|f| f.ends_with(file_suffix))
        && site["line"].as_u64() == Some(line)
}

/// `function file:line` of a site, for messages.
pub fn site_where(site: &Value) -> String {
    format!(
        "{} {}:{} ({})",
        site["function"], site["file"], site["line"], site["id"]
    )
}

/// Locks that some site in `function` engaged.
pub fn locks_engaged_in_function<'a>(process: &'a Value, function: &str) -> Vec<&'a Value> {
    let ids: BTreeSet<&str> = sites(process)
        .iter()
        .filter(|s| s["function"].as_str() == Some(function))
        .flat_map(|s| {
            s["locks"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|l| l.as_str())
        })
        .collect();
    locks(process)
        .iter()
        .filter(|l| l["id"].as_str().is_some_and(|id| ids.contains(id)))
        .collect()
}

/// All conds of a process (the `conds` array; empty if the field is missing).
pub fn conds(process: &Value) -> Vec<&Value> {
    process["conds"]
        .as_array()
        .map(|v| v.iter().collect())
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------
// Shared libraries, programs linked against them, extra compiler flags
// ---------------------------------------------------------------------------

/// Compiles `src` into `<root>/target/c-tests/<out_name>` with
/// `-g -O0 -fno-omit-frame-pointer -pthread` plus `extra` (appended after the
/// source, so `-l…` works). Rebuilds when the source, a header next to it, or any file in
/// `deps` (e.g. a shared library the program links against) is newer than
/// the output. Safe to call from parallel tests (private temporary + rename).
pub fn build_c_with(src: &Path, out_name: &str, extra: &[&str], deps: &[&Path]) -> PathBuf {
    assert!(src.is_file(), "C source {} does not exist", src.display());
    // One build at a time in this test process: two tests that find the
    // binary missing would otherwise both compile it, and the second rename
    // replaces the file under the first test's running program, whose
    // /proc/self/exe then reads "… (deleted)" and cannot be symbolized.
    static BUILDING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _building = BUILDING.lock().unwrap_or_else(|e| e.into_inner());
    let out_dir = workspace_root().join("target").join("c-tests");
    fs::create_dir_all(&out_dir).expect("create target/c-tests");
    let out = out_dir.join(out_name);

    let mut newest = mtime(src).expect("source mtime");
    if let Some(dir) = src.parent() {
        if let Ok(entries) = fs::read_dir(dir) {
            for e in entries.flatten() {
                let p = e.path();
                if p.extension().is_some_and(|x| x == "h") {
                    if let Some(t) = mtime(&p) {
                        newest = newest.max(t);
                    }
                }
            }
        }
    }
    for d in deps {
        if let Some(t) = mtime(d) {
            newest = newest.max(t);
        }
    }
    if let Some(built) = mtime(&out) {
        if built >= newest {
            return out;
        }
    }

    let tmp = out_dir.join(format!(
        ".{out_name}.tmp.{}.{}",
        std::process::id(),
        next_id()
    ));
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let src_abs = fs::canonicalize(src).unwrap_or_else(|_| src.to_path_buf());
    let output = Command::new(&cc)
        .args(["-g", "-O0", "-fno-omit-frame-pointer", "-pthread", "-o"])
        .arg(&tmp)
        .arg(&src_abs)
        .args(extra)
        .output()
        .unwrap_or_else(|e| panic!("cannot run C compiler `{cc}`: {e}"));
    if !output.status.success() {
        let _ = fs::remove_file(&tmp);
        panic!(
            "compiling {} {:?} failed ({}):\n{}{}",
            src.display(),
            extra,
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    fs::rename(&tmp, &out).expect("rename compiled file into place");
    out
}

/// Compiles `tests/c/<name>.c` with `cc -shared -fPIC -g` into
/// `<root>/target/c-tests/lib<name>.so` and returns its path. Link a program
/// against it with [`build_c_linked`].
pub fn build_c_shared(name: &str) -> PathBuf {
    let src = c_dir().join(format!("{name}.c"));
    build_c_with(&src, &format!("lib{name}.so"), &["-shared", "-fPIC"], &[])
}

/// Compiles `tests/c/<name>.c` into `<root>/target/c-tests/<name>`, linked
/// against the shared libraries `lib<l>.so` for each `l` in `libs` (built
/// with [`build_c_shared`] first), found at run time through an rpath, so
/// they are DT_NEEDED entries of the program.
pub fn build_c_linked(name: &str, libs: &[&str]) -> PathBuf {
    let lib_paths: Vec<PathBuf> = libs.iter().map(|l| build_c_shared(l)).collect();
    let out_dir = workspace_root().join("target").join("c-tests");
    let out_dir_abs = fs::canonicalize(&out_dir).unwrap_or(out_dir);
    let l_flag = format!("-L{}", out_dir_abs.display());
    let rpath = format!("-Wl,-rpath,{}", out_dir_abs.display());
    let mut extra: Vec<String> = vec![l_flag, rpath, "-Wl,--no-as-needed".to_string()];
    extra.extend(libs.iter().map(|l| format!("-l{l}")));
    let extra_refs: Vec<&str> = extra.iter().map(String::as_str).collect();
    let deps: Vec<&Path> = lib_paths.iter().map(PathBuf::as_path).collect();
    let src = c_dir().join(format!("{name}.c"));
    build_c_with(&src, name, &extra_refs, &deps)
}

/// The thread of `process` named `name` (its one and only).
pub fn thread_named<'a>(process: &'a Value, name: &str) -> &'a Value {
    arr(process, "threads")
        .iter()
        .find(|t| t["name"].as_str() == Some(name))
        .unwrap_or_else(|| panic!("no thread {name}: {}", process["threads"]))
}

/// The main thread of `process`.
pub fn main_thread(process: &Value) -> &Value {
    arr(process, "threads")
        .iter()
        .find(|t| t["main"] == true)
        .unwrap_or_else(|| panic!("no main thread: {}", process["threads"]))
}

/// A thread's recorded time blocked in `class` (0 if none).
pub fn class_ns(thread: &Value, class: &str) -> u64 {
    arr(thread, "blocking_classes")
        .iter()
        .find(|c| c["class"].as_str() == Some(class))
        .map_or(0, |c| u64_of(c, "total_ns"))
}

/// The thread with the given tid in a process's `threads`.
pub fn thread_by_tid(process: &Value, tid: u64) -> &Value {
    let threads = arr(process, "threads");
    let hits: Vec<&Value> = threads
        .iter()
        .filter(|t| t["tid"].as_u64() == Some(tid))
        .collect();
    assert_eq!(
        hits.len(),
        1,
        "expected exactly one thread with tid {tid}; threads: {}",
        short(&process["threads"])
    );
    hits[0]
}

/// The unique cond whose `address` equals `addr` (as printed by `%p`).
pub fn cond_by_address<'a>(process: &'a Value, addr: &str) -> &'a Value {
    let want = parse_addr(addr);
    let hits: Vec<&Value> = conds(process)
        .into_iter()
        .filter(|c| c["address"].as_str().map(parse_addr) == Some(want))
        .collect();
    assert_eq!(
        hits.len(),
        1,
        "expected exactly one cond at {addr}; conds: {}",
        short(&process["conds"])
    );
    hits[0]
}

/// The trace in `dir` named `locksuit.<exe>.<pid>.trace`; panics if missing.
pub fn trace_named(dir: &Path, exe: &str, pid: u64) -> PathBuf {
    let p = dir.join(format!("locksuit.{exe}.{pid}.trace"));
    assert!(
        p.is_file(),
        "trace {} does not exist; traces in the directory: {:?}",
        p.display(),
        traces_in(dir)
    );
    p
}

/// The program behaved the same under the shim: identical stdout and exit
/// status (`plain` ran without the shim, `shim` with it).
pub fn assert_same_output(plain: &Output, shim: &Output) {
    assert_eq!(
        stdout_str(shim),
        stdout_str(plain),
        "stdout must be identical under the shim\n{}",
        describe(shim)
    );
    assert_eq!(
        shim.status.code(),
        plain.status.code(),
        "exit status\n{}",
        describe(shim)
    );
}

/// Like [`assert_same_output`] for programs whose stdout lines carry
/// figures that differ from run to run (times, tids): the lines are
/// compared by what they name (their first word); the exit status and
/// stderr exactly.
pub fn assert_same_output_keys(plain: &Output, shim: &Output) {
    assert_eq!(
        shim.status.code(),
        plain.status.code(),
        "exit status\n{}",
        describe(shim)
    );
    assert_eq!(shim.stderr, plain.stderr, "stderr\n{}", describe(shim));
    let keys = |out: &Output| -> Vec<String> {
        stdout_str(out)
            .lines()
            .map(|l| l.split(' ').next().unwrap_or("").to_string())
            .collect()
    };
    assert_eq!(keys(shim), keys(plain), "stdout lines\n{}", describe(shim));
}

/// Like [`assert_same_output`], for programs that print `name value` lines
/// (addresses) on stderr: stderr under the shim holds the same names in the
/// same order, so the shim itself printed nothing.
pub fn assert_same_output_and_stderr_names(plain: &Output, shim: &Output) {
    assert_same_output(plain, shim);
    let names = |o: &Output| -> Vec<String> {
        String::from_utf8_lossy(&o.stderr)
            .lines()
            .map(|l| l.rsplit_once(' ').map_or(l, |(k, _)| k).to_string())
            .collect()
    };
    assert_eq!(
        names(shim),
        names(plain),
        "stderr under the shim must be only the program's own lines\n{}",
        describe(shim)
    );
}

/// A program run once without and once with the shim, and the report on
/// what the shim recorded: what the per-file test fixtures share.
pub struct Recorded {
    pub plain: Output,
    pub shim: Output,
    pub report: Value,
    /// Where the shim's run left its trace.
    pub dir: PathBuf,
}

/// Runs `bin` (no arguments) plainly and under the shim (which must
/// succeed) and reports on its one trace.
pub fn record_plain_and_shim(bin: &Path, tag: &str) -> Recorded {
    record_plain_and_shim_env(bin, tag, &[])
}

/// [`record_plain_and_shim`] with `env` set for the shim's run.
pub fn record_plain_and_shim_env(bin: &Path, tag: &str, env: &[(&str, &str)]) -> Recorded {
    let plain = run_plain(bin, &[] as &[&str]);
    let dir = fresh_dir(tag);
    let shim = run_under_shim_env(bin, &[] as &[&str], &dir, env);
    assert_success(&shim, &format!("{tag} under the shim"));
    let report = report_json(&[&only_trace(&dir)], None);
    Recorded {
        plain,
        shim,
        report,
        dir,
    }
}

/// `tests/c/<name>.c` built with debug information, and a stripped copy
/// at `<dir>/<name>`, as distributions ship programs (the build id, which
/// strip keeps, ties the two together). Returns the stripped program, the
/// one with debug information, and the build id in hex.
pub fn build_c_stripped(name: &str, dir: &Path) -> (PathBuf, PathBuf, String) {
    let built = build_c(name);
    let bin = dir.join(name);
    fs::copy(&built, &bin).expect("copy the program");
    let notes = Command::new("readelf")
        .arg("-n")
        .arg(&bin)
        .output()
        .unwrap();
    assert_success(&notes, "readelf -n");
    let build_id = stdout_str(&notes)
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
        .map(str::to_string)
        .unwrap_or_else(|| panic!("{name} has no build id"));
    let stripped = Command::new("strip").arg(&bin).output().unwrap();
    assert_success(&stripped, "strip");
    (bin, built, build_id)
}
