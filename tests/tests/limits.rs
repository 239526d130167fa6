//! Limits and degradation: where the trace goes when LOCKSUIT_DIR (and
//! TMPDIR) cannot be written, a file-size limit and LOCKSUIT_MAX_MB smaller
//! than the trace needs, malformed settings, and a symlink planted at the
//! trace's path. In every case the program runs unchanged and the shim says
//! at most one line per kind of problem on stderr.
//!
//! Past 600 lines: each file under tests/tests is its own test binary,
//! linked apart; one subject stays in one file rather than pay another link.

use locksuit_tests::*;
use std::ffi::OsStr;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const MARK: u64 = 100; // MARK_BEFORE + MARK_AFTER in many_locks.c
const SMALL: u64 = 10;
const MANY: u64 = 20000;

// ---------------------------------------------------------------------------
// Helpers of this file
// ---------------------------------------------------------------------------

/// Runs `bin args…` under the shim in the working directory `cwd` with the
/// given environment (LOCKSUIT_DIR only if `env` sets it).
fn run_shim_in<S: AsRef<OsStr>>(
    bin: &Path,
    args: &[S],
    cwd: &Path,
    env: &[(&str, &OsStr)],
) -> Output {
    let mut cmd = Command::new(bin);
    cmd.args(args)
        .current_dir(cwd)
        .env("LD_PRELOAD", shim_path())
        .env_remove("LOCKSUIT_DIR")
        .env_remove("LOCKSUIT_MAX_MB")
        .env_remove("LOCKSUIT_HOLD_SAMPLE");
    for (k, v) in env {
        cmd.env(k, v);
    }
    run_captured(cmd)
}

/// Same exit status and stdout as the plain run; the plain run printed
/// nothing on stderr. Returns the shim run's stderr lines.
fn assert_program_unchanged(plain: &Output, shim: &Output, what: &str) -> Vec<String> {
    assert!(
        shim.status.code().is_some(),
        "{what}: the program must exit, not be killed by a signal\n{}",
        describe(shim)
    );
    assert_eq!(
        shim.status.code(),
        plain.status.code(),
        "{what}: same exit status\nplain: {}\nshim: {}",
        describe(plain),
        describe(shim)
    );
    assert_eq!(
        stable_stdout(shim),
        stable_stdout(plain),
        "{what}: same stdout\nplain: {}\nshim: {}",
        describe(plain),
        describe(shim)
    );
    assert!(
        plain.stderr.is_empty(),
        "{what}: plain stderr: {}",
        describe(plain)
    );
    String::from_utf8_lossy(&shim.stderr)
        .lines()
        .map(str::to_string)
        .collect()
}

/// stderr is exactly one line, starting with "locksuit: ".
fn assert_one_shim_line(lines: &[String], what: &str) -> String {
    assert_eq!(
        lines.len(),
        1,
        "{what}: exactly one line on stderr, got {lines:?}"
    );
    assert!(
        lines[0].starts_with("locksuit: "),
        "{what}: the line starts with `locksuit: `: {:?}",
        lines[0]
    );
    lines[0].clone()
}

fn pid_of(out: &Output) -> u64 {
    stdout_value(&stdout_str(out), "pid").parse().unwrap()
}

/// Every `locksuit.*` file (trace, symlink, anything) directly in `dir`.
fn locksuit_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("locksuit."))
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// A small many_locks run's process: every count exact, nothing dropped.
fn check_small_run(p: &Value, out: &Output, what: &str) {
    assert_eq!(
        p["pid"].as_u64(),
        Some(pid_of(out)),
        "{what}: the program's trace"
    );
    assert_eq!(p["complete"], Value::Bool(true), "{what}: {}", short(p));
    assert_eq!(u64_of(p, "dropped_events"), 0, "{what}: nothing dropped");
    // Only what the shim said on stderr, said again.
    let own: Vec<_> = arr(p, "warnings")
        .iter()
        .filter(|w| !w.as_str().unwrap_or("").starts_with("the shim said: "))
        .collect();
    assert!(own.is_empty(), "{what}: no warnings: {own:?}");
    let said: Vec<String> = String::from_utf8_lossy(&out.stderr)
        .lines()
        .map(|l| l.trim_start_matches("locksuit: ").to_string())
        .collect();
    assert_eq!(
        shim_said(p),
        said,
        "{what}: the report says what stderr did"
    );
    let marker = lock_by_address(p, &stdout_value(&stdout_str(out), "marker"));
    assert_eq!(
        u64_of(marker, "acquisitions"),
        MARK,
        "{what}: {}",
        short(marker)
    );
    assert_eq!(
        locks(p).len() as u64,
        SMALL + 1,
        "{what}: the marker and {SMALL} heap mutexes: {}",
        short(&p["locks"])
    );
    for l in locks(p) {
        if l["address"] != marker["address"] {
            assert_eq!(u64_of(l, "acquisitions"), 1, "{what}: {}", short(l));
            assert_eq!(str_of(l, "origin"), "init", "{what}: {}", short(l));
        }
    }
}

