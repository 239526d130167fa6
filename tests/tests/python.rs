//! A real-world multi-threaded runtime: CPython. Its output is unchanged under
//! the shim, and the trace shows the GIL: a pthread mutex engaged by several
//! threads and used with a condition variable.

use locksuit_tests::*;
use std::path::PathBuf;
use std::process::Command;

/// The real interpreter binary behind `python3` (resolving wrappers such as
/// pyenv shims), or None if there is no python3.
fn python_executable() -> Option<PathBuf> {
    let mut cmd = Command::new("python3");
    cmd.args(["-c", "import sys; print(sys.executable)"]);
    let out = match cmd.output() {
        Ok(o) if o.status.success() => o,
        _ => return None,
    };
    let p = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    if p.is_file() {
        Some(p)
    } else {
        None
    }
}

#[test]
fn python_threads() {
    let Some(python) = python_executable() else {
        eprintln!("SKIPPED python_threads: `python3` is not on PATH");
        return;
    };
    let script = c_dir().join("threads.py");
    let args = [script.as_os_str()];

    let plain = run_plain(&python, &args);
    assert_success(&plain, "threads.py without the shim");
    let dir = fresh_dir("python");
    let shim = run_under_shim(&python, &args, &dir);
    assert_same_output(&plain, &shim);

    assert!(!traces_in(&dir).is_empty(), "python left a trace");
    // Every trace in the directory (the interpreter may start helpers).
    let report = report_json(&[&dir], None);
    let p = only_python_process(&report);
    assert_eq!(p["complete"], Value::Bool(true));
    assert!(
        arr(p, "threads").len() >= 5,
        "main + 4 workers: {}",
        short(&p["threads"])
    );

    // The GIL: a mutex shared by several threads that some cond waits with.
    let cond_mutexes: Vec<&str> = conds(p)
        .iter()
        .flat_map(|c| c["mutexes"].as_array().into_iter().flatten())
        .filter_map(|m| m.as_str())
        .collect();
    let gil = locks(p).iter().find(|l| {
        l["kind"] == "mutex"
            && l["threads"].as_u64().unwrap_or(0) >= 2
            && cond_mutexes.contains(&id_of(l))
    });
    assert!(
        gil.is_some(),
        "no mutex engaged by >= 2 threads appears in a cond's `mutexes`\nconds: {}\nlocks: {}",
        short(&p["conds"]),
        short(&p["locks"])
    );
}
