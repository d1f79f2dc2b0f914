//! Hugging Face model and dataset repositories. hf-hub resolves the revision to its
//! commit, lists the files (paginated) and finds the token (`--secret`, else `HF_TOKEN`
//! or the `huggingface-cli login` file); the bytes stream from the `resolve` URL at that
//! commit with ranged GETs, following the redirect large files take to the CDN.

use std::ops::Range;

use futures::StreamExt;
use hf_hub::repository::files::RepoTreeEntry;
use hf_hub::{HFClient, HFError};

use crate::body::Body;
use crate::http::{Hints, percent, ranged_get};
use sealvol_core::error::{Error, ErrorKind, Result};
use sealvol_source::Access;
use sealvol_source::checks::Expected;
use sealvol_source::endpoints::Resolved;
use sealvol_source::listing::{Object, RawObject};
use sealvol_source::secrets::Secret;
use sealvol_source::url::{HfKind, SourceUrl};

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

const HINTS: Hints = Hints {
    denied: TOKEN_HINT,
    missing: "check the repository, the revision and the file",
    endpoint: "check the endpoint (HF_ENDPOINT) and the network",
};

impl Hf {
    pub fn connect(url: &SourceUrl, at: &Resolved, access: Access<'_>) -> Result<Hf> {
        let SourceUrl::HuggingFace {
            kind,
            repo,
            revision,
        } = url
        else {
            return Err(Error::invalid(format!(
                "{url} is not a Hugging Face source"
            )));
        };
        let (owner, name) = repo
            .split_once('/')
            .ok_or_else(|| Error::invalid(format!("{url}: a repository is ORG/NAME")))?;
        let endpoint = at
            .url
            .clone()
            .unwrap_or_else(|| sealvol_source::endpoints::HF_DEFAULT.to_string());
        let token = access.secret().map(Secret::text).transpose()?;
        let http = crate::http::client()?;
        let mut b = HFClient::builder()
            .client(http.clone())
            .endpoint(&endpoint)
            .cache_enabled(false)
            // Our own retry (`sources::retry`) covers every source alike.
            .retry_max_attempts(1);
        if let Some(t) = &token {
            b = b.token(t);
        }
        let hub = b.build().map_err(|e| hf_error(&url.to_string(), e))?;
        // Without a token of ours, fall back to what hf-hub found (HF_TOKEN, login file),
        // unless the job may use no credentials of this process (a server's: the
        // server also keeps hf-hub from finding any, `serve`).
        let token = match access {
            Access::Ambient => {
                token.or_else(|| std::env::var("HF_TOKEN").ok().filter(|t| !t.is_empty()))
            }
            _ => token,
        };
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
        let sha = sealvol_source::retry::retrying(&self.shown, || async {
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
        let files = sealvol_source::retry::retrying(&self.shown, || self.tree(&sha)).await?;
        // From here on, every read is of this exact commit.
        self.revision = sha.clone();
        Ok((sha, files))
    }

    async fn tree(&self, sha: &str) -> Result<Vec<RawObject>> {
        let mut out: Vec<RawObject> = Vec::new();
        let mut lfs_unknown: Vec<usize> = Vec::new();
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
                        // A file kept in git: its `oid` is the git blob id of its bytes.
                        // An LFS file: its `oid` is the blob id of its *pointer*, and its
                        // bytes' SHA-256 is `lfs.oid`, which hf-hub does not read (its
                        // field is `sha256`): asked of the resolve URL below when absent.
                        let (version, expect) = match lfs {
                            None => {
                                let e = Expected::parse_hex("git-blob-sha1", &oid);
                                (oid, e.into_iter().collect())
                            }
                            Some(l) => match l
                                .sha256
                                .as_deref()
                                .and_then(|h| Expected::parse_hex("sha256", h))
                            {
                                Some(e) => (e.hex(), vec![e]),
                                None => (oid, Vec::new()),
                            },
                        };
                        out.push(RawObject {
                            key: path,
                            size,
                            version,
                            expect,
                            exec: false,
                        });
                        if let Some(true) = out.last().map(|o| o.expect.is_empty()) {
                            lfs_unknown.push(out.len() - 1);
                        }
                    }
                }
            }};
        }
        match self.kind {
            HfKind::Model => collect!(self.hub.model(&self.owner, &self.name)),
            HfKind::Dataset => collect!(self.hub.dataset(&self.owner, &self.name)),
        }
        self.linked_sha256(sha, &mut out, &lfs_unknown).await?;
        Ok(out)
    }

    /// The content SHA-256 of each LFS file `which` of `out`, as the Hub's resolve URL
    /// names it (`X-Linked-Etag` on its redirect, which is not followed): one HEAD per
    /// large file, a few at once. It also becomes the file's version, as the Hub's own
    /// clients key their caches.
    async fn linked_sha256(&self, sha: &str, out: &mut [RawObject], which: &[usize]) -> Result<()> {
        if which.is_empty() {
            return Ok(());
        }
        let http = reqwest::Client::builder()
            .connect_timeout(sealvol_core::patience::connect())
            .read_timeout(sealvol_core::patience::answer())
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| Error::new(ErrorKind::Io, format!("cannot make an HTTP client: {e}")))?;
        let asks = which.iter().map(|&i| {
            let key = out[i].key.clone();
            let url = self.resolve_url_at(sha, &key);
            let http = &http;
            async move {
                let what = format!("{}/{key}", self.shown.trim_end_matches('/'));
                let linked = sealvol_source::retry::retrying(&what, || async {
                    let mut req = http.head(&url);
                    if let Some(t) = &self.token {
                        req = req.bearer_auth(t);
                    }
                    let resp = req
                        .send()
                        .await
                        .map_err(|e| crate::http::transport(&what, &e, &HINTS))?;
                    let status = resp.status().as_u16();
                    if !(200..400).contains(&status) {
                        return Err(crate::http::status_error(&what, status, "", &HINTS));
                    }
                    Ok(resp
                        .headers()
                        .get("x-linked-etag")
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_string))
                })
                .await?;
                let expect = match linked {
                    None => None,
                    Some(v) => Some(Expected::parse_hex("sha256", &v).ok_or_else(|| {
                        Error::new(
                            ErrorKind::Io,
                            format!("{what}: the Hub's X-Linked-Etag is not a SHA-256: {v:.80}"),
                        )
                        .hint(
                            "check the endpoint (HF_ENDPOINT): it does not answer as the Hub does",
                        )
                    })?),
                };
                Ok::<_, Error>((i, expect))
            }
        });
        let found: Vec<Result<(usize, Option<Expected>)>> = futures::stream::iter(asks)
            .buffer_unordered(8)
            .collect()
            .await;
        for f in found {
            if let (i, Some(e)) = f? {
                out[i].version = e.hex();
                out[i].expect = vec![e];
            }
        }
        Ok(())
    }

    fn resolve_url(&self, path: &str) -> String {
        self.resolve_url_at(&self.revision, path)
    }

    fn resolve_url_at(&self, revision: &str, path: &str) -> String {
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
            revision,
            path.join("/")
        )
    }

    /// A stream of bytes `range` of `obj` at the listed commit.
    pub async fn open(&self, obj: &Object, range: Range<u64>) -> Result<Body> {
        let what = format!("{}/{}", self.shown.trim_end_matches('/'), obj.key);
        let url = self.resolve_url(&obj.key);
        sealvol_source::retry::retrying(&what, || async {
            let mut req = self.http.get(&url);
            if let Some(t) = &self.token {
                // reqwest drops this header on a redirect to another host (the CDN).
                req = req.bearer_auth(t);
            }
            ranged_get(req, &what, &range, obj.size, &HINTS, "x-error-code").await
        })
        .await
    }
}

fn hf_error(shown: &str, e: HFError) -> Error {
    match e {
        // The Hub answers 401 with RepoNotFound for a repository that does not exist
        // (or is private and no token was sent): a typo is the likely one.
        HFError::AuthRequired { ref context } | HFError::Forbidden { ref context }
            if context.error_code.as_deref() == Some("RepoNotFound") =>
        {
            Error::not_found(format!("{shown}: no such repository"))
                .hint("check ORG/NAME (datasets are hf://datasets/ORG/NAME); a private repository also needs a token (HF_TOKEN, or --secret NAME)")
        }
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
        // One plain line: the host, and whether it did not answer or could not be reached
        // (hf-hub's own text names the URL twice and says neither).
        HFError::Request { ref source, .. } => crate::http::transport(shown, source, &HINTS),
        HFError::RateLimited { .. } => Error::new(ErrorKind::Unavailable, format!("{shown}: {e}")),
        HFError::Http { ref context } if context.status.is_server_error() => {
            Error::new(ErrorKind::Unavailable, format!("{shown}: {e}"))
        }
        other => Error::new(ErrorKind::Io, format!("{shown}: {other}")),
    }
}
