//! Unit tests of the findings (`findings/`).

use super::*;

/// "L3" → LockId(2), "S1" → SiteId(0).
fn number(id: &str) -> u32 {
    id[1..].parse::<u32>().unwrap() - 1
}

fn lock(
    id: &str,
    acquisitions: u64,
    contended: u64,
    wait_ns: u64,
    threads: u32,
    site: &str,
) -> Lock {
    Lock {
        kind: LockKind::Mutex,
        address: 0x1,
        origin: Origin::Init,
        mutex_type: Some(MutexType::Normal),
        acquisitions,
        contended,
        task_switches: contended,
        threads,
        askers: threads,
        sharing_ratio: 0.5,
        wait_ns,
        engagements_by_thread: (0..threads)
            .map(|t| ThreadCount {
                tid: 100 + t,
                count: acquisitions / u64::from(threads),
                asked: true,
            })
            .collect(),
        sites: [SiteId(number(site))].into_iter().collect(),
        ..crate::analysis::locks::new_lock(number(id) as usize, None, false)
    }
}

/// Every finding for these locks and sites, with no events and the default limits.
fn all_findings(locks: &[Lock], families: &[Family], sites: &[Site]) -> Vec<Finding> {
    build(
        &[],
        (locks, families, sites),
        &Contention::default(),
        (&Limits::default(), None),
        None,
    )
}

fn site(id: &str, locks: &[&str]) -> Site {
    Site {
        id: SiteId(number(id)),
        name: "work@w.c:7".into(),
        function: Some("work".into()),
        file: Some("w.c".into()),
        line: Some(7),
        path: None,
        locks: locks.iter().map(|l| LockId(number(l))).collect(),
        engagements: 1000,
        contended: 0,
        task_switches: 0,
        wait_ns: 0,
        hold_ns: 0,
        wait: None,
        ratio: 0.5,
        sharing_ratio: 0.5,
        status: STATUS_SUITABLE,
        basis: "sharing",
        suitable_accesses: None,
        unsuitable_accesses: None,
        engagement_ratios: None,
        unsuitable_engagements: None,
        reasons: Vec::new(),
        predicted_gain: None,
        call_chain: Vec::new(),
    }
}

fn kinds(
    locks: &[Lock],
    sites: &[Site],
    duration_ns: Option<u64>,
) -> Vec<(&'static str, Option<String>)> {
    kinds_with(locks, sites, duration_ns, &Contention::default())
}

fn kinds_with(
    locks: &[Lock],
    sites: &[Site],
    duration_ns: Option<u64>,
    contention: &Contention,
) -> Vec<(&'static str, Option<String>)> {
    let mut locks = locks.to_vec();
    let families = crate::analysis::families::build(&mut locks);
    let limits = Limits::default();
    let ev = Evidence::new((&locks, &families, sites), contention, &limits, duration_ns);
    let mut f = Vec::new();
    contention_findings(&mut f, &ev);
    f.into_iter()
        .map(|f| (f.kind, f.lock.map(|l| l.to_string())))
        .collect()
}

#[test]
fn high_contention_needs_the_share_and_real_waiting() {
    let busy = lock("L1", 1000, 200, 5_000_000, 4, "S1");
    assert_eq!(
        kinds(&[busy], &[], None),
        vec![(FINDING_HIGH_CONTENTION, Some("L1".into()))]
    );
    // The same share with almost no waiting is not worth a finding.
    let cheap = lock("L1", 1000, 200, 10_000, 4, "S1");
    assert!(kinds(&[cheap], &[], None).is_empty());
    // Nor a low share with much waiting.
    let rare = lock("L1", 1000, 20, 50_000_000, 4, "S1");
    assert!(kinds(&[rare], &[], None).is_empty());
}

