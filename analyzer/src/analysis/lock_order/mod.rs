//! Potential deadlocks: cycles in the lock-order graph the shim records
//! ("acquired B while holding A", per thread, with sites and counts).
//!
//! The graph's nodes are concrete locks, never names: a cycle closed
//! through two different locks that share a name or a family (an array of
//! structs whose locks are made at one line, a hash table's buckets) is no
//! cycle. The rules, so that no cycle is one a careful engineer would reject:
//! - a trylock cannot block: its edges do not close a cycle;
//! - a read acquisition of an rwlock blocks only if someone write-locks it
//!   (a holder, or with a writer-preferring rwlock a queued writer between
//!   two readers): a read edge into an rwlock that is never write-locked in
//!   the run is dropped, and a cycle that needs a read to wait for a read
//!   hold of an rwlock that does not prefer writers (glibc's default lets
//!   readers in past a queued writer) cannot close;
//! - a cycle whose every edge was taken while holding one common gate lock
//!   cannot deadlock.
//!
//! A cycle so excused is counted, and the search goes on for another
//! through the same locks that is not.
//!
//! Apart from cycles, weaker patterns are told (`patterns.rs`): locks of
//! one family taken two at a time at the same lines in both address
//! orders, and locks of one family taken both before and after another
//! lock, with no cycle among them. They are what was seen, not deadlocks.
//!
//! Strongly connected components are found in time linear in the graph
//! (Tarjan); within each, simple cycles are listed, shortest first, up to a
//! bound and within a bounded amount of work per trace.

mod patterns;

use locksuit_format::reader::Trace;
use locksuit_format::*;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

/// Most cycles listed per strongly connected component.
const CYCLES_PER_COMPONENT: usize = 32;
/// Longest cycle listed.
pub const MAX_CYCLE_LEN: usize = 64;
/// Arcs the cycle search of one trace may follow in all (a dense graph has
/// more cycles than anyone reads; the search stops, saying so).
const SEARCH_BUDGET: usize = 8_000_000;
/// Times the search through one arc looks again after finding a cycle
/// that cannot deadlock.
const RETRIES: usize = 8;

/// One edge of a reported cycle: the first thread that took it, the locks
/// and the sites, and how often it was taken in all.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CycleEdge {
    pub tid: u32,
    /// The lock held and the site that took it.
    pub holds: u32,
    pub holds_site: u32,
    /// The lock being acquired and the site acquiring it.
    pub waits_for: u32,
    pub waits_site: u32,
    pub count: u64,
}

/// A potential deadlock: edges in cycle order (each edge's `waits_for` is
/// held by the next one), between concrete locks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cycle {
    pub edges: Vec<CycleEdge>,
}

impl Cycle {
    /// Its locks, ascending (raw ids).
    pub fn locks(&self) -> Vec<u32> {
        let mut locks: Vec<u32> = self.edges.iter().map(|e| e.holds).collect();
        locks.sort_unstable();
        locks
    }
}

pub use patterns::Inversion;

/// What the graph gave.
#[derive(Debug, Default)]
pub struct LockOrder {
    pub cycles: Vec<Cycle>,
    pub inversions: Vec<Inversion>,
    /// Cycles (and patterns) not reported because all their edges were
    /// taken under one common gate lock.
    pub gated: usize,
    /// Cycles not reported because they would close only by a read
    /// waiting for a read hold of an rwlock that lets readers in.
    pub readers_pass: usize,
    /// Components with more simple cycles than were listed.
    pub truncated: bool,
}

/// Per (held lock, acquired lock): every recorded edge between them.
#[derive(Default)]
struct Arc {
    edges: Vec<RawEdge>,
}

impl Arc {
    /// Every one of its edges acquired the lock for reading (or, `from`,
    /// held the first lock for reading).
    fn all(&self, flag: u32) -> bool {
        self.edges.iter().all(|e| e.record.hdr.aux & flag != 0)
    }
}

#[derive(Clone, Copy)]
struct RawEdge {
    tid: u32,
    record: EdgeRecord,
}

/// Why a cycle found cannot deadlock.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Excuse {
    Gated,
    ReadersPass,
}

