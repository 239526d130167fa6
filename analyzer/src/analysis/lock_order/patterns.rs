//! Lock-order patterns that are not cycles: what was seen, and when it
//! would deadlock. Both are about a family (locks of one kind made at one
//! line), whose members stand for each other in code:
//! - taken two at a time at the same two lines in both address orders (a
//!   `transfer(a, b)` a caller may call as `transfer(b, a)`);
//! - taken before another lock `X` at one place and after it at another
//!   (an object's lock, then a global one; the global one, then another
//!   object's): if one object can reach both paths, two threads deadlock.
//!
//! Neither is told when its arcs lie on a cycle (that is a potential
//! deadlock already), nor when all its edges were taken under one gate.

use super::{common_gates, cycle_edge, gate_of, Arc, CycleEdge, RawEdge};
use locksuit_format::*;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Locks of one family taken in both orders: at the same lines against
/// each other (`through` is `None`), or before and after another lock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inversion {
    /// Same lines: the first edge seen in ascending address order, and in
    /// descending. Through `X`: the first edge from the family into `X`,
    /// and the first from `X` into the family.
    pub up: CycleEdge,
    pub down: CycleEdge,
    /// Every lock of the family in those edges (raw ids, ascending).
    pub locks: Vec<u32>,
    /// Distinct (held, taken) pairs each way.
    pub pairs_up: usize,
    pub pairs_down: usize,
    /// Distinct threads that took them.
    pub threads: usize,
    /// The other lock, for the second pattern.
    pub through: Option<u32>,
}

type Family = (u32, u32);

/// A lock's family, when it has other members (kind, origin site).
fn family_of(
    locks: &HashMap<u32, &LockRecord>,
    sizes: &HashMap<Family, usize>,
    id: u32,
) -> Option<Family> {
    let l = locks.get(&id)?;
    let key = (l.kind, l.origin_site);
    (l.origin_site != 0 && sizes.get(&key).is_some_and(|&n| n > 1)).then_some(key)
}

/// Both patterns in `arcs`; `on_a_cycle(from, to)` says whether an arc lies
/// on a cycle.
pub(super) fn find(
    arcs: &BTreeMap<(u32, u32), Arc>,
    locks: &HashMap<u32, &LockRecord>,
    line_of: &dyn Fn(u32) -> Option<usize>,
    on_a_cycle: &dyn Fn(u32, u32) -> bool,
    gated: &mut usize,
) -> Vec<Inversion> {
    let mut sizes: HashMap<Family, usize> = HashMap::new();
    for l in locks.values().filter(|l| l.origin_site != 0) {
        *sizes.entry((l.kind, l.origin_site)).or_default() += 1;
    }
    let family = |id: u32| family_of(locks, &sizes, id);
    let mut out = same_lines(arcs, locks, &family, line_of, on_a_cycle, gated);
    out.extend(through_another(arcs, &family, on_a_cycle, gated));
    out
}

/// One pattern's edges made into an [`Inversion`], unless a gate covers
/// them all.
fn inversion(
    edges: (&[RawEdge], &[RawEdge]),
    in_family: &dyn Fn(u32) -> bool,
    through: Option<u32>,
    gated: &mut usize,
) -> Option<Inversion> {
    let (ups, downs) = edges;
    let first = |list: &[RawEdge]| list.iter().min_by_key(|e| e.record.first_ns).copied();
    let (up, down) = (first(ups)?, first(downs)?);
    let all: Vec<RawEdge> = ups.iter().chain(downs).copied().collect();
    if gate_of(&[common_gates(&all)]).is_some() {
        *gated += 1;
        return None;
    }
    let pairs = |list: &[RawEdge]| {
        list.iter()
            .map(|e| (e.record.from_lock, e.record.to_lock))
            .collect::<BTreeSet<_>>()
            .len()
    };
    let locks: BTreeSet<u32> = all
        .iter()
        .flat_map(|e| [e.record.from_lock, e.record.to_lock])
        .filter(|&l| in_family(l))
        .collect();
    let threads: BTreeSet<u32> = all.iter().map(|e| e.tid).collect();
    Some(Inversion {
        up: cycle_edge(&[up]),
        down: cycle_edge(&[down]),
        locks: locks.into_iter().collect(),
        pairs_up: pairs(ups),
        pairs_down: pairs(downs),
        threads: threads.len(),
        through,
    })
}

/// Per (family, line holding, line taking): edges between two of the
/// family's locks in both address orders.
fn same_lines(
    arcs: &BTreeMap<(u32, u32), Arc>,
    locks: &HashMap<u32, &LockRecord>,
    family: &dyn Fn(u32) -> Option<Family>,
    line_of: &dyn Fn(u32) -> Option<usize>,
    on_a_cycle: &dyn Fn(u32, u32) -> bool,
    gated: &mut usize,
) -> Vec<Inversion> {
    type Key = (Family, usize, usize);
    // Per key: [ascending, descending] edges.
    let mut groups: BTreeMap<Key, [Vec<RawEdge>; 2]> = BTreeMap::new();
    let mut explained: BTreeSet<Key> = BTreeSet::new();
    for (&(from, to), arc) in arcs {
        let (Some(f), Some(g)) = (family(from), family(to)) else {
            continue;
        };
        if f != g {
            continue;
        }
        let up = locks[&from].address < locks[&to].address;
        for e in &arc.edges {
            let (Some(held_at), Some(taken_at)) =
                (line_of(e.record.from_site), line_of(e.record.to_site))
            else {
                continue;
            };
            let key = (f, held_at, taken_at);
            if on_a_cycle(from, to) {
                explained.insert(key);
            }
            groups.entry(key).or_default()[usize::from(!up)].push(*e);
        }
    }
    groups
        .into_iter()
        .filter(|(key, _)| !explained.contains(key))
        .filter_map(|((f, _, _), [ups, downs])| {
            inversion((&ups, &downs), &|l| family(l) == Some(f), None, gated)
        })
        .collect()
}

/// Per (family, other lock `X` of no family): edges from a member into `X`
/// and from `X` into another member, none of them on a cycle.
fn through_another(
    arcs: &BTreeMap<(u32, u32), Arc>,
    family: &dyn Fn(u32) -> Option<Family>,
    on_a_cycle: &dyn Fn(u32, u32) -> bool,
    gated: &mut usize,
) -> Vec<Inversion> {
    // (family, X) → [member → X edges, X → member edges]
    let mut groups: BTreeMap<(Family, u32), [Vec<RawEdge>; 2]> = BTreeMap::new();
    for (&(from, to), arc) in arcs {
        if on_a_cycle(from, to) {
            continue;
        }
        let (key, side) = match (family(from), family(to)) {
            (Some(f), None) => ((f, to), 0),
            (None, Some(f)) => ((f, from), 1),
            _ => continue,
        };
        groups.entry(key).or_default()[side].extend(arc.edges.iter().copied());
    }
    groups
        .into_iter()
        .filter(|(_, [into, out_of])| {
            // Some member before X and another after it (the same member
            // both ways would be a cycle, told elsewhere).
            into.iter().any(|a| {
                out_of
                    .iter()
                    .any(|b| a.record.from_lock != b.record.to_lock)
            })
        })
        .filter_map(|((f, x), [into, out_of])| {
            inversion((&into, &out_of), &|l| family(l) == Some(f), Some(x), gated)
        })
        .collect()
}
