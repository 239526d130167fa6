//! How evenly a lock's threads engage it, and the state of a line that
//! follows: what locks, data and the process's sites are judged by.

use crate::model::{STATUS_APPARENTLY_SUITABLE, STATUS_SUITABLE, STATUS_UNSUITABLE};

/// Sharing ratio from per-thread engagement counts: the share of
/// engagements made by threads other than the top one, normalised by the
/// most that share can be for that many threads (1 - 1/N), so a lock its N
/// threads engage evenly is 1.0 for any N, and a lock of one thread is 0.
pub fn sharing_ratio(per_thread: impl IntoIterator<Item = u64>) -> f64 {
    let (mut total, mut top, mut threads) = (0u64, 0u64, 0u64);
    for n in per_thread.into_iter().filter(|&n| n > 0) {
        total = total.saturating_add(n);
        top = top.max(n);
        threads += 1;
    }
    if threads < 2 {
        return 0.0;
    }
    let others = (total - top) as f64 / total as f64;
    let most = 1.0 - 1.0 / threads as f64;
    (others / most).min(1.0)
}

/// A line's state, as the lock-suitability seed defines the three: each
/// engagement that caused a task switch with a ratio at or above the
/// threshold *qualifies*; any other marks the line apparently unsuitable;
/// a qualifying engagement of a line so marked makes it definitely
/// suitable. Judged over the whole run, not in the order the engagements
/// came:
/// - `apparently-unsuitable`: no engagement qualified;
/// - `definitely-suitable`: some did, and some did not;
/// - `apparently-suitable`: every engagement qualified (nothing marked it
///   apparently unsuitable, nor showed more).
pub fn line_state(engagements: u64, qualifying: u64) -> &'static str {
    if qualifying == 0 {
        STATUS_UNSUITABLE
    } else if qualifying >= engagements {
        STATUS_APPARENTLY_SUITABLE
    } else {
        STATUS_SUITABLE
    }
}

/// A line's state by its sharing ratio (one figure for all its
/// engagements): those that caused a task switch qualify when the ratio
/// is at or above the threshold.
pub fn site_status(
    engagements: u64,
    task_switches: u64,
    ratio: f64,
    threshold: f64,
) -> &'static str {
    let qualifying = if ratio >= threshold { task_switches } else { 0 };
    line_state(engagements, qualifying)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sharing_ratio_matches_the_definition() {
        assert_eq!(sharing_ratio([100]), 0.0);
        assert_eq!(sharing_ratio([25, 25, 25, 25]), 1.0, "even: 1.0 for any N");
        assert_eq!(sharing_ratio([50, 50]), 1.0);
        assert!((sharing_ratio([90, 10]) - 0.2).abs() < 1e-9);
        assert_eq!(
            sharing_ratio([100, 0, 0]),
            0.0,
            "threads that engaged nothing"
        );
        assert_eq!(sharing_ratio([]), 0.0);
    }

    #[test]
    fn the_three_line_states_of_the_seed() {
        // No engagement switched, or the ratio is below the threshold.
        assert_eq!(site_status(10, 0, 0.9, 0.3), STATUS_UNSUITABLE);
        assert_eq!(site_status(10, 10, 0.2, 0.3), STATUS_UNSUITABLE);
        // Some engagements qualified, some marked it apparently unsuitable.
        assert_eq!(site_status(10, 1, 0.3, 0.3), STATUS_SUITABLE);
        // Every engagement qualified: apparently suitable, no more.
        assert_eq!(site_status(10, 10, 0.3, 0.3), STATUS_APPARENTLY_SUITABLE);
        assert_eq!(line_state(0, 0), STATUS_UNSUITABLE);
    }
}
