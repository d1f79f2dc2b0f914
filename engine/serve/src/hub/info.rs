//! `GET /hf/api/{models,datasets}/NS/VOL[/revision/REV]`: what `model_info`,
//! `snapshot_download` and `from_pretrained` ask first. `sha` is the version's commit
//! id (`ids::commit_id`); `siblings` name its files, and with `?blobs=true` their
//! sizes, blob ids and (for large files) `lfs: {sha256, size}`, which are then
//! computed if they were not yet (`kept.rs`).

use std::sync::Arc;

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use sealvol_core::digest::Entry;

use super::asked::At;
use super::ids;
use super::lookup::{blocking, flag};
use super::shared::Hub;
use crate::keys::Grant;

pub async fn info(hub: Arc<Hub>, grant: Arc<Grant>, at: At, query: &str) -> Response {
    let blobs = flag(query, "blobs");
    let answered = blocking(move || {
        let v = hub.version_at(&grant, &at)?;
        let ids = match blobs {
            true => Some(hub.ids(&v)?),
            false => None,
        };
        let repo = hub.chunks.repository();
        let tags: Vec<String> = repo
            .tags(&v.volume)
            .map_err(|e| super::missing::Missing::Failed(e.to_string()))?
            .into_iter()
            .filter(|t| t.digest == v.digest.to_string())
            .map(|t| t.tag)
            .collect();
        let siblings: Vec<serde_json::Value> = v
            .manifest
            .entries
            .iter()
            .filter_map(|e| match e {
                Entry::File { path, size, .. } => {
                    let mut s = serde_json::json!({ "rfilename": path, "size": size });
                    if let Some(f) = ids.as_ref().and_then(|i| i.files.get(path)) {
                        s["blobId"] = f.blob.clone().into();
                        if let Some(sha) = &f.sha256 {
                            s["lfs"] = serde_json::json!({
                                "sha256": sha,
                                "size": size,
                                "pointerSize": ids::lfs_pointer(sha, *size).len(),
                            });
                        }
                    }
                    Some(s)
                }
                _ => None,
            })
            .collect();
        let commit = &v.commit;
        Ok(serde_json::json!({
            "_id": commit,
            "id": v.id,
            "modelId": v.id,
            "sha": commit,
            "lastModified": v.manifest.created,
            "createdAt": v.manifest.created,
            "private": false,
            "disabled": false,
            "gated": false,
            "downloads": 0,
            "likes": 0,
            "tags": tags,
            "siblings": siblings,
        }))
    })
    .await;
    match answered {
        Ok(body) => (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            body.to_string(),
        )
            .into_response(),
        Err(m) => m.response(),
    }
}
