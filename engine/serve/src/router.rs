//! The routes: `GET /v1/chunks/<hash>` (with an optional `?pack=&offset=&len=` hint),
//! `POST /v1/runs` (adjacent chunks of one pack: `{"pack", "offset", "chunks": [[hash,
//! len], …]}`, answered with their bytes back to back), the remote engine's object
//! routes (`objects/`) and its jobs (`jobs/`), `/metrics` (Prometheus text), `/healthz` and `/readyz`.
//!
//! Every route, and any path that is not one, needs an API key (`keys.rs`): the check is
//! one layer over the whole router, so a route added later cannot skip it. The two
//! probes (`OPEN_ROUTES`: `/healthz`, `/readyz`) are the exception, outside that layer,
//! for load balancers and Kubernetes: they say only "ok" or "ready", and `/readyz` asks
//! the repository at most once every few seconds however often it is probed.
//!
//! Chunk URLs name immutable bytes, so responses say so (`Cache-Control: public,
//! max-age=31536000, immutable`, the hash as the `ETag`): an ordinary HTTP cache in
//! front of the server works too.

// Checks answer a request early with its response; boxing it would buy nothing.
#![allow(clippy::result_large_err)]

use std::sync::Arc;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{FromRef, Request};
use axum::middleware::{self, Next};
use sealvol_core::read::Chunks as _;
use sealvol_core::repo::Repository;

use crate::conn::shares::{self, Caller, Shares};
use crate::keys::{Grant, Keys};
use crate::objects::Writes;
use crate::ops::Steward;
use axum::Extension;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use sealvol_core::digest::Hash;

use crate::chunks::{ChunkService, Miss};
use crate::reply::Reply;

/// Every route that needs a key and its methods, for the router and for tests that
/// walk them all.
/// The Hugging Face Hub's read API (`hub/`), under `/hf/` so that no route of it
/// meets a namespace's: one route, read by `hub::asked` (the Hub's reserved first
/// segments decide, not a router's order). `POST` is `paths-info` only.
pub const HUB_ROUTES: [(&str, &[&str]); 1] = [("/hf/{*rest}", &["GET", "HEAD", "POST"])];

pub const ROUTES: [(&str, &[&str]); 29] = [
    ("/v1/chunks/{hash}", &["GET"]),
    ("/v1/runs", &["POST"]),
    ("/v1/objects/{*key}", &["GET", "HEAD", "PUT", "DELETE"]),
    ("/v1/list", &["GET"]),
    ("/v1/now", &["GET"]),
    ("/v1/barrier", &["POST"]),
    ("/v1/key", &["GET"]),
    ("/metrics", &["GET"]),
    ("/v1/ops/have-chunks", &["POST"]),
    ("/v1/ops/stored-files", &["POST"]),
    ("/v1/ops/lists/{file}", &["PUT"]),
    ("/v1/ops/seal", &["POST"]),
    ("/v1/ops/tag", &["POST"]),
    ("/v1/ops/delete", &["POST"]),
    ("/v1/ops/restore", &["POST"]),
    ("/v1/ops/damage", &["POST"]),
    ("/v1/ops/gc", &["POST"]),
    ("/v1/jobs", &["GET", "POST"]),
    ("/v1/jobs/{id}", &["GET"]),
    ("/v1/jobs/{id}/cancel", &["POST"]),
    ("/v1/jobs/{id}/retry", &["POST"]),
    ("/v1/jobs/{id}/logs", &["GET"]),
    ("/v1/jobs/{id}/events", &["GET"]),
    ("/v1/secrets", &["GET"]),
    ("/v1/secrets/{ns}/{name}", &["PUT", "DELETE"]),
    ("/v1/ring", &["GET"]),
    ("/v1/ops/small-files", &["POST"]),
    ("/v1/ops/signatures/{ns}/{vol}/{digest}", &["PUT"]),
    ("/v1/ops/labels", &["POST"]),
];

/// The probes, answered without a key: is the process up, can it reach its repository.
pub const OPEN_ROUTES: [(&str, &[&str]); 3] = [
    ("/healthz", &["GET"]),
    ("/readyz", &["GET"]),
    (RING_ID_ROUTE, &["GET"]),
];

pub use sealvol_wire::ring::{RING_ID_ROUTE, RunRequest};

/// How long a `/readyz` answer stands: probes from anyone cost the repository at most
/// one small request this often.
const READY_FOR: std::time::Duration = std::time::Duration::from_secs(5);

