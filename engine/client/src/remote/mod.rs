//! The client of the remote engine: a repository behind a `sealvol serve`, reached
//! with an API key. The engine runs here: it reads the objects the key may see through
//! the store (`RemoteStore`, the server's `objects/`), uploads packs, and asks the
//! server for every other write as an operation (`ops.rs` here, the server's `ops.rs`
//! there), which the server checks and makes itself.

pub mod jobs;
mod link;
mod ops;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use sealvol_core::digest::Hash;
use sealvol_core::error::{Error, ErrorKind, Result};
use sealvol_core::repo::Repository;
use sealvol_core::store::{ETag, ObjectInfo, ObjectStore, Page, Requests};

use link::{Link, encode};

use sealvol_wire::objects::ListPage;

/// Requests a caller may keep in flight: what a bucket gets.
const CONCURRENCY: usize = 8;

pub struct RemoteStore {
    link: Arc<Link>,
    staging: PathBuf,
}

/// Opens the repository a server at `url` offers, with API key `key`; packs are built in
/// `staging` before they go up.
pub fn open(url: &str, key: Option<&str>, staging: &Path) -> Result<Repository> {
    let base = check_remote(url)?;
    let key = required_key(&base, key)?;
    let link = Arc::new(Link::new(&base, &key)?);
    let store = RemoteStore {
        link: Arc::clone(&link),
        staging: staging.to_path_buf(),
    };
    // A GET, not a HEAD: a refusal comes with the server's reason.
    if store.get(sealvol_core::repo::CONFIG_KEY)?.is_none() {
        return Err(Error::not_found(format!(
            "the server at {base} offers no repository"
        )));
    }
    Ok(Repository::open(Box::new(store), base, false)?
        .with_remote(Arc::new(ops::RemoteOps::new(link))))
}

/// The API key a request to `base` goes with, which it cannot go without.
fn required_key(base: &str, key: Option<&str>) -> Result<String> {
    key.map(str::trim)
        .filter(|k| !k.is_empty())
        .map(str::to_string)
        .ok_or_else(|| {
            Error::new(
                ErrorKind::Denied,
                format!("--remote {base} needs an API key"),
            )
            .hint("set SEALVOL_API_KEY to a key `sealvol key create` printed on the server")
        })
}

/// What key `key` may do at the server at `url` (for a console's title and read-only
/// mode).
pub fn whoami(url: &str, key: Option<&str>) -> Result<sealvol_wire::objects::KeyInfo> {
    let base = check_remote(url)?;
    let link = Link::new(&base, key.unwrap_or_default().trim())?;
    let resp = link.send(link.client.get(format!("{base}/v1/key")))?;
    if !resp.status().is_success() {
        return Err(link.error(resp));
    }
    let mut body = Vec::new();
    link.bytes(resp, &mut body)?;
    serde_json::from_slice(&body).map_err(|e| {
        Error::new(
            ErrorKind::Io,
            format!("{base}/v1/key did not answer JSON: {e}"),
        )
    })
}

/// `url` without a trailing slash, if a remote engine can be reached at it.
pub fn check_remote(url: &str) -> Result<String> {
    crate::address::check_address("--remote", url)
}

impl RemoteStore {
    fn object(&self, key: &str) -> String {
        format!("{}/v1/objects/{}", self.link.base, encode(key))
    }

    fn put_mode(&self, key: &str, data: Vec<u8>, query: &str) -> Result<bool> {
        self.link.traffic.put(data.len() as u64);
        let resp = self.link.send(
            self.link
                .client
                .put(format!("{}?{query}", self.object(key)))
                .body(data),
        )?;
        match resp.status().as_u16() {
            201 => Ok(true),
            200 => Ok(false),
            _ => Err(self.link.error(resp)),
        }
    }

    fn range_into(&self, url: String, key: &str, offset: u64, buf: &mut Vec<u8>) -> Result<()> {
        let len = buf.len() as u64;
        if len == 0 {
            return Ok(());
        }
        self.link.traffic.get();
        let resp = self.link.send(
            self.link
                .client
                .get(url)
                .header(
                    reqwest::header::RANGE,
                    format!("bytes={offset}-{}", offset + len - 1),
                )
                .timeout(Link::time_for(len)),
        )?;
        if resp.status().as_u16() != 206 {
            return Err(self.link.error(resp));
        }
        self.link.bytes(resp, buf)?;
        if buf.len() as u64 != len {
            return Err(Error::corrupt(format!(
                "{key}: {} bytes at {offset} where {len} were asked",
                buf.len()
            )));
        }
        Ok(())
    }
}

