//! Findings: what a person should look at, each with the evidence and one
//! sentence to act on. The limits are report-time settings (CLI options), so
//! one trace can be judged under any of them.

use crate::model::*;
use crate::render::duration;
use crate::symbolize::first_own_frame;
use locksuit_format::reader::{ThreadInfo, Trace};
use std::collections::{BTreeMap, HashMap, HashSet};

/// Report-time limits, each with its CLI option and default.
#[derive(Clone, Debug)]
pub struct Limits {
    /// `--threshold`: sharing ratio below which a site is unsuitable.
    pub threshold: f64,
    /// `--long-hold-ms`: a hold at least this long while others waited.
    pub long_hold_ns: u64,
    /// `--contention-share`: contended share of acquisitions that is high
    /// (with at least 1 ms of waiting in all).
    pub contention_share: f64,
    /// `--over-sync-per-sec`: acquisitions per second of a lock that almost
    /// never contends (below 0.1 %) above which the lock itself is the cost.
    pub over_sync_per_sec: f64,
    /// `--asymmetry`: ratio between the most and the least contended locks
    /// engaged at one line that makes their contention asymmetric.
    pub asymmetry: f64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            threshold: 0.3,
            long_hold_ns: 10_000_000,
            contention_share: 0.10,
            over_sync_per_sec: 100_000.0,
            asymmetry: 10.0,
        }
    }
}

pub const FINDING_LONG_HOLD: &str = "long-hold";
pub const FINDING_HIGH_CONTENTION: &str = "high-contention";
pub const FINDING_ASYMMETRIC: &str = "asymmetric-contention";
pub const FINDING_OVER_SYNC: &str = "over-synchronization";

/// Minimum total waiting for `high-contention`.
const HIGH_CONTENTION_MIN_WAIT_NS: u64 = 1_000_000;
/// Contended share below which a lock "almost never contends".
const RARELY_CONTENDED: f64 = 0.001;
/// Acquisitions a lock needs before its contention share means anything.
const MIN_ACQUISITIONS: u64 = 100;

fn share(lock: &Lock) -> f64 {
    if lock.acquisitions == 0 {
        0.0
    } else {
        lock.contended as f64 / lock.acquisitions as f64
    }
}

fn contention_findings(
    findings: &mut Vec<Finding>,
    locks: &[Lock],
    sites: &[Site],
    blocking: &[Blocking],
    limits: &Limits,
    duration_ns: Option<u64>,
) {
    let site_by_id: HashMap<&str, &Site> = sites.iter().map(|s| (s.id.as_str(), s)).collect();
    let lock_by_id: HashMap<&str, &Lock> = locks.iter().map(|l| (l.id.as_str(), l)).collect();
    let at = |lock: &Lock| {
        lock.sites
            .first()
            .and_then(|s| site_by_id.get(s.as_str()))
            .map_or_else(|| "an unknown line".to_string(), |s| where_of(s))
    };
    for lock in locks {
        // long-hold: some thread waited this long at a stretch, so the
        // holder held it at least that long while another thread waited.
        let longest_wait = lock.wait.as_ref().map_or(0, |w| w.max_ns);
        let longest_hold = lock.hold.as_ref().map_or(0, |h| h.max_ns);
        let longest = longest_wait.max(longest_hold);
        if longest >= limits.long_hold_ns {
            let blocker = blocking
                .iter()
                .filter(|b| b.lock == lock.id)
                .max_by_key(|b| b.wait_ns)
                .map(|b| format!(" (mostly by thread {})", b.blocker_tid))
                .unwrap_or_default();
            findings.push(Finding {
                kind: FINDING_LONG_HOLD,
                lock: Some(lock.id.clone()),
                sites: lock.sites.clone(),
                message: format!(
                    "{} {} (taken at {}) was held for at least {} at a stretch while another thread waited{}: shorten the critical section or move slow work out of it.",
                    lock.kind, lock.id, at(lock), duration(longest), blocker
                ),
                engagements: lock.acquisitions,
                wait_ns: lock.wait_ns,
            });
        }
        // high-contention: many acquisitions had to wait, and it cost time.
        if lock.acquisitions >= MIN_ACQUISITIONS
            && share(lock) >= limits.contention_share
            && lock.wait_ns >= HIGH_CONTENTION_MIN_WAIT_NS
        {
            findings.push(Finding {
                kind: FINDING_HIGH_CONTENTION,
                lock: Some(lock.id.clone()),
                sites: lock.sites.clone(),
                message: format!(
                    "{} {} (taken at {}): {:.0}% of its {} acquisitions had to wait, {} in all: split the lock or the data it guards.",
                    lock.kind,
                    lock.id,
                    at(lock),
                    share(lock) * 100.0,
                    lock.acquisitions,
                    duration(lock.wait_ns)
                ),
                engagements: lock.acquisitions,
                wait_ns: lock.wait_ns,
            });
        }
        // over-synchronization: taken very often by several threads, almost
        // never contended: the lock operations themselves are the cost.
        if let Some(ns) = duration_ns.filter(|&ns| ns > 0) {
            let per_sec = lock.acquisitions as f64 * 1e9 / ns as f64;
            if lock.threads >= 2
                && share(lock) < RARELY_CONTENDED
                && per_sec >= limits.over_sync_per_sec
            {
                findings.push(Finding {
                    kind: FINDING_OVER_SYNC,
                    lock: Some(lock.id.clone()),
                    sites: lock.sites.clone(),
                    message: format!(
                        "{} {} (taken at {}) was acquired {:.0} times a second by {} threads and almost never contended: batch the work under one acquisition, or use per-thread data or atomics.",
                        lock.kind, lock.id, at(lock), per_sec, lock.threads
                    ),
                    engagements: lock.acquisitions,
                    wait_ns: lock.wait_ns,
                });
            }
        }
    }
    // asymmetric-contention: locks engaged at one line (one family) with
    // very different contention: a hot stripe, a skewed hash.
    for site in sites {
        let family: Vec<&Lock> = site
            .locks
            .iter()
            .filter_map(|id| lock_by_id.get(id.as_str()).copied())
            .filter(|l| l.acquisitions >= MIN_ACQUISITIONS)
            .collect();
        if family.len() < 2 {
            continue;
        }
        let (hot, cold) = family.iter().fold((family[0], family[0]), |(hi, lo), &l| {
            (
                if share(l) > share(hi) { l } else { hi },
                if share(l) < share(lo) { l } else { lo },
            )
        });
        let hot_share = share(hot);
        if hot_share >= limits.contention_share / 2.0 && hot_share >= limits.asymmetry * share(cold)
        {
            findings.push(Finding {
                kind: FINDING_ASYMMETRIC,
                lock: Some(hot.id.clone()),
                sites: vec![site.id.clone()],
                message: format!(
                    "the {} locks taken at {} contend unevenly: {} waited on {:.1}% of its acquisitions, {} on {:.1}%: rebalance what maps to which lock.",
                    family.len(),
                    where_of(site),
                    hot.id,
                    hot_share * 100.0,
                    cold.id,
                    share(cold) * 100.0
                ),
                engagements: hot.acquisitions,
                wait_ns: hot.wait_ns,
            });
        }
    }
}

