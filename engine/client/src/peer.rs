//! The client side of the cache tier: a node's read path asks a `sealvol serve` for
//! runs of chunks (`read::Peer`). Nothing it returns is trusted: the read path checks
//! every chunk's hash, and passes over a peer that fails. And nothing is sent to it that
//! it could use elsewhere: this node's API key goes only to a peer that proved it is a
//! server of the ring (`Trust`, `credential.rs`), and a peer that cannot is refused as
//! loudly as one that refuses the key.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sealvol_core::digest::Hash;
use sealvol_core::error::{Error, ErrorKind, Result};
use sealvol_core::objects::PackId;
use sealvol_core::read::Peer;
use sealvol_core::read::ring::PeerSource;

use sealvol_wire::ring::RunRequest;

/// A peer that does not accept a connection at once is as good as down.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// The longest a run may take, a cold one pulled through from a slow origin included;
/// past it the node reads from the next tier itself.
const RUN_TIMEOUT: Duration = Duration::from_secs(30);
/// A probe of a peer passed over (`read::liveness`): a live server answers at once.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

pub struct HttpPeer {
    url: String,
    runs: String,
    /// The API key the server asks every caller for.
    key: Option<String>,
    client: reqwest::blocking::Client,
    trust: Trust,
    /// When the peer last proved it is a server of the ring.
    proven: Mutex<Option<std::time::Instant>>,
}

/// To whom a node sends its API key.
#[derive(Clone)]
pub enum Trust {
    /// Sent without a proof: the remote engine a user named (`--remote`), whose every
    /// request carries the key anyway.
    Named,
    /// Sent once the peer proved, with one of these keys, that it is a server of the
    /// ring (`GET /v1/ring/id?challenge=`); proven again every `PROVE_EVERY`.
    Ring(Arc<sealvol_wire::membership::RingPublic>),
    /// No ring key to check a peer with: the key is never sent.
    Unknown,
}

/// How long a peer's proof of membership stands.
const PROVE_EVERY: Duration = Duration::from_secs(60);

impl HttpPeer {
    /// A peer at `url` (`http://HOST:PORT`, or `https://` for a server with TLS), asked
    /// with API key `key`, sent to it as it is (`Trust::Named`).
    pub fn new(url: &str, key: Option<&str>) -> Result<HttpPeer> {
        HttpPeer::with_trust(url, key, Trust::Named)
    }

    /// A peer at `url` that is sent key `key` only as `trust` says.
    pub fn with_trust(url: &str, key: Option<&str>, trust: Trust) -> Result<HttpPeer> {
        let base = check_url(url)?;
        let client = crate::protocol::client(CONNECT_TIMEOUT, RUN_TIMEOUT)?;
        Ok(HttpPeer {
            runs: format!("{base}/v1/runs"),
            url: base,
            key: key.map(|k| k.trim().to_string()),
            client,
            trust,
            proven: Mutex::new(None),
        })
    }

    /// The key to send with a request, once the peer may have it: `Err` (`Denied`) when
    /// it did not prove it is a server of the ring, or cannot be asked to.
    fn key_to_send(&self) -> Result<Option<&str>> {
        let Some(key) = self.key.as_deref() else {
            return Ok(None);
        };
        match &self.trust {
            Trust::Named => Ok(Some(key)),
            Trust::Unknown => Err(Error::new(
                ErrorKind::Denied,
                format!(
                    "peer {} cannot be checked to be a server of this repository's ring (no ring key is known here): this node's key is not sent to it",
                    self.url
                ),
            )
            .hint("read the repository directly (it holds the ring's public keys), or set ring_key in config.toml to a copy of its access/ring-public.json")),
            Trust::Ring(public) => {
                if sealvol_core::lock(&self.proven).is_some_and(|at| at.elapsed() < PROVE_EVERY) {
                    return Ok(Some(key));
                }
                match self.member_id(public) {
                    Ok(_) => {
                        *sealvol_core::lock(&self.proven) = Some(std::time::Instant::now());
                        Ok(Some(key))
                    }
                    Err(e) => Err(e),
                }
            }
        }
    }