/// The largest request body of the chunk routes: a run request naming `MAX_RUN_CHUNKS`
/// chunks is about 600 KiB of JSON.
pub const MAX_BODY: usize = 1 << 20;

/// What the handlers share.
#[derive(Clone)]
pub struct Served {
    pub chunks: Arc<ChunkService>,
    pub keys: Arc<Keys>,
    pub steward: Arc<Steward>,
    /// The server's jobs, when it runs an agent.
    pub jobs: Option<Arc<crate::jobs::Desk>>,
    /// The last `/readyz` verdict and when it was reached.
    ready: Arc<tokio::sync::Mutex<Option<(std::time::Instant, bool)>>>,
    /// Each caller's requests under way (`conn::shares`).
    pub shares: Arc<Shares>,
    /// The Hugging Face Hub's API (`hub/`).
    pub hub: Arc<crate::hub::Hub>,
    /// The pull-only OCI registry (`registry.rs`).
    pub registry: Arc<crate::registry::Registry>,
}

impl Served {
    pub fn new(
        chunks: Arc<ChunkService>,
        keys: Arc<Keys>,
        jobs: Option<Arc<crate::jobs::Desk>>,
        policy: &crate::policy::Policy,
    ) -> Served {
        let steward = Arc::new(Steward::new(
            Arc::clone(chunks.repository()),
            Arc::clone(chunks.known()),
            Arc::clone(&chunks.quotas),
            policy,
        ));
        let hub = Arc::new(crate::hub::Hub::new(
            Arc::clone(&chunks),
            policy.https,
            policy.hub_mirror.clone(),
        ));
        let registry = Arc::new(crate::registry::Registry::new(Arc::clone(&chunks)));
        Served {
            chunks,
            keys,
            steward,
            jobs,
            ready: Arc::default(),
            shares: Shares::new(policy.connections.per_key, policy.connections.anonymous),
            hub,
            registry,
        }
    }
}

