//! One blob into a registry, as cheaply as the registry allows:
//!
//! 1. **Mounted** from another repository of the same registry that holds it (found
//!    by `HEAD`; `POST …/uploads/?mount=DIGEST&from=REPO` answers 201), no byte sent;
//! 2. **in one `PUT`** when it is no larger than a piece;
//! 3. **in pieces** otherwise (`PATCH` with `Content-Range`, then a `PUT` with the
//!    digest), each piece's end remembered (`memory`): a piece that fails is asked
//!    about (`GET` of the upload answers how much the registry holds) and sent again
//!    from there, up to `TRIES` times; a push run again resumes where the last one
//!    stopped.
//!
//! The registry checks the digest it is given against what it received; the bytes
//! come from `open(offset)`, proven as they are read.

use std::io::Read;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sealvol_core::{Error, Result};

use crate::memory::Memory;
use crate::session::{Failed, Session, expect, judge};

/// Pieces sent again, each, before the push gives up (a later run resumes it).
const TRIES: u32 = 4;

/// A blob's bytes from an offset, as a reader of what remains.
pub type Open<'a> = dyn FnMut(u64) -> Result<Box<dyn Read + Send>> + 'a;

/// How a blob reached the registry.
#[derive(Debug, PartialEq, Eq)]
pub enum Sent {
    Mounted,
    /// Bytes sent in this run (less than the blob when an earlier run's upload resumed).
    Bytes(u64),
}

/// Where a new upload stands.
enum Started {
    Mounted,
    At(String),
}

/// What is fixed for one blob's upload.
pub(crate) struct Blob<'a> {
    pub digest: &'a str,
    pub size: u64,
    pub piece: u64,
    pub mount_from: &'a [String],
    pub memory: Option<&'a Memory>,
    pub host: &'a str,
}

impl Session {
    /// Sends `b` to the session's repository, its bytes from `open`.
    pub(crate) fn send_blob(&mut self, b: &Blob<'_>, open: &mut Open<'_>) -> Result<Sent> {
        for from in b.mount_from {
            if from != &self.repo && self.has_blob(from, b.digest)? {
                match self.start(Some((b.digest, from)))? {
                    Started::Mounted => return Ok(Sent::Mounted),
                    // Not mounted (the registry would not): the upload it began is used.
                    Started::At(place) => return self.send_bytes(b, place, 0, open),
                }
            }
        }
        let resumed = b
            .memory
            .and_then(|m| m.upload(b.host, &self.repo, b.digest));
        if let Some(place) = resumed {
            match self.standing(&place) {
                Ok((place, at)) => return self.send_bytes(b, place, at, open),
                // The registry forgot it (purged, or restarted): begin again.
                Err(e) => {
                    tracing::info!("an earlier upload of {} cannot resume: {e}", b.digest);
                    self.forget(b);
                }
            }
        }
        match self.start(None)? {
            Started::Mounted => Err(Error::invalid(
                "the registry answered an upload's start as a mount it was not asked for",
            )),
            Started::At(place) => self.send_bytes(b, place, 0, open),
        }
    }

    /// `POST …/blobs/uploads/`, asking to mount `(digest, from)` if given.
    fn start(&mut self, mount: Option<(&str, &str)>) -> Result<Started> {
        let mut url = format!("{}/v2/{}/blobs/uploads/", self.base, self.repo);
        if let Some((digest, from)) = mount {
            url.push_str(&format!("?mount={digest}&from={from}"));
        }
        let resp = self.send(|c| c.post(&url).header("content-length", "0"))?;
        if mount.is_some() && resp.status().as_u16() == 201 {
            return Ok(Started::Mounted);
        }
        let location = location_of(&resp);
        expect(resp, &[202], "an upload's start")?;
        let location = location.ok_or_else(|| {
            Error::invalid("the registry started an upload and named no place for it")
        })?;
        Ok(Started::At(self.place(&location)))
    }

    /// The blob's bytes from `at` into the upload at `place`: whole in one request if
    /// it fits a piece, else in pieces.
    fn send_bytes(
        &mut self,
        b: &Blob<'_>,
        mut place: String,
        mut at: u64,
        open: &mut Open<'_>,
    ) -> Result<Sent> {
        if at == 0 && b.size <= b.piece {
            let body = reqwest::blocking::Body::sized(open(0)?, b.size);
            let put = self.finish(&place, b.digest, b.size, body);
            return put
                .map(|()| Sent::Bytes(b.size))
                .map_err(Failed::into_error);
        }
        let mut sent = 0;
        let mut tries = 0;
        let mut reader: Option<(u64, Shared)> = None;
        while at < b.size {
            let len = b.piece.min(b.size - at);
            let r = match reader.take() {
                Some((pos, r)) if pos == at => r,
                _ => Arc::new(Mutex::new(open(at)?)),
            };
            match self.piece(&place, at, len, &r) {
                Ok(next) => {
                    place = next;
                    at += len;
                    sent += len;
                    tries = 0;
                    reader = Some((at, r));
                    if let Some(m) = b.memory {
                        m.keep_upload(b.host, &self.repo, b.digest, &place);
                    }
                }
                Err(Failed::Retry(e)) if tries < TRIES => {
                    tries += 1;
                    tracing::info!(
                        "a piece of {} failed ({e}); asking where it stands",
                        b.digest
                    );
                    std::thread::sleep(Duration::from_millis(250 << tries));
                    if e.kind() == sealvol_core::ErrorKind::Denied {
                        self.renew()?;
                    }
                    // A registry that cannot say keeps the place for a later run.
                    let (p, a) = self.standing(&place)?;
                    place = p;
                    at = a;
                }
                Err(Failed::Range(e)) => {
                    // The registry holds other bytes than it said: begin again.
                    self.forget(b);
                    return Err(e.hint("run the export again: the upload begins anew"));
                }
                Err(f) => {
                    return Err(f
                        .into_error()
                        .hint("run the export again: it resumes where this one stopped"));
                }
            }
        }
        self.finish(
            &place,
            b.digest,
            0,
            reqwest::blocking::Body::from(Vec::new()),
        )
        .map_err(Failed::into_error)?;
        self.forget(b);
        Ok(Sent::Bytes(sent))
    }

