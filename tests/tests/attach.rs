//! `locksuit attach PID` (issue 38, first step): a running program's futex
//! waits seen through BPF, checked against what the program measured
//! itself (tests/c/attach_mutex.c times each pthread_mutex_lock call), its
//! own line named, and its output and exit status unchanged. Where BPF
//! cannot be loaded (not root, built without clang) the BPF tests say why
//! and skip; the paths without BPF are checked everywhere.

use locksuit_tests::*;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

/// The tests that attach run one at a time: each measures timings
/// (waits, holds, time off a CPU) that another's pinned spinners or
/// probes would disturb on a 2-core machine.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// Why BPF cannot be used here, if it cannot: attach's own one line.
fn bpf_missing() -> Option<String> {
    let pid = std::process::id().to_string();
    let out = run_locksuit(
        &["attach", &pid, "--duration", "0", "-o"]
            .iter()
            .map(|s| s.to_string())
            .chain([fresh_dir("attach_probe").display().to_string()])
            .collect::<Vec<_>>(),
    );
    match out.status.code() {
        Some(0) => None,
        _ => Some(String::from_utf8_lossy(&out.stderr).trim().to_string()),
    }
}

/// Runs `bin go-file` attached to from before its first wait: attach is
/// started, its "attached" line awaited, then the go file made. Returns
/// the program's output and the recording's JSON.
fn attached_run(bin: &Path, dir: &Path) -> (std::process::Output, serde_json::Value) {
    attached_run_with(bin, dir, &[]).0
}

/// [`attached_run`] with more arguments to `locksuit attach`; also returns
/// its text report.
fn attached_run_with(
    bin: &Path,
    dir: &Path,
    extra: &[&str],
) -> ((std::process::Output, serde_json::Value), String) {
    attached_run_env(bin, dir, extra, &[])
}

/// [`attached_run_with`] with more environment for `locksuit attach`.
fn attached_run_env(
    bin: &Path,
    dir: &Path,
    extra: &[&str],
    env: &[(&str, &str)],
) -> ((std::process::Output, serde_json::Value), String) {
    let go = dir.join("go");
    let program = Command::new(bin)
        .arg(&go)
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the program");
    let pid = program.id();
    let mut attach = Command::new(locksuit_path())
        .args(["attach", &pid.to_string(), "-o"])
        .arg(dir)
        .args(extra)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start locksuit attach");
    let mut stderr = BufReader::new(attach.stderr.take().unwrap());
    let mut first = String::new();
    stderr.read_line(&mut first).unwrap();
    if !first.contains("attached to") {
        // Not left waiting for its go file (it would hold the test's output).
        let mut program = program;
        let _ = program.kill();
        let _ = program.wait();
        panic!("locksuit attach did not attach: {first}");
    }
    std::fs::write(&go, "").unwrap();
    let out = program.wait_with_output().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    let report = attach.wait_with_output().unwrap();
    assert!(
        report.status.success(),
        "attach failed: {first}{rest}\n{}",
        String::from_utf8_lossy(&report.stdout)
    );
    let json = std::fs::read_to_string(dir.join(format!("locksuit-attach.{pid}.json"))).unwrap();
    let text = String::from_utf8_lossy(&report.stdout);
    assert!(
        text.starts_with(&format!("Attached to {pid} ("))
            && text.contains("Not seen when attached"),
        "the report must say it was attached and what it cannot see:\n{text}"
    );
    // Then `locksuit report`'s of the trace it left.
    assert!(
        text.contains(&format!("(pid {pid})\n   trace ")) && text.contains(".trace\n"),
        "no report of the trace after attach's own:\n{text}"
    );
    (
        (out, serde_json::from_str(&json).unwrap()),
        text.into_owned(),
    )
}

