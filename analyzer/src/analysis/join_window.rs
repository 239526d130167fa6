//! The window a release and the acquisition it let in wait in for each
//! other (see `contention.rs`): bounded, so memory does not grow with the
//! events.

use rustc_hash::FxHashMap;
use std::collections::VecDeque;
use std::hash::Hash;

/// How many unmatched releases, acquisitions and notifies are held while
/// their partner may still come. Partners are normally adjacent in time;
/// this covers clock skew and long preemptions between them.
pub const JOIN_WINDOW: usize = 1 << 20;

/// A map of at most `JOIN_WINDOW` recent entries; the oldest is handed back
/// when a new one pushes it out.
pub struct Window<K, V> {
    /// key → (insertion stamp, value)
    map: FxHashMap<K, (u64, V)>,
    /// Keys with the stamp they were inserted under, oldest first. A key
    /// taken and inserted again has a newer stamp, so its stale place in
    /// the queue cannot push the new entry out.
    order: VecDeque<(K, u64)>,
    stamp: u64,
    limit: usize,
}

impl<K: Copy + Eq + Hash, V> Default for Window<K, V> {
    fn default() -> Self {
        Self::with_limit(JOIN_WINDOW)
    }
}

impl<K: Copy + Eq + Hash, V> Window<K, V> {
    pub fn with_limit(limit: usize) -> Self {
        Self {
            map: FxHashMap::default(),
            order: VecDeque::new(),
            stamp: 0,
            limit,
        }
    }

    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        self.stamp += 1;
        self.map.insert(key, (self.stamp, value));
        self.order.push_back((key, self.stamp));
        while self.order.len() > self.limit {
            let (oldest, stamp) = self.order.pop_front()?;
            // Entries already matched (or inserted again since) just fall out.
            if self.map.get(&oldest).is_some_and(|(s, _)| *s == stamp) {
                return self.map.remove(&oldest).map(|(_, v)| v);
            }
        }
        None
    }

    pub fn take(&mut self, key: &K) -> Option<V> {
        self.map.remove(key).map(|(_, v)| v)
    }

    pub fn get(&self, key: &K) -> Option<&V> {
        self.map.get(key).map(|(_, v)| v)
    }

    pub fn drain(&mut self) -> impl Iterator<Item = V> + '_ {
        self.order.clear();
        self.map.drain().map(|(_, (_, v))| v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_join_window_holds_at_most_its_limit_and_hands_back_the_oldest() {
        let mut w: Window<u32, u32> = Window::with_limit(4);
        let evicted: Vec<Option<u32>> = (0..10).map(|k| w.insert(k, k * 10)).collect();
        assert_eq!(
            evicted,
            vec![
                None,
                None,
                None,
                None,
                Some(0),
                Some(10),
                Some(20),
                Some(30),
                Some(40),
                Some(50)
            ]
        );
        assert_eq!(w.map.len(), 4);
        // A matched entry leaves at once; its place in the queue just falls out.
        assert_eq!(w.take(&9), Some(90));
        assert_eq!(w.insert(10, 100), Some(60));
        assert_eq!(w.map.len(), 3);
        assert!(w.order.len() <= 4);
        // A key taken and inserted again is not pushed out by its old place.
        let mut w: Window<u32, u32> = Window::with_limit(2);
        assert_eq!(w.insert(1, 10), None);
        let again = w.take(&1).unwrap() + 1;
        assert_eq!(w.insert(1, again), None);
        assert_eq!(w.insert(2, 20), None, "1's old place falls out, not 1");
        assert_eq!(w.get(&1), Some(&11));
        assert_eq!(w.insert(3, 30), Some(11), "now 1 is the oldest");
    }
}
