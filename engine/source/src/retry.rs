//! Transient source failures (timeouts, resets, 5xx, throttling) are retried with
//! exponential backoff and jitter; anything else fails at once, since asking again
//! cannot fix a 403 or a missing bucket.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::Notes;
use sealvol_core::error::{Error, ErrorKind, Result};
use sealvol_core::patience::Tries;

tokio::task_local! {
    static LOG: Notes;
}

/// Runs `fut` as one request of the job `log` belongs to: its retries told to the
/// job's own log, and counted by the job's pacer (`pace`) while it runs.
pub async fn logged<F: Future>(log: Notes, fut: F) -> F::Output {
    let _active = log.pacer().map(|p| p.enter());
    LOG.scope(log, fut).await
}

/// Tells the job's log, when there is one (see `logged`), and the process log.
pub fn say(line: String) {
    tracing::warn!("{line}");
    let _ = LOG.try_with(|log| log.say(line));
}

/// Waits out a backoff of `d`; a job whose every request waits gives its slot up
/// meanwhile (`pace`).
pub async fn back_off(d: Duration) {
    match LOG.try_with(|log| log.pacer().cloned()).ok().flatten() {
        Some(pacer) => pacer.backoff(d).await,
        None => tokio::time::sleep(d).await,
    }
}

/// Runs `fut` until it ends or `cancel` is set, whichever is first: dropping it ends
/// whatever it waits on (a slow read, a retry's backoff sleep).
pub async fn cancellable<T>(
    cancel: &AtomicBool,
    fut: impl Future<Output = Result<T>>,
) -> Result<T> {
    tokio::select! {
        r = fut => r,
        () = cancelled(cancel) => Err(Error::cancelled()),
    }
}

/// How often a cancel flag is looked at: "within a moment" is this.
const CANCEL_POLL: Duration = Duration::from_millis(50);

async fn cancelled(cancel: &AtomicBool) {
    while !cancel.load(Ordering::Relaxed) {
        tokio::time::sleep(CANCEL_POLL).await;
    }
}

/// Tries per request at most: with the backoff below, about 30 s of quick failures
/// (5xx, throttling) are ridden out. Tries that wait for an answer are fewer: they stop
/// once another could not end within the request's total (`patience`).
pub const ATTEMPTS: u32 = 6;
const FIRST_DELAY: Duration = Duration::from_millis(250);
const MAX_DELAY: Duration = Duration::from_secs(10);

/// Runs `op` until it succeeds, fails permanently, has failed `ATTEMPTS` times, or
/// has used up the request's total (`patience::total`).
pub async fn retrying<T, F, Fut>(what: &str, mut op: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let mut delay = FIRST_DELAY;
    let mut tries = Tries::new();
    let started = tokio::time::Instant::now();
    loop {
        tries.count += 1;
        let e = match op().await {
            Err(e) if e.kind() == ErrorKind::Unavailable => e,
            other => return other,
        };
        let wait = delay + jitter(delay);
        if tries.count >= ATTEMPTS {
            return Err(e);
        }
        if !tries.may_retry(started.elapsed(), wait) {
            return Err(tries.gave_up(what, e, started.elapsed()));
        }
        // The error usually names the object already: said once.
        let said = match e.message().starts_with(what) {
            true => e.to_string(),
            false => format!("{what}: {e}"),
        };
        say(format!(
            "{said}; retrying in {:.1} s ({}/{ATTEMPTS})",
            wait.as_secs_f64(),
            tries.count
        ));
        back_off(wait).await;
        delay = (delay * 2).min(MAX_DELAY);
    }
}

/// Up to a quarter of `d`, so that many parts failing together do not retry together.
fn jitter(d: Duration) -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |t| t.subsec_nanos());
    d / 4 * (nanos % 1000) / 1000
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    #[tokio::test(start_paused = true)]
    async fn transient_errors_are_retried_and_permanent_ones_are_not() {
        let calls = AtomicU32::new(0);
        let r: Result<u32> = retrying("get", || async {
            let n = calls.fetch_add(1, Ordering::SeqCst);
            if n < 2 {
                Err(Error::new(ErrorKind::Unavailable, "reset"))
            } else {
                Ok(n)
            }
        })
        .await;
        assert_eq!(r.unwrap(), 2);

        calls.store(0, Ordering::SeqCst);
        let r: Result<u32> = retrying("get", || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(Error::new(ErrorKind::Denied, "403"))
        })
        .await;
        assert_eq!(r.unwrap_err().kind(), ErrorKind::Denied);
        assert_eq!(calls.load(Ordering::SeqCst), 1, "a 403 is not retried");

        calls.store(0, Ordering::SeqCst);
        let r: Result<u32> = retrying("get", || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(Error::new(ErrorKind::Unavailable, "503"))
        })
        .await;
        assert_eq!(r.unwrap_err().kind(), ErrorKind::Unavailable);
        assert_eq!(calls.load(Ordering::SeqCst), ATTEMPTS);
    }

    /// A backend that never answers: each try waits its answer out, and the request
    /// gives up within the total, saying since when.
    #[tokio::test(start_paused = true)]
    async fn a_backend_that_never_answers_is_given_up_within_the_total() {
        let calls = AtomicU32::new(0);
        let started = tokio::time::Instant::now();
        let r: Result<u32> = retrying("s3://b/k", || async {
            calls.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(sealvol_core::patience::answer()).await;
            Err(Error::new(
                ErrorKind::Unavailable,
                "no answer from http://x",
            ))
        })
        .await;
        let took = started.elapsed();
        let e = r.unwrap_err();
        assert!(took <= sealvol_core::patience::total(), "{took:?}");
        assert!(took >= sealvol_core::patience::total() / 2, "{took:?}");
        assert!(calls.load(Ordering::SeqCst) < ATTEMPTS);
        assert!(e.message().contains("failing since"), "{e}");
        assert!(
            e.message().starts_with("s3://b/k: no answer from http://x"),
            "{e}"
        );
    }
}
