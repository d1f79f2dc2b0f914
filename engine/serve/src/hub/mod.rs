//! The Hugging Face Hub's read API over the repository (`/hf/`): what HF tools
//! (`huggingface_hub`, `transformers`, `hf download`, vLLM) ask, answered with sealed,
//! proven versions, so that pointing `HF_ENDPOINT` at a server is the whole change a
//! loader needs (docs/SEMANTICS.md, "A Hub revision is a version").
//!
//! - `asked`: what a request's path asks (reserved first segments, decoded segments);
//! - `revision`: a Hub revision (`main`, a tag, a digest, a 40-hex commit id) as the
//!   version it names;
//! - `ids`: the ids the Hub's clients check (commit id, git blob and tree ids, LFS
//!   pointers), and `kept`: a version's ids, computed once from proven bytes and kept;
//! - `info`: a repo at a revision; `tree`: its files and folders, paged, and
//!   `paths-info`; `file`: a file's bytes (`resolve`), ranged, every byte proven;
//! - `missing`: the Hub's own error answers;
//! - the pull-through mirror (`serve --hf-upstream`): `mirror`, where a request for a
//!   repo the server does not hold goes, and the jobs that seal them; `upstream`, the
//!   upstream Hub as the mirror asks it; `coming`, a repo's answers while its job
//!   fetches it; `spool`, files on their way in, read while they are written.

pub mod asked;
pub mod coming;
pub mod file;
pub mod ids;
pub mod info;
pub mod kept;
pub mod mirror;
pub mod missing;
pub mod revision;
pub mod spool;
pub mod tree;
pub mod upstream;

use std::sync::Arc;

use axum::Extension;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, Method, Uri};
use axum::response::IntoResponse;
use sealvol_core::error::ErrorKind;
use sealvol_core::manifest::Manifest;
use sealvol_core::refs::{Digest, VolumeName};

use crate::chunks::ChunkService;
use crate::keys::Grant;
use crate::reply::Reply;
use asked::Asked;
pub use asked::At;
use missing::Missing;

/// What the Hub's routes share: the server's chunks (and through them its
/// repository), and the versions' manifests and ids asked for lately.
pub struct Hub {
    pub chunks: Arc<ChunkService>,
    pub kept: Arc<kept::Kept>,
    /// The server speaks TLS (its absolute links say `https`).
    pub https: bool,
    /// The pull-through mirror of an upstream Hub, when the server has one.
    pub mirror: Option<Arc<mirror::Mirror>>,
}

impl Hub {
    pub fn new(chunks: Arc<ChunkService>, https: bool, mirror: Option<Arc<mirror::Mirror>>) -> Hub {
        Hub {
            chunks,
            kept: Arc::default(),
            https,
            mirror,
        }
    }

    /// The version `at` names, as the key sees it. Blocking.
    pub fn version_at(&self, grant: &Grant, at: &At) -> Result<Version, Missing> {
        let repo = self.chunks.repository();
        let rev = at.rev.as_str();
        let volume = volume_for(repo, grant, &at.ns, &at.vol)?;
        let digest = revision::resolve(repo, &volume, rev).map_err(|e| match e.kind() {
            ErrorKind::NotFound | ErrorKind::Invalid => Missing::Revision(format!(
                "Invalid rev id: {rev:.100}: {}",
                e.to_string().replace('\n', " ")
            )),
            _ => Missing::Failed(e.to_string()),
        })?;
        let manifest = self
            .kept
            .manifest(repo, &volume, &digest)
            .map_err(|e| Missing::Failed(e.to_string()))?;
        let (id, commit, pinned) = match &at.mirrored {
            Some(m) => (m.repo.clone(), m.commit.clone(), m.pinned),
            None => (
                volume.to_string(),
                ids::commit_id(&digest),
                rev.len() == 40 || rev.len() == 64 || rev.starts_with("b3:"),
            ),
        };
        Ok(Version {
            volume,
            digest,
            manifest,
            pinned,
            id,
            commit,
        })
    }

    /// The ids of `v`'s files (computed the first time they are asked for). Blocking.
    pub fn ids(&self, v: &Version) -> Result<Arc<kept::VersionIds>, Missing> {
        self.kept
            .of(&self.chunks, &v.volume, &v.digest, &v.manifest)
            .map_err(|e| Missing::Failed(e.to_string()))
    }
}

