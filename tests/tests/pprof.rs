//! The pprof profile as `go tool pprof` (Debian's golang-go, which
//! `.ci/run` installs) reads it: a stripped program's frames are left to
//! symbolize, and `-symbolize=local` names them once the program with
//! debug information is at the mapping's path. (Go's own pprof reads
//! binaries with Go's libraries, which give no build id: it ignores
//! `PPROF_BINARY_PATH` for a mapping that has one, and follows no
//! separate debug file; the mapping's build id serves google/pprof with
//! binutils, Parca and Pyroscope.) a program started by a shell
//! wrapper is profiled, not the shell. Ground truth from tests/c/knob.c:
//! main waits for `knob_lock` at contend() 30 times.

use locksuit_tests::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `go`, or None (the test then says so and passes).
fn go() -> Option<PathBuf> {
    ["/usr/bin/go", "/usr/lib/go/bin/go", "/usr/local/go/bin/go"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

/// `go tool pprof ARGS profile`, looking for binaries in `binaries`.
fn pprof(go: &Path, args: &[&str], profile: &Path, binaries: &Path) -> String {
    let out = Command::new(go)
        .args(["tool", "pprof"])
        .args(args)
        .arg(profile)
        .env("HOME", profile.parent().unwrap())
        .env("PPROF_TMPDIR", profile.parent().unwrap())
        .env("PPROF_BINARY_PATH", binaries)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "go tool pprof {args:?}: {}",
        describe(&out)
    );
    stdout_str(&out)
}

/// Runs `program args` with knob.c's 30 contended waits under the shim
/// and writes the pprof profile of the traces into `dir`.
fn profile_of(program: &Path, args: &[&str], dir: &Path) -> PathBuf {
    let traces = dir.join("traces");
    std::fs::create_dir_all(&traces).unwrap();
    let out = run_under_shim_env(program, args, &traces, &[("KNOB_CONTENDED", "30")]);
    assert_success(&out, "knob");
    let profile = dir.join("locks.pb.gz");
    let made = run_locksuit(&[
        "report",
        "--format",
        "pprof",
        "-o",
        profile.to_str().unwrap(),
        traces.to_str().unwrap(),
    ]);
    assert_success(&made, "locksuit report --format pprof");
    profile
}

#[test]
fn a_stripped_program_is_symbolized_from_its_debug_file() {
    let Some(go) = go() else {
        eprintln!("go is not installed: the pprof check is skipped (.ci/run installs golang-go)");
        return;
    };
    let dir = fresh_dir("pprof-stripped");
    let (bin, unstripped, build_id) = build_c_stripped("knob", &dir);
    let profile = profile_of(&bin, &[], &dir);
    let nowhere = dir.join("no-binaries");
    std::fs::create_dir_all(&nowhere).unwrap();
    // The program's mapping: its file, its build id, not symbolized.
    let raw = pprof(&go, &["-raw", "-symbolize=none"], &profile, &nowhere);
    let mappings = raw
        .split("Mappings")
        .nth(1)
        .unwrap_or_else(|| panic!("{raw}"));
    let program = mappings
        .lines()
        .find(|l| l.contains(bin.to_str().unwrap()))
        .unwrap_or_else(|| panic!("no mapping of the program: {raw}"));
    assert!(program.contains(&build_id), "{program}");
    assert!(!program.contains("[FN]"), "marked symbolized: {program}");
    // Without debug information nothing names contend().
    let top = pprof(&go, &["-top", "-symbolize=local"], &profile, &nowhere);
    assert!(top.contains("File: knob"), "{top}");
    assert!(!top.contains(" contend"), "{top}");
    // With the program with debug information (the same build id) in its
    // place, pprof names them.
    std::fs::copy(&unstripped, &bin).unwrap();
    let top = pprof(&go, &["-top", "-symbolize=local"], &profile, &nowhere);
    assert!(top.contains(" contend"), "{top}");
    assert!(top.contains(" main"), "{top}");
}

#[test]
fn a_program_started_by_a_shell_wrapper_is_the_one_profiled() {
    let Some(go) = go() else {
        eprintln!("go is not installed: the pprof check is skipped (.ci/run installs golang-go)");
        return;
    };
    let knob = build_c("knob");
    let dir = fresh_dir("pprof-wrapper");
    // Like pyenv's shims: a bash script that runs the program and waits.
    let wrapper = dir.join("knob-wrapper");
    std::fs::write(&wrapper, "\"$@\"\nstatus=$?\nexit $status\n").unwrap();
    let profile = profile_of(
        Path::new("/bin/bash"),
        &[wrapper.to_str().unwrap(), knob.to_str().unwrap()],
        &dir,
    );
    let top = pprof(&go, &["-top"], &profile, &dir);
    assert!(top.contains("File: knob"), "{top}");
    assert!(top.contains(" contend"), "{top}");
    // The shell's waits are not there. (A `read` may be: knob's own, on
    // its pipe, when a busy machine makes it block long enough to count.)
    for shell_wait in ["waitpid", "wait4"] {
        assert!(!top.contains(shell_wait), "{shell_wait}: {top}");
    }
    let raw = pprof(&go, &["-raw"], &profile, &dir);
    let mappings = raw
        .split("Mappings")
        .nth(1)
        .unwrap_or_else(|| panic!("no mappings: {raw}"));
    assert!(!mappings.contains("bash"), "the shell's mapping: {raw}");
}
