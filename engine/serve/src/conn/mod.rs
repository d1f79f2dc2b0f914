//! Connections: each served over HTTP/1 with limits a hostile client cannot stretch,
//! and shares no tenant can take from another.
//!
//! - Request headers must arrive within `Limits::header_timeout` (`HEADER_TIMEOUT`,
//!   20 s, unless `serve --header-timeout`) of the server starting to read them,
//!   which is also how long an idle kept-alive connection stays open.
//! - At most `Limits::connections` are open at once; when all are, the oldest one
//!   that waits for a request (idle, or keyless with its head not sent) is closed to
//!   make room (`door`), so idle clients never keep a caller out.
//! - A key has at most `Limits::per_key` requests under way, requests without a key
//!   `Limits::anonymous` together (`shares`); past it, 429 at once.
//! - A client that keeps the server's writes waiting must read at least the floor
//!   (`Limits::floor`, 64 KiB/s over 30 s of waiting), or its connection ends
//!   (`floor`).
//! - Bodies that stop coming end in the handlers (`reply::BODY_IDLE`).

pub mod door;
pub mod floor;
pub mod shares;

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::response::Response;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;

use door::{Door, Place};
pub use floor::Floor;

/// How long a connection may take to send a request's head, or sit idle between
/// requests, unless `serve --header-timeout` says otherwise.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(20);
/// The most bytes of request head (line and headers) a client may send.
const MAX_HEAD: usize = 64 << 10;

/// What a server's connections may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections open at once, idle ones included.
    pub connections: usize,
    /// Requests one key may have under way at once.
    pub per_key: usize,
    /// Requests without a key (probes, the ring's id) under way at once, together.
    pub anonymous: usize,
    pub floor: Floor,
    /// How long a request's head may take to arrive, an idle connection included.
    pub header_timeout: Duration,
}

impl Limits {
    /// 4,096 connections (a file descriptor each: `serve` raises its limit to fit),
    /// 256 requests under way per key: a sixteenth, so that a few keys' slow readers
    /// cannot take them all, and what a key's answers hold in memory stays bounded.
    pub const DEFAULT: Limits = Limits {
        connections: 4096,
        per_key: 256,
        anonymous: 64,
        floor: Floor::DEFAULT,
        header_timeout: HEADER_TIMEOUT,
    };
}

impl Default for Limits {
    fn default() -> Limits {
        Limits::DEFAULT
    }
}

/// Serves `router` on every connection `listener` accepts, until the task is dropped.
pub async fn serve<L>(mut listener: L, router: axum::Router, limits: Limits) -> std::io::Result<()>
where
    L: axum::serve::Listener,
{
    let door = Door::new(limits.connections);
    loop {
        let (io, _addr) = listener.accept().await;
        let (place, close) = door.enter().await;
        let service = Tracked {
            inner: TowerToHyperService::new(router.clone()),
            place: Arc::new(place),
        };
        tokio::spawn(async move {
            let (io, below_floor) = floor::floored(io, limits.floor);
            let io = TokioIo::new(io);
            let mut http = hyper::server::conn::http1::Builder::new();
            http.timer(TokioTimer::new())
                .header_read_timeout(limits.header_timeout)
                .max_buf_size(MAX_HEAD.max(8192))
                .keep_alive(true);
            let conn = http.serve_connection(io, service);
            tokio::pin!(conn);
            let ended = tokio::select! {
                r = conn.as_mut() => r.map_err(|e| e.to_string()),
                _ = close => {
                    // Made room for a newer one: idle, so it closes at once.
                    conn.as_mut().graceful_shutdown();
                    conn.await.map_err(|e| e.to_string())
                }
                // Dropped with the task: the socket closes, whatever it was writing.
                e = below_floor.breached() => Err(e.to_string()),
            };
            if let Err(e) = ended {
                tracing::debug!("a connection ended: {e}");
            }
        });
    }
}

/// The router, telling the connection's place whether a request is under way: from
/// its head until its answer's last byte is sent.
struct Tracked {
    inner: TowerToHyperService<axum::Router>,
    place: Arc<Place>,
}

/// A request under way on its connection.
struct Busy(Arc<Place>);

impl Busy {
    fn new(place: Arc<Place>) -> Busy {
        place.busy(true);
        Busy(place)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.busy(false);
    }
}

impl hyper::service::Service<hyper::Request<Incoming>> for Tracked {
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn call(&self, req: hyper::Request<Incoming>) -> Self::Future {
        let busy = Busy::new(Arc::clone(&self.place));
        let answered = self.inner.call(req);
        Box::pin(async move { answered.await.map(|r| shares::held(r, busy)) })
    }
}
