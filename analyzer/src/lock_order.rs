//! Potential deadlocks: cycles in the lock-order graph the shim records
//! ("acquired B while holding A", per thread, with sites and counts).
//!
//! The rules, so that no cycle is one a careful engineer would reject:
//! - a trylock cannot block: its edges do not close a cycle;
//! - a read acquisition of an rwlock blocks only if someone write-locks it
//!   (a holder, or with a writer-preferring rwlock a queued writer between
//!   two readers): a read edge into an rwlock that is never write-locked in
//!   the run is dropped; read-read cycles over locks that are also
//!   write-locked are reported;
//! - a cycle whose every edge was taken while holding one common gate lock
//!   cannot deadlock: it is not reported (the count of such cycles is);
//! - locks of one family (made at one line, like an array of bucket locks)
//!   are one node for cycles with other locks, and among themselves are a
//!   cycle only if members were taken in both address orders.
//!
//! Strongly connected components are found in time linear in the graph
//! (Tarjan); within each, simple cycles are listed up to a bound.

use locksuit_format::reader::Trace;
use locksuit_format::*;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Most cycles listed per strongly connected component.
const CYCLES_PER_COMPONENT: usize = 32;
/// Longest cycle listed.
const MAX_CYCLE_LEN: usize = 8;

/// A node of the graph: one lock, or one family of locks made at one line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Node {
    Lock(u32),
    /// (kind, origin site): the family's locks.
    Family(u32, u32),
}

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
/// held by the next one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cycle {
    pub edges: Vec<CycleEdge>,
    /// The cycle is among members of one family taken in both address orders.
    pub family_inversion: bool,
}

/// What the graph gave.
#[derive(Debug, Default)]
pub struct LockOrder {
    pub cycles: Vec<Cycle>,
    /// Cycles not reported because all their edges were taken under one
    /// common gate lock.
    pub gated: usize,
    /// Components with more simple cycles than were listed.
    pub truncated: bool,
}

/// Per (held node, acquired node): every recorded edge between their locks.
#[derive(Default)]
struct Arc {
    edges: Vec<RawEdge>,
}

#[derive(Clone, Copy)]
struct RawEdge {
    tid: u32,
    record: EdgeRecord,
    from_addr: u64,
    to_addr: u64,
}

impl RawEdge {
    fn first_ns(&self) -> u64 {
        self.record.first_ns
    }
}

