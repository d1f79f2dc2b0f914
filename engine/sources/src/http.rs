//! What the sources spoken over plain HTTPS (Hugging Face, GCS's JSON API) share: path
//! escaping, and HTTP failures as errors that say whether to retry and what to fix.

use std::ops::Range;

use crate::body::Body;
use sealvol_core::error::{Error, ErrorKind, Result};

/// The hints a source gives for the failures its user can fix.
pub struct Hints {
    /// For 401 and 403: where credentials go.
    pub denied: &'static str,
    /// For 404: what to check.
    pub missing: &'static str,
    /// For a failed connection: where the endpoint is set.
    pub endpoint: &'static str,
}

/// The HTTP client every HTTPS source uses: connects within `patience::connect()` and
/// waits at most `patience::answer()` for each byte of an answer, so a server that
/// accepts connections and then says nothing fails the try instead of hanging it.
pub fn client() -> Result<reqwest::Client> {
    reqwest::Client::builder()
        .connect_timeout(sealvol_core::patience::connect())
        .read_timeout(sealvol_core::patience::answer())
        .user_agent(concat!("sealvol/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| Error::new(ErrorKind::Io, format!("cannot make an HTTP client: {e}")))
}

/// `s` percent-encoded as one path segment (or query value): only unreserved bytes stay.
pub fn percent(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The innermost cause of an error, in its own words.
pub fn root_cause(e: &dyn std::error::Error) -> String {
    let mut cause = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

/// A request that got no answer: transient.
pub fn transport(what: &str, e: &reqwest::Error, hints: &Hints) -> Error {
    let host = e
        .url()
        .map(|u| u.origin().ascii_serialization())
        .unwrap_or_else(|| "the server".into());
    let said = match (e.is_timeout(), e.is_connect()) {
        (true, _) => format!(
            "{host} did not answer within {} s",
            sealvol_core::patience::answer().as_secs()
        ),
        (false, true) => format!("cannot reach {host}: {}", root_cause(e)),
        (false, false) => format!("{host}: {}", root_cause(e)),
    };
    Error::new(ErrorKind::Unavailable, format!("{what}: {said}")).hint(hints.endpoint)
}

/// An answer other than success. `detail` (a server's error code) is shown after the
/// status when not empty.
pub fn status_error(what: &str, status: u16, detail: &str, hints: &Hints) -> Error {
    let detail = if detail.is_empty() {
        String::new()
    } else {
        format!(", {detail}")
    };
    match status {
        401 | 403 => Error::new(
            ErrorKind::Denied,
            format!("{what}: access denied (HTTP {status}{detail})"),
        )
        .hint(hints.denied),
        404 => {
            Error::not_found(format!("{what}: not found (HTTP 404{detail})")).hint(hints.missing)
        }
        412 => Error::new(
            ErrorKind::Changed,
            format!("{what}: the object changed at the source while it was synced"),
        )
        .hint("run the sync again once the source is stable"),
        429 | 500..=599 => Error::new(
            ErrorKind::Unavailable,
            format!("{what}: HTTP {status}{detail}"),
        ),
        _ => Error::new(
            ErrorKind::Io,
            format!("{what}: unexpected HTTP {status}{detail}"),
        ),
    }
}

/// Sends a ranged GET for bytes `range` of an object of `size` bytes and returns its
/// body, or the failure as an error. A 200 is accepted only for the whole object.
pub async fn ranged_get(
    req: reqwest::RequestBuilder,
    what: &str,
    range: &Range<u64>,
    size: u64,
    hints: &Hints,
    error_code_header: &str,
) -> Result<Body> {
    let resp = req
        .header("Range", format!("bytes={}-{}", range.start, range.end - 1))
        .send()
        .await
        .map_err(|e| transport(what, &e, hints))?;
    let status = resp.status().as_u16();
    if status == 206 || (status == 200 && range.start == 0 && range.end == size) {
        return Ok(Body::Http(resp));
    }
    let code = resp
        .headers()
        .get(error_code_header)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    Err(status_error(what, status, &code, hints))
}

#[cfg(test)]
mod tests {
    use super::percent;

    #[test]
    fn path_segments_are_escaped() {
        assert_eq!(percent("model.safetensors"), "model.safetensors");
        assert_eq!(percent("a b#c?/d"), "a%20b%23c%3F%2Fd");
    }
}