impl FromRef<Served> for Arc<crate::registry::Registry> {
    fn from_ref(s: &Served) -> Self {
        Arc::clone(&s.registry)
    }
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

impl FromRef<Served> for Arc<crate::hub::Hub> {
    fn from_ref(s: &Served) -> Self {
        Arc::clone(&s.hub)
    }
}

impl FromRef<Served> for Arc<Steward> {
    fn from_ref(s: &Served) -> Self {
        Arc::clone(&s.steward)
    }
}

impl FromRef<Served> for Option<Arc<crate::jobs::Desk>> {
    fn from_ref(s: &Served) -> Self {
        s.jobs.clone()
    }
}

impl FromRef<Served> for Writes {
    fn from_ref(s: &Served) -> Self {
        Writes {
            steward: Arc::clone(&s.steward),
            keys: Arc::clone(&s.keys),
        }
    }
}

pub fn router(served: Served) -> Router {
    use crate::jobs::routes as jobs;
    use crate::objects as o;
    use crate::ops as op;
    let probes = Router::new()
        .route(OPEN_ROUTES[0].0, get(|| async { "ok\n" }))
        .route(OPEN_ROUTES[1].0, get(readyz))
        .route(OPEN_ROUTES[2].0, get(ring_id))
        .layer(middleware::from_fn_with_state(served.clone(), anonymous));
    let keyed = Router::new()
        .route(ROUTES[0].0, get(chunk))
        .route(ROUTES[1].0, post(run))
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
        .route(ROUTES[8].0, post(op::have_chunks))
        .route(ROUTES[9].0, post(op::stored_files))
        .route(ROUTES[10].0, put(op::put_list))
        .route(ROUTES[26].0, post(op::small_files))
        .route(ROUTES[27].0, put(op::put_signature))
        .route(ROUTES[11].0, post(op::seal))
        .route(ROUTES[12].0, post(op::tag))
        .route(ROUTES[28].0, post(op::labels))
        .route(ROUTES[13].0, post(op::delete))
        .route(ROUTES[14].0, post(op::restore))
        .route(ROUTES[15].0, post(op::damage))
        .route(ROUTES[16].0, post(op::gc))
        .route(ROUTES[17].0, get(jobs::list).post(jobs::submit))
        .route(ROUTES[18].0, get(jobs::show))
        .route(ROUTES[19].0, post(jobs::cancel))
        .route(ROUTES[20].0, post(jobs::retry))
        .route(ROUTES[21].0, get(jobs::logs))
        .route(ROUTES[22].0, get(jobs::events))
        .route(ROUTES[23].0, get(crate::jobs::secrets::list))
        .route(
            ROUTES[24].0,
            put(crate::jobs::secrets::put).delete(crate::jobs::secrets::remove),
        )
        .route(ROUTES[25].0, get(ring_report))
        .route(
            HUB_ROUTES[0].0,
            get(crate::hub::answer).post(crate::hub::answer),
        )
        .route(
            crate::registry::ROUTES[0].0,
            get(crate::registry::version_check).head(crate::registry::version_check),
        )
        .route(
            crate::registry::ROUTES[1].0,
            axum::routing::any(crate::registry::answer),
        )
        .fallback(|| async { StatusCode::NOT_FOUND })
        .layer(middleware::from_fn_with_state(served.clone(), authenticate));
    probes
        .merge(keyed)
        .layer(middleware::from_fn(no_panics))
        .layer(middleware::from_fn(protocol))
        .with_state(served)
}

/// Every answer says this server's protocol version; a client too old for it is
/// answered `426` before anything else reads its request (`sealvol_wire::protocol`).
async fn protocol(req: Request, next: Next) -> Response {
    use sealvol_wire::protocol as p;
    let said = p::said(req.headers().get(p::HEADER).map(|v| v.as_bytes()));
    let mut answer = match said {
        Err(why) => crate::reply::failed(sealvol_core::Error::invalid(why)),
        Ok(client) => match p::client_refused(client) {
            Some(why) => crate::reply::error_response(
                StatusCode::UPGRADE_REQUIRED,
                &sealvol_core::Error::new(sealvol_core::error::ErrorKind::Format, why),
            ),
            None => next.run(req).await,
        },
    };
    answer
        .headers_mut()
        .insert(p::HEADER, HeaderValue::from(p::PROTOCOL));
    answer
}

/// `/readyz`: 200 once the repository answers a small request, 503 while it does not.
/// The verdict stands for `READY_FOR`, and the answer says nothing else: anyone may ask.
async fn readyz(State(served): State<Served>) -> Response {
    let mut last = served.ready.lock().await;
    let ready = match *last {
        Some((at, ready)) if at.elapsed() < READY_FOR => ready,
        _ => {
            let repo = Arc::clone(served.chunks.repository());
            let asked = tokio::task::spawn_blocking(move || {
                repo.object_store().size(sealvol_core::repo::CONFIG_KEY)
            });
            let ready = match tokio::time::timeout(READY_FOR, asked).await {
                Ok(Ok(Ok(Some(_)))) => true,
                Ok(Ok(Ok(None))) => {
                    tracing::warn!(
                        "not ready: the repository has no {}",
                        sealvol_core::repo::CONFIG_KEY
                    );
                    false
                }
                Ok(Ok(Err(e))) => {
                    tracing::warn!("not ready: the repository: {e}");
                    false
                }
                Ok(Err(_)) | Err(_) => {
                    tracing::warn!("not ready: the repository did not answer within {READY_FOR:?}");
                    false
                }
            };
            *last = Some((std::time::Instant::now(), ready));
            ready
        }
    };
    match ready {
        true => (StatusCode::OK, "ready\n").into_response(),
        false => (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: the repository does not answer\n",
        )
            .into_response(),
    }
}

/// A handler that panics answers 500 with no more than that: the panic's text (and
/// whatever it names) stays in the server's log, and the server goes on.
async fn no_panics(req: Request, next: Next) -> Response {
    use futures::FutureExt;
    match std::panic::AssertUnwindSafe(next.run(req))
        .catch_unwind()
        .await
    {
        Ok(r) => r,
        Err(_) => {
            tracing::error!("a request panicked; answered 500");
            crate::reply::failed(sealvol_core::Error::new(
                sealvol_core::error::ErrorKind::Io,
                "the request failed on the server",
            ))
        }
    }
}

/// The one check every request passes: a known, unrevoked key, whose grant the handlers
/// then find in the request's extensions; or, for a run only, a fellow's pass of the
/// ring for this server (read-only, the caller's scope).
async fn authenticate(State(served): State<Served>, mut req: Request, next: Next) -> Response {
    let pass = req
        .headers()
        .get(sealvol_wire::membership::PASS_HEADER)
        .and_then(|v| v.to_str().ok());
    if let Some(pass) = pass
        && req.headers().get(header::AUTHORIZATION).is_none()
    {
        let runs = req.method() == axum::http::Method::POST && req.uri().path() == ROUTES[1].0;
        let taken = match (runs, served.chunks.credential()) {
            (true, Some(c)) => c.take(pass, served.chunks.id()),
            (false, _) => Err("a pass is taken for runs only"),
            (true, None) => Err("this server has no ring key"),
        };
        return match taken {
            Ok(grant) => {
                let share = match served.shares.take(Caller::Key(grant.name.clone())) {
                    Ok(s) => s,
                    Err(why) => return past_share(why),
                };
                req.extensions_mut().insert(Arc::new(grant));
                req.extensions_mut().insert(Passed);
                shares::held(next.run(req).await, share)
            }
            Err(why) => {
                tracing::warn!("a ring pass was refused: {why}");
                let e = sealvol_core::Error::new(
                    sealvol_core::error::ErrorKind::Denied,
                    format!("ring pass refused: {why}"),
                );
                closing(crate::reply::error_response(StatusCode::UNAUTHORIZED, &e))
            }
        };
    }
    let header = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    match served.keys.check(header) {
        Ok(grant) => {
            let share = match served.shares.take(Caller::Key(grant.name.clone())) {
                Ok(s) => s,
                Err(why) => return past_share(why),
            };
            req.extensions_mut().insert(Arc::new(grant));
            shares::held(next.run(req).await, share)
        }
        Err(refused) => {
            let e =
                sealvol_core::Error::new(sealvol_core::error::ErrorKind::Denied, refused.message());
            // A registry client asks again with the credentials the challenge names: a
            // key as the password of any user (a pod's pull secret, `skopeo --creds`).
            if req.uri().path().starts_with("/v2/") {
                let mut r = crate::registry::Refusal::unauthorized(refused.message());
                r.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Basic realm=\"sealvol\""),
                );
                return closing(r);
            }
            let mut r = crate::reply::error_response(StatusCode::UNAUTHORIZED, &e);
            r.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            // As the Hub answers a private repo asked for without a token: its clients
            // raise `RepositoryNotFoundError`, with this reason (pass HF_TOKEN).
            if req.uri().path().starts_with("/hf/") {
                r.headers_mut()
                    .insert("x-error-code", HeaderValue::from_static("RepoNotFound"));
            }
            closing(r)
        }
    }
}

