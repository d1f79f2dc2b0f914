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

/// Whether `e` is a TLS handshake that got plain HTTP back: an `https://` address of a
/// server that does not speak TLS (rustls reads the HTTP answer as a record of no known
/// type).
pub fn tls_to_plain_http(e: &(dyn std::error::Error + 'static)) -> bool {
    let is_it = |e: &(dyn std::error::Error + 'static)| {
        matches!(
            e.downcast_ref::<rustls::Error>(),
            Some(rustls::Error::InvalidMessage(
                rustls::InvalidMessage::InvalidContentType
            ))
        )
    };
    // An io::Error hands on its inner error's cause, not the inner error itself (and
    // hyper's connector nests one io::Error in another): follow both ways down.
    let mut todo = vec![e];
    while let Some(c) = todo.pop() {
        if is_it(c) {
            return true;
        }
        if let Some(inner) = c
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            todo.push(inner);
        }
        if let Some(next) = c.source() {
            todo.push(next);
        }
    }
    false
}

/// The line for a request to `base` that failed with `e` before any answer.
pub fn unreachable(base: &str, e: &(dyn std::error::Error + 'static)) -> Error {
    if tls_to_plain_http(e) {
        let plain = base.replacen("https://", "http://", 1);
        return Error::new(
            sealvol_core::error::ErrorKind::Unavailable,
            format!("{base} answered in plain HTTP, not TLS: the server there has no TLS"),
        )
        .hint(format!(
            "use {plain}, or start `sealvol serve` with --tls-cert and --tls-key"
        ));
    }
    Error::new(
        sealvol_core::error::ErrorKind::Unavailable,
        format!("cannot reach the remote engine at {base}: {}", root_cause(e)),
    )
    .hint(format!(
        "check that `sealvol serve` runs there and the address is right; for a server with a private certificate, set {} to its CA",
        crate::tls::CA_ENV
    ))
}