#[test]
fn long_hold_is_a_measured_hold_never_a_wait() {
    // A thread waited 20 ms, but no single hold was that long (an unfair
    // lock passed it over): no long-hold.
    let mut l = lock("L1", 10, 1, 20_000_000, 2, "S1");
    l.wait = Some(Box::new(DurationStats {
        count: 1,
        total_ns: 20_000_000,
        max_ns: 20_000_000,
        p50_ns: 20_000_000,
        p99_ns: 20_000_000,
    }));
    assert!(kinds(std::slice::from_ref(&l), &[], None).is_empty());
    // One hold of 20 ms that made a thread wait is one.
    let held = |hold_ns| Contention {
        longest_holds: vec![crate::analysis::contention_result::LongHold {
            lock: LockId(0),
            hold_ns,
            tid: 7,
            site: Some(SiteId(0)),
            at_least: false,
            holder_ran: None,
        }],
        ..Contention::default()
    };
    assert_eq!(
        kinds_with(std::slice::from_ref(&l), &[], None, &held(20_000_000)),
        vec![(FINDING_LONG_HOLD, Some("L1".into()))]
    );
    assert!(
        kinds_with(&[l], &[], None, &held(9_000_000)).is_empty(),
        "below 10 ms"
    );
}

#[test]
fn one_wait_passed_over_many_times_is_starvation() {
    let l = lock("L1", 100, 1, 5_000_000, 2, "S1");
    let starved = |passed_over| Contention {
        starved: vec![crate::analysis::contention_result::Starved {
            lock: LockId(0),
            passed_over,
            wait_ns: 5_000_000,
            tid: 9,
            site: Some(SiteId(0)),
            timed_out: false,
        }],
        ..Contention::default()
    };
    assert_eq!(
        kinds_with(std::slice::from_ref(&l), &[], None, &starved(59)),
        vec![(FINDING_STARVATION, Some("L1".into()))]
    );
    assert!(kinds_with(&[l], &[], None, &starved(3)).is_empty());
}

#[test]
fn a_lock_another_thread_asked_for_is_not_unnecessary() {
    // Engaged by one thread, but another failed a trylock and timed out on it.
    let mut l = lock("L1", 2000, 0, 0, 1, "S1");
    l.askers = 2;
    let sites = [site("S1", &["L1"])];
    let mut locks = vec![l.clone()];
    let families = crate::analysis::families::build(&mut locks);
    let found = all_findings(&locks, &families, &sites);
    assert!(
        found
            .iter()
            .all(|f| f.kind != FINDING_UNNECESSARY && f.kind != FINDING_SINGLE_THREAD),
        "{found:?}"
    );
    // And a thread still waiting for it at the end needed it too.
    l.askers = 1;
    l.waiting_at_end = 1;
    let mut locks = vec![l];
    let families = crate::analysis::families::build(&mut locks);
    let found = all_findings(&locks, &families, &sites);
    assert!(
        found
            .iter()
            .all(|f| f.kind != FINDING_UNNECESSARY && f.kind != FINDING_SINGLE_THREAD),
        "{found:?}"
    );
}

#[test]
fn one_run_of_one_thread_is_an_observation_and_a_few_acquisitions_are_nothing() {
    let sites = [site("S1", &["L1"])];
    let found = |acquisitions| {
        let mut locks = vec![lock("L1", acquisitions, 0, 0, 1, "S1")];
        let families = crate::analysis::families::build(&mut locks);
        all_findings(&locks, &families, &sites)
            .into_iter()
            .map(|f| (f.kind, f.evidence.map(|e| (e.basis, e.runs))))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        found(1000),
        vec![(FINDING_SINGLE_THREAD, Some(("run", 1)))],
        "one run's one thread is an observation, never unnecessary-lock"
    );
    assert!(
        found(999).is_empty(),
        "below the cost floor: {:?}",
        found(999)
    );
}

#[test]
fn an_attached_recording_calls_no_lock_unneeded_or_a_line_unsuitable() {
    // What gives single-thread-lock and unsuitable-site in a whole run
    // gives neither when attached: a window of the run, and of most locks
    // only their waits.
    let mut locks = vec![lock("L1", 1000, 0, 0, 1, "S1")];
    let families = crate::analysis::families::build(&mut locks);
    let mut s = site("S1", &["L1"]);
    s.status = STATUS_UNSUITABLE;
    s.ratio = 0.0;
    let sites = [s];
    let kinds = |attached| {
        let contention = Contention {
            attached,
            ..Contention::default()
        };
        build(
            &[],
            (&locks, &families, &sites),
            &contention,
            (&Limits::default(), None),
            None,
        )
        .into_iter()
        .map(|f| f.kind)
        .collect::<Vec<_>>()
    };
    assert!(
        kinds(false).contains(&FINDING_SINGLE_THREAD),
        "{:?}",
        kinds(false)
    );
    assert!(kinds(true).is_empty(), "{:?}", kinds(true));
}