fn many_locks() -> PathBuf {
    build_c("many_locks")
}

/// 64 threads alive at once, each writing about five blocks of events:
/// a lane that keeps writing reserves blocks ahead, and those it never
/// uses must not make the trace look full to the others. Under a cap just
/// above what the run needs (about 5.3 MiB), nothing is dropped.
#[test]
fn blocks_reserved_ahead_do_not_fill_the_trace_before_its_cap() {
    let bin = build_c("many_writers");
    let plain = run_plain(&bin, &["64", "400"]);
    assert_success(&plain, "many_writers without the shim");
    let dir = fresh_dir("limits_reserved_ahead");
    let out = run_under_shim_env(
        &bin,
        &["64", "400"],
        &dir,
        &[("LOCKSUIT_EVENTS", "all"), ("LOCKSUIT_MAX_MB", "6")],
    );
    assert_same_output(&plain, &out);
    assert!(out.stderr.is_empty(), "{}", describe(&out));
    assert_eq!(stdout_value(&stdout_str(&out), "pairs"), "25600");
    let report = report_json(&[&only_trace(&dir)], None);
    let p = only_process(&report);
    assert_eq!(u64_of(p, "dropped_events"), 0, "{}", short(p));
    assert_eq!(arr(p, "threads").len(), 65, "{}", short(p));
    let lock = locks(p)
        .iter()
        .find(|l| l["id"] == "&lock")
        .unwrap_or_else(|| panic!("{}", short(p)));
    assert_eq!(u64_of(lock, "acquisitions"), 25_600, "{}", short(lock));
}

// ---------------------------------------------------------------------------
// a, b: unusable directories
// ---------------------------------------------------------------------------

/// LOCKSUIT_DIR under a regular file cannot be created: the trace goes to
/// $TMPDIR, and the one stderr line says where.
#[test]
fn unwritable_locksuit_dir_falls_back_to_tmpdir() {
    let bin = many_locks();
    let base = fresh_dir("limits_fallback");
    let afile = base.join("afile");
    fs::write(&afile, b"").unwrap();
    let tmp = base.join("tmp");
    let cwd = base.join("cwd");
    fs::create_dir_all(&tmp).unwrap();
    fs::create_dir_all(&cwd).unwrap();
    let locksuit_dir = afile.join("sub");

    let plain = run_plain(&bin, &[SMALL.to_string()]);
    assert_success(&plain, "many_locks without the shim");
    let out = run_shim_in(
        &bin,
        &[SMALL.to_string()],
        &cwd,
        &[
            ("LOCKSUIT_DIR", locksuit_dir.as_os_str()),
            ("TMPDIR", tmp.as_os_str()),
        ],
    );
    let lines = assert_program_unchanged(&plain, &out, "unwritable LOCKSUIT_DIR");
    let line = assert_one_shim_line(&lines, "unwritable LOCKSUIT_DIR");
    assert!(
        line.contains(tmp.to_str().unwrap()),
        "the line says where the trace went instead ({}): {line:?}",
        tmp.display()
    );

    let pid = pid_of(&out);
    let trace = trace_named(&tmp, "many_locks", pid);
    assert_eq!(
        locksuit_files(&tmp),
        vec![trace.clone()],
        "only the one trace in TMPDIR"
    );
    assert!(
        locksuit_files(&cwd).is_empty(),
        "nothing in the working directory"
    );
    assert_eq!(
        fs::read(&afile).unwrap(),
        b"",
        "the regular file is untouched"
    );
    let report = report_json(&[&trace], None);
    check_small_run(only_process(&report), &out, "fallback trace");
}

