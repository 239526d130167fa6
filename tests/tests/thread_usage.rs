//! Per-thread run statistics (CPU time, context switches, runnable time)
//! against what each thread of tests/c/thread_usage.c read itself with
//! getrusage(RUSAGE_THREAD) just before it ended. The shim reads them a
//! little later (at thread end, or at process exit for main), so its
//! figures are at least the program's and only a little more.

use locksuit_tests::*;

#[test]
fn cpu_time_and_switches_match_what_each_thread_read_itself() {
    let bin = build_c("thread_usage");
    let dir = fresh_dir("thread-usage");
    let out = run_under_shim(&bin, &[] as &[&str], &dir);
    assert_success(&out, "thread_usage");
    let stdout = stdout_str(&out);
    let measured = |key: &str| stdout_value(&stdout, key).parse::<u64>().unwrap();
    let report = report_json(&[&dir], None);
    let p = only_process(&report);
    let main = main_thread(p);
    for (name, t) in [
        ("worker0", thread_named(p, "worker0")),
        ("worker1", thread_named(p, "worker1")),
        ("main", main),
    ] {
        let cpu = u64_of(t, "cpu_ns");
        let own = measured(&format!("{name}_cpu_ns"));
        // getrusage counts in µs; the kernel's schedstat in ns.
        assert!(
            cpu + 1_000_000 >= own && cpu <= own + own / 10 + 2_000_000,
            "{name}: {cpu} ns of CPU reported, {own} ns read by the thread: {t}"
        );
        let voluntary = u64_of(t, "voluntary_switches");
        let own = measured(&format!("{name}_voluntary"));
        assert!(
            voluntary >= own && voluntary <= own + 5,
            "{name}: {voluntary} voluntary switches, {own} read by the thread"
        );
        let involuntary = u64_of(t, "involuntary_switches");
        assert!(
            involuntary >= measured(&format!("{name}_involuntary")),
            "{name}: {t}"
        );
        assert!(t["runnable_ns"].as_u64().is_some(), "{name}: {t}");
    }
    // The process: its threads' CPU over its run time, at most its threads.
    let cpu: u64 = arr(p, "threads").iter().map(|t| u64_of(t, "cpu_ns")).sum();
    assert_eq!(u64_of(p, "cpu_ns"), cpu);
    let busy = f64_of(p, "parallelism");
    let expected = cpu as f64 / u64_of(p, "duration_ns") as f64;
    assert!((busy - expected).abs() < 1e-9, "{busy} vs {expected}");
    // At least the CPU the threads read themselves, over the run; a loaded
    // machine gives the spinners less of it, so no fixed floor.
    let own: u64 = ["worker0", "worker1", "main"]
        .iter()
        .map(|name| measured(&format!("{name}_cpu_ns")))
        .sum();
    let floor = own.saturating_sub(3_000_000) as f64 / u64_of(p, "duration_ns") as f64;
    assert!(
        busy >= floor && busy <= 3.0,
        "three threads, two of them spinning: {busy}, they read {floor} themselves"
    );
    // The workers slept three times each, and were on a CPU about 60 ms.
    assert!(measured("worker0_voluntary") >= 3);
    // The text report shows them.
    let text = stdout_str(&run_locksuit(&[
        "report",
        dir.to_str().unwrap(),
        "--width",
        "160",
    ]));
    assert!(text.contains("switches vol/invol"), "{text}");
}