#[test]
fn a_family_some_threads_share_has_no_single_thread_members() {
    // L1, L2 made at one line: L1 by one thread, L2 by two. Which members
    // a run used from one thread alone is chance: no finding.
    let mut locks = vec![
        lock("L1", 2000, 0, 0, 1, "S1"),
        lock("L2", 2000, 0, 0, 2, "S1"),
    ];
    for l in &mut locks {
        l.origin_chain = 7;
    }
    let families = crate::analysis::families::build(&mut locks);
    let found = all_findings(&locks, &families, &[site("S1", &["L1", "L2"])]);
    assert!(
        found.iter().all(|f| f.kind != FINDING_SINGLE_THREAD),
        "{found:?}"
    );
}

#[test]
fn a_lock_taken_alone_at_a_line_where_sharing_was_chance_is_no_evidence() {
    // Taken at one line S1 (sort's merge nodes, popped from one queue): L2
    // and L3, made at one line, L2 by two threads and L3 by one, so which
    // of them a thread took alone was chance there; L1, made elsewhere,
    // by one thread. No finding for L1 at S1; one at a line of its own.
    // A helper taking each caller's locks (L4, made at a third line and
    // shared) beside L1 is no such evidence.
    let alone = |l1_site: &str, l3_site: &str| {
        let mut locks = vec![
            lock("L1", 2000, 0, 0, 1, l1_site),
            lock("L2", 2000, 0, 0, 2, "S1"),
            lock("L3", 2000, 0, 0, 1, l3_site),
            lock("L4", 2000, 0, 0, 2, "S3"),
        ];
        for (l, chain) in locks.iter_mut().zip([7, 8, 8, 9]) {
            l.origin_chain = chain;
        }
        let families = crate::analysis::families::build(&mut locks);
        let sites = [
            site("S1", &["L1", "L2", "L3"]),
            site("S2", &["L1", "L3"]),
            site("S3", &["L1", "L4"]),
        ];
        all_findings(&locks, &families, &sites)
            .into_iter()
            .filter(|f| f.kind == FINDING_SINGLE_THREAD)
            .flat_map(|f| f.locks)
            .collect::<Vec<_>>()
    };
    assert_eq!(alone("S1", "S1"), vec![]);
    assert_eq!(alone("S2", "S2"), vec![LockId(0)]);
    assert_eq!(alone("S3", "S1"), vec![LockId(0)]);
}

#[test]
fn over_synchronization_is_frequent_shared_and_uncontended() {
    // 1,000,000 acquisitions in 1 s by 4 threads, none contended.
    let hot = lock("L1", 1_000_000, 0, 0, 4, "S1");
    let second = Some(1_000_000_000);
    assert_eq!(
        kinds(std::slice::from_ref(&hot), &[], second),
        vec![(FINDING_OVER_SYNC, Some("L1".into()))]
    );
    // Over 100 s it is only 10,000 a second.
    assert!(kinds(&[hot], &[], Some(100_000_000_000)).is_empty());
    // One thread: that is an unnecessary lock, reported as such elsewhere.
    let alone = lock("L1", 1_000_000, 0, 0, 1, "S1");
    assert!(kinds(&[alone], &[], second).is_empty());
}

#[test]
fn asymmetric_contention_compares_the_locks_of_one_line() {
    let hot = lock("L1", 1000, 100, 0, 4, "S1");
    let cold = lock("L2", 1000, 2, 0, 4, "S1");
    let even = lock("L2", 1000, 90, 0, 4, "S1");
    let line = site("S1", &["L1", "L2"]);
    assert_eq!(
        kinds(&[hot.clone(), cold], std::slice::from_ref(&line), None),
        vec![(FINDING_ASYMMETRIC, Some("L1".into()))]
    );
    let line = site("S1", &["L1", "L2"]);
    assert!(
        kinds(&[hot, even], &[line], None).is_empty(),
        "10% vs 9% is even"
    );
}