/// The probes and the ring's id, within the share of callers without a key.
async fn anonymous(State(served): State<Served>, req: Request, next: Next) -> Response {
    match served.shares.take(Caller::Anonymous) {
        Ok(share) => shares::held(next.run(req).await, share),
        Err(why) => past_share(why),
    }
}

/// A caller past its share of the server: 429 at once, the request read no further,
/// and the connection closed, so that it holds nothing of the server's.
fn past_share(why: String) -> Response {
    let e = sealvol_core::Error::new(sealvol_core::error::ErrorKind::Busy, why)
        .hint("send fewer requests at once; the server serves others meanwhile");
    closing(crate::reply::failed(e))
}

/// `r`, and the connection closed after it: a refused caller holds no connection past
/// its answer.
fn closing(mut r: Response) -> Response {
    r.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    r
}

#[derive(serde::Deserialize)]
struct RingIdQuery {
    challenge: Option<String>,
}

/// This server's instance id; with `?challenge=` (64 hex digits), the id signed with
/// the ring's key with the challenge (`credential::Proof`), which proves this server is
/// one of the ring's to whoever asks: a node before it sends its key, a fellow before
/// it sends a pass.
async fn ring_id(State(served): State<Served>, Query(q): Query<RingIdQuery>) -> Response {
    let id = served.chunks.id();
    let Some(text) = q.challenge else {
        return format!("{id}\n").into_response();
    };
    let mut challenge = [0u8; 32];
    if hex::decode_to_slice(text.trim(), &mut challenge).is_err() {
        return bad_request("a challenge is 64 hex digits".into());
    }
    match served
        .chunks
        .credential()
        .and_then(|c| c.prove(&challenge, id))
    {
        Some(proof) => crate::reply::json(&proof),
        None => crate::reply::failed(sealvol_core::Error::new(
            sealvol_core::error::ErrorKind::Unavailable,
            "this server has no ring key to prove it is a server of the ring",
        )),
    }
}

/// Marks a request that came with a fellow's pass (`credential::Credential::take`).
#[derive(Clone, Copy)]
pub struct Passed;

/// What this server served and read, for `sealvol peers` (any key: counters only).
async fn ring_report(State(served): State<Served>) -> Response {
    crate::reply::json(&crate::report::report(&served.chunks))
}

