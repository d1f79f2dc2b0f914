//! The remote engine's object routes: the repository's objects, read by the holders
//! of keys as far as each key may see them, and the two kinds of object a key holder
//! writes itself (packs, read-ahead profiles, signatures), each checked before it exists. Every
//! other write is an operation the server makes (`ops.rs`).
//!
//! What a key may read:
//! - the admin key, and keys with no namespaces (a cluster's nodes), everything but
//!   quarantine and staging;
//! - a key scoped to namespaces: `sealvol.repo`; its namespaces' manifests, listings,
//!   summaries, profiles, signatures and their SHA-256 lists, tags and trash records; the chunk list of a file a version of
//!   its namespaces holds (`reach.rs`); and of packs only ranges that hold chunks of such
//!   a file, named with `?file=`. Indexes, other lists, whole packs, damage records and
//!   garbage-collection rounds are not its business: what content exists outside its
//!   namespaces it learns only by asking whether chunks it is about to push exist.
//!
//! What a key may write: read-write keys create packs (checked against their id and
//! every chunk against its hash as they arrive; the server writes the index) and
//! read-ahead profiles of versions in their namespaces (named by their hash);
//! signatures are an operation (`ops.rs`), never an object write; the admin
//! key anything (repair and settings run through it). Every name is checked against
//! its kind's exact shape first, so nothing can take a folder's name.
//!
//! Routes: `GET|HEAD|PUT|DELETE /v1/objects/{*key}`, `GET /v1/list`, `GET /v1/now`,
//! `POST /v1/barrier`, and `GET /v1/key`. Errors are JSON (`kind`, `message`, `hint`),
//! so the client rebuilds the engine's own error; they never carry the server's paths.

// Checks answer a request early with its response; boxing it would buy nothing.
#![allow(clippy::result_large_err)]

mod access;
mod put;

use access::on_store;
pub use access::{MAX_OBJECT, MAX_PROFILE, Object, Op, authorize, parse_key};
pub use put::{Writes, put_object};

use std::sync::Arc;

use axum::Extension;
use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sealvol_core::digest::Hash;
use sealvol_core::error::{Error, ErrorKind};
use sealvol_core::store::{ETag, ObjectStore};

use crate::keys::Grant;
use crate::ops::Steward;
use crate::reply::Reply;
use crate::reply::{denied, failed, json};
use sealvol_wire::objects::{KeyInfo, ListPage, VERSION_HEADER};

/// Objects are read whole only up to this size (tags, records, settings), or when a
/// compare-and-swap needs them with their version; others are streamed in pieces, so
/// that a slow reader holds a piece or two, never a whole pack.
const READ_WHOLE: u64 = PIECE;
/// The piece a streamed read sends at a time.
const PIECE: u64 = 256 << 10;

/// Checks `key` and whether `grant` may do `op` to it, reading what a scoped key's
/// file and pack reads need (`file`: the file a pack range is read for).
async fn allowed(
    s: &Arc<Steward>,
    grant: &Arc<Grant>,
    key: &str,
    op: Op,
    file: Option<Hash>,
    range: Option<(u64, u64)>,
) -> Result<Object, Response> {
    let obj = parse_key(key).map_err(|why| failed(Error::invalid(why)))?;
    authorize(grant, key, &obj, op).map_err(denied)?;
    let scoped = !grant.admin && !grant.namespaces.is_empty();
    if !scoped || op != Op::Read {
        return Ok(obj);
    }
    let refuse = |why: &str| {
        denied(format!(
            "key {} ({}) may not read {key:.120}: {why}",
            grant.name,
            grant.scope()
        ))
    };
    let (s2, g) = (Arc::clone(s), Arc::clone(grant));
    match &obj {
        Object::File(h) => {
            let h = *h;
            let reached = tokio::task::spawn_blocking(move || s2.reach.reaches(&g, &h))
                .await
                .map_err(|_| failed(Error::new(ErrorKind::Io, "a check failed")))?
                .map_err(failed)?;
            if !reached {
                return Err(refuse("no version of its namespaces holds that file"));
            }
        }
        Object::Pack(pack) => {
            let (Some(file), Some((offset, len))) = (file, range) else {
                return Err(refuse(
                    "it reads ranges of packs for a file (?file=), not whole packs",
                ));
            };
            let pack = *pack;
            let ok = tokio::task::spawn_blocking(move || -> sealvol_core::Result<bool> {
                if !s2.reach.reaches(&g, &file)? {
                    return Ok(false);
                }
                let listed = s2.lists.get(&file)?;
                Ok(holds_range(&listed.obj, &pack, offset, len))
            })
            .await
            .map_err(|_| failed(Error::new(ErrorKind::Io, "a check failed")))?
            .map_err(failed)?;
            if !ok {
                return Err(refuse(
                    "that range holds no chunks of a file its namespaces hold",
                ));
            }
        }
        _ => {}
    }
    Ok(obj)
}

