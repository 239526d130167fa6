//! Long holds: what was seen, and what the holder did meanwhile (ran, or
//! was off the CPU) decides the advice.

use super::*;

/// What the holder did during a long hold, from the waiter's sample: it
/// ran for at least half of it, or surely for less (see `HolderRan`), or
/// the sample cannot tell (or there was none).
pub(super) fn holder_state(hold: Option<&LongHold>) -> HolderState {
    match hold.and_then(|h| h.holder_ran) {
        Some(r) => HolderState {
            state: if r.ran_ns.saturating_mul(2) >= r.of_ns {
                "running"
            } else if r.ran_max_ns.saturating_mul(2) < r.of_ns {
                "off-cpu"
            } else {
                "unknown"
            },
            ran_ns: Some(r.ran_ns),
            ran_max_ns: Some(r.ran_max_ns),
            of_ns: Some(r.of_ns),
        },
        None => HolderState {
            state: "unknown",
            ran_ns: None,
            ran_max_ns: None,
            of_ns: None,
        },
    }
}

/// What to do about a long hold, by what its holder did: a holder that ran
/// had a long critical section; one off the CPU most of the time was
/// preempted or blocked holding the lock, and a shorter critical section
/// would not help. `blocked`: the holder made blocking calls holding it
/// (a `blocking-under-lock` finding), which explain its time off the CPU.
/// A `long-hold` finding's message: what was seen (`observed`, of `locks`
/// locks), then what the holder's state says to do.
/// `python`: the holder's line is Python code (`is_python_site`), whose
/// locks are what they are: no lock that hands over in turn to suggest.
pub fn long_hold_message(
    observed: &str,
    state: &HolderState,
    locks: usize,
    (blocked, python, lean): (bool, bool, bool),
) -> String {
    let sections = if locks == 1 {
        "the critical section"
    } else {
        "the critical sections"
    };
    format!(
        "{observed}; {}",
        long_hold_advice(state, sections, blocked, (python, lean))
    )
}

/// What helps a lock whose holders are preempted (no lock that hands
/// over in turn for Python code).
fn preemption_help(python: bool) -> &'static str {
    if python {
        "fewer threads than CPUs help"
    } else {
        "fewer threads than CPUs, or a lock that hands over in turn, help"
    }
}

fn long_hold_advice(
    state: &HolderState,
    sections: &str,
    blocked: bool,
    (python, lean): (bool, bool),
) -> String {
    let most = state.ran_max_ns.unwrap_or(0);
    match (state.state, state.ran_ns, state.of_ns) {
        ("off-cpu", Some(_), Some(of)) if blocked => format!(
            "but its holder ran on a CPU for at most {} of the {} a thread waited: it blocked holding the lock, in calls blocking-under-lock names; move them out of {sections}.",
            duration(most),
            duration(of)
        ),
        ("running", Some(ran), Some(of)) => format!(
            "its holder ran on a CPU for at least {} of the {} a thread waited: the critical section itself is long; shorten {sections} or move slow work out of it.",
            duration(ran),
            duration(of)
        ),
        ("off-cpu", Some(_), Some(of)) if lean => format!(
            "but its holder ran on a CPU for at most {} of the {} a thread waited, and was off the CPU the rest (preempted while holding the lock, or blocked in a call or a page fault): not a long critical section, and shortening {sections} would not help. Which it was, a lean trace does not see (a full one's blocking-under-lock names calls that blocked under a lock): if the holder slept or did I/O holding it, move that out of {sections}; if it was preempted, {}.",
            duration(most),
            duration(of),
            preemption_help(python)
        ),
        ("off-cpu", Some(_), Some(of)) => format!(
            "but its holder ran on a CPU for at most {} of the {} a thread waited, and was off the CPU the rest (preempted while holding the lock, or blocked in a call or a page fault): not a long critical section. Preemption of lock holders comes with more runnable threads than CPUs; {}, and shortening {sections} would not (where the holder slept or did I/O holding it, blocking-under-lock says so).",
            duration(most),
            duration(of),
            preemption_help(python)
        ),
        ("unknown", Some(ran), Some(of)) => format!(
            "its holder ran on a CPU for between {} and {} of the {} a thread waited (it may have run on after letting go before the waiter looked), so whether the critical section itself is long cannot be told: if the holder was preempted, shortening {sections} would not help.",
            duration(ran),
            duration(most),
            duration(of)
        ),
        _ => format!(
            "whether its holder ran all that time was not sampled (a holder preempted on a busy machine holds as long): if it ran, shorten {sections} or move slow work out of it."
        ),
    }
}

