//! `S3Store`: the repository's objects in a bucket, one request per call. The
//! repository's code is synchronous and calls a store from many threads; each call
//! here runs on the store's own small runtime and the calling thread waits for it, so
//! that a caller inside another runtime (the console, the agent) never blocks that
//! runtime's own scheduler from within.
//!
//! Immutable objects are created with `If-None-Match: *`, tags and settings move with
//! `If-Match` on the ETag: nothing else coordinates writers (docs/FORMAT.md). Every
//! request is retried with backoff when the failure may pass (5xx, `SlowDown`, a cut
//! connection), as sync's reads are.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use sealvol_core::error::{Error, ErrorKind, IoContext, Result};
use sealvol_core::store::{ETag, ObjectStore, Page};
use sealvol_source::SourceUrl;
use sealvol_source::endpoints::Resolved;
use sealvol_source::secrets::Secret;

use crate::requests::{Condition, Inner};
use crate::upload;
use sealvol_core::store::Traffic;

/// Where probes are written (`probe.rs`); one left by a killed process is removed by
/// gc (`clean_abandoned`).
pub const PROBE_PREFIX: &str = "probe/";

/// Requests a store keeps in flight for one large upload's parts, and packs it
/// uploads at once: together they bound the bytes held in memory to about
/// `PARTS_IN_FLIGHT × upload::PART` (128 MiB).
pub(crate) const PARTS_IN_FLIGHT: usize = 8;
const PARALLEL_PACKS: usize = 4;

pub struct S3Store {
    rt: Option<tokio::runtime::Runtime>,
    pub(crate) inner: Arc<Inner>,
    /// Where packs are built before they are uploaded (this machine's disk).
    staging: PathBuf,
    /// The service's clock minus ours, measured when the store was opened.
    clock_ahead: std::sync::atomic::AtomicI64,
}

impl S3Store {
    /// Connects to the bucket prefix `url` at `at`, with `secret` or the default
    /// credential chain. `staging` is a local directory for packs being built.
    pub fn connect(
        url: &SourceUrl,
        at: &Resolved,
        secret: Option<&Secret>,
        staging: &Path,
    ) -> Result<S3Store> {
        let Some((bucket, prefix)) = sealvol_s3::bucket_of(url) else {
            return Err(Error::invalid(format!("{url} is not a bucket address")));
        };
        std::fs::create_dir_all(staging).ctx("cannot create", staging)?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("sealvol-s3")
            .enable_all()
            .build()
            .map_err(|e| Error::new(ErrorKind::Io, format!("cannot start the S3 client: {e}")))?;
        // Spawned, not `block_on`: the caller may itself be inside a runtime.
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let keys = match secret {
            Some(s) => sealvol_s3::Keys::Given(sealvol_s3::credentials(s)?),
            None => sealvol_s3::Keys::Chain,
        };
        let (u, a) = (url.clone(), at.clone());
        rt.spawn(async move {
            let _ = tx.send(sealvol_s3::client(&u, &a, keys).await);
        });
        let client = rx
            .recv()
            .map_err(|_| Error::new(ErrorKind::Io, "the S3 client did not start"))??;
        Ok(S3Store {
            rt: Some(rt),
            inner: Arc::new(Inner {
                client,
                bucket: bucket.to_string(),
                prefix: prefix.to_string(),
                shown: url.to_string(),
                endpoint: sealvol_s3::endpoint_name(at),
                parts: tokio::sync::Semaphore::new(PARTS_IN_FLIGHT),
                traffic: Traffic::default(),
            }),
            staging: staging.to_path_buf(),
            clock_ahead: Default::default(),
        })
    }

    /// Runs `f` on the store's runtime and waits for it, or until the calling
    /// thread's deadline (a mount's read timeout), when the request is dropped.
    pub(crate) fn run<T, F, Fut>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(Arc<Inner>) -> Fut,
        Fut: Future<Output = Result<T>> + Send + 'static,
    {
        let Some(rt) = &self.rt else {
            return Err(Error::new(ErrorKind::Io, "the S3 client has stopped"));
        };
        let fut = f(Arc::clone(&self.inner));
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let task = rt.spawn(async move {
            let _ = tx.send(fut.await);
        });
        let stopped = || Error::new(ErrorKind::Io, "the S3 client stopped mid-request");
        match sealvol_core::deadline::left() {
            None => rx.recv().map_err(|_| stopped())?,
            Some(left) => match rx.recv_timeout(left) {
                Ok(r) => r,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    task.abort();
                    Err(sealvol_core::deadline::passed(&self.inner.shown))
                }
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Err(stopped()),
            },
        }
    }

    /// Sets the service's clock against ours from an object's `LastModified` (whole
    /// seconds, so the middle of that second) written just before `local`.
    pub(crate) fn set_clock(&self, service: SystemTime, local: SystemTime) {
        let service = service + Duration::from_millis(500);
        let ahead = match service.duration_since(local) {
            Ok(d) => d.as_millis() as i64,
            Err(e) => -(e.duration().as_millis() as i64),
        };
        self.clock_ahead
            .store(ahead, std::sync::atomic::Ordering::Relaxed);
    }
}

