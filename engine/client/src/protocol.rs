//! The protocol's version on the client's side (`sealvol_wire::protocol`): said on
//! every request, and every answer's checked, so that a server too old for this client
//! is one clear line, not a body misread.

use std::time::Duration;

use sealvol_core::error::{Error, ErrorKind, Result};
use sealvol_wire::protocol as p;

/// An HTTP client for a `sealvol serve` (`crate::tls::client`) that says this build's
/// protocol version on every request.
pub fn client(connect: Duration, total: Duration) -> Result<reqwest::blocking::Client> {
    let mut said = reqwest::header::HeaderMap::new();
    said.insert(p::HEADER, reqwest::header::HeaderValue::from(p::PROTOCOL));
    crate::tls::builder(connect, total)?
        .default_headers(said)
        .build()
        .map_err(|e| Error::new(ErrorKind::Io, format!("cannot set up an HTTP client: {e}")))
}

/// `Err` when the server at `url` that sent `answer` speaks a protocol older than this
/// client needs (or says a version that is none).
pub fn check(url: &str, answer: &reqwest::blocking::Response) -> Result<()> {
    let said = p::said(answer.headers().get(p::HEADER).map(|v| v.as_bytes()))
        .map_err(|why| Error::new(ErrorKind::Format, format!("the server at {url}: {why}")))?;
    match p::server_refused(url, said) {
        None => Ok(()),
        Some(why) => Err(Error::new(ErrorKind::Format, why).hint(
            "servers are upgraded first: a server answers clients one version older than itself",
        )),
    }
}