/// Neither LOCKSUIT_DIR nor TMPDIR usable: the program runs unchanged, one
/// stderr line, and no trace anywhere.
#[test]
fn no_usable_directory_records_nothing() {
    let bin = many_locks();
    let base = fresh_dir("limits_nowhere");
    let afile = base.join("afile");
    fs::write(&afile, b"").unwrap();
    let cwd = base.join("cwd");
    fs::create_dir_all(&cwd).unwrap();

    let plain = run_plain(&bin, &[SMALL.to_string()]);
    assert_success(&plain, "many_locks without the shim");
    let out = run_shim_in(
        &bin,
        &[SMALL.to_string()],
        &cwd,
        &[
            ("LOCKSUIT_DIR", afile.join("sub").as_os_str()),
            ("TMPDIR", afile.join("sub2").as_os_str()),
        ],
    );
    let lines = assert_program_unchanged(&plain, &out, "no usable directory");
    assert_one_shim_line(&lines, "no usable directory");
    let pid = pid_of(&out);
    assert!(
        locksuit_files(&base).is_empty(),
        "{:?}",
        locksuit_files(&base)
    );
    assert!(
        locksuit_files(&cwd).is_empty(),
        "{:?}",
        locksuit_files(&cwd)
    );
    let stray: Vec<PathBuf> = locksuit_files(Path::new("/tmp"))
        .into_iter()
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(&format!("locksuit.many_locks.{pid}."))
        })
        .collect();
    assert!(stray.is_empty(), "no trace in /tmp either: {stray:?}");
    assert_eq!(fs::read(&afile).unwrap(), b"");
}

// ---------------------------------------------------------------------------
// c: RLIMIT_FSIZE
// ---------------------------------------------------------------------------

const ULIMIT_SCRIPT: &str = "ulimit -f 64 && exec \"$0\" \"$@\"";
/// `ulimit -f 64` is 64 blocks of 512 bytes (POSIX sh) or of 1024 (bash).
const ULIMIT_MAX_BYTES: u64 = 64 * 1024;

/// A trace that would need megabytes under a 32–64 KiB file-size limit:
/// the program is not killed by SIGXFSZ, one stderr line, and the trace is
/// readable and reports what was dropped.
#[test]
fn file_size_limit_degrades_without_sigxfsz() {
    let bin = many_locks();
    let n = MANY.to_string();
    let mut plain_cmd = Command::new("sh");
    plain_cmd
        .args(["-c", ULIMIT_SCRIPT])
        .arg(&bin)
        .arg(&n)
        .env_remove("LD_PRELOAD")
        .env_remove("LOCKSUIT_DIR");
    let plain = run_captured(plain_cmd);
    assert_success(&plain, "many_locks under ulimit -f without the shim");

    let dir = fresh_dir("limits_fsize");
    let dir_abs = fs::canonicalize(&dir).unwrap();
    let sh = Path::new("/bin/sh");
    let args: Vec<&OsStr> = vec![
        OsStr::new("-c"),
        OsStr::new(ULIMIT_SCRIPT),
        bin.as_os_str(),
        OsStr::new(&n),
    ];
    let out = run_shim_in(sh, &args, &dir, &[("LOCKSUIT_DIR", dir_abs.as_os_str())]);
    let lines = assert_program_unchanged(&plain, &out, "ulimit -f 64");
    assert_success(&out, "many_locks under ulimit -f with the shim");
    assert_one_shim_line(&lines, "ulimit -f 64");
    assert_eq!(stdout_value(&stdout_str(&out), "created"), MANY.to_string());

    let trace = trace_named(&dir, "many_locks", pid_of(&out));
    let size = fs::metadata(&trace).unwrap().len();
    assert!(
        size <= ULIMIT_MAX_BYTES,
        "the trace stays within the file-size limit: {size} bytes"
    );
    let report = report_json(&[&trace], None);
    let p = only_process(&report);
    assert_eq!(p["complete"], Value::Bool(true), "{}", short(p));
    assert!(
        u64_of(p, "dropped_events") > 0,
        "dropped_events: {}",
        short(p)
    );
    assert!(
        !arr(p, "warnings").is_empty(),
        "the report warns about the drops: {}",
        short(p)
    );
    assert!(
        (locks(p).len() as u64) < MANY,
        "not every lock fits in the trace"
    );
    // Counting goes on in records the trace already has.
    let marker = lock_by_address(p, &stdout_value(&stdout_str(&out), "marker"));
    assert_eq!(
        u64_of(marker, "acquisitions"),
        MARK,
        "the marker's record existed before the limit was hit: {}",
        short(marker)
    );
}

