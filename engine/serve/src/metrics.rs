//! Prometheus text for a mount (`volume mount --metrics ADDR`), and the small server
//! that exposes it: bytes, chunks and requests per tier, hit ratios, latency histograms
//! of reads and of requests to the origin and to peers, errors, retries and
//! failovers, and the node cache's size and evictions.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;

use sealvol_core::error::{Error, Result};
use sealvol_core::read::{LATENCY_BOUNDS_US, Latency, TierStats};

/// What a mount's metrics say besides its counters.
pub struct MountInfo {
    pub volume: String,
    pub digest: String,
    pub dir: String,
}

fn quote(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Families written one after another, named `PREFIX_NAME`, each row with the same
/// labels (none for the server, the mount's for a mount).
struct Text {
    prefix: &'static str,
    labels: String,
    out: String,
}

impl Text {
    /// `name{labels,extra}`, or `name` alone without labels.
    fn series(&self, name: &str, extra: &str) -> String {
        let sep = if self.labels.is_empty() || extra.is_empty() {
            ""
        } else {
            ","
        };
        match (self.labels.is_empty(), extra.is_empty()) {
            (true, true) => format!("{}_{name}", self.prefix),
            _ => format!("{}_{name}{{{}{sep}{extra}}}", self.prefix, self.labels),
        }
    }

    fn family(&mut self, name: &str, kind: &str, help: &str, rows: &[(String, f64)]) {
        let _ = writeln!(self.out, "# HELP {}_{name} {help}", self.prefix);
        let _ = writeln!(self.out, "# TYPE {}_{name} {kind}", self.prefix);
        for (extra, v) in rows {
            let series = self.series(name, extra);
            let _ = writeln!(self.out, "{series} {v}");
        }
    }

    fn one(&mut self, name: &str, kind: &str, help: &str, v: u64) {
        self.family(name, kind, help, &[(String::new(), v as f64)]);
    }

    /// A histogram with cumulative buckets, in seconds.
    fn histogram(&mut self, name: &str, help: &str, l: &Latency) {
        let _ = writeln!(self.out, "# HELP {}_{name} {help}", self.prefix);
        let _ = writeln!(self.out, "# TYPE {}_{name} histogram", self.prefix);
        let mut seen = 0;
        for (i, n) in l.buckets.iter().enumerate() {
            seen += n;
            let le = match LATENCY_BOUNDS_US.get(i) {
                Some(us) => format!("{}", *us as f64 / 1e6),
                None => "+Inf".into(),
            };
            let series = self.series(&format!("{name}_bucket"), &format!("le=\"{le}\""));
            let _ = writeln!(self.out, "{series} {seen}");
        }
        let sum = self.series(&format!("{name}_sum"), "");
        let count = self.series(&format!("{name}_count"), "");
        let _ = writeln!(self.out, "{sum} {}", l.sum_us as f64 / 1e6);
        let _ = writeln!(self.out, "{count} {seen}");
    }
}

/// One tier's (name, chunks, bytes, requests); what a tier does not count is `None`.
type TierRow = (&'static str, u64, Option<u64>, Option<u64>);

/// The node cache as a mount's metrics show it.
pub struct CacheState {
    pub used: u64,
    pub max: u64,
    /// Objects and bytes this process evicted.
    pub evicted: (u64, u64),
}

impl CacheState {
    pub fn of(c: &sealvol_core::cache::ChunkCache) -> CacheState {
        CacheState {
            used: c.used_bytes(),
            max: c.max_bytes(),
            evicted: c.evicted(),
        }
    }
}

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

/// The server's metrics (`sealvol serve`'s `/metrics`), in Prometheus's text format.
pub fn serve_text(c: &crate::chunks::Counters, cache: CacheState) -> String {
    use std::sync::atomic::Ordering;
    let g = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    let mut t = Text {
        prefix: "sealvol_serve",
        labels: String::new(),
        out: String::new(),
    };
    let counters = [
        (
            "chunk_requests_total",
            "Chunk requests answered.",
            g(&c.requests),
        ),
        (
            "run_requests_total",
            "Run requests (adjacent chunks of one pack), also counted as chunk requests.",
            g(&c.runs),
        ),
        (
            "chunks_asked_total",
            "Chunks asked for, one per chunk of a run.",
            g(&c.chunks),
        ),
        (
            "bytes_served_total",
            "Chunk bytes sent to clients.",
            g(&c.bytes_served),
        ),
        (
            "cache_hits_total",
            "Chunks found in the server's cache.",
            g(&c.cache_hits),
        ),
        (
            "origin_fetches_total",
            "Range reads of the origin repository.",
            g(&c.origin_fetches),
        ),
        (
            "origin_bytes_total",
            "Bytes read from the origin.",
            g(&c.origin_bytes),
        ),
        (
            "singleflight_waits_total",
            "Requests that waited for another's fetch of the same chunk.",
            g(&c.flight_waits),
        ),
        (
            "bad_bytes_total",
            "Origin reads whose bytes failed their hash (never served).",
            g(&c.bad_bytes),
        ),
        (
            "not_found_total",
            "Chunks the repository does not hold.",
            g(&c.not_found),
        ),
        (
            "errors_total",
            "Requests that failed for another reason.",
            g(&c.errors),
        ),
        (
            "cache_evictions_total",
            "Chunks evicted from the server's cache.",
            cache.evicted.0,
        ),
        (
            "cache_evicted_bytes_total",
            "Bytes evicted from the server's cache.",
            cache.evicted.1,
        ),
    ];
    for (name, help, v) in counters {
        t.one(name, "counter", help, v);
    }
    let asked = g(&c.chunks);
    let hits = g(&c.cache_hits);
    let ratio = if asked == 0 {
        0.0
    } else {
        hits.min(asked) as f64 / asked as f64
    };
    t.family(
        "cache_hit_ratio",
        "gauge",
        "Share of the chunks asked for that the cache held.",
        &[(String::new(), ratio)],
    );
    t.one(
        "cache_bytes",
        "gauge",
        "Bytes in the server's cache.",
        cache.used,
    );
    t.one(
        "cache_max_bytes",
        "gauge",
        "The server's cache bound.",
        cache.max,
    );
    t.histogram(
        "request_seconds",
        "How long chunk and run requests took to answer.",
        &c.request_latency.snapshot(),
    );
    t.histogram(
        "origin_request_seconds",
        "How long each range read of the origin took.",
        &c.origin_latency.snapshot(),
    );
    t.out
}

/// Serves `GET /metrics` with what `render` says, on `addr`, from a thread of its own;
/// returns the address bound (for port 0). `flag` names the option errors are about.
pub fn expose(
    flag: &str,
    addr: SocketAddr,
    render: Arc<dyn Fn() -> String + Send + Sync>,
) -> Result<SocketAddr> {
    let std_listener = std::net::TcpListener::bind(addr).map_err(|e| {
        Error::usage(format!("{flag} {addr}: cannot listen: {e}"))
            .hint("pick a free port, or 127.0.0.1:0 for any")
    })?;
    let bound = std_listener.local_addr().unwrap_or(addr);
    std_listener
        .set_nonblocking(true)
        .map_err(|e| Error::usage(format!("{flag} {addr}: {e}")))?;
    std::thread::Builder::new()
        .name("sealvol-metrics".into())
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => return tracing::warn!("metrics: no runtime: {e}"),
            };
            rt.block_on(async move {
                let listener = match tokio::net::TcpListener::from_std(std_listener) {
                    Ok(l) => l,
                    Err(e) => return tracing::warn!("metrics: {e}"),
                };
                let app = axum::Router::new().route(
                    "/metrics",
                    axum::routing::get(move || {
                        let render = Arc::clone(&render);
                        async move {
                            (
                                [(
                                    axum::http::header::CONTENT_TYPE,
                                    "text/plain; version=0.0.4",
                                )],
                                render(),
                            )
                        }
                    }),
                );
                if let Err(e) = axum::serve(listener, app).await {
                    tracing::warn!("metrics: the server stopped: {e}");
                }
            });
        })
        .map_err(|e| Error::usage(format!("{flag} {addr}: cannot start its thread: {e}")))?;
    Ok(bound)
}
