//! The client side of the cache tier: a node's read path asks a `sealvol serve` for
//! runs of chunks (`read::Peer`). Nothing it returns is trusted: the read path checks
//! every chunk's hash, and passes over a peer that fails.

use std::io::Read;
use std::time::Duration;

use sealvol_core::digest::Hash;
use sealvol_core::error::{Error, ErrorKind, Result};
use sealvol_core::objects::PackId;
use sealvol_core::read::Peer;

use crate::http::RunRequest;

/// A peer that does not accept a connection at once is as good as down.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// The longest a run may take, a cold one pulled through from a slow origin included;
/// past it the node reads from the next tier itself.
const RUN_TIMEOUT: Duration = Duration::from_secs(30);

pub struct HttpPeer {
    url: String,
    runs: String,
    /// The API key the server asks every caller for.
    key: Option<String>,
    client: reqwest::blocking::Client,
}

impl HttpPeer {
    /// A peer at `url` (`http://HOST:PORT`, or `https://` for a server with TLS), asked
    /// with API key `key`.
    pub fn new(url: &str, key: Option<&str>) -> Result<HttpPeer> {
        let base = check_url(url)?;
        let client = crate::tls::client(CONNECT_TIMEOUT, RUN_TIMEOUT)?;
        Ok(HttpPeer {
            runs: format!("{base}/v1/runs"),
            url: base,
            key: key.map(|k| k.trim().to_string()),
            client,
        })
    }
}

/// A peer that will not take this node's key: every read then goes to the origin, so
/// this is said loudly (`HttpPeer::check`), not only counted.
fn refused(status: u16, said: &str) -> Error {
    Error::new(
        ErrorKind::Denied,
        format!("refused this node's API key ({status}: {said:.200})"),
    )
    .hint("set SEALVOL_API_KEY to a key the server knows: `sealvol key create NODES --read-only` on it makes one for a cluster's nodes")
}

impl HttpPeer {
    /// Asks the peer whether it takes this node's key (`GET /v1/key`): `Err` of kind
    /// `Denied` when it refuses it, of kind `Unavailable` when it cannot be reached (it
    /// may come up later; reads pass it over meanwhile).
    pub fn check(&self) -> Result<()> {
        let mut get = self.client.get(format!("{}/v1/key", self.url));
        if let Some(k) = &self.key {
            get = get.bearer_auth(k);
        }
        let resp = get.send().map_err(|e| {
            Error::new(
                ErrorKind::Unavailable,
                format!(
                    "peer {} cannot be reached: {}",
                    self.url,
                    crate::address::root_cause(&e)
                ),
            )
        })?;
        let status = resp.status().as_u16();
        if matches!(status, 401 | 403) {
            let text = resp.text().unwrap_or_default();
            let said = serde_json::from_str::<serde_json::Value>(&text)
                .ok()
                .and_then(|v| v["message"].as_str().map(str::to_string))
                .unwrap_or(text);
            let e = refused(status, &said);
            return Err(Error::new(
                ErrorKind::Denied,
                format!("peer {} {}", self.url, e.message()),
            )
            .hint(e.hint_text().unwrap_or_default()));
        }
        Ok(())
    }
}

/// `url` without a trailing slash, if it is an address a peer can be reached at.
pub fn check_url(url: &str) -> Result<String> {
    crate::address::check_address("--peer", url)
}

impl Peer for HttpPeer {
    fn name(&self) -> &str {
        &self.url
    }

    fn read_run(
        &self,
        file: &Hash,
        pack: &PackId,
        offset: u64,
        chunks: &[(Hash, u32)],
        into: &mut Vec<u8>,
    ) -> Result<()> {
        let unavailable = |what: String| Error::new(ErrorKind::Unavailable, what);
        let req = RunRequest {
            file: file.hex(),
            pack: pack.hex(),
            offset,
            chunks: chunks.iter().map(|(h, len)| (h.hex(), *len)).collect(),
        };
        let body = serde_json::to_vec(&req)
            .map_err(|e| unavailable(format!("cannot write a run request: {e}")))?;
        let mut post = self.client.post(&self.runs);
        if let Some(k) = &self.key {
            post = post.bearer_auth(k);
        }
        let resp = post
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body)
            .send()
            .map_err(|e| unavailable(format!("cannot reach it: {e}")))?;
        let status = resp.status();
        if !status.is_success() {
            let text = resp.text().unwrap_or_default();
            let line = text.lines().next().unwrap_or_default();
            if matches!(status.as_u16(), 401 | 403) {
                return Err(refused(status.as_u16(), line));
            }
            return Err(unavailable(format!("answered {status}: {line:.200}")));
        }
        let expect: u64 = chunks.iter().map(|c| c.1 as u64).sum();
        into.clear();
        // One byte more than asked, so that a peer sending too much is caught, and no
        // more, so that it cannot fill this node's memory.
        resp.take(expect + 1)
            .read_to_end(into)
            .map_err(|e| unavailable(format!("the answer was cut short: {e}")))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::check_url;

    #[test]
    fn only_http_addresses_name_a_peer() {
        assert_eq!(
            check_url("http://10.0.0.5:7420/").unwrap(),
            "http://10.0.0.5:7420"
        );
        assert!(check_url("https://cache.internal").is_ok());
        for bad in [
            "10.0.0.5:7420",
            "s3://bucket",
            "http://",
            "http:///x",
            "http://a b",
            "http://h?x=1",
            "",
        ] {
            let e = check_url(bad).unwrap_err().to_string();
            assert!(e.contains("--peer") && !e.contains('\n'), "{bad}: {e}");
        }
    }
}