#[test]
fn a_rule_that_holds_across_a_family_is_one_finding_listing_its_locks() {
    // L1..L3: one family (same kind, same line), each engaged by one
    // thread; L4: the same at another line, a family of its own.
    let mut locks: Vec<Lock> = (1..=3)
        .map(|i| lock(&format!("L{i}"), 1000, 0, 0, 1, "S1"))
        .collect();
    locks.push(lock("L4", 1000, 0, 0, 1, "S2"));
    let families = crate::analysis::families::build(&mut locks);
    let sites = [site("S1", &["L1", "L2", "L3"]), site("S2", &["L4"])];
    let found = all_findings(&locks, &families, &sites);
    let unnecessary: Vec<&Finding> = found
        .iter()
        .filter(|f| f.kind == FINDING_SINGLE_THREAD)
        .collect();
    assert_eq!(unnecessary.len(), 2, "{unnecessary:?}");
    let family = unnecessary.iter().find(|f| f.locks.len() == 3).unwrap();
    assert_eq!(family.lock, Some(LockId(0)));
    assert_eq!(family.locks, vec![LockId(0), LockId(1), LockId(2)]);
    assert_eq!((family.family_size, family.engagements), (Some(3), 3000));
    assert!(
        family
            .message
            .starts_with("3 mutexes of one family, L1, L2, L3,"),
        "{}",
        family.message
    );
    let single = unnecessary.iter().find(|f| f.locks.len() == 1).unwrap();
    assert_eq!(single.lock, Some(LockId(3)));
    assert!(
        single
            .message
            .starts_with("mutex L4 at 0x1 was taken 1000 times by thread 100 alone"),
        "{}",
        single.message
    );
}

#[test]
fn a_line_taking_only_locks_of_one_thread_is_said_once() {
    let mut locks = vec![
        lock("L1", 1000, 0, 0, 1, "S1"),
        lock("L2", 1000, 0, 0, 2, "S2"),
    ];
    let families = crate::analysis::families::build(&mut locks);
    let mut only_unnecessary = site("S1", &["L1"]);
    let mut shared_too = site("S2", &["L2"]);
    for s in [&mut only_unnecessary, &mut shared_too] {
        s.status = STATUS_UNSUITABLE;
        s.ratio = 0.0;
    }
    let sites = [only_unnecessary, shared_too];
    let found = all_findings(&locks, &families, &sites);
    let kinds: Vec<(&str, Vec<SiteId>)> = found.iter().map(|f| (f.kind, f.sites.clone())).collect();
    assert!(
        kinds.contains(&(FINDING_SINGLE_THREAD, vec![SiteId(0)])),
        "{kinds:?}"
    );
    assert!(
        !kinds.contains(&(FINDING_UNSUITABLE, vec![SiteId(0)])),
        "S1 only takes L1, already said: {kinds:?}"
    );
    assert!(
        kinds.contains(&(FINDING_UNSUITABLE, vec![SiteId(1)])),
        "{kinds:?}"
    );
}

/// A line whose locks one thread takes mostly, but which did make threads
/// switch (memcached's LRU maintainer sweeping every slab class's lock,
/// of which a workload of one item size shares one): the advice says the
/// sharing was this run's, not the design's.
#[test]
fn a_lopsided_line_that_made_threads_switch_is_judged_for_this_workload() {
    let mut locks = vec![lock("L1", 1000, 0, 0, 2, "S1")];
    let families = crate::analysis::families::build(&mut locks);
    let mut sweep = site("S1", &["L1"]);
    sweep.status = STATUS_UNSUITABLE;
    sweep.ratio = 0.07;
    sweep.task_switches = 700;
    let found = all_findings(&locks, &families, &[sweep]);
    let f = found
        .iter()
        .find(|f| f.kind == FINDING_UNSUITABLE)
        .expect("an unsuitable-site finding");
    assert!(
        f.message.contains("700 of them switching threads")
            && f.message.contains("in this run the lock was paid for")
            && f.message.contains("depends on the workload")
            && !f.message.contains("consider splitting"),
        "{}",
        f.message
    );
}