    /// Asks the peer to prove it is a server of the ring `public` signs for; its
    /// instance id once it did. Its answer is read within a bound; the key is not sent.
    pub fn member_id(&self, public: &sealvol_wire::membership::RingPublic) -> Result<String> {
        let challenge = sealvol_wire::membership::challenge();
        let url = format!(
            "{}{}?challenge={}",
            self.url,
            sealvol_wire::ring::RING_ID_ROUTE,
            hex::encode(challenge)
        );
        let not_member = |why: &str| {
            Error::new(
                ErrorKind::Denied,
                format!(
                    "peer {} did not prove it is a server of this repository's ring ({why}): this node's key is not sent to it",
                    self.url
                ),
            )
            .hint("check the peers list: every peer must be a `sealvol serve` of this repository")
        };
        let resp = self
            .client
            .get(url)
            .send()
            .map_err(|e| self.unreachable(&e))?;
        crate::protocol::check(&self.url, &resp)?;
        if !resp.status().is_success() {
            return Err(not_member(&format!("it answered {}", resp.status())));
        }
        let mut body = Vec::new();
        resp.take(4096)
            .read_to_end(&mut body)
            .map_err(|_| not_member("its answer was cut short"))?;
        let proof: sealvol_wire::membership::Proof =
            serde_json::from_slice(&body).map_err(|_| not_member("its answer is no proof"))?;
        match public.proves(&challenge, &proof) {
            true => Ok(proof.id),
            false => Err(not_member("its proof does not check with the ring's keys")),
        }
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
        let resp = self.get("/v1/key")?;
        let status = resp.status().as_u16();
        if matches!(status, 401 | 403) {
            let e = refusal(status, resp);
            return Err(Error::new(
                ErrorKind::Denied,
                format!("peer {} {}", self.url, e.message()),
            )
            .hint(e.hint_text().unwrap_or_default()));
        }
        Ok(())
    }

    /// `GET path` with this node's key; `Err` says why the server could not be reached.
    fn get(&self, path: &str) -> Result<reqwest::blocking::Response> {
        let mut get = self.client.get(format!("{}{path}", self.url));
        if let Some(k) = self.key_to_send()? {
            get = get.bearer_auth(k);
        }
        let resp = get.send().map_err(|e| self.unreachable(&e))?;
        crate::protocol::check(&self.url, &resp)?;
        Ok(resp)
    }

    /// A peer that could not be asked: it may come up, reads pass it over meanwhile.
    fn unreachable(&self, e: &reqwest::Error) -> Error {
        let why = match crate::address::tls_to_plain_http(e) {
            true => "it answers in plain HTTP, not TLS (name it http://)".to_string(),
            false => crate::address::root_cause(e),
        };
        Error::new(
            ErrorKind::Unavailable,
            format!("peer {} cannot be reached: {why}", self.url),
        )
    }
}

/// The refusal a server answered with (401, 403), as `refused` says it, with the
/// server's own words when its body is an error object.
fn refusal(status: u16, resp: reqwest::blocking::Response) -> Error {
    let text = resp.text().unwrap_or_default();
    let said = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| v["message"].as_str().map(str::to_string))
        .unwrap_or(text);
    refused(status, &said)
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
        let key = self.key_to_send()?;
        self.post_run(key.map(Auth::Key), false, file, pack, offset, chunks, into)
    }

    /// `GET /healthz` (no key: it is sent only to a server that proved itself) within
    /// `PROBE_TIMEOUT`: a frozen server accepts the connection and never answers.
    fn probe(&self) -> Result<()> {
        let resp = self
            .client
            .get(format!("{}/healthz", self.url))
            .timeout(PROBE_TIMEOUT)
            .send()
            .map_err(|e| self.unreachable(&e))?;
        crate::protocol::check(&self.url, &resp)?;
        match resp.status().as_u16() {
            200 => Ok(()),
            s => Err(Error::new(
                ErrorKind::Unavailable,
                format!("peer {} answered {s} to /healthz", self.url),
            )),
        }
    }
}

