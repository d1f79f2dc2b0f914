//! The client of the remote engine: a repository whose objects live behind a `sealvol
//! serve` (`objects.rs` there), reached with an API key. The engine runs here, against
//! this store, exactly as against a local directory or a bucket; the server checks
//! what the key may touch and the bytes of what it names by hash.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use sealvol_core::error::{Error, ErrorKind, Result};
use sealvol_core::repo::Repository;
use sealvol_core::store::{ETag, ObjectInfo, ObjectStore, Page, Requests, Traffic};

use crate::objects::ListPage;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// A pack of 64 MiB over a slow link included.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(600);
/// Requests a caller may keep in flight: what a bucket gets.
const CONCURRENCY: usize = 8;

pub struct RemoteStore {
    base: String,
    key: String,
    staging: PathBuf,
    client: reqwest::blocking::Client,
    traffic: Traffic,
}

/// Opens the repository a server at `url` offers, with API key `key`; packs are built in
/// `staging` before they go up.
pub fn open(url: &str, key: Option<&str>, staging: &Path) -> Result<Repository> {
    let base = check_remote(url)?;
    let key = key
        .filter(|k| !k.trim().is_empty())
        .ok_or_else(|| {
            Error::new(
                ErrorKind::Denied,
                format!("--remote {base} needs an API key"),
            )
            .hint("set SEALVOL_API_KEY to a key `sealvol key create` printed on the server")
        })?
        .trim()
        .to_string();
    let client = crate::tls::client(CONNECT_TIMEOUT, REQUEST_TIMEOUT)?;
    let store = RemoteStore {
        base: base.clone(),
        key,
        staging: staging.to_path_buf(),
        client,
        traffic: Traffic::default(),
    };
    // A GET, not a HEAD: a refusal comes with the server's reason.
    if store.get(sealvol_core::repo::CONFIG_KEY)?.is_none() {
        return Err(Error::not_found(format!(
            "the server at {base} offers no repository"
        )));
    }
    Repository::open(Box::new(store), base, false)
}

/// What key `key` may do at the server at `url` (for a console's title and read-only
/// mode).
pub fn whoami(url: &str, key: Option<&str>) -> Result<crate::objects::KeyInfo> {
    let base = check_remote(url)?;
    let client = crate::tls::client(CONNECT_TIMEOUT, Duration::from_secs(30))?;
    let store = RemoteStore {
        base: base.clone(),
        key: key.unwrap_or_default().trim().to_string(),
        staging: PathBuf::new(),
        client,
        traffic: Traffic::default(),
    };
    let resp = store.send(store.client.get(format!("{base}/v1/key")))?;
    if !resp.status().is_success() {
        return Err(store.error(resp));
    }
    let mut body = Vec::new();
    store.bytes(resp, &mut body)?;
    serde_json::from_slice(&body).map_err(|e| {
        Error::new(
            ErrorKind::Io,
            format!("{base}/v1/key did not answer JSON: {e}"),
        )
    })
}

/// `url` without a trailing slash, if a remote engine can be reached at it.
pub fn check_remote(url: &str) -> Result<String> {
    crate::peer::check_address("--remote", url)
}

/// The innermost cause of a client error: what actually failed (a refused connection, a
/// certificate not trusted), not the layers above it.
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

