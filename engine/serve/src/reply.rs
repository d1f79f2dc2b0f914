//! What the server answers when a request fails, and how it reads a request's body:
//! errors as the client rebuilds them, without the server's own paths; bodies read
//! whole within a size limit, an idle timeout and the server's budget.

use std::sync::OnceLock;

use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use sealvol_core::error::{Error, ErrorKind};

/// How long an upload may send nothing before it is ended.
pub const BODY_IDLE: std::time::Duration = std::time::Duration::from_secs(30);

/// The server's own folders and the addresses it reaches sources at, which no error
/// body may carry (`hide_paths`).
static HIDDEN: OnceLock<Hidden> = OnceLock::new();

struct Hidden {
    folders: Vec<String>,
    addresses: Vec<String>,
}

/// Folders (the repository's, the state folder's, the cache's) and addresses (the
/// endpoints the server reaches sources at) that error bodies, job records and logs
/// replace by `…`.
pub fn hide_paths(folders: Vec<String>, addresses: Vec<String>) {
    let clean = |mut v: Vec<String>| {
        v.retain(|p| p.len() > 1);
        // Longest first, so a path inside another is replaced whole.
        v.sort_by_key(|p| std::cmp::Reverse(p.len()));
        v
    };
    let _ = HIDDEN.set(Hidden {
        folders: clean(folders),
        addresses: clean(addresses),
    });
}

pub(crate) fn scrub(text: &str) -> String {
    let mut out = text.to_string();
    if let Some(h) = HIDDEN.get() {
        for p in h.folders.iter().chain(&h.addresses) {
            out = out.replace(p.as_str(), "…");
        }
    }
    out
}

/// Whether `text` names one of the server's own folders.
fn names_a_folder(text: &str) -> bool {
    HIDDEN
        .get()
        .is_some_and(|h| h.folders.iter().any(|f| text.contains(f.as_str())))
}

/// A message for a caller about something that went wrong on the server: one that
/// named the server's own files (a full disk while a job wrote the repository) says
/// what failed and why, never where, nor how the repository is laid out inside.
pub(crate) fn pathless(text: &str) -> String {
    if !names_a_folder(text) {
        return scrub(text);
    }
    // "cannot write /srv/repo/tmp/x.tmp: No space left on device (os error 28)": the
    // cause is the last part.
    let cause = text.rsplit(": ").next().unwrap_or_default();
    format!(
        "the server could not read or write its own files ({})",
        scrub(cause)
    )
}