/// The trace `attach` left in `dir` for the process of `rec` (its JSON
/// recording), as `locksuit report --format json` reads it: the one
/// process, said to be attached. `export`, `flamegraph` and `diff` (the
/// trace against itself) read it too.
fn trace_report(dir: &Path, rec: &serde_json::Value) -> serde_json::Value {
    let pid = u64_of(rec, "pid");
    let traces: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            name.starts_with("locksuit.") && name.ends_with(&format!(".{pid}.trace"))
        })
        .collect();
    assert_eq!(traces.len(), 1, "one trace for {pid} in {}", dir.display());
    let trace = &traces[0];
    for args in [
        vec!["export".into(), trace.display().to_string()],
        vec![
            "flamegraph".into(),
            trace.display().to_string(),
            "-o".into(),
            dir.join("flame.svg").display().to_string(),
        ],
        vec![
            "diff".into(),
            trace.display().to_string(),
            trace.display().to_string(),
        ],
    ] {
        let out = run_locksuit(&args);
        assert!(
            out.status.success(),
            "locksuit {args:?}: {}",
            describe(&out)
        );
    }
    let report = report_json(&[trace.as_path()], None);
    let p = only_process(&report).clone();
    assert_eq!(p["recording"], "attached", "{}", short(&p));
    assert_eq!(p["ended_by"], "detached", "{}", short(&p));
    assert_eq!(u64_of(&p, "pid"), pid);
    p
}

/// The lock at `address` in a report's process.
fn lock_at(p: &serde_json::Value, address: u64) -> &serde_json::Value {
    arr(p, "locks")
        .iter()
        .find(|l| parse_addr(str_of(l, "address")) == address)
        .unwrap_or_else(|| panic!("no lock at {address:#x}: {}", short(&p["locks"])))
}

#[test]
fn pthread_mutex_waits_match_the_programs_own() {
    let _serial = one_at_a_time();
    if let Some(why) = bpf_missing() {
        eprintln!("skipped: locksuit attach cannot use BPF here: {why}");
        return;
    }
    // The futex call's own tracepoints where tracefs has them (mounted for
    // attach alone if need be), and the way every system call is probed,
    // kept for kernels without them.
    let own = futex_tracepoints_here().then_some("syscalls:sys_enter_futex/sys_exit_futex");
    for (env, probes) in [
        (&[][..], own),
        (
            &[("LOCKSUIT_ATTACH_RAW_SYSCALLS", "1")][..],
            Some("sys_enter/sys_exit raw tracepoints"),
        ),
    ] {
        check_mutex_waits(env, probes);
    }
}

/// Whether this kernel's tracefs (mounted, or mountable in a mount
/// namespace of a shell's own) has the futex call's tracepoints.
fn futex_tracepoints_here() -> bool {
    let script = "mount --make-rprivate / 2>/dev/null; \
        [ -e /sys/kernel/tracing/events ] || mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null; \
        [ -e /sys/kernel/tracing/events/syscalls/sys_enter_futex/id ] \
        || [ -e /sys/kernel/debug/tracing/events/syscalls/sys_enter_futex/id ]";
    Command::new("unshare")
        .args(["-m", "sh", "-c", script])
        .status()
        .is_ok_and(|s| s.success())
}

