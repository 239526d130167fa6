//! Under secure execution (AT_SECURE: setuid, setgid, file capabilities)
//! the shim is a pure pass-through: it records nothing, creates no file and
//! prints nothing. The loader ignores LD_PRELOAD paths with a slash in that
//! mode, so the program is linked against the shim instead (a setuid
//! install in a system directory would have the same effect). Needs root,
//! to make a binary setuid to another user; skips, saying so, otherwise.

use locksuit_tests::*;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;

const NOBODY: u32 = 65534;

fn stderr_lines(out: &std::process::Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .map(str::to_string)
        .collect()
}

fn run_in(bin: &Path, traces: &Path) -> std::process::Output {
    let mut cmd = Command::new(bin);
    cmd.env_remove("LD_PRELOAD").env("LOCKSUIT_DIR", traces);
    run_captured(cmd)
}

#[test]
fn secure_execution_records_nothing_and_changes_nothing() {
    // /proc/self belongs to the effective user.
    let euid = fs::metadata("/proc/self")
        .map(|m| m.uid())
        .unwrap_or(u32::MAX);
    if euid != 0 {
        eprintln!("SKIPPED: needs root to make a setuid binary for AT_SECURE");
        return;
    }
    // Everything the setuid process (euid nobody) needs must be reachable by
    // nobody: a world-readable directory of its own.
    let dir = std::env::temp_dir().join(format!("locksuit-secure-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
    fs::copy(shim_path(), dir.join("libsyncshim.so")).unwrap();
    let bin = dir.join("secure_exec");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let built = Command::new(&cc)
        .args(["-g", "-O0", "-pthread", "-o"])
        .arg(&bin)
        .arg(c_dir().join("secure_exec.c"))
        .arg(format!("-L{}", dir.display()))
        .arg(format!("-Wl,-rpath,{}", dir.display()))
        .args(["-Wl,--no-as-needed", "-lsyncshim"])
        .output()
        .expect("run the C compiler");
    assert!(built.status.success(), "{}", describe(&built));
    let traces = dir.join("traces");
    fs::create_dir_all(&traces).unwrap();
    fs::set_permissions(&traces, fs::Permissions::from_mode(0o777)).unwrap();

    // Control: the same binary, not setuid, is recorded (so the linked shim
    // does interpose).
    let control = run_in(&bin, &traces);
    assert_success(&control, "secure_exec, not setuid");
    assert_eq!(
        stderr_lines(&control),
        ["secure 0"],
        "{}",
        describe(&control)
    );
    let recorded = traces_in(&traces);
    assert_eq!(recorded.len(), 1, "the control run is recorded");
    let p = only_process(&report_json(&[&recorded[0]], None)).clone();
    let lock = locks(&p)
        .iter()
        .find(|l| u64_of(l, "acquisitions") > 1000)
        .unwrap_or_else(|| panic!("the shared mutex is recorded: {}", short(&p)));
    assert_eq!(u64_of(lock, "threads"), 2);
    fs::remove_file(&recorded[0]).unwrap();

    // Setuid to nobody, run by root: ruid != euid, so AT_SECURE is set.
    std::os::unix::fs::chown(&bin, Some(NOBODY), None).unwrap();
    fs::set_permissions(&bin, fs::Permissions::from_mode(0o4755)).unwrap();
    let secure = run_in(&bin, &traces);
    if stderr_lines(&secure).first().map(String::as_str) != Some("secure 1") {
        eprintln!(
            "SKIPPED: the setuid bit did not give secure execution here (nosuid mount?): {}",
            describe(&secure)
        );
        let _ = fs::remove_dir_all(&dir);
        return;
    }
    assert_eq!(secure.status.code(), control.status.code());
    assert_eq!(stdout_str(&secure), stdout_str(&control), "same output");
    assert_eq!(
        stderr_lines(&secure),
        ["secure 1"],
        "the shim says nothing: {}",
        describe(&secure)
    );
    assert!(
        traces_in(&traces).is_empty(),
        "no trace under secure execution: {:?}",
        traces_in(&traces)
    );
    let _ = fs::remove_dir_all(&dir);
}
