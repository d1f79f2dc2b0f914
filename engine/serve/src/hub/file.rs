//! `HEAD` and `GET /hf/[datasets/]NS/VOL/resolve/REV/PATH`: one file of a version as
//! `hf_hub_download` reads it. The headers are the Hub's: `X-Repo-Commit` (the
//! version's commit id), `ETag` (a small file's git blob id, a large one's SHA-256,
//! which is also `X-Linked-Etag`, with `X-Linked-Size`), `Content-Length`,
//! `Accept-Ranges: bytes`. One `Range` is answered `206` (an interrupted download
//! resumes); one past the end, or more than one, `416`. The body streams a window at a
//! time from a thread that proves every byte before it is queued (`held::HeldChunks`):
//! a slow reader holds a window or two, never the file, within the runs' budget; bytes
//! that fail their proof end the body early (the client's length check fails) and are
//! written down, never sent.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use sealvol_core::digest::Entry;
use sealvol_core::objects::FileObject;
use sealvol_core::read::Chunks as _;

use super::missing::Missing;
use super::{At, Hub, blocking};
use crate::held::HeldChunks;
use crate::keys::Grant;

/// The bytes one window of a body holds: proven and queued while the one before is
/// sent.
pub const WINDOW: u64 = 4 << 20;

/// What is sent of a file, once found.
struct Found {
    headers: HeaderMap,
    size: u64,
    /// The file's chunk list, when there are bytes to send.
    obj: Option<FileObject>,
}

pub async fn file(
    hub: Arc<Hub>,
    grant: Arc<Grant>,
    at: At,
    path: String,
    head: bool,
    headers: &HeaderMap,
) -> Response {
    let range = match asked_range(headers) {
        Ok(r) => r,
        Err(m) => return m.response(),
    };
    let h = Arc::clone(&hub);
    let mirrored = at.mirrored.is_some();
    let found = blocking(move || find(&h, &grant, &at, &path, head)).await;
    let Found {
        mut headers,
        size,
        obj,
    } = match found {
        Ok(f) => f,
        Err(m) => return m.response(),
    };
    let (status, start, len) = match ranged(&mut headers, range.as_deref(), size) {
        Ok(r) => r,
        Err(m) => return m.response(),
    };
    let obj = match (head, obj) {
        (false, Some(obj)) if len > 0 => obj,
        _ => return (status, headers, Body::empty()).into_response(),
    };
    // Up to three windows at once: the one being sent, one queued, one being proven.
    let Some(share) = crate::budget::for_run(3 * WINDOW).await else {
        return crate::reply::busy();
    };
    (
        status,
        headers,
        stream(hub, obj, start, start + len, share, mirrored),
    )
        .into_response()
}

/// The file `path` of the version `rev` names, and the headers that say it.
fn find(hub: &Hub, grant: &Grant, at: &At, path: &str, head: bool) -> Result<Found, Missing> {
    let v = hub.version_at(grant, at)?;
    let rev = &at.rev;
    // The client will ask for the version's other files next.
    hub.kept
        .warm(&hub.chunks, &v.volume, &v.digest, &v.manifest);
    let entry = v.manifest.entries.iter().find(|e| e.path() == path);
    let (hash, size) = match entry {
        Some(Entry::File { hash, size, .. }) => (*hash, *size),
        Some(Entry::Dir { .. }) => {
            return Err(Missing::Entry(format!(
                "{path:.200} is a folder, not a file"
            )));
        }
        Some(Entry::Symlink { .. }) => {
            return Err(Missing::Entry(format!(
                "{path:.200} is a symlink: the Hub's API serves files only"
            )));
        }
        None => {
            return Err(Missing::Entry(format!(
                "{}@{rev:.80} has no file {path:.200}",
                v.volume
            )));
        }
    };
    // This file's ids alone, if its version's are not ready: a HEAD waits for them.
    let f = hub
        .kept
        .of_file(
            &hub.chunks,
            &v.volume,
            &v.digest,
            &v.manifest,
            (path, &hash, size),
        )
        .map_err(|e| Missing::Failed(e.to_string()))?;
    let h = file_headers(&v.commit, f.etag(), f.sha256.as_deref(), size, v.pinned);
    let obj = match (head, size) {
        (true, _) | (_, 0) => None,
        _ => Some(
            hub.chunks
                .repository()
                .file_list(&hash, size, &v.manifest.small_files())
                .map_err(|e| Missing::Failed(e.to_string()))?,
        ),
    };
    Ok(Found {
        headers: h,
        size,
        obj,
    })
}

/// The headers the Hub answers a file with: the commit, the file's ids (`ETag`, and for
/// an LFS file `X-Linked-Etag` and `X-Linked-Size`), and how long it may be cached.
pub fn file_headers(
    commit: &str,
    etag: &str,
    sha256: Option<&str>,
    size: u64,
    pinned: bool,
) -> HeaderMap {
    let mut h = HeaderMap::new();
    let mut put = |name: &'static str, value: &str| {
        if let Ok(v) = HeaderValue::from_str(value) {
            h.insert(name, v);
        }
    };
    put("x-repo-commit", commit);
    put("etag", &format!("\"{etag}\""));
    if let Some(sha) = sha256 {
        put("x-linked-etag", &format!("\"{sha}\""));
        put("x-linked-size", &size.to_string());
    }
    put("accept-ranges", "bytes");
    put("content-type", "application/octet-stream");
    put(
        "cache-control",
        match pinned {
            // A digest or commit names these bytes forever; a tag may move.
            true => "public, max-age=31536000, immutable",
            false => "no-cache",
        },
    );
    h
}

