//! Tags moved and removed on the repository's own store: each move checked (the
//! version exists and is not in the trash; a removed tag is not removed again), then
//! made by compare-and-swap with an append-only history (`Registry::change_tag` as
//! `Here` makes it).

use crate::error::{Error, ErrorKind, Result};
use crate::ops::TagRequest;
use crate::outcomes::{TagFile, TagMove, TagMoved};
use crate::refs::{Digest, Name, Ref, VolumeName};
use crate::repo::{Repository, json_error, manifest_key, tag_key};
use crate::stamp::{now_rfc3339, whoami};

use super::reads::{missing_version, parse_tag, salvage_history};

/// Moves (`to`) or removes (`None`) a tag here.
pub(crate) fn change_here(repo: &Repository, req: &TagRequest) -> Result<TagMoved> {
    let (vol, tag) = (&req.volume, &req.tag);
    match &req.to {
        Some(to) => {
            if repo.store().size(&manifest_key(vol, to))?.is_none() {
                return Err(
                    repo.or_unknown_volume(vol, missing_version(&Ref::pinned(vol.clone(), *to)))
                );
            }
            if let Some(t) = repo.in_trash(vol, to)? {
                return Err(repo.trashed_error(vol, to, &t));
            }
        }
        None => match repo.tag(vol, tag) {
            Ok(Some(t)) if !t.removed() => {}
            Ok(Some(_)) => {
                return Err(
                    Error::not_found(format!("tag {tag} of {vol} was already removed")).hint(
                        format!("see its history with `sealvol volume tags {vol} --history`"),
                    ),
                );
            }
            Ok(None) => {
                return Err(repo.or_unknown_volume(vol, repo.unknown_tag(vol, tag)));
            }
            // A damaged tag can be removed: what is readable of its history is kept.
            Err(e) if e.kind() == ErrorKind::Corrupt => {}
            Err(e) => return Err(e),
        },
    }
    cas(
        repo,
        vol,
        tag,
        req.to.as_ref(),
        req.expected,
        req.expires.clone(),
    )
}

fn cas(
    repo: &Repository,
    vol: &VolumeName,
    tag: &Name,
    to: Option<&Digest>,
    expected: Option<Option<Digest>>,
    expires: Option<String>,
) -> Result<TagMoved> {
    let to_text = to.map(|d| d.to_string()).unwrap_or_default();
    let key = tag_key(vol, tag);
    // Each lost race means another writer's move landed; eight writers moving one
    // tag on a store that answers one write at a time can lose sixteen in a row.
    for _attempt in 0..64 {
        let current = repo.store().get_versioned(&key)?;
        let mut kept_at = None;
        let (mut file, etag) = match &current {
            Some((bytes, etag)) => match parse_tag(&key, bytes) {
                Ok(f) => (f, Some(etag.clone())),
                // A damaged tag does not stop a move: its bytes are kept in
                // quarantine, what can be read of its history carries over.
                Err(e) => {
                    let at = repo.quarantine_copy(&key, bytes)?;
                    tracing::warn!("{}; kept at {at}", e.message());
                    kept_at = Some(at);
                    let history = salvage_history(bytes);
                    let digest = history.last().map(|m| m.to.clone()).unwrap_or_default();
                    let file = TagFile {
                        tag: tag.to_string(),
                        digest,
                        history,
                        expires: None,
                        damaged: None,
                    };
                    (file, Some(etag.clone()))
                }
            },
            None => (
                TagFile {
                    tag: tag.to_string(),
                    digest: String::new(),
                    history: Vec::new(),
                    expires: None,
                    damaged: None,
                },
                None,
            ),
        };
        let from = (!file.digest.is_empty()).then(|| file.digest.clone());
        if let Some(want) = &expected {
            let want = want.map(|d| d.to_string());
            if want != from {
                return Err(Error::new(
                    ErrorKind::Race,
                    format!(
                        "tag {tag} of {vol} now points at {}, not {}",
                        from.as_deref().unwrap_or("nothing"),
                        want.as_deref().unwrap_or("nothing")
                    ),
                )
                .hint("look at the tag again and decide anew"));
            }
        }
        if file.digest == to_text && file.expires == expires && kept_at.is_none() {
            return Ok(TagMoved {
                file,
                from,
                moved: false,
                kept_damaged: None,
            });
        }
        file.digest = to_text.clone();
        file.expires = expires.clone();
        file.history.push(TagMove {
            from: from.clone(),
            to: to_text.clone(),
            at: now_rfc3339(),
            by: whoami(),
            expires: expires.clone(),
        });
        let bytes = serde_json::to_vec_pretty(&file).map_err(json_error)?;
        match repo.store().put_if_match(&key, &bytes, etag.as_ref()) {
            Ok(()) => {
                return Ok(TagMoved {
                    file,
                    from,
                    moved: true,
                    kept_damaged: kept_at,
                });
            }
            // Another move landed between our read and our write: read again. A
            // guarded move then finds the tag elsewhere and says where (or, moved
            // back to what the person saw, goes through).
            Err(e) if e.kind() == ErrorKind::Race => continue,
            Err(e) => return Err(e),
        }
    }
    Err(Error::new(
        ErrorKind::Race,
        format!("tag {tag} of {vol} keeps changing under us"),
    )
    .hint("try again in a moment"))
}