/// One attached run of tests/c/attach_mutex.c, checked; `probes`: the
/// system call probes its report must say it used (`None`: either).
fn check_mutex_waits(env: &[(&str, &str)], probes: Option<&str>) {
    let bin = build_c("attach_mutex");
    let dir = fresh_dir("attach_mutex");
    // The program alone, for its output and status.
    let alone_go = dir.join("go-alone");
    std::fs::write(&alone_go, "").unwrap();
    let alone = run_plain(&bin, &[&alone_go]);
    let ((out, rec), _) = attached_run_env(&bin, &dir, &[], env);
    if let Some(probes) = probes {
        assert!(
            str_of(&rec, "with").contains(probes),
            "{}",
            str_of(&rec, "with")
        );
    }
    assert_eq!(out.status.code(), Some(3), "{}", describe(&out));
    assert_eq!(alone.status.code(), out.status.code());
    let stdout = stdout_str(&out);
    assert_eq!(
        stdout_value(&stdout, "acquisitions"),
        stdout_value(&stdout_str(&alone), "acquisitions")
    );
    let lock = parse_addr(&stdout_value(&stdout, "lock"));
    let measured: u64 = stdout_value(&stdout, "waited-ns").parse().unwrap();
    let line = format!(
        "attach_mutex.c:{}",
        line_of("attach_mutex.c", "attach-wait")
    );
    let sites: Vec<&serde_json::Value> = arr(&rec, "sites")
        .iter()
        .filter(|s| parse_addr(str_of(s, "uaddr")) == lock)
        .collect();
    assert!(
        !sites.is_empty(),
        "no waits on {lock:#x}: {}",
        short(&rec["sites"])
    );
    for s in &sites {
        assert!(
            str_of(s, "site").ends_with(&line),
            "a wait on the mutex named {} instead of {line}",
            str_of(s, "site")
        );
    }
    let seen: u64 = sites.iter().map(|s| u64_of(s, "wait_ns")).sum();
    let waits: u64 = sites.iter().map(|s| u64_of(s, "waits")).sum();
    eprintln!("attached: {waits} waits, {seen} ns; the program measured {measured} ns");
    // Its four threads took turns holding it 100 us at a time: they waited.
    assert!(
        waits >= 10 && measured > 10_000_000,
        "too little contention: {stdout}"
    );
    let off = (seen as f64 - measured as f64).abs() / measured as f64;
    assert!(
        off <= 0.10,
        "attached saw {seen} ns of waiting, the program measured {measured} ns ({:.1}% off)",
        off * 100.0
    );
    // Who woke them: the unlocks, at the program's own line.
    let unlock = format!(
        "attach_mutex.c:{}",
        line_of("attach_mutex.c", "pthread_mutex_unlock(&m)")
    );
    let woken: i64 = arr(&rec, "wakes")
        .iter()
        .filter(|w| parse_addr(str_of(w, "uaddr")) == lock)
        .inspect(|w| assert!(str_of(w, "site").ends_with(&unlock), "{}", short(w)))
        .map(|w| w["woken"].as_i64().unwrap())
        .sum();
    assert!(woken > 0, "no wakes on the mutex: {}", short(&rec["wakes"]));
    // The trace says the same to `report`: the word's waits at the line,
    // and who blocked whom from its wakes.
    let p = trace_report(&dir, &rec);
    let l = lock_at(&p, lock);
    assert_eq!(str_of(l, "kind"), "futex", "{}", short(l));
    assert_eq!(u64_of(l, "wait_ns"), seen, "{}", short(l));
    assert!(
        arr(l, "sites")
            .iter()
            .any(|s| s.as_str().unwrap().ends_with(&line)),
        "{}",
        short(l)
    );
    assert!(
        arr(&p, "blocking").iter().any(|b| b["lock"] == l["id"]),
        "who blocked whom on {}: {}",
        str_of(l, "id"),
        short(&p["blocking"])
    );
}

/// `--locks`: uprobes on the C library's mutex calls count every
/// acquisition of the program's mutex at its line, exactly, and its holds
/// within 10 % of what the program measured around them.
#[test]
fn with_locks_every_acquisition_and_hold_is_counted() {
    let _serial = one_at_a_time();
    if let Some(why) = bpf_missing() {
        eprintln!("skipped: locksuit attach cannot use BPF here: {why}");
        return;
    }
    let bin = build_c("attach_mutex");
    let dir = fresh_dir("attach_locks");
    let ((out, rec), text) = attached_run_with(&bin, &dir, &["--locks"]);
    assert_eq!(out.status.code(), Some(3), "{}", describe(&out));
    let stdout = stdout_str(&out);
    let lock = parse_addr(&stdout_value(&stdout, "lock"));
    let acquisitions: u64 = stdout_value(&stdout, "acquisitions").parse().unwrap();
    let held: u64 = stdout_value(&stdout, "held-ns").parse().unwrap();
    let line = format!(
        "attach_mutex.c:{}",
        line_of("attach_mutex.c", "attach-wait")
    );
    let sites: Vec<&serde_json::Value> = arr(&rec, "locks")
        .iter()
        .filter(|s| parse_addr(str_of(s, "mutex")) == lock)
        .collect();
    assert_eq!(
        sites.len(),
        1,
        "one line takes the mutex: {}",
        short(&rec["locks"])
    );
    let site = sites[0];
    assert!(str_of(site, "site").ends_with(&line), "{}", short(site));
    assert_eq!(
        u64_of(site, "acquisitions"),
        acquisitions,
        "{}",
        short(site)
    );
    assert_eq!(u64_of(site, "holds"), acquisitions, "{}", short(site));
    let seen = u64_of(site, "hold_ns");
    let off = (seen as f64 - held as f64).abs() / held as f64;
    assert!(
        off <= 0.10,
        "attached saw {seen} ns of holds, the program measured {held} ns ({:.1}% off)",
        off * 100.0
    );
    assert_eq!(u64_of(&rec, "locks_lost"), 0);
    assert!(
        text.contains("Pthread mutex acquisitions (--locks)") && text.contains(&line),
        "{text}"
    );
    // The futex waits are still seen and named at the program's line, as
    // without --locks (the uretprobe's trampoline on the stack is read as
    // the return address it stands for).
    let waits: Vec<&serde_json::Value> = arr(&rec, "sites")
        .iter()
        .filter(|s| parse_addr(str_of(s, "uaddr")) == lock)
        .collect();
    assert!(!waits.is_empty(), "{}", short(&rec["sites"]));
    for w in waits {
        assert!(str_of(w, "site").ends_with(&line), "{}", short(w));
    }
    // In the trace, the mutex with its acquisitions, holds and waits.
    let p = trace_report(&dir, &rec);
    let l = lock_at(&p, lock);
    assert_eq!(str_of(l, "kind"), "mutex", "{}", short(l));
    assert_eq!(u64_of(l, "acquisitions"), acquisitions, "{}", short(l));
    assert_eq!(u64_of(l, "hold_ns"), seen, "{}", short(l));
    assert!(u64_of(l, "wait_ns") > 0, "{}", short(l));
}