/// Finds the potential deadlocks of one trace. `line_of` turns a raw site
/// into the line it is (several recorded call paths may be one line), for
/// telling which edges were taken at the same lines.
pub fn analyze(trace: &Trace, line_of: &dyn Fn(u32) -> Option<usize>) -> LockOrder {
    let locks: HashMap<u32, &LockRecord> = trace.locks.iter().map(|l| (l.id, l)).collect();
    // Rwlocks that someone write-locks (only those make a read wait).
    let written: BTreeSet<u32> = trace
        .counters
        .iter()
        .filter(|(_, c)| c.hdr.aux == MODE_EXCLUSIVE && c.engagements + c.try_failures > 0)
        .map(|(_, c)| c.lock_id)
        .collect();
    let mut arcs: BTreeMap<(u32, u32), Arc> = BTreeMap::new();
    for (thread, e) in &trace.edges {
        if e.hdr.aux & EDGE_TRY != 0 {
            continue; // could not have blocked
        }
        if e.hdr.aux & EDGE_TO_SHARED != 0 && !written.contains(&e.to_lock) {
            continue; // a read lock nobody write-locks never waits
        }
        if e.from_lock == e.to_lock {
            continue; // a recursive re-acquisition waits for nobody
        }
        let tid = trace.threads.get(*thread).map_or(0, |t| t.record.tid);
        arcs.entry((e.from_lock, e.to_lock))
            .or_default()
            .edges
            .push(RawEdge { tid, record: *e });
    }
    let prefers_writers = |id: u32| {
        locks
            .get(&id)
            .is_some_and(|l| l.hdr.aux & ATTR_PREFER_WRITER != 0)
    };
    let mut out = LockOrder::default();
    let nodes: Vec<u32> = arcs
        .keys()
        .flat_map(|&(a, b)| [a, b])
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let index: HashMap<u32, usize> = nodes.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let mut succ: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    for &(from, to) in arcs.keys() {
        succ[index[&from]].push(index[&to]);
    }
    // Why a cycle (node indexes, in order) cannot deadlock, if it cannot.
    let excuse = |cycle: &[usize]| -> Option<Excuse> {
        let pairs: Vec<(u32, u32)> = (0..cycle.len())
            .map(|i| (nodes[cycle[i]], nodes[cycle[(i + 1) % cycle.len()]]))
            .collect();
        let gates: Vec<[u32; EDGE_GATES]> =
            pairs.iter().map(|p| common_gates(&arcs[p].edges)).collect();
        if gate_of(&gates).is_some() {
            return Some(Excuse::Gated);
        }
        // At each rwlock of the cycle: if every wait for it is a read and
        // every hold of it while going on is a read, a reader gets in.
        let readers_pass = (0..pairs.len()).any(|i| {
            let (into, out_of) = (&arcs[&pairs[i]], &arcs[&pairs[(i + 1) % pairs.len()]]);
            into.all(EDGE_TO_SHARED) && out_of.all(EDGE_FROM_SHARED) && !prefers_writers(pairs[i].1)
        });
        readers_pass.then_some(Excuse::ReadersPass)
    };
    let components = strongly_connected(&succ);
    let mut component_of = vec![usize::MAX; nodes.len()];
    for (c, members) in components.iter().enumerate() {
        for &n in members {
            component_of[n] = c;
        }
    }
    let mut budget = SEARCH_BUDGET;
    for component in components.iter().filter(|c| c.len() >= 2) {
        let found = simple_cycles(&succ, component, &mut budget, &mut |cycle| {
            match excuse(cycle) {
                Some(Excuse::Gated) => out.gated += 1,
                Some(Excuse::ReadersPass) => out.readers_pass += 1,
                None => return true,
            }
            false
        });
        out.truncated |= found.1;
        for cycle in found.0 {
            let pairs: Vec<(u32, u32)> = (0..cycle.len())
                .map(|i| (nodes[cycle[i]], nodes[cycle[(i + 1) % cycle.len()]]))
                .collect();
            out.cycles.push(Cycle {
                edges: pairs.iter().map(|p| cycle_edge(&arcs[p].edges)).collect(),
            });
        }
    }
    // An arc lies on some cycle exactly when both its ends are in one
    // component: a pattern it is part of is a cycle's, not told again.
    let on_a_cycle = |from: u32, to: u32| component_of[index[&from]] == component_of[index[&to]];
    out.inversions = patterns::find(&arcs, &locks, line_of, &on_a_cycle, &mut out.gated);
    // Most often taken first.
    out.cycles
        .sort_by_key(|c| std::cmp::Reverse(c.edges.iter().map(|e| e.count).min().unwrap_or(0)));
    out
}