/// A version as a request named it.
pub struct Version {
    pub volume: VolumeName,
    pub digest: Digest,
    pub manifest: Arc<Manifest>,
    /// Named by a digest or commit id, not by a tag that may move.
    pub pinned: bool,
    /// The repo id clients are told (`NS/VOL`; a mirrored repo's upstream id).
    pub id: String,
    /// The commit id clients are told (`ids::commit_id`; a mirrored repo's upstream
    /// commit).
    pub commit: String,
}

/// The volume `ns/vol` as the key sees it: an unknown one and one it may not see are
/// the same answer (nothing is said of another namespace).
pub fn volume_for(
    repo: &sealvol_core::Repository,
    grant: &Grant,
    ns: &str,
    vol: &str,
) -> Result<VolumeName, Missing> {
    let id = format!("{ns:.100}/{vol:.100}");
    let unknown = || Missing::Repo(format!("Repository Not Found for url: {id}"));
    let name = VolumeName::parse(&format!("{ns}/{vol}")).map_err(|_| unknown())?;
    if !grant.sees(name.namespace.as_str()) {
        return Err(unknown());
    }
    match repo.require_volume(&name) {
        Ok(()) => Ok(name),
        Err(e) if e.kind() == ErrorKind::NotFound => Err(unknown()),
        Err(e) => Err(Missing::Failed(e.to_string())),
    }
}

/// Every request under `/hf/`: read what it asks, answer it.
pub async fn answer(
    State(hub): State<Arc<Hub>>,
    Extension(grant): Extension<Arc<Grant>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Reply {
    let path = uri.path().strip_prefix("/hf/").unwrap_or_default();
    let asked = match asked::parse(path) {
        Ok(a) => a,
        Err(m) => return Err(m.response()),
    };
    let query = uri.query().unwrap_or_default().to_string();
    let post = method == Method::POST;
    if post != matches!(asked, Asked::PathsInfo(_)) {
        return Err((axum::http::StatusCode::METHOD_NOT_ALLOWED, "").into_response());
    }
    let form = match post {
        true => Some(
            crate::reply::read_body(body, tree::MAX_FORM)
                .await?
                .to_vec(),
        ),
        false => None,
    };
    let asked = match hub.mirror.clone() {
        None => asked,
        Some(mirror) => {
            let (h, g, m) = (Arc::clone(&hub), Arc::clone(&grant), Arc::clone(&mirror));
            match blocking(move || m.route(&h.chunks, &g, asked)).await {
                Ok(mirror::Routed::Here(asked)) => asked,
                Ok(mirror::Routed::Coming(coming, asked)) => {
                    let head = method == Method::HEAD;
                    return Ok(coming::answer(
                        hub, mirror, grant, coming, asked, query, &uri, &headers, form, head,
                    )
                    .await);
                }
                Err(m) => return Err(m.response()),
            }
        }
    };
    Ok(match (asked, form) {
        (Asked::PathsInfo(at), Some(form)) => tree::paths_info(hub, grant, at, form).await,
        (_, Some(_)) | (Asked::PathsInfo(_), None) => {
            (axum::http::StatusCode::METHOD_NOT_ALLOWED, "").into_response()
        }
        (Asked::Info(at), None) => info::info(hub, grant, at, &query).await,
        (Asked::Tree(at, path), None) => {
            tree::tree(hub, grant, at, path, &query, &uri, &headers).await
        }
        (Asked::File(at, path), None) => {
            file::file(hub, grant, at, path, method == Method::HEAD, &headers).await
        }
    })
}

/// A query's flag: `true`, `True` or `1`.
pub fn flag(query: &str, name: &str) -> bool {
    form_urlencoded::parse(query.as_bytes())
        .any(|(k, v)| k == name && matches!(&*v, "true" | "True" | "1"))
}

/// Runs `f` off the async threads; a panic in it is a failure, not a lost answer.
pub async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, Missing> + Send + 'static,
) -> Result<T, Missing> {
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|_| Err(Missing::Failed("the server failed to answer".into())))
}
