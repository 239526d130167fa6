//! The primitives besides mutexes: rwlocks (read and write apart, trylocks,
//! timed and clock variants, forced reader contention), spinlocks,
//! semaphores (producer/consumer, trywait, timeouts, one-thread use, named)
//! and barriers. `tests/c/primitives.c` runs every phase once with counts
//! fixed by its constants; each test here checks one part of the same run.
//!
//! The program prints return codes and errno names on stdout (compared with
//! a run without the shim) and the objects' addresses on stderr (they change
//! with ASLR from run to run).
//!
//! Past 600 lines: each file under tests/tests is its own test binary,
//! linked apart; one subject stays in one file rather than pay another link.

use locksuit_tests::*;
use std::sync::OnceLock;

const SRC: &str = "primitives.c";
const MS: u64 = 1_000_000;

// Must match the #defines in primitives.c (the program prints the first
// group; the rest show up in the results it prints).
const RD_THREADS: u64 = 4;
const RD_ITERS: u64 = 2000;
const WR_THREADS: u64 = 3;
const WR_ITERS: u64 = 1000;
const RW_ROUNDS: u64 = 4;
const HOLD_MS: u64 = 5;
const SPIN_THREADS: u64 = 3;
const SPIN_ITERS: u64 = 2000;
const SPIN_TRIES: u64 = 7;
const SEM_ITEMS: u64 = 1000;
const SEM_INIT: u64 = 5;
const SEM_TRY_FAILS: u64 = 3;
const SEM_SINGLE: u64 = 25;
const SEM_NAMED: u64 = 40;
const BAR_THREADS: u64 = 4;
const BAR_ROUNDS: u64 = 50;

/// Every stdout line of the program, in order.
fn expected_stdout() -> Vec<(String, String)> {
    let n = |v: u64| v.to_string();
    let s = |v: &str| v.to_string();
    let pc_sum: u64 = (0..SEM_ITEMS).map(|i| 3 * i).sum();
    vec![
        ("rd-threads", n(RD_THREADS)),
        ("rd-iters", n(RD_ITERS)),
        ("wr-threads", n(WR_THREADS)),
        ("wr-iters", n(WR_ITERS)),
        ("spin-threads", n(SPIN_THREADS)),
        ("spin-iters", n(SPIN_ITERS)),
        ("bar-threads", n(BAR_THREADS)),
        ("bar-rounds", n(BAR_ROUNDS)),
        ("rw-reads", n(RD_THREADS * RD_ITERS)),
        ("rw-value", n(WR_THREADS * WR_ITERS)),
        ("rw-tryrdlock-free", s("0")),
        ("rw-trywrlock-free", s("0")),
        ("rw-timedrdlock-free", s("0")),
        ("rw-timedwrlock-free", s("0")),
        ("rw-clockrdlock-free", s("0")),
        ("rw-clockwrlock-free", s("0")),
        ("rw-timedrdlock-bad-nsec", s("EINVAL")),
        ("rw-timedwrlock-negative-nsec", s("EINVAL")),
        ("rw-clockrdlock-bad-clock", s("EINVAL")),
        ("rw-clockwrlock-bad-nsec", s("EINVAL")),
        ("rw-trywrlock-read-held", s("EBUSY")),
        ("rw-timedwrlock-read-held", s("ETIMEDOUT")),
        ("rw-tryrdlock-read-held", s("0")),
        ("rw-tryrdlock-write-held", s("EBUSY")),
        ("rw-clockrdlock-write-held", s("ETIMEDOUT")),
        ("rw-trywrlock-write-held", s("EBUSY")),
        ("rw-rounds", n(RW_ROUNDS)),
        ("rw-destroy", s("0")),
        ("spin-trylock-held", s("EBUSY")),
        ("spin-trylocks-ok", n(SPIN_TRIES)),
        ("spin-count", n(SPIN_THREADS * SPIN_ITERS)),
        ("spin-destroy", s("0")),
        ("sem-pc-sum", n(pc_sum)),
        ("sem-pc-value", s("0")),
        ("sem-pc-destroy", s("0")),
        ("sem-trywait-ok", n(SEM_INIT)),
        ("sem-trywait-eagain", n(SEM_TRY_FAILS)),
        ("sem-timedwait-empty", s("ETIMEDOUT")),
        ("sem-clockwait-empty", s("ETIMEDOUT")),
        ("sem-wait-blocked", s("0")),
        ("errno-after-blocked-sem-wait", s("4242")),
        ("sem-tw-value", s("0")),
        ("sem-tw-destroy", s("0")),
        ("sem-timedwait-bad-nsec", s("EINVAL")),
        ("sem-clockwait-negative-nsec", s("EINVAL")),
        ("sem-clockwait-bad-clock", s("EINVAL")),
        ("sem-av-value", s("1")),
        ("sem-av-destroy", s("0")),
        ("sem-one-errno-kept", n(SEM_SINGLE)),
        ("sem-one-destroy", s("0")),
        ("sem-named-waits", n(SEM_NAMED)),
        ("sem-named-value", s("0")),
        ("sem-named-close", s("0")),
        ("sem-named-unlink", s("0")),
        ("bar-serial", n(BAR_ROUNDS)),
        ("bar-zero", n(BAR_ROUNDS * (BAR_THREADS - 1))),
        ("bar-destroy", s("0")),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// One run with and one without the shim, shared by every test here. Its
/// objects are taken a few dozen times each: the report keeps no cost
/// floor, so that every verdict about them is made.
fn run() -> &'static Recorded {
    static RUN: OnceLock<Recorded> = OnceLock::new();
    RUN.get_or_init(|| {
        let recorded = record_plain_and_shim(&build_c("primitives"), "primitives");
        let trace = only_trace(&recorded.dir);
        Recorded {
            report: report_json_with(&[&trace], &["--min-acquisitions", "1"]),
            ..recorded
        }
    })
}

fn process() -> &'static Value {
    let p = only_process(&run().report);
    assert_eq!(p["complete"], Value::Bool(true), "normal exit is complete");
    p
}