/// What a run request goes with: a node's key, or a fellow server's pass.
enum Auth<'a> {
    Key(&'a str),
    Pass(&'a str),
}

impl HttpPeer {
    /// `read_run` for a fellow server (`fellows.rs`): with a pass of the ring for this
    /// fellow (never the caller's key), marked forwarded, so that the fellow never
    /// forwards it again.
    pub fn read_run_forwarded(
        &self,
        pass: &str,
        file: &Hash,
        pack: &PackId,
        offset: u64,
        chunks: &[(Hash, u32)],
        into: &mut Vec<u8>,
    ) -> Result<()> {
        self.post_run(
            Some(Auth::Pass(pass)),
            true,
            file,
            pack,
            offset,
            chunks,
            into,
        )
    }

    /// What the server says of itself (`GET /v1/ring`): `Unavailable` when it cannot be
    /// reached or answers otherwise, `Denied` when it refuses the key.
    pub fn report(&self) -> Result<sealvol_wire::ring::Report> {
        // The peer's address is beside its row: said once, there.
        let resp = self.get("/v1/ring").map_err(|e| match e.kind() {
            ErrorKind::Unavailable => Error::new(
                ErrorKind::Unavailable,
                e.message().replacen(
                    &format!("peer {} cannot be reached", self.url),
                    "cannot reach it",
                    1,
                ),
            ),
            _ => e,
        })?;
        let status = resp.status().as_u16();
        if matches!(status, 401 | 403) {
            return Err(refusal(status, resp));
        }
        if status != 200 {
            return Err(Error::new(
                ErrorKind::Unavailable,
                format!("answered {status} to /v1/ring (a sealvol serve older than the ring?)"),
            ));
        }
        let mut body = Vec::new();
        resp.take(64 << 10).read_to_end(&mut body).map_err(|e| {
            Error::new(
                ErrorKind::Unavailable,
                format!("its answer was cut short: {e}"),
            )
        })?;
        serde_json::from_slice(&body).map_err(|e| {
            Error::new(
                ErrorKind::Unavailable,
                format!("its answer is not a ring report: {e:.120}"),
            )
        })
    }

    /// The server's instance id (`GET /v1/ring/id`), by which a server finds itself in
    /// a ring's list.
    pub fn instance_id(&self) -> Result<String> {
        let resp = self
            .client
            .get(format!("{}{}", self.url, sealvol_wire::ring::RING_ID_ROUTE))
            .send()
            .map_err(|e| {
                Error::new(
                    ErrorKind::Unavailable,
                    format!("cannot reach it: {}", crate::address::root_cause(&e)),
                )
            })?;
        crate::protocol::check(&self.url, &resp)?;
        if !resp.status().is_success() {
            return Err(Error::new(
                ErrorKind::Unavailable,
                format!("answered {} to its id", resp.status()),
            ));
        }
        let mut text = String::new();
        resp.take(256).read_to_string(&mut text).map_err(|e| {
            Error::new(ErrorKind::Unavailable, format!("its id was cut short: {e}"))
        })?;
        Ok(text.trim().to_string())
    }

    #[allow(clippy::too_many_arguments)]
    fn post_run(
        &self,
        auth: Option<Auth>,
        forwarded: bool,
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
        match auth {
            Some(Auth::Key(k)) => post = post.bearer_auth(k),
            Some(Auth::Pass(p)) => post = post.header(sealvol_wire::membership::PASS_HEADER, p),
            None => {}
        }
        if forwarded {
            post = post.header(sealvol_wire::ring::FORWARDED, "1");
        }
        let resp = post
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body)
            .send()
            .map_err(|e| unavailable(format!("cannot reach it: {e}")))?;
        crate::protocol::check(&self.url, &resp)?;
        let status = resp.status();
        if !status.is_success() {
            let text = resp.text().unwrap_or_default();
            let line = text.lines().next().unwrap_or_default();
            if matches!(status.as_u16(), 401 | 403) {
                return Err(refused(status.as_u16(), line));
            }
            return Err(unavailable(format!("answered {status}: {line:.200}")));
        }
        let expect: usize = chunks.iter().map(|c| c.1 as usize).sum();
        read_answer(resp, expect, into)
            .map_err(|e| unavailable(format!("the answer was cut short: {e}")))
    }
}