async fn run(
    State(served): State<Served>,
    Extension(grant): Extension<Arc<Grant>>,
    passed: Option<Extension<Passed>>,
    headers: HeaderMap,
    body: Body,
) -> Reply {
    let body = crate::reply::read_body(body, MAX_BODY).await?;
    let req: RunRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            return Err(bad_request(format!(
                "not a run request ({e:.200}): send {{\"file\": HEX, \"pack\": HEX, \"offset\": N, \"chunks\": [[HEX, LEN], …]}}"
            )));
        }
    };
    let (Some(file), Some(pack)) = (Hash::parse_hex(&req.file), Hash::parse_hex(&req.pack)) else {
        return Err(bad_request(format!(
            "not a file hash and pack id: {:.80}, {:.80} (64 hex digits each)",
            req.file, req.pack
        )));
    };
    let mut chunks = Vec::with_capacity(req.chunks.len());
    for (h, len) in &req.chunks {
        let Some(hash) = Hash::parse_hex(h) else {
            return Err(bad_request(format!(
                "not a chunk hash: {h:.80} (a chunk is named by 64 hex digits)"
            )));
        };
        chunks.push((hash, *len));
    }
    if let Err(why) = crate::chunks::check_run(req.offset, &chunks) {
        return Err(bad_request(why));
    }
    // The answer is held until the client has taken it: within the runs' budget.
    let total: u64 = chunks.iter().map(|(_, len)| *len as u64).sum();
    let Some(share) = crate::budget::for_run(total).await else {
        return Err(crate::reply::busy());
    };
    let service = Arc::clone(&served.chunks);
    let steward = Arc::clone(&served.steward);
    let offset = req.offset;
    let asker = crate::fellows::Asker {
        file,
        grant: Arc::clone(&grant),
        forwarded: headers.contains_key(crate::fellows::FORWARDED) || passed.is_some(),
    };
    let outcome = tokio::task::spawn_blocking(move || {
        let listed = file_for(&steward, &grant, &file)?;
        // Each chunk asked for must be the file's, where its list says it is.
        let mut at = offset;
        let mut positions = Vec::with_capacity(chunks.len());
        for (h, len) in &chunks {
            let p = listed
                .position(&pack, at)
                .filter(|&p| {
                    let e = &listed.obj.chunks[p].entry;
                    e.hash == *h && e.stored_len == *len
                })
                .ok_or_else(|| {
                    Miss::Invalid(format!(
                        "chunk {} at offset {at} of pack {} is not one of file {}'s",
                        h.hex(),
                        pack.hex(),
                        file.hex()
                    ))
                })?;
            positions.push(p);
            at += *len as u64;
        }
        let pieces = service.get_run(&pack, offset, &chunks, Some(&asker))?;
        prove_pieces(&service, &steward, &listed, &positions, &pieces)?;
        Ok(pieces)
    })
    .await
    .unwrap_or_else(|_| Err(Miss::Unavailable("the fetch failed on the server".into())));
    Ok(match outcome {
        Ok(pieces) => {
            let total: usize = pieces.iter().map(|p| p.len()).sum();
            sealvol_core::read::add(&served.chunks.counters.bytes_served, total as u64);
            use futures::StreamExt;
            // The budget's share goes with the body, and back when it is dropped.
            let body = Body::from_stream(futures::stream::iter(pieces).map(move |p| {
                let _held = &share;
                Ok::<_, std::convert::Infallible>(Bytes::from_owner(p))
            }));
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
    })
}

/// The chunk list of `file`, if `grant` may read that file.
fn file_for(
    steward: &Steward,
    grant: &Grant,
    file: &Hash,
) -> Result<Arc<crate::lists::Listed>, Miss> {
    let reached = steward
        .reach
        .reaches(grant, file)
        .map_err(|e| Miss::Unavailable(e.to_string()))?;
    if !reached {
        return Err(Miss::Denied(format!(
            "key {} ({}) may not read file {}: no version of its namespaces holds it",
            grant.name,
            grant.scope(),
            file.hex()
        )));
    }
    steward.lists.get(file).map_err(|e| match e.kind() {
        sealvol_core::error::ErrorKind::NotFound => {
            Miss::Invalid(format!("no chunk list of file {} is stored", file.hex()))
        }
        sealvol_core::error::ErrorKind::Corrupt => Miss::Corrupt(e.message().to_string()),
        _ => Miss::Unavailable(e.to_string()),
    })
}

