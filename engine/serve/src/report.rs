//! What a server says of itself to `sealvol peers` (`GET /v1/ring`, for a key): its
//! instance id, its ring, and what it served and read, so that an operator sees per
//! server whether it is up, its share of the key space, its hit ratio and what it cost
//! the origin.

use std::sync::atomic::Ordering;

use serde::{Deserialize, Serialize};

use crate::ChunkService;

/// One server's report (docs/JSON.md, `sealvol peers --json`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Its instance id (`/v1/ring/id`), random at each start.
    pub id: String,
    /// Servers in its own ring (`serve --peer`), itself included; 0 when it has none.
    pub ring: u64,
    pub bytes_served: u64,
    pub chunks_asked: u64,
    pub cache_hits: u64,
    /// Chunks asked for that its cache held, of all asked (0 when none were).
    pub hit_ratio: f64,
    pub origin_bytes: u64,
    /// Bytes its fellows answered its misses with.
    pub fellow_bytes: u64,
    /// Runs its fellows asked of it.
    pub forwarded_in: u64,
}

impl Report {
    pub fn of(s: &ChunkService) -> Report {
        let g = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        let c = &s.counters;
        let (asked, hits) = (g(&c.chunks), g(&c.cache_hits));
        Report {
            id: s.id().to_string(),
            ring: s.fellows().map_or(0, |f| f.ring().members().len() as u64),
            bytes_served: g(&c.bytes_served),
            chunks_asked: asked,
            cache_hits: hits,
            hit_ratio: match asked {
                0 => 0.0,
                n => hits.min(n) as f64 / n as f64,
            },
            origin_bytes: g(&c.origin_bytes),
            fellow_bytes: s.fellows().map_or(0, |f| g(&f.counters.bytes)),
            forwarded_in: s.fellows().map_or(0, |f| g(&f.counters.forwarded_in)),
        }
    }
}