/// Finds the potential deadlocks of one trace.
pub fn analyze(trace: &Trace) -> LockOrder {
    let locks: HashMap<u32, &LockRecord> = trace.locks.iter().map(|l| (l.id, l)).collect();
    // Families: locks of one kind made at one line, when there are several.
    let mut family_size: HashMap<(u32, u32), usize> = HashMap::new();
    for l in &trace.locks {
        if l.origin_site != 0 {
            *family_size.entry((l.kind, l.origin_site)).or_default() += 1;
        }
    }
    let node_of = |id: u32| -> Node {
        match locks.get(&id) {
            Some(l) if l.origin_site != 0 && family_size[&(l.kind, l.origin_site)] > 1 => {
                Node::Family(l.kind, l.origin_site)
            }
            _ => Node::Lock(id),
        }
    };
    // Rwlocks that someone write-locks (only those make a read wait).
    let written: BTreeSet<u32> = trace
        .counters
        .iter()
        .filter(|(_, c)| c.hdr.aux == MODE_EXCLUSIVE && c.engagements + c.try_failures > 0)
        .map(|(_, c)| c.lock_id)
        .collect();
    let mut arcs: BTreeMap<(Node, Node), Arc> = BTreeMap::new();
    for (thread, e) in &trace.edges {
        if e.hdr.aux & EDGE_TRY != 0 {
            continue; // could not have blocked
        }
        if e.hdr.aux & EDGE_TO_SHARED != 0 && !written.contains(&e.to_lock) {
            continue; // a read lock nobody write-locks never waits
        }
        let tid = trace.threads.get(*thread).map_or(0, |t| t.record.tid);
        let addr = |id: u32| locks.get(&id).map_or(0, |l| l.address);
        arcs.entry((node_of(e.from_lock), node_of(e.to_lock)))
            .or_default()
            .edges
            .push(RawEdge {
                tid,
                record: *e,
                from_addr: addr(e.from_lock),
                to_addr: addr(e.to_lock),
            });
    }
    let mut out = LockOrder::default();
    // A family among itself: a cycle only if both address orders occur.
    for ((from, to), arc) in &arcs {
        if from != to {
            continue;
        }
        let up = arc.edges.iter().filter(|e| e.from_addr < e.to_addr);
        let down = arc.edges.iter().filter(|e| e.from_addr > e.to_addr);
        let (Some(up), Some(down)) = (
            up.min_by_key(|e| e.first_ns()),
            down.min_by_key(|e| e.first_ns()),
        ) else {
            continue;
        };
        let cycle = Cycle {
            edges: vec![cycle_edge(&[*up]), cycle_edge(&[*down])],
            family_inversion: true,
        };
        if gate_of(&[up.record.gates, down.record.gates]).is_some() {
            out.gated += 1;
        } else {
            out.cycles.push(cycle);
        }
    }
    // Cycles between distinct nodes.
    let nodes: Vec<Node> = arcs
        .keys()
        .flat_map(|(a, b)| [*a, *b])
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let index: HashMap<Node, usize> = nodes.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let mut succ: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    for (from, to) in arcs.keys() {
        if from != to {
            succ[index[from]].push(index[to]);
        }
    }
    for component in strongly_connected(&succ) {
        if component.len() < 2 {
            continue;
        }
        let (cycles, truncated) = simple_cycles(&succ, &component);
        out.truncated |= truncated;
        for cycle in cycles {
            let arcs_in_order: Vec<&Arc> = (0..cycle.len())
                .map(|i| &arcs[&(nodes[cycle[i]], nodes[cycle[(i + 1) % cycle.len()]])])
                .collect();
            let gates: Vec<[u32; EDGE_GATES]> = arcs_in_order
                .iter()
                .map(|arc| common_gates(&arc.edges))
                .collect();
            if gate_of(&gates).is_some() {
                out.gated += 1;
                continue;
            }
            out.cycles.push(Cycle {
                edges: arcs_in_order.iter().map(|a| cycle_edge(&a.edges)).collect(),
                family_inversion: false,
            });
        }
    }
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
        .min_by_key(|e| e.first_ns())
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

/// Simple cycles within one component, each starting at its smallest node,
/// up to [`CYCLES_PER_COMPONENT`] of length up to [`MAX_CYCLE_LEN`];
/// `true` if there were more.
fn simple_cycles(succ: &[Vec<usize>], component: &[usize]) -> (Vec<Vec<usize>>, bool) {
    let members: BTreeSet<usize> = component.iter().copied().collect();
    let mut cycles = Vec::new();
    let mut truncated = false;
    for &start in &members {
        // Cycles through `start` among members not smaller than it (each
        // cycle is then found once, from its smallest node).
        let mut path = vec![start];
        let mut iters = vec![0usize];
        while let Some(&v) = path.last() {
            let at = iters.len() - 1;
            let Some(&w) = succ[v].get(iters[at]) else {
                path.pop();
                iters.pop();
                continue;
            };
            iters[at] += 1;
            if !members.contains(&w) || w < start {
                continue;
            }
            if w == start {
                if cycles.len() == CYCLES_PER_COMPONENT {
                    truncated = true;
                    return (cycles, truncated);
                }
                cycles.push(path.clone());
            } else if !path.contains(&w) && path.len() < MAX_CYCLE_LEN {
                path.push(w);
                iters.push(0);
            } else if path.len() >= MAX_CYCLE_LEN {
                truncated = true;
            }
        }
    }
    (cycles, truncated)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let (cycles, truncated) = simple_cycles(&succ, &[0, 1, 2]);
        assert_eq!(cycles, vec![vec![0, 1, 2]]);
        assert!(!truncated);
        // Two cycles sharing a node: 0 <-> 1, 1 <-> 2.
        let succ = vec![vec![1], vec![0, 2], vec![1]];
        let (cycles, _) = simple_cycles(&succ, &[0, 1, 2]);
        assert_eq!(cycles, vec![vec![0, 1], vec![1, 2]]);
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
