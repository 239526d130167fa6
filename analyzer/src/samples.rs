//! Duration samples in bounded memory: the first [`EXACT_SAMPLES`] of each
//! lock, site or condition variable are kept as they are, so percentiles are
//! exact (nearest rank); past that they move into a histogram with two
//! significant digits (values under 256 ns exact, others within 1 %). Count,
//! total, average and maximum stay exact whatever the number. A trace of a
//! hundred million events thus costs at most a histogram per object.

use crate::model::DurationStats;
use hdrhistogram::Histogram;
use rustc_hash::FxHashMap;

/// Samples kept exactly per key (64 KiB).
pub const EXACT_SAMPLES: usize = 8192;

#[derive(Default)]
pub struct Samples {
    count: u64,
    total: u64,
    max: u64,
    exact: Vec<u64>,
    histogram: Option<Box<Histogram<u64>>>,
}

impl Samples {
    #[inline]
    pub fn push(&mut self, value: u64) {
        self.count += 1;
        self.total = self.total.saturating_add(value);
        self.max = self.max.max(value);
        match &mut self.histogram {
            Some(h) => h.saturating_record(value),
            None if self.exact.len() < EXACT_SAMPLES => self.exact.push(value),
            None => {
                self.switch_to_histogram();
                if let Some(h) = &mut self.histogram {
                    h.saturating_record(value);
                }
            }
        }
    }

    fn switch_to_histogram(&mut self) {
        // Two significant digits from 1 ns to 2^50 ns (13 days), about 44 KiB;
        // longer values are clamped (max_ns keeps the true one). Valid
        // bounds, so this cannot fail.
        let Ok(mut h) = Histogram::<u64>::new_with_bounds(1, 1 << 50, 2) else {
            return;
        };
        for &v in &self.exact {
            h.saturating_record(v);
        }
        self.exact = Vec::new();
        self.histogram = Some(Box::new(h));
    }

    /// Adds `other`'s samples (several recorded sites can be one line).
    pub fn merge(&mut self, other: Samples) {
        self.count += other.count;
        self.total = self.total.saturating_add(other.total);
        self.max = self.max.max(other.max);
        if self.histogram.is_none()
            && other.histogram.is_none()
            && self.exact.len() + other.exact.len() <= EXACT_SAMPLES
        {
            self.exact.extend(other.exact);
            return;
        }
        if self.histogram.is_none() {
            self.switch_to_histogram();
        }
        if let Some(h) = &mut self.histogram {
            for v in other.exact {
                h.saturating_record(v);
            }
            if let Some(o) = other.histogram {
                let _ = h.add(&*o);
            }
        }
    }

    /// Count, total, average, max, p50 and p99 (nearest rank).
    pub fn stats(mut self) -> Option<DurationStats> {
        if self.count == 0 {
            return None;
        }
        let (p50, p99) = match &self.histogram {
            Some(h) => (
                h.value_at_quantile(0.50).min(self.max),
                h.value_at_quantile(0.99).min(self.max),
            ),
            None => {
                self.exact.sort_unstable();
                let n = self.exact.len();
                let rank = |p: f64| self.exact[((p * n as f64).ceil() as usize).clamp(1, n) - 1];
                (rank(0.50), rank(0.99))
            }
        };
        Some(DurationStats {
            count: self.count,
            total_ns: self.total,
            avg_ns: self.total / self.count,
            max_ns: self.max,
            p50_ns: p50,
            p99_ns: p99,
        })
    }
}

/// Values keyed by a raw id from the trace: a vector for the small dense
/// ids the shim hands out, a map for anything else (a damaged trace's ids
/// must not size a vector).
pub struct ById<T> {
    dense: Vec<Option<T>>,
    sparse: FxHashMap<u32, T>,
}

const DENSE_IDS: u32 = 1 << 20;

impl<T> Default for ById<T> {
    fn default() -> Self {
        Self {
            dense: Vec::new(),
            sparse: FxHashMap::default(),
        }
    }
}

impl<T: Default> ById<T> {
    #[inline]
    pub fn entry(&mut self, id: u32) -> &mut T {
        if id < DENSE_IDS {
            let i = id as usize;
            if i >= self.dense.len() {
                self.dense.resize_with(i + 1, || None);
            }
            self.dense[i].get_or_insert_with(T::default)
        } else {
            self.sparse.entry(id).or_default()
        }
    }
}

impl<T> ById<T> {
    pub fn into_entries(self) -> impl Iterator<Item = (u32, T)> {
        self.dense
            .into_iter()
            .enumerate()
            .filter_map(|(i, v)| v.map(|v| (i as u32, v)))
            .chain(self.sparse)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_nearest_rank_while_exact() {
        let mut s = Samples::default();
        for v in 1..=100 {
            s.push(v);
        }
        let s = s.stats().unwrap();
        assert_eq!(
            (s.count, s.total_ns, s.avg_ns, s.max_ns),
            (100, 5050, 50, 100)
        );
        assert_eq!((s.p50_ns, s.p99_ns), (50, 99));
        assert!(Samples::default().stats().is_none());
    }

    #[test]
    fn past_the_exact_limit_percentiles_stay_within_one_percent() {
        let mut s = Samples::default();
        let n = 10 * EXACT_SAMPLES as u64;
        for i in 1..=n {
            s.push(i * 1000);
        }
        let s = s.stats().unwrap();
        assert_eq!(s.count, n);
        assert_eq!(s.total_ns, 1000 * n * (n + 1) / 2, "the total stays exact");
        assert_eq!(s.max_ns, n * 1000);
        let near = |got: u64, want: u64| got.abs_diff(want) * 100 <= want;
        assert!(near(s.p50_ns, n / 2 * 1000), "p50 {}", s.p50_ns);
        assert!(near(s.p99_ns, n * 99 / 100 * 1000), "p99 {}", s.p99_ns);
    }

    #[test]
    fn merging_keeps_totals_and_switches_to_a_histogram_when_needed() {
        let mut a = Samples::default();
        let mut b = Samples::default();
        for i in 0..EXACT_SAMPLES as u64 {
            a.push(10);
            b.push(1000 + i);
        }
        a.merge(b);
        let s = a.stats().unwrap();
        assert_eq!(s.count, 2 * EXACT_SAMPLES as u64);
        assert_eq!(s.max_ns, 1000 + EXACT_SAMPLES as u64 - 1);
        assert_eq!(s.p50_ns, 10);
    }

    #[test]
    fn ids_far_apart_do_not_size_a_vector() {
        let mut m: ById<u64> = ById::default();
        *m.entry(3) += 1;
        *m.entry(u32::MAX) += 2;
        let mut all: Vec<(u32, u64)> = m.into_entries().collect();
        all.sort();
        assert_eq!(all, vec![(3, 1), (u32::MAX, 2)]);
    }
}