/// `--locks` and condition waits (tests/c/attach_cond.c): a hold that
/// waits on a condition ends at the wait and goes on at its return, so the
/// waiter's line is not charged with the wait (five waits of about 40 ms
/// against holds of microseconds).
#[test]
fn with_locks_a_condition_wait_is_not_counted_as_holding() {
    let _serial = one_at_a_time();
    if let Some(why) = bpf_missing() {
        eprintln!("skipped: locksuit attach cannot use BPF here: {why}");
        return;
    }
    let bin = build_c("attach_cond");
    let dir = fresh_dir("attach_cond");
    let ((out, rec), _) = attached_run_with(&bin, &dir, &["--locks"]);
    assert!(out.status.success(), "{}", describe(&out));
    let stdout = stdout_str(&out);
    let lock = parse_addr(&stdout_value(&stdout, "lock"));
    let held: u64 = stdout_value(&stdout, "held-ns").parse().unwrap();
    let waited: u64 = stdout_value(&stdout, "cond-wait-ns").parse().unwrap();
    let line = format!("attach_cond.c:{}", line_of("attach_cond.c", "cond-hold"));
    let site = arr(&rec, "locks")
        .iter()
        .find(|s| parse_addr(str_of(s, "mutex")) == lock && str_of(s, "site").ends_with(&line))
        .unwrap_or_else(|| panic!("no {line}: {}", short(&rec["locks"])));
    assert_eq!(u64_of(site, "acquisitions"), 5, "{}", short(site));
    let seen = u64_of(site, "hold_ns");
    // The program's own measure of its holds, plus the probes' own time
    // (a few microseconds a probe) and far less than one wait.
    assert!(
        seen >= held && seen < held + waited / 10,
        "{seen} ns held at {line}; the program held {held} ns and waited {waited} ns"
    );
}

