//! The remote engine: the repository's object store over HTTP, for a CLI or console
//! elsewhere that runs the engine against it (`sealvol --remote URL`), as restic's REST
//! server does for restic. Every engine operation (push, tags, diff, trash, restore,
//! mounts) is then the same code as against a local repository, and this module only
//! decides, object by object, what the caller's key may touch:
//!
//! - objects of a namespace (`manifests/`, `listings/`, `summaries/`, `profiles/`,
//!   `tags/`, `trash/` + `<ns>/…`): seen by keys that see the namespace, written by
//!   read-write keys in it; of them only trash records are deleted by such a key (a
//!   restore); listings leave out the namespaces a key does not see;
//! - content-addressed objects (`packs/`, `index/`, `files/`): read by every key,
//!   created by read-write keys; packs and indexes are checked against their names as
//!   they arrive, manifests against their digest, so a key cannot plant bytes under a
//!   name they do not hash to;
//! - damage records: created by read-write keys (readers record what failed);
//!   garbage-collection rounds: compare-and-swap by read-write keys (a push rescuing
//!   what it builds on, docs/GC.md); everything else written or deleted: admin only.
//!
//! Routes: `GET|HEAD|PUT|DELETE /v1/objects/{*key}`, `GET /v1/list`, `GET /v1/now`,
//! `POST /v1/barrier`, and `GET /v1/key` (what the caller's key may do). Errors are JSON (`kind`, `message`, `hint`), so the client
//! rebuilds the engine's own error.

use std::sync::Arc;

use axum::Extension;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sealvol_core::digest::Hash;
use sealvol_core::error::{Error, ErrorKind};
use sealvol_core::repo::Repository;
use sealvol_core::store::{ETag, ObjectStore};

use crate::keys::Grant;

/// The header that carries an object's version (`get_versioned`) to the client.
pub const VERSION_HEADER: &str = "x-sealvol-version";

/// The largest object a client may write: a pack is about the repository's target
/// size (64 MiB) plus one chunk. Packs are streamed to disk, never held whole.
pub const MAX_OBJECT: usize = 256 << 20;

/// The largest of every other object (a chunk list of a file of a million chunks is
/// about 50 MiB), read into memory.
pub const MAX_SMALL_OBJECT: usize = 64 << 20;

/// What a request does to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Read,
    /// Create if absent.
    Create,
    /// Overwrite, or compare-and-swap.
    Replace,
    Delete,
}

const NAMESPACED: [&str; 6] = [
    "manifests",
    "listings",
    "summaries",
    "profiles",
    "tags",
    "trash",
];

/// A key path a client may name: relative, `/`-separated, no empty or dot segments,
/// printable ASCII.
pub fn check_key(key: &str) -> Result<(), String> {
    let ok = !key.is_empty()
        && key.len() <= 1024
        && key.bytes().all(|b| b.is_ascii_graphic())
        && key
            .split('/')
            .all(|s| !s.is_empty() && s != "." && s != "..");
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{key:.100} is not an object key (relative, no empty, . or .. parts)"
        ))
    }
}

/// Whether `grant` may do `op` to object `key`; the refusal says why.
pub fn authorize(grant: &Grant, key: &str, op: Op) -> Result<(), String> {
    if grant.admin {
        return Ok(());
    }
    let mut parts = key.split('/');
    let top = parts.next().unwrap_or_default();
    let refuse = |what: &str| {
        Err(format!(
            "key {} ({}) may not {what} {key}",
            grant.name,
            grant.scope()
        ))
    };
    let verb = match op {
        Op::Read => "read",
        Op::Create | Op::Replace => "write",
        Op::Delete => "delete",
    };
    if NAMESPACED.contains(&top) {
        let ns = parts.next().unwrap_or_default();
        let ok = match op {
            Op::Read => grant.sees(ns),
            Op::Create | Op::Replace => grant.writes(ns),
            Op::Delete => top == "trash" && grant.writes(ns),
        };
        return if ok { Ok(()) } else { refuse(verb) };
    }
    let ok = match (top, op) {
        ("packs" | "index" | "files" | "damage" | "gc" | "sealvol.repo", Op::Read) => true,
        ("packs" | "index" | "files" | "damage", Op::Create) => !grant.read_only,
        // A push heals a chunk list that names a damaged copy.
        ("files", Op::Replace) => !grant.read_only,
        ("gc", Op::Replace) => !grant.read_only && key.starts_with("gc/rounds/"),
        _ => false,
    };
    if ok { Ok(()) } else { refuse(verb) }
}

