//! The routes: `GET /v1/chunks/<hash>` (with an optional `?pack=&offset=&len=` hint),
//! `/metrics` (Prometheus text), `/healthz` and `/readyz`.
//!
//! Chunk URLs name immutable bytes, so responses say so (`Cache-Control: public,
//! max-age=31536000, immutable`, the hash as the `ETag`): an ordinary HTTP cache in
//! front of the server works too.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use sealvol_core::digest::Hash;
use sealvol_core::recycled::Buffer;

use crate::chunks::{ChunkService, Hint, MAX_CHUNK, Miss};

/// Every route the server answers, for the router and for tests that walk them all.
pub const ROUTES: [&str; 4] = ["/v1/chunks/{hash}", "/metrics", "/healthz", "/readyz"];

pub fn router(service: Arc<ChunkService>) -> Router {
    Router::new()
        .route(ROUTES[0], get(chunk))
        .route(ROUTES[1], get(metrics))
        .route(ROUTES[2], get(|| async { "ok\n" }))
        .route(ROUTES[3], get(|| async { "ready\n" }))
        .with_state(service)
}

#[derive(serde::Deserialize)]
struct HintQuery {
    pack: Option<String>,
    offset: Option<u64>,
    len: Option<u32>,
}

fn bad_request(what: String) -> Response {
    (StatusCode::BAD_REQUEST, what + "\n").into_response()
}

async fn chunk(
    State(service): State<Arc<ChunkService>>,
    Path(hash): Path<String>,
    Query(q): Query<HintQuery>,
    headers: HeaderMap,
) -> Response {
    let Some(h) = Hash::parse_hex(&hash) else {
        return bad_request(format!(
            "not a chunk hash: {hash:.80} (a chunk is named by 64 hex digits)"
        ));
    };
    let hint = match (q.pack, q.offset, q.len) {
        (None, None, None) => None,
        (Some(p), Some(offset), Some(len)) => {
            let Some(pack) = Hash::parse_hex(&p) else {
                return bad_request(format!("not a pack id: {p:.80} (64 hex digits)"));
            };
            if len == 0 || len > MAX_CHUNK {
                return bad_request(format!(
                    "len {len} is not a chunk's length (1 to {MAX_CHUNK} bytes)"
                ));
            }
            Some(Hint { pack, offset, len })
        }
        _ => return bad_request("a hint needs all of pack, offset and len".into()),
    };
    let etag = format!("\"{}\"", h.hex());
    if headers
        .get(header::IF_NONE_MATCH)
        .is_some_and(|v| v.as_bytes() == etag.as_bytes())
    {
        return (StatusCode::NOT_MODIFIED, immutable(&etag)).into_response();
    }
    let worker = Arc::clone(&service);
    let outcome = match tokio::task::spawn_blocking(move || worker.get(&h, hint)).await {
        Ok(o) => o,
        Err(e) => Err(Miss::Unavailable(format!("the fetch failed: {e}"))),
    };
    match outcome {
        Ok(bytes) => {
            sealvol_core::read::add(&service.counters.bytes_served, bytes.len() as u64);
            let mut h = immutable(&etag);
            h.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/octet-stream"),
            );
            let body = Body::from(Bytes::from_owner(Shared(bytes)));
            (StatusCode::OK, h, body).into_response()
        }
        Err(Miss::NotFound) => (
            StatusCode::NOT_FOUND,
            format!("no chunk {} in the repository\n", h.hex()),
        )
            .into_response(),
        // The origin holds bad bytes: a gateway's upstream error, never the bytes.
        Err(Miss::Corrupt(why)) => (StatusCode::BAD_GATEWAY, why + "\n").into_response(),
        Err(Miss::Unavailable(why)) => {
            (StatusCode::SERVICE_UNAVAILABLE, why + "\n").into_response()
        }
    }
}

fn immutable(etag: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=31536000, immutable"),
    );
    if let Ok(v) = HeaderValue::from_str(etag) {
        h.insert(header::ETAG, v);
    }
    h
}

/// A verified chunk handed to the response body without a copy.
struct Shared(Arc<Buffer>);

impl AsRef<[u8]> for Shared {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

async fn metrics(State(service): State<Arc<ChunkService>>) -> impl IntoResponse {
    let c = &service.counters;
    let mut out = String::new();
    let mut counter = |name: &str, help: &str, v: u64| {
        let _ = write!(
            out,
            "# HELP sealvol_serve_{name} {help}\n# TYPE sealvol_serve_{name} counter\nsealvol_serve_{name} {v}\n"
        );
    };
    let counters = [
        (
            "chunk_requests_total",
            "Chunk requests answered.",
            &c.requests,
        ),
        (
            "bytes_served_total",
            "Chunk bytes sent to clients.",
            &c.bytes_served,
        ),
        (
            "cache_hits_total",
            "Chunks found in the server's cache.",
            &c.cache_hits,
        ),
        (
            "origin_fetches_total",
            "Range reads of the origin repository.",
            &c.origin_fetches,
        ),
        (
            "origin_bytes_total",
            "Bytes read from the origin.",
            &c.origin_bytes,
        ),
        (
            "singleflight_waits_total",
            "Requests that waited for another's fetch of the same chunk.",
            &c.flight_waits,
        ),
        (
            "bad_bytes_total",
            "Origin reads whose bytes failed their hash (never served).",
            &c.bad_bytes,
        ),
        (
            "not_found_total",
            "Chunks the repository does not hold.",
            &c.not_found,
        ),
        (
            "errors_total",
            "Requests that failed for another reason.",
            &c.errors,
        ),
    ];
    for (name, help, v) in counters {
        counter(name, help, v.load(Ordering::Relaxed));
    }
    let _ = write!(
        out,
        "# HELP sealvol_serve_cache_bytes Bytes in the server's cache.\n# TYPE sealvol_serve_cache_bytes gauge\nsealvol_serve_cache_bytes {}\n",
        service.cache().used_bytes()
    );
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; version=0.0.4"),
        )],
        out,
    )
}