/// Why threads stopped, from the scheduler (tests/c/attach_offcpu.c): a
/// sleeper's time asleep, and two spinners' time preempted (pinned to one
/// CPU, each waits for the other), each within 10 % of what the thread
/// measured itself.
#[test]
fn why_threads_stopped_is_the_schedulers() {
    let _serial = one_at_a_time();
    if let Some(why) = bpf_missing() {
        eprintln!("skipped: locksuit attach cannot use BPF here: {why}");
        return;
    }
    let bin = build_c("attach_offcpu");
    let dir = fresh_dir("attach_offcpu");
    let ((out, rec), text) = attached_run_with(&bin, &dir, &[]);
    assert!(out.status.success(), "{}", describe(&out));
    let stdout = stdout_str(&out);
    // Where the kernel has BTF, the scheduler program reads a switched-in
    // task's process from its task (and checked that read on a target's).
    if std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
        assert_eq!(str_of(&rec, "scheduler_filter"), "by-process", "{text}");
    }
    // (total, longest period) of a thread's periods for a reason.
    let off = |tid: &str, reason: &str| -> (u64, u64) {
        let tid: u64 = tid.parse().unwrap();
        arr(&rec, "off_cpu")
            .iter()
            .filter(|o| o["tid"].as_u64() == Some(tid) && str_of(o, "reason") == reason)
            .fold((0, 0), |(t, m), o| {
                (t + u64_of(o, "total_ns"), m.max(u64_of(o, "max_ns")))
            })
    };
    // 10 %, and 1 ms for the moments around each measure.
    let slack = |measured: u64| measured / 10 + 1_000_000;
    let sleeper = stdout_value(&stdout, "sleeper-tid");
    let slept: u64 = stdout_value(&stdout, "sleep-ns").parse().unwrap();
    // In its nanosleeps the sleeper is asleep, or (on a busy machine)
    // preempted on its way in or out; between them it may be preempted
    // too, which it did not measure.
    let (asleep, _) = off(&sleeper, "sleeping");
    let (preempted, _) = off(&sleeper, "preempted");
    assert!(
        asleep <= slept + slack(slept) && asleep + preempted + slack(slept) >= slept,
        "the sleeper's sleeps: attach saw {asleep} ns asleep and {preempted} preempted, the thread measured {slept} ns in nanosleep\n{text}"
    );
    for i in 0..2 {
        let tid = stdout_value(&stdout, &format!("spinner{i}-tid"));
        let runnable: u64 = stdout_value(&stdout, &format!("spinner{i}-runnable-ns"))
            .parse()
            .unwrap();
        assert!(runnable > 20_000_000, "spinner {i} hardly waited: {stdout}");
        // All of a spinner's time off its CPU is preemption; a period may
        // straddle each end of its measure (its start, its exit).
        let (seen, longest) = off(&tid, "preempted");
        assert!(
            seen + slack(runnable) >= runnable && seen <= runnable + slack(runnable) + 2 * longest,
            "spinner {i}: attach saw {seen} ns preempted (longest {longest}), the thread measured {runnable} ns\n{text}"
        );
    }
    assert!(text.contains("Why threads stopped"), "{text}");
    // The trace has each spinner's time on its CPU: from its first switch
    // away (its first period on the CPU is not seen: 20 ms allowed).
    let p = trace_report(&dir, &rec);
    for i in 0..2 {
        let tid: u64 = stdout_value(&stdout, &format!("spinner{i}-tid"))
            .parse()
            .unwrap();
        let cpu: u64 = stdout_value(&stdout, &format!("spinner{i}-cpu-ns"))
            .parse()
            .unwrap();
        let thread = arr(&p, "threads")
            .iter()
            .find(|t| u64_of(t, "tid") == tid)
            .unwrap_or_else(|| panic!("no thread {tid}: {}", short(&p["threads"])));
        let seen = u64_of(thread, "cpu_ns");
        assert!(
            seen <= cpu + slack(cpu) && seen + slack(cpu) + 20_000_000 >= cpu,
            "spinner {i}: attach saw {seen} ns on its CPU, the thread measured {cpu} ns"
        );
    }
}

#[test]
fn a_process_that_does_not_exist_is_one_line_and_status_2() {
    // Pid numbers go up to pid_max; this one is past the largest allowed.
    let out = run_locksuit(&["attach", "4194305", "--duration", "1"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.trim().lines().count(), 1, "{}", describe(&out));
    assert!(
        stderr.contains("4194305")
            && (stderr.contains("no running process") || stderr.contains("built without")),
        "{}",
        describe(&out)
    );
}

#[test]
fn without_privilege_attach_says_what_is_missing() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 || Command::new("setpriv").arg("--version").output().is_err()
    {
        eprintln!("skipped: needs root and setpriv to run attach as an unprivileged user");
        return;
    }
    let me = std::process::id().to_string();
    let out = run_captured({
        let mut c = Command::new("setpriv");
        c.args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ])
        .arg(locksuit_path())
        .args(["attach", &me, "--duration", "1", "-o", "/tmp"]);
        c
    });
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.trim().lines().count(), 1, "{}", describe(&out));
    assert!(
        stderr.contains("needs root") || stderr.contains("built without"),
        "{}",
        describe(&out)
    );
}

/// The `sites` of `doc` whose `name_field` ends with `line` (a
/// `file:line`), and their total wait; fails if there are none.
fn sites_at<'a>(
    doc: &'a serde_json::Value,
    name_field: &str,
    line: &str,
) -> (Vec<&'a serde_json::Value>, u64) {
    let at_line: Vec<&serde_json::Value> = arr(doc, "sites")
        .iter()
        .filter(|s| str_of(s, name_field).ends_with(line))
        .collect();
    assert!(
        !at_line.is_empty(),
        "no site at {line}: {}",
        short(&doc["sites"])
    );
    let seen = at_line.iter().map(|s| u64_of(s, "wait_ns")).sum();
    (at_line, seen)
}

