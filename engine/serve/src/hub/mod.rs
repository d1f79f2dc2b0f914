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
mod lookup;
pub mod mirror;
pub mod missing;
pub mod revision;
mod shared;
pub mod spool;
pub mod tree;
pub mod upstream;

use std::sync::Arc;

use axum::Extension;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, Method, Uri};
use axum::response::IntoResponse;

use crate::keys::Grant;
use crate::reply::Reply;
use asked::Asked;
pub use asked::At;
pub use lookup::{blocking, flag, volume_for};
pub use shared::{Hub, Version};

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