    fn forget(&self, b: &Blob<'_>) {
        if let Some(m) = b.memory {
            m.forget_upload(b.host, &self.repo, b.digest);
        }
    }

    /// `PATCH place` with bytes `[at, at + len)` from `r`; the next place.
    fn piece(
        &mut self,
        place: &str,
        at: u64,
        len: u64,
        r: &Shared,
    ) -> std::result::Result<String, Failed> {
        let body = Piece {
            inner: Arc::clone(r),
            left: len,
        };
        let req = self
            .http
            .patch(place)
            .header("content-type", "application/octet-stream")
            .header("content-length", len.to_string())
            .header("content-range", format!("{at}-{}", at + len - 1))
            .timeout(self.timeout + Duration::from_secs(len >> 20))
            .body(reqwest::blocking::Body::sized(body, len));
        let sent = self.authorised(place, req).send();
        let resp = judge(sent, &self.base, &[202], "a piece of a blob")?;
        let next = location_of(&resp).map(|l| self.place(&l));
        let held = range_end(&resp);
        drop(resp);
        // A registry that names where it now stands must stand where the piece ended.
        if held.is_some_and(|h| h != at + len) {
            return Err(Failed::Retry(Error::invalid(format!(
                "the registry holds {} bytes after a piece that ended at {}",
                held.unwrap_or(0),
                at + len
            ))));
        }
        Ok(next.unwrap_or_else(|| place.to_string()))
    }

    /// `GET place`: where an upload stands (its place, and the bytes it holds).
    fn standing(&mut self, place: &str) -> Result<(String, u64)> {
        let req = self.authorised(place, self.http.get(place));
        let resp = judge(req.send(), &self.base, &[204], "where an upload stands")
            .map_err(Failed::into_error)?;
        let next = location_of(&resp).map(|l| self.place(&l));
        let at = range_end(&resp).unwrap_or(0);
        Ok((next.unwrap_or_else(|| place.to_string()), at))
    }

    /// `PUT place?digest=…` with the last bytes (`size` of them, maybe none).
    fn finish(
        &mut self,
        place: &str,
        digest: &str,
        size: u64,
        body: reqwest::blocking::Body,
    ) -> std::result::Result<(), Failed> {
        let mut put = place.to_string();
        put.push(if put.contains('?') { '&' } else { '?' });
        put.push_str(&format!("digest={digest}"));
        let req = self
            .http
            .put(&put)
            .header("content-type", "application/octet-stream")
            .header("content-length", size.to_string())
            .timeout(self.timeout + Duration::from_secs(size >> 20))
            .body(body);
        let sent = self.authorised(&put, req).send();
        judge(sent, &self.base, &[201], &format!("blob {digest}")).map(|_| ())
    }
}

/// A blob's reader shared by its pieces (each reads on from where the last stopped).
type Shared = Arc<Mutex<Box<dyn Read + Send>>>;

/// `len` bytes of a shared reader, as one piece's body.
struct Piece {
    inner: Shared,
    left: u64,
}

impl Read for Piece {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.left == 0 {
            return Ok(0);
        }
        let want = buf.len().min(self.left as usize);
        let mut r = self
            .inner
            .lock()
            .map_err(|_| std::io::Error::other("a blob's reader was poisoned"))?;
        let n = r.read(&mut buf[..want])?;
        self.left -= n as u64;
        Ok(n)
    }
}

fn location_of(resp: &reqwest::blocking::Response) -> Option<String> {
    resp.headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// The bytes an upload holds, from its `Range: 0-LAST` (`0-0` is read as none: the
/// distribution registry says it for an empty upload, and a piece that starts too
/// early is refused with 416, never stored twice).
fn range_end(resp: &reqwest::blocking::Response) -> Option<u64> {
    let v = resp.headers().get("range")?.to_str().ok()?;
    let last: u64 = v.trim().strip_prefix("0-")?.parse().ok()?;
    Some(if last == 0 { 0 } else { last + 1 })
}
