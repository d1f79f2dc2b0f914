//! Streams a batch of source objects into the push pipeline, in listing order, with
//! several ranged reads in flight: one reader at a time sees a plain `Read` per file,
//! while up to `concurrency` parts of this and the following files stream ahead. A part
//! is one ranged GET of up to `PART` bytes, streamed rather than held: each part keeps
//! at most `AHEAD` pieces waiting, which bounds memory, and a connection cut mid-part
//! reads on from where it stopped. Large parts keep request counts low (some servers
//! pay per request in proportion to the object's size); several in flight keep a
//! high-latency store busy. Each file's bytes are checked, in order as the reader
//! takes them, against every hash its source's listing gave (`verify.rs`).

use std::io::Read;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::{Buf, Bytes};
use tokio::runtime::Handle;
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinHandle;

use crate::client::Client;
use crate::verify::Checker;
use sealvol_core::error::{Error, ErrorKind, Result};
use sealvol_core::patience::Tries;
use sealvol_core::push::Inputs;
use sealvol_source::Fetch;
use sealvol_source::listing::Object;

/// The size of one ranged read.
pub const PART: u64 = 512 << 20;
/// Pieces a part may have waiting for the reader (hyper's pieces are at most a few
/// hundred KiB: this bounds a part's buffer to tens of MiB).
const AHEAD: usize = 128;

/// One part's pieces, in order; the sender ends when the part is complete.
type Part = mpsc::Receiver<Result<Piece>>;

/// What a part sends its reader.
enum Piece {
    Bytes(Bytes),
    /// The source said, as it answered, that a check of this kind does not hold for
    /// this object (an S3 ETag that is not an MD5: `Body::voids`).
    Void(&'static str),
}

pub struct Prefetch {
    files: Vec<Object>,
    shown: String,
    parts: Mutex<mpsc::Receiver<Part>>,
    /// The file the pipeline must open next: parts arrive in listing order only.
    next: AtomicUsize,
    feeder: JoinHandle<()>,
    cancel: Arc<AtomicBool>,
    /// The first source error, kept whole: the pipeline only sees an `io::Error`.
    failure: Mutex<Option<Error>>,
    /// The checks each file passed, by its index, once read to its end.
    checked: Mutex<std::collections::HashMap<usize, Vec<&'static str>>>,
    /// Who watches the files go by, if anyone does (`sealvol_source::Tap`).
    tap: Option<Arc<dyn sealvol_source::Tap>>,
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
        log: sealvol_source::Notes,
    ) -> Prefetch {
        let concurrency = concurrency.max(1);
        let (tx, rx) = mpsc::channel::<Part>(concurrency);
        let permits = Arc::new(Semaphore::new(concurrency));
        let plan: Vec<(Object, Range<u64>)> = files
            .iter()
            .flat_map(|o| {
                (0..o.size)
                    .step_by(PART as usize)
                    .map(move |start| (o.clone(), start..(start + PART).min(o.size)))
            })
            .collect();
        let prefix = shown.clone();
        let parts_cancel = cancel.clone();
        let tap = log.tap().cloned();
        let feeder = rt.spawn(async move {
            for (obj, range) in plan {
                let Ok(permit) = permits.clone().acquire_owned().await else {
                    return;
                };
                let (part_tx, part_rx) = mpsc::channel(AHEAD);
                let client = client.clone();
                let what = match prefix.ends_with('/') {
                    true => format!("{prefix}{}", obj.key),
                    false => format!("{prefix}/{}", obj.key),
                };
                let cancel = parts_cancel.clone();
                tokio::spawn(sealvol_source::retry::logged(log.clone(), async move {
                    let streamed = sealvol_source::retry::cancellable(&cancel, async {
                        stream_part(&client, &obj, range, &what, &part_tx).await;
                        Ok(())
                    });
                    if let Err(e) = streamed.await {
                        let _ = part_tx.send(Err(e)).await;
                    }
                    drop(permit);
                }));
                if tx.send(part_rx).await.is_err() {
                    return;
                }
            }
        });
        Prefetch {
            files,
            shown,
            parts: Mutex::new(rx),
            next: AtomicUsize::new(0),
            feeder,
            cancel,
            failure: Mutex::new(None),
            checked: Mutex::default(),
            tap,
        }
    }