/// Reads an answer of `expect` bytes into `into`, over the bytes it holds: the read path
/// hands in a recycled buffer of the run's length, and appending instead (`read_to_end`)
/// zeroes all of it first, a sixth of a mount's time reading through a server. Room is
/// made for one byte more than asked, so that the caller sees a peer sending too much,
/// and no more, so that it cannot fill this node's memory.
fn read_answer(mut from: impl Read, expect: usize, into: &mut Vec<u8>) -> std::io::Result<()> {
    into.resize(expect + 1, 0);
    let mut filled = 0;
    while filled < into.len() {
        match from.read(&mut into[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    into.truncate(filled);
    Ok(())
}

/// A peer list kept in a file (one `http://HOST:PORT` per line; blank lines and `#`
/// comments are passed over) that an operator, or a Kubernetes headless service's
/// sidecar, rewrites while nodes run: the ring looks at it again at most once a second
/// (`read::ring::RECHECK`) and takes a new list when the file changed (its inode, size
/// or time: a rename over it, as editors and kubelet write, counts).
pub struct PeersFile {
    path: PathBuf,
    key: Option<String>,
    trust: Trust,
    /// The file as last read.
    seen: Mutex<Option<FileId>>,
    /// The list it held, and whether the ring has taken it yet.
    pending: Mutex<Option<Vec<String>>>,
}

/// Which file a list was read from: inode, size and modification time.
type FileId = (u64, u64, std::time::SystemTime);

fn file_id(path: &Path) -> std::io::Result<FileId> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path)?;
    Ok((m.ino(), m.len(), m.modified()?))
}

/// The most bytes a peers file may hold: a list of servers, not a data file.
const MAX_PEERS_FILE: u64 = 1 << 20;

/// The addresses in a peers file's text, each checked; a line that is not one fails
/// the whole list with its number, so a half-written edit is never taken.
pub fn parse_peers(path: &Path, text: &str) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or_default().trim();
        if line.is_empty() {
            continue;
        }
        let url = check_url(line).map_err(|e| {
            Error::invalid(format!(
                "peers file {} line {}: {}",
                path.display(),
                n + 1,
                e.message()
            ))
            .hint("one cache server per line, as http://HOST:PORT; # starts a comment")
        })?;
        if !out.contains(&url) {
            out.push(url);
        }
    }
    Ok(out)
}

impl PeersFile {
    /// Reads `path` now: a file that cannot be read or holds a bad line is an error
    /// before anything starts. Later, such a file leaves the last list in place.
    pub fn open(path: &Path, key: Option<&str>, trust: Trust) -> Result<(PeersFile, Vec<String>)> {
        let (id, urls) = read_peers(path)?;
        let f = PeersFile {
            path: path.to_path_buf(),
            key: key.map(|k| k.trim().to_string()),
            trust,
            seen: Mutex::new(Some(id)),
            pending: Mutex::new(Some(urls.clone())),
        };
        Ok((f, urls))
    }

    fn peers(&self, urls: &[String]) -> Vec<Arc<dyn Peer>> {
        let build = || -> Vec<Arc<dyn Peer>> {
            urls.iter()
                .filter_map(|u| {
                    match HttpPeer::with_trust(u, self.key.as_deref(), self.trust.clone()) {
                        Ok(p) => Some(Arc::new(p) as Arc<dyn Peer>),
                        Err(e) => {
                            tracing::warn!("peers file {}: {e}", self.path.display());
                            None
                        }
                    }
                })
                .collect()
        };
        // On a thread of its own: the ring may look at the file from within an async
        // runtime (a mount's serving loop), where a blocking client cannot be built.
        std::thread::scope(|s| s.spawn(build).join().unwrap_or_default())
    }
}

