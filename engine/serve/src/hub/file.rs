//! `HEAD` and `GET /hf/[datasets/]NS/VOL/resolve/REV/PATH`: one file of a version as
//! `hf_hub_download` reads it. The headers are the Hub's: `X-Repo-Commit` (the
//! version's commit id), `ETag` (a small file's git blob id, a large one's SHA-256,
//! which is also `X-Linked-Etag`, with `X-Linked-Size`), `Content-Length`,
//! `Accept-Ranges: bytes`. One `Range` is answered `206` (an interrupted download
//! resumes); one past the end, or more than one, `416`. The body is `file_body`'s:
//! every byte proven before it is sent, a window at a time.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sealvol_core::digest::Entry;
use sealvol_core::objects::FileObject;

use super::asked::At;
use super::lookup::blocking;
use super::missing::Missing;
use super::shared::Hub;
use crate::keys::Grant;

/// The bytes a client is sent at a time (`crate::file_body::WINDOW`).
pub use crate::file_body::WINDOW;

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
    let Some(share) = crate::budget::for_run(3 * crate::file_body::WINDOW).await else {
        return crate::reply::busy();
    };
    let counters = Arc::clone(&hub.chunks);
    let on_sent = move |n: u64| {
        if mirrored {
            sealvol_core::read::add(&counters.counters.hub_sealed_bytes, n);
        }
    };
    let body = crate::file_body::proven(
        Arc::clone(&hub.chunks),
        obj,
        start..start + len,
        share,
        Box::new(on_sent),
    );
    (status, headers, body).into_response()
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
