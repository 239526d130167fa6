//! Processors standing idle while threads wait: the cost of contention.
//! From the timeline: at each moment a thread counts as running unless it
//! is in a recorded blocking period (so a thread blocked for less than
//! `block_min_us` in a call counts as running), the process's running
//! threads occupy at most all of its processors, and the rest are idle.
//! Other processes on the machine are not seen. Integrated over the time
//! when at least one thread waited on synchronisation (class `sync`), and
//! over each lock's waits.

use crate::model::*;
use rustc_hash::FxHashMap;

/// Idle processors as a step function of time: from `times[i]` to
/// `times[i + 1]`, `idle[i]` processors were idle; `integral[i]` is the
/// idle processor-nanoseconds before `times[i]`.
struct Steps {
    times: Vec<u64>,
    idle: Vec<u64>,
    integral: Vec<u128>,
}

impl Steps {
    /// Idle processor-nanoseconds from `start` to `end`.
    fn over(&self, start: u64, end: u64) -> u128 {
        self.at(end).saturating_sub(self.at(start))
    }

    fn at(&self, t: u64) -> u128 {
        let i = self.times.partition_point(|&x| x <= t);
        if i == 0 {
            return 0;
        }
        let i = i - 1;
        self.integral[i] + u128::from(self.idle[i]) * u128::from(t - self.times[i])
    }
}

pub fn build(timeline: &Timeline, cpus: u32) -> Option<IdleWhileWaiting> {
    if cpus == 0 || timeline.lanes.is_empty() {
        return None;
    }
    let sync = timeline.classes.iter().position(|c| c == "sync");
    // (time, alive delta, blocked delta, waiting-on-sync delta)
    let mut changes: Vec<(u64, i64, i64, i64)> = Vec::new();
    for lane in &timeline.lanes {
        changes.push((lane.start_ns, 1, 0, 0));
        changes.push((lane.end_ns.max(lane.start_ns), -1, 0, 0));
    }
    for p in &timeline.periods {
        let waits = i64::from(Some(p.class as usize) == sync);
        changes.push((p.start_ns, 0, 1, waits));
        changes.push((p.end_ns, 0, -1, -waits));
    }
    changes.sort_unstable_by_key(|c| c.0);
    let (mut alive, mut blocked, mut waiting) = (0i64, 0i64, 0i64);
    let mut steps = Steps {
        times: Vec::new(),
        idle: Vec::new(),
        integral: Vec::new(),
    };
    let mut waiting_at: Vec<bool> = Vec::new();
    let mut total = 0u128;
    let mut i = 0;
    while i < changes.len() {
        let t = changes[i].0;
        while i < changes.len() && changes[i].0 == t {
            alive += changes[i].1;
            blocked += changes[i].2;
            waiting += changes[i].3;
            i += 1;
        }
        if let (Some(&last), Some(&idle)) = (steps.times.last(), steps.idle.last()) {
            total += u128::from(idle) * u128::from(t - last);
        }
        let running = (alive - blocked).clamp(0, i64::from(cpus)) as u64;
        steps.times.push(t);
        steps.idle.push(u64::from(cpus) - running);
        steps.integral.push(total);
        waiting_at.push(waiting > 0);
    }
    // The time at least one thread waited on synchronisation, and the idle
    // processor-time then.
    let (mut wait_ns, mut idle_while_waiting) = (0u64, 0u128);
    let spans = steps.times.windows(2).zip(&steps.idle).zip(&waiting_at);
    for ((pair, &idle), _) in spans.filter(|(_, &waiting)| waiting) {
        let dt = pair[1] - pair[0];
        wait_ns += dt;
        idle_while_waiting += u128::from(idle) * u128::from(dt);
    }
    // Per lock: the idle processors over its waits.
    let mut by_lock: FxHashMap<LockId, (u64, u128)> = FxHashMap::default();
    for p in &timeline.periods {
        if let Some(lock) = p.lock {
            let entry = by_lock.entry(lock).or_default();
            entry.0 += p.end_ns - p.start_ns;
            entry.1 += steps.over(p.start_ns, p.end_ns);
        }
    }
    let mut locks: Vec<LockIdle> = by_lock
        .into_iter()
        .filter(|(_, (ns, _))| *ns > 0)
        .map(|(lock, (ns, idle))| LockIdle {
            lock,
            wait_ns: ns,
            idle_processors: idle as f64 / ns as f64,
        })
        .collect();
    locks.sort_by(|a, b| b.wait_ns.cmp(&a.wait_ns).then(a.lock.cmp(&b.lock)));
    Some(IdleWhileWaiting {
        cpus,
        wait_ns,
        idle_processors: if wait_ns == 0 {
            0.0
        } else {
            idle_while_waiting as f64 / wait_ns as f64
        },
        by_lock: locks,
    })
}
