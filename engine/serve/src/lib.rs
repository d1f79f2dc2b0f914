//! Serve: the in-cluster cache tier over HTTP. Nodes ask it for chunks by hash; it
//! answers from its own bounded disk cache, or pulls the chunk through from the origin
//! repository once however many nodes ask at the same time, and never sends a byte that
//! fails its hash. The same server is the remote engine: it offers the repository's
//! objects to a CLI or console elsewhere, to the holders of API keys, each checked on
//! every request and scoped by namespace and read/write.
//!
//! - `chunks`: the pull-through cache with single flight;
//! - `checked`: where chunks read from the packs were found good lately;
//! - `fellows`: the other servers of a ring, asked for the runs they own;
//! - `held`: a file's chunks as the server holds them, for the proven read;
//! - `credential`: the ring's keys, with which its servers prove they are its servers;
//! - `jobs`: the server's own sync jobs and their secrets, and live events of them;
//! - `router`: the routes, immutable chunk URLs, `/metrics`, and the key check over all;
//! - `hub`: the Hugging Face Hub's read API (`/hf/`, `HF_ENDPOINT`);
//! - `keys`: API keys (hashed, revocable, scoped);
//! - `maintenance`: garbage collection on a schedule (`--gc-every`);
//! - `metrics`: a mount's Prometheus text and the endpoint that serves it;
//! - `objects`: the remote engine's routes, and what each key may touch;
//! - `ops`: the operations a key holder asks the server to make, and `possession`:
//!   which chunks a push may name (a hash is not a key);
//! - `policy`: what a server keeps to beyond its defaults (`serve`'s flags);
//! - `quota`: a push past its namespace's quota refused before its packs are stored;
//! - `range`: a request's `Range`, one range checked against the size read;
//! - `report`: what a server says of itself to `sealvol peers`;
//! - `tls`: rustls for the server (`--tls-cert`, `--tls-key`).
//!
//! What it says to its clients is `sealvol_wire`'s; its clients are `sealvol_client`,
//! which it uses itself to ask its fellows.

pub mod budget;
pub mod checked;
pub mod chunks;
pub mod conn;
pub mod credential;
pub mod fellows;
pub mod file_body;
pub mod held;
pub mod hub;
pub mod jobs;
pub mod keys;
pub mod known;
pub mod lists;
pub mod maintenance;
pub mod metrics;
pub mod objects;
pub mod ops;
pub mod policy;
pub mod possession;
pub mod quota;
pub mod range;
pub mod reach;
pub mod registry;
pub mod reply;
pub mod report;
pub mod router;
pub mod tls;

use std::net::SocketAddr;
use std::sync::Arc;

pub use chunks::ChunkService;
pub use policy::Policy;

/// Why an address may not be listened on as asked: off loopback, only with TLS or
/// `--insecure-http`.
pub fn check_listen(addr: &SocketAddr, tls: bool, insecure_http: bool) -> Result<(), String> {
    if addr.ip().is_loopback() || tls || insecure_http {
        return Ok(());
    }
    Err(format!(
        "serve: {addr} is not a loopback address and no TLS is given: pass --tls-cert and \
         --tls-key, listen on 127.0.0.1, or pass --insecure-http on a network you trust"
    ))
}

/// Serves `service` to the holders of `keys` on `listener` (plain TCP, or
/// `tls::TlsListener`) until the task is dropped; with `jobs`, the server's agent, it
/// runs sync jobs for them too.
pub async fn run<L>(
    listener: L,
    service: Arc<ChunkService>,
    keys: Arc<keys::Keys>,
    jobs: Option<Arc<jobs::Desk>>,
) -> std::io::Result<()>
where
    L: axum::serve::Listener,
    L::Addr: std::fmt::Debug,
{
    run_with(listener, service, keys, jobs, &Policy::default()).await
}

/// `run`, keeping to `policy` beyond the defaults.
pub async fn run_with<L>(
    listener: L,
    service: Arc<ChunkService>,
    keys: Arc<keys::Keys>,
    jobs: Option<Arc<jobs::Desk>>,
    policy: &Policy,
) -> std::io::Result<()>
where
    L: axum::serve::Listener,
    L::Addr: std::fmt::Debug,
{
    // A revoked key's jobs end with it, queued or running.
    let _revocations = jobs.as_ref().map(|desk| {
        let _ = desk.keys.set(Arc::clone(&keys));
        let task = tokio::spawn(jobs::cancel_revoked(Arc::clone(desk), Arc::clone(&keys)));
        AbortOnDrop(task)
    });
    // The ring's credential, made in the repository by the first server to start (a
    // server's command takes it before it says it listens: `take_credential`).
    if service.credential().is_none() {
        let s = Arc::clone(&service);
        let _ = tokio::task::spawn_blocking(move || take_credential(&s)).await;
    }
    let served = router::Served::new(service, keys, jobs, policy);
    conn::serve(listener, router::router(served), policy.connections).await
}

/// Takes the ring's credential from the repository (made there if it has none), or
/// says why the server has none: it then proves nothing, so nodes send it no key and
/// it asks no fellow.
pub fn take_credential(service: &ChunkService) {
    match credential::Credential::open(Arc::clone(service.repository())) {
        Ok(c) => service.set_credential(Arc::new(c)),
        Err(e) => tracing::warn!(
            "no ring key ({e}): this server cannot prove it is a server of the ring, so nodes send it no key and it asks no fellow"
        ),
    }
}

/// A task that ends with the server.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
