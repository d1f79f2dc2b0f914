//! Streams a batch of source objects into the push pipeline, in listing order, with
//! several ranged reads in flight: one reader at a time sees a plain `Read` per file,
//! while up to `concurrency` parts of this and the following files are fetched.
//! Memory stays bounded: a part holds a permit until the pipeline has taken its bytes.

use std::io::Read;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::{Buf, Bytes};
use tokio::runtime::Handle;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio::task::JoinHandle;

use super::client::Client;
use super::listing::Object;
use crate::error::{Error, ErrorKind, Result};
use crate::push::Inputs;

/// The size of one ranged read.
pub const PART: u64 = 8 << 20;

type Part = JoinHandle<Result<(Bytes, OwnedSemaphorePermit)>>;

pub struct Prefetch {
    rt: Handle,
    files: Vec<Object>,
    shown: String,
    parts: Mutex<mpsc::Receiver<Part>>,
    /// The file the pipeline must open next: parts arrive in listing order only.
    next: AtomicUsize,
    feeder: JoinHandle<()>,
    cancel: Arc<AtomicBool>,
    /// The first source error, kept whole: the pipeline only sees an `io::Error`.
    failure: Mutex<Option<Error>>,
}

impl Prefetch {
    /// Starts fetching `files` (in this order) from `client`. `shown` prefixes names
    /// in errors (the source's canonical address).
    pub fn start(
        rt: &Handle,
        client: Arc<Client>,
        files: Vec<Object>,
        shown: String,
        concurrency: usize,
        cancel: Arc<AtomicBool>,
    ) -> Prefetch {
        let concurrency = concurrency.max(1);
        let (tx, rx) = mpsc::channel::<Part>(concurrency);
        let permits = Arc::new(Semaphore::new(concurrency));
        let plan: Vec<(Object, std::ops::Range<u64>)> = files
            .iter()
            .flat_map(|o| {
                (0..o.size)
                    .step_by(PART as usize)
                    .map(move |start| (o.clone(), start..(start + PART).min(o.size)))
            })
            .collect();
        let feeder = rt.spawn(async move {
            for (obj, range) in plan {
                let Ok(permit) = permits.clone().acquire_owned().await else {
                    return;
                };
                let client = client.clone();
                let part = tokio::spawn(async move {
                    let bytes = client.get(&obj, range).await?;
                    Ok((bytes, permit))
                });
                if tx.send(part).await.is_err() {
                    return;
                }
            }
        });
        Prefetch {
            rt: rt.clone(),
            files,
            shown,
            parts: Mutex::new(rx),
            next: AtomicUsize::new(0),
            feeder,
            cancel,
            failure: Mutex::new(None),
        }
    }

    /// The source error that stopped the pipeline, if one did.
    pub fn take_failure(&self) -> Option<Error> {
        self.failure.lock().ok()?.take()
    }

    fn fail(&self, e: Error) -> std::io::Error {
        let shown = e.to_string();
        if let Ok(mut slot) = self.failure.lock()
            && slot.is_none()
        {
            *slot = Some(e);
        }
        std::io::Error::other(shown)
    }

    fn next_part(&self) -> Result<(Bytes, OwnedSemaphorePermit)> {
        if self.cancel.load(Ordering::Relaxed) {
            return Err(cancelled());
        }
        let part = self
            .parts
            .lock()
            .map_err(|_| Error::new(ErrorKind::Io, "the fetch queue is poisoned"))?
            .blocking_recv()
            .ok_or_else(|| Error::new(ErrorKind::Io, "the fetcher stopped early"))?;
        match self.rt.block_on(part) {
            Ok(r) => r,
            Err(e) => Err(Error::new(
                ErrorKind::Io,
                format!("a fetch task failed: {e}"),
            )),
        }
    }
}

/// `bytes` if it is exactly `range`; a short or long answer is a transient failure
/// (a connection cut mid-body, a proxy's truncation), retried like one.
pub fn whole_part(what: &str, range: &Range<u64>, bytes: Bytes) -> Result<Bytes> {
    if bytes.len() as u64 != range.end - range.start {
        return Err(Error::new(
            ErrorKind::Unavailable,
            format!(
                "{what}: asked for {} bytes at {}, got {}",
                range.end - range.start,
                range.start,
                bytes.len()
            ),
        ));
    }
    Ok(bytes)
}

pub fn cancelled() -> Error {
    Error::new(ErrorKind::Cancelled, "cancelled").hint("`sealvol jobs retry ID` starts it again")
}

impl Drop for Prefetch {
    fn drop(&mut self) {
        self.feeder.abort();
        if let Ok(rx) = self.parts.get_mut() {
            while let Ok(part) = rx.try_recv() {
                part.abort();
            }
        }
    }
}

struct PartReader<'a> {
    pf: &'a Prefetch,
    parts_left: u64,
    current: Bytes,
    _permit: Option<OwnedSemaphorePermit>,
}

impl Read for PartReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while !self.current.has_remaining() {
            if self.parts_left == 0 {
                return Ok(0);
            }
            // Release the spent part's permit before waiting for the next.
            self._permit = None;
            let (bytes, permit) = self.pf.next_part().map_err(|e| self.pf.fail(e))?;
            self.current = bytes;
            self._permit = Some(permit);
            self.parts_left -= 1;
        }
        let n = buf.len().min(self.current.remaining());
        self.current.copy_to_slice(&mut buf[..n]);
        Ok(n)
    }
}

impl Inputs for Prefetch {
    fn open(&self, i: usize) -> Result<Box<dyn Read + Send + '_>> {
        let expected = self.next.fetch_add(1, Ordering::SeqCst);
        if i != expected {
            return Err(Error::new(
                ErrorKind::Io,
                format!("files must be read in listing order: asked for {i}, next is {expected}"),
            ));
        }
        let size = self.files.get(i).map_or(0, |o| o.size);
        Ok(Box::new(PartReader {
            pf: self,
            parts_left: size.div_ceil(PART),
            current: Bytes::new(),
            _permit: None,
        }))
    }

    fn name(&self, i: usize) -> String {
        let key = self.files.get(i).map_or("?", |o| o.key.as_str());
        format!("{}{key}", self.shown)
    }

    fn finished(&self, i: usize, total: u64) -> Result<()> {
        let listed = self.files.get(i).map_or(0, |o| o.size);
        if total != listed {
            return Err(Error::new(
                ErrorKind::Changed,
                format!(
                    "{} was {listed} bytes when listed, read {total}",
                    self.name(i)
                ),
            )
            .hint("the source changed during the sync; run it again"));
        }
        Ok(())
    }
}
