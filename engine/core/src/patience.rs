//! How long sealvol waits on a backend (a bucket, a source, a remote engine) that
//! accepts connections but does not answer. Every client connects within `CONNECT`,
//! waits at most `answer()` for the first byte of an answer and between two bytes, and
//! retries a failed request only while one more try, waited out in vain, would still end
//! within `total()`: so one request gives up within the total however the backend
//! fails, and so does every command made of them (a push against a frozen bucket fails
//! in about two minutes, not in six tries of a minute for each of its requests).
//!
//! The total is process-wide: `--timeout`, `SEALVOL_TIMEOUT` or `timeout` in
//! config.toml set it once, before any client is made. (A mount's reads have their
//! own deadline, `--read-timeout`: `deadline`.)

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use crate::error::{Error, ErrorKind};

/// How long one request may go unanswered, its retries included, by default.
pub const DEFAULT: Duration = Duration::from_secs(120);

/// How long a connection may take to open.
pub const CONNECT: Duration = Duration::from_secs(10);

/// How long a try waits for the first byte of an answer, or between two bytes of one.
const ANSWER: Duration = Duration::from_secs(20);

static TOTAL_MS: AtomicU64 = AtomicU64::new(DEFAULT.as_millis() as u64);

/// Sets the total for this process (at least a second).
pub fn set(total: Duration) {
    let ms = total.as_millis().clamp(1000, u64::MAX as u128) as u64;
    TOTAL_MS.store(ms, Ordering::Relaxed);
}

/// How long one request may go unanswered, its retries included.
pub fn total() -> Duration {
    Duration::from_millis(TOTAL_MS.load(Ordering::Relaxed))
}

/// How long a try waits for an answer's first byte, or between two of its bytes.
pub fn answer() -> Duration {
    ANSWER.min(total())
}

/// How long a connection may take to open: never more than the total.
pub fn connect() -> Duration {
    CONNECT.min(total())
}

/// One request's tries, for the retry loops of every client. The time they took is
/// the caller's to measure (an async client measures on its runtime's clock).
pub struct Tries {
    since: SystemTime,
    pub count: u32,
}

impl Default for Tries {
    fn default() -> Self {
        Tries::new()
    }
}

impl Tries {
    pub fn new() -> Tries {
        Tries {
            since: SystemTime::now(),
            count: 0,
        }
    }

    /// Whether another try may start after `backoff`, `elapsed` into the request: one
    /// that then waits out its answer in vain still ends within the total.
    pub fn may_retry(&self, elapsed: Duration, backoff: Duration) -> bool {
        elapsed + backoff + answer() <= total()
    }

    /// The error for a request given up after `elapsed`: what the last try said, since
    /// when the backend has failed, and how to wait longer.
    pub fn gave_up(&self, what: &str, last: Error, elapsed: Duration) -> Error {
        let took = elapsed.as_secs();
        let since = crate::stamp::rfc3339(self.since);
        let at = since.get(11..19).unwrap_or(&since);
        let tries = match self.count {
            1 => "1 try".to_string(),
            n => format!("{n} tries"),
        };
        let said = last.message();
        let message = match said.starts_with(what) {
            true => format!("{said} (failing since {at} UTC, {took} s, {tries})"),
            false => format!("{what}: {said} (failing since {at} UTC, {took} s, {tries})"),
        };
        let wait = format!(
            "--timeout (now {} s) sets how long a request may go unanswered",
            total().as_secs()
        );
        Error::new(ErrorKind::Unavailable, message).hint(match last.hint_text() {
            Some(h) => format!("{h}; {wait}"),
            None => format!("check the service and the network; {wait}"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retry_starts_only_if_it_could_end_within_the_total() {
        let t = Tries::new();
        assert!(t.may_retry(Duration::ZERO, Duration::ZERO));
        assert!(
            !t.may_retry(Duration::ZERO, total()),
            "a backoff as long as the total"
        );
        assert!(!t.may_retry(
            total() - answer() + Duration::from_millis(1),
            Duration::ZERO
        ));
        let e = t.gave_up(
            "s3://b/p/k",
            Error::new(ErrorKind::Unavailable, "no answer"),
            Duration::from_secs(3),
        );
        assert!(
            e.message()
                .starts_with("s3://b/p/k: no answer (failing since "),
            "{e}"
        );
        assert!(e.hint_text().unwrap_or("").contains("--timeout"), "{e}");
    }
}
