//! A server's metrics (`sealvol serve`'s `/metrics`) in Prometheus's text format, and
//! the small server that exposes metrics text on an address of its own (a server's
//! `--metrics-listen`, a mount's `--metrics`).

use std::net::SocketAddr;
use std::sync::Arc;

use sealvol_core::error::{Error, Result};
pub use sealvol_core::prometheus::CacheState;
use sealvol_core::prometheus::Text;

/// The server's metrics (`sealvol serve`'s `/metrics`), in Prometheus's text format.
pub fn serve_text(service: &crate::chunks::ChunkService, keys: &crate::keys::Keys) -> String {
    use std::sync::atomic::Ordering;
    let (c, gc) = (&service.counters, &service.gc);
    let cache = service.cache().map(CacheState::of).unwrap_or_default();
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
            "proof_edge_bytes_total",
            "Bytes read from the origin for the parts of proof blocks beyond a run's ends.",
            g(&c.edge_bytes),
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
            "hashes_spared_total",
            "Chunks read from the packs and not hashed again: found good lately at the same place of the same unchanged pack file.",
            g(&c.hashes_spared),
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
            "hub_mirror_upstream_bytes_total",
            "Bytes the Hub mirror's jobs read from the upstream Hub (serve --hf-upstream).",
            g(&c.hub_upstream_bytes),
        ),
        (
            "hub_mirror_spool_bytes_total",
            "File bytes the Hub mirror sent while its job fetched them.",
            g(&c.hub_spool_bytes),
        ),
        (
            "hub_mirror_sealed_bytes_total",
            "File bytes the Hub mirror sent from the versions it sealed.",
            g(&c.hub_sealed_bytes),
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
        (
            "cache_damaged_chunks_total",
            "Chunks found damaged in the server's cache (never served; read again).",
            cache.damaged,
        ),
    ];
    let gc_counters = [
        (
            "gc_runs_total",
            "Scheduled garbage collections run (serve --gc-every).",
            g(&gc.runs),
        ),
        (
            "gc_failures_total",
            "Scheduled garbage collections that failed.",
            g(&gc.failures),
        ),
        (
            "gc_bytes_freed_total",
            "Bytes scheduled garbage collections deleted.",
            g(&gc.bytes_freed),
        ),
        (
            "gc_versions_purged_total",
            "Versions scheduled garbage collections purged from the trash.",
            g(&gc.versions_purged),
        ),
    ];
    for (name, help, v) in counters.into_iter().chain(gc_counters) {
        t.one(name, "counter", help, v);
    }
    let (sealed, spooled) = (g(&c.hub_sealed_bytes), g(&c.hub_spool_bytes));
    if sealed + spooled > 0 {
        t.family(
            "hub_mirror_hit_ratio",
            "gauge",
            "Share of the Hub mirror's file bytes sent from sealed versions, not while fetched upstream.",
            &[(String::new(), sealed as f64 / (sealed + spooled) as f64)],
        );
    }
    if let Some(f) = service.fellows() {
        let f = &f.counters;
        let fellows = [
            (
                "fellow_requests_total",
                "Runs this server asked of the fellow that owns them (serve --peer).",
                g(&f.requests),
            ),
            (
                "fellow_bytes_total",
                "Bytes fellows answered those runs with.",
                g(&f.bytes),
            ),
            (
                "fellow_errors_total",
                "Runs a fellow could not answer (read from the origin instead).",
                g(&f.errors),
            ),
            (
                "fellow_forwarded_in_total",
                "Runs fellows asked of this server.",
                g(&f.forwarded_in),
            ),
        ];
        for (name, help, v) in fellows {
            t.one(name, "counter", help, v);
        }
        t.one(
            "ring_servers",
            "gauge",
            "Servers in this server's ring, itself included.",
            f_len(service),
        );
    }
    t.family(
        "gc_last_run_seconds",
        "gauge",
        "How long the last scheduled garbage collection took.",
        &[(String::new(), g(&gc.last_millis) as f64 / 1000.0)],
    );
    t.one(
        "gc_last_run_end_timestamp_seconds",
        "gauge",
        "When the last scheduled garbage collection ended (Unix time; 0: none yet).",
        g(&gc.last_end),
    );
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
    let (shared, age) = keys.state();
    t.one(
        "key_list_shared",
        "gauge",
        "1 when the keys come from the repository's list (`sealvol key share`), 0 for this server's own.",
        shared as u64,
    );
    t.family(
        "key_list_age_seconds",
        "gauge",
        "Seconds since the repository's key list was last read (0 for this server's own list).",
        &[(String::new(), age)],
    );
    let quotas = service.quotas.report();
    let label = |ns: &str| format!("namespace=\"{ns}\"");
    t.family(
        "quota_bytes",
        "gauge",
        "A namespace's quota (sealvol settings --quota).",
        &quotas
            .iter()
            .map(|(ns, q, _)| (label(ns), *q as f64))
            .collect::<Vec<_>>(),
    );
    t.family(
        "quota_used_bytes",
        "gauge",
        "What a namespace with a quota stores: its versions' distinct chunks, live and in the trash, and their signatures (counted at most 10 s ago).",
        &quotas
            .iter()
            .map(|(ns, _, used)| (label(ns), *used as f64))
            .collect::<Vec<_>>(),
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

fn f_len(service: &crate::chunks::ChunkService) -> u64 {
    service
        .fellows()
        .map_or(0, |f| f.ring().members().len() as u64)
}
