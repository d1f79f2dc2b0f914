//! The requests: one S3 call each, retried with backoff when the failure may pass
//! (5xx, `SlowDown`, a cut connection), and the answers each kind of request expects
//! (absent, lost a race) sorted from the failures.

use std::time::SystemTime;

use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_s3::primitives::ByteStream;
use sealvol_core::error::{Error, ErrorKind, Result};
use sealvol_core::store::{ETag, ObjectInfo, Page};
use sealvol_s3::{code_text, common_status, service_status};
use sealvol_source::retry::retrying;

use sealvol_core::store::Traffic;

/// What a request needs, shared with the tasks that make it.
pub(crate) struct Inner {
    pub(crate) client: aws_sdk_s3::Client,
    pub(crate) bucket: String,
    /// "" or ending in `/`.
    pub(crate) prefix: String,
    /// The repository's address, for messages: `s3://bucket/prefix/`.
    pub(crate) shown: String,
    pub(crate) endpoint: String,
    pub(crate) parts: tokio::sync::Semaphore,
    pub(crate) traffic: Traffic,
}

/// What an S3 answer means for one kind of request.
#[derive(Clone, Copy)]
pub(crate) enum Expect {
    /// 404 is an answer (`None`), not an error.
    Maybe,
    /// 412 or 409 means someone else wrote first: `ErrorKind::Race`.
    Conditional,
    Plain,
}

impl Inner {
    pub(crate) fn key(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    /// Our error for a failed request, or `Ok(())` where the answer means "absent" or
    /// "lost a race" and the caller said it expects that (`Expect`); then
    /// `absent_or_raced` tells which.
    pub(crate) fn fail<E>(&self, doing: &str, key: &str, expect: Expect, e: SdkError<E>) -> Failure
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        let at = format!("{}{key}", self.shown);
        let (status, code) = match service_status(&at, doing, &self.endpoint, &e) {
            Ok(sc) => sc,
            Err(e) => return Failure::Error(e),
        };
        match (expect, status, code.as_str()) {
            (Expect::Maybe, 404, c) if c != "NoSuchBucket" => return Failure::Absent,
            (Expect::Conditional, 412 | 409, _) => return Failure::Raced,
            (Expect::Conditional, 404, "NoSuchKey") => return Failure::Raced,
            // Two conditional writes of one key at once: AWS asks to try again.
            (_, 409, "ConditionalRequestConflict") => {
                return Failure::Error(Error::new(
                    ErrorKind::Unavailable,
                    format!("{at}: another write of it was in progress"),
                ));
            }
            _ => {}
        }
        Failure::Error(
            common_status(&at, doing, status, &code, &self.bucket, &self.endpoint).unwrap_or_else(
                || {
                    Error::invalid(format!(
                        "{at}: cannot {doing} ({})",
                        code_text(status, &code)
                    ))
                },
            ),
        )
    }

    /// The object (or `len` bytes of it from `offset`) and its ETag. A read cut short
    /// (a reset connection, a network that drops long transfers) reads on from the
    /// last byte that arrived, so a long range read finishes however often it is cut,
    /// as long as each try brings bytes; a try that brings none is a failed attempt.
    pub(crate) async fn get(
        &self,
        key: &str,
        range: Option<(u64, u64)>,
    ) -> Result<Option<(Vec<u8>, ETag)>> {
        let mut data = Vec::new();
        let mut seen: Option<ETag> = None;
        loop {
            let from = data.len() as u64;
            let part = match range {
                Some((offset, len)) => Some((offset + from, Some(len - from))),
                None if from == 0 => None,
                None => Some((from, None)),
            };
            let Some((bytes, etag, cut)) = self.get_part(key, part).await? else {
                if data.is_empty() {
                    return Ok(None);
                }
                return Err(Error::new(
                    ErrorKind::Unavailable,
                    format!("{}{key}: it went away while it was read", self.shown),
                ));
            };
            // Objects here are never rewritten; one that changes between tries is not
            // read on from the middle.
            if seen.as_ref().is_some_and(|s| *s != etag) {
                return Err(Error::new(
                    ErrorKind::Unavailable,
                    format!("{}{key}: it changed while it was read", self.shown),
                ));
            }
            let progressed = !bytes.is_empty();
            data.extend_from_slice(&bytes);
            match cut {
                None => return Ok(Some((data, etag))),
                Some(_) if progressed => {
                    tracing::debug!(
                        "{}{key}: the read was cut after {} bytes; reading on from there",
                        self.shown,
                        data.len()
                    );
                }
                Some(e) => return Err(e),
            }
            seen = Some(etag);
        }
    }