/// Whether bytes `[offset, offset + len)` of `pack` lie within the copies of `obj`'s
/// chunks there (adjacent copies count as one stretch).
fn holds_range(
    obj: &sealvol_core::objects::FileObject,
    pack: &Hash,
    offset: u64,
    len: u64,
) -> bool {
    let Some(slot) = obj.packs.iter().position(|p| p == pack) else {
        return false;
    };
    let mut spans: Vec<(u64, u64)> = obj
        .chunks
        .iter()
        .filter(|c| c.pack as usize == slot)
        .map(|c| (c.entry.offset, c.entry.offset + c.entry.stored_len as u64))
        .collect();
    spans.sort_unstable();
    let end = offset.saturating_add(len);
    let mut at: Option<(u64, u64)> = None;
    for (s, e) in spans {
        at = match at {
            Some((a, b)) if s <= b => Some((a, b.max(e))),
            Some((a, b)) if a <= offset && end <= b => return true,
            _ => Some((s, e)),
        };
    }
    at.is_some_and(|(a, b)| a <= offset && end <= b)
}

#[derive(serde::Deserialize)]
pub struct GetQuery {
    /// Also return the version (`ETag`) for a later compare-and-swap.
    #[serde(default)]
    versioned: bool,
    /// The file a pack range is read for (keys scoped to namespaces).
    file: Option<String>,
}

/// Streams `len` bytes of `key` from `offset`, a piece at a time as the client takes
/// them: a slow reader holds one piece, never the object.
fn stream(s: &Arc<Steward>, key: String, offset: u64, len: u64) -> Body {
    let repo = Arc::clone(&s.repo);
    let pieces = futures::stream::unfold(0u64, move |done| {
        let (repo, key) = (Arc::clone(&repo), key.clone());
        async move {
            if done >= len {
                return None;
            }
            let n = PIECE.min(len - done);
            let at = offset + done;
            let read =
                tokio::task::spawn_blocking(move || repo.object_store().get_range(&key, at, n))
                    .await;
            match read {
                Ok(Ok(b)) => Some((Ok::<_, std::io::Error>(Bytes::from(b)), done + n)),
                // Cut short: the client sees a body shorter than its length.
                _ => Some((
                    Err(std::io::Error::other("the object could not be read")),
                    len,
                )),
            }
        }
    });
    Body::from_stream(pieces)
}

