//! Every path into a new program image ends the old image's trace as
//! "exec", never as died: the execv family, the variadic execl family (which
//! glibc runs through its internal execve), fexecve, execveat; and the
//! spawning calls (posix_spawn, system, popen) leave every trace complete.

use locksuit_tests::*;

const REPLACING: &[&str] = &[
    "execl",
    "execl-300",
    "execlp",
    "execle",
    "execv",
    "execve",
    "execvp",
    "execvpe",
    "fexecve",
    "execveat",
];
const SPAWNING: &[&str] = &["posix_spawn", "posix_spawnp", "system", "popen"];

#[test]
fn every_exec_ends_the_trace_as_exec() {
    let bin = build_c("exec_variants");
    for &variant in REPLACING.iter().chain(SPAWNING) {
        let plain = run_plain(&bin, &[variant]);
        assert_success(&plain, &format!("{variant} without the shim"));
        let dir = fresh_dir(&format!("exec_{variant}"));
        let shim = run_under_shim(&bin, &[variant], &dir);
        assert_success(&shim, &format!("{variant} under the shim"));
        assert_eq!(stable_stdout(&shim), stable_stdout(&plain));
        assert!(shim.stderr.is_empty(), "{variant}: {}", describe(&shim));
        let pid: u64 = stdout_value(&stdout_str(&shim), "pid").parse().unwrap();
        let report = report_json(&[&dir], None);
        for p in processes(&report) {
            assert_ne!(
                p["ended_by"].as_str(),
                Some("died"),
                "{variant}: no trace may read as died: {}",
                short(p)
            );
        }
        let own = processes(&report)
            .iter()
            .find(|p| p["pid"].as_u64() == Some(pid) && str_of(p, "exe").ends_with("exec_variants"))
            .unwrap_or_else(|| panic!("{variant}: the program's own trace"));
        let expected = if REPLACING.contains(&variant) {
            "exec"
        } else {
            "exit"
        };
        assert_eq!(own["ended_by"].as_str(), Some(expected), "{variant}");
        let lock = locks(own)
            .iter()
            .find(|l| u64_of(l, "acquisitions") == 10)
            .unwrap_or_else(|| panic!("{variant}: the 10 acquisitions before the exec"));
        assert_eq!(str_of(lock, "kind"), "mutex");
    }
}
