//! Lock families: the locks a program makes by the thousand (a mutex per
//! grid cell, per bucket, per object) are one thing to a reader. The text
//! report shows each family as one row, and a finding that holds for many
//! locks of a family is one finding that lists them.

use crate::model::*;
use rustc_hash::FxHashMap;
use smallvec::SmallVec;

/// What makes locks one family. The only place that says so.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum FamilyKey {
    /// Made (initialised, or first used) at one line.
    MadeAt(LockKind, u32),
    /// Where that line is unknown: engaged at exactly the same lines.
    EngagedAt(LockKind, SmallVec<[SiteId; 4]>),
}

/// Locks of the same kind made at the same line (an array of bucket locks
/// initialised in a loop, a mutex in every object of a kind); failing
/// that, engaged at exactly the same set of lines.
pub fn family_key(lock: &Lock) -> FamilyKey {
    // A lock in a variable is its own thing, wherever it was first used.
    if lock.origin_chain != u32::MAX && !lock.in_variable {
        FamilyKey::MadeAt(lock.kind, lock.origin_chain)
    } else {
        FamilyKey::EngagedAt(lock.kind, lock.sites.clone())
    }
}

/// Sorts the locks into families (numbered F1.. by their first lock), sets
/// each lock's `family` and sums the families' figures. Distributions are
/// pooled later, from the events.
pub fn build(locks: &mut [Lock]) -> Vec<Family> {
    let mut index: FxHashMap<FamilyKey, u32> = FxHashMap::default();
    let mut families: Vec<Family> = Vec::new();
    // Engagements (acquisitions and posts), for the weighted sharing ratio.
    let mut engagements: Vec<u64> = Vec::new();
    let mut weighted: Vec<f64> = Vec::new();
    // (family, tid): distinct threads per family.
    let mut family_threads: Vec<(u32, u32)> = Vec::new();
    for lock in locks.iter_mut() {
        let next = families.len() as u32;
        let f = *index.entry(family_key(lock)).or_insert(next);
        if f == next {
            families.push(Family {
                id: FamilyId(f),
                kind: lock.kind,
                size: 0,
                first_lock: lock.id,
                first_address: lock.address,
                sites: lock.sites.to_vec(),
                acquisitions: 0,
                contended: 0,
                owner_changes: 0,
                task_switches: 0,
                wait_ns: 0,
                hold_ns: 0,
                hold_samples: 0,
                waited_holds: None,
                threads: 0,
                sharing_ratio: 0.0,
                process_shared: false,
                wait: None,
                hold: None,
                wait_compensated: None,
                hold_compensated: None,
            });
            engagements.push(0);
            weighted.push(0.0);
        }
        lock.family = FamilyId(f);
        let family = &mut families[f as usize];
        family.size += 1;
        family.acquisitions = family.acquisitions.saturating_add(lock.acquisitions);
        family.contended = family.contended.saturating_add(lock.contended);
        family.owner_changes = family.owner_changes.saturating_add(lock.owner_changes);
        family.task_switches = family.task_switches.saturating_add(lock.task_switches);
        family.wait_ns = family.wait_ns.saturating_add(lock.wait_ns);
        family.hold_ns = family.hold_ns.saturating_add(lock.hold_ns);
        family.hold_samples = family.hold_samples.saturating_add(lock.hold_samples);
        family.process_shared |= lock.process_shared;
        let engaged = lock.acquisitions.saturating_add(lock.posts);
        engagements[f as usize] = engagements[f as usize].saturating_add(engaged);
        weighted[f as usize] += engaged as f64 * lock.sharing_ratio;
        family_threads.extend(
            lock.engagements_by_thread
                .iter()
                .filter(|t| t.count > 0)
                .map(|t| (f, t.tid)),
        );
    }
    family_threads.sort_unstable();
    family_threads.dedup();
    for (f, _) in family_threads {
        families[f as usize].threads += 1;
    }
    for (family, (&engaged, &weighted)) in
        families.iter_mut().zip(engagements.iter().zip(&weighted))
    {
        family.sharing_ratio = if engaged == 0 {
            0.0
        } else {
            weighted / engaged as f64
        };
    }
    families
}

/// Up to `shown` ids of `locks`, then how many more: "L1, L2 and 9 more".
pub fn lock_list(locks: &[LockId], shown: usize) -> String {
    let mut out = locks
        .iter()
        .take(shown)
        .map(|l| l.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    if locks.len() > shown {
        out.push_str(&format!(" and {} more", locks.len() - shown));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lock(index: u32, kind: LockKind, sites: &[u32], tid: u32, acquisitions: u64) -> Lock {
        Lock {
            kind,
            address: 0x1000 + u64::from(index) * 64,
            acquisitions,
            contended: 1,
            threads: 1,
            askers: 1,
            wait_ns: 10,
            engagements_by_thread: [ThreadCount {
                tid,
                count: acquisitions,
                asked: true,
            }]
            .into_iter()
            .collect(),
            sites: sites.iter().map(|&s| SiteId(s)).collect(),
            family: FamilyId(u32::MAX),
            ..crate::analysis::locks::new_lock(index as usize, None, false)
        }
    }

    #[test]
    fn a_family_is_one_kind_at_exactly_the_same_lines() {
        let mut locks = vec![
            lock(0, LockKind::Mutex, &[0, 1], 10, 5),
            lock(1, LockKind::Mutex, &[0, 1], 20, 7),
            lock(2, LockKind::Mutex, &[0], 10, 1),
            lock(3, LockKind::Spin, &[0, 1], 10, 1),
            lock(4, LockKind::Mutex, &[0, 1], 10, 2),
        ];
        let families = build(&mut locks);
        let of: Vec<u32> = locks.iter().map(|l| l.family.0).collect();
        assert_eq!(of, vec![0, 0, 1, 2, 0]);
        let f = &families[0];
        assert_eq!((f.size, f.first_lock, f.acquisitions), (3, LockId(0), 14));
        assert_eq!((f.contended, f.wait_ns), (3, 30));
        assert_eq!(f.threads, 2, "threads 10 and 20, each counted once");
        assert_eq!(f.sites, vec![SiteId(0), SiteId(1)]);
        assert_eq!(families.len(), 3);
    }

    #[test]
    fn a_lock_stays_small() {
        // A million locks are a million of these in the model: 248 MB.
        assert!(
            std::mem::size_of::<Lock>() <= 248,
            "{}",
            std::mem::size_of::<Lock>()
        );
    }

    #[test]
    fn lock_lists_are_capped() {
        let ids: Vec<LockId> = (0..12).map(LockId).collect();
        assert_eq!(lock_list(&ids[..2], 5), "L1, L2");
        assert_eq!(lock_list(&ids, 3), "L1, L2, L3 and 9 more");
    }
}
