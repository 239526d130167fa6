//! Per-lock and per-site figures from the trace's counter records.
//!
//! Memory is the point here: a trace of a million locks holds millions of
//! counter records (one per thread, lock, call path and mode, ~100 bytes
//! each). They are sorted by lock and consumed from the end, one lock at a
//! time, while the lock's compact model entry is built, and the record
//! vector is shrunk as it empties, so the records and the model are never
//! both whole in memory.

use crate::analysis::sharing::sharing_ratio;
use crate::model::*;
use locksuit_format::reader::Trace;
use locksuit_format::*;
use smallvec::SmallVec;

/// Totals over counter records, for one lock or one site. Sums saturate: a
/// damaged trace can hold any value, and a report must still come out.
#[derive(Default, Clone, Copy)]
pub struct Totals {
    pub engagements: u64,
    pub contended: u64,
    pub task_switches: u64,
    pub cond_reacquires: u64,
    pub try_failures: u64,
    pub timeouts: u64,
    pub wait_ns: u64,
    pub hold_ns: u64,
    pub hold_samples: u64,
    pub owner_changes: u64,
}

impl Totals {
    fn mode_stats(&self) -> ModeStats {
        ModeStats {
            acquisitions: self.engagements,
            contended: self.contended,
            try_failures: self.try_failures,
            timeouts: self.timeouts,
            wait_ns: self.wait_ns,
            hold_ns: self.hold_ns,
            hold_samples: self.hold_samples,
        }
    }

    fn add(&mut self, c: &CounterRecord) {
        self.engagements = self.engagements.saturating_add(c.engagements);
        self.contended = self.contended.saturating_add(c.contended);
        self.task_switches = self.task_switches.saturating_add(c.task_switches);
        self.cond_reacquires = self.cond_reacquires.saturating_add(c.cond_reacquires);
        self.try_failures = self.try_failures.saturating_add(c.try_failures);
        self.timeouts = self.timeouts.saturating_add(c.timeouts);
        self.wait_ns = self.wait_ns.saturating_add(c.wait_ns);
        self.hold_ns = self.hold_ns.saturating_add(c.hold_ns);
        self.hold_samples = self.hold_samples.saturating_add(c.hold_samples);
        self.owner_changes = self.owner_changes.saturating_add(c.owner_changes);
    }
}

/// One line's totals while its locks are built (indexed like the chains
/// of `analysis`, before engaged lines are numbered).
#[derive(Default)]
pub struct SiteTotals {
    pub totals: Totals,
    /// Engagements times the sharing ratio of the lock engaged.
    pub weighted: f64,
    /// Indexes of the locks it engaged, ascending.
    pub locks: Vec<LockId>,
}

/// What one line did with one lock: acquisitions, and posts (semaphores).
#[derive(Default)]
struct AtLine {
    chain: usize,
    acquisitions: u64,
    posts: u64,
}

impl AtLine {
    /// Posts that are the release of an acquisition at the same line, not
    /// engagements of their own: a CPython lock is a semaphore, and
    /// `with lock:` takes and posts it at one `.py` line (as a mutex's
    /// unlock is no engagement of its line). A line that only posts (a
    /// producer) keeps its posts as its engagements.
    fn paired_posts(&self) -> u64 {
        self.posts.min(self.acquisitions)
    }
}

/// A semaphore used to signal, told by who posts it: at least half its
/// posts were made by threads beyond what they had taken it themselves (a
/// producer's posts, a notifier's release of a Python condition's waiter
/// lock). A semaphore used as a lock is posted by the threads that took it
/// (a CPython `threading.Lock`, a pool of N resources).
fn signals(by_thread: &[(usize, u64, u64)]) -> bool {
    let posts: u64 = by_thread.iter().map(|t| t.2).sum();
    let unpaired: u64 = by_thread.iter().map(|t| t.2.saturating_sub(t.1)).sum();
    posts > 0 && unpaired.saturating_mul(2) >= posts
}