pub async fn get_object(
    State(s): State<Arc<Steward>>,
    Extension(grant): Extension<Arc<Grant>>,
    Path(key): Path<String>,
    Query(q): Query<GetQuery>,
    headers: HeaderMap,
) -> Reply {
    let file = match q.file.as_deref().map(Hash::parse_hex) {
        None => None,
        Some(Some(h)) => Some(h),
        Some(None) => {
            return Err(failed(Error::invalid(
                "file= names a file by its hash (64 hex digits)",
            )));
        }
    };
    let range_header = match headers.get(header::RANGE).map(|v| v.to_str()) {
        None => None,
        Some(Ok(v)) => Some(v.to_string()),
        Some(Err(_)) => return Err(failed(Error::invalid("a Range must be bytes=FIRST-LAST"))),
    };
    let obj = match parse_key(&key) {
        Ok(o) => o,
        Err(why) => return Err(failed(Error::invalid(why))),
    };
    if let Err(why) = authorize(&grant, &key, &obj, Op::Read) {
        return Err(denied(why));
    }
    let k = key.clone();
    let Some(size) = on_store(&s, move |st| st.size(&k)).await? else {
        return Ok(small_file_list(&s, &grant, &key, &obj).await);
    };
    let range = match range_header
        .as_deref()
        .map(|v| crate::range::parse_range(v, size))
    {
        None => None,
        Some(Ok(r)) => Some(r),
        Some(Err(StatusCode::RANGE_NOT_SATISFIABLE)) => {
            return Ok((
                StatusCode::RANGE_NOT_SATISFIABLE,
                [(header::CONTENT_RANGE, format!("bytes */{size}"))],
            )
                .into_response());
        }
        Some(Err(_)) => {
            return Err(failed(Error::invalid(
                "a Range must be one range: bytes=FIRST-LAST, bytes=FIRST- or bytes=-LAST_N",
            )));
        }
    };
    allowed(&s, &grant, &key, Op::Read, file, range).await?;
    if let Some((offset, len)) = range {
        let mut h = HeaderMap::new();
        h.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
        if let Ok(v) = HeaderValue::from_str(&format!("bytes {offset}-{}/{size}", offset + len - 1))
        {
            h.insert(header::CONTENT_RANGE, v);
        }
        return Ok((StatusCode::PARTIAL_CONTENT, h, stream(&s, key, offset, len)).into_response());
    }
    if size > READ_WHOLE && !q.versioned {
        let mut h = HeaderMap::new();
        h.insert(header::CONTENT_LENGTH, HeaderValue::from(size));
        return Ok((StatusCode::OK, h, stream(&s, key, 0, size)).into_response());
    }
    // A versioned read of a large object is held whole until sent: within the budget
    // of what requests hold in memory.
    let mut share = crate::budget::Share::none();
    if size > READ_WHOLE && !share.cover_body(size).await {
        return Err(failed(
            Error::new(
                ErrorKind::Unavailable,
                "the server holds as much as it may in memory",
            )
            .hint("try again in a moment"),
        ));
    }
    let k = key.clone();
    let got = on_store(&s, move |st| match q.versioned {
        true => st.get_versioned(&k),
        false => Ok(st.get(&k)?.map(|b| (b, ETag(String::new())))),
    })
    .await;
    Ok(match got {
        Ok(Some((bytes, etag))) => {
            let bytes = match obj {
                Object::Config => own_quotas(&grant, bytes),
                _ => bytes,
            };
            // The store's own version string, as it is (an S3 ETag keeps its quotes):
            // the client hands it back for the compare-and-swap.
            let mut h = HeaderMap::new();
            if let Ok(v) = HeaderValue::from_str(&etag.0) {
                h.insert(VERSION_HEADER, v);
            }
            crate::conn::shares::held((StatusCode::OK, h, bytes).into_response(), share)
        }
        Ok(None) => failed(Error::not_found(format!("no object {key}"))),
        Err(r) => r,
    })
}

/// The repository's settings as a key scoped to namespaces reads them: the quotas of
/// its own namespaces only (another's name is not its business). Settings that do not
/// parse go as they are (the client says what is wrong with them).
fn own_quotas(grant: &Grant, bytes: Vec<u8>) -> Vec<u8> {
    if grant.admin || grant.namespaces.is_empty() {
        return bytes;
    }
    let Ok(mut config) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
        return bytes;
    };
    if let Some(quotas) = config.get_mut("quotas").and_then(|q| q.as_object_mut()) {
        quotas.retain(|ns, _| grant.sees(ns));
    }
    serde_json::to_vec_pretty(&config).unwrap_or(bytes)
}

/// The chunk list of a small file, which is not stored (`sealvol_core::small`): made
/// from its chunk's copy, for a key that may read the file. Anything else that is not
/// stored is not found.
async fn small_file_list(
    s: &Arc<Steward>,
    grant: &Arc<Grant>,
    key: &str,
    obj: &Object,
) -> Response {
    let Object::File(h) = obj else {
        return failed(Error::not_found(format!("no object {key}")));
    };
    if let Err(r) = allowed(s, grant, key, Op::Read, None, None).await {
        return r;
    }
    let (s2, h) = (Arc::clone(s), *h);
    match tokio::task::spawn_blocking(move || s2.lists.get(&h)).await {
        Ok(Ok(listed)) => (StatusCode::OK, listed.obj.encode()).into_response(),
        Ok(Err(e)) if e.kind() == ErrorKind::NotFound => {
            failed(Error::not_found(format!("no object {key}")))
        }
        Ok(Err(e)) => failed(e),
        Err(_) => failed(Error::new(ErrorKind::Io, "a read failed on the server")),
    }
}

pub async fn head_object(
    State(s): State<Arc<Steward>>,
    Extension(grant): Extension<Arc<Grant>>,
    Path(key): Path<String>,
) -> Response {
    if let Err(r) = allowed(&s, &grant, &key, Op::Read, None, None).await {
        return r;
    }
    let k = key.clone();
    match on_store(&s, move |st| st.size(&k)).await {
        Ok(Some(size)) => (StatusCode::OK, [("x-sealvol-size", size.to_string())]).into_response(),
        Ok(None) => StatusCode::NOT_FOUND.into_response(),
        Err(r) => r,
    }
}

