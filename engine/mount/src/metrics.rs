//! A mount's metrics in Prometheus's text format (`volume mount --metrics ADDR`):
//! bytes, chunks and requests per tier, hit ratios, latency histograms of reads and of
//! requests to the origin and to peers, errors, retries and failovers, and the node
//! cache's size and evictions. The app serves the text (`sealvol_serve::metrics::expose`).

use sealvol_core::prometheus::{CacheState, Text, quote};
use sealvol_core::read::TierStats;

/// What a mount's metrics say besides its counters.
pub struct MountInfo {
    pub volume: String,
    pub digest: String,
    pub dir: String,
}

/// One tier's (name, chunks, bytes, requests); what a tier does not count is `None`.
type TierRow = (&'static str, u64, Option<u64>, Option<u64>);

/// The metrics of one mount, in Prometheus's text format.
pub fn mount_text(info: &MountInfo, s: &TierStats, cache: Option<CacheState>) -> String {
    let mut t = Text {
        prefix: "sealvol_mount",
        labels: format!(
            "volume=\"{}\",digest=\"{}\",dir=\"{}\"",
            quote(&info.volume),
            quote(&info.digest),
            quote(&info.dir)
        ),
        out: String::new(),
    };
    t.one("reads_total", "counter", "Reads answered.", s.reads);
    t.one(
        "read_bytes_total",
        "counter",
        "Bytes returned to readers.",
        s.bytes_served,
    );
    let tiers: [TierRow; 5] = [
        ("memory", s.memory_hits, None, None),
        ("cache", s.cache_hits, Some(s.cache_bytes), None),
        (
            "peer",
            s.peer_chunks,
            Some(s.peer_bytes),
            Some(s.peer_requests),
        ),
        (
            "origin",
            s.origin_chunks,
            Some(s.origin_bytes),
            Some(s.origin_requests),
        ),
        (
            "mirror",
            s.mirror_chunks,
            Some(s.mirror_bytes),
            Some(s.mirror_requests),
        ),
    ];
    let label = |tier: &str| format!("tier=\"{tier}\"");
    let rows = |pick: fn(&TierRow) -> Option<u64>| {
        tiers
            .iter()
            .filter_map(|t| pick(t).map(|v| (label(t.0), v as f64)))
            .collect::<Vec<_>>()
    };
    t.family(
        "chunks_total",
        "counter",
        "Chunks each tier gave.",
        &rows(|t| Some(t.1)),
    );
    t.family(
        "bytes_total",
        "counter",
        "Chunk bytes each tier gave.",
        &rows(|t| t.2),
    );
    t.family(
        "requests_total",
        "counter",
        "Range requests sent to each tier.",
        &rows(|t| t.3),
    );
    let all: u64 = tiers.iter().map(|t| t.1).sum();
    let ratio: Vec<(String, f64)> = tiers
        .iter()
        .map(|t| {
            let r = if all == 0 {
                0.0
            } else {
                t.1 as f64 / all as f64
            };
            (label(t.0), r)
        })
        .collect();
    t.family(
        "hit_ratio",
        "gauge",
        "Share of chunks each tier gave.",
        &ratio,
    );
    t.one(
        "read_errors_total",
        "counter",
        "Reads that failed with EIO.",
        s.errors,
    );
    t.one(
        "retries_total",
        "counter",
        "Reads that failed in a way that may pass and were tried again.",
        s.retries,
    );
    t.one(
        "peer_errors_total",
        "counter",
        "Peer requests that failed (down, cut short, timed out).",
        s.peer_errors,
    );
    t.one(
        "peer_bad_chunks_total",
        "counter",
        "Chunks a peer returned that failed their hash (never served).",
        s.peer_bad_chunks,
    );
    t.one(
        "peer_refused_total",
        "counter",
        "Peer requests refused this node's API key (401, 403): the peer serves it nothing.",
        s.peer_refused,
    );
    t.one(
        "peer_late_total",
        "counter",
        "Peer requests not answered within the peer's latency bound: the next tier was asked.",
        s.peer_late,
    );
    t.one(
        "mirror_errors_total",
        "counter",
        "Mirror reads that failed.",
        s.mirror_errors,
    );
    t.one(
        "failovers_total",
        "counter",
        "Runs the origin could not give, read from a mirror.",
        s.failovers,
    );
    t.one(
        "prefetched_bytes_total",
        "counter",
        "Bytes read ahead of the readers.",
        s.prefetched_bytes,
    );
    t.one(
        "prefetch_wasted_bytes_total",
        "counter",
        "Bytes read ahead and dropped unread.",
        s.prefetch_wasted_bytes,
    );
    t.one(
        "memory_peak_bytes",
        "gauge",
        "The most memory read-ahead held at once.",
        s.memory_peak,
    );
    t.one(
        "memory_bound_bytes",
        "gauge",
        "The bound on it (--prefetch-memory).",
        s.memory_bound,
    );
    t.one(
        "process_resident_peak_bytes",
        "gauge",
        "The most memory the mount process held resident at once (VmHWM).",
        s.process_peak,
    );
    if let Some(c) = cache {
        t.one("cache_bytes", "gauge", "Bytes in the node cache.", c.used);
        t.one("cache_max_bytes", "gauge", "The node cache's bound.", c.max);
        t.one(
            "cache_evictions_total",
            "counter",
            "Chunks and whole files this mount evicted from the node cache.",
            c.evicted.0,
        );
        t.one(
            "cache_evicted_bytes_total",
            "counter",
            "Bytes this mount evicted from the node cache.",
            c.evicted.1,
        );
        t.one(
            "cache_damaged_chunks_total",
            "counter",
            "Chunks this mount found damaged in the node cache (never served; read again).",
            c.damaged,
        );
    }
    t.histogram(
        "read_seconds",
        "How long reads waited for their bytes.",
        &s.read_latency,
    );
    t.histogram(
        "origin_request_seconds",
        "How long each range request to the origin took.",
        &s.origin_latency,
    );
    t.histogram(
        "peer_request_seconds",
        "How long each run request to a peer took.",
        &s.peer_latency,
    );
    t.out
}