/// Proves `pieces` (chunks at `positions` of `obj`'s list) to be the file's before
/// they are sent, with the read layer's one proven read (`Chunks::fetch_proving`) over
/// what the server holds (`held::HeldChunks`): every block they lie in hashed against the file's
/// proof, the bytes a block reaches into beyond them fetched through the cache like any
/// chunk. A list that fails is recorded (`damage/files/`) and nothing is sent.
fn prove_pieces(
    service: &ChunkService,
    steward: &Steward,
    listed: &crate::lists::Listed,
    positions: &[usize],
    pieces: &[sealvol_core::read::ChunkBytes],
) -> Result<(), Miss> {
    let obj = &listed.obj;
    let proved = (|| -> sealvol_core::Result<()> {
        let mut k = 0;
        while k < positions.len() {
            let mut n = 1;
            while k + n < positions.len() && positions[k + n] == positions[k] + n {
                n += 1;
            }
            let first = positions[k];
            let _turn = listed.proving(obj.start_of(first));
            let held = crate::held::HeldChunks::with_run(
                service,
                &steward.repo,
                (first, &pieces[k..k + n]),
            );
            let bytes = obj.start_of(first)..obj.start_of(first + n);
            held.fetch_proving(obj, first..first + n, bytes)?;
            k += n;
        }
        Ok(())
    })();
    proved.map_err(|e| match sealvol_core::proof::is_unproven(&e) {
        true => Miss::Corrupt(e.message().to_string()),
        false => Miss::Unavailable(e.message().to_string()),
    })
}

/// What a client is told when a chunk cannot be served: never the bytes.
fn miss_response(miss: Miss) -> Response {
    match miss {
        Miss::Invalid(why) => bad_request(why),
        Miss::Denied(why) => crate::reply::denied(why),
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
struct ChunkQuery {
    file: Option<String>,
}

fn bad_request(what: String) -> Response {
    (StatusCode::BAD_REQUEST, what + "\n").into_response()
}

/// One chunk of file `?file=`, as its list names it, proven like a run.
async fn chunk(
    State(served): State<Served>,
    Extension(grant): Extension<Arc<Grant>>,
    Path(hash): Path<String>,
    Query(q): Query<ChunkQuery>,
    headers: HeaderMap,
) -> Response {
    let Some(h) = Hash::parse_hex(&hash) else {
        return bad_request(format!(
            "not a chunk hash: {hash:.80} (a chunk is named by 64 hex digits)"
        ));
    };
    let Some(file) = q.file.as_deref().and_then(Hash::parse_hex) else {
        return bad_request(
            "name the file the chunk is read for: ?file=HASH (64 hex digits)".into(),
        );
    };
    let etag = format!("\"{}\"", h.hex());
    if headers
        .get(header::IF_NONE_MATCH)
        .is_some_and(|v| v.as_bytes() == etag.as_bytes())
    {
        return (StatusCode::NOT_MODIFIED, immutable(&etag)).into_response();
    }
    let service = Arc::clone(&served.chunks);
    let steward = Arc::clone(&served.steward);
    let outcome = tokio::task::spawn_blocking(move || {
        let listed = file_for(&steward, &grant, &file)?;
        let p = listed
            .obj
            .chunks
            .iter()
            .position(|c| c.entry.hash == h)
            .ok_or_else(|| {
                Miss::Invalid(format!(
                    "chunk {} is not one of file {}'s",
                    h.hex(),
                    file.hex()
                ))
            })?;
        let c = &listed.obj.chunks[p];
        let hint = crate::chunks::Hint {
            pack: listed.obj.packs[c.pack as usize],
            offset: c.entry.offset,
            len: c.entry.stored_len,
        };
        let bytes = service.get(&h, Some(hint))?;
        prove_pieces(
            &service,
            &steward,
            &listed,
            &[p],
            std::slice::from_ref(&bytes),
        )?;
        Ok(bytes)
    })
    .await
    .unwrap_or_else(|_| Err(Miss::Unavailable("the fetch failed on the server".into())));
    match outcome {
        Ok(bytes) => {
            sealvol_core::read::add(&served.chunks.counters.bytes_served, bytes.len() as u64);
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

async fn metrics(State(served): State<Served>) -> impl IntoResponse {
    // Off the async threads: a namespace's usage may be counted from its versions.
    let text = tokio::task::spawn_blocking(move || {
        crate::metrics::serve_text(&served.chunks, &served.keys)
    })
    .await
    .unwrap_or_default();
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; version=0.0.4"),
        )],
        text,
    )
}
