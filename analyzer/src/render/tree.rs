//! The text report's waiting call tree (`report --tree`): indented from
//! the outermost frame in, each node with its share of all the time
//! blocked, total, count and longest wait; nodes below `--tree-min` of the
//! total are left out, and the tree says how many.

use super::layout::width_of;
use crate::base::words::{count, duration};
use crate::model::{Process, TreeNode};

/// Deepest indentation before frames stop stepping right.
const MAX_INDENT: usize = 24;

pub fn section(out: &mut String, p: &Process, min_share: f64, width: usize) {
    let total: u64 = p.wait_tree.iter().map(|n| n.total_ns).sum();
    if total == 0 {
        return;
    }
    out.push_str(&super::layout::wrap(
        &format!(
            "Waiting call tree: {} blocked in all; share, total, waits, longest; nodes under {:.1}% left out",
            duration(total),
            min_share * 100.0
        ),
        width,
        "",
        "",
    ));
    let mut hidden = 0usize;
    for n in &p.wait_tree {
        node(out, n, 0, (total, min_share), width, &mut hidden);
    }
    if hidden > 0 {
        let line = format!(
            "   … and {} below the cut (--tree-min 0 shows every one)",
            count(hidden as u64, "node", "nodes")
        );
        out.push_str(&super::layout::wrap(&line, width, "", "     "));
    }
    out.push('\n');
}

fn node(
    out: &mut String,
    n: &TreeNode,
    depth: usize,
    (total, min_share): (u64, f64),
    width: usize,
    hidden: &mut usize,
) {
    let share = n.total_ns as f64 / total as f64;
    if share < min_share {
        *hidden += 1 + descendants(n);
        return;
    }
    let figures = format!(
        "{:>6.1}% {:>9} {:>7} {:>9}  ",
        share * 100.0,
        duration(n.total_ns),
        n.count,
        duration(n.max_ns)
    );
    let indent = " ".repeat(depth.min(MAX_INDENT));
    let room = width
        .saturating_sub(width_of(&figures) + indent.len())
        .max(12);
    let mut frame = n.frame.clone();
    if width_of(&frame) > room {
        frame = frame
            .chars()
            .take(room.saturating_sub(1))
            .collect::<String>()
            + "…";
    }
    out.push_str(&format!("{figures}{indent}{frame}\n"));
    for c in &n.children {
        node(out, c, depth + 1, (total, min_share), width, hidden);
    }
}

fn descendants(n: &TreeNode) -> usize {
    n.children.iter().map(|c| 1 + descendants(c)).sum()
}
