//! Duration samples in bounded memory: the first [`EXACT_SAMPLES`] of each
//! lock, site or condition variable are kept as they are, so percentiles are
//! exact (nearest rank); past that they move into a histogram with two
//! significant digits (values under 256 ns exact, others within 1 %). Count,
//! total, average and maximum stay exact whatever the number. A trace of a
//! hundred million events thus costs at most a histogram per object.
//!
//! A trace of a million locks has a handful of samples for each: the first
//! [`INLINE_SAMPLES`] live inside the value itself (no allocation), storage
//! grows with what was recorded, never ahead of it, and durations under
//! 4.3 s (nearly all) take 4 bytes each, not 8.

use crate::model::DurationStats;
use hdrhistogram::Histogram;
use rustc_hash::FxHashMap;
use smallvec::SmallVec;

/// Samples kept exactly per key (32 KiB at most, 64 KiB if some are 4.3 s
/// or longer).
pub const EXACT_SAMPLES: usize = 8192;
/// Samples held without a heap allocation.
pub const INLINE_SAMPLES: usize = 8;

pub enum Samples {
    /// Every value so far, each under 2^32 ns (count, total and maximum
    /// follow from them).
    Narrow(SmallVec<[u32; INLINE_SAMPLES]>),
    /// Every value so far, some of them 2^32 ns or longer.
    Wide(Vec<u64>),
    /// Past [`EXACT_SAMPLES`].
    Summary(Box<Summary>),
}

pub struct Summary {
    count: u64,
    total: u64,
    max: u64,
    histogram: Histogram<u64>,
}

impl Default for Samples {
    fn default() -> Self {
        Samples::Narrow(SmallVec::new())
    }
}

impl Summary {
    fn of(values: impl Iterator<Item = u64>) -> Option<Box<Summary>> {
        // Two significant digits from 1 ns to 2^50 ns (13 days), about 44 KiB;
        // longer values are clamped (max_ns keeps the true one). Valid
        // bounds, so this cannot fail.
        let histogram = Histogram::<u64>::new_with_bounds(1, 1 << 50, 2).ok()?;
        let mut s = Box::new(Summary {
            count: 0,
            total: 0,
            max: 0,
            histogram,
        });
        for v in values {
            s.record(v);
        }
        Some(s)
    }

    #[inline]
    fn record(&mut self, value: u64) {
        self.count += 1;
        self.total = self.total.saturating_add(value);
        self.max = self.max.max(value);
        self.histogram.saturating_record(value);
    }
}

impl Samples {
    fn len(&self) -> usize {
        match self {
            Samples::Narrow(v) => v.len(),
            Samples::Wide(v) => v.len(),
            Samples::Summary(s) => s.count as usize,
        }
    }