/// An engine error as the client rebuilds it, without the server's paths: an I/O
/// failure is logged here in full and sent as what it means to the client.
pub fn error_response(status: StatusCode, e: &Error) -> Response {
    let (message, hint) = match e.kind() {
        ErrorKind::Io => {
            tracing::warn!("a request failed: {e}");
            (
                "the server could not read or write its repository".to_string(),
                Some("try again; if it persists, the server's log says why".to_string()),
            )
        }
        _ => (scrub(e.message()), e.hint_text().map(scrub)),
    };
    let mut body = serde_json::json!({
        "kind": e.kind(),
        "message": message,
        "hint": hint,
    });
    if let Some(reason) = e.reason() {
        body["reason"] = serde_json::json!(reason);
    }
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// What a handler answers: its response, or the error response it stopped at (so a
/// handler can use `?` on every step that may refuse).
pub type Reply = Result<Response, Response>;

pub fn json(v: &impl serde::Serialize) -> Response {
    match serde_json::to_vec(v) {
        Ok(body) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Err(e) => failed(Error::new(ErrorKind::Io, format!("cannot encode: {e}"))),
    }
}

fn status_of(kind: ErrorKind) -> StatusCode {
    match kind {
        ErrorKind::NotFound => StatusCode::NOT_FOUND,
        ErrorKind::Race => StatusCode::PRECONDITION_FAILED,
        ErrorKind::Denied | ErrorKind::Untrusted => StatusCode::FORBIDDEN,
        ErrorKind::Invalid | ErrorKind::Usage => StatusCode::BAD_REQUEST,
        ErrorKind::Corrupt => StatusCode::UNPROCESSABLE_ENTITY,
        ErrorKind::Collected | ErrorKind::Conflict => StatusCode::CONFLICT,
        ErrorKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        ErrorKind::Busy => StatusCode::TOO_MANY_REQUESTS,
        ErrorKind::Quota => StatusCode::INSUFFICIENT_STORAGE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

pub fn failed(e: Error) -> Response {
    error_response(status_of(e.kind()), &e)
}

pub fn denied(why: String) -> Response {
    failed(
        Error::new(ErrorKind::Denied, why)
            .hint("ask the server's operator for a key with that scope (`sealvol key create`)"),
    )
}

/// A body read whole, with its share of the server's budget for such bodies.
pub struct Whole {
    pub bytes: Bytes,
    _share: crate::budget::Share,
}

impl std::ops::Deref for Whole {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes
    }
}

/// A body read whole, at most `limit` bytes, each piece within `BODY_IDLE` of the last,
/// and within the server's budget for bodies held whole (`budget.rs`).
pub async fn read_body(body: Body, limit: usize) -> Result<Whole, Response> {
    use futures::StreamExt;
    let mut stream = body.into_data_stream();
    let mut out = Vec::new();
    let mut share = crate::budget::Share::none();
    loop {
        match tokio::time::timeout(BODY_IDLE, stream.next()).await {
            Err(_) => return Err(idle()),
            Ok(None) => {
                return Ok(Whole {
                    bytes: Bytes::from(out),
                    _share: share,
                });
            }
            Ok(Some(Err(e))) => {
                return Err(failed(Error::new(
                    ErrorKind::Unavailable,
                    format!("the body was cut short: {e}"),
                )));
            }
            Ok(Some(Ok(b))) => {
                if out.len() + b.len() > limit {
                    return Err(too_large(limit));
                }
                if !share.cover_body((out.len() + b.len()) as u64).await {
                    return Err(busy());
                }
                out.extend_from_slice(&b);
            }
        }
    }
}

/// The server holds all the bodies it will hold at once.
pub fn busy() -> Response {
    failed(
        Error::new(
            ErrorKind::Unavailable,
            "the server is holding all the request bodies it may at once",
        )
        .hint("try again in a moment"),
    )
}

pub(crate) fn idle() -> Response {
    failed(
        Error::new(
            ErrorKind::Unavailable,
            format!("the body stopped coming for {} s", BODY_IDLE.as_secs()),
        )
        .hint("send again"),
    )
}

pub(crate) fn too_large(limit: usize) -> Response {
    error_response(
        StatusCode::PAYLOAD_TOO_LARGE,
        &Error::invalid(format!("the body is over {limit} bytes"))
            .hint("a pack is at most the repository's pack size plus one chunk"),
    )
}

/// The most a refused request's body is read for (the largest object a client may
/// send, `objects::MAX_OBJECT`): past it the connection is closed instead.
pub const MAX_DRAIN: usize = 256 << 20;

/// Reads a body to its end (at most `limit` bytes, each piece within `BODY_IDLE`),
/// keeping nothing: a client still sending a refused request then sees the answer.
pub async fn drain(body: Body, limit: usize) {
    use futures::StreamExt;
    let mut stream = body.into_data_stream();
    let mut total = 0;
    while let Ok(Some(Ok(b))) = tokio::time::timeout(BODY_IDLE, stream.next()).await {
        total += b.len();
        if total > limit {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_naming_a_server_path_says_what_failed_not_where() {
        hide_paths(
            vec!["/srv/sealvol/repo".into(), "/var/lib/sealvol".into()],
            vec!["http://10.0.0.7:9000".into()],
        );
        let full = "cannot write /srv/sealvol/repo/tmp/vm-6428-0.tmp: No space left on device (os error 28)";
        let said = pathless(full);
        assert_eq!(
            said,
            "the server could not read or write its own files (No space left on device (os error 28))"
        );
        assert!(!said.contains("/srv") && !said.contains("tmp/") && !said.contains('…'));
        assert_eq!(
            pathless("hf://o/m: no such repository"),
            "hf://o/m: no such repository"
        );
    }
}