    /// The checks file `i` passed, once it was read to its end.
    pub fn checked(&self, i: usize) -> Option<Vec<&'static str>> {
        self.checked.lock().ok()?.get(&i).cloned()
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

    fn next_part(&self) -> Result<Part> {
        if self.cancel.load(Ordering::Relaxed) {
            return Err(Error::cancelled());
        }
        self.parts
            .lock()
            .map_err(|_| Error::new(ErrorKind::Io, "the fetch queue is poisoned"))?
            .blocking_recv()
            .ok_or_else(|| Error::new(ErrorKind::Io, "the fetcher stopped early"))
    }

    fn next_piece(&self, part: &mut Part) -> Result<Option<Piece>> {
        if self.cancel.load(Ordering::Relaxed) {
            return Err(Error::cancelled());
        }
        part.blocking_recv().transpose()
    }
}

/// Sends the bytes of `range` of `obj` down `tx`, reopening from where it stopped
/// after a transient failure (up to `retry::ATTEMPTS` times, and only while a body that
/// brings nothing would still be given up on within the request's total: `patience`),
/// or sends the error.
async fn stream_part(
    client: &Client,
    obj: &Object,
    range: Range<u64>,
    what: &str,
    tx: &mpsc::Sender<Result<Piece>>,
) {
    let mut at = range.start;
    let mut cuts = 0;
    // Since the last byte came: a body that stalls is cut after `patience::answer()`,
    // and read on only while that much again would end within the total (`--timeout`).
    let mut tries = Tries::new();
    let mut quiet_since = tokio::time::Instant::now();
    while at < range.end {
        let mut body = match client.open(obj, at..range.end).await {
            Ok(b) => b,
            Err(e) => {
                let _ = tx.send(Err(e)).await;
                return;
            }
        };
        for kind in body.voids() {
            if tx.send(Ok(Piece::Void(kind))).await.is_err() {
                return;
            }
        }
        loop {
            match body.next(what).await {
                Ok(Some(piece)) => {
                    let piece = if at + piece.len() as u64 > range.end {
                        // A server that sends more than asked: keep only the range.
                        piece.slice(..(range.end - at) as usize)
                    } else {
                        piece
                    };
                    at += piece.len() as u64;
                    tries = Tries::new();
                    quiet_since = tokio::time::Instant::now();
                    if tx.send(Ok(Piece::Bytes(piece))).await.is_err() {
                        return; // the reader is gone
                    }
                    if at >= range.end {
                        return;
                    }
                }
                Ok(None) => break, // ended short: read on from `at`
                Err(e) if e.kind() == ErrorKind::Unavailable => break,
                Err(e) => {
                    let _ = tx.send(Err(e)).await;
                    return;
                }
            }
        }
        cuts += 1;
        tries.count += 1;
        let backoff = std::time::Duration::from_millis(250 << cuts.min(5));
        let cut = Error::new(
            ErrorKind::Unavailable,
            format!(
                "{what}: the body ended at byte {at} of {}, {cuts} times",
                range.end
            ),
        )
        .hint("the source or the network keeps cutting the connection; retry the job later");
        if cuts >= sealvol_source::retry::ATTEMPTS {
            let _ = tx.send(Err(cut)).await;
            return;
        }
        let quiet = quiet_since.elapsed();
        if !tries.may_retry(quiet, backoff) {
            let _ = tx.send(Err(tries.gave_up(what, cut, quiet))).await;
            return;
        }
        sealvol_source::retry::say(format!(
            "{what}: the connection was cut at byte {at}; reading on from there ({cuts}/{})",
            sealvol_source::retry::ATTEMPTS
        ));
        sealvol_source::retry::back_off(backoff).await;
    }
}

