//! What a reader's tiers count: chunks, bytes and requests per tier, errors, and
//! latency histograms, as a mount publishes them (`TierStats`) and as its threads
//! fill them (`Counters`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Counters a mount publishes (the Mounts screen and `volume mounts` show them).
#[derive(Debug, Default, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct TierStats {
    /// Reads answered, and the bytes they returned.
    pub reads: u64,
    pub bytes_served: u64,
    /// Chunks found in the mount's memory (read-ahead) without waiting for a tier.
    pub memory_hits: u64,
    pub cache_hits: u64,
    pub cache_bytes: u64,
    pub origin_chunks: u64,
    pub origin_bytes: u64,
    /// Range requests sent to the origin: fewer than chunks when runs coalesce.
    pub origin_requests: u64,
    /// Opens handed to the kernel (FUSE passthrough of a whole cached file).
    #[serde(default)]
    pub passthrough_opens: u64,
    /// Whole files kept in the node cache for passthrough.
    #[serde(default)]
    pub files_cached: u64,
    /// Reads that failed (EIO).
    pub errors: u64,
    /// Bytes read ahead of the readers, and those dropped from memory before any reader
    /// asked for them (read ahead for nothing).
    #[serde(default)]
    pub prefetched_bytes: u64,
    #[serde(default)]
    pub prefetch_wasted_bytes: u64,
    /// The most memory the mount's memory tier held at once (chunks kept and range
    /// reads under way), against its bound (`--prefetch-memory`).
    #[serde(default)]
    pub memory_peak: u64,
    #[serde(default)]
    pub memory_bound: u64,
    /// The most memory the whole process held resident at once (the kernel's `VmHWM`):
    /// the bound counts the memory tier's buffers, this counts everything else too
    /// (tables, the program itself), filled in by the process that mounts.
    #[serde(default)]
    pub process_peak: u64,
    /// Read-ahead tasks queued or under way and plans with pieces left, when the
    /// snapshot was taken (filled in by the mount, which owns the read-ahead).
    #[serde(default)]
    pub prefetch_pending: u64,
    /// Chunks and bytes that came from peers, in how many requests; requests that
    /// failed (down, timed out, cut short), and chunks a peer returned that failed
    /// their hash (never served; the next tier was asked).
    #[serde(default)]
    pub peer_chunks: u64,
    #[serde(default)]
    pub peer_bytes: u64,
    #[serde(default)]
    pub peer_requests: u64,
    #[serde(default)]
    pub peer_errors: u64,
    #[serde(default)]
    pub peer_bad_chunks: u64,
    /// Peer requests refused this node's API key (401/403), also counted as errors:
    /// a peer that refuses sends every read to the origin.
    #[serde(default)]
    pub peer_refused: u64,
    /// Peer requests not answered within the peer's latency bound (`liveness.rs`):
    /// the next tier was asked and the peer passed over until it answers again.
    #[serde(default)]
    pub peer_late: u64,
    /// Chunks and bytes read from mirrored origins (`--origin`), in how many requests;
    /// mirror reads that failed (unreachable, lacking a chunk, a chunk failing its hash).
    #[serde(default)]
    pub mirror_chunks: u64,
    #[serde(default)]
    pub mirror_bytes: u64,
    #[serde(default)]
    pub mirror_requests: u64,
    #[serde(default)]
    pub mirror_errors: u64,
    /// Runs the origin could not give (or was passed over for) that went to a mirror.
    #[serde(default)]
    pub failovers: u64,
    /// Reads that failed in a way that may pass and were tried again.
    #[serde(default)]
    pub retries: u64,
    /// How long readers waited for their bytes, and how long each range request to
    /// the origin and to a peer took.
    #[serde(default)]
    pub read_latency: Latency,
    #[serde(default)]
    pub origin_latency: Latency,
    #[serde(default)]
    pub peer_latency: Latency,
}

/// Upper bounds, in microseconds, of the latency histograms' buckets; one more bucket
/// holds everything slower.
pub const LATENCY_BOUNDS_US: [u64; 15] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 10_000_000,
];

/// A latency histogram as published: the count in each bucket (not cumulative) and the
/// sum of all observations.
#[derive(Debug, Default, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct Latency {
    pub buckets: [u64; 16],
    pub sum_us: u64,
}

