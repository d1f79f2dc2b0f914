//! One server, one key, one HTTP client: what the store and the operations share.

use std::io::Read;
use std::time::Duration;

use sealvol_core::error::{Error, ErrorKind, Result};
use sealvol_core::patience;
use sealvol_core::store::Traffic;

pub struct Link {
    pub base: String,
    key: String,
    pub client: reqwest::blocking::Client,
    pub traffic: Traffic,
}

impl Link {
    /// A request gets `patience::total()` to be answered whole; one that carries a
    /// body or a range of `n` bytes gets more (`time_for`).
    pub fn new(base: &str, key: &str) -> Result<Link> {
        Ok(Link {
            base: base.to_string(),
            key: key.to_string(),
            client: crate::protocol::client(patience::connect(), patience::total())?,
            traffic: Traffic::default(),
        })
    }

    /// How long a request moving `bytes` may take: the total, and a second per MiB
    /// on top (a 64 MiB pack over a link of 1 MiB/s).
    pub fn time_for(bytes: u64) -> Duration {
        patience::total() + Duration::from_secs(bytes >> 20)
    }

    /// Sends a request with the key; a server that cannot be reached is `Unavailable`,
    /// one too old for this client `Format` (`crate::protocol`).
    pub fn send(
        &self,
        req: reqwest::blocking::RequestBuilder,
    ) -> Result<reqwest::blocking::Response> {
        let resp = req.bearer_auth(&self.key).send().map_err(|e| {
            if e.is_timeout() {
                return Error::new(
                    ErrorKind::Unavailable,
                    format!(
                        "the remote engine at {} stopped answering (nothing within {} s)",
                        self.base,
                        patience::total().as_secs()
                    ),
                )
                .hint("check that `sealvol serve` runs there and the network; --timeout sets how long to wait");
            }
            crate::address::unreachable(&self.base, &e)
        })?;
        crate::protocol::check(&self.base, &resp)?;
        Ok(resp)
    }

    /// The engine's error the server sent, rebuilt.
    pub fn error(&self, resp: reqwest::blocking::Response) -> Error {
        let status = resp.status();
        let text = resp.text().unwrap_or_default();
        match rebuilt(&text) {
            Some(e) => e,
            None => Error::new(
                if status.is_server_error() {
                    ErrorKind::Unavailable
                } else if status == reqwest::StatusCode::NOT_FOUND {
                    // No such route: a server older than the operation asked for.
                    ErrorKind::NotFound
                } else {
                    ErrorKind::Io
                },
                format!(
                    "the remote engine at {} answered {status}: {:.200}",
                    self.base,
                    text.lines().next().unwrap_or_default()
                ),
            ),
        }
    }

    /// The whole body of `resp` into `into`.
    pub fn bytes(&self, resp: reqwest::blocking::Response, into: &mut Vec<u8>) -> Result<()> {
        into.clear();
        let mut resp = resp;
        resp.read_to_end(into).map_err(|e| {
            Error::new(
                ErrorKind::Unavailable,
                format!("an answer from {} was cut short: {e}", self.base),
            )
        })?;
        self.traffic.received(into.len() as u64);
        Ok(())
    }

    /// POSTs `body` to `/v1/ops/{op}` and returns the answer's body; an error the
    /// server sent is rebuilt.
    pub fn op(&self, method: reqwest::Method, op: &str, body: Vec<u8>) -> Result<(u16, Vec<u8>)> {
        self.op_with_headers(method, op, body)
            .map(|(status, _, out)| (status, out))
    }

    /// `op`, with the answer's headers.
    pub fn op_with_headers(
        &self,
        method: reqwest::Method,
        op: &str,
        body: Vec<u8>,
    ) -> Result<(u16, reqwest::header::HeaderMap, Vec<u8>)> {
        self.traffic.put(body.len() as u64);
        let url = format!("{}/v1/ops/{op}", self.base);
        let resp = self.send(self.client.request(method, url).body(body))?;
        let status = resp.status().as_u16();
        if !resp.status().is_success() {
            return Err(self.error(resp));
        }
        let headers = resp.headers().clone();
        let mut out = Vec::new();
        self.bytes(resp, &mut out)?;
        Ok((status, headers, out))
    }
}

/// An engine error as the server sends it (`{"kind", "message", "hint", "reason"}`),
/// rebuilt.
pub fn rebuilt(text: &str) -> Option<Error> {
    let s: sealvol_core::error::WireError = serde_json::from_str(text).ok()?;
    Some(Error::from(s))
}

/// A key as it goes into a URL path: unreserved characters and `/` as they are.
pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'/') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