pub async fn delete_object(
    State(s): State<Arc<Steward>>,
    Extension(grant): Extension<Arc<Grant>>,
    Path(key): Path<String>,
) -> Response {
    if let Err(r) = allowed(&s, &grant, &key, Op::Delete, None, None).await {
        return r;
    }
    let k = key.clone();
    match on_store(&s, move |st| st.delete(&k)).await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(r) => r,
    }
}

#[derive(serde::Deserialize)]
pub struct ListQuery {
    prefix: String,
    after: Option<String>,
}

pub async fn list(
    State(s): State<Arc<Steward>>,
    Extension(grant): Extension<Arc<Grant>>,
    Query(q): Query<ListQuery>,
) -> Reply {
    if !(q.prefix.is_empty() || q.prefix.ends_with('/')) || q.prefix.len() > 1024 {
        return Err(failed(Error::invalid("a listing's prefix ends in /")));
    }
    // A namespaced kind is listed whole and filtered; anything else by the admin, or
    // by a key that sees every namespace (not the server's own folders).
    let prefix = q.prefix.clone();
    let mut parts = prefix.split('/');
    let top = parts.next().unwrap_or_default();
    let ns_ok = parts
        .next()
        .is_none_or(|ns| ns.is_empty() || grant.sees(ns));
    let allowed = grant.admin
        || (sealvol_core::keys::NAMESPACED.contains(&top) && ns_ok)
        || (grant.namespaces.is_empty()
            && !prefix.is_empty()
            && !matches!(top, "quarantine" | "tmp" | "probe"));
    if !allowed {
        return Err(denied(format!(
            "key {} ({}) may not list {prefix:.120}",
            grant.name,
            grant.scope()
        )));
    }
    let g = Arc::clone(&grant);
    // A key scoped to namespaces lists a kind's folder as its own namespaces' folders,
    // one after another: the store never lists another namespace for it, so nothing it
    // is sent (a page's `next` included, which is the last key a store listed) names
    // one.
    let scoped = !grant.admin && !grant.namespaces.is_empty();
    let whole_kind = top.len() + 1 == prefix.len();
    let listed = match (scoped, whole_kind) {
        (true, true) => {
            let mut namespaces = grant.namespaces.clone();
            namespaces.sort();
            namespaces.dedup();
            let after = q.after.clone();
            on_store(&s, move |st| {
                list_namespaces(st, &prefix, &namespaces, after.as_deref())
            })
            .await
        }
        _ => on_store(&s, move |st| st.list_page(&prefix, q.after.as_deref())).await,
    };
    let page = listed?;
    let objects = page
        .objects
        .into_iter()
        .filter(|o| match parse_key(&o.key) {
            Ok(obj) => authorize(&g, &o.key, &obj, Op::Read).is_ok(),
            // Strays are the admin's to see (repair moves them aside).
            Err(_) => g.admin,
        })
        .map(|o| {
            let ms = o.modified.and_then(|m| {
                m.duration_since(std::time::UNIX_EPOCH)
                    .ok()
                    .map(|d| d.as_millis() as u64)
            });
            (o.key, o.size, ms)
        })
        .collect();
    Ok(json(&ListPage {
        objects,
        next: page.next,
    }))
}

/// One page of kind folder `prefix` (`manifests/`) as namespaces `namespaces` hold it
/// (sorted): each namespace's folder in turn, from where `after` (a key of one of them)
/// left off; the page's `next` is a key of theirs.
fn list_namespaces(
    st: &dyn ObjectStore,
    prefix: &str,
    namespaces: &[String],
    after: Option<&str>,
) -> sealvol_core::Result<sealvol_core::store::Page> {
    let folder = |ns: &str| format!("{prefix}{ns}/");
    let (start, mut after) = match after {
        None => (0, None),
        Some(a) => match namespaces.iter().position(|ns| a.starts_with(&folder(ns))) {
            Some(i) => (i, Some(a.to_string())),
            None => {
                return Err(Error::invalid(
                    "after= names a key of a listing this key may make",
                ));
            }
        },
    };
    let mut objects = Vec::new();
    for (i, ns) in namespaces.iter().enumerate().skip(start) {
        let page = st.list_page(&folder(ns), after.take().as_deref())?;
        objects.extend(page.objects);
        if page.next.is_some() {
            return Ok(sealvol_core::store::Page {
                objects,
                next: page.next,
            });
        }
        // More namespaces to come: the next page starts after this one's last key.
        if i + 1 < namespaces.len() && objects.len() >= 1000 {
            let next = objects.last().map(|o| o.key.clone());
            return Ok(sealvol_core::store::Page { objects, next });
        }
    }
    Ok(sealvol_core::store::Page {
        objects,
        next: None,
    })
}

