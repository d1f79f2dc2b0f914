//! The gc lease, `gc/lease`: one collection at a time, without a lock server. It is
//! taken by create-if-absent, renewed by compare-and-swap, and taken over by
//! compare-and-swap once stale: not renewed for `LEASE_TTL` (by the store's clock), or
//! held by a process of this machine that is gone. Safety never rests on it (the
//! rounds' protocol does not care how many collections run); it keeps two from doing
//! the same work and makes the second one say who holds it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use sealvol_core::error::{Error, ErrorKind, Result};
use sealvol_core::repo::{Repository, json_error};
use sealvol_core::stamp::{parse_rfc3339, rfc3339, whoami};
use sealvol_core::store::ETag;

const LEASE_KEY: &str = "gc/lease";
/// A lease not renewed for this long is stale.
pub const LEASE_TTL: Duration = Duration::from_secs(120);
const RENEW_EVERY: Duration = Duration::from_secs(20);

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LeaseRecord {
    pub by: String,
    pub host: String,
    pub pid: u32,
    pub started: String,
    /// Last renewed, by the store's clock.
    pub renewed: String,
}

impl LeaseRecord {
    fn mine(&self) -> bool {
        self.pid == std::process::id() && self.host == sealvol_core::store::host()
    }

    fn stale(&self, now: SystemTime) -> bool {
        let expired = parse_rfc3339(&self.renewed)
            .is_none_or(|r| now.duration_since(r).is_ok_and(|age| age > LEASE_TTL));
        let started = parse_rfc3339(&self.started).unwrap_or(SystemTime::UNIX_EPOCH);
        expired || sealvol_core::store::process_gone(&self.host, self.pid, started)
    }
}

/// A held lease; released when dropped.
pub struct Lease<'a> {
    repo: &'a Repository,
    record: std::sync::Mutex<(LeaseRecord, ETag)>,
    lost: AtomicBool,
}

impl<'a> Lease<'a> {
    /// Takes the lease, or says who holds it.
    pub fn take(repo: &'a Repository) -> Result<Lease<'a>> {
        for _ in 0..8 {
            let now = repo.object_store().now()?;
            let current = repo.object_store().get_versioned(LEASE_KEY)?;
            let expected = match &current {
                None => None,
                Some((bytes, etag)) => match serde_json::from_slice::<LeaseRecord>(bytes) {
                    Ok(held) if !held.stale(now) && !held.mine() => {
                        return Err(Error::new(
                            ErrorKind::Conflict,
                            format!(
                                "another garbage collection is running on this repository: pid {} on {}, by {}, since {}",
                                held.pid,
                                held.host,
                                held.by,
                                sealvol_core::stamp::to_minute(&held.started)
                            ),
                        )
                        .hint(format!(
                            "wait for it to finish; one that was killed loses its lease {}s after it last renewed it",
                            LEASE_TTL.as_secs()
                        )));
                    }
                    Ok(held) => {
                        if !held.mine() {
                            tracing::warn!(
                                "taking over the gc lease of pid {} on {}, which is gone or stopped renewing it",
                                held.pid,
                                held.host
                            );
                        }
                        Some(etag.clone())
                    }
                    // A damaged lease holds nothing.
                    Err(_) => Some(etag.clone()),
                },
            };
            let record = LeaseRecord {
                by: whoami(),
                host: sealvol_core::store::host().to_string(),
                pid: std::process::id(),
                started: rfc3339(now),
                renewed: rfc3339(now),
            };
            let bytes = serde_json::to_vec_pretty(&record).map_err(json_error)?;
            match repo
                .object_store()
                .put_if_match(LEASE_KEY, &bytes, expected.as_ref())
            {
                Ok(()) => {
                    let etag = repo
                        .object_store()
                        .get_versioned(LEASE_KEY)?
                        .map(|(_, e)| e)
                        .ok_or_else(|| Error::new(ErrorKind::Race, "the gc lease vanished"))?;
                    return Ok(Lease {
                        repo,
                        record: std::sync::Mutex::new((record, etag)),
                        lost: AtomicBool::new(false),
                    });
                }
                Err(e) if e.kind() == ErrorKind::Race => continue,
                Err(e) => return Err(e),
            }
        }
        Err(
            Error::new(ErrorKind::Race, "the gc lease keeps changing hands")
                .hint("try again in a moment"),
        )
    }

    /// Renews the lease every `RENEW_EVERY` until `done` is set; run on its own thread.
    pub fn keep(&self, done: &AtomicBool) {
        let mut since = std::time::Instant::now();
        while !done.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(200));
            if since.elapsed() < RENEW_EVERY {
                continue;
            }
            since = std::time::Instant::now();
            if let Err(e) = self.renew() {
                tracing::warn!("cannot renew the gc lease: {e}");
            }
        }
    }

    fn renew(&self) -> Result<()> {
        let mut held = sealvol_core::locks::lock(&self.record);
        let mut record = held.0.clone();
        record.renewed = rfc3339(self.repo.object_store().now()?);
        let bytes = serde_json::to_vec_pretty(&record).map_err(json_error)?;
        match self
            .repo
            .object_store()
            .put_if_match(LEASE_KEY, &bytes, Some(&held.1))
        {
            Ok(()) => {
                let etag = self
                    .repo
                    .object_store()
                    .get_versioned(LEASE_KEY)?
                    .map(|(_, e)| e);
                if let Some(etag) = etag {
                    *held = (record, etag);
                }
                Ok(())
            }
            Err(e) if e.kind() == ErrorKind::Race => {
                self.lost.store(true, Ordering::Relaxed);
                Err(Error::new(
                    ErrorKind::Race,
                    "another gc took the lease over",
                ))
            }
            Err(e) => Err(e),
        }
    }

    /// Whether another collection took the lease over (this one then stops at its next
    /// step; what it did so far is safe either way).
    pub fn lost(&self) -> bool {
        self.lost.load(Ordering::Relaxed)
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        let held = sealvol_core::locks::lock(&self.record);
        // Only our own: after a takeover the lease is someone else's.
        if let Ok(Some((_, etag))) = self.repo.object_store().get_versioned(LEASE_KEY)
            && etag == held.1
        {
            let _ = self.repo.object_store().delete(LEASE_KEY);
        }
    }
}
