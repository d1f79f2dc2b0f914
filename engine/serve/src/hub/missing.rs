//! What the Hub's clients are told when a request names nothing they may read: the
//! status and `X-Error-Code` the Hub itself answers, so that `huggingface_hub` raises
//! its own `RepositoryNotFoundError`, `RevisionNotFoundError` or
//! `RemoteEntryNotFoundError` with the one-line reason in its message.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

#[derive(Debug)]
pub enum Missing {
    /// No repo of that id, or one the key may not see (the same answer).
    Repo(String),
    /// The repo has no such revision.
    Revision(String),
    /// The revision has no such file or folder.
    Entry(String),
    /// A request no route of the Hub's API answers.
    Route,
    /// A request that is wrong as sent (says what is wrong).
    Bad(String),
    /// A `Range` the file cannot answer: its size.
    Range(u64, String),
    /// The repository could not be read just now.
    Failed(String),
}

impl IntoResponse for Missing {
    fn into_response(self) -> Response {
        let (status, code, message) = match self {
            Missing::Repo(m) => (StatusCode::NOT_FOUND, Some("RepoNotFound"), m),
            Missing::Revision(m) => (StatusCode::NOT_FOUND, Some("RevisionNotFound"), m),
            Missing::Entry(m) => (StatusCode::NOT_FOUND, Some("EntryNotFound"), m),
            Missing::Route => (
                StatusCode::NOT_FOUND,
                None,
                "not a route of the Hub's API: /hf/api/{models,datasets}/NS/VOL[/revision/REV | /tree/REV/PATH], /hf/[datasets/]NS/VOL/resolve/REV/PATH".into(),
            ),
            Missing::Bad(m) => (StatusCode::BAD_REQUEST, None, m),
            Missing::Range(_, m) => (StatusCode::RANGE_NOT_SATISFIABLE, None, m),
            Missing::Failed(m) => (StatusCode::SERVICE_UNAVAILABLE, None, m),
        };
        let mut r = (status, serde_json::json!({ "error": message }).to_string()).into_response();
        let h = r.headers_mut();
        if let Some(code) = code {
            h.insert("x-error-code", HeaderValue::from_static(code));
        }
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        r
    }
}

impl Missing {
    /// The response, with `Content-Range: bytes */SIZE` on a 416.
    pub fn response(self) -> Response {
        let size = match &self {
            Missing::Range(size, _) => Some(*size),
            _ => None,
        };
        let mut r = self.into_response();
        if let Some(size) = size
            && let Ok(v) = HeaderValue::from_str(&format!("bytes */{size}"))
        {
            r.headers_mut().insert(header::CONTENT_RANGE, v);
        }
        r
    }
}