/// The recording's waits at `line`, and their total time.
fn waits_at<'a>(rec: &'a serde_json::Value, line: &str) -> (Vec<&'a serde_json::Value>, u64) {
    sites_at(rec, "site", line)
}

/// The waits the report of an attached trace has at the sites of `line`
/// (the same figure attach's own JSON has there).
fn trace_waits_at(p: &serde_json::Value, line: &str) -> u64 {
    sites_at(p, "id", line).1
}

/// `seen` lies between the holder's own hold after the wait began
/// (`held`) and the waiter's own measure of its call (`waited`), each
/// within 10 %.
fn within_measures(seen: u64, held: u64, waited: u64, line: &str) {
    assert!(
        seen >= held - held / 10 && seen <= waited + waited / 10,
        "attached saw {seen} ns at {line}; the holder held on {held} ns after the wait \
         began, the waiter measured {waited} ns"
    );
}

/// A lock inside glibc, which makes its futex calls inline: malloc's
/// arena mutex, held by `malloc_trim` in one thread while the main thread
/// waits in `malloc` (tests/c/attach_arena.c). The wait is seen at the
/// program's `malloc` line, within 10 % of the program's own measure of
/// that call, and the wake at its `malloc_trim` line.
#[test]
fn a_glibc_internal_lock_is_seen_at_the_programs_line() {
    let _serial = one_at_a_time();
    if let Some(why) = bpf_missing() {
        eprintln!("skipped: locksuit attach cannot use BPF here: {why}");
        return;
    }
    let bin = build_c("attach_arena");
    // The trim lasts ~100 ms and malloc begins 2 ms into it; on a machine
    // so busy that the trim was over first, the program says so (0) and
    // the run is made again.
    let (dir, rec, waited, held) = (0..3)
        .find_map(|attempt| {
            let dir = fresh_dir(&format!("attach_arena_{attempt}"));
            let (out, rec) = attached_run(&bin, &dir);
            assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
            let stdout = stdout_str(&out);
            let value = |key: &str| -> u64 { stdout_value(&stdout, key).parse().unwrap() };
            let held = value("held-after-ns");
            (held > 0).then(|| (dir, rec, value("malloc-waited-ns"), held))
        })
        .expect("three runs in which malloc_trim was over before malloc began");
    let line = format!(
        "attach_arena.c:{}",
        line_of("attach_arena.c", "attach-malloc")
    );
    let (at_line, seen) = waits_at(&rec, &line);
    eprintln!("attached: {seen} ns at {line}; malloc took {waited} ns, the trim held on {held} ns");
    within_measures(seen, held, waited, &line);
    let uaddr = str_of(at_line[0], "uaddr");
    let trim = format!(
        "attach_arena.c:{}",
        line_of("attach_arena.c", "attach-trim")
    );
    assert!(
        arr(&rec, "wakes")
            .iter()
            .any(|w| str_of(w, "uaddr") == uaddr && str_of(w, "site").ends_with(&trim)),
        "the arena's wake at {trim}: {}",
        short(&rec["wakes"])
    );
    assert_eq!(trace_waits_at(&trace_report(&dir, &rec), &line), seen);
}

/// Rust std's `Mutex` (a futex word, no pthread call) attached to: the
/// waiter's wait at the program's `.rs` line, within 10 % of the
/// program's measures (tests/rust/attach_std_mutex.rs).
#[test]
fn a_rust_std_mutex_is_seen_at_the_programs_line() {
    let _serial = one_at_a_time();
    if let Some(why) = bpf_missing() {
        eprintln!("skipped: locksuit attach cannot use BPF here: {why}");
        return;
    }
    let (bin, source) = build_rust("attach_std_mutex");
    let dir = fresh_dir("attach_std_mutex");
    let (out, rec) = attached_run(&bin, &dir);
    assert_success(&out, "attach_std_mutex");
    let stdout = stdout_str(&out);
    assert_eq!(stdout_value(&stdout, "mutex_count"), "2");
    let value = |key: &str| -> u64 { stdout_value(&stdout, key).parse().unwrap() };
    let (waited, held) = (value("waited-ns"), value("held-ns"));
    let line = format!(
        "attach_std_mutex.rs:{}",
        line_in(&source, "marker: attach wait")
    );
    let (_, seen) = waits_at(&rec, &line);
    eprintln!("attached: {seen} ns at {line}; the waiter measured {waited} ns, the holder held on {held} ns");
    within_measures(seen, held, waited, &line);
    assert_eq!(trace_waits_at(&trace_report(&dir, &rec), &line), seen);
}

