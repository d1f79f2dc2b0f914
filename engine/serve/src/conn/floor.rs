//! The slowest reader a connection serves: a client that keeps the server's writes
//! waiting must take at least `Floor::rate` bytes a second over the time it keeps
//! them waiting, judged every `Floor::window` of such time; below that, the
//! connection ends. A client that reads nothing for a window takes 0 B/s and ends as
//! well. Only the time the client blocks counts: a server that has nothing to send
//! (a slow origin, a kept-alive connection between requests) never ends one.
//!
//! `Floored` (the connection's I/O) only measures; `Watch`, polled beside the
//! connection, judges and ends it. The judge does not wait for the HTTP stack to write
//! again: a connection whose writes wait is not polled again until they can go.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Floor {
    /// Bytes a second.
    pub rate: u64,
    pub window: Duration,
}

impl Floor {
    /// 64 KiB/s over 30 s of blocked writes: far below any reader that means to read
    /// (a loader on a slow link takes MiB/s), far above one that holds a connection
    /// with a trickle.
    pub const DEFAULT: Floor = Floor {
        rate: 64 << 10,
        window: Duration::from_secs(30),
    };

    /// Bytes a client must take while it blocks the server for a whole window.
    fn least(&self) -> u64 {
        (self.rate as u128 * self.window.as_millis() / 1000) as u64
    }
}

/// What a connection's client took, and how long it kept writes waiting, this window.
#[derive(Debug, Default)]
struct Gauge {
    /// Time writes waited in this window, before `blocked_at`.
    blocked_for: Duration,
    /// Since when the current write waits, if one does.
    blocked_at: Option<Instant>,
    taken: u64,
}

/// `io`, measured, and the watch that ends it below `floor`.
pub fn floored<T>(io: T, floor: Floor) -> (Floored<T>, Watch) {
    let gauge = Arc::new(Mutex::new(Gauge::default()));
    (
        Floored {
            inner: io,
            gauge: Arc::clone(&gauge),
        },
        Watch { gauge, floor },
    )
}

pub struct Floored<T> {
    inner: T,
    gauge: Arc<Mutex<Gauge>>,
}

pub struct Watch {
    gauge: Arc<Mutex<Gauge>>,
    floor: Floor,
}

fn lock(g: &Mutex<Gauge>) -> std::sync::MutexGuard<'_, Gauge> {
    g.lock().unwrap_or_else(|p| p.into_inner())
}

impl Watch {
    /// Resolves, with the reason, once the client read below the floor.
    pub async fn breached(self) -> std::io::Error {
        loop {
            let next = {
                let mut g = lock(&self.gauge);
                let now = Instant::now();
                let mut waited = g.blocked_for + g.blocked_at.map_or(Duration::ZERO, |at| now - at);
                if waited >= self.floor.window {
                    if g.taken < self.floor.least() {
                        return too_slow(&self.floor);
                    }
                    // Enough for that window; the next one starts now.
                    g.blocked_for = Duration::ZERO;
                    g.blocked_at = g.blocked_at.map(|_| now);
                    g.taken = 0;
                    waited = Duration::ZERO;
                }
                // The soonest this window can be over.
                self.floor.window - waited
            };
            tokio::time::sleep(next).await;
        }
    }
}

fn too_slow(floor: &Floor) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        format!(
            "the client read less than {} KiB/s over {} s",
            floor.rate >> 10,
            floor.window.as_secs()
        ),
    )
}

