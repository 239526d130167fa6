//! The shim stays invisible in the corners: robust mutexes made not
//! recoverable, priority-inheritance and priority-protect mutexes, locks
//! seen only through a read-only mapping, programs that close or never had descriptors 0-1023, a
//! replaced stderr, any umask, missing trace directories, very long program
//! names, and a program rebuilt after its run. Each test compares the
//! program with and without the shim: exit status, output, and the user's
//! own files byte for byte.

use locksuit_tests::*;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

/// Runs `sh -c SCRIPT bin args…` (the script refers to the program as
/// "$0"), plainly or under the shim into `dir`.
fn via_shell(script: &str, bin: &Path, args: &[&str], dir: Option<&Path>) -> Output {
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg(script).arg(bin).args(args);
    cmd.env_remove("LD_PRELOAD").env_remove("LOCKSUIT_DIR");
    if let Some(dir) = dir {
        cmd.env("LD_PRELOAD", shim_path()).env("LOCKSUIT_DIR", dir);
    }
    run_captured(cmd)
}

fn mode_of(path: &Path) -> u32 {
    fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// A robust mutex whose owner died and that was unlocked without
/// `pthread_mutex_consistent`: every later lock, timed lock, clock lock and
/// lock from another thread returns ENOTRECOVERABLE at once, as without the
/// shim (it used to hang: the shim's trylock-first left the mutex locked).
#[test]
fn robust_mutex_made_not_recoverable_never_hangs() {
    let bin = build_c("robust");
    let plain = run_plain(&bin, &[] as &[&str]);
    assert_success(&plain, "robust without the shim");
    let dir = fresh_dir("corners_robust");
    let shim = run_under_shim(&bin, &[] as &[&str], &dir);
    assert_same_output_and_stderr_names(&plain, &shim);
    let stdout = stdout_str(&shim);
    assert_eq!(stdout_value(&stdout, "normal-other-thread-lock"), "131");
    let report = report_json(&[&only_trace(&dir)], None);
    let p = only_process(&report);
    assert_eq!(p["complete"], Value::Bool(true));
    // Private robust mutexes (glibc marks them shared inside, the init
    // call's attributes say they are not), with their unusual results.
    let stderr = String::from_utf8_lossy(&shim.stderr).to_string();
    let m = lock_by_address(p, &stdout_value(&stderr, "m"));
    assert_eq!(m["robust"], Value::Bool(true));
    assert_eq!(m["process_shared"], Value::Bool(false), "{}", short(m));
    assert_eq!(u64_of(&m["outcomes"], "owner_died"), 1, "{}", short(m));
    // lock, timedlock, clocklock, lock again, another thread's lock, trylock.
    assert_eq!(u64_of(&m["outcomes"], "not_recoverable"), 6, "{}", short(m));
}

/// Robust and PI mutexes taken 200 times at one line (the shim caches
/// such a call), then the robust one orphaned and made not recoverable at
/// that same line: every call returns what it returns without the shim
/// (a cached call must not be tried first: glibc's trylock would leave the
/// mutex locked and the next lock hang), and every acquisition is counted.
#[test]
fn robust_and_pi_mutexes_taken_often_at_one_line_are_never_tried_first() {
    let bin = build_c("robust_one_line");
    let plain = run_plain(&bin, &[] as &[&str]);
    assert_success(&plain, "robust_one_line without the shim");
    assert!(
        stdout_str(&plain).contains("lock 131\n"),
        "{}",
        stdout_str(&plain)
    );
    let dir = fresh_dir("corners_robust_one_line");
    let shim = run_under_shim(&bin, &[] as &[&str], &dir);
    assert_same_output_and_stderr_names(&plain, &shim);
    let report = report_json(&[&only_trace(&dir)], None);
    let p = only_process(&report);
    let stderr = String::from_utf8_lossy(&shim.stderr).to_string();
    let m = lock_by_address(p, &stdout_value(&stderr, "m"));
    // 200, the dead thread's and the owner-died lock.
    assert_eq!(u64_of(m, "acquisitions"), 202, "{}", short(m));
    assert_eq!(u64_of(&m["outcomes"], "owner_died"), 1, "{}", short(m));
    assert_eq!(u64_of(&m["outcomes"], "not_recoverable"), 4, "{}", short(m));
    let pi = lock_by_address(p, &stdout_value(&stderr, "p"));
    assert_eq!(u64_of(pi, "acquisitions"), 200, "{}", short(pi));
}

/// A process-shared mutex taken often at one line, then made robust by
/// another process (an init the shim never saw) and orphaned there: the
/// next locks at that line return what they return without the shim
/// (EOWNERDEAD, then ENOTRECOVERABLE) and none hangs. The shim must read
/// the mutex's kind at every call, not trust what it cached for the line.
#[test]
fn a_shared_mutex_made_robust_by_another_process_is_never_tried_first() {
    let bin = build_c("robust_made_elsewhere");
    let plain = run_plain(&bin, &[] as &[&str]);
    assert_success(&plain, "robust_made_elsewhere without the shim");
    assert_eq!(
        stdout_str(&plain),
        "lock 130\nlock 131\nlock 131\nlock 131\nlock 131\ndone\n"
    );
    let dir = fresh_dir("corners_robust_made_elsewhere");
    let shim = run_under_shim(&bin, &[] as &[&str], &dir);
    assert_same_output(&plain, &shim);
}

/// PI and PP mutexes are locked without a trylock first (theirs goes to
/// the kernel): every call returns what it returns without the shim, every
/// successful acquisition is counted, and only the one that waited behind
/// another thread is contended. (A PP mutex keeps its ceiling in its lock
/// word, which once made every acquisition read as contended.)
/// Locks first seen without an init call, held by another process and
/// only tried through a read-only mapping: glibc's trylocks just read them
/// and return EBUSY. The shim makes such a lock's page resident before it
/// first reads it, and must not write to do so (an atomic exchange of the
/// value it held killed this program with SIGSEGV).
#[test]
fn locks_seen_only_through_a_read_only_mapping_are_never_written() {
    let bin = build_c("readonly_view");
    let plain = run_plain(&bin, &[] as &[&str]);
    assert_success(&plain, "readonly_view without the shim");
    assert_eq!(
        stdout_str(&plain),
        "mutex-trylock 16\nrwlock-tryrdlock 16\nrwlock-trywrlock 16\ndone\n"
    );
    let dir = fresh_dir("corners_readonly_view");
    let shim = run_under_shim(&bin, &[] as &[&str], &dir);
    assert_same_output(&plain, &shim);
    assert!(shim.stderr.is_empty(), "{}", describe(&shim));
}

#[test]
fn priority_protocol_mutexes_behave_and_count_exactly() {
    let bin = build_c("protocols");
    let plain = run_plain(&bin, &[] as &[&str]);
    assert_success(&plain, "protocols without the shim");
    let dir = fresh_dir("corners_protocols");
    let shim = run_under_shim(&bin, &[] as &[&str], &dir);
    assert_same_output_and_stderr_names(&plain, &shim);
    let stdout = stdout_str(&shim);
    let stderr = String::from_utf8_lossy(&shim.stderr).to_string();
    let report = report_json(&[&only_trace(&dir)], None);
    let p = only_process(&report);
    for protocol in ["pi", "pp"] {
        let value = |call: &str| stdout_value(&stdout, &format!("{protocol}-{call}"));
        let lock = lock_by_address(p, &stdout_value(&stderr, protocol));
        assert_eq!(
            u64_of(lock, "acquisitions").to_string(),
            value("locked"),
            "{protocol}: {}",
            short(lock)
        );
        // The second thread waited behind main if both their locks worked.
        let waited = value("lock-again") == "0" && value("other-thread-lock") == "0";
        assert_eq!(
            u64_of(lock, "contended"),
            u64::from(waited),
            "{protocol}: {}",
            short(lock)
        );
    }
}

/// A daemon-style program closes 3..1023 and opens its data file: it must
/// get the number it gets without the shim, and the shim must never write
/// into it (it used to write 16 KiB of zeros into it, then SIGBUS).
#[test]
fn a_program_closing_every_descriptor_keeps_its_files() {
    let bin = build_c("closed_fds");
    let plain_dir = fresh_dir("corners_daemon_plain");
    let plain_file = plain_dir.join("data");
    let plain = run_plain(&bin, &["daemon", plain_file.to_str().unwrap()]);
    assert_success(&plain, "daemon without the shim");
    let dir = fresh_dir("corners_daemon");
    let file = dir.join("data");
    let shim = run_under_shim(&bin, &["daemon", file.to_str().unwrap()], &dir);
    assert_same_output(&plain, &shim);
    assert!(shim.stderr.is_empty(), "{}", describe(&shim));
    assert_eq!(
        fs::read(&file).unwrap(),
        fs::read(&plain_file).unwrap(),
        "the program's own file, byte for byte"
    );
    // The trace kept growing after its descriptor was closed: every lock is there.
    let report = report_json(&[&only_trace(&dir)], None);
    let p = only_process(&report);
    assert_eq!(p["complete"], Value::Bool(true));
    assert_eq!(u64_of(p, "dropped_events"), 0, "{}", short(p));
    assert_eq!(locks(p).len(), 2000, "every lock made after the close");
}

/// Started with stdout closed (`>&-`), a write to descriptor 1 fails with
/// EBADF, as without the shim (it used to land in the trace).
#[test]
fn started_with_stdout_closed() {
    let bin = build_c("closed_fds");
    let script = r#"exec "$0" "$@" >&-"#;
    let plain = via_shell(script, &bin, &["stdout"], None);
    let dir = fresh_dir("corners_stdout");
    let shim = via_shell(script, &bin, &["stdout"], Some(&dir));
    assert_eq!(
        String::from_utf8_lossy(&plain.stderr),
        "stdout write -1 errno EBADF\n"
    );
    assert_eq!(shim.stderr, plain.stderr, "{}", describe(&shim));
    assert_eq!(shim.status.code(), plain.status.code());
}

/// Started with stdin closed (`<&-`), a read of descriptor 0 fails with
/// EBADF, as without the shim (it used to read the trace's bytes).
#[test]
fn started_with_stdin_closed() {
    let bin = build_c("closed_fds");
    let script = r#"exec "$0" "$@" <&-"#;
    let plain = via_shell(script, &bin, &["stdin"], None);
    let dir = fresh_dir("corners_stdin");
    let shim = via_shell(script, &bin, &["stdin"], Some(&dir));
    assert_eq!(stdout_str(&plain), "stdin read -1 errno EBADF\n");
    assert_same_output(&plain, &shim);
}

/// stderr closed and a data file opened in its place: the shim's "trace
/// full" warning must not go into the data file.
#[test]
fn a_data_file_in_place_of_stderr_gets_no_warning() {
    let bin = build_c("closed_fds");
    let plain_dir = fresh_dir("corners_stderr_plain");
    let plain_file = plain_dir.join("data");
    let plain = run_plain(&bin, &["stderr", plain_file.to_str().unwrap()]);
    assert_success(&plain, "stderr mode without the shim");
    let dir = fresh_dir("corners_stderr");
    let file = dir.join("data");
    let shim = run_under_shim_env(
        &bin,
        &["stderr", file.to_str().unwrap()],
        &dir,
        &[("LOCKSUIT_MAX_MB", "1")],
    );
    assert_same_output(&plain, &shim);
    assert_eq!(
        String::from_utf8_lossy(&fs::read(&file).unwrap()),
        String::from_utf8_lossy(&fs::read(&plain_file).unwrap()),
        "the program's own file, byte for byte"
    );
    // The warning was due: the trace did fill.
    let report = report_json(&[&only_trace(&dir)], None);
    assert!(u64_of(only_process(&report), "dropped_events") > 0);
}

/// Whatever the umask, the trace is 0600 and the directories the shim
/// creates (missing parents included) are 0700, and the user can report.
#[test]
fn modes_do_not_follow_the_umask_and_missing_parents_are_made() {
    let bin = build_c("tiny");
    for umask in ["0277", "0700", "0000"] {
        let root = fresh_dir(&format!("corners_umask_{umask}"));
        let dir = root.join("a").join("b").join("c");
        let script = format!(r#"umask {umask}; exec "$0""#);
        let shim = via_shell(&script, &bin, &[], Some(&dir));
        assert_success(&shim, &format!("tiny under umask {umask}"));
        assert!(shim.stderr.is_empty(), "{}", describe(&shim));
        for d in [root.join("a"), root.join("a/b"), dir.clone()] {
            assert_eq!(mode_of(&d), 0o700, "{} under umask {umask}", d.display());
        }
        // The shell that set the umask is recorded too, then execs tiny.
        let traces = traces_in(&dir);
        for t in &traces {
            assert_eq!(mode_of(t), 0o600, "{} under umask {umask}", t.display());
        }
        let trace = traces
            .into_iter()
            .find(|t| t.to_string_lossy().contains("locksuit.tiny."))
            .expect("a trace of tiny");
        let report = report_json(&[&trace], None);
        assert_eq!(only_process(&report)["complete"], Value::Bool(true));
    }
}

/// A program with a 240-character file name is recorded, its trace name
/// shortened to fit the file-name limit.
#[test]
fn a_very_long_program_name_is_recorded() {
    let tiny = build_c("tiny");
    let root = fresh_dir("corners_long_name");
    let name = "p".repeat(240);
    let bin = root.join(&name);
    fs::copy(&tiny, &bin).unwrap();
    let dir = root.join("traces");
    fs::create_dir(&dir).unwrap();
    let shim = run_under_shim(&bin, &[] as &[&str], &dir);
    assert_success(&shim, "the long-named program");
    assert!(shim.stderr.is_empty(), "{}", describe(&shim));
    let trace = only_trace(&dir);
    assert!(trace.file_name().unwrap().len() <= 255);
    let report = report_json(&[&trace], None);
    let p = only_process(&report);
    assert!(str_of(p, "exe").ends_with(&name), "{}", short(p));
    assert!(!locks(p).is_empty());
}

/// A program rebuilt after its run: its old trace must not be symbolized
/// against the new binary. The report says so and shows module+offset.
#[test]
fn a_rebuilt_program_is_not_symbolized_against_the_new_binary() {
    let root = fresh_dir("corners_rebuilt");
    let src = root.join("rebuilt.c");
    let bin = root.join("rebuilt");
    let program = |pad: &str| {
        format!(
            "#include <pthread.h>\n{pad}static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;\n\
             int main(void) {{ for (int i = 0; i < 10; i++) {{ pthread_mutex_lock(&m); \
             pthread_mutex_unlock(&m); }} return 0; }}\n"
        )
    };
    let compile = |text: &str| {
        fs::write(&src, text).unwrap();
        let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
        let out = Command::new(cc)
            .args(["-g", "-O1", "-pthread", "-o"])
            .arg(&bin)
            .arg(&src)
            .output()
            .unwrap();
        assert_success(&out, "compiling rebuilt.c");
    };
    compile(&program(""));
    let dir = root.join("traces");
    fs::create_dir(&dir).unwrap();
    assert_success(&run_under_shim(&bin, &[] as &[&str], &dir), "first build");
    let trace = only_trace(&dir);
    let before = report_json(&[&trace], None);
    let site = &sites(only_process(&before))[0];
    assert_eq!(site["function"].as_str(), Some("main"), "{}", short(site));

    // Same path, other code: the lines and addresses all move.
    compile(&program(
        "static int pad(int x) { return x * 3; }\nint (*keep)(int) = pad;\n",
    ));
    let after = report_json(&[&trace], None);
    let p = only_process(&after);
    let warned = arr(p, "warnings")
        .iter()
        .filter_map(|w| w.as_str())
        .any(|w| w.contains("changed since the run") && w.contains("build id"));
    assert!(
        warned,
        "a warning names the changed file: {}",
        short(&p["warnings"])
    );
    let site = &sites(p)[0];
    assert!(
        site["function"].is_null() && site["line"].is_null(),
        "no name from the new binary: {}",
        short(site)
    );
    let text = run_locksuit(&["report".as_ref(), trace.as_os_str()]);
    assert!(
        stdout_str(&text).contains("rebuilt+0x"),
        "module+offset in the text report:\n{}",
        stdout_str(&text)
    );
}