    /// The exact values (empty for a summary).
    fn values(&self) -> Box<dyn Iterator<Item = u64> + '_> {
        match self {
            Samples::Narrow(v) => Box::new(v.iter().map(|&x| u64::from(x))),
            Samples::Wide(v) => Box::new(v.iter().copied()),
            Samples::Summary(_) => Box::new(std::iter::empty()),
        }
    }

    #[inline]
    pub fn push(&mut self, value: u64) {
        match self {
            Samples::Summary(s) => s.record(value),
            Samples::Narrow(v) if v.len() < EXACT_SAMPLES => match u32::try_from(value) {
                Ok(narrow) => v.push(narrow),
                Err(_) => {
                    let mut wide: Vec<u64> = v.iter().map(|&x| u64::from(x)).collect();
                    wide.push(value);
                    *self = Samples::Wide(wide);
                }
            },
            Samples::Wide(v) if v.len() < EXACT_SAMPLES => v.push(value),
            _ => {
                if let Some(mut s) = Summary::of(self.values()) {
                    s.record(value);
                    *self = Samples::Summary(s);
                }
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Adds `other`'s samples (several recorded sites can be one line; the
    /// locks of a family are pooled).
    pub fn merge(&mut self, other: &Samples) {
        if !matches!(self, Samples::Summary(_)) && self.len() + other.len() > EXACT_SAMPLES {
            match Summary::of(self.values()) {
                Some(s) => *self = Samples::Summary(s),
                None => return,
            }
        }
        match (&mut *self, other) {
            (Samples::Summary(mine), Samples::Summary(theirs)) => {
                mine.count += theirs.count;
                mine.total = mine.total.saturating_add(theirs.total);
                mine.max = mine.max.max(theirs.max);
                let _ = mine.histogram.add(&theirs.histogram);
            }
            (Samples::Summary(mine), _) => {
                for v in other.values() {
                    mine.record(v);
                }
            }
            (_, Samples::Summary(theirs)) => {
                if let Some(mut s) = Summary::of(self.values()) {
                    s.count += theirs.count;
                    s.total = s.total.saturating_add(theirs.total);
                    s.max = s.max.max(theirs.max);
                    let _ = s.histogram.add(&theirs.histogram);
                    *self = Samples::Summary(s);
                }
            }
            (Samples::Narrow(mine), Samples::Narrow(theirs)) => mine.extend_from_slice(theirs),
            (mine, _) => {
                // At least one side is wide.
                let mut wide: Vec<u64> = mine.values().collect();
                wide.extend(other.values());
                *mine = Samples::Wide(wide);
            }
        }
    }

    /// Count, total, average, max, p50 and p99 (nearest rank while exact).
    /// Sorts the exact values in place.
    pub fn stats(&mut self) -> Option<DurationStats> {
        fn exact<T: Copy + Ord + Into<u64>>(v: &mut [T]) -> Option<DurationStats> {
            if v.is_empty() {
                return None;
            }
            v.sort_unstable();
            let n = v.len();
            let rank = |p: f64| v[((p * n as f64).ceil() as usize).clamp(1, n) - 1].into();
            Some(DurationStats {
                count: n as u64,
                total_ns: v.iter().fold(0u64, |t, &x| t.saturating_add(x.into())),
                max_ns: v[n - 1].into(),
                p50_ns: rank(0.50),
                p99_ns: rank(0.99),
            })
        }
        match self {
            Samples::Narrow(v) => exact(v),
            Samples::Wide(v) => exact(v),
            Samples::Summary(s) if s.count == 0 => None,
            Samples::Summary(s) => Some(DurationStats {
                count: s.count,
                total_ns: s.total,
                max_ns: s.max,
                p50_ns: s.histogram.value_at_quantile(0.50).min(s.max),
                p99_ns: s.histogram.value_at_quantile(0.99).min(s.max),
            }),
        }
    }
}

/// Values keyed by a raw id from the trace, in the order first seen. Ids
/// the shim hands out are small and dense, so an id finds its slot through
/// a vector of slot numbers (4 bytes per id up to the largest seen); ids
/// beyond [`DENSE_IDS`] (a damaged trace's) go through a map, so they never
/// size a vector.
pub struct ById<T> {
    slot_of: Vec<u32>,
    sparse: FxHashMap<u32, u32>,
    values: Vec<(u32, T)>,
}

const DENSE_IDS: u32 = 1 << 22;
const NO_SLOT: u32 = u32::MAX;

impl<T> Default for ById<T> {
    fn default() -> Self {
        Self {
            slot_of: Vec::new(),
            sparse: FxHashMap::default(),
            values: Vec::new(),
        }
    }
}

impl<T: Default> ById<T> {
    #[inline]
    pub fn entry(&mut self, id: u32) -> &mut T {
        let next = self.values.len() as u32;
        let slot = if id < DENSE_IDS {
            let i = id as usize;
            if i >= self.slot_of.len() {
                self.slot_of.resize(i + 1, NO_SLOT);
            }
            if self.slot_of[i] == NO_SLOT {
                self.slot_of[i] = next;
            }
            self.slot_of[i]
        } else {
            *self.sparse.entry(id).or_insert(next)
        };
        if slot == next {
            self.values.push((id, T::default()));
        }
        &mut self.values[slot as usize].1
    }
}

impl<T> ById<T> {
    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    pub fn into_entries(self) -> impl Iterator<Item = (u32, T)> {
        self.values.into_iter()
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = (u32, &mut T)> {
        self.values.iter_mut().map(|(id, v)| (*id, v))
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
            (s.count, s.total_ns, s.avg_ns(), s.max_ns),
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
        a.merge(&b);
        let s = a.stats().unwrap();
        assert_eq!(s.count, 2 * EXACT_SAMPLES as u64);
        assert_eq!(s.max_ns, 1000 + EXACT_SAMPLES as u64 - 1);
        assert_eq!(s.p50_ns, 10);
    }

    #[test]
    fn a_few_samples_need_no_allocation_and_more_grow_as_recorded() {
        assert!(std::mem::size_of::<Samples>() <= 48);
        let mut s = Samples::default();
        for v in 0..INLINE_SAMPLES as u64 {
            s.push(v);
        }
        let Samples::Narrow(v) = &s else {
            panic!("still exact")
        };
        assert!(!v.spilled(), "{INLINE_SAMPLES} samples stay inline");
        s.push(99);
        let Samples::Narrow(v) = &s else {
            panic!("still exact")
        };
        assert!(
            v.capacity() < 2 * (INLINE_SAMPLES + 1),
            "grown as needed, not to {EXACT_SAMPLES}"
        );
    }

    #[test]
    fn durations_of_4_3_s_or_more_widen_the_samples_exactly() {
        let mut s = Samples::default();
        s.push(10);
        s.push(5_000_000_000);
        s.push(20);
        assert!(matches!(s, Samples::Wide(_)));
        let mut other = Samples::default();
        other.push(30);
        s.merge(&other);
        let st = s.stats().unwrap();
        assert_eq!((st.count, st.max_ns, st.p50_ns), (4, 5_000_000_000, 20));
        assert_eq!(st.total_ns, 5_000_000_060);
        // Narrow into wide, and wide into narrow.
        let mut narrow = Samples::default();
        narrow.push(1);
        let mut wide = Samples::default();
        wide.push(u64::from(u32::MAX) + 1);
        narrow.merge(&wide);
        assert_eq!(narrow.stats().unwrap().max_ns, u64::from(u32::MAX) + 1);
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