/// Locks (numbered L1.. in the order of their raw ids, that is creation)
/// and what the counters say about lines and threads.
pub struct Built {
    pub locks: Vec<Lock>,
    /// Raw id of each lock, ascending (so a raw id finds its lock by binary search).
    pub raw_ids: Vec<u32>,
    /// By chain index; sites with no entry engaged no lock.
    pub sites: Vec<SiteTotals>,
    /// Acquisitions by thread index (posts left out).
    pub thread_acquisitions: Vec<u64>,
    /// Engagements whose lock has no creation record.
    pub orphans: u64,
}

/// Records consumed between two shrinks of the record vector (~1 MiB).
const SHRINK_EVERY: usize = 10_000;

fn kind_of(rec: Option<&LockRecord>) -> LockKind {
    match rec.and_then(|r| ObjectKind::from_u8(r.kind as u8)) {
        Some(ObjectKind::Mutex) => LockKind::Mutex,
        Some(ObjectKind::Rwlock) => LockKind::Rwlock,
        Some(ObjectKind::Spin) => LockKind::Spin,
        Some(ObjectKind::Sem) => LockKind::Sem,
        Some(ObjectKind::Barrier) => LockKind::Barrier,
        Some(ObjectKind::Futex) => LockKind::Futex,
        Some(ObjectKind::Cond) | None => LockKind::Unknown,
    }
}

/// A lock with no engagement yet, from its identity record (if any).
pub(crate) fn new_lock(index: usize, rec: Option<&LockRecord>, destroyed: bool) -> Lock {
    Lock {
        id: LockId(index as u32),
        kind: kind_of(rec),
        address: rec.map_or(0, |r| r.address),
        origin: match rec.map(|r| r.origin) {
            Some(ORIGIN_INIT) => Origin::Init,
            Some(ORIGIN_OPEN) => Origin::Open,
            _ => Origin::FirstUse,
        },
        destroyed,
        process_shared: rec.is_some_and(|r| r.hdr.aux & ATTR_PROCESS_SHARED != 0),
        mutex_type: rec.and_then(|r| match r.mutex_type {
            0 => Some(MutexType::Normal),
            1 => Some(MutexType::Recursive),
            2 => Some(MutexType::Errorcheck),
            3 => Some(MutexType::Adaptive),
            _ => None,
        }),
        robust: rec.is_some_and(|r| r.hdr.aux & ATTR_ROBUST != 0),
        acquisitions: 0,
        contended: 0,
        try_failures: 0,
        timeouts: 0,
        cond_reacquires: 0,
        task_switches: 0,
        owner_changes: 0,
        threads: 0,
        askers: 0,
        waiting_at_end: 0,
        sharing_ratio: 0.0,
        wait_ns: 0,
        hold_ns: 0,
        hold_samples: 0,
        engagements_by_thread: SmallVec::new(),
        sites: SmallVec::new(),
        wait: None,
        hold: None,
        wait_compensated: None,
        hold_compensated: None,
        read: None,
        write: None,
        posts: 0,
        rare: None,
        reasons: None,
        family: FamilyId(0),
        origin_chain: u32::MAX,
        made_by_library_import: false,
        in_variable: false,
    }
}

