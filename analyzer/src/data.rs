//! Data-level suitability (programs built with `locksuit cc`): each line
//! that engaged a lock is judged by what its critical sections touched,
//! as the lock-suitability seed asks. An access is *suitable* when the
//! granule it touched was touched under a lock by more than one thread
//! over the run (the lock protects something shared), *unsuitable* when
//! only one thread ever touched it. A site's status then follows the
//! seed's rule on its data ratio (suitable / all), with `basis: "data"`.
//!
//! Finding `private-data-under-lock`: a line whose critical sections
//! touched only data no other thread touched, while another line taking
//! the same lock guards shared data: the classic "split this lock".

use crate::model::*;
use locksuit_format::*;
use std::collections::BTreeMap;

/// A granule of memory touched under a lock, as the report names it.
#[derive(Clone, Debug)]
pub struct Datum {
    /// `&variable`, `&table[3]`, `&state+0x8`, or `0x…` (heap or unknown).
    pub name: String,
    pub shared: bool,
}

/// What the accesses say, per report site.
#[derive(Default, Debug)]
pub struct Facts {
    /// Per site: (suitable accesses, unsuitable accesses, the data it
    /// touched, by name, shared or not).
    pub sites: BTreeMap<SiteId, (u64, u64, BTreeMap<String, bool>)>,
    pub accesses: u64,
    pub dropped: u64,
}

fn threads_of(bits: u64) -> u32 {
    // The catch-all bit stands for threads from the 64th on: at least two.
    bits.count_ones() + u32::from(bits & ACCESS_MANY_THREADS != 0)
}

/// Reads the accesses of a trace, or `None` if it has none (the program
/// was not built with `locksuit cc`, or the process was killed before
/// they were written).
pub fn facts(
    trace: &locksuit_format::reader::Trace,
    report_site: &dyn Fn(u32) -> Option<SiteId>,
    name_of: &mut dyn FnMut(u64) -> Option<String>,
) -> Option<Facts> {
    let summary = trace.access_summary?;
    let mut facts = Facts {
        accesses: summary.accesses,
        dropped: summary.dropped,
        ..Facts::default()
    };
    // Adjacent granules of one variable make one datum.
    let mut names: BTreeMap<u64, String> = BTreeMap::new();
    for a in &trace.accesses {
        let shared = threads_of(a.threads) > 1;
        let name = names
            .entry(a.address)
            .or_insert_with(|| name_of(a.address).unwrap_or_else(|| format!("{:#x}", a.address)))
            .clone();
        for (&raw, &count) in a.sites.iter().zip(&a.accesses) {
            let Some(site) = (raw != 0).then(|| report_site(raw)).flatten() else {
                continue;
            };
            let entry = facts.sites.entry(site).or_default();
            if shared {
                entry.0 += u64::from(count);
            } else {
                entry.1 += u64::from(count);
            }
            let seen = entry.2.entry(name.clone()).or_insert(false);
            *seen |= shared;
        }
    }
    Some(facts)
}

/// Sets each site's basis, its access counts and, where its accesses were
/// recorded, its status from them.
pub fn apply(facts: Option<&Facts>, sites: &mut [Site], threshold: f64) {
    for site in sites.iter_mut() {
        let Some((suitable, unsuitable, _)) = facts.and_then(|f| f.sites.get(&site.id)) else {
            continue;
        };
        site.basis = "data";
        site.suitable_accesses = Some(*suitable);
        site.unsuitable_accesses = Some(*unsuitable);
        let all = suitable + unsuitable;
        let ratio = if all == 0 {
            1.0
        } else {
            *suitable as f64 / all as f64
        };
        site.status = crate::analysis::site_status(site.task_switches, ratio, threshold);
        if *suitable > 0 && *unsuitable == 0 {
            site.status = STATUS_SUITABLE;
        }
    }
}

/// `private-data-under-lock` findings (ids print by name: call under
/// `names::with`).
pub fn findings(facts: &Facts, sites: &[Site]) -> Vec<Finding> {
    let mut out = Vec::new();
    for site in sites {
        let Some((suitable, unsuitable, data)) = facts.sites.get(&site.id) else {
            continue;
        };
        if *suitable > 0 || *unsuitable == 0 {
            continue;
        }
        // Another line on one of its locks that guards shared data.
        let guarding = sites.iter().find(|other| {
            other.id != site.id
                && other.locks.iter().any(|l| site.locks.contains(l))
                && facts.sites.get(&other.id).is_some_and(|f| f.0 > 0)
        });
        let Some(other) = guarding else { continue };
        let private: Vec<&str> = data.keys().take(5).map(String::as_str).collect();
        let shared: Vec<&str> = facts.sites[&other.id]
            .2
            .iter()
            .filter(|(_, &shared)| shared)
            .map(|(name, _)| name.as_str())
            .take(3)
            .collect();
        let lock = site.locks.iter().find(|l| other.locks.contains(l)).copied();
        let lock_name = lock.map_or("its lock".to_string(), |l| l.to_string());
        out.push(Finding {
            kind: FINDING_PRIVATE_DATA,
            lock,
            sites: vec![site.id, other.id],
            message: format!(
                "{} takes {lock_name} to touch only data no other thread touches ({}; {} accesses), while {} takes it for shared data ({}): give this line's data its own lock, or none.",
                site.id,
                private.join(", "),
                unsuitable,
                other.id,
                shared.join(", ")
            ),
            engagements: site.engagements,
            wait_ns: site.wait_ns,
            locks: lock.into_iter().collect(),
            family: None,
            family_size: None,
            cycle: Vec::new(),
        });
    }
    out
}