impl Drop for Prefetch {
    fn drop(&mut self) {
        // Parts in flight end when their receivers (held here or in the queue) go.
        self.feeder.abort();
    }
}

struct PartReader<'a> {
    pf: &'a Prefetch,
    /// The file's index in the batch.
    i: usize,
    parts_left: u64,
    part: Option<Part>,
    current: Bytes,
    /// Every byte handed on, hashed as the source's listing says it should hash; taken
    /// at the end of the file.
    checker: Option<Checker>,
    /// Who watches this file go by, until it ends.
    tap: Option<Box<dyn sealvol_source::FileTap>>,
}

impl PartReader<'_> {
    /// The end of the file: its checks, or why it fails them.
    fn finish(&mut self) -> Result<()> {
        let Some(checker) = self.checker.take() else {
            return Ok(());
        };
        let passed = match checker.finish(&self.pf.name(self.i)) {
            Ok(p) => p,
            Err(e) => {
                if let Some(t) = self.tap.take() {
                    t.failed(&e.to_string());
                }
                return Err(e);
            }
        };
        if let Some(t) = self.tap.take() {
            t.verified(&passed);
        }
        if let Ok(mut c) = self.pf.checked.lock() {
            c.insert(self.i, passed);
        }
        Ok(())
    }
}

impl Drop for PartReader<'_> {
    fn drop(&mut self) {
        // Dropped before its end: the pipeline stopped (a failure, a cancel).
        if let Some(t) = self.tap.take() {
            t.failed(&format!(
                "the sync stopped before the end of {}",
                self.pf.name(self.i)
            ));
        }
    }
}

impl Read for PartReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while !self.current.has_remaining() {
            let piece = match &mut self.part {
                Some(part) => self.pf.next_piece(part).map_err(|e| self.pf.fail(e))?,
                None => None,
            };
            match piece {
                Some(Piece::Bytes(p)) => self.current = p,
                Some(Piece::Void(kind)) => {
                    if let Some(c) = &mut self.checker {
                        c.void(kind);
                    }
                }
                None => {
                    if self.parts_left == 0 {
                        self.finish().map_err(|e| self.pf.fail(e))?;
                        return Ok(0);
                    }
                    self.part = Some(self.pf.next_part().map_err(|e| self.pf.fail(e))?);
                    self.parts_left -= 1;
                }
            }
        }
        let n = buf.len().min(self.current.remaining());
        self.current.copy_to_slice(&mut buf[..n]);
        if let Some(c) = &mut self.checker {
            c.update(&buf[..n]);
        }
        if let Some(t) = &mut self.tap {
            t.bytes(&buf[..n]);
        }
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
        let (size, expect) = self
            .files
            .get(i)
            .map_or((0, &[][..]), |o| (o.size, o.expect.as_slice()));
        let tap = match (&self.tap, self.files.get(i)) {
            (Some(t), Some(o)) => t.open(&o.key, o.size),
            _ => None,
        };
        Ok(Box::new(PartReader {
            pf: self,
            i,
            parts_left: size.div_ceil(PART),
            part: None,
            current: Bytes::new(),
            checker: Some(Checker::new(expect, size)),
            tap,
        }))
    }

    fn name(&self, i: usize) -> String {
        let key = self.files.get(i).map_or("?", |o| o.key.as_str());
        // A bucket's address ends in its prefix's `/`; a Hub repository's in `@REV`.
        match self.shown.ends_with('/') {
            true => format!("{}{key}", self.shown),
            false => format!("{}/{key}", self.shown),
        }
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

impl Fetch for Prefetch {
    fn take_failure(&self) -> Option<Error> {
        Prefetch::take_failure(self)
    }

    fn checked(&self, i: usize) -> Option<Vec<&'static str>> {
        Prefetch::checked(self, i)
    }
}
