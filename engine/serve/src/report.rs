//! What a server says of itself to `sealvol peers` (`GET /v1/ring`, for a key): its
//! instance id, its ring, and what it served and read, so that an operator sees per
//! server whether it is up, its share of the key space, its hit ratio and what it cost
//! the origin.

use std::sync::atomic::Ordering;

use sealvol_wire::ring::Report;

use crate::chunks::ChunkService;

/// What `s` says of itself.
pub fn report(s: &ChunkService) -> Report {
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