/// The address the program printed on stderr as `addr <name> <pointer>`.
fn addr(name: &str) -> String {
    let stderr = String::from_utf8_lossy(&run().shim.stderr).into_owned();
    let prefix = format!("addr {name} ");
    let hits: Vec<&str> = stderr
        .lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .collect();
    assert_eq!(hits.len(), 1, "one `addr {name}` line on stderr:\n{stderr}");
    hits[0].trim().to_string()
}

fn lock(name: &str) -> &'static Value {
    lock_by_address(process(), &addr(name))
}

/// The unique site at `function` primitives.c:<line of marker>.
fn site(function: &str, marker: &str) -> &'static Value {
    let line = line_of(SRC, &format!("/* @{marker} */"));
    let hits: Vec<&Value> = sites(process())
        .iter()
        .filter(|s| site_is_at(s, function, SRC, line))
        .collect();
    assert_eq!(
        hits.len(),
        1,
        "expected one site at {function} {SRC}:{line} (@{marker}); sites: {:?}",
        sites(process()).iter().map(site_where).collect::<Vec<_>>()
    );
    hits[0]
}

/// Checks a site engaged exactly `lock` (by id) `engagements` times.
fn check_site(lock: &Value, function: &str, marker: &str, engagements: u64) {
    let s = site(function, marker);
    assert_eq!(
        u64_of(s, "engagements"),
        engagements,
        "engagements of site @{marker}: {}",
        short(s)
    );
    let ids: Vec<&str> = arr(s, "locks").iter().filter_map(|l| l.as_str()).collect();
    assert_eq!(ids, vec![id_of(lock)], "locks of site @{marker}");
}

/// The sites of a lock, as sorted `function:line` strings.
fn lock_site_places(lock: &Value) -> Vec<String> {
    let mut v: Vec<String> = sites_of_lock(process(), id_of(lock))
        .iter()
        .map(|s| format!("{}:{}", str_of(s, "function"), u64_of(s, "line")))
        .collect();
    v.sort();
    v
}

fn places(list: &[(&str, &str)]) -> Vec<String> {
    let mut v: Vec<String> = list
        .iter()
        .map(|(f, m)| format!("{f}:{}", line_of(SRC, &format!("/* @{m} */"))))
        .collect();
    v.sort();
    v
}

/// The per-thread engagement counts of a lock, sorted.
fn per_thread_counts(lock: &Value) -> Vec<u64> {
    let mut v: Vec<u64> = arr(lock, "engagements_by_thread")
        .iter()
        .map(|t| u64_of(t, "count"))
        .collect();
    v.sort_unstable();
    v
}