/// An arc's edges as one: the first thread and sites to take it, and the
/// total count.
fn cycle_edge(edges: &[RawEdge]) -> CycleEdge {
    let first = edges
        .iter()
        .min_by_key(|e| e.record.first_ns)
        .expect("an arc has edges");
    CycleEdge {
        tid: first.tid,
        holds: first.record.from_lock,
        holds_site: first.record.from_site,
        waits_for: first.record.to_lock,
        waits_site: first.record.to_site,
        count: edges.iter().map(|e| e.record.count).sum(),
    }
}

/// The gate locks every one of `edges` was taken under.
fn common_gates(edges: &[RawEdge]) -> [u32; EDGE_GATES] {
    let mut gates = edges[0].record.gates;
    for e in &edges[1..] {
        for g in gates.iter_mut() {
            if *g != 0 && !e.record.gates.contains(g) {
                *g = 0;
            }
        }
    }
    gates
}

/// A lock in every one of the gate sets, if any.
fn gate_of(sets: &[[u32; EDGE_GATES]]) -> Option<u32> {
    let (first, rest) = sets.split_first()?;
    first
        .iter()
        .copied()
        .find(|&g| g != 0 && rest.iter().all(|s| s.contains(&g)))
}

/// Tarjan's strongly connected components, iteratively (deep graphs must
/// not overflow the stack).
fn strongly_connected(succ: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let n = succ.len();
    let mut index = vec![usize::MAX; n];
    let mut low = vec![0; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut components = Vec::new();
    let mut next = 0;
    for root in 0..n {
        if index[root] != usize::MAX {
            continue;
        }
        let mut work: Vec<(usize, usize)> = vec![(root, 0)];
        index[root] = next;
        low[root] = next;
        next += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some(&mut (v, ref mut i)) = work.last_mut() {
            if *i < succ[v].len() {
                let w = succ[v][*i];
                *i += 1;
                if index[w] == usize::MAX {
                    index[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                let mut component = Vec::new();
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    component.push(w);
                    if w == v {
                        break;
                    }
                }
                components.push(component);
            }
        }
    }
    components
}

/// Simple cycles within one component, each starting at its smallest node:
/// for every node in turn and every arc out of it, the shortest way back
/// to it through nodes not smaller than it (breadth first). So each arc
/// out of a node has its tightest cycle found once, and a dense component
/// cannot make the search explode. A cycle `keep` rejects (one that cannot
/// deadlock) is searched past: the arc that closed it is left out and the
/// search through that first arc tried again, a few times. Up to
/// [`CYCLES_PER_COMPONENT`] cycles kept, of length up to
/// [`MAX_CYCLE_LEN`], within `budget` arcs followed; `true` if there were
/// (or may be) more.
fn simple_cycles(
    succ: &[Vec<usize>],
    component: &[usize],
    budget: &mut usize,
    keep: &mut dyn FnMut(&[usize]) -> bool,
) -> (Vec<Vec<usize>>, bool) {
    let members: BTreeSet<usize> = component.iter().copied().collect();
    let mut cycles: Vec<Vec<usize>> = Vec::new();
    let mut truncated = false;
    let mut parent: HashMap<usize, usize> = HashMap::new();
    let mut queue: VecDeque<(usize, usize)> = VecDeque::new();
    for &start in &members {
        for &first in &succ[start] {
            if first < start || !members.contains(&first) {
                continue;
            }
            // Arcs into `start` left out after closing a cycle kept out.
            let mut closed: Vec<usize> = Vec::new();
            for _ in 0..RETRIES {
                parent.clear();
                queue.clear();
                parent.insert(first, start);
                queue.push_back((first, 2));
                let mut closing = None;
                'search: while let Some((v, len)) = queue.pop_front() {
                    for &w in &succ[v] {
                        if *budget == 0 {
                            return (cycles, true);
                        }
                        *budget -= 1;
                        if w == start {
                            if !closed.contains(&v) {
                                closing = Some(v);
                                break 'search;
                            }
                            continue;
                        }
                        if w < start || !members.contains(&w) || parent.contains_key(&w) {
                            continue;
                        }
                        if len >= MAX_CYCLE_LEN {
                            truncated = true;
                            continue;
                        }
                        parent.insert(w, v);
                        queue.push_back((w, len + 1));
                    }
                }
                let Some(last) = closing else { break };
                let mut at = last;
                let mut path = vec![at];
                while at != first {
                    at = parent[&at];
                    path.push(at);
                }
                path.push(start);
                path.reverse();
                if keep(&path) {
                    if cycles.len() == CYCLES_PER_COMPONENT {
                        return (cycles, true);
                    }
                    cycles.push(path);
                    break;
                }
                closed.push(last);
            }
        }
    }
    (cycles, truncated)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every simple cycle kept, with a big budget.
    fn cycles_of(succ: &[Vec<usize>], component: &[usize]) -> (Vec<Vec<usize>>, bool) {
        let mut budget = SEARCH_BUDGET;
        simple_cycles(succ, component, &mut budget, &mut |_| true)
    }

    #[test]
    fn components_and_cycles_of_a_small_graph() {
        // 0 -> 1 -> 2 -> 0, 2 -> 3, 3 -> 4 -> 3, 5 alone.
        let succ = vec![vec![1], vec![2], vec![0, 3], vec![4], vec![3], vec![]];
        let mut comps: Vec<Vec<usize>> = strongly_connected(&succ)
            .into_iter()
            .map(|mut c| {
                c.sort();
                c
            })
            .collect();
        comps.sort();
        assert_eq!(comps, vec![vec![0, 1, 2], vec![3, 4], vec![5]]);
        let (cycles, truncated) = cycles_of(&succ, &[0, 1, 2]);
        assert_eq!(cycles, vec![vec![0, 1, 2]]);
        assert!(!truncated);
        // Two cycles sharing a node: 0 <-> 1, 1 <-> 2.
        let succ = vec![vec![1], vec![0, 2], vec![1]];
        let (cycles, truncated) = cycles_of(&succ, &[0, 1, 2]);
        assert_eq!(cycles, vec![vec![0, 1], vec![1, 2]]);
        assert!(!truncated);
    }

    #[test]
    fn a_ring_of_thirty_is_one_cycle() {
        let n = 30;
        let succ: Vec<Vec<usize>> = (0..n).map(|i| vec![(i + 1) % n]).collect();
        let all: Vec<usize> = (0..n).collect();
        let (cycles, truncated) = cycles_of(&succ, &all);
        assert_eq!(cycles, vec![all]);
        assert!(!truncated);
    }

    #[test]
    fn a_dense_component_stops_and_says_so() {
        // Every node to every other: far more cycles than are listed.
        let n = 200;
        let succ: Vec<Vec<usize>> = (0..n)
            .map(|i| (0..n).filter(|&j| j != i).collect())
            .collect();
        let all: Vec<usize> = (0..n).collect();
        let (cycles, truncated) = cycles_of(&succ, &all);
        assert_eq!(cycles.len(), CYCLES_PER_COMPONENT);
        assert!(truncated);
        assert!(cycles.iter().all(|c| c.len() == 2), "shortest first");
    }

    #[test]
    fn a_cycle_kept_out_does_not_hide_a_longer_one_through_the_same_arc() {
        // 0 <-> 1 (say, gated), and 1 -> 2 -> 0 (not).
        let succ = vec![vec![1], vec![0, 2], vec![0]];
        let mut budget = SEARCH_BUDGET;
        let (cycles, _) = simple_cycles(&succ, &[0, 1, 2], &mut budget, &mut |c| c.len() != 2);
        assert_eq!(cycles, vec![vec![0, 1, 2]]);
    }

    #[test]
    fn the_budget_is_shared_and_stops_the_search() {
        let n = 50;
        let succ: Vec<Vec<usize>> = (0..n)
            .map(|i| (0..n).filter(|&j| j != i).collect())
            .collect();
        let all: Vec<usize> = (0..n).collect();
        let mut budget = 10;
        let (_, truncated) = simple_cycles(&succ, &all, &mut budget, &mut |_| false);
        assert!(truncated);
        assert_eq!(budget, 0);
    }

    #[test]
    fn a_long_chain_does_not_overflow_the_stack() {
        let n = 200_000;
        let succ: Vec<Vec<usize>> = (0..n).map(|i| vec![(i + 1) % n]).collect();
        let comps = strongly_connected(&succ);
        assert_eq!(comps.len(), 1);
        assert_eq!(comps[0].len(), n);
    }

    #[test]
    fn a_shared_gate_silences_a_cycle() {
        assert_eq!(gate_of(&[[7, 0, 0, 0], [3, 7, 0, 0]]), Some(7));
        assert_eq!(gate_of(&[[7, 0, 0, 0], [3, 0, 0, 0]]), None);
        assert_eq!(gate_of(&[[0; EDGE_GATES], [0; EDGE_GATES]]), None);
    }
}
