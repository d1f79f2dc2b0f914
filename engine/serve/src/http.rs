//! The routes: `GET /v1/chunks/<hash>` (with an optional `?pack=&offset=&len=` hint),
//! `POST /v1/runs` (adjacent chunks of one pack: `{"pack", "offset", "chunks": [[hash,
//! len], …]}`, answered with their bytes back to back), the remote engine's object
//! routes (`objects.rs`), `/metrics` (Prometheus text), `/healthz` and `/readyz`.
//!
//! Every route, and any path that is not one, needs an API key (`keys.rs`): the check is
//! one layer over the whole router, so a route added later cannot skip it.
//!
//! Chunk URLs name immutable bytes, so responses say so (`Cache-Control: public,
//! max-age=31536000, immutable`, the hash as the `ETag`): an ordinary HTTP cache in
//! front of the server works too.

use std::sync::Arc;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, FromRef, Request};
use axum::middleware::{self, Next};
use sealvol_core::repo::Repository;

use crate::keys::Keys;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use sealvol_core::digest::Hash;

use crate::chunks::{ChunkService, Hint, MAX_CHUNK, Miss};

/// Every route the server answers and its methods, for the router and for tests that
/// walk them all.
pub const ROUTES: [(&str, &[&str]); 10] = [
    ("/v1/chunks/{hash}", &["GET"]),
    ("/v1/runs", &["POST"]),
    ("/v1/objects/{*key}", &["GET", "HEAD", "PUT", "DELETE"]),
    ("/v1/list", &["GET"]),
    ("/v1/now", &["GET"]),
    ("/v1/barrier", &["POST"]),
    ("/v1/key", &["GET"]),
    ("/metrics", &["GET"]),
    ("/healthz", &["GET"]),
    ("/readyz", &["GET"]),
];

/// The largest request body: a run request naming `MAX_RUN_CHUNKS` chunks is about
/// 600 KiB of JSON.
pub const MAX_BODY: usize = 1 << 20;

/// What the handlers share.
#[derive(Clone)]
pub struct Served {
    pub chunks: Arc<ChunkService>,
    pub keys: Arc<Keys>,
}

impl FromRef<Served> for Arc<ChunkService> {
    fn from_ref(s: &Served) -> Self {
        Arc::clone(&s.chunks)
    }
}

impl FromRef<Served> for Arc<Repository> {
    fn from_ref(s: &Served) -> Self {
        Arc::clone(s.chunks.repository())
    }
}

pub fn router(served: Served) -> Router {
    use crate::objects as o;
    let keys = Arc::clone(&served.keys);
    Router::new()
        .route(ROUTES[0].0, get(chunk))
        .route(
            ROUTES[1].0,
            post(run).layer(DefaultBodyLimit::max(MAX_BODY)),
        )
        .route(
            ROUTES[2].0,
            get(o::get_object)
                .head(o::head_object)
                .put(o::put_object)
                .delete(o::delete_object),
        )
        .route(ROUTES[3].0, get(o::list))
        .route(ROUTES[4].0, get(o::now))
        .route(ROUTES[5].0, post(o::barrier))
        .route(ROUTES[6].0, get(o::whoami))
        .route(ROUTES[7].0, get(metrics))
        .route(ROUTES[8].0, get(|| async { "ok\n" }))
        .route(ROUTES[9].0, get(|| async { "ready\n" }))
        .fallback(|| async { StatusCode::NOT_FOUND })
        .layer(middleware::from_fn_with_state(keys, authenticate))
        .with_state(served)
}

/// The one check every request passes: a known, unrevoked key, whose grant the handlers
/// then find in the request's extensions.
async fn authenticate(State(keys): State<Arc<Keys>>, mut req: Request, next: Next) -> Response {
    let header = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    match keys.check(header) {
        Ok(grant) => {
            req.extensions_mut().insert(Arc::new(grant));
            next.run(req).await
        }
        Err(refused) => {
            let e =
                sealvol_core::Error::new(sealvol_core::error::ErrorKind::Denied, refused.message());
            let mut r = crate::objects::error_response(StatusCode::UNAUTHORIZED, &e);
            r.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            r
        }
    }
}

/// A run request as it travels: what `peer::HttpPeer` sends.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct RunRequest {
    pub pack: String,
    pub offset: u64,
    pub chunks: Vec<(String, u32)>,
}

async fn run(State(service): State<Arc<ChunkService>>, body: Bytes) -> Response {
    let req: RunRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            return bad_request(format!(
                "not a run request ({e}): send {{\"pack\": HEX, \"offset\": N, \"chunks\": [[HEX, LEN], …]}}"
            ));
        }
    };
    let Some(pack) = Hash::parse_hex(&req.pack) else {
        return bad_request(format!("not a pack id: {:.80} (64 hex digits)", req.pack));
    };
    let mut chunks = Vec::with_capacity(req.chunks.len());
    for (h, len) in &req.chunks {
        let Some(hash) = Hash::parse_hex(h) else {
            return bad_request(format!(
                "not a chunk hash: {h:.80} (a chunk is named by 64 hex digits)"
            ));
        };
        chunks.push((hash, *len));
    }
    let worker = Arc::clone(&service);
    let outcome = tokio::task::spawn_blocking(move || worker.get_run(&pack, req.offset, &chunks))
        .await
        .unwrap_or_else(|e| Err(Miss::Unavailable(format!("the fetch failed: {e}"))));
    match outcome {
        Ok(pieces) => {
            let total: usize = pieces.iter().map(|p| p.len()).sum();
            sealvol_core::read::add(&service.counters.bytes_served, total as u64);
            let body = Body::from_stream(futures::stream::iter(
                pieces
                    .into_iter()
                    .map(|p| Ok::<_, std::convert::Infallible>(Bytes::from_owner(p))),
            ));
            let headers = [
                (
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/octet-stream"),
                ),
                (header::CONTENT_LENGTH, HeaderValue::from(total)),
            ];
            (StatusCode::OK, headers, body).into_response()
        }
        Err(miss) => miss_response(miss),
    }
}

/// What a client is told when a chunk cannot be served: never the bytes.
fn miss_response(miss: Miss) -> Response {
    match miss {
        Miss::Invalid(why) => bad_request(why),
        Miss::NotFound(h) => (
            StatusCode::NOT_FOUND,
            format!("no chunk {} in the repository\n", h.hex()),
        )
            .into_response(),
        // The origin holds bad bytes: a gateway's upstream error.
        Miss::Corrupt(why) => (StatusCode::BAD_GATEWAY, why + "\n").into_response(),
        Miss::Unavailable(why) => (StatusCode::SERVICE_UNAVAILABLE, why + "\n").into_response(),
    }
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
    let outcome = tokio::task::spawn_blocking(move || worker.get(&h, hint))
        .await
        .unwrap_or_else(|e| Err(Miss::Unavailable(format!("the fetch failed: {e}"))));
    match outcome {
        Ok(bytes) => {
            sealvol_core::read::add(&service.counters.bytes_served, bytes.len() as u64);
            let mut h = immutable(&etag);
            h.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/octet-stream"),
            );
            // The verified chunk goes to the body without a copy.
            (StatusCode::OK, h, Body::from(Bytes::from_owner(bytes))).into_response()
        }
        Err(miss) => miss_response(miss),
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

async fn metrics(State(service): State<Arc<ChunkService>>) -> impl IntoResponse {
    let cache = crate::metrics::CacheState::of(service.cache());
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; version=0.0.4"),
        )],
        crate::metrics::serve_text(&service.counters, cache),
    )
}