/// A key as it goes into a URL path: unreserved characters and `/` as they are.
fn encode(s: &str) -> String {
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

impl RemoteStore {
    fn object(&self, key: &str) -> String {
        format!("{}/v1/objects/{}", self.base, encode(key))
    }

    fn send(&self, req: reqwest::blocking::RequestBuilder) -> Result<reqwest::blocking::Response> {
        req.bearer_auth(&self.key).send().map_err(|e| {
            Error::new(
                ErrorKind::Unavailable,
                format!("cannot reach the remote engine at {}: {}", self.base, root_cause(&e)),
            )
            .hint(format!(
                "check that `sealvol serve` runs there and the address is right; for a server with a private certificate, set {} to its CA",
                crate::tls::CA_ENV
            ))
        })
    }

    /// The engine's error the server sent, rebuilt.
    fn error(&self, resp: reqwest::blocking::Response) -> Error {
        let status = resp.status();
        let text = resp.text().unwrap_or_default();
        #[derive(serde::Deserialize)]
        struct Sent {
            kind: ErrorKind,
            message: String,
            hint: Option<String>,
        }
        match serde_json::from_str::<Sent>(&text) {
            Ok(s) => {
                let e = Error::new(s.kind, s.message);
                match s.hint {
                    Some(h) => e.hint(h),
                    None => e,
                }
            }
            Err(_) => Error::new(
                if status.is_server_error() {
                    ErrorKind::Unavailable
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

    fn bytes(&self, resp: reqwest::blocking::Response, into: &mut Vec<u8>) -> Result<()> {
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

    fn put_mode(&self, key: &str, data: Vec<u8>, query: &str) -> Result<bool> {
        self.traffic.put(data.len() as u64);
        let resp = self.send(
            self.client
                .put(format!("{}?{query}", self.object(key)))
                .body(data),
        )?;
        match resp.status().as_u16() {
            201 => Ok(true),
            200 => Ok(false),
            _ => Err(self.error(resp)),
        }
    }
}

impl ObjectStore for RemoteStore {
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        self.traffic.get();
        let resp = self.send(self.client.get(self.object(key)))?;
        match resp.status().as_u16() {
            200 => {
                let mut out = Vec::new();
                self.bytes(resp, &mut out)?;
                Ok(Some(out))
            }
            404 => Ok(None),
            _ => Err(self.error(resp)),
        }
    }

    fn get_range(&self, key: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
        let mut buf = vec![0; len as usize];
        self.get_range_into(key, offset, &mut buf)?;
        Ok(buf)
    }

    fn get_range_into(&self, key: &str, offset: u64, buf: &mut Vec<u8>) -> Result<()> {
        let len = buf.len() as u64;
        if len == 0 {
            return Ok(());
        }
        self.traffic.get();
        let resp = self.send(self.client.get(self.object(key)).header(
            reqwest::header::RANGE,
            format!("bytes={offset}-{}", offset + len - 1),
        ))?;
        if resp.status().as_u16() != 206 {
            return Err(self.error(resp));
        }
        self.bytes(resp, buf)?;
        if buf.len() as u64 != len {
            return Err(Error::corrupt(format!(
                "{key}: {} bytes at {offset} where {len} were asked",
                buf.len()
            )));
        }
        Ok(())
    }

    fn size(&self, key: &str) -> Result<Option<u64>> {
        self.traffic.head();
        let resp = self.send(self.client.head(self.object(key)))?;
        match resp.status().as_u16() {
            200 => Ok(resp
                .headers()
                .get("x-sealvol-size")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse().ok())),
            404 => Ok(None),
            401 | 403 => Err(Error::new(
                ErrorKind::Denied,
                format!(
                    "the remote engine at {} refused the API key (unknown, revoked or out of scope)",
                    self.base
                ),
            )
            .hint("check SEALVOL_API_KEY: `sealvol key ls` on the server shows its keys")),
            _ => Err(self.error(resp)),
        }
    }

    fn put_if_absent(&self, key: &str, data: &[u8]) -> Result<bool> {
        self.put_mode(key, data.to_vec(), "mode=absent")
    }

    fn put_file_if_absent(&self, key: &str, file: &Path) -> Result<bool> {
        // Streamed from the file: a push keeps several packs in flight, and none of
        // them in memory whole.
        let f = std::fs::File::open(file).map_err(|e| Error::io("cannot read", file, e))?;
        let len = f
            .metadata()
            .map_err(|e| Error::io("cannot read", file, e))?
            .len();
        self.traffic.put(len);
        let sent = self.send(
            self.client
                .put(format!("{}?mode=absent", self.object(key)))
                .body(reqwest::blocking::Body::sized(f, len)),
        );
        let _ = std::fs::remove_file(file);
        let resp = sent?;
        match resp.status().as_u16() {
            201 => Ok(true),
            200 => Ok(false),
            _ => Err(self.error(resp)),
        }
    }

    fn staging_path(&self) -> Result<PathBuf> {
        std::fs::create_dir_all(&self.staging)
            .map_err(|e| Error::io("cannot create", &self.staging, e))?;
        Ok(self.staging.join(sealvol_core::store::unique_temp_name()))
    }

    fn concurrency(&self) -> usize {
        CONCURRENCY
    }

    fn get_versioned(&self, key: &str) -> Result<Option<(Vec<u8>, ETag)>> {
        self.traffic.get();
        let resp = self.send(
            self.client
                .get(format!("{}?versioned=true", self.object(key))),
        )?;
        match resp.status().as_u16() {
            200 => {
                let etag = resp
                    .headers()
                    .get(crate::objects::VERSION_HEADER)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_string();
                let mut out = Vec::new();
                self.bytes(resp, &mut out)?;
                Ok(Some((out, ETag(etag))))
            }
            404 => Ok(None),
            _ => Err(self.error(resp)),
        }
    }

    fn put_if_match(&self, key: &str, data: &[u8], expected: Option<&ETag>) -> Result<()> {
        let query = match expected {
            Some(e) => format!("mode=match&etag={}", encode(&e.0)),
            None => "mode=match".to_string(),
        };
        self.put_mode(key, data.to_vec(), &query).map(|_| ())
    }

    fn list_page(&self, prefix: &str, after: Option<&str>) -> Result<Page> {
        self.traffic.list();
        let mut url = format!("{}/v1/list?prefix={}", self.base, encode(prefix));
        if let Some(a) = after {
            url.push_str(&format!("&after={}", encode(a)));
        }
        let resp = self.send(self.client.get(url))?;
        if !resp.status().is_success() {
            return Err(self.error(resp));
        }
        let mut body = Vec::new();
        self.bytes(resp, &mut body)?;
        let page: ListPage = serde_json::from_slice(&body).map_err(|e| {
            Error::new(
                ErrorKind::Io,
                format!("a listing from {} is not JSON: {e}", self.base),
            )
        })?;
        Ok(Page {
            objects: page
                .objects
                .into_iter()
                .map(|(key, size, ms)| ObjectInfo {
                    key,
                    size,
                    modified: ms.map(|ms| std::time::UNIX_EPOCH + Duration::from_millis(ms)),
                })
                .collect(),
            next: page.next,
        })
    }

    fn delete(&self, key: &str) -> Result<()> {
        self.traffic.delete();
        let resp = self.send(self.client.delete(self.object(key)))?;
        match resp.status().as_u16() {
            204 | 404 => Ok(()),
            _ => Err(self.error(resp)),
        }
    }

    fn clean_staging(&self) -> Result<(u64, u64)> {
        sealvol_core::store::clean_staging_dir(&self.staging)
    }

    fn requests(&self) -> Option<Requests> {
        Some(self.traffic.counts())
    }

    fn put(&self, key: &str, data: &[u8]) -> Result<()> {
        self.put_mode(key, data.to_vec(), "mode=put").map(|_| ())
    }

    fn now(&self) -> Result<std::time::SystemTime> {
        let resp = self.send(self.client.get(format!("{}/v1/now", self.base)))?;
        if !resp.status().is_success() {
            return Err(self.error(resp));
        }
        #[derive(serde::Deserialize)]
        struct Now {
            now_ms: u64,
        }
        let mut body = Vec::new();
        self.bytes(resp, &mut body)?;
        let now: Now = serde_json::from_slice(&body).map_err(|e| {
            Error::new(
                ErrorKind::Io,
                format!("the time from {} is not JSON: {e}", self.base),
            )
        })?;
        Ok(std::time::UNIX_EPOCH + Duration::from_millis(now.now_ms))
    }

    fn sync(&self) -> Result<()> {
        let resp = self.send(self.client.post(format!("{}/v1/barrier", self.base)))?;
        if !resp.status().is_success() {
            return Err(self.error(resp));
        }
        Ok(())
    }
}
