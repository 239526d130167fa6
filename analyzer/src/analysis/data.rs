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
    /// `&variable`, `&table[3]`, `&state+0x8`, `blocks from f@file.c:12`
    /// (heap blocks that line allocated), or `0x…` (unknown).
    pub name: String,
    pub shared: bool,
}

/// What one line's critical sections touched.
#[derive(Default, Debug)]
pub struct SiteData {
    /// Accesses to data more than one thread touched under a lock.
    pub suitable: u64,
    /// Accesses to data only one thread touched.
    pub unsuitable: u64,
    /// The data it touched, by name: shared or not.
    pub data: BTreeMap<String, bool>,
    /// Some of that data was written under a lock (by any line), or by a
    /// thread holding none once some lock had guarded it.
    pub written: bool,
    /// Its engagements by share of suitable accesses: `[waited for][bucket]`.
    pub ratios: Option<[[u64; RATIO_BUCKETS]; 2]>,
}

/// What the accesses say, per report site.
#[derive(Default, Debug)]
pub struct Facts {
    pub sites: BTreeMap<SiteId, SiteData>,
    pub accesses: u64,
    pub dropped: u64,
    /// The totals written at exit are there (false: the process did not
    /// exit, and `accesses` counts what the granules' records hold).
    pub complete: bool,
    /// `LOCKSUIT_DATA_SAMPLE`: each line's engagements on a thread had
    /// their accesses recorded for the first `sample_first`, then one in
    /// `sample_every` (1: every engagement).
    pub sample_every: u32,
    pub sample_first: u32,
    /// Cache lines whose granules different threads each touched alone
    /// (see [`false_sharing`]), one per set of data.
    pub false_shares: Vec<FalseShare>,
}

/// One kind of cache line several threads each used for data of their own.
#[derive(Debug)]
pub struct FalseShare {
    /// One line's granules, by place (`&counters+0x8`).
    pub places: Vec<String>,
    /// The lines whose critical sections touched them.
    pub sites: Vec<SiteId>,
    pub threads: u32,
    pub accesses: u64,
    /// Cache lines like it (the same data).
    pub lines: u64,
}

impl Facts {
    /// Only some engagements were recorded.
    pub fn sampled(&self) -> bool {
        self.sample_every > 1
    }

    /// What a finding that says data was not shared must add when only
    /// some engagements were recorded: another thread's touch in one left
    /// out was not seen.
    fn sampling_caveat(&self) -> String {
        if self.sampled() {
            format!(
                " (Sampled: the first {} engagements of each line, then 1 in {}, and the first accesses of each; data another thread touched only in accesses left out looks private.)",
                self.sample_first, self.sample_every
            )
        } else {
            String::new()
        }
    }
}

/// A granule's datum by name, and the granule's offset into it when the
/// datum is a variable.
pub type DatumName = (String, Option<u64>);

fn threads_of(bits: u64) -> u32 {
    // The catch-all bit stands for threads from the 64th on: at least two.
    bits.count_ones() + u32::from(bits & ACCESS_MANY_THREADS != 0)
}

