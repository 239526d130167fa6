//! Unreadable input: exit status 2, one line on stderr naming the file and the
//! problem, and never a panic.

use locksuit_tests::*;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

/// A real, valid trace of `tiny.c`, copied into a fresh directory.
fn real_trace(tag: &str) -> (PathBuf, Vec<u8>) {
    let bin = build_c("tiny");
    let run_dir = fresh_dir(&format!("bad_input_src_{tag}"));
    let out = run_under_shim(&bin, &[] as &[&str], &run_dir);
    assert_success(&out, "tiny under the shim");
    let trace = only_trace(&run_dir);
    // Sanity: the untouched trace is fine.
    let report = report_json(&[&trace], None);
    assert_eq!(processes(&report).len(), 1);
    let bytes = fs::read(&trace).unwrap();
    assert!(bytes.len() > 200, "a real trace is more than 200 bytes");
    (trace, bytes)
}

fn report(path: &Path) -> Output {
    let args = [
        "report".as_ref(),
        path.as_os_str(),
        "--format".as_ref(),
        "json".as_ref(),
    ];
    run_locksuit(&args)
}

fn assert_no_panic(out: &Output, what: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !err.contains("panicked") && !err.contains("RUST_BACKTRACE"),
        "{what}: locksuit panicked\n{}",
        describe(out)
    );
    assert!(
        out.status.code().is_some(),
        "{what}: locksuit was killed by a signal\n{}",
        describe(out)
    );
}

/// Exit 2, exactly one non-empty line on stderr that names `path`, no panic.
fn assert_rejected(path: &Path, what: &str) -> String {
    let out = report(path);
    assert_no_panic(&out, what);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{what}: exit status\n{}",
        describe(&out)
    );
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let lines: Vec<&str> = err.lines().collect();
    assert!(
        lines.len() == 1 && !lines[0].trim().is_empty(),
        "{what}: exactly one line on stderr, got {}:\n{err}",
        lines.len()
    );
    let name = path.file_name().unwrap().to_string_lossy();
    assert!(
        err.contains(name.as_ref()),
        "{what}: the message must name the file ({name}): {err}"
    );
    err
}

fn write_file(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    fs::write(&p, bytes).unwrap();
    p
}

#[test]
fn truncated_to_100_bytes() {
    let (_, bytes) = real_trace("t100");
    let dir = fresh_dir("bad_input_t100");
    let p = write_file(&dir, "locksuit.tiny.100.trace", &bytes[..100]);
    assert_rejected(&p, "trace cut to 100 bytes");
}

#[test]
fn truncated_to_half() {
    let (_, bytes) = real_trace("half");
    let dir = fresh_dir("bad_input_half");
    let p = write_file(&dir, "locksuit.tiny.2.trace", &bytes[..bytes.len() / 2]);
    assert_rejected(&p, "trace cut to half its size");
}

#[test]
fn random_bytes() {
    // 64 KiB from a fixed xorshift sequence (deterministic, not a real trace).
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut bytes = Vec::with_capacity(64 * 1024);
    while bytes.len() < 64 * 1024 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        bytes.extend_from_slice(&x.to_le_bytes());
    }
    let dir = fresh_dir("bad_input_random");
    let p = write_file(&dir, "locksuit.random.3.trace", &bytes);
    assert_rejected(&p, "64 KiB of random bytes");
}

#[test]
fn unknown_version() {
    let (_, mut bytes) = real_trace("version");
    assert_eq!(
        u32::from_le_bytes(bytes[8..12].try_into().unwrap()),
        locksuit_format::FORMAT_VERSION,
        "bytes 8..12 of a trace hold the format version"
    );
    bytes[8..12].copy_from_slice(&999u32.to_le_bytes());
    let dir = fresh_dir("bad_input_version");
    let p = write_file(&dir, "locksuit.tiny.4.trace", &bytes);
    let err = assert_rejected(&p, "trace with version 999");
    assert!(
        err.contains("999") || err.to_lowercase().contains("version"),
        "the message must say the version is the problem: {err}"
    );
}

#[test]
fn empty_directory() {
    let dir = fresh_dir("bad_input_empty");
    assert_rejected(&dir, "empty directory");
}

#[test]
fn missing_file() {
    let dir = fresh_dir("bad_input_missing");
    let p = dir.join("locksuit.nothing.5.trace");
    assert_rejected(&p, "missing file");
}

#[test]
fn threshold_out_of_range() {
    let (trace, _) = real_trace("threshold");
    for bad in ["1.5", "-0.1", "abc"] {
        let args = [
            "report".as_ref(),
            trace.as_os_str(),
            "--threshold".as_ref(),
            bad.as_ref(),
            "--format".as_ref(),
            "json".as_ref(),
        ];
        let out = run_locksuit(&args);
        let what = format!("--threshold {bad}");
        assert_no_panic(&out, &what);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{what}: exit status\n{}",
            describe(&out)
        );
        assert!(!out.stderr.is_empty(), "{what}: an error message on stderr");
    }
    // The bounds themselves are valid.
    for ok in [0.0, 1.0] {
        let r = report_json(&[&trace], Some(ok));
        assert_eq!(r["threshold"].as_f64(), Some(ok));
    }
}