pub async fn whoami(Extension(grant): Extension<Arc<Grant>>) -> Response {
    json(&KeyInfo {
        name: grant.name.clone(),
        scope: grant.scope(),
        admin: grant.admin,
        read_only: grant.read_only,
        namespaces: grant.namespaces.clone(),
    })
}

pub async fn now(State(s): State<Arc<Steward>>) -> Response {
    match on_store(&s, |st| st.now()).await {
        Ok(t) => {
            let ms = t
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64);
            json(&serde_json::json!({ "now_ms": ms }))
        }
        Err(r) => r,
    }
}

pub async fn barrier(
    State(s): State<Arc<Steward>>,
    Extension(grant): Extension<Arc<Grant>>,
) -> Response {
    if grant.read_only {
        return denied(format!("key {} is read-only", grant.name));
    }
    match on_store(&s, |st| st.sync()).await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(r) => r,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(admin: bool, read_only: bool, ns: &[&str]) -> Grant {
        Grant {
            name: "k".into(),
            admin,
            read_only,
            namespaces: ns.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn may(g: &Grant, key: &str, op: Op) -> bool {
        parse_key(key).is_ok_and(|o| authorize(g, key, &o, op).is_ok())
    }

    #[test]
    fn what_each_kind_of_key_may_touch() {
        let h = "ab".to_string() + &"0".repeat(62);
        let pack = format!("packs/ab/{h}");
        let ci = grant(false, false, &["weights"]);
        let ro = grant(false, true, &[]);
        let admin = grant(true, false, &[]);
        let m = format!("manifests/weights/m/{h}");
        // Manifests and every derived object: the server writes them.
        assert!(!may(&ci, &m, Op::Create));
        assert!(may(&ci, &m, Op::Read));
        assert!(!may(&ci, &format!("manifests/other/m/{h}"), Op::Read));
        assert!(!may(&ci, &format!("trash/weights/m/{h}"), Op::Delete));
        assert!(!may(&ci, &format!("files/ab/{h}"), Op::Create));
        assert!(!may(&ci, &format!("index/{h}"), Op::Create));
        assert!(!may(&ci, &format!("damage/{h}/{h}"), Op::Create));
        assert!(!may(&ci, "gc/rounds/1", Op::Replace));
        assert!(!may(&ci, "tags/weights/m/prod", Op::Replace));
        // Packs and profiles it writes; what it reads of packs needs a file.
        assert!(may(&ci, &pack, Op::Create));
        assert!(!may(&ci, &pack, Op::Delete));
        assert!(!may(&ci, &pack, Op::Replace));
        assert!(may(&ci, &format!("profiles/weights/m/{h}/{h}"), Op::Create));
        assert!(!may(&ci, &format!("profiles/other/m/{h}/{h}"), Op::Create));
        assert!(!may(&ci, &format!("index/{h}"), Op::Read));
        assert!(!may(&ci, "gc/rounds/1", Op::Read));
        assert!(!may(&ci, "sealvol.repo", Op::Replace));
        assert!(!may(&ci, "quarantine/x/y", Op::Read));
        // A node's key sees everything but the server's own folders, writes nothing.
        assert!(may(&ro, &m, Op::Read));
        assert!(may(&ro, &format!("index/{h}"), Op::Read));
        assert!(!may(&ro, "quarantine/x/y", Op::Read));
        assert!(!may(&ro, &pack, Op::Create));
        assert!(may(&admin, &pack, Op::Delete));
        // Shapes: no folder names, no other fan-out, no paths out.
        for bad in [
            "",
            "/abs",
            "a//b",
            "a/../b",
            "a/./b",
            "a b",
            "packs/\u{e9}",
            "packs/ab",
            "files/ab",
            "packs/cd/ab00",
            &format!("packs/cd/{h}"),
            &format!("packs/ab/{h}/x"),
            &format!("manifests/../m/{h}"),
            &format!("manifests/Bad/m/{h}"),
            "stray",
            "index",
        ] {
            assert!(parse_key(bad).is_err(), "{bad:?}");
        }
    }
}