impl<T> Floored<T> {
    /// Accounts a write: a waiting one starts the clock, one that took bytes stops it.
    fn measure<R>(
        &self,
        poll: Poll<std::io::Result<R>>,
        taken: impl Fn(&R) -> u64,
    ) -> Poll<std::io::Result<R>> {
        match &poll {
            Poll::Pending => {
                lock(&self.gauge)
                    .blocked_at
                    .get_or_insert_with(Instant::now);
            }
            Poll::Ready(Ok(v)) if taken(v) > 0 => {
                let mut g = lock(&self.gauge);
                if let Some(at) = g.blocked_at.take() {
                    g.blocked_for += Instant::now() - at;
                }
                g.taken += taken(v);
            }
            // A flush that is done (a TCP flush always is) took no byte: no progress.
            Poll::Ready(_) => {}
        }
        poll
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Floored<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Floored<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.measure(poll, |n| *n as u64)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.measure(poll, |n| *n as u64)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let poll = Pin::new(&mut self.inner).poll_flush(cx);
        self.measure(poll, |_| 0)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    const FLOOR: Floor = Floor {
        rate: 64 << 10,
        window: Duration::from_secs(30),
    };

    /// Writes `data` to `io` until done or the watch ends it, as a connection does.
    async fn write_watched<T: AsyncWrite + Unpin>(
        io: &mut Floored<T>,
        watch: Watch,
        data: &[u8],
    ) -> std::io::Result<()> {
        tokio::select! {
            r = io.write_all(data) => r,
            e = watch.breached() => Err(e),
        }
    }

    /// A server side writing `total` bytes to a client that reads `step` bytes every
    /// `every`, through a pipe of 16 KiB: how many bytes got through, and how the
    /// writing ended.
    async fn serve_to(step: usize, every: Duration, total: usize) -> (usize, std::io::Result<()>) {
        let (server, mut client) = tokio::io::duplex(16 << 10);
        let writer = tokio::spawn(async move {
            let (mut io, watch) = floored(server, FLOOR);
            write_watched(&mut io, watch, &vec![7u8; total]).await
        });
        let mut got = 0;
        let mut buf = vec![0u8; step];
        while !writer.is_finished() {
            tokio::time::sleep(every).await;
            match client.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got += n,
            }
        }
        (got, writer.await.unwrap())
    }

    #[tokio::test(start_paused = true)]
    async fn a_trickle_reader_is_ended_after_a_window() {
        // 64 KiB every 30 s: 2 KiB/s.
        let started = Instant::now();
        let (got, ended) = serve_to(64 << 10, Duration::from_secs(30), 64 << 20).await;
        let e = ended.unwrap_err();
        assert!(
            e.to_string().contains("less than 64 KiB/s over 30 s"),
            "{e}"
        );
        assert!(
            started.elapsed() <= Duration::from_secs(61),
            "{:?}",
            started.elapsed()
        );
        assert!(got < 1 << 20);
    }

    #[tokio::test(start_paused = true)]
    async fn a_reader_that_takes_nothing_is_ended_after_a_window() {
        let (server, _client) = tokio::io::duplex(16 << 10);
        let (mut io, watch) = floored(server, FLOOR);
        let started = Instant::now();
        let e = write_watched(&mut io, watch, &vec![1u8; 1 << 20])
            .await
            .unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::TimedOut);
        assert_eq!(started.elapsed(), FLOOR.window);
    }

    #[tokio::test(start_paused = true)]
    async fn a_reader_above_the_floor_is_served_to_the_end() {
        // 16 KiB every 100 ms: 160 KiB/s, for 8 MiB (about 51 s of blocked writes).
        let (got, ended) = serve_to(16 << 10, Duration::from_millis(100), 8 << 20).await;
        ended.unwrap();
        assert!(got >= (8 << 20) - (16 << 10), "{got}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_server_with_nothing_to_send_never_ends_the_connection() {
        let (server, mut client) = tokio::io::duplex(16 << 10);
        let (mut io, watch) = floored(server, FLOOR);
        let watch = tokio::spawn(watch.breached());
        for _ in 0..5 {
            tokio::time::sleep(Duration::from_secs(60)).await;
            io.write_all(b"a few bytes").await.unwrap();
            let mut buf = [0u8; 11];
            client.read_exact(&mut buf).await.unwrap();
        }
        assert!(!watch.is_finished());
        watch.abort();
    }
}
