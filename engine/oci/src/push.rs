//! An artifact pushed to a registry over the OCI distribution API (`docker://HOST/REPO:TAG`):
//! each blob the registry lacks (`HEAD` first) uploaded in one `PUT` of known length,
//! its bytes streamed from the repository as they are proven (no local copy), the
//! registry checking the digest it is given; the config, then the manifest under the
//! tag. Credentials: as `auth` reads the registry's challenge (basic, or a bearer token
//! scoped to pull and push the repository).

use std::io::Read;
use std::time::Duration;

use sealvol_core::{Error, Result};

use crate::artifact::{Artifact, Layer};
use crate::auth;
use crate::media;

/// A registry destination, `docker://HOST[:PORT]/REPO[:TAG]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    pub host: String,
    pub repo: String,
    pub tag: Option<String>,
}

impl Destination {
    pub fn parse(s: &str) -> Result<Destination> {
        let bad = |why: &str| {
            Error::usage(format!("{s:.200}: {why}"))
                .hint("give docker://HOST[:PORT]/REPO[:TAG], e.g. docker://registry.example/models/qwen3-8b:prod")
        };
        let rest = s
            .strip_prefix("docker://")
            .ok_or_else(|| bad("not docker://"))?;
        let (host, path) = rest
            .split_once('/')
            .ok_or_else(|| bad("no repository after the host"))?;
        let host_ok = !host.is_empty()
            && host.len() <= 255
            && host.bytes().all(|b| {
                b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']')
            });
        if !host_ok {
            return Err(bad("not a host name"));
        }
        let (repo, tag) = match path.rsplit_once(':') {
            Some((r, t)) if !t.contains('/') => (r, Some(t)),
            _ => (path, None),
        };
        // The distribution spec's repository name: lowercase path components.
        let repo_ok = !repo.is_empty()
            && repo.len() <= 255
            && repo.split('/').all(|c| {
                !c.is_empty()
                    && c.bytes().all(|b| {
                        b.is_ascii_lowercase()
                            || b.is_ascii_digit()
                            || matches!(b, b'.' | b'_' | b'-')
                    })
                    && c.as_bytes()[0].is_ascii_alphanumeric()
            });
        if !repo_ok {
            return Err(bad(
                "not a repository name: lowercase path components of a-z 0-9 . _ -",
            ));
        }
        if let Some(t) = tag {
            let ok = !t.is_empty()
                && t.len() <= 128
                && (t.as_bytes()[0].is_ascii_alphanumeric() || t.starts_with('_'))
                && t.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
            if !ok {
                return Err(bad("not a tag: 1-128 of A-Z a-z 0-9 . _ -"));
            }
        }
        Ok(Destination {
            host: host.to_string(),
            repo: repo.to_string(),
            tag: tag.map(str::to_string),
        })
    }
}

/// How a push reaches its registry.
pub struct Options {
    /// `user:password`, if the registry asks for credentials.
    pub credentials: Option<String>,
    /// Plain HTTP (skopeo's `--tls-verify=false`, for a registry on loopback).
    pub plain_http: bool,
    pub timeout: Duration,
}

/// What a push did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Pushed {
    pub blobs: u64,
    pub bytes: u64,
    /// Blobs the registry had already.
    pub present: u64,
}

/// A layer's bytes, in order, as a reader of exactly its size.
pub type OpenLayer<'a> = dyn FnMut(&Layer) -> Result<Box<dyn Read + Send>> + 'a;

struct Session {
    http: reqwest::blocking::Client,
    base: String,
    repo: String,
    credentials: Option<String>,
    auth: Option<String>,
}

/// Pushes `art` to `dest` (tagged `tag`), its layers' bytes from `open`.
pub fn push(
    art: &Artifact,
    dest: &Destination,
    tag: &str,
    o: &Options,
    open: &mut OpenLayer<'_>,
) -> Result<Pushed> {
    let http = reqwest::blocking::Client::builder()
        .connect_timeout(o.timeout.min(Duration::from_secs(30)))
        // Each request is bounded by the timeout, an upload also by its size at 1 MiB/s.
        .timeout(o.timeout)
        .redirect(reqwest::redirect::Policy::limited(5))
        .build()
        .map_err(|e| Error::invalid(format!("cannot make an HTTP client: {e}")))?;
    let scheme = if o.plain_http { "http" } else { "https" };
    let mut s = Session {
        http,
        base: format!("{scheme}://{}", dest.host),
        repo: dest.repo.clone(),
        credentials: o.credentials.clone(),
        auth: None,
    };
    s.login()?;
    let mut done = Pushed::default();
    for layer in art.distinct_layers() {
        if s.has_blob(&layer.digest)? {
            done.present += 1;
            continue;
        }
        let reader = open(layer)?;
        s.upload(
            &layer.digest,
            layer.size,
            reqwest::blocking::Body::sized(reader, layer.size),
            o.timeout,
        )?;
        done.blobs += 1;
        done.bytes += layer.size;
    }
    if s.has_blob(&art.config_digest)? {
        done.present += 1;
    } else {
        s.upload(
            &art.config_digest,
            art.config.len() as u64,
            art.config.clone().into(),
            o.timeout,
        )?;
        done.blobs += 1;
        done.bytes += art.config.len() as u64;
    }
    let url = format!("{}/v2/{}/manifests/{tag}", s.base, s.repo);
    let resp = s.send(|c| {
        c.put(&url)
            .header("content-type", media::OCI_MANIFEST)
            .body(art.manifest.clone())
    })?;
    expect(resp, &[201, 200], "the manifest")?;
    Ok(done)
}

