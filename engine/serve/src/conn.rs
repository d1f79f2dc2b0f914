//! Connections: each served over HTTP/1 with limits a hostile client cannot stretch.
//!
//! - Request headers must arrive within `HEADER_TIMEOUT` of the server starting to
//!   read them, which is also how long an idle kept-alive connection stays open.
//! - A response the client stops reading is ended once no byte could be written for
//!   `WRITE_STALL` (a slow reader that keeps reading is served however slowly).
//! - At most `MAX_CONNECTIONS` at once; more wait in the kernel's queue.
//! - Bodies that stop coming end in the handlers (`reply::BODY_IDLE`).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

pub const HEADER_TIMEOUT: Duration = Duration::from_secs(20);
pub const WRITE_STALL: Duration = Duration::from_secs(60);
pub const MAX_CONNECTIONS: usize = 1024;
/// The most bytes of request head (line and headers) a client may send.
const MAX_HEAD: usize = 64 << 10;

/// Serves `router` on every connection `listener` accepts, until the task is dropped.
pub async fn serve<L>(mut listener: L, router: axum::Router) -> std::io::Result<()>
where
    L: axum::serve::Listener,
{
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
            return Ok(());
        };
        let (io, _addr) = listener.accept().await;
        let service = TowerToHyperService::new(router.clone());
        tokio::spawn(async move {
            let _slot = slot;
            let io = TokioIo::new(Stalls::new(io));
            let mut http = hyper::server::conn::http1::Builder::new();
            http.timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .max_buf_size(MAX_HEAD.max(8192))
                .keep_alive(true);
            if let Err(e) = http.serve_connection(io, service).await {
                tracing::debug!("a connection ended: {e}");
            }
        });
    }
}

/// A connection whose writes fail once none could go for `WRITE_STALL`.
struct Stalls<T> {
    inner: T,
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<T> Stalls<T> {
    fn new(inner: T) -> Stalls<T> {
        Stalls {
            inner,
            stalled: None,
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Stalls<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> Stalls<T> {
    /// Runs a write: a ready one clears the stall clock, a pending one starts it and
    /// fails once it runs out.
    fn watch<R>(
        &mut self,
        cx: &mut Context<'_>,
        poll: Poll<std::io::Result<R>>,
    ) -> Poll<std::io::Result<R>> {
        match poll {
            Poll::Ready(r) => {
                self.stalled = None;
                Poll::Ready(r)
            }
            Poll::Pending => {
                let sleep = self
                    .stalled
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(WRITE_STALL)));
                match sleep.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "the client took nothing for a minute",
                    ))),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Stalls<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.watch(cx, poll)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.watch(cx, poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let poll = Pin::new(&mut self.inner).poll_flush(cx);
        self.watch(cx, poll)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