fn read_peers(path: &Path) -> Result<(FileId, Vec<String>)> {
    let cannot = |e: std::io::Error| {
        Error::io("cannot read peers file", path, e)
            .hint("give a file of cache servers, one http://HOST:PORT per line")
    };
    let id = file_id(path).map_err(cannot)?;
    if id.1 > MAX_PEERS_FILE {
        return Err(Error::invalid(format!(
            "peers file {} holds {} bytes: more than a list of servers ({MAX_PEERS_FILE} at most)",
            path.display(),
            id.1
        ))
        .hint("give a file of cache servers, one http://HOST:PORT per line"));
    }
    // Not blocked by a FIFO or fed forever by a device named as the file.
    let bytes = sealvol_core::small_file::read(path, "peers file", MAX_PEERS_FILE)?;
    let text = String::from_utf8(bytes).map_err(|_| {
        Error::invalid(format!("peers file {} is not text", path.display()))
            .hint("give a file of cache servers, one http://HOST:PORT per line")
    })?;
    Ok((id, parse_peers(path, &text)?))
}

impl PeerSource for PeersFile {
    fn changed(&self) -> Option<Vec<Arc<dyn Peer>>> {
        if let Some(urls) = sealvol_core::lock(&self.pending).take() {
            return Some(self.peers(&urls));
        }
        let now = file_id(&self.path).ok();
        let mut seen = sealvol_core::lock(&self.seen);
        if now.is_none() || now == *seen {
            return None;
        }
        *seen = now;
        match read_peers(&self.path) {
            Ok((_, urls)) => {
                tracing::info!(
                    "peers file {}: {} server(s) now",
                    self.path.display(),
                    urls.len()
                );
                Some(self.peers(&urls))
            }
            Err(e) => {
                tracing::warn!("{e}; keeping the servers it listed before");
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::check_url;

    #[test]
    fn a_peers_file_lists_servers_and_a_bad_line_fails_the_whole_list() {
        let p = std::path::Path::new("/etc/sealvol/peers");
        let text = "# the ring\nhttp://10.0.0.1:7420\n\n  http://10.0.0.2:7420/  # second\nhttp://10.0.0.1:7420\n";
        assert_eq!(
            super::parse_peers(p, text).unwrap(),
            ["http://10.0.0.1:7420", "http://10.0.0.2:7420"]
        );
        assert!(super::parse_peers(p, "").unwrap().is_empty());
        let e = super::parse_peers(p, "http://10.0.0.1:7420\n10.0.0.2:7420\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("line 2") && e.contains("/etc/sealvol/peers"),
            "{e}"
        );
    }

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

    #[test]
    fn an_answer_is_read_over_the_buffer_and_one_byte_too_many_is_kept_to_be_seen() {
        // A recycled buffer holds an earlier answer's bytes: every one is overwritten.
        let mut into = vec![7u8; 6];
        super::read_answer(&b"abcdef"[..], 6, &mut into).unwrap();
        assert_eq!(into, b"abcdef");
        // Cut short: only what came.
        super::read_answer(&b"abc"[..], 6, &mut into).unwrap();
        assert_eq!(into, b"abc");
        // Too long: one byte more than asked, no more, so the caller sees it.
        super::read_answer(&b"abcdefghij"[..], 6, &mut into).unwrap();
        assert_eq!(into, b"abcdefg");
        // A buffer shorter than the answer grows to it.
        let mut short = Vec::new();
        super::read_answer(&b"abcdef"[..], 6, &mut short).unwrap();
        assert_eq!(short, b"abcdef");
    }
}