/// Reads the accesses of a trace, or `None` if it has none (the program
/// was not built with `locksuit cc`). A process that did not exit (killed,
/// or still running) has its granules' records but not the totals written
/// at exit: the accesses are then those the records count, and
/// `complete` is false.
///
/// `name_of` names a granule's datum, with the granule's offset into it
/// when it is a variable.
pub fn facts(
    trace: &locksuit_format::reader::Trace,
    report_site: &dyn Fn(u32) -> Option<SiteId>,
    name_of: &mut dyn FnMut(&AccessRecord) -> Option<DatumName>,
) -> Option<Facts> {
    if trace.access_summary.is_none() && trace.accesses.is_empty() {
        return None;
    }
    let mut facts = Facts {
        accesses: trace.access_summary.map_or(0, |s| s.accesses),
        dropped: trace.access_summary.map_or(0, |s| s.dropped),
        complete: trace.access_summary.is_some(),
        sample_every: trace.header.data_sample_every,
        sample_first: trace.header.data_sample_first,
        ..Facts::default()
    };
    // Adjacent granules of one variable, or of the blocks one line
    // allocated, make one datum.
    let mut names: BTreeMap<(u64, u64), DatumName> = BTreeMap::new();
    for a in &trace.accesses {
        let shared = threads_of(a.threads) > 1;
        let name = names
            .entry((a.address, a.alloc_pc))
            .or_insert_with(|| name_of(a).unwrap_or_else(|| (format!("{:#x}", a.address), None)))
            .0
            .clone();
        for (&raw, &count) in a.sites.iter().zip(&a.accesses) {
            let Some(site) = (raw != 0).then(|| report_site(raw)).flatten() else {
                continue;
            };
            let entry = facts.sites.entry(site).or_default();
            if shared {
                entry.suitable += u64::from(count);
            } else {
                entry.unsuitable += u64::from(count);
            }
            *entry.data.entry(name.clone()).or_insert(false) |= shared;
            entry.written |= a.flags & (ACCESS_WRITTEN | ACCESS_WRITTEN_UNLOCKED) != 0;
        }
        if !facts.complete {
            facts.accesses += a.accesses.iter().map(|&n| u64::from(n)).sum::<u64>();
        }
    }
    facts.false_shares = false_sharing(&trace.accesses, report_site, &names);
    for r in &trace.site_ratios {
        let Some(site) = report_site(r.site_id) else {
            continue;
        };
        let ratios = facts
            .sites
            .entry(site)
            .or_default()
            .ratios
            .get_or_insert([[0; RATIO_BUCKETS]; 2]);
        for (into, from) in ratios.iter_mut().zip(&r.engagements) {
            for (bucket, &n) in into.iter_mut().zip(from) {
                *bucket += u64::from(n);
            }
        }
    }
    Some(facts)
}

/// Bytes of a cache line (x86-64, and most others).
const CACHE_LINE: u64 = 64;

/// Cache lines that several threads use, each for data no other thread
/// touches: every granule of the line was touched (under locks) by one
/// thread only and never written holding none, not all by the same
/// thread, and one of them was written. Each write then takes
/// the line away from the other threads' cores though they share nothing
/// (false sharing). A line where some granule is shared bounces anyway,
/// and is left out; so is one holding a heap block freed before the
/// process ended (whose neighbours may not have lived alongside it).
/// Lines holding the same data (by name) are one `FalseShare`.
fn false_sharing(
    accesses: &[AccessRecord],
    report_site: &dyn Fn(u32) -> Option<SiteId>,
    names: &BTreeMap<(u64, u64), DatumName>,
) -> Vec<FalseShare> {
    let mut by_line: BTreeMap<u64, Vec<&AccessRecord>> = BTreeMap::new();
    for a in accesses {
        by_line.entry(a.address / CACHE_LINE).or_default().push(a);
    }
    let mut found: BTreeMap<Vec<String>, FalseShare> = BTreeMap::new();
    for granules in by_line.values_mut() {
        // In address order, whichever thread wrote its record first.
        granules.sort_by_key(|g| g.address);
        // Granules of a heap block freed meanwhile did not live alongside
        // the others (a block allocated later may hold the same address):
        // such a line is left out, as is one holding an address twice.
        if granules.windows(2).any(|w| w[0].address == w[1].address)
            || granules.iter().any(|g| g.flags & ACCESS_FREED != 0)
        {
            continue;
        }
        // A store made holding no lock does not say whose it was: such a
        // granule may be shared.
        let private = granules.iter().all(|g| {
            threads_of(g.threads) == 1
                && g.threads & ACCESS_MANY_THREADS == 0
                && g.flags & ACCESS_WRITTEN_UNLOCKED == 0
        });
        let threads: u64 = granules.iter().fold(0, |bits, g| bits | g.threads);
        let written = granules.iter().any(|g| g.flags & ACCESS_WRITTEN != 0);
        if granules.len() < 2 || !private || threads.count_ones() < 2 || !written {
            continue;
        }
        let named = |g: &AccessRecord| {
            names
                .get(&(g.address, g.alloc_pc))
                .cloned()
                .unwrap_or_else(|| (format!("{:#x}", g.address), None))
        };
        let mut data: Vec<String> = granules.iter().map(|g| named(g).0).collect();
        data.sort();
        data.dedup();
        let accesses: u64 = granules
            .iter()
            .flat_map(|g| g.accesses.iter())
            .map(|&n| u64::from(n))
            .sum();
        let entry = found.entry(data).or_insert_with(|| FalseShare {
            places: granules
                .iter()
                .map(|g| match named(g) {
                    (name, Some(offset)) => format!("{name}+{offset:#x}"),
                    (name, None) => format!("{name} at {:#x}", g.address),
                })
                .collect(),
            sites: Vec::new(),
            threads: threads.count_ones(),
            accesses: 0,
            lines: 0,
        });
        entry.lines += 1;
        entry.accesses += accesses;
        entry.threads = entry.threads.max(threads.count_ones());
        for g in granules {
            for (&raw, _) in g.sites.iter().zip(&g.accesses).filter(|(&r, _)| r != 0) {
                if let Some(site) = report_site(raw) {
                    if !entry.sites.contains(&site) {
                        entry.sites.push(site);
                    }
                }
            }
        }
    }
    found.into_values().collect()
}