/// Whether thread `tid` of `pid` is blocked in futex(2) (202 on x86-64).
fn in_futex(pid: u32, tid: u64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/syscall"))
        .is_ok_and(|s| s.split_whitespace().next() == Some("202"))
}

/// A program hung in a deadlock (tests/c/attach_deadlock.c: two mutexes
/// taken in opposite orders) is attached to after it hung: both threads'
/// waits began before attaching, and the report names each one's line,
/// the mutex's holder, and the cycle.
#[test]
fn a_hung_deadlock_is_explained_when_attached() {
    let _serial = one_at_a_time();
    if let Some(why) = bpf_missing() {
        eprintln!("skipped: locksuit attach cannot use BPF here: {why}");
        return;
    }
    let bin = build_c("attach_deadlock");
    let dir = fresh_dir("attach_deadlock");
    let mut program = Command::new(&bin)
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the program");
    let pid = program.id();
    let mut lines = BufReader::new(program.stdout.take().unwrap()).lines();
    let mut printed = String::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        printed.push_str(&line);
        printed.push('\n');
        if printed.contains("tid-ab") && printed.contains("tid-ba") && printed.contains("hung") {
            break;
        }
    }
    let tid = |key: &str| -> u64 { stdout_value(&printed, key).parse().unwrap() };
    let (ab, ba) = (tid("tid-ab"), tid("tid-ba"));
    // Hung: both in futex(2) for good (the barrier is passed, each waits
    // for the other's mutex).
    while !(in_futex(pid, ab) && in_futex(pid, ba)) {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let out = run_locksuit(&[
        "attach",
        &pid.to_string(),
        "--duration",
        "0.2",
        "-o",
        &dir.display().to_string(),
    ]);
    program.kill().unwrap();
    program.wait().unwrap();
    assert!(out.status.success(), "{}", describe(&out));
    let text = stdout_str(&out);
    let rec: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join(format!("locksuit-attach.{pid}.json"))).unwrap(),
    )
    .unwrap();
    let blocked = arr(&rec, "blocked_at_attach");
    let of = |t: u64| {
        blocked
            .iter()
            .find(|b| u64_of(b, "tid") == t)
            .unwrap_or_else(|| panic!("thread {t} not blocked: {}", short(&rec)))
    };
    let (a, b) = (
        parse_addr(&stdout_value(&printed, "mutex-a")),
        parse_addr(&stdout_value(&printed, "mutex-b")),
    );
    for (waiter, holder, mutex, marker) in [(ab, ba, b, "deadlock-b"), (ba, ab, a, "deadlock-a")] {
        let w = of(waiter);
        let line = format!("attach_deadlock.c:{}", line_of("attach_deadlock.c", marker));
        assert!(
            str_of(w, "site").ends_with(&line)
                && parse_addr(str_of(w, "uaddr")) == mutex
                && u64_of(w, "holder") == holder,
            "thread {waiter} waits at {line} for {mutex:#x} held by {holder}: {}",
            short(w)
        );
    }
    let mut cycle = [ab, ba];
    cycle.sort_unstable();
    assert_eq!(
        rec["deadlocks"],
        serde_json::json!([cycle]),
        "the one cycle: {}",
        short(&rec["deadlocks"])
    );
    assert!(text.contains("Deadlock: thread"), "{text}");
    // The trace's report explains it too.
    let p = trace_report(&dir, &rec);
    let deadlocks: Vec<&serde_json::Value> = arr(&p, "findings")
        .iter()
        .filter(|f| str_of(f, "kind") == "deadlock")
        .collect();
    assert_eq!(deadlocks.len(), 1, "{}", short(&p["findings"]));
    let message = str_of(deadlocks[0], "message");
    for t in [ab, ba] {
        assert!(message.contains(&format!("thread {t}")), "{message}");
    }
}