/// What one run can say of a lock one thread alone took: the observation
/// (and never more: `unnecessary-lock` needs more runs or data).
fn unnecessary(lock: &Value) -> Vec<&'static Value> {
    let found = findings_taken_alone(process(), id_of(lock));
    assert!(
        found.iter().all(|f| f["kind"] == "single-thread-lock"),
        "one run is an observation: {}",
        short(&process()["findings"])
    );
    found
}

fn mode<'a>(lock: &'a Value, which: &str) -> &'a Value {
    assert!(
        lock[which].is_object(),
        "rwlock must have a `{which}` object: {}",
        short(lock)
    );
    &lock[which]
}

// ----------------------------------------------------------------- tests

#[test]
fn behaviour_unchanged_by_the_shim() {
    let r = run();
    assert_success(&r.plain, "primitives without the shim");
    let lines: Vec<(String, String)> = stdout_str(&r.plain)
        .lines()
        .map(|l| {
            let mut it = l.split_whitespace();
            (
                it.next().unwrap_or("").to_string(),
                it.next().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert_eq!(lines, expected_stdout(), "plain run output");

    // Same stdout and status; stderr holds only the program's address lines.
    assert_same_output_and_stderr_names(&r.plain, &r.shim);
}

#[test]
fn rwlock_counts() {
    let rw = lock("rw");
    assert_eq!(str_of(rw, "kind"), "rwlock", "{}", short(rw));
    assert_eq!(str_of(rw, "origin"), "init", "{}", short(rw));
    assert_eq!(rw["destroyed"], Value::Bool(true), "{}", short(rw));
    assert_eq!(u64_of(rw, "posts"), 0, "posts of a rwlock");

    // Reads: the readers, tryrdlock + timedrdlock + clockrdlock on the free
    // lock, the holder's rdlock, main's tryrdlock beside it, B's rounds.
    let reads = RD_THREADS * RD_ITERS + 3 + 1 + 1 + RW_ROUNDS;
    // Writes: the writers, trywrlock + timedwrlock + clockwrlock on the free
    // lock, the holder's wrlock, A's rounds.
    let writes = WR_THREADS * WR_ITERS + 3 + 1 + RW_ROUNDS;
    let read = mode(rw, "read");
    let write = mode(rw, "write");
    assert_eq!(
        u64_of(read, "acquisitions"),
        reads,
        "read acquisitions: {}",
        short(rw)
    );
    assert_eq!(
        u64_of(write, "acquisitions"),
        writes,
        "write acquisitions: {}",
        short(rw)
    );
    assert_eq!(
        u64_of(rw, "acquisitions"),
        reads + writes,
        "acquisitions == read + write"
    );

    // Readers never wait for readers; only B waits (behind A), every round.
    assert_eq!(
        u64_of(read, "contended"),
        RW_ROUNDS,
        "read contended: {}",
        short(rw)
    );
    // Writers may wait for each other (they run concurrently); nothing else can.
    let wc = u64_of(write, "contended");
    assert!(wc <= WR_THREADS * WR_ITERS, "write contended {wc}");
    assert_eq!(
        u64_of(rw, "contended"),
        RW_ROUNDS + wc,
        "contended == read + write"
    );
    let rw_wait = u64_of(read, "wait_ns");
    assert!(
        rw_wait >= RW_ROUNDS * HOLD_MS * MS,
        "B waits at least {HOLD_MS} ms per round: read wait_ns {rw_wait}"
    );

    // Failed trylocks: trywrlock beside a reader and beside a writer;
    // tryrdlock beside a writer.
    assert_eq!(
        u64_of(read, "try_failures"),
        1,
        "read try_failures: {}",
        short(rw)
    );
    assert_eq!(
        u64_of(write, "try_failures"),
        2,
        "write try_failures: {}",
        short(rw)
    );
    assert_eq!(u64_of(rw, "try_failures"), 3, "try_failures");
    // Timeouts: timedwrlock beside a reader, clockrdlock beside a writer. The
    // four calls with an invalid deadline or clock are neither.
    assert_eq!(u64_of(read, "timeouts"), 1, "read timeouts: {}", short(rw));
    assert_eq!(
        u64_of(write, "timeouts"),
        1,
        "write timeouts: {}",
        short(rw)
    );
    assert_eq!(u64_of(rw, "timeouts"), 2, "timeouts");

    // readers + writers + main + holder + A + B
    assert_eq!(
        u64_of(rw, "threads"),
        RD_THREADS + WR_THREADS + 4,
        "rwlock threads: {}",
        short(&rw["engagements_by_thread"])
    );
    let mut want = vec![2, RW_ROUNDS, RW_ROUNDS, 7];
    want.extend(std::iter::repeat_n(WR_ITERS, WR_THREADS as usize));
    want.extend(std::iter::repeat_n(RD_ITERS, RD_THREADS as usize));
    want.sort_unstable();
    assert_eq!(
        per_thread_counts(rw),
        want,
        "rwlock engagements_by_thread (holder 2, A, B, main 7, writers, readers)"
    );

    check_site(rw, "rw_reader", "rw-rdlock", RD_THREADS * RD_ITERS);
    check_site(rw, "rw_writer", "rw-wrlock", WR_THREADS * WR_ITERS);
    check_site(rw, "rw_b_round", "rw-b-rdlock", RW_ROUNDS);
    assert_eq!(
        u64_of(site("rw_b_round", "rw-b-rdlock"), "contended"),
        RW_ROUNDS,
        "B's rdlock site is contended every round"
    );
    check_site(rw, "rw_a_round", "rw-a-wrlock", RW_ROUNDS);
    assert_eq!(u64_of(site("rw_a_round", "rw-a-wrlock"), "contended"), 0);
    check_site(rw, "rw_holder", "rw-holder-rd", 1);
    check_site(rw, "rw_holder", "rw-holder-wr", 1);
    for m in [
        "rw-main-tryrd",
        "rw-main-trywr",
        "rw-main-timedrd",
        "rw-main-timedwr",
        "rw-main-clockrd",
        "rw-main-clockwr",
        "rw-main-tryrd-shared",
    ] {
        check_site(rw, "rwlock_phase", m, 1);
    }
    for m in [
        "rw-main-trywr-busy",
        "rw-main-timedwr-timeout",
        "rw-main-tryrd-busy",
        "rw-main-clockrd-timeout",
        "rw-main-trywr-busy2",
    ] {
        check_site(rw, "rwlock_phase", m, 0);
    }
    assert!(
        unnecessary(rw).is_empty(),
        "shared rwlock is no unnecessary-lock"
    );
}

#[test]
fn spinlock_counts() {
    let sp = lock("spin");
    assert_eq!(str_of(sp, "kind"), "spin", "{}", short(sp));
    assert_eq!(str_of(sp, "origin"), "init", "{}", short(sp));
    assert_eq!(sp["destroyed"], Value::Bool(true), "{}", short(sp));
    assert!(
        sp["read"].is_null() && sp["write"].is_null(),
        "read/write only for rwlocks: {}",
        short(sp)
    );
    assert_eq!(u64_of(sp, "posts"), 0);
    // Workers' loops, worker 0's extra hold, main's trylocks.
    assert_eq!(
        u64_of(sp, "acquisitions"),
        SPIN_THREADS * SPIN_ITERS + 1 + SPIN_TRIES,
        "spin acquisitions: {}",
        short(sp)
    );
    assert_eq!(
        u64_of(sp, "try_failures"),
        1,
        "main's trylock beside worker 0's hold"
    );
    assert_eq!(u64_of(sp, "timeouts"), 0);
    assert!(u64_of(sp, "contended") <= SPIN_THREADS * SPIN_ITERS + 1);
    assert_eq!(u64_of(sp, "threads"), SPIN_THREADS + 1, "workers + main");
    let mut want = vec![SPIN_TRIES, SPIN_ITERS + 1];
    want.extend(std::iter::repeat_n(SPIN_ITERS, SPIN_THREADS as usize - 1));
    want.sort_unstable();
    assert_eq!(per_thread_counts(sp), want, "spin engagements_by_thread");
    check_site(sp, "spin_worker", "spin-lock", SPIN_THREADS * SPIN_ITERS);
    check_site(sp, "spin_worker", "spin-hold", 1);
    check_site(sp, "spin_phase", "spin-trylock", SPIN_TRIES);
    check_site(sp, "spin_phase", "spin-trylock-busy", 0);
    assert!(unnecessary(sp).is_empty());
}

#[test]
fn semaphore_producer_consumer() {
    let s = lock("sem_pc");
    assert_eq!(str_of(s, "kind"), "sem", "{}", short(s));
    assert_eq!(str_of(s, "origin"), "init", "{}", short(s));
    assert_eq!(s["destroyed"], Value::Bool(true), "{}", short(s));
    assert!(s["read"].is_null() && s["write"].is_null(), "{}", short(s));
    assert_eq!(u64_of(s, "acquisitions"), SEM_ITEMS, "waits: {}", short(s));
    assert_eq!(u64_of(s, "posts"), SEM_ITEMS, "posts: {}", short(s));
    assert_eq!(
        u64_of(s, "threads"),
        2,
        "producer (posts) + consumer: {}",
        short(s)
    );
    assert_eq!(
        per_thread_counts(s),
        vec![SEM_ITEMS, SEM_ITEMS],
        "engagements_by_thread"
    );
    assert_eq!(u64_of(s, "try_failures"), 0);
    assert_eq!(u64_of(s, "timeouts"), 0);
    assert!(u64_of(s, "contended") <= SEM_ITEMS);
    check_site(s, "pc_producer", "pc-post", SEM_ITEMS);
    check_site(s, "pc_consumer", "pc-wait", SEM_ITEMS);
    assert_eq!(
        lock_site_places(s),
        places(&[("pc_producer", "pc-post"), ("pc_consumer", "pc-wait")])
    );
    assert!(
        unnecessary(s).is_empty(),
        "a semaphore one thread posts and another waits is needed: {:?}",
        unnecessary(s)
    );
}

#[test]
fn semaphore_trywait_timeouts_and_blocking_wait() {
    let s = lock("sem_tw");
    assert_eq!(str_of(s, "kind"), "sem", "{}", short(s));
    // SEM_INIT trywaits and main's blocking sem_wait.
    assert_eq!(u64_of(s, "acquisitions"), SEM_INIT + 1, "{}", short(s));
    assert_eq!(u64_of(s, "try_failures"), SEM_TRY_FAILS, "{}", short(s));
    assert_eq!(
        u64_of(s, "timeouts"),
        2,
        "sem_timedwait + sem_clockwait: {}",
        short(s)
    );
    assert_eq!(
        u64_of(s, "contended"),
        1,
        "only main's sem_wait blocked: {}",
        short(s)
    );
    assert_eq!(u64_of(s, "posts"), 1, "{}", short(s));
    assert_eq!(u64_of(s, "threads"), 2, "{}", short(s));
    // worker: SEM_INIT trywaits + 1 post; main: 1 wait.
    assert_eq!(per_thread_counts(s), vec![1, SEM_INIT + 1]);
    let wait = u64_of(s, "wait_ns");
    assert!(
        wait >= HOLD_MS * MS,
        "main waited >= {HOLD_MS} ms for the post: wait_ns {wait}"
    );
    check_site(s, "tw_worker", "tw-trywait-ok", SEM_INIT);
    check_site(s, "tw_worker", "tw-trywait-fail", 0);
    check_site(s, "tw_worker", "tw-post", 1);
    check_site(s, "sem_phase", "tw-timedwait", 0);
    check_site(s, "sem_phase", "tw-clockwait", 0);
    check_site(s, "sem_phase", "tw-wait-blocking", 1);
    assert_eq!(
        u64_of(site("sem_phase", "tw-wait-blocking"), "contended"),
        1
    );
    assert!(unnecessary(s).is_empty());

    // Calls with an invalid deadline or clock took nothing and counted nothing.
    let av = lock("sem_av");
    assert_eq!(str_of(av, "kind"), "sem", "{}", short(av));
    for f in [
        "acquisitions",
        "posts",
        "try_failures",
        "timeouts",
        "contended",
        "threads",
    ] {
        assert_eq!(u64_of(av, f), 0, "sem_av {f}: {}", short(av));
    }
    assert!(unnecessary(av).is_empty());
}

#[test]
fn semaphore_of_one_thread_is_unnecessary() {
    let s = lock("sem_one");
    assert_eq!(str_of(s, "kind"), "sem", "{}", short(s));
    assert_eq!(u64_of(s, "acquisitions"), SEM_SINGLE, "{}", short(s));
    assert_eq!(u64_of(s, "posts"), SEM_SINGLE, "{}", short(s));
    assert_eq!(u64_of(s, "contended"), 0, "{}", short(s));
    assert_eq!(u64_of(s, "threads"), 1, "{}", short(s));
    assert_eq!(
        per_thread_counts(s),
        vec![2 * SEM_SINGLE],
        "posts count as engagements"
    );
    check_site(s, "sem_phase", "one-post", SEM_SINGLE);
    check_site(s, "sem_phase", "one-wait", SEM_SINGLE);
    let found = unnecessary(s);
    assert_eq!(
        found.len(),
        1,
        "one single-thread-lock finding for the one-thread semaphore; findings: {}",
        short(&process()["findings"])
    );
    let mut fs: Vec<String> = finding_sites(process(), found[0])
        .iter()
        .map(|s| format!("{}:{}", str_of(s, "function"), u64_of(s, "line")))
        .collect();
    fs.sort();
    assert_eq!(
        fs,
        places(&[("sem_phase", "one-post"), ("sem_phase", "one-wait")])
    );
}

#[test]
fn named_semaphore() {
    let s = lock("sem_named");
    assert_eq!(str_of(s, "kind"), "sem", "{}", short(s));
    assert_eq!(u64_of(s, "acquisitions"), SEM_NAMED, "{}", short(s));
    assert_eq!(u64_of(s, "posts"), SEM_NAMED, "{}", short(s));
    assert_eq!(
        u64_of(s, "contended"),
        0,
        "all posts came before the waits: {}",
        short(s)
    );
    assert_eq!(u64_of(s, "threads"), 2, "poster + main: {}", short(s));
    assert_eq!(per_thread_counts(s), vec![SEM_NAMED, SEM_NAMED]);
    assert_eq!(
        s["destroyed"],
        Value::Bool(true),
        "sem_close ends it: {}",
        short(s)
    );
    check_site(s, "named_poster", "named-post", SEM_NAMED);
    check_site(s, "sem_phase", "named-wait", SEM_NAMED);
    assert_eq!(
        str_of(s, "origin"),
        "open",
        "a semaphore from sem_open has origin \"open\": {}",
        short(s)
    );
}

#[test]
fn barrier_counts() {
    let b = lock("bar");
    assert_eq!(str_of(b, "kind"), "barrier", "{}", short(b));
    assert_eq!(str_of(b, "origin"), "init", "{}", short(b));
    assert_eq!(b["destroyed"], Value::Bool(true), "{}", short(b));
    assert_eq!(
        u64_of(b, "acquisitions"),
        BAR_THREADS * BAR_ROUNDS,
        "{}",
        short(b)
    );
    // One serial thread per round does not count as contended.
    assert_eq!(
        u64_of(b, "contended"),
        BAR_THREADS * BAR_ROUNDS - BAR_ROUNDS,
        "{}",
        short(b)
    );
    assert_eq!(u64_of(b, "threads"), BAR_THREADS, "{}", short(b));
    assert_eq!(u64_of(b, "posts"), 0);
    assert_eq!(u64_of(b, "try_failures"), 0);
    assert_eq!(u64_of(b, "timeouts"), 0);
    assert_eq!(per_thread_counts(b), vec![BAR_ROUNDS; BAR_THREADS as usize]);
    check_site(b, "bar_worker", "bar-wait", BAR_THREADS * BAR_ROUNDS);
    assert!(unnecessary(b).is_empty());
}

#[test]
fn nothing_but_the_programs_objects() {
    // Eight objects: rw, spin, sem_pc, sem_tw, sem_av, sem_one, sem_named, bar.
    let p = process();
    let mut kinds: Vec<&str> = locks(p).iter().map(|l| str_of(l, "kind")).collect();
    kinds.sort_unstable();
    assert_eq!(
        kinds,
        vec!["barrier", "rwlock", "sem", "sem", "sem", "sem", "sem", "spin"],
        "locks: {}",
        short(&p["locks"])
    );
    // Only the one-thread semaphore was taken by one thread alone.
    let un: Vec<&str> = findings(p)
        .iter()
        .filter(|f| f["kind"] == "single-thread-lock" || f["kind"] == "unnecessary-lock")
        .filter_map(|f| f["lock"].as_str())
        .collect();
    assert_eq!(
        un,
        vec![id_of(lock("sem_one"))],
        "findings: {}",
        short(&p["findings"])
    );
}