// ---------------------------------------------------------------------------
// d: LOCKSUIT_MAX_MB and malformed settings
// ---------------------------------------------------------------------------

fn run_max_mb_1() -> (Output, Value) {
    let bin = many_locks();
    let n = MANY.to_string();
    let plain = run_plain(&bin, &[&n]);
    assert_success(&plain, "many_locks without the shim");
    let dir = fresh_dir("limits_max_mb");
    let out = run_under_shim_env(&bin, &[&n], &dir, &[("LOCKSUIT_MAX_MB", "1")]);
    let lines = assert_program_unchanged(&plain, &out, "LOCKSUIT_MAX_MB=1");
    assert_one_shim_line(&lines, "LOCKSUIT_MAX_MB=1");
    let trace = only_trace(&dir);
    let size = fs::metadata(&trace).unwrap().len();
    assert!(
        size <= 1024 * 1024,
        "the trace is at most 1 MiB: {size} bytes"
    );
    let report = report_json(&[&trace], None);
    let p = only_process(&report).clone();
    assert_eq!(p["pid"].as_u64(), Some(pid_of(&out)));
    (out, p)
}

#[test]
fn max_mb_cap_drops_and_warns() {
    let (out, p) = run_max_mb_1();
    assert_eq!(p["complete"], Value::Bool(true), "{}", short(&p));
    assert!(u64_of(&p, "dropped_events") > 0, "{}", short(&p));
    assert!(!arr(&p, "warnings").is_empty(), "{}", short(&p["warnings"]));
    assert!((locks(&p).len() as u64) < MANY + 1);
    // What the shim said on stderr, the report says too.
    let said = String::from_utf8_lossy(&out.stderr);
    let said = said.trim_end().trim_start_matches("locksuit: ");
    assert!(
        shim_said(&p).iter().any(|w| w == said),
        "{said:?} in {:?}",
        shim_said(&p)
    );
}

/// The report's "the shim said: …" warnings, without that prefix.
fn shim_said(p: &Value) -> Vec<String> {
    arr(p, "warnings")
        .iter()
        .filter_map(|w| w.as_str()?.strip_prefix("the shim said: "))
        .map(str::to_string)
        .collect()
}

/// Issue 33, item 10: with LOCKSUIT_QUIET=1 the program's stderr is its
/// own, and the report keeps every warning: one said before the trace
/// existed (a malformed setting) and one after (the size cap).
#[test]
fn quiet_leaves_stderr_to_the_program_and_the_report_says_every_warning() {
    let bin = many_locks();
    let n = MANY.to_string();
    let plain = run_plain(&bin, &[&n]);
    let dir = fresh_dir("limits_quiet");
    let out = run_under_shim_env(
        &bin,
        &[&n],
        &dir,
        &[
            ("LOCKSUIT_MAX_MB", "1"),
            ("LOCKSUIT_FLIGHT", "yes"),
            ("LOCKSUIT_QUIET", "1"),
        ],
    );
    let lines = assert_program_unchanged(&plain, &out, "LOCKSUIT_QUIET=1");
    assert!(lines.is_empty(), "nothing of ours on stderr: {lines:?}");
    let report = report_json(&[&only_trace(&dir)], None);
    let said = shim_said(only_process(&report));
    assert!(
        said.iter()
            .any(|w| w.starts_with("LOCKSUIT_FLIGHT must be 0 or 1")),
        "{said:?}"
    );
    assert!(
        said.iter()
            .any(|w| w.contains("size cap (LOCKSUIT_MAX_MB)")),
        "{said:?}"
    );
    assert_eq!(said.len(), 2, "each said once: {said:?}");
}

/// docs/recording.md: above the cap "the shim keeps counting into records it already
/// has". The marker lock was recorded (70 acquisitions, same thread, same
/// line) before any heap mutex existed; its last 30 acquisitions come after
/// the cap was hit and must still be counted.
#[test]
fn max_mb_cap_keeps_counting_into_existing_records() {
    let (out, p) = run_max_mb_1();
    let marker = lock_by_address(&p, &stdout_value(&stdout_str(&out), "marker"));
    assert_eq!(
        u64_of(marker, "acquisitions"),
        MARK,
        "marker: 70 before the cap + 30 after, into its existing record: {}\n\
         dropped_events {}",
        short(marker),
        p["dropped_events"]
    );
}