    /// One GET of the object, or of `len` bytes (to its end if `None`) from `offset`:
    /// what arrived, its ETag, and why it stopped short if it did.
    async fn get_part(
        &self,
        key: &str,
        range: Option<(u64, Option<u64>)>,
    ) -> Result<Option<(Vec<u8>, ETag, Option<Error>)>> {
        let full = self.key(key);
        let what = format!("{}{key}", self.shown);
        retrying(&what, || async {
            let mut req = self.client.get_object().bucket(&self.bucket).key(&full);
            match range {
                Some((offset, Some(len))) => {
                    req = req.range(format!("bytes={offset}-{}", offset + len - 1));
                }
                Some((offset, None)) => req = req.range(format!("bytes={offset}-")),
                None => {}
            }
            self.traffic.get();
            let out = match req.send().await {
                Ok(out) => out,
                Err(e) => return self.fail("read", key, Expect::Maybe, e).absent(),
            };
            let etag = ETag(out.e_tag().unwrap_or_default().to_string());
            let expected = out.content_length().and_then(|n| usize::try_from(n).ok());
            let mut body = out.body;
            let mut bytes = Vec::with_capacity(expected.unwrap_or(0));
            let cut = |detail: String| {
                Error::new(
                    ErrorKind::Unavailable,
                    format!("{what}: the read was cut: {detail}"),
                )
            };
            let mut stopped = None;
            while let Some(piece) = body.next().await {
                match piece {
                    Ok(p) => bytes.extend_from_slice(&p),
                    Err(e) => {
                        stopped = Some(cut(e.to_string()));
                        break;
                    }
                }
            }
            if stopped.is_none() && expected.is_some_and(|n| bytes.len() < n) {
                stopped = Some(cut(format!(
                    "{} of {} bytes",
                    bytes.len(),
                    expected.unwrap_or(0)
                )));
            }
            self.traffic.received(bytes.len() as u64);
            match stopped {
                // Nothing arrived: a failed attempt, retried with backoff.
                Some(e) if bytes.is_empty() => Err(e),
                stopped => Ok(Some((bytes, etag, stopped))),
            }
        })
        .await
    }

    pub(crate) async fn head(&self, key: &str) -> Result<Option<(u64, Option<SystemTime>)>> {
        let full = self.key(key);
        retrying(&format!("{}{key}", self.shown), || async {
            self.traffic.head();
            match self
                .client
                .head_object()
                .bucket(&self.bucket)
                .key(&full)
                .send()
                .await
            {
                Ok(out) => Ok(Some((
                    u64::try_from(out.content_length().unwrap_or(0)).unwrap_or(0),
                    out.last_modified()
                        .and_then(|t| SystemTime::try_from(*t).ok()),
                ))),
                Err(e) => self.fail("look at", key, Expect::Maybe, e).absent(),
            }
        })
        .await
    }

    /// Writes `data`: only if nothing is there (`Condition::Absent`), only over the
    /// version `ETag`, or whatever is there. `Ok(false)`: the condition did not hold and
    /// nothing was written.
    pub(crate) async fn put(&self, key: &str, data: &[u8], cond: Condition<'_>) -> Result<bool> {
        let full = self.key(key);
        let data = bytes::Bytes::copy_from_slice(data);
        retrying(&format!("{}{key}", self.shown), || async {
            let mut req = self
                .client
                .put_object()
                .bucket(&self.bucket)
                .key(&full)
                .body(ByteStream::from(data.clone()));
            req = match cond {
                Condition::Absent => req.if_none_match("*"),
                Condition::Matches(etag) => req.if_match(&etag.0),
                Condition::None => req,
            };
            self.traffic.put(data.len() as u64);
            let expect = match cond {
                Condition::None => Expect::Plain,
                _ => Expect::Conditional,
            };
            match req.send().await {
                Ok(_) => Ok(true),
                Err(e) => self.fail("write", key, expect, e).raced(),
            }
        })
        .await
    }

    pub(crate) async fn delete(&self, key: &str) -> Result<()> {
        let full = self.key(key);
        retrying(&format!("{}{key}", self.shown), || async {
            self.traffic.delete();
            match self
                .client
                .delete_object()
                .bucket(&self.bucket)
                .key(&full)
                .send()
                .await
            {
                Ok(_) => Ok(()),
                Err(e) => self
                    .fail("delete", key, Expect::Maybe, e)
                    .absent::<()>()
                    .map(|_| ()),
            }
        })
        .await
    }

    pub(crate) async fn list_page(&self, prefix: &str, after: Option<&str>) -> Result<Page> {
        let full = self.key(prefix);
        let start = after.map(|a| self.key(a));
        retrying(&format!("{}{prefix}", self.shown), || async {
            self.traffic.list();
            let out = self
                .client
                .list_objects_v2()
                .bucket(&self.bucket)
                .prefix(&full)
                .set_start_after(start.clone())
                .send()
                .await
                .map_err(|e| self.fail("list", prefix, Expect::Plain, e).error())?;
            let objects: Vec<ObjectInfo> = out
                .contents()
                .iter()
                .filter_map(|o| {
                    let key = o.key()?.strip_prefix(&self.prefix)?;
                    Some(ObjectInfo {
                        key: key.to_string(),
                        size: u64::try_from(o.size().unwrap_or(0)).unwrap_or(0),
                        modified: o
                            .last_modified()
                            .and_then(|t| SystemTime::try_from(*t).ok()),
                    })
                })
                .collect();
            let next = match out.is_truncated() {
                Some(true) => objects.last().map(|o| o.key.clone()),
                _ => None,
            };
            Ok(Page { objects, next })
        })
        .await
    }
}

#[derive(Clone, Copy)]
pub(crate) enum Condition<'a> {
    Absent,
    Matches(&'a ETag),
    None,
}

/// A failed request, sorted: absent and raced are answers for the callers that
/// expect them (`Expect`).
pub(crate) enum Failure {
    Absent,
    Raced,
    Error(Error),
}

impl Failure {
    pub(crate) fn error(self) -> Error {
        match self {
            Failure::Error(e) => e,
            Failure::Absent => Error::not_found("not found"),
            Failure::Raced => Error::new(ErrorKind::Race, "a condition did not hold"),
        }
    }

    /// As the result of a read: absent is `None`.
    pub(crate) fn absent<T>(self) -> Result<Option<T>> {
        match self {
            Failure::Absent => Ok(None),
            other => Err(other.error()),
        }
    }

    /// As the result of a conditional write: raced is `false`.
    pub(crate) fn raced(self) -> Result<bool> {
        match self {
            Failure::Raced => Ok(false),
            other => Err(other.error()),
        }
    }
}
