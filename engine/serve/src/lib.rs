//! Serve: the in-cluster cache tier over HTTP. Nodes ask it for chunks by hash; it
//! answers from its own bounded disk cache, or pulls the chunk through from the origin
//! repository once however many nodes ask at the same time, and never sends a byte that
//! fails its hash. (The remote engine API, API keys and mirrored origins are issue 19's
//! later steps.)
//!
//! - `chunks`: the pull-through cache with single flight;
//! - `http`: the routes, immutable chunk URLs, and `/metrics`;
//! - `peer`: the client a node's read path uses (`read::Peer`).

pub mod chunks;
pub mod http;
pub mod peer;

use std::net::SocketAddr;
use std::sync::Arc;

pub use chunks::ChunkService;

/// Why an address may not be listened on as asked.
pub fn check_listen(addr: &SocketAddr, insecure_http: bool) -> Result<(), String> {
    if addr.ip().is_loopback() || insecure_http {
        return Ok(());
    }
    Err(format!(
        "serve: {addr} is not a loopback address, and this server has no TLS yet: \
         listen on 127.0.0.1, or pass --insecure-http on a network you trust"
    ))
}

/// Serves `service` on `listener` until the task is dropped.
pub async fn run(
    listener: tokio::net::TcpListener,
    service: Arc<ChunkService>,
) -> std::io::Result<()> {
    axum::serve(listener, http::router(service)).await
}