/// One warning line naming the bad setting; the defaults are used.
fn check_malformed(var: &str, value: &str) -> Value {
    let bin = many_locks();
    let plain = run_plain(&bin, &[SMALL.to_string()]);
    assert_success(&plain, "many_locks without the shim");
    let dir = fresh_dir("limits_malformed");
    let out = run_under_shim_env(&bin, &[SMALL.to_string()], &dir, &[(var, value)]);
    let what = format!("{var}={value}");
    let lines = assert_program_unchanged(&plain, &out, &what);
    let line = assert_one_shim_line(&lines, &what);
    assert!(
        line.contains(var),
        "{what}: the warning names {var}: {line:?}"
    );
    let trace = trace_named(&dir, "many_locks", pid_of(&out));
    let report = report_json(&[&trace], None);
    let p = only_process(&report).clone();
    check_small_run(&p, &out, &what);
    p
}

#[test]
fn malformed_max_mb_uses_default() {
    check_malformed("LOCKSUIT_MAX_MB", "abc");
    check_malformed("LOCKSUIT_MAX_MB", "0");
}

#[test]
fn malformed_hold_sample_uses_default() {
    let p = check_malformed("LOCKSUIT_HOLD_SAMPLE", "-5");
    for l in locks(&p) {
        assert_eq!(
            u64_of(l, "hold_samples"),
            0,
            "default: uncontended holds are not timed: {}",
            short(l)
        );
    }
}

#[test]
fn malformed_data_sample_uses_default() {
    check_malformed("LOCKSUIT_DATA_SAMPLE", "0");
    check_malformed("LOCKSUIT_DATA_SAMPLE", "some");
}

/// `hold_sample_period` is what the shim used: 0 by default (and after a
/// malformed value), N with LOCKSUIT_HOLD_SAMPLE=N.
#[test]
fn hold_sample_period_is_reported_as_set() {
    let bin = many_locks();
    let mut seen = Vec::new();
    for (setting, want_period, want_marker_samples) in
        [(None, 0u64, 0u64), (Some("-5"), 0, 0), (Some("1"), 1, MARK)]
    {
        let dir = fresh_dir("limits_hold_sample");
        let env: Vec<(&str, &str)> = setting
            .map(|v| vec![("LOCKSUIT_HOLD_SAMPLE", v)])
            .unwrap_or_default();
        let out = run_under_shim_env(&bin, &[SMALL.to_string()], &dir, &env);
        assert_success(&out, "many_locks");
        let report = report_json(&[&only_trace(&dir)], None);
        let p = only_process(&report);
        let marker = lock_by_address(p, &stdout_value(&stdout_str(&out), "marker"));
        assert_eq!(
            u64_of(marker, "hold_samples"),
            want_marker_samples,
            "LOCKSUIT_HOLD_SAMPLE={setting:?}: {}",
            short(marker)
        );
        seen.push((setting, want_period, p["hold_sample_period"].clone()));
    }
    let wrong: Vec<_> = seen
        .iter()
        .filter(|(_, want, got)| got.as_u64() != Some(*want))
        .collect();
    assert!(
        wrong.is_empty(),
        "hold_sample_period (setting, expected, reported): {wrong:?}"
    );
}

// ---------------------------------------------------------------------------
// e: a symlink at the trace path
// ---------------------------------------------------------------------------

const SECOND_USES: u64 = 33;
const FIRST_USES: u64 = 12;

/// Runs symlink_exec: it plants DIR/locksuit.spawn_child.<pid>.trace ->
/// `victim` and execs spawn_child with the same pid.
fn run_symlink_exec(victim: &Path, tag: &str) -> (Output, PathBuf) {
    let first = build_c("symlink_exec");
    let second = build_c("spawn_child");
    let plain_dir = fresh_dir(&format!("limits_symlink_plain_{tag}"));
    let plain_args = [
        fs::canonicalize(&plain_dir).unwrap().into_os_string(),
        victim.as_os_str().to_owned(),
        second.as_os_str().to_owned(),
        "spawn_child".into(),
    ];
    let plain = run_plain(&first, &plain_args);
    assert_success(&plain, "symlink_exec without the shim");

    let dir = fresh_dir(&format!("limits_symlink_{tag}"));
    let dir_abs = fs::canonicalize(&dir).unwrap();
    let args = [
        dir_abs.clone().into_os_string(),
        victim.as_os_str().to_owned(),
        second.as_os_str().to_owned(),
        "spawn_child".into(),
    ];
    let out = run_under_shim(&first, &args, &dir);
    assert_success(&out, "symlink_exec under the shim");
    let normalise = |o: &Output| -> Vec<String> {
        stdout_str(o)
            .lines()
            .filter(|l| {
                !l.starts_with("pid ")
                    && !l.starts_with("second-pid ")
                    && !l.starts_with("link ")
                    && !l.contains(" 0x")
            })
            .map(str::to_string)
            .collect()
    };
    assert_eq!(
        normalise(&out),
        normalise(&plain),
        "same output\n{}",
        describe(&out)
    );
    assert!(
        out.stderr.is_empty(),
        "nothing on stderr: {}",
        describe(&out)
    );
    let stdout = stdout_str(&out);
    assert_eq!(
        stdout_value(&stdout, "second-pid"),
        stdout_value(&stdout, "pid"),
        "exec keeps the pid"
    );
    assert_eq!(
        stdout_value(&stdout, "second-uses"),
        SECOND_USES.to_string()
    );
    (out, dir)
}