pub(super) fn long_hold(ev: &Evidence, group: Vec<LockId>) -> Finding {
    let first = ev.lock(group[0]);
    let longest = group
        .iter()
        .map(|&id| ev.lock(id))
        .max_by_key(|l| ev.longest(l))
        .unwrap_or(first);
    let hold = ev.long_holds.get(&longest.id);
    let state = holder_state(hold);
    let at_least = if hold.is_some_and(|h| h.at_least) {
        "at least "
    } else {
        ""
    };
    let observed = if group.len() == 1 && parks_one_thread(first) {
        // A waiting thread's own word: nobody holds it; the lock it stood
        // for (which one is not seen) was held by the thread that woke it.
        format!(
            "a lock was held for {at_least}{} at a stretch{} while another thread waited for it, parked on its own futex word {} (the lock library waits on the waiting thread's word, so which lock is not seen)",
            duration(ev.longest(first)),
            ev.holder(first),
            first.id,
        )
    } else if group.len() == 1 {
        format!(
            "{} {} was held for {at_least}{} at a stretch{} while another thread waited",
            first.kind,
            first.id,
            duration(ev.longest(first)),
            ev.holder(first),
        )
    } else if group.iter().all(|&id| parks_one_thread(ev.lock(id))) {
        format!(
            "{} threads waited, each parked on its own futex word ({}), for locks held for at least {} at a stretch (which locks is not seen); the longest, {}{}",
            group.len(),
            lock_list(&group, NAMED_IN_MESSAGE),
            duration(
                group
                    .iter()
                    .map(|&id| ev.longest(ev.lock(id)))
                    .min()
                    .unwrap_or(0)
            ),
            duration(ev.longest(longest)),
            ev.holder(longest),
        )
    } else {
        let shortest = group
            .iter()
            .map(|&id| ev.longest(ev.lock(id)))
            .min()
            .unwrap_or(0);
        format!(
            "{} {} of one family, {}, were each held for at least {} at a stretch while another thread waited; the longest, {} for {}{}",
            group.len(),
            kind_plural(first.kind),
            lock_list(&group, NAMED_IN_MESSAGE),
            duration(shortest),
            longest.id,
            duration(ev.longest(longest)),
            ev.holder(longest),
        )
    };
    // The holder's line, not the lock's first (which may be a waiter's).
    let site = hold
        .and_then(|h| h.site)
        .and_then(|s| ev.sites.get(s.index()))
        .or_else(|| ev.first_site(first));
    let python = site.is_some_and(is_python_site);
    let message = long_hold_message(&observed, &state, group.len(), (false, python, ev.lean));
    let mut finding = ev.finding(FINDING_LONG_HOLD, group, message);
    finding.holder = Some(state);
    finding.observed = observed;
    // The holder's line, not the lock's first (which may be a waiter's).
    if let Some(site) = hold.and_then(|h| h.site) {
        finding.sites = vec![site];
    }
    finding
}

/// A futex word one waiting thread parks on (parking_lot's, abseil's,
/// std's thread parker): no lock of the program, which nobody holds.
fn parks_one_thread(lock: &crate::model::Lock) -> bool {
    lock.kind == crate::model::LockKind::Futex
        && lock
            .rare
            .as_ref()
            .and_then(|r| r.futex.as_ref())
            .is_some_and(|f| f.per_thread)
}
