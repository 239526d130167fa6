//! The text report's "why waits ended" table: the locks, condition
//! variables and sites where not every wait simply got what it waited for.

use super::grid::{key, words, Cell, Grid};
use super::sections::{section, TABLE_ROWS};
use crate::model::*;

/// The reasons that are the normal end of a wait.
fn usual(reason: &str) -> bool {
    matches!(
        reason,
        "acquired-after-wait" | "notified-by-signal" | "notified-by-broadcast"
    )
}

fn breakdown(reasons: &[ReasonCount]) -> Option<String> {
    if reasons.iter().all(|r| usual(&r.reason)) {
        return None;
    }
    let parts: Vec<String> = reasons
        .iter()
        .map(|r| format!("{} {}", r.reason, r.count))
        .collect();
    Some(parts.join(", "))
}

pub fn table(out: &mut String, p: &Process, width: usize) {
    let mut rows: Vec<(Cell, String)> = Vec::new();
    for lock in &p.locks {
        if let Some(b) = lock.reasons.as_deref().and_then(|r| breakdown(&r.0)) {
            rows.push((Cell::id(lock.id.to_string()), b));
        }
    }
    for cond in &p.conds {
        if let Some(b) = breakdown(&cond.reasons) {
            rows.push((Cell::id(cond.id.clone()), b));
        }
    }
    for site in &p.sites {
        if let Some(b) = breakdown(&site.reasons) {
            rows.push((Cell::id(site.id.to_string()), b));
        }
    }
    if rows.is_empty() {
        return;
    }
    let hidden = rows.len().saturating_sub(TABLE_ROWS);
    let mut grid = Grid::new(vec![
        key("lock, condition or site"),
        words("why its waits ended", 0),
    ]);
    for (id, why) in rows.into_iter().take(TABLE_ROWS) {
        grid.row(vec![id, why.into()]);
    }
    let title = "Why waits ended, where not all got what they waited for (try-failed: trylocks that found the lock taken)";
    section(out, title, &grid, hidden, "rows", width);
}