/// The symlink is left alone, the second image's trace gets the numbered
/// name, and both images' traces are readable with exact counts.
fn check_symlink_run(out: &Output, dir: &Path, victim: &Path) {
    let stdout = stdout_str(out);
    let pid = pid_of(out);
    let link = dir.join(format!("locksuit.spawn_child.{pid}.trace"));
    let meta = fs::symlink_metadata(&link).expect("the planted symlink still exists");
    assert!(
        meta.file_type().is_symlink(),
        "{} is still a symlink",
        link.display()
    );
    assert_eq!(
        fs::read_link(&link).unwrap(),
        victim,
        "and still points at the victim"
    );

    let numbered = dir.join(format!("locksuit.spawn_child.{pid}.1.trace"));
    let meta = fs::symlink_metadata(&numbered).unwrap_or_else(|e| {
        panic!(
            "{} must exist ({e}); files: {:?}",
            numbered.display(),
            locksuit_files(dir)
        )
    });
    assert!(
        meta.file_type().is_file(),
        "the numbered trace is a regular file"
    );
    assert_eq!(meta.permissions().mode() & 0o777, 0o600, "mode 0600");
    let report = report_json(&[&numbered], None);
    let p = only_process(&report);
    assert_eq!(p["pid"].as_u64(), Some(pid));
    assert!(str_of(p, "exe").ends_with("/spawn_child"), "{}", p["exe"]);
    assert_eq!(p["complete"], Value::Bool(true));
    let lock = lock_by_address(p, &stdout_value(&stdout, "second-lock"));
    assert_eq!(u64_of(lock, "acquisitions"), SECOND_USES, "{}", short(lock));

    let first = trace_named(dir, "symlink_exec", pid);
    let report = report_json(&[&first], None);
    let p = only_process(&report);
    assert_eq!(p["ended_by"].as_str(), Some("exec"), "{}", short(p));
    let lock = lock_by_address(p, &stdout_value(&stdout, "first_lock"));
    assert_eq!(u64_of(lock, "acquisitions"), FIRST_USES, "{}", short(lock));

    assert_eq!(
        locksuit_files(dir),
        {
            let mut v = vec![link, numbered, first];
            v.sort();
            v
        },
        "no other file was created"
    );
}

#[test]
fn symlink_at_trace_path_is_refused() {
    let victim_dir = fresh_dir("limits_symlink_victim");
    let victim = fs::canonicalize(&victim_dir).unwrap().join("victim.txt");
    let content = b"precious victim content\n".to_vec();
    fs::write(&victim, &content).unwrap();
    fs::set_permissions(&victim, fs::Permissions::from_mode(0o644)).unwrap();

    let (out, dir) = run_symlink_exec(&victim, "file");
    assert_eq!(
        fs::read(&victim).unwrap(),
        content,
        "the victim file's content is unchanged"
    );
    assert_eq!(
        fs::metadata(&victim).unwrap().permissions().mode() & 0o777,
        0o644,
        "the victim's mode is unchanged"
    );
    check_symlink_run(&out, &dir, &victim);
}

#[test]
fn dangling_symlink_at_trace_path_is_refused() {
    let victim_dir = fresh_dir("limits_symlink_dangling");
    let victim = fs::canonicalize(&victim_dir).unwrap().join("not-there");
    let (out, dir) = run_symlink_exec(&victim, "dangling");
    assert!(
        fs::symlink_metadata(&victim).is_err(),
        "no file was created through the dangling symlink"
    );
    check_symlink_run(&out, &dir, &victim);
}
