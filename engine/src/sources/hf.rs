//! Hugging Face model and dataset repositories. hf-hub resolves the revision to its
//! commit, lists the files (paginated) and finds the token (`--secret`, else `HF_TOKEN`
//! or the `huggingface-cli login` file); the bytes stream from the `resolve` URL at that
//! commit with ranged GETs, following the redirect large files take to the CDN.

use std::ops::Range;
use std::time::Duration;

use futures::StreamExt;
use hf_hub::repository::files::RepoTreeEntry;
use hf_hub::{HFClient, HFError};

use super::client::Body;
use super::endpoints::Resolved;
use super::listing::{Object, RawObject};
use super::url::{HfKind, SourceUrl};
use crate::error::{Error, ErrorKind, Result};
use crate::secrets::Secret;

pub struct Hf {
    hub: HFClient,
    http: reqwest::Client,
    kind: HfKind,
    owner: String,
    name: String,
    revision: String,
    token: Option<String>,
    endpoint: String,
    shown: String,
}

const TOKEN_HINT: &str = "set HF_TOKEN in the agent's environment, or store the token with \
`sealvol secret set NAME` and pass --secret NAME; gated models also need their terms accepted on the Hub";

impl Hf {
    pub fn connect(url: &SourceUrl, at: &Resolved, secret: Option<&Secret>) -> Result<Hf> {
        let SourceUrl::HuggingFace {
            kind,
            repo,
            revision,
        } = url
        else {
            return Err(Error::usage(format!("{url} is not a Hugging Face source")));
        };
        let (owner, name) = repo
            .split_once('/')
            .ok_or_else(|| Error::usage(format!("{url}: a repository is ORG/NAME")))?;
        let endpoint = at
            .url
            .clone()
            .unwrap_or_else(|| super::endpoints::HF_DEFAULT.to_string());
        let token = match secret {
            Some(s) => Some(
                std::str::from_utf8(s.expose())
                    .map_err(|_| Error::usage(format!("{s} is not a token (not UTF-8)")))?
                    .trim()
                    .to_string(),
            ),
            None => None,
        };
        let mut b = HFClient::builder()
            .endpoint(&endpoint)
            .cache_enabled(false)
            // Our own retry (`sources::retry`) covers every source alike.
            .retry_max_attempts(1);
        if let Some(t) = &token {
            b = b.token(t);
        }
        let hub = b.build().map_err(|e| hf_error(&url.to_string(), e))?;
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .read_timeout(Duration::from_secs(60))
            .user_agent(concat!("sealvol/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| Error::new(ErrorKind::Io, format!("cannot make an HTTP client: {e}")))?;
        // Without a token of ours, fall back to what hf-hub found (HF_TOKEN, login file).
        let token = token.or_else(|| std::env::var("HF_TOKEN").ok().filter(|t| !t.is_empty()));
        Ok(Hf {
            hub,
            http,
            kind: *kind,
            owner: owner.to_string(),
            name: name.to_string(),
            revision: revision.clone(),
            token,
            endpoint: endpoint.trim_end_matches('/').to_string(),
            shown: url.to_string(),
        })
    }

    /// The commit the revision names, and every file at that commit.
    pub async fn list(&mut self) -> Result<(String, Vec<RawObject>)> {
        let sha = super::retry::retrying(&self.shown, || async {
            let sha = match self.kind {
                HfKind::Model => self
                    .hub
                    .model(&self.owner, &self.name)
                    .info()
                    .revision(self.revision.clone())
                    .send()
                    .await
                    .map(|i| i.sha),
                HfKind::Dataset => self
                    .hub
                    .dataset(&self.owner, &self.name)
                    .info()
                    .revision(self.revision.clone())
                    .send()
                    .await
                    .map(|i| i.sha),
            };
            sha.map_err(|e| hf_error(&self.shown, e))
        })
        .await?
        .ok_or_else(|| {
            Error::new(
                ErrorKind::Io,
                format!("{}: the Hub named no commit for this revision", self.shown),
            )
        })?;
        let files = super::retry::retrying(&self.shown, || self.tree(&sha)).await?;
        // From here on, every read is of this exact commit.
        self.revision = sha.clone();
        Ok((sha, files))
    }

    async fn tree(&self, sha: &str) -> Result<Vec<RawObject>> {
        let mut out = Vec::new();
        macro_rules! collect {
            ($repo:expr) => {{
                let repo = $repo;
                let stream = repo
                    .list_tree()
                    .revision(sha.to_string())
                    .recursive(true)
                    .send()
                    .map_err(|e| hf_error(&self.shown, e))?;
                let mut stream = std::pin::pin!(stream);
                while let Some(entry) = stream.next().await {
                    if let RepoTreeEntry::File {
                        oid,
                        size,
                        path,
                        lfs,
                        ..
                    } = entry.map_err(|e| hf_error(&self.shown, e))?
                    {
                        // The LFS sha256 names the bytes when hf-hub has it; else the git
                        // blob id (of the pointer, for an LFS file), which changes with them.
                        let version = lfs.and_then(|l| l.sha256).unwrap_or(oid);
                        out.push(RawObject {
                            key: path,
                            size,
                            version,
                        });
                    }
                }
            }};
        }
        match self.kind {
            HfKind::Model => collect!(self.hub.model(&self.owner, &self.name)),
            HfKind::Dataset => collect!(self.hub.dataset(&self.owner, &self.name)),
        }
        Ok(out)
    }

    fn resolve_url(&self, path: &str) -> String {
        let prefix = match self.kind {
            HfKind::Model => "",
            HfKind::Dataset => "datasets/",
        };
        let path: Vec<String> = path.split('/').map(percent).collect();
        format!(
            "{}/{prefix}{}/{}/resolve/{}/{}",
            self.endpoint,
            self.owner,
            self.name,
            self.revision,
            path.join("/")
        )
    }

    /// A stream of bytes `range` of `obj` at the listed commit.
    pub async fn open(&self, obj: &Object, range: Range<u64>) -> Result<Body> {
        let what = format!("{}/{}", self.shown.trim_end_matches('/'), obj.key);
        let url = self.resolve_url(&obj.key);
        super::retry::retrying(&what, || async {
            let mut req = self
                .http
                .get(&url)
                .header("Range", format!("bytes={}-{}", range.start, range.end - 1));
            if let Some(t) = &self.token {
                // reqwest drops this header on a redirect to another host (the CDN).
                req = req.bearer_auth(t);
            }
            let resp = req.send().await.map_err(|e| transport(&what, &e))?;
            let status = resp.status().as_u16();
            if status != 206 && !(status == 200 && range.start == 0 && range.end == obj.size) {
                let code = resp
                    .headers()
                    .get("x-error-code")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_string();
                return Err(status_error(&what, status, &code));
            }
            Ok(Body::Http(resp))
        })
        .await
    }
}

fn percent(s: &str) -> String {
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

fn transport(what: &str, e: &reqwest::Error) -> Error {
    Error::new(ErrorKind::Unavailable, format!("{what}: {e}"))
        .hint("check the endpoint (HF_ENDPOINT) and the network")
}

fn status_error(what: &str, status: u16, code: &str) -> Error {
    match status {
        401 | 403 => Error::new(
            ErrorKind::Denied,
            format!("{what}: access denied (HTTP {status})"),
        )
        .hint(TOKEN_HINT),
        404 => Error::not_found(format!(
            "{what}: not found (HTTP 404{})",
            if code.is_empty() {
                String::new()
            } else {
                format!(", {code}")
            }
        ))
        .hint("check the repository, the revision and the file"),
        429 | 500..=599 => Error::new(ErrorKind::Unavailable, format!("{what}: HTTP {status}")),
        _ => Error::new(ErrorKind::Io, format!("{what}: unexpected HTTP {status}")),
    }
}

fn hf_error(shown: &str, e: HFError) -> Error {
    match e {
        HFError::AuthRequired { .. } | HFError::Forbidden { .. } => {
            Error::new(ErrorKind::Denied, format!("{shown}: access denied ({e})")).hint(TOKEN_HINT)
        }
        HFError::RepoNotFound { .. } => Error::not_found(format!("{shown}: no such repository"))
            .hint("check ORG/NAME (datasets are hf://datasets/ORG/NAME); a private repository also needs a token"),
        // hf-hub reads any 404 of a revision's info as a missing revision; the Hub's
        // own error code says when it is the repository that is missing.
        HFError::RevisionNotFound { ref context, .. }
            if context.as_ref().and_then(|c| c.error_code.as_deref()) == Some("RepoNotFound") =>
        {
            Error::not_found(format!("{shown}: no such repository"))
                .hint("check ORG/NAME (datasets are hf://datasets/ORG/NAME); a private repository also needs a token")
        }
        HFError::RevisionNotFound { revision, .. } => {
            Error::not_found(format!("{shown}: no revision {revision:?}"))
                .hint("name a branch, a tag or a commit of that repository")
        }
        HFError::EntryNotFound { path, .. } => {
            Error::not_found(format!("{shown}: no file {path:?}"))
        }
        HFError::RateLimited { .. } | HFError::Request { .. } => {
            Error::new(ErrorKind::Unavailable, format!("{shown}: {e}"))
        }
        HFError::Http { ref context } if context.status.is_server_error() => {
            Error::new(ErrorKind::Unavailable, format!("{shown}: {e}"))
        }
        other => Error::new(ErrorKind::Io, format!("{shown}: {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::percent;

    #[test]
    fn path_segments_are_escaped() {
        assert_eq!(percent("model.safetensors"), "model.safetensors");
        assert_eq!(percent("a b#c?"), "a%20b%23c%3F");
    }
}
