//! The critical path in a diff: how the path's length changed, and per
//! lock how its share of the path changed beside how its waits did. A lock
//! whose waits grew off the path did not make the run slower; one whose
//! share of the path grew did, by about that much. Locks are ranked by
//! the change of their share of the path.

use crate::input::compare::Summary;
use serde::Serialize;

#[derive(Clone, Debug, Serialize)]
pub struct PathDiff {
    /// The path's length: the base runs' median and the current run's.
    pub base_length_ns: u64,
    pub length_ns: u64,
    pub length_change_ns: i64,
    /// Locks whose waits or share of the path changed, most grown share
    /// of the path first.
    pub locks: Vec<PathLockChange>,
}

#[derive(Clone, Debug, Serialize)]
pub struct PathLockChange {
    pub lock: String,
    /// Its waits and holds on the path: base median, current, change.
    pub base_path_ns: u64,
    pub path_ns: u64,
    pub path_change_ns: i64,
    /// All its waits, on the path or not: the change of the median.
    pub wait_change_ns: i64,
    /// On the path in neither the base runs (median) nor the current run.
    pub off_path: bool,
}

fn med(values: impl Iterator<Item = u64>) -> u64 {
    let v: Vec<f64> = values.map(|n| n as f64).collect();
    crate::base::stats::median(&v).round() as u64
}

fn change(current: u64, base: u64) -> i64 {
    current as i64 - base as i64
}

/// None when the current run's report has no critical path.
pub fn diff(base: &[Summary], current: &Summary) -> Option<PathDiff> {
    if current.path_length_ns == 0 {
        return None;
    }
    let base_length_ns = med(base.iter().map(|s| s.path_length_ns));
    let mut locks: Vec<PathLockChange> = current
        .locks
        .iter()
        .map(|(id, cur)| {
            let of = |f: fn(&crate::input::compare::Figures) -> u64| {
                med(base.iter().map(|s| s.locks.get(id).map_or(0, f)))
            };
            let base_path_ns = of(|f| f.path_ns);
            let base_wait = of(|f| f.wait_ns);
            PathLockChange {
                lock: id.clone(),
                base_path_ns,
                path_ns: cur.path_ns,
                path_change_ns: change(cur.path_ns, base_path_ns),
                wait_change_ns: change(cur.wait_ns, base_wait),
                off_path: cur.path_ns == 0 && base_path_ns == 0,
            }
        })
        .filter(|l| l.path_change_ns != 0 || l.wait_change_ns != 0)
        .collect();
    locks.sort_by(|a, b| {
        (b.path_change_ns, b.wait_change_ns)
            .cmp(&(a.path_change_ns, a.wait_change_ns))
            .then_with(|| a.lock.cmp(&b.lock))
    });
    Some(PathDiff {
        base_length_ns,
        length_ns: current.path_length_ns,
        length_change_ns: change(current.path_length_ns, base_length_ns),
        locks,
    })
}
