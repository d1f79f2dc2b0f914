//! The bytes a cache holds, as one process counts them.

use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes the cache holds as this process counts them, between the measurements that set
/// it (the background one at open, each eviction's). Never below zero and never
/// wrapping, whatever order removals and the measurement land in: a damaged file this
/// process drops before the background measurement has counted it is taken off a count
/// that does not hold it yet. A count off by such a file only moves the next eviction,
/// which measures again.
#[derive(Debug, Default)]
pub(super) struct Usage(AtomicU64);

impl Usage {
    /// Counts `n` more bytes; returns the new count.
    pub(super) fn add(&self, n: u64) -> u64 {
        let before = self
            .0
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |u| {
                Some(u.saturating_add(n))
            })
            .unwrap_or_else(|u| u);
        before.saturating_add(n)
    }

    /// Counts `n` bytes fewer, stopping at zero.
    pub(super) fn sub(&self, n: u64) {
        let _ = self
            .0
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |u| {
                Some(u.saturating_sub(n))
            });
    }

    /// What a measurement found.
    pub(super) fn set(&self, n: u64) {
        self.0.store(n, Ordering::Relaxed);
    }

    pub(super) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::Usage;

    #[test]
    fn a_removal_before_the_measurement_stops_at_zero_and_nothing_wraps() {
        let u = Usage::default();
        // A damaged file dropped before the background measurement counted anything.
        u.sub(400_000);
        assert_eq!(u.get(), 0);
        // The measurement lands, then this process adds a file.
        assert_eq!(u.add(1_000), 1_000);
        assert_eq!(u.add(100_000), 101_000);
        u.sub(1_000);
        assert_eq!(u.get(), 100_000);
        assert_eq!(u.add(u64::MAX), u64::MAX, "saturates, never wraps");
        u.set(5);
        assert_eq!(u.get(), 5);
    }
}