/// A program whose file was replaced while it ran is recorded under
/// "<path> (deleted)" (its /proc/self/exe); its frames cannot be symbolized,
/// and the report says why instead of showing bare addresses unexplained.
#[test]
fn deleted_program_is_reported() {
    use locksuit_format::FileHeader;
    use std::mem::offset_of;
    let (_, mut bytes) = real_trace("deleted");
    let len_at = offset_of!(FileHeader, exe_len);
    let exe_at = offset_of!(FileHeader, exe);
    let len = u32::from_le_bytes(bytes[len_at..len_at + 4].try_into().unwrap()) as usize;
    let suffix = b" (deleted)";
    bytes[exe_at + len..exe_at + len + suffix.len()].copy_from_slice(suffix);
    bytes[len_at..len_at + 4].copy_from_slice(&((len + suffix.len()) as u32).to_le_bytes());
    let dir = fresh_dir("bad_input_deleted");
    let p = write_file(&dir, "locksuit.tiny.5.trace", &bytes);
    let report = report_json(&[&p], None);
    let process = only_process(&report);
    assert!(
        str_of(process, "exe").ends_with(" (deleted)"),
        "{}",
        short(process)
    );
    assert!(
        arr(process, "warnings")
            .iter()
            .any(|w| w.as_str().unwrap_or("").contains("deleted or replaced")),
        "{}",
        short(&process["warnings"])
    );
}

/// A damaged event inside an otherwise valid trace: the report still comes
/// out (exit 0) and says what was skipped.
#[test]
fn damaged_event_block_is_reported() {
    use locksuit_format::{BlockHeader, BLOCK_EVENTS, BLOCK_HEADER_SIZE, BLOCK_SIZE};
    let bin = build_c("tiny");
    let run_dir = fresh_dir("bad_input_event_src");
    let out = run_under_shim_env(
        &bin,
        &[] as &[&str],
        &run_dir,
        &[("LOCKSUIT_EVENTS", "all")],
    );
    assert_success(&out, "tiny under the shim, fully traced");
    let mut bytes = fs::read(only_trace(&run_dir)).unwrap();
    let block = (1..bytes.len() / BLOCK_SIZE)
        .find(|&i| {
            let kind = std::mem::offset_of!(BlockHeader, kind) + i * BLOCK_SIZE;
            u32::from_le_bytes(bytes[kind..kind + 4].try_into().unwrap()) == BLOCK_EVENTS
        })
        .expect("a fully traced run has an event block");
    // The first event claims an impossible size.
    let size_at = block * BLOCK_SIZE + BLOCK_HEADER_SIZE + 2;
    bytes[size_at..size_at + 2].copy_from_slice(&7u16.to_le_bytes());
    let dir = fresh_dir("bad_input_event");
    let p = write_file(&dir, "locksuit.tiny.6.trace", &bytes);
    let report = report_json(&[&p], None);
    let process = only_process(&report);
    assert!(
        arr(process, "warnings").iter().any(|w| w
            .as_str()
            .unwrap_or("")
            .contains("event blocks with a damaged record: 1")),
        "{}",
        short(&process["warnings"])
    );
}

/// Issue 10, item 5: a FIFO is refused at once (opening it would wait for a
/// writer forever), and a device is called what it is, not "an empty file".
#[test]
fn non_regular_files_are_refused_at_once() {
    let dir = fresh_dir("bad_input_fifo");
    let fifo = dir.join("locksuit.fifo.7.trace");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("run mkfifo");
    assert!(made.success(), "mkfifo {}", fifo.display());
    let started = std::time::Instant::now();
    let err = assert_rejected(&fifo, "a FIFO");
    assert!(err.contains("FIFO"), "says what it is: {err}");
    eprintln!("FIFO refused in {:?}", started.elapsed());

    let err = assert_rejected(Path::new("/dev/zero"), "/dev/zero");
    assert!(
        err.contains("character device") && !err.contains("empty"),
        "{err}"
    );
    // A directory's FIFO named like a trace is no trace of it either.
    assert_rejected(&dir, "a directory holding only a FIFO");
}

/// Issue 10, item 15: a trace named twice, or named and also found in its
/// directory, or reached through a symlink, is one process in the report.
#[test]
fn a_trace_named_twice_is_read_once() {
    let (trace, _) = real_trace("twice");
    let dir = trace.parent().unwrap();
    let link = fresh_dir("bad_input_twice_link").join("locksuit.tiny.8.trace");
    std::os::unix::fs::symlink(&trace, &link).unwrap();
    let dotted = dir.join(".").join(trace.file_name().unwrap());
    for paths in [
        vec![trace.as_path(), trace.as_path()],
        vec![trace.as_path(), dir],
        vec![dir, dotted.as_path(), dir],
        vec![link.as_path(), trace.as_path()],
    ] {
        let report = report_json(&paths, None);
        assert_eq!(processes(&report).len(), 1, "{paths:?}");
    }
}