/// Sets each site's basis, its access counts and, where its accesses were
/// recorded, its status from them.
pub fn apply(facts: Option<&Facts>, sites: &mut [Site], threshold: f64) {
    for site in sites.iter_mut() {
        let Some(SiteData {
            suitable,
            unsuitable,
            ratios,
            ..
        }) = facts.and_then(|f| f.sites.get(&site.id))
        else {
            continue;
        };
        site.basis = "data";
        site.suitable_accesses = Some(*suitable);
        site.unsuitable_accesses = Some(*unsuitable);
        if let Some([not_waited, waited]) = ratios {
            // Buckets wholly below the threshold: [i/10, (i+1)/10).
            let below = (0..RATIO_BUCKETS).filter(|&i| (i + 1) as f64 / 10.0 <= threshold + 1e-9);
            site.unsuitable_engagements = Some(below.map(|i| waited[i]).sum());
            site.engagement_ratios = Some(EngagementRatios {
                waited_for: waited.to_vec(),
                not_waited_for: not_waited.to_vec(),
            });
        }
        let all = suitable + unsuitable;
        // What the verdict uses: the share of suitable accesses.
        site.ratio = if all == 0 {
            1.0
        } else {
            *suitable as f64 / all as f64
        };
        site.status = match ratios {
            // Each engagement by its own share: the seed's line states.
            Some([not_waited, waited]) => {
                let engagements: u64 = not_waited.iter().chain(waited).sum();
                let qualifying: u64 = (0..RATIO_BUCKETS)
                    .filter(|&i| i as f64 / 10.0 >= threshold - 1e-9)
                    .map(|i| waited[i])
                    .sum();
                crate::analysis::sharing::line_state(engagements, qualifying)
            }
            None => data_status(
                *suitable,
                *unsuitable,
                (site.engagements, site.task_switches),
                threshold,
            ),
        };
    }
}

/// A line's status from its data: definitely suitable when everything its
/// critical sections touched is shared (the seed's "definitely suitable":
/// another thread needs it); otherwise the sharing rule on the data ratio
/// (suitable / all accesses).
fn data_status(
    suitable: u64,
    unsuitable: u64,
    (engagements, task_switches): (u64, u64),
    threshold: f64,
) -> &'static str {
    if suitable > 0 && unsuitable == 0 {
        return STATUS_SUITABLE;
    }
    let all = suitable + unsuitable;
    let ratio = if all == 0 {
        1.0
    } else {
        suitable as f64 / all as f64
    };
    crate::analysis::sharing::site_status(engagements, task_switches, ratio, threshold)
}

fn names(data: &BTreeMap<String, bool>, shared: Option<bool>) -> String {
    let picked: Vec<&str> = data
        .iter()
        .filter(|(_, &s)| shared.is_none_or(|want| s == want))
        .map(|(name, _)| name.as_str())
        .collect();
    let shown = picked
        .iter()
        .take(4)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    match picked.len() {
        0..=4 => shown,
        n => format!("{shown} and {} more", n - 4),
    }
}

fn finding(
    kind: &'static str,
    lock: Option<LockId>,
    sites: Vec<SiteId>,
    message: String,
    ranked: (u64, u64),
) -> Finding {
    Finding {
        kind,
        lock,
        sites,
        message,
        engagements: ranked.0,
        wait_ns: ranked.1,
        locks: lock.into_iter().collect(),
        family: None,
        family_size: None,
        ..Finding::default()
    }
}

