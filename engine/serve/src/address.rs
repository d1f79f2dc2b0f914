//! A `sealvol serve` as its clients (a node's peer, a remote engine) are given it: the
//! address checked before any request, and a failed request told by its root cause.

use sealvol_core::error::{Error, Result};

/// `url` without a trailing slash, if it is an address a `sealvol serve` can be reached
/// at; the error names `flag`.
pub fn check_address(flag: &str, url: &str) -> Result<String> {
    let bad = |why: &str| {
        Error::invalid(format!("{flag} {url:?} {why}"))
            .hint("name a `sealvol serve` as http://HOST:PORT (or https:// behind a TLS proxy)")
    };
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .ok_or_else(|| bad("is not an http:// or https:// address"))?;
    let host = rest.split('/').next().unwrap_or_default();
    if host.is_empty() {
        return Err(bad("names no host"));
    }
    if rest.contains(['?', '#']) || rest.chars().any(char::is_whitespace) {
        return Err(bad("has a query, fragment or space in it"));
    }
    Ok(url.trim_end_matches('/').to_string())
}

/// The innermost cause of a client error: what actually failed (a refused connection, a
/// certificate not trusted), not the layers above it.
pub fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}