impl Latency {
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// The upper bound of the bucket holding quantile `q` (0..=1), in microseconds;
    /// `None` without observations or in the open last bucket.
    pub fn quantile_us(&self, q: f64) -> Option<u64> {
        let n = self.count();
        if n == 0 {
            return None;
        }
        let want = ((n as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, b) in self.buckets.iter().enumerate() {
            seen += b;
            if seen >= want {
                return LATENCY_BOUNDS_US.get(i).copied();
            }
        }
        None
    }
}

/// A latency histogram being filled, from many threads.
#[derive(Default)]
pub struct Histogram {
    buckets: [AtomicU64; 16],
    sum_us: AtomicU64,
}

impl Histogram {
    pub fn observe(&self, d: Duration) {
        let us = d.as_micros().min(u64::MAX as u128) as u64;
        let i = LATENCY_BOUNDS_US
            .iter()
            .position(|&b| us <= b)
            .unwrap_or(LATENCY_BOUNDS_US.len());
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.sum_us.fetch_add(us, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> Latency {
        Latency {
            buckets: std::array::from_fn(|i| self.buckets[i].load(Ordering::Relaxed)),
            sum_us: self.sum_us.load(Ordering::Relaxed),
        }
    }
}

#[derive(Default)]
pub struct Counters {
    pub reads: AtomicU64,
    pub bytes_served: AtomicU64,
    pub memory_hits: AtomicU64,
    pub cache_hits: AtomicU64,
    pub cache_bytes: AtomicU64,
    pub origin_chunks: AtomicU64,
    pub origin_bytes: AtomicU64,
    pub origin_requests: AtomicU64,
    pub passthrough_opens: AtomicU64,
    pub files_cached: AtomicU64,
    pub errors: AtomicU64,
    pub prefetched_bytes: AtomicU64,
    pub prefetch_wasted_bytes: AtomicU64,
    pub memory_peak: AtomicU64,
    pub memory_bound: AtomicU64,
    pub peer_chunks: AtomicU64,
    pub peer_bytes: AtomicU64,
    pub peer_requests: AtomicU64,
    pub peer_errors: AtomicU64,
    pub peer_bad_chunks: AtomicU64,
    pub peer_refused: AtomicU64,
    pub peer_late: AtomicU64,
    pub mirror_chunks: AtomicU64,
    pub mirror_bytes: AtomicU64,
    pub mirror_requests: AtomicU64,
    pub mirror_errors: AtomicU64,
    pub failovers: AtomicU64,
    pub retries: AtomicU64,
    /// Chunks taken on the proof of their blocks without being hashed as chunks too
    /// (`Chunks::fetch_for_proof` over `Tiers`); for tests and profiles, not published.
    pub chunks_proven_by_blocks: AtomicU64,
    pub read_latency: Histogram,
    pub origin_latency: Histogram,
    pub peer_latency: Histogram,
    /// When the last read arrived, in milliseconds since the epoch.
    pub last_read_ms: AtomicU64,
}

pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Counters {
    pub fn snapshot(&self) -> TierStats {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        TierStats {
            reads: g(&self.reads),
            bytes_served: g(&self.bytes_served),
            memory_hits: g(&self.memory_hits),
            cache_hits: g(&self.cache_hits),
            cache_bytes: g(&self.cache_bytes),
            origin_chunks: g(&self.origin_chunks),
            origin_bytes: g(&self.origin_bytes),
            origin_requests: g(&self.origin_requests),
            passthrough_opens: g(&self.passthrough_opens),
            files_cached: g(&self.files_cached),
            errors: g(&self.errors),
            prefetched_bytes: g(&self.prefetched_bytes),
            prefetch_wasted_bytes: g(&self.prefetch_wasted_bytes),
            memory_peak: g(&self.memory_peak),
            memory_bound: g(&self.memory_bound),
            process_peak: 0,
            prefetch_pending: 0,
            peer_chunks: g(&self.peer_chunks),
            peer_bytes: g(&self.peer_bytes),
            peer_requests: g(&self.peer_requests),
            peer_errors: g(&self.peer_errors),
            peer_bad_chunks: g(&self.peer_bad_chunks),
            peer_refused: g(&self.peer_refused),
            peer_late: g(&self.peer_late),
            mirror_chunks: g(&self.mirror_chunks),
            mirror_bytes: g(&self.mirror_bytes),
            mirror_requests: g(&self.mirror_requests),
            mirror_errors: g(&self.mirror_errors),
            failovers: g(&self.failovers),
            retries: g(&self.retries),
            read_latency: self.read_latency.snapshot(),
            origin_latency: self.origin_latency.snapshot(),
            peer_latency: self.peer_latency.snapshot(),
        }
    }
}

pub fn add(a: &AtomicU64, n: u64) {
    a.fetch_add(n, Ordering::Relaxed);
}