impl ObjectStore for RemoteStore {
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        self.link.traffic.get();
        let resp = self.link.send(self.link.client.get(self.object(key)))?;
        match resp.status().as_u16() {
            200 => {
                let mut out = Vec::new();
                self.link.bytes(resp, &mut out)?;
                Ok(Some(out))
            }
            404 => Ok(None),
            _ => Err(self.link.error(resp)),
        }
    }

    fn get_range(&self, key: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
        let mut buf = vec![0; len as usize];
        self.get_range_into(key, offset, &mut buf)?;
        Ok(buf)
    }

    fn get_range_into(&self, key: &str, offset: u64, buf: &mut Vec<u8>) -> Result<()> {
        self.range_into(self.object(key), key, offset, buf)
    }

    fn get_file_range_into(
        &self,
        key: &str,
        offset: u64,
        buf: &mut Vec<u8>,
        file: &Hash,
    ) -> Result<()> {
        // Named, so that a key scoped to namespaces may read a file of theirs.
        let url = format!("{}?file={}", self.object(key), file.hex());
        self.range_into(url, key, offset, buf)
    }

    fn size(&self, key: &str) -> Result<Option<u64>> {
        self.link.traffic.head();
        let resp = self.link.send(self.link.client.head(self.object(key)))?;
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
                    self.link.base
                ),
            )
            .hint("check SEALVOL_API_KEY: `sealvol key ls` on the server shows its keys")),
            _ => Err(self.link.error(resp)),
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
        self.link.traffic.put(len);
        let sent = self.link.send(
            self.link
                .client
                .put(format!("{}?mode=absent", self.object(key)))
                .timeout(Link::time_for(len))
                .body(reqwest::blocking::Body::sized(f, len)),
        );
        let _ = std::fs::remove_file(file);
        let resp = sent?;
        match resp.status().as_u16() {
            201 => Ok(true),
            200 => Ok(false),
            _ => Err(self.link.error(resp)),
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
        self.link.traffic.get();
        let resp = self.link.send(
            self.link
                .client
                .get(format!("{}?versioned=true", self.object(key))),
        )?;
        match resp.status().as_u16() {
            200 => {
                let etag = resp
                    .headers()
                    .get(sealvol_wire::objects::VERSION_HEADER)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_string();
                let mut out = Vec::new();
                self.link.bytes(resp, &mut out)?;
                Ok(Some((out, ETag(etag))))
            }
            404 => Ok(None),
            _ => Err(self.link.error(resp)),
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
        self.link.traffic.list();
        let mut url = format!("{}/v1/list?prefix={}", self.link.base, encode(prefix));
        if let Some(a) = after {
            url.push_str(&format!("&after={}", encode(a)));
        }
        let resp = self.link.send(self.link.client.get(url))?;
        if !resp.status().is_success() {
            return Err(self.link.error(resp));
        }
        let mut body = Vec::new();
        self.link.bytes(resp, &mut body)?;
        let page: ListPage = serde_json::from_slice(&body).map_err(|e| {
            Error::new(
                ErrorKind::Io,
                format!("a listing from {} is not JSON: {e}", self.link.base),
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
        self.link.traffic.delete();
        let resp = self.link.send(self.link.client.delete(self.object(key)))?;
        match resp.status().as_u16() {
            204 | 404 => Ok(()),
            _ => Err(self.link.error(resp)),
        }
    }

    fn clean_staging(&self) -> Result<(u64, u64)> {
        sealvol_core::store::clean_staging_dir(&self.staging)
    }

    fn requests(&self) -> Option<Requests> {
        Some(self.link.traffic.counts())
    }

    fn put(&self, key: &str, data: &[u8]) -> Result<()> {
        self.put_mode(key, data.to_vec(), "mode=put").map(|_| ())
    }

    fn now(&self) -> Result<std::time::SystemTime> {
        let resp = self
            .link
            .send(self.link.client.get(format!("{}/v1/now", self.link.base)))?;
        if !resp.status().is_success() {
            return Err(self.link.error(resp));
        }
        #[derive(serde::Deserialize)]
        struct Now {
            now_ms: u64,
        }
        let mut body = Vec::new();
        self.link.bytes(resp, &mut body)?;
        let now: Now = serde_json::from_slice(&body).map_err(|e| {
            Error::new(
                ErrorKind::Io,
                format!("the time from {} is not JSON: {e}", self.link.base),
            )
        })?;
        Ok(std::time::UNIX_EPOCH + Duration::from_millis(now.now_ms))
    }

    fn sync(&self) -> Result<()> {
        let resp = self.link.send(
            self.link
                .client
                .post(format!("{}/v1/barrier", self.link.base)),
        )?;
        if !resp.status().is_success() {
            return Err(self.link.error(resp));
        }
        Ok(())
    }
}
