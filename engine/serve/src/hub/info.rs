//! `GET /hf/api/models/{ns}/{vol}` and `…/revision/{rev}` (and `datasets`): what
//! `model_info`, `snapshot_download` and `from_pretrained` ask first. A repo id is
//! `NS/VOL`; `sha` is the version's commit id (`ids::commit_id`). A repo the key may
//! not see is answered as one that does not exist, with the Hub's own `X-Error-Code`,
//! so the client raises its own `RepositoryNotFoundError`.

use std::sync::Arc;

use axum::Extension;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use sealvol_core::digest::Entry;
use sealvol_core::error::ErrorKind;
use sealvol_core::refs::VolumeName;

use super::{ids, revision};
use crate::keys::Grant;
use sealvol_core::repo::Repository;

/// What the Hub's clients are told when a request names nothing they may read.
#[derive(Debug)]
pub enum Missing {
    Repo(String),
    Revision(String),
    Failed(String),
}

impl IntoResponse for Missing {
    fn into_response(self) -> Response {
        let (status, code, message) = match self {
            Missing::Repo(m) => (StatusCode::NOT_FOUND, Some("RepoNotFound"), m),
            Missing::Revision(m) => (StatusCode::NOT_FOUND, Some("RevisionNotFound"), m),
            Missing::Failed(m) => (StatusCode::SERVICE_UNAVAILABLE, None, m),
        };
        let body = serde_json::json!({ "error": message }).to_string();
        let mut r = (status, body).into_response();
        if let Some(code) = code {
            r.headers_mut()
                .insert("x-error-code", HeaderValue::from_static(code));
        }
        r.headers_mut().insert(
            axum::http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        r
    }
}

/// `…/{ns}/{vol}`: the revision `main`.
pub async fn repo_info(
    State(repo): State<Arc<Repository>>,
    Extension(grant): Extension<Arc<Grant>>,
    Path((ns, vol)): Path<(String, String)>,
) -> Response {
    info(repo, grant, ns, vol, "main".to_string()).await
}

/// `…/{ns}/{vol}/revision/{rev}`.
pub async fn repo_info_at(
    State(repo): State<Arc<Repository>>,
    Extension(grant): Extension<Arc<Grant>>,
    Path((ns, vol, rev)): Path<(String, String, String)>,
) -> Response {
    info(repo, grant, ns, vol, rev).await
}

async fn info(
    repo: Arc<Repository>,
    grant: Arc<Grant>,
    ns: String,
    vol: String,
    rev: String,
) -> Response {
    let answered = tokio::task::spawn_blocking(move || describe(&repo, &grant, &ns, &vol, &rev))
        .await
        .unwrap_or_else(|_| Err(Missing::Failed("the server failed to answer".into())));
    match answered {
        Ok(body) => (
            [(
                axum::http::header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            body.to_string(),
        )
            .into_response(),
        Err(m) => m.into_response(),
    }
}

/// The volume `ns/vol` as the key sees it: an unknown one and one it may not see are
/// the same answer (nothing is said of another namespace).
pub fn volume_for(
    repo: &Repository,
    grant: &Grant,
    ns: &str,
    vol: &str,
) -> Result<VolumeName, Missing> {
    let id = format!("{ns}/{vol}");
    let unknown = || Missing::Repo(format!("Repository Not Found for url: {id}"));
    let name = VolumeName::parse(&id).map_err(|_| unknown())?;
    if !grant.sees(name.namespace.as_str()) {
        return Err(unknown());
    }
    match repo.require_volume(&name) {
        Ok(()) => Ok(name),
        Err(e) if e.kind() == ErrorKind::NotFound => Err(unknown()),
        Err(e) => Err(Missing::Failed(e.to_string())),
    }
}

fn describe(
    repo: &Repository,
    grant: &Grant,
    ns: &str,
    vol: &str,
    rev: &str,
) -> Result<serde_json::Value, Missing> {
    let name = volume_for(repo, grant, ns, vol)?;
    let digest = revision::resolve(repo, &name, rev).map_err(|e| match e.kind() {
        ErrorKind::NotFound | ErrorKind::Invalid => {
            Missing::Revision(format!("Invalid rev id: {rev}"))
        }
        _ => Missing::Failed(e.to_string()),
    })?;
    let m = repo
        .manifest(&name, &digest)
        .map_err(|e| Missing::Failed(e.to_string()))?;
    let tags: Vec<String> = repo
        .tags(&name)
        .map_err(|e| Missing::Failed(e.to_string()))?
        .into_iter()
        .filter(|t| t.digest == digest.to_string())
        .map(|t| t.tag)
        .collect();
    let siblings: Vec<serde_json::Value> = m
        .entries
        .iter()
        .filter_map(|e| match e {
            Entry::File { size, .. } => Some(serde_json::json!({
                "rfilename": e.path(),
                "size": size,
            })),
            _ => None,
        })
        .collect();
    Ok(serde_json::json!({
        "_id": ids::commit_id(&digest),
        "id": name.to_string(),
        "modelId": name.to_string(),
        "sha": ids::commit_id(&digest),
        "lastModified": m.created,
        "private": false,
        "disabled": false,
        "gated": false,
        "tags": tags,
        "siblings": siblings,
    }))
}