/// The data-level findings, and the locks whose recorded accesses only
/// read shared data in a sampled run (`read-only-sharing` is not judged
/// there: the report names them, so the user knows what a run recording
/// every engagement would judge). Ids print by name: call under
/// `names::with`.
pub fn findings(facts: &Facts, sites: &[Site], locks: &[Lock]) -> (Vec<Finding>, Vec<LockId>) {
    let mut read_only_unjudged = Vec::new();
    let mut out = private_data(facts, sites);
    for share in &facts.false_shares {
        let more = match share.lines {
            1 => String::new(),
            n => format!(" ({n} cache lines like it)"),
        };
        out.push(finding(
            FINDING_FALSE_SHARING,
            None,
            share.sites.clone(),
            format!(
                "{} share a {CACHE_LINE}-byte cache line{more}, yet each was touched by one thread only ({} threads, {} accesses under locks): every write takes the line from the other threads' cores. Give each thread's data a cache line of its own (align or pad it to {CACHE_LINE} bytes).{}",
                share.places.join(" and "),
                share.threads,
                share.accesses,
                facts.sampling_caveat()
            ),
            (share.accesses, 0),
        ));
    }
    for lock in locks {
        let on_it: Vec<(&Site, &SiteData)> = sites
            .iter()
            .filter(|s| s.locks.contains(&lock.id))
            .filter_map(|s| Some((s, facts.sites.get(&s.id)?)))
            .collect();
        if on_it.is_empty() {
            continue;
        }
        let lines: Vec<SiteId> = on_it.iter().map(|(s, _)| s.id).collect();
        let mut data = BTreeMap::new();
        for (_, d) in &on_it {
            for (name, &shared) in &d.data {
                *data.entry(name.clone()).or_insert(false) |= shared;
            }
        }
        let ranked = (lock.acquisitions, lock.wait_ns);
        let all_private = on_it
            .iter()
            .all(|(_, d)| d.suitable == 0 && d.unsuitable > 0);
        if all_private && lock.contended > 0 && lock.threads > 1 {
            out.push(finding(
                FINDING_DISJOINT_DATA,
                Some(lock.id),
                lines,
                format!(
                    "threads waited for {} ({} of {} acquisitions) though their critical sections touched nothing in common: each guards its own data ({}); give each its own lock, or none.{}",
                    lock.id, lock.contended, lock.acquisitions, names(&data, None), facts.sampling_caveat()
                ),
                ranked,
            ));
            continue;
        }
        // Only-read needs every write seen: a sampled run may have left out
        // the engagements that wrote.
        let all_shared_reads = on_it
            .iter()
            .all(|(_, d)| d.suitable > 0 && d.unsuitable == 0 && !d.written);
        if all_shared_reads && facts.sampled() {
            read_only_unjudged.push(lock.id);
        } else if all_shared_reads {
            out.push(finding(
                FINDING_READ_ONLY,
                Some(lock.id),
                lines,
                format!(
                    "the data {} guards ({}) was only read under it, by {} threads: nothing written there needs excluding; a read-write lock would let the readers run together, or no lock if the data is not written once the threads run.",
                    lock.id,
                    names(&data, None),
                    lock.threads
                ),
                ranked,
            ));
        }
    }
    (out, read_only_unjudged)
}

/// `private-data-under-lock`: a line that touched only private data under
/// a lock another line takes for shared data.
fn private_data(facts: &Facts, sites: &[Site]) -> Vec<Finding> {
    let mut out = Vec::new();
    for site in sites {
        let Some(mine) = facts.sites.get(&site.id) else {
            continue;
        };
        if mine.suitable > 0 || mine.unsuitable == 0 {
            continue;
        }
        // Another line on one of its locks that guards shared data.
        let guarding = sites.iter().find(|other| {
            other.id != site.id
                && other.locks.iter().any(|l| site.locks.contains(l))
                && facts.sites.get(&other.id).is_some_and(|f| f.suitable > 0)
        });
        let Some(other) = guarding else { continue };
        let lock = site.locks.iter().find(|l| other.locks.contains(l)).copied();
        let lock_name = lock.map_or("its lock".to_string(), |l| l.to_string());
        out.push(finding(
            FINDING_PRIVATE_DATA,
            lock,
            vec![site.id, other.id],
            format!(
                "{} takes {lock_name} to touch only data no other thread touches ({}; {} accesses), while {} takes it for shared data ({}): give this line's data its own lock, or none.{}",
                site.id,
                names(&mine.data, None),
                mine.unsuitable,
                other.id,
                names(&facts.sites[&other.id].data, Some(true)),
                facts.sampling_caveat(),
            ),
            (site.engagements, site.wait_ns),
        ));
    }
    out
}