#[test]
fn contention_that_cost_the_run_under_one_percent_is_not_worth_splitting() {
    let busy = lock("L1", 1000, 200, 5_000_000, 4, "S1");
    // 5 ms of waits over a 1 s run: under 1%.
    assert!(kinds(std::slice::from_ref(&busy), &[], Some(1_000_000_000)).is_empty());
    // Over a 100 ms run: 5%.
    assert_eq!(
        kinds(&[busy], &[], Some(100_000_000)),
        vec![(FINDING_HIGH_CONTENTION, Some("L1".into()))]
    );
    // A lock taken 1,000,000 times a second, 1 in 10,000 contended, whose
    // waits took a tenth of the run: not "almost never contended".
    let waited = lock("L1", 1_000_000, 100, 100_000_000, 4, "S1");
    assert!(kinds(&[waited], &[], Some(1_000_000_000)).is_empty());
}

#[test]
fn a_starved_waiter_on_an_oversubscribed_machine_is_not_called_an_unfair_lock() {
    let l = lock("L1", 100, 1, 5_000_000, 2, "S1");
    let contention = one_starved_waiter();
    let mut locks = vec![l];
    let families = crate::analysis::families::build(&mut locks);
    let limits = Limits::default();
    let message = |queue: Option<(u64, u64)>| {
        let mut ev = Evidence::new((&locks, &families, &[]), &contention, &limits, None);
        ev.cpu_queue = queue;
        let mut f = Vec::new();
        contention_findings(&mut f, &ev);
        f.into_iter()
            .find(|f| f.kind == FINDING_STARVATION)
            .unwrap()
            .message
    };
    let fair = message(Some((1_000_000, 100_000_000)));
    assert!(
        fair.contains("unfair") && fair.contains("ticket lock"),
        "{fair}"
    );
    let queued = message(Some((80_000_000, 100_000_000)));
    assert!(
        queued.contains("scheduling") && !queued.contains("unfair to it"),
        "{queued}"
    );
}

/// A Python frame (`input/python.rs`): `function`, at `path`:`line`.
fn py_frame(function: &str, path: &str, line: u32) -> Frame {
    Frame {
        function: Some(function.into()),
        file: Some(crate::base::words::basename(path).into()),
        line: Some(line),
        path: Some(path.into()),
        address: crate::model::frames::PYTHON_ADDRESS.into(),
        module: Some("/usr/bin/python3.11".into()),
        offset: None,
    }
}

/// Site `id` at `bump (app.py:8)`, a line of Python code, with `library`
/// (innermost first) between it and the lock.
fn py_site(id: &str, locks: &[&str], library: &[(&str, &str)]) -> Site {
    let mut s = site(id, locks);
    s.function = Some("bump".into());
    s.file = Some("app.py".into());
    s.line = Some(8);
    s.call_chain = library
        .iter()
        .map(|(f, path)| py_frame(f, path, 100))
        .chain([
            py_frame("bump", "/home/me/app.py", 8),
            py_frame("<module>", "/home/me/app.py", 20),
        ])
        .collect();
    s
}

/// The messages of the findings of `kind` for these locks and sites.
fn messages(
    locks: &[Lock],
    sites: &[Site],
    contention: &Contention,
    cpu_queue: Option<(u64, u64)>,
    kind: &str,
) -> Vec<String> {
    let mut locks = locks.to_vec();
    let families = crate::analysis::families::build(&mut locks);
    let limits = Limits::default();
    let mut ev = Evidence::new(
        (&locks, &families, sites),
        contention,
        &limits,
        Some(1_000_000_000),
    );
    ev.cpu_queue = cpu_queue;
    let mut f = Vec::new();
    contention_findings(&mut f, &ev);
    f.into_iter()
        .filter(|f| f.kind == kind)
        .map(|f| f.message)
        .collect()
}

/// Nothing a Python program cannot do.
fn no_c_remedy(message: &str) {
    for c in [
        "atomic",
        "ticket lock",
        "hands over in turn",
        "hand the lock over",
    ] {
        assert!(!message.contains(c), "{c:?} in {message}");
    }
}