/// What a request's `range` (if any) asks of a file of `size` bytes: the status, the
/// first byte and the length, with `Content-Range` and `Content-Length` set in
/// `headers`.
pub fn ranged(
    headers: &mut HeaderMap,
    range: Option<&str>,
    size: u64,
) -> Result<(StatusCode, u64, u64), Missing> {
    let (status, start, len) = match range.map(|r| one_range(r, size)) {
        None => (StatusCode::OK, 0, size),
        Some(Ok((start, len))) => {
            let v = format!("bytes {start}-{}/{size}", start + len - 1);
            if let Ok(v) = HeaderValue::from_str(&v) {
                headers.insert(header::CONTENT_RANGE, v);
            }
            (StatusCode::PARTIAL_CONTENT, start, len)
        }
        Some(Err(m)) => return Err(m),
    };
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    Ok((status, start, len))
}

/// The `Range` a request asks for, as sent.
pub fn asked_range(headers: &HeaderMap) -> Result<Option<String>, Missing> {
    match headers.get(header::RANGE).map(|v| v.to_str()) {
        None => Ok(None),
        Some(Ok(r)) => Ok(Some(r.to_string())),
        Some(Err(_)) => Err(Missing::Bad("a Range must be bytes=FIRST-LAST".into())),
    }
}

/// One range of a file of `size` bytes, as (first byte, length).
fn one_range(value: &str, size: u64) -> Result<(u64, u64), Missing> {
    if value.contains(',') {
        return Err(Missing::Range(
            size,
            "one range per request: bytes=FIRST-LAST, bytes=FIRST- or bytes=-LAST_N".into(),
        ));
    }
    crate::range::parse_range(value, size).map_err(|status| match status {
        StatusCode::RANGE_NOT_SATISFIABLE => Missing::Range(
            size,
            format!("the range {value:.80} is not within the file's {size} bytes"),
        ),
        _ => Missing::Bad(format!(
            "{value:.80} is not a range: bytes=FIRST-LAST, bytes=FIRST- or bytes=-LAST_N"
        )),
    })
}

/// Bytes `[start, end)` of `obj`, proven a window at a time on a blocking thread and
/// sent as they are.
fn stream(
    hub: Arc<Hub>,
    obj: FileObject,
    start: u64,
    end: u64,
    share: crate::budget::Share,
    mirrored: bool,
) -> Body {
    let (tx, rx) = tokio::sync::mpsc::channel::<std::io::Result<Vec<Bytes>>>(1);
    tokio::task::spawn_blocking(move || {
        let _share = share;
        let held = HeldChunks::new(&hub.chunks, hub.chunks.repository());
        let mut pos = start;
        while pos < end {
            let first = obj.chunk_at(pos);
            let mut last = first + 1;
            while last < obj.chunks.len()
                && obj.start_of(last) < end
                && obj.start_of(last + 1) - pos <= WINDOW
            {
                last += 1;
            }
            let wend = obj.start_of(last).min(end);
            let window = match held.fetch_covering(&obj, pos, wend) {
                Ok(chunks) => {
                    let mut pieces = Vec::with_capacity(chunks.len());
                    let mut at = obj.start_of(first);
                    for c in chunks {
                        let c_end = at + c.len() as u64;
                        let (a, b) = (pos.max(at), wend.min(c_end));
                        if a < b {
                            let piece = c.sub((a - at) as usize..(b - at) as usize);
                            pieces.push(Bytes::from_owner(piece));
                        }
                        at = c_end;
                    }
                    Ok(pieces)
                }
                Err(e) => {
                    tracing::warn!(
                        "a Hub download of file {} stopped at byte {pos}: {e}",
                        obj.hash.hex()
                    );
                    Err(std::io::Error::other(e.to_string()))
                }
            };
            if let Ok(pieces) = &window {
                let n: usize = pieces.iter().map(Bytes::len).sum();
                sealvol_core::read::add(&hub.chunks.counters.bytes_served, n as u64);
                if mirrored {
                    sealvol_core::read::add(&hub.chunks.counters.hub_sealed_bytes, n as u64);
                }
            }
            let failed = window.is_err();
            // The client went away: nothing more is read for it.
            if tx.blocking_send(window).is_err() || failed {
                return;
            }
            pos = wend;
        }
    });
    let frames = tokio_stream::wrappers::ReceiverStream::new(rx).flat_map(|w| {
        futures::stream::iter(match w {
            Ok(pieces) => pieces.into_iter().map(Ok).collect::<Vec<_>>(),
            Err(e) => vec![Err(e)],
        })
    });
    Body::from_stream(frames)
}