impl Session {
    /// `GET /v2/`: the registry's version check, and its challenge answered.
    fn login(&mut self) -> Result<()> {
        let url = format!("{}/v2/", self.base);
        let resp = self
            .http
            .get(&url)
            .send()
            .map_err(|e| unreachable(&url, e))?;
        if resp.status().as_u16() != 401 {
            return expect(resp, &[200], "the API version check").map(|_| ());
        }
        let challenge = auth::challenge_of(resp.headers());
        self.auth = Some(self.answer(&challenge)?);
        let resp = self.send(|c| c.get(&url))?;
        expect(resp, &[200], "the API version check").map(|_| ())
    }

    /// The `Authorization` a challenge asks for.
    fn answer(&self, challenge: &str) -> Result<String> {
        let basic = self.credentials.as_deref().map(auth::basic);
        let token_url = match auth::read_challenge(challenge, &self.repo, "pull,push")? {
            auth::Challenge::Basic => return basic.ok_or_else(no_credentials),
            auth::Challenge::Bearer { token_url } => token_url,
        };
        let shown = token_url.to_string();
        let mut req = self.http.get(token_url);
        if let Some(b) = &basic {
            req = req.header("authorization", b);
        }
        let resp = req.send().map_err(|e| unreachable(&shown, e))?;
        let body = expect(resp, &[200], "a token")?;
        auth::bearer(&body)
    }

    /// Sends a request with the session's credentials.
    fn send(
        &mut self,
        make: impl Fn(&reqwest::blocking::Client) -> reqwest::blocking::RequestBuilder,
    ) -> Result<reqwest::blocking::Response> {
        let mut req = make(&self.http);
        if let Some(a) = &self.auth {
            req = req.header("authorization", a);
        }
        req.send().map_err(|e| unreachable(&self.base, e))
    }

    fn has_blob(&mut self, digest: &str) -> Result<bool> {
        let url = format!("{}/v2/{}/blobs/{digest}", self.base, self.repo);
        let resp = self.send(|c| c.head(&url))?;
        match resp.status().as_u16() {
            200 => Ok(true),
            404 => Ok(false),
            _ => expect(resp, &[200], "a blob's presence").map(|_| false),
        }
    }

    /// `POST …/blobs/uploads/`, then one `PUT` of the whole blob with its digest.
    fn upload(
        &mut self,
        digest: &str,
        size: u64,
        body: reqwest::blocking::Body,
        timeout: Duration,
    ) -> Result<()> {
        let url = format!("{}/v2/{}/blobs/uploads/", self.base, self.repo);
        let resp = self.send(|c| c.post(&url).header("content-length", "0"))?;
        let location = resp
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        expect(resp, &[202], "an upload's start")?;
        let location = location.ok_or_else(|| {
            Error::invalid("the registry started an upload and named no place for it")
        })?;
        let mut put = match location.starts_with('/') {
            true => format!("{}{location}", self.base),
            false => location,
        };
        put.push(if put.contains('?') { '&' } else { '?' });
        put.push_str(&format!("digest={digest}"));
        let mut req = self
            .http
            .put(&put)
            .header("content-type", "application/octet-stream")
            .header("content-length", size.to_string())
            .timeout(timeout + Duration::from_secs(size >> 20))
            .body(body);
        if let Some(a) = &self.auth {
            req = req.header("authorization", a);
        }
        let resp = req.send().map_err(|e| unreachable(&self.base, e))?;
        expect(resp, &[201], &format!("blob {digest}")).map(|_| ())
    }
}

fn no_credentials() -> Error {
    Error::new(sealvol_core::ErrorKind::Denied, "the registry asks for credentials")
        .hint("log in (docker login / skopeo login write ~/.docker/config.json or $REGISTRY_AUTH_FILE), or pass --registry-secret NAME (a stored secret USER:PASSWORD)")
}

fn unreachable(url: &str, e: reqwest::Error) -> Error {
    Error::new(
        sealvol_core::ErrorKind::Unavailable,
        format!("the registry at {url:.200} did not answer: {e}"),
    )
    .hint("check the address; a registry without TLS needs --tls-verify=false")
}

/// The body of `resp` (at most 1 MiB), if its status is one of `ok`; else an error that
/// names what was asked and the registry's own words.
fn expect(resp: reqwest::blocking::Response, ok: &[u16], what: &str) -> Result<Vec<u8>> {
    let status = resp.status().as_u16();
    let mut body = Vec::new();
    let _ = resp.take(1 << 20).read_to_end(&mut body);
    if ok.contains(&status) {
        return Ok(body);
    }
    let words = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v["errors"][0]["message"].as_str().map(str::to_string))
        .unwrap_or_else(|| String::from_utf8_lossy(&body).chars().take(200).collect());
    let e = Error::new(
        match status {
            401 | 403 => sealvol_core::ErrorKind::Denied,
            404 => sealvol_core::ErrorKind::NotFound,
            _ => sealvol_core::ErrorKind::Unavailable,
        },
        format!("the registry answered {status} for {what}: {words}"),
    );
    Err(match status {
        401 | 403 => e.hint("check the credentials and that they may push to this repository"),
        _ => e,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_destination_is_read_strictly() {
        let d = Destination::parse("docker://localhost:5000/models/qwen:prod").unwrap();
        assert_eq!(
            (d.host.as_str(), d.repo.as_str(), d.tag.as_deref()),
            ("localhost:5000", "models/qwen", Some("prod"))
        );
        let d = Destination::parse("docker://r.example/m").unwrap();
        assert_eq!(d.tag, None);
        for bad in [
            "docker://",
            "docker://host",
            "docker://host/Upper",
            "docker://host/a//b",
            "docker://host/a:bad tag",
            "docker://ho st/a",
            "oci:x",
            "docker://host/../x",
        ] {
            assert!(Destination::parse(bad).is_err(), "{bad}");
        }
    }
}