fn thread_label(t: &ThreadInfo) -> String {
    match &t.name {
        Some(name) => format!("thread {} ({name})", t.record.tid),
        None => format!("thread {}", t.record.tid),
    }
}

fn where_of(site: &Site) -> String {
    match (&site.function, &site.file, site.line) {
        (Some(f), Some(file), Some(line)) => format!("{f} ({file}:{line})"),
        (Some(f), _, _) => f.clone(),
        // No symbols (a stripped binary): name the module and offset.
        _ => site
            .call_chain
            .get(first_own_frame(&site.call_chain))
            .map_or_else(
                || "an unknown line".to_string(),
                |f| f.offset.clone().unwrap_or_else(|| f.address.clone()),
            ),
    }
}

/// Every finding for one process, ranked by wait time, then engagements.
pub fn build(
    trace: &Trace,
    locks: &[Lock],
    sites: &[Site],
    lock_per_thread: &[BTreeMap<u32, u64>],
    blocking: &[Blocking],
    limits: &Limits,
    duration_ns: Option<u64>,
) -> Vec<Finding> {
    let threshold = limits.threshold;
    let site_by_id: HashMap<&str, &Site> = sites.iter().map(|s| (s.id.as_str(), s)).collect();
    let thread_by_tid: HashMap<u32, &ThreadInfo> =
        trace.threads.iter().map(|t| (t.record.tid, t)).collect();
    let mut findings = Vec::new();
    for (i, lock) in locks.iter().enumerate() {
        // A process-shared lock's other users are in other processes' traces.
        if lock.acquisitions.saturating_add(lock.posts) == 0
            || lock.threads != 1
            || lock.process_shared
        {
            continue;
        }
        let tid = lock_per_thread[i].keys().next().copied().unwrap_or(0);
        let who = thread_by_tid
            .get(&tid)
            .map_or_else(|| format!("thread {tid}"), |t| thread_label(t));
        let at = lock
            .sites
            .first()
            .and_then(|s| site_by_id.get(s.as_str()))
            .map_or_else(|| "an unknown line".to_string(), |s| where_of(s));
        findings.push(Finding {
            kind: FINDING_UNNECESSARY,
            lock: Some(lock.id.clone()),
            sites: lock.sites.clone(),
            message: format!(
                "{} {} at {} was taken {} times, all by {}, at {}: no other thread ever needed it, so it protects nothing shared in this run; remove it or make the data it guards thread-local.",
                lock.kind, lock.id, lock.address, lock.acquisitions, who, at
            ),
            engagements: lock.acquisitions,
            wait_ns: lock.wait_ns,
        });
    }
    let process_shared: HashSet<&str> = locks
        .iter()
        .filter(|l| l.process_shared)
        .map(|l| l.id.as_str())
        .collect();
    for site in sites {
        if site.status != STATUS_UNSUITABLE || site.ratio >= threshold || site.engagements == 0 {
            continue;
        }
        // A process-shared lock's sharing happens across traces; one
        // process's ratio says nothing about it.
        if site
            .locks
            .iter()
            .all(|l| process_shared.contains(l.as_str()))
        {
            continue;
        }
        findings.push(Finding {
            kind: FINDING_UNSUITABLE,
            lock: None,
            sites: vec![site.id.clone()],
            message: format!(
                "{} engaged {} {} times with a sharing ratio of {:.2} (below the threshold {:.2}) and {} task switches: the lock rarely guards anything another thread touches here; consider a finer-grained or thread-local design.",
                where_of(site),
                site.locks.join(", "),
                site.engagements,
                site.ratio,
                threshold,
                site.task_switches
            ),
            engagements: site.engagements,
            wait_ns: site.wait_ns,
        });
    }
    contention_findings(&mut findings, locks, sites, blocking, limits, duration_ns);
    findings.sort_by(|a, b| {
        b.wait_ns
            .cmp(&a.wait_ns)
            .then(b.engagements.cmp(&a.engagements))
            .then(a.kind.cmp(b.kind))
    });
    findings
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lock(
        id: &str,
        acquisitions: u64,
        contended: u64,
        wait_ns: u64,
        threads: usize,
        site: &str,
    ) -> Lock {
        Lock {
            id: id.into(),
            kind: "mutex",
            address: "0x1".into(),
            origin: "init",
            destroyed: false,
            process_shared: false,
            mutex_type: Some("normal"),
            robust: false,
            acquisitions,
            contended,
            try_failures: 0,
            timeouts: 0,
            cond_reacquires: 0,
            task_switches: contended,
            owner_changes: 0,
            threads,
            sharing_ratio: 0.5,
            wait_ns,
            hold_ns: 0,
            hold_samples: 0,
            engagements_by_thread: Vec::new(),
            sites: vec![site.into()],
            wait: None,
            hold: None,
            wait_compensated: None,
            hold_compensated: None,
            read: None,
            write: None,
            posts: 0,
        }
    }

    fn site(id: &str, locks: &[&str]) -> Site {
        Site {
            id: id.into(),
            function: Some("work".into()),
            file: Some("w.c".into()),
            line: Some(7),
            path: None,
            locks: locks.iter().map(|l| l.to_string()).collect(),
            engagements: 1000,
            contended: 0,
            task_switches: 0,
            wait_ns: 0,
            hold_ns: 0,
            wait: None,
            ratio: 0.5,
            status: STATUS_SUITABLE,
            call_chain: Vec::new(),
        }
    }

    fn kinds(
        locks: &[Lock],
        sites: &[Site],
        duration_ns: Option<u64>,
    ) -> Vec<(&'static str, Option<String>)> {
        let mut f = Vec::new();
        contention_findings(&mut f, locks, sites, &[], &Limits::default(), duration_ns);
        f.into_iter().map(|f| (f.kind, f.lock)).collect()
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
    fn long_hold_comes_from_the_longest_wait_or_timed_hold() {
        let mut l = lock("L1", 10, 1, 20_000_000, 2, "S1");
        l.wait = Some(DurationStats {
            count: 1,
            total_ns: 20_000_000,
            avg_ns: 20_000_000,
            max_ns: 20_000_000,
            p50_ns: 20_000_000,
            p99_ns: 20_000_000,
        });
        assert_eq!(
            kinds(std::slice::from_ref(&l), &[], None),
            vec![(FINDING_LONG_HOLD, Some("L1".into()))]
        );
        l.wait.as_mut().unwrap().max_ns = 9_000_000;
        assert!(kinds(&[l], &[], None).is_empty(), "below 10 ms");
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
        let even = lock("L3", 1000, 90, 0, 4, "S1");
        let line = site("S1", &["L1", "L2"]);
        assert_eq!(
            kinds(&[hot.clone(), cold], std::slice::from_ref(&line), None),
            vec![(FINDING_ASYMMETRIC, Some("L1".into()))]
        );
        let line = site("S1", &["L1", "L3"]);
        assert!(
            kinds(&[hot, even], &[line], None).is_empty(),
            "10% vs 9% is even"
        );
    }
}