#[test]
fn over_synchronization_at_a_python_line_gives_python_advice() {
    let hot = lock("L1", 1_000_000, 0, 0, 4, "S1");
    let none = Contention::default();
    let c = messages(
        std::slice::from_ref(&hot),
        &[site("S1", &["L1"])],
        &none,
        None,
        FINDING_OVER_SYNC,
    );
    assert_eq!(
        c,
        vec!["mutex L1 (taken at work (w.c:7)) was acquired 1000000 times a second by 4 threads and almost never contended: batch the work under one acquisition, or use per-thread data or atomics.".to_string()],
        "C lines keep their wording"
    );
    let own = messages(
        std::slice::from_ref(&hot),
        &[py_site("S1", &["L1"], &[])],
        &none,
        None,
        FINDING_OVER_SYNC,
    );
    assert_eq!(own.len(), 1);
    no_c_remedy(&own[0]);
    assert!(
        own[0].contains("taken at bump (app.py:8)")
            && own[0].contains("`with lock:`")
            && own[0].contains("threading.local"),
        "{}",
        own[0]
    );
    // Taken inside queue.Queue.put, which the program called: the lock is
    // not the program's to change, how often it calls is.
    let library = [
        ("Condition.__enter__", "/usr/lib/python3.11/threading.py"),
        ("Queue.put", "/usr/lib/python3.11/queue.py"),
    ];
    let queue = messages(
        &[hot],
        &[py_site("S1", &["L1"], &library)],
        &none,
        None,
        FINDING_OVER_SYNC,
    );
    no_c_remedy(&queue[0]);
    assert!(
        queue[0].contains("taken inside Queue.put (queue.py); call that less often"),
        "{}",
        queue[0]
    );
}

#[test]
fn contention_and_starvation_at_a_python_line_give_python_advice() {
    let sites = [py_site("S1", &["L1"], &[])];
    let busy = lock("L1", 1000, 200, 50_000_000, 4, "S1");
    let none = Contention::default();
    let high = messages(
        std::slice::from_ref(&busy),
        &sites,
        &none,
        None,
        FINDING_HIGH_CONTENTION,
    );
    assert!(
        high[0].ends_with(
            "hold it around less work (move what needs no lock out of the `with` block), or guard separate data with separate locks."
        ),
        "{}",
        high[0]
    );
    let starved = one_starved_waiter();
    for queue in [(1_000_000, 100_000_000), (80_000_000, 100_000_000)] {
        let m = messages(
            std::slice::from_ref(&busy),
            &sites,
            &starved,
            Some(queue),
            FINDING_STARVATION,
        );
        no_c_remedy(&m[0]);
        assert!(m[0].contains("hold the lock around less work"), "{}", m[0]);
    }
}

#[test]
fn locks_one_python_thread_took_and_long_holds_give_python_advice() {
    let sites = [py_site("S1", &["L1"], &[])];
    let mut locks = vec![lock("L1", 2000, 0, 0, 1, "S1")];
    let families = crate::analysis::families::build(&mut locks);
    let found = all_findings(&locks, &families, &sites);
    let single = found
        .iter()
        .find(|f| f.kind == FINDING_SINGLE_THREAD)
        .unwrap();
    assert!(
        single
            .message
            .contains("it can go, or the data it guards can be kept per thread (threading.local)"),
        "{}",
        single.message
    );
    let off_cpu = HolderState {
        state: "off-cpu",
        ran_ns: Some(1_000_000),
        ran_max_ns: Some(2_000_000),
        of_ns: Some(50_000_000),
    };
    let c = long_hold_message("seen", &off_cpu, 1, (false, false, false));
    assert!(c.contains("or a lock that hands over in turn"), "{c}");
    no_c_remedy(&long_hold_message(
        "seen",
        &off_cpu,
        1,
        (false, true, false),
    ));
    let lean = long_hold_message("seen", &off_cpu, 1, (false, false, true));
    assert!(
        lean.contains("a lean trace does not see")
            && lean.contains("if the holder slept or did I/O holding it, move that out")
            && !lean.contains("blocking-under-lock says so"),
        "{lean}"
    );
}

/// Contention in which thread 9 waited 5 ms at S1 for L1 while others took
/// it 50 times.
fn one_starved_waiter() -> Contention {
    Contention {
        starved: vec![crate::analysis::contention_result::Starved {
            lock: LockId(0),
            passed_over: 50,
            wait_ns: 5_000_000,
            tid: 9,
            site: Some(SiteId(0)),
            timed_out: false,
        }],
        ..Contention::default()
    }
}