/// Builds every lock from the trace's lock, destroy and counter records,
/// and takes the destroy and counter records out of `trace` (the caller lets
/// go of the lock records once the condition variables have their addresses).
/// `site_of` maps a raw site id to its chain index.
/// `origin_of` turns a lock's raw origin site into what makes it one of a
/// family (a chain index, or a helper's caller; `u32::MAX`: unknown).
pub fn build(
    trace: &mut Trace,
    site_of: &mut dyn FnMut(u32) -> usize,
    origin_of: &dyn Fn(u32) -> (u32, bool),
) -> Built {
    // Locks (not conds), numbered in creation order.
    let mut raw_ids: Vec<u32> = trace
        .locks
        .iter()
        .filter(|l| l.kind != ObjectKind::Cond as u32)
        .map(|l| l.id)
        .collect();
    raw_ids.sort_unstable();
    raw_ids.dedup();
    raw_ids.shrink_to_fit();
    let n = raw_ids.len();
    // The record of each lock: the last one with its id.
    let mut record_of = vec![u32::MAX; n];
    for (r, l) in trace.locks.iter().enumerate() {
        if let Ok(i) = raw_ids.binary_search(&l.id) {
            record_of[i] = r as u32;
        }
    }
    let mut destroyed = vec![false; n];
    for d in std::mem::take(&mut trace.destroys) {
        if let Ok(i) = raw_ids.binary_search(&d.id) {
            destroyed[i] = true;
        }
    }
    let tid_of: Vec<u32> = trace.threads.iter().map(|t| t.record.tid).collect();
    let mut thread_acquisitions = vec![0u64; tid_of.len()];
    let mut sites: Vec<SiteTotals> = Vec::new();
    let mut counters = std::mem::take(&mut trace.counters);
    counters.sort_unstable_by_key(|(_, c)| c.lock_id);

    let mut orphans = 0u64;
    let mut locks: Vec<Lock> = Vec::with_capacity(n);
    let mut consumed = 0usize;
    // From the last lock to the first: the records of each are then at the
    // end of the sorted vector, where they can be popped.
    for index in (0..n).rev() {
        let raw = raw_ids[index];
        let rec = trace.locks.get(record_of[index] as usize);
        let mut lock = new_lock(index, rec, destroyed[index]);
        if let Some(origin) = rec.map(|r| r.origin_site).filter(|&s| s != 0) {
            (lock.origin_chain, lock.made_by_library_import) = origin_of(origin);
        }
        let mut totals = Totals::default();
        // [shared, exclusive] for rwlocks.
        let mut modes = [Totals::default(); 2];
        // What each line did with the lock (see `AtLine`).
        let mut at_lines: SmallVec<[AtLine; 4]> = SmallVec::new();
        // (thread, acquisitions, posts): whether a semaphore signals.
        let mut by_thread_posts: SmallVec<[(usize, u64, u64); 4]> = SmallVec::new();
        while let Some(&(thread, c)) = counters.last() {
            if c.lock_id < raw {
                break;
            }
            counters.pop();
            consumed += 1;
            if c.lock_id > raw {
                orphans = orphans.saturating_add(c.engagements);
                continue;
            }
            if c.hdr.aux == MODE_POST {
                lock.posts = lock.posts.saturating_add(c.engagements);
                // A post that found a waiter switched threads: the lock's
                // switches are the sum of its sites'.
                totals.task_switches = totals.task_switches.saturating_add(c.task_switches);
            } else {
                totals.add(&c);
                modes[usize::from(c.hdr.aux != MODE_SHARED)].add(&c);
                // Posts engage a semaphore but are not acquisitions.
                if let Some(slot) = thread_acquisitions.get_mut(thread) {
                    *slot = slot.saturating_add(c.engagements);
                }
            }
            let tid = tid_of.get(thread).copied().unwrap_or(0);
            // It asked for the lock if it got it, waited, timed out or
            // failed a trylock (a post asks for nothing).
            let asked = c.hdr.aux != MODE_POST
                && (c.engagements > 0 || c.contended > 0 || c.timeouts > 0 || c.try_failures > 0);
            let by_thread = &mut lock.engagements_by_thread;
            match by_thread.binary_search_by_key(&tid, |t| t.tid) {
                Ok(i) => {
                    by_thread[i].count = by_thread[i].count.saturating_add(c.engagements);
                    by_thread[i].asked |= asked;
                }
                Err(i) => by_thread.insert(
                    i,
                    ThreadCount {
                        tid,
                        count: c.engagements,
                        asked,
                    },
                ),
            }
            let chain = site_of(c.site_id);
            if chain >= sites.len() {
                sites.resize_with(chain + 1, SiteTotals::default);
            }
            sites[chain].totals.add(&c);
            let line = match at_lines.iter_mut().position(|l| l.chain == chain) {
                Some(i) => &mut at_lines[i],
                None => {
                    at_lines.push(AtLine {
                        chain,
                        ..AtLine::default()
                    });
                    at_lines.last_mut().expect("just pushed")
                }
            };
            let i = match by_thread_posts.iter().position(|t| t.0 == thread) {
                Some(i) => i,
                None => {
                    by_thread_posts.push((thread, 0, 0));
                    by_thread_posts.len() - 1
                }
            };
            if c.hdr.aux == MODE_POST {
                line.posts = line.posts.saturating_add(c.engagements);
                by_thread_posts[i].2 = by_thread_posts[i].2.saturating_add(c.engagements);
            } else {
                line.acquisitions = line.acquisitions.saturating_add(c.engagements);
                by_thread_posts[i].1 = by_thread_posts[i].1.saturating_add(c.engagements);
            }
        }
        if consumed >= SHRINK_EVERY {
            counters.shrink_to_fit();
            consumed = 0;
        }
        // A futex word's wakes are posts too; its role is its library's
        // (futex.rs).
        if lock.kind == LockKind::Sem && signals(&by_thread_posts) {
            lock.rare_mut().signals = true;
        }
        lock.acquisitions = totals.engagements;
        lock.contended = totals.contended;
        lock.try_failures = totals.try_failures;
        lock.timeouts = totals.timeouts;
        lock.cond_reacquires = totals.cond_reacquires;
        lock.task_switches = totals.task_switches;
        lock.owner_changes = totals.owner_changes;
        lock.wait_ns = totals.wait_ns;
        lock.hold_ns = totals.hold_ns;
        lock.hold_samples = totals.hold_samples;
        if rec.is_some_and(|r| r.kind == ObjectKind::Rwlock as u32) {
            lock.read = Some(Box::new(modes[0].mode_stats()));
            lock.write = Some(Box::new(modes[1].mode_stats()));
        }
        lock.threads = lock
            .engagements_by_thread
            .iter()
            .filter(|t| t.count > 0)
            .count() as u32;
        lock.askers = lock
            .engagements_by_thread
            .iter()
            .filter(|t| t.asked || t.count > 0)
            .count() as u32;
        lock.sharing_ratio = sharing_ratio(lock.engagements_by_thread.iter().map(|t| t.count));
        at_lines.sort_unstable_by_key(|l| l.chain);
        for line in &at_lines {
            let chain = line.chain;
            let site = &mut sites[chain];
            let paired = line.paired_posts();
            site.totals.engagements = site.totals.engagements.saturating_sub(paired);
            let engagements = (line.acquisitions + line.posts).saturating_sub(paired);
            site.weighted += engagements as f64 * lock.sharing_ratio;
            site.locks.push(lock.id);
            // Chain indexes for now; numbered once every engaged line is known.
            lock.sites.push(SiteId(chain as u32));
        }
        locks.push(lock);
    }
    // What is left names locks below the first known one.
    orphans = counters
        .iter()
        .fold(orphans, |o, (_, c)| o.saturating_add(c.engagements));
    drop(counters);
    locks.reverse();
    for site in &mut sites {
        site.locks.reverse();
    }
    Built {
        locks,
        raw_ids,
        sites,
        thread_acquisitions,
        orphans,
    }
}

/// Numbers the engaged lines S1.. in chain order and rewrites the locks'
/// chain indexes as those numbers. Returns the number of each chain.
pub fn number_sites(built: &mut Built) -> Vec<Option<SiteId>> {
    let mut next = 0u32;
    let number: Vec<Option<SiteId>> = built
        .sites
        .iter()
        .map(|s| {
            (!s.locks.is_empty()).then(|| {
                next += 1;
                SiteId(next - 1)
            })
        })
        .collect();
    for lock in &mut built.locks {
        for site in &mut lock.sites {
            if let Some(Some(id)) = number.get(site.index()) {
                *site = *id;
            }
        }
    }
    number
}