/// Checks what a client writes under a name that its bytes must hash to.
fn check_content(key: &str, bytes: &[u8]) -> Result<(), Error> {
    let parts: Vec<&str> = key.split('/').collect();
    let id = |s: &str| {
        Hash::parse_hex(s).ok_or_else(|| Error::invalid(format!("{key}: {s:.80} is not a hash")))
    };
    match parts.as_slice() {
        // Whole packs are checked where they are staged (`put_pack`); this is a pack
        // written by another mode, which must hold up all the same.
        ["packs", _, name] => sealvol_core::objects::check_pack(key, &id(name)?, bytes),
        ["index", name] => {
            let entries = sealvol_core::objects::decode_index(key, bytes)?;
            if sealvol_core::objects::pack_id(&entries) != id(name)? {
                return Err(Error::corrupt(format!(
                    "{key}: its entries do not hash to its name"
                )));
            }
            Ok(())
        }
        ["files", _, name] => {
            sealvol_core::objects::FileObject::decode(key, bytes, &id(name)?).map(|_| ())
        }
        ["manifests", ns, vol, digest] => {
            let m: sealvol_core::registry::Manifest = serde_json::from_slice(bytes)
                .map_err(|e| Error::invalid(format!("{key} is not a manifest: {e}")))?;
            let actual = sealvol_core::digest::version_digest(&m.entries);
            if actual.hex() != *digest
                || m.digest != actual.to_string()
                || m.volume != format!("{ns}/{vol}")
            {
                return Err(Error::corrupt(format!(
                    "{key}: its entries hash to {actual}, not to its name"
                )));
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// An engine error as the client rebuilds it.
pub fn error_response(status: StatusCode, e: &Error) -> Response {
    let body = serde_json::json!({
        "kind": e.kind(),
        "message": e.message(),
        "hint": e.hint_text(),
    });
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn json(v: &impl serde::Serialize) -> Response {
    match serde_json::to_vec(v) {
        Ok(body) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Err(e) => failed(Error::new(ErrorKind::Io, format!("cannot encode: {e}"))),
    }
}

fn status_of(kind: ErrorKind) -> StatusCode {
    match kind {
        ErrorKind::NotFound => StatusCode::NOT_FOUND,
        ErrorKind::Race => StatusCode::PRECONDITION_FAILED,
        ErrorKind::Denied => StatusCode::FORBIDDEN,
        ErrorKind::Invalid | ErrorKind::Usage => StatusCode::BAD_REQUEST,
        ErrorKind::Corrupt => StatusCode::UNPROCESSABLE_ENTITY,
        ErrorKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

fn failed(e: Error) -> Response {
    error_response(status_of(e.kind()), &e)
}

fn denied(why: String) -> Response {
    failed(
        Error::new(ErrorKind::Denied, why)
            .hint("ask the server's operator for a key with that scope (`sealvol key create`)"),
    )
}

/// Checks the key and the caller's right, then runs `f` on a blocking thread.
async fn with_store<T: Send + 'static>(
    repo: &Arc<Repository>,
    grant: &Grant,
    key: &str,
    op: Op,
    f: impl FnOnce(&dyn ObjectStore) -> sealvol_core::Result<T> + Send + 'static,
) -> Result<T, Response> {
    check_key(key).map_err(|why| failed(Error::invalid(why)))?;
    authorize(grant, key, op).map_err(denied)?;
    let repo = Arc::clone(repo);
    tokio::task::spawn_blocking(move || f(repo.object_store()))
        .await
        .map_err(|e| {
            failed(Error::new(
                ErrorKind::Io,
                format!("the request failed: {e}"),
            ))
        })?
        .map_err(failed)
}

#[derive(serde::Deserialize)]
pub struct GetQuery {
    /// Also return the version (`ETag`) for a later compare-and-swap.
    #[serde(default)]
    versioned: bool,
}

fn range(headers: &HeaderMap) -> Option<(u64, u64)> {
    let v = headers.get(header::RANGE)?.to_str().ok()?;
    let (a, b) = v.strip_prefix("bytes=")?.split_once('-')?;
    let (a, b): (u64, u64) = (a.parse().ok()?, b.parse().ok()?);
    (b >= a).then_some((a, b - a + 1))
}

pub async fn get_object(
    State(repo): State<Arc<Repository>>,
    Extension(grant): Extension<Arc<Grant>>,
    Path(key): Path<String>,
    Query(q): Query<GetQuery>,
    headers: HeaderMap,
) -> Response {
    let k = key.clone();
    if let Some((offset, len)) = range(&headers) {
        return match with_store(&repo, &grant, &key, Op::Read, move |s| {
            s.get_range(&k, offset, len)
        })
        .await
        {
            Ok(bytes) => (StatusCode::PARTIAL_CONTENT, bytes).into_response(),
            Err(r) => r,
        };
    }
    if headers.contains_key(header::RANGE) {
        return failed(Error::invalid("a Range must be bytes=FIRST-LAST"));
    }
    let got = with_store(&repo, &grant, &key, Op::Read, move |s| match q.versioned {
        true => s.get_versioned(&k),
        false => Ok(s.get(&k)?.map(|b| (b, ETag(String::new())))),
    })
    .await;
    match got {
        Ok(Some((bytes, etag))) => {
            // The store's own version string, as it is (an S3 ETag keeps its quotes):
            // the client hands it back for the compare-and-swap.
            let mut h = HeaderMap::new();
            if let Ok(v) = HeaderValue::from_str(&etag.0) {
                h.insert(VERSION_HEADER, v);
            }
            (StatusCode::OK, h, bytes).into_response()
        }
        Ok(None) => failed(Error::not_found(format!("no object {key}"))),
        Err(r) => r,
    }
}

pub async fn head_object(
    State(repo): State<Arc<Repository>>,
    Extension(grant): Extension<Arc<Grant>>,
    Path(key): Path<String>,
) -> Response {
    let k = key.clone();
    match with_store(&repo, &grant, &key, Op::Read, move |s| s.size(&k)).await {
        Ok(Some(size)) => (StatusCode::OK, [("x-sealvol-size", size.to_string())]).into_response(),
        Ok(None) => StatusCode::NOT_FOUND.into_response(),
        Err(r) => r,
    }
}

#[derive(serde::Deserialize)]
pub struct PutQuery {
    /// `absent` (create unless it exists), `match` (compare-and-swap against `etag`,
    /// or against nothing without one) or `put` (overwrite).
    mode: String,
    etag: Option<String>,
}

pub async fn put_object(
    State(repo): State<Arc<Repository>>,
    Extension(grant): Extension<Arc<Grant>>,
    Path(key): Path<String>,
    Query(q): Query<PutQuery>,
    body: axum::body::Body,
) -> Response {
    let op = match (q.mode.as_str(), &q.etag) {
        ("absent", _) | ("match", None) => Op::Create,
        ("match", Some(_)) | ("put", _) => Op::Replace,
        (m, _) => {
            let r = failed(Error::invalid(format!(
                "mode={m:.40}: give absent, match or put"
            )));
            drain(body).await;
            return r;
        }
    };
    // Checked before the body is stored; a refusal still reads it (discarding it),
    // because a client still sending its body would not see the answer otherwise.
    let refusal = match check_key(&key) {
        Err(why) => Some(failed(Error::invalid(why))),
        Ok(()) => authorize(&grant, &key, op).err().map(denied),
    };
    if let Some(r) = refusal {
        drain(body).await;
        return r;
    }
    if q.mode == "absent" && key.starts_with("packs/") {
        return put_pack(repo, key, body).await;
    }
    let body = match axum::body::to_bytes(body, MAX_SMALL_OBJECT).await {
        Ok(b) => b,
        Err(_) => return too_large(MAX_SMALL_OBJECT),
    };
    let k = key.clone();
    let done = with_store(&repo, &grant, &key, op, move |s| {
        check_content(&k, &body)?;
        match q.mode.as_str() {
            "absent" => s.put_if_absent(&k, &body),
            "match" => s
                .put_if_match(&k, &body, q.etag.map(ETag).as_ref())
                .map(|()| true),
            _ => s.put(&k, &body).map(|()| true),
        }
    })
    .await;
    match done {
        Ok(true) => StatusCode::CREATED.into_response(),
        Ok(false) => StatusCode::OK.into_response(),
        Err(r) => r,
    }
}

/// Reads a body to its end (at most `MAX_OBJECT` bytes), keeping nothing.
async fn drain(body: axum::body::Body) {
    use futures::StreamExt;
    let mut stream = body.into_data_stream();
    let mut total = 0;
    while let Some(Ok(b)) = stream.next().await {
        total += b.len();
        if total > MAX_OBJECT {
            break;
        }
    }
}

fn too_large(limit: usize) -> Response {
    error_response(
        StatusCode::PAYLOAD_TOO_LARGE,
        &Error::invalid(format!("the body is over {limit} bytes"))
            .hint("a pack is at most the repository's pack size plus one chunk"),
    )
}

/// A pack, streamed to a staging file as it arrives (memory: a few frames), checked
/// there chunk by chunk against its name, then published; what fails leaves nothing.
/// The file is the writer's: it publishes only once told the body is whole, and
/// removes it otherwise, so a request dropped part way (the client gone) leaves no
/// staging file behind either.
async fn put_pack(repo: Arc<Repository>, key: String, body: axum::body::Body) -> Response {
    use futures::StreamExt;
    let Some(id) = key.rsplit('/').next().and_then(Hash::parse_hex) else {
        return failed(Error::invalid(format!("{key}: not a pack id")));
    };
    // `None`: the body is whole.
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Option<Bytes>>(16);
    let writer = tokio::task::spawn_blocking(move || -> sealvol_core::Result<bool> {
        use std::io::Write;
        let path = repo.object_store().staging_path()?;
        let staged = (|| {
            let mut f =
                std::fs::File::create(&path).map_err(|e| Error::io("cannot create", &path, e))?;
            loop {
                match rx.blocking_recv() {
                    Some(Some(b)) => f
                        .write_all(&b)
                        .map_err(|e| Error::io("cannot write", &path, e))?,
                    Some(None) => break,
                    None => {
                        return Err(Error::new(
                            ErrorKind::Unavailable,
                            format!("the upload of {key} ended before its body did"),
                        ));
                    }
                }
            }
            sealvol_core::objects::check_pack_file(&key, &id, &path)
        })();
        match staged {
            Ok(()) => repo.object_store().put_file_if_absent(&key, &path),
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                Err(e)
            }
        }
    });
    let mut stream = body.into_data_stream();
    let mut total = 0usize;
    let mut cut = None;
    while let Some(frame) = stream.next().await {
        match frame {
            Ok(b) if total + b.len() > MAX_OBJECT => {
                cut = Some(too_large(MAX_OBJECT));
                break;
            }
            Ok(b) => {
                total += b.len();
                if tx.send(Some(b)).await.is_err() {
                    break;
                }
            }
            Err(e) => {
                cut = Some(failed(Error::new(
                    ErrorKind::Unavailable,
                    format!("the upload was cut short: {e}"),
                )));
                break;
            }
        }
    }
    if cut.is_none() {
        let _ = tx.send(None).await;
    }
    drop(tx);
    let done = writer.await;
    if let Some(refusal) = cut {
        return refusal;
    }
    match done {
        Ok(Ok(true)) => StatusCode::CREATED.into_response(),
        Ok(Ok(false)) => StatusCode::OK.into_response(),
        Ok(Err(e)) => failed(e),
        Err(e) => failed(Error::new(ErrorKind::Io, e.to_string())),
    }
}

pub async fn delete_object(
    State(repo): State<Arc<Repository>>,
    Extension(grant): Extension<Arc<Grant>>,
    Path(key): Path<String>,
) -> Response {
    let k = key.clone();
    match with_store(&repo, &grant, &key, Op::Delete, move |s| s.delete(&k)).await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(r) => r,
    }
}

#[derive(serde::Deserialize)]
pub struct ListQuery {
    prefix: String,
    after: Option<String>,
}

/// One page of a listing, as it travels.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct ListPage {
    pub objects: Vec<(String, u64, Option<u64>)>,
    pub next: Option<String>,
}

pub async fn list(
    State(repo): State<Arc<Repository>>,
    Extension(grant): Extension<Arc<Grant>>,
    Query(q): Query<ListQuery>,
) -> Response {
    if !(q.prefix.is_empty() || q.prefix.ends_with('/')) {
        return failed(Error::invalid("a listing's prefix ends in /"));
    }
    // A namespaced kind is listed whole and filtered; anything else needs the right
    // to read what is under the prefix; the root (stray names), admin only.
    let prefix = q.prefix.clone();
    let top = prefix.split('/').next().unwrap_or_default();
    let allowed = match prefix.as_str() {
        "" => grant.admin,
        p if NAMESPACED.contains(&top) && p.len() == top.len() + 1 => true,
        p => {
            check_key(&format!("{p}x")).is_ok()
                && authorize(&grant, &format!("{p}x"), Op::Read).is_ok()
        }
    };
    if !allowed {
        return denied(format!(
            "key {} ({}) may not list {prefix}",
            grant.name,
            grant.scope()
        ));
    }
    let g = Arc::clone(&grant);
    let r = Arc::clone(&repo);
    let page = match tokio::task::spawn_blocking(move || {
        r.object_store().list_page(&prefix, q.after.as_deref())
    })
    .await
    {
        Ok(Ok(page)) => page,
        Ok(Err(e)) => return failed(e),
        Err(e) => return failed(Error::new(ErrorKind::Io, e.to_string())),
    };
    let objects = page
        .objects
        .into_iter()
        .filter(|o| authorize(&g, &o.key, Op::Read).is_ok())
        .map(|o| {
            let ms = o.modified.and_then(|m| {
                m.duration_since(std::time::UNIX_EPOCH)
                    .ok()
                    .map(|d| d.as_millis() as u64)
            });
            (o.key, o.size, ms)
        })
        .collect();
    json(&ListPage {
        objects,
        next: page.next,
    })
}

/// What the caller's key may do, for its console's title line.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct KeyInfo {
    pub name: String,
    pub scope: String,
    pub admin: bool,
    pub read_only: bool,
    pub namespaces: Vec<String>,
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

pub async fn now(State(repo): State<Arc<Repository>>) -> Response {
    match tokio::task::spawn_blocking(move || repo.object_store().now()).await {
        Ok(Ok(t)) => {
            let ms = t
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64);
            json(&serde_json::json!({ "now_ms": ms }))
        }
        Ok(Err(e)) => failed(e),
        Err(e) => failed(Error::new(ErrorKind::Io, e.to_string())),
    }
}

pub async fn barrier(
    State(repo): State<Arc<Repository>>,
    Extension(grant): Extension<Arc<Grant>>,
) -> Response {
    if grant.read_only {
        return denied(format!("key {} is read-only", grant.name));
    }
    match tokio::task::spawn_blocking(move || repo.object_store().sync()).await {
        Ok(Ok(())) => StatusCode::NO_CONTENT.into_response(),
        Ok(Err(e)) => failed(e),
        Err(e) => failed(Error::new(ErrorKind::Io, e.to_string())),
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

    #[test]
    fn what_each_kind_of_key_may_touch() {
        let ci = grant(false, false, &["weights"]);
        let ro = grant(false, true, &[]);
        let admin = grant(true, false, &[]);
        let m = "manifests/weights/m/abcd";
        assert!(authorize(&ci, m, Op::Create).is_ok());
        assert!(authorize(&ci, "manifests/other/m/abcd", Op::Read).is_err());
        assert!(authorize(&ci, "manifests/other/m/abcd", Op::Create).is_err());
        assert!(authorize(&ci, m, Op::Delete).is_err());
        assert!(authorize(&ci, "trash/weights/m/abcd", Op::Delete).is_ok());
        assert!(authorize(&ci, "trash/other/m/abcd", Op::Delete).is_err());
        assert!(authorize(&ci, "packs/ab/cd", Op::Create).is_ok());
        assert!(authorize(&ci, "packs/ab/cd", Op::Delete).is_err());
        assert!(authorize(&ci, "packs/ab/cd", Op::Replace).is_err());
        assert!(authorize(&ci, "sealvol.repo", Op::Replace).is_err());
        assert!(authorize(&ci, "gc/rounds/1", Op::Replace).is_ok());
        assert!(authorize(&ci, "gc/lease", Op::Replace).is_err());
        assert!(authorize(&ci, "quarantine/x/y", Op::Read).is_err());
        assert!(authorize(&ro, m, Op::Read).is_ok());
        assert!(authorize(&ro, "packs/ab/cd", Op::Create).is_err());
        assert!(authorize(&ro, "tags/weights/m/prod", Op::Replace).is_err());
        assert!(authorize(&admin, "packs/ab/cd", Op::Delete).is_ok());
        for bad in ["", "/abs", "a//b", "a/../b", "a/./b", "a b", "packs/\u{e9}"] {
            assert!(check_key(bad).is_err(), "{bad:?}");
        }
    }
}