#[test]
fn a_lean_traces_starvation_counts_are_lower_bounds() {
    let mut locks = vec![lock("L1", 100, 1, 5_000_000, 2, "S1")];
    let families = crate::analysis::families::build(&mut locks);
    let limits = Limits::default();
    let message = |partly: bool| {
        let contention = Contention {
            lean: partly,
            ..one_starved_waiter()
        };
        let ev = Evidence::new((&locks, &families, &[]), &contention, &limits, None);
        let mut f = Vec::new();
        contention_findings(&mut f, &ev);
        f.into_iter()
            .find(|f| f.kind == FINDING_STARVATION)
            .unwrap()
            .message
    };
    let full = message(false);
    assert!(full.contains("took it 50 times"), "{full}");
    let lean = message(true);
    assert!(lean.contains("took it at least 50 times"), "{lean}");
}

/// A lock taken by Python's library on a thread it runs itself (a
/// ThreadPoolExecutor's worker): no line of the program is on the way,
/// so the advice names the library's function and what the program can
/// do (hand it fewer, larger pieces of work), never "hold it around less
/// work", which is the library's code.
#[test]
fn contention_inside_pythons_library_names_the_library_not_a_with_block() {
    let lib = "/usr/lib/python3.11";
    let mut site = site("S1", &["L1"]);
    site.call_chain = vec![
        py_frame("Condition.__enter__", &format!("{lib}/threading.py"), 272),
        py_frame(
            "_worker",
            &format!("{lib}/concurrent/futures/thread.py"),
            83,
        ),
        py_frame("Thread.run", &format!("{lib}/threading.py"), 982),
        py_frame(
            "Thread._bootstrap_inner",
            &format!("{lib}/threading.py"),
            1045,
        ),
    ];
    let busy = lock("L1", 1000, 200, 50_000_000, 4, "S1");
    let high = messages(
        std::slice::from_ref(&busy),
        std::slice::from_ref(&site),
        &Contention::default(),
        None,
        FINDING_HIGH_CONTENTION,
    );
    no_c_remedy(&high[0]);
    assert!(
        high[0].contains("taken by Python's library in _worker (thread.py), at no line of the program; hand it fewer, larger pieces of work")
            && !high[0].contains("`with` block"),
        "{}",
        high[0]
    );
}

/// A semaphore posted by threads that did not take it signals (a queue's
/// "not empty"): its waits are waits for work, not for a holder, so no
/// contention finding and no asymmetry with its family's locks.
#[test]
fn a_semaphore_that_signals_gets_no_contention_finding() {
    let mut busy = lock("L1", 1000, 900, 50_000_000, 4, "S1");
    busy.kind = LockKind::Sem;
    let sites = [site("S1", &["L1"])];
    let found = |l: &Lock| {
        messages(
            std::slice::from_ref(l),
            &sites,
            &Contention::default(),
            None,
            FINDING_HIGH_CONTENTION,
        )
        .len()
    };
    assert_eq!(found(&busy), 1, "a semaphore used as a lock is judged");
    busy.rare_mut().signals = true;
    assert_eq!(found(&busy), 0, "a semaphore that signals is not");
}

/// Starvation on a lock inside a library call the program must make once
/// per item (`Queue.task_done`): never "call it less often"; the remedy is
/// fewer threads sharing the object.
#[test]
fn starvation_inside_a_library_call_does_not_ask_for_fewer_calls() {
    let library = [
        ("Condition.__enter__", "/usr/lib/python3.11/threading.py"),
        ("Queue.task_done", "/usr/lib/python3.11/queue.py"),
    ];
    let sites = [py_site("S1", &["L1"], &library)];
    let busy = lock("L1", 1000, 200, 50_000_000, 4, "S1");
    let m = messages(
        std::slice::from_ref(&busy),
        &sites,
        &one_starved_waiter(),
        Some((1_000_000, 100_000_000)),
        FINDING_STARVATION,
    );
    no_c_remedy(&m[0]);
    assert!(
        m[0].contains("taken inside Queue.task_done (queue.py), which the program cannot make fair; fewer threads sharing that object")
            && !m[0].contains("less often"),
        "{}",
        m[0]
    );
}
