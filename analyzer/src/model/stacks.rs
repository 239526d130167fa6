//! Waits and engagements by call stack, under a chosen weight: the waiting
//! call tree in the model, and the stacks the folded, flame-graph and
//! pprof renderers draw. Everything here derives from the model's
//! blocking stacks (every recorded blocking period, lock waits included)
//! and sites (every line that engaged a lock, with its counters).

use crate::model::{BlockingStack, Frame, Process, TreeNode};

/// What a stack's value measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Weight {
    /// Time blocked (ns): contended lock waits and every recorded blocking
    /// period (sleeps, I/O, joins …), at the blocking call.
    Wait,
    /// Time locks were held (ns), at the line that took them.
    Hold,
    /// Contended acquisitions, at their line.
    Contentions,
    /// Acquisitions, at their line.
    Acquisitions,
}

impl Weight {
    /// What the value counts, for titles and units.
    pub fn unit(self) -> &'static str {
        match self {
            Weight::Wait | Weight::Hold => "ns",
            Weight::Contentions => "contentions",
            Weight::Acquisitions => "acquisitions",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Weight::Wait => "wait",
            Weight::Hold => "hold",
            Weight::Contentions => "contentions",
            Weight::Acquisitions => "acquisitions",
        }
    }
}

/// One call stack and its figures.
pub struct Weighted<'a> {
    /// Innermost first, as recorded.
    pub frames: &'a [Frame],
    /// The blocking call itself (`pthread_mutex_lock`, `read`, …), when
    /// the weight is about blocking.
    pub leaf: Option<&'a str>,
    /// Its blocking class, when the weight is about blocking.
    pub class: Option<&'a str>,
    /// Occurrences (waits, or engagements).
    pub count: u64,
    /// The weight's value.
    pub value: u64,
    /// The longest one (waits only; 0 otherwise).
    pub max: u64,
}

/// The process's stacks under `weight`, leaving out those worth nothing.
pub fn weighted(p: &Process, weight: Weight) -> Vec<Weighted<'_>> {
    let stacks = match weight {
        Weight::Wait => blocking(&p.blocking_stacks),
        _ => p
            .sites
            .iter()
            .map(|s| Weighted {
                frames: &s.call_chain,
                leaf: None,
                class: None,
                count: s.engagements,
                value: match weight {
                    Weight::Hold => s.hold_ns,
                    Weight::Contentions => s.contended,
                    _ => s.engagements,
                },
                max: 0,
            })
            .collect(),
    };
    stacks.into_iter().filter(|s| s.value > 0).collect()
}

fn blocking(stacks: &[BlockingStack]) -> Vec<Weighted<'_>> {
    stacks
        .iter()
        .filter(|s| s.total_ns > 0)
        .map(|s| Weighted {
            frames: &s.stack,
            leaf: Some(&s.api),
            class: Some(&s.class),
            count: s.count,
            value: s.total_ns,
            max: s.max_ns,
        })
        .collect()
}

/// A frame's name in a tree or a flame graph: its function, else where it
/// is (`module+0x…`, or its address).
pub fn frame_name(f: &Frame) -> String {
    match (&f.function, &f.offset) {
        (Some(function), _) => function.clone(),
        (None, Some(offset)) => offset.clone(),
        (None, None) => f.address.clone(),
    }
}

/// The waiting call tree: every blocking stack merged from the outermost
/// frame in, with count, total and longest wait per node; children most
/// time first.
pub fn wait_tree(stacks: &[BlockingStack]) -> Vec<TreeNode> {
    let mut roots: Vec<TreeNode> = Vec::new();
    for s in blocking(stacks) {
        let names = s
            .frames
            .iter()
            .rev()
            .map(frame_name)
            .chain(s.leaf.map(str::to_string));
        let mut level = &mut roots;
        for name in names {
            let at = match level.iter().position(|n| n.frame == name) {
                Some(at) => at,
                None => {
                    level.push(TreeNode {
                        frame: name,
                        count: 0,
                        total_ns: 0,
                        max_ns: 0,
                        children: Vec::new(),
                    });
                    level.len() - 1
                }
            };
            let node = &mut level[at];
            node.count += s.count;
            node.total_ns += s.value;
            node.max_ns = node.max_ns.max(s.max);
            level = &mut node.children;
        }
    }
    sort(&mut roots);
    roots
}

fn sort(nodes: &mut [TreeNode]) {
    nodes.sort_by(|a, b| {
        b.total_ns
            .cmp(&a.total_ns)
            .then_with(|| a.frame.cmp(&b.frame))
    });
    for n in nodes {
        sort(&mut n.children);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(function: &str) -> Frame {
        Frame {
            function: Some(function.to_string()),
            file: None,
            line: None,
            path: None,
            address: "0x1".to_string(),
            module: None,
            offset: None,
        }
    }

    #[test]
    fn stacks_merge_from_the_outermost_frame() {
        let mut stacks = Vec::new();
        for (inner, total, max) in [("a", 30, 20), ("b", 10, 10)] {
            stacks.push(BlockingStack {
                api: "pthread_mutex_lock".into(),
                class: "sync".into(),
                line: inner.into(),
                count: 2,
                total_ns: total,
                max_ns: max,
                threads: vec![1],
                stack: vec![frame(inner), frame("main")],
            });
        }
        let tree = wait_tree(&stacks);
        assert_eq!(tree.len(), 1);
        let main = &tree[0];
        assert_eq!(
            (main.frame.as_str(), main.count, main.total_ns, main.max_ns),
            ("main", 4, 40, 20)
        );
        let kids: Vec<(&str, u64)> = main
            .children
            .iter()
            .map(|n| (n.frame.as_str(), n.total_ns))
            .collect();
        assert_eq!(kids, vec![("a", 30), ("b", 10)]);
        assert_eq!(main.children[0].children[0].frame, "pthread_mutex_lock");
    }
}