impl Drop for S3Store {
    fn drop(&mut self) {
        // Dropping a runtime from inside another one would panic; let it wind down.
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

impl ObjectStore for S3Store {
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        let key = key.to_string();
        Ok(self
            .run(|i| async move { i.get(&key, None).await })?
            .map(|(bytes, _)| bytes))
    }

    fn get_range(&self, key: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
        if len == 0 {
            return Ok(Vec::new());
        }
        let k = key.to_string();
        let (bytes, _) = self
            .run(|i| async move { i.get(&k, Some((offset, len))).await })?
            .ok_or_else(|| Error::not_found(format!("{}{key} is missing", self.inner.shown)))?;
        if bytes.len() as u64 != len {
            return Err(Error::corrupt(format!(
                "{}{key} is shorter than {} bytes",
                self.inner.shown,
                offset + len
            )));
        }
        Ok(bytes)
    }

    fn size(&self, key: &str) -> Result<Option<u64>> {
        let key = key.to_string();
        Ok(self
            .run(|i| async move { i.head(&key).await })?
            .map(|(size, _)| size))
    }

    fn put_if_absent(&self, key: &str, data: &[u8]) -> Result<bool> {
        let key = key.to_string();
        let data = data.to_vec();
        self.run(|i| async move { i.put(&key, &data, Condition::Absent).await })
    }

    fn put_file_if_absent(&self, key: &str, file: &Path) -> Result<bool> {
        let key = key.to_string();
        let path = file.to_path_buf();
        let r = self.run(|i| async move { upload::file_if_absent(&i, &key, &path).await });
        // Consumed, uploaded or not: a retried push builds it again.
        let _ = std::fs::remove_file(file);
        r
    }

    fn staging_path(&self) -> Result<PathBuf> {
        Ok(self.staging.join(sealvol_core::store::unique_temp_name()))
    }

    fn concurrency(&self) -> usize {
        PARALLEL_PACKS
    }

    fn get_versioned(&self, key: &str) -> Result<Option<(Vec<u8>, ETag)>> {
        let key = key.to_string();
        self.run(|i| async move { i.get(&key, None).await })
    }

    fn put_if_match(&self, key: &str, data: &[u8], expected: Option<&ETag>) -> Result<()> {
        let k = key.to_string();
        let data = data.to_vec();
        let expected = expected.cloned();
        let written = self.run(|i| async move {
            let cond = match &expected {
                Some(e) => Condition::Matches(e),
                None => Condition::Absent,
            };
            i.put(&k, &data, cond).await
        })?;
        if written {
            Ok(())
        } else {
            Err(Error::new(
                ErrorKind::Race,
                format!("{}{key} was changed by another writer", self.inner.shown),
            ))
        }
    }

    fn list_page(&self, prefix: &str, after: Option<&str>) -> Result<Page> {
        let prefix = prefix.to_string();
        let after = after.map(str::to_string);
        self.run(|i| async move { i.list_page(&prefix, after.as_deref()).await })
    }

    fn delete(&self, key: &str) -> Result<()> {
        let key = key.to_string();
        self.run(|i| async move { i.delete(&key).await })
    }

    fn put(&self, key: &str, data: &[u8]) -> Result<()> {
        let key = key.to_string();
        let data = data.to_vec();
        self.run(|i| async move { i.put(&key, &data, Condition::None).await })
            .map(|_| ())
    }

    /// Probe objects, and multipart uploads never completed (no object names them;
    /// the service keeps their parts, and bills them, until they are aborted).
    fn clean_abandoned(&self) -> Result<()> {
        let now = self.now()?;
        let stale = |age: Duration| {
            move |t: Option<SystemTime>| {
                t.is_some_and(|t| now.duration_since(t).is_ok_and(|a| a > age))
            }
        };
        for o in self.list(PROBE_PREFIX)? {
            if stale(Duration::from_secs(3600))(o.modified) {
                self.delete(&o.key)?;
            }
        }
        let old_upload = stale(Duration::from_secs(24 * 3600));
        self.run(move |i| async move { crate::upload::abort_stale(&i, old_upload).await })
    }

    fn clean_staging(&self) -> Result<(u64, u64)> {
        sealvol_core::store::clean_staging_dir(&self.staging)
    }

    fn requests(&self) -> Option<sealvol_core::store::Requests> {
        Some(self.inner.traffic.counts())
    }

    fn now(&self) -> Result<SystemTime> {
        let ahead = self.clock_ahead.load(std::sync::atomic::Ordering::Relaxed);
        let now = SystemTime::now();
        Ok(if ahead >= 0 {
            now + Duration::from_millis(ahead as u64)
        } else {
            now - Duration::from_millis(ahead.unsigned_abs())
        })
    }

    /// A write the service acknowledged is durable: nothing to wait for.
    fn sync(&self) -> Result<()> {
        Ok(())
    }
}
