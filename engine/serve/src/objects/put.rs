//! Writes a key holder makes itself (`PUT /v1/objects/{key}`): the two kinds of object
//! it may write (packs, read profiles), each checked before it is stored; a pack's
//! bytes against its name and index as they stream in.

use std::sync::Arc;

use axum::Extension;
use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sealvol_core::digest::Hash;
use sealvol_core::error::{Error, ErrorKind};
use sealvol_core::store::ETag;

use super::access::{MAX_OBJECT, MAX_PROFILE, Object, Op, authorize, on_store, parse_key};
use crate::keys::{Grant, Keys};
use crate::ops::Steward;
use crate::reply::Reply;
use crate::reply::{BODY_IDLE, denied, failed, idle, read_body, too_large};

#[derive(serde::Deserialize)]
pub struct PutQuery {
    /// `absent` (create unless it exists), `match` (compare-and-swap against `etag`,
    /// or against nothing without one) or `put` (overwrite).
    mode: String,
    etag: Option<String>,
}

/// What an object write needs besides the repository: the key list, to end an
/// upload whose key is revoked meanwhile.
#[derive(Clone)]
pub struct Writes {
    pub steward: Arc<Steward>,
    pub keys: Arc<Keys>,
}

pub async fn put_object(
    State(w): State<Writes>,
    Extension(grant): Extension<Arc<Grant>>,
    Path(key): Path<String>,
    Query(q): Query<PutQuery>,
    headers: HeaderMap,
    body: Body,
) -> Reply {
    let s = &w.steward;
    // A body announced larger than any object is refused before a byte of it is read.
    let announced = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if announced.is_some_and(|n| n > MAX_OBJECT as u64) {
        return Err(too_large(MAX_OBJECT));
    }
    let op = match (q.mode.as_str(), &q.etag) {
        ("absent", _) | ("match", None) => Op::Create,
        ("match", Some(_)) | ("put", _) => Op::Replace,
        (m, _) => {
            let r = failed(Error::invalid(format!(
                "mode={m:.40}: give absent, match or put"
            )));
            crate::reply::drain(body, MAX_OBJECT).await;
            return Err(r);
        }
    };
    // Checked before the body is stored; a refusal still reads it (discarding it),
    // because a client still sending its body would not see the answer otherwise.
    let obj = match parse_key(&key) {
        Err(why) => {
            crate::reply::drain(body, MAX_OBJECT).await;
            return Err(failed(Error::invalid(why)));
        }
        Ok(obj) => obj,
    };
    if let Err(why) = authorize(&grant, &key, &obj, op) {
        crate::reply::drain(body, MAX_OBJECT).await;
        return Err(denied(why));
    }
    if let (Object::Pack(id), "absent") = (&obj, q.mode.as_str()) {
        let (s2, g) = (Arc::clone(s), Arc::clone(&grant));
        let bytes = announced.unwrap_or(0);
        let admitted = tokio::task::spawn_blocking(move || s2.quotas.admit_pack(&g, bytes)).await;
        if let Ok(Err(e)) = admitted {
            crate::reply::drain(body, MAX_OBJECT).await;
            return Err(failed(e));
        }
        return Ok(put_pack(w.clone(), Arc::clone(&grant), *id, key, body).await);
    }
    let limit = if grant.admin { MAX_OBJECT } else { MAX_PROFILE };
    let body = read_body(body, limit).await?;
    let k = key.clone();
    let done = on_store(s, move |st| {
        let body = body.bytes;
        check_content(&k, &obj, &body)?;
        match q.mode.as_str() {
            "absent" => st.put_if_absent(&k, &body),
            "match" => st
                .put_if_match(&k, &body, q.etag.map(ETag).as_ref())
                .map(|()| true),
            _ => st.put(&k, &body).map(|()| true),
        }
    })
    .await;
    Ok(match done {
        Ok(true) => StatusCode::CREATED.into_response(),
        Ok(false) => StatusCode::OK.into_response(),
        Err(r) => r,
    })
}

/// Checks what the admin or a key writes under a name its bytes must hash to.
fn check_content(key: &str, obj: &Object, bytes: &[u8]) -> sealvol_core::Result<()> {
    let parts: Vec<&str> = key.split('/').collect();
    match (obj, parts.as_slice()) {
        (Object::Pack(id), _) => sealvol_core::objects::check_pack(key, id, bytes).map(|_| ()),
        (Object::Index(id), _) => {
            let entries = sealvol_core::objects::decode_index(key, bytes)?;
            if sealvol_core::objects::pack_id(&entries) != *id {
                return Err(Error::corrupt(format!(
                    "{key}: its entries do not hash to its name"
                )));
            }
            Ok(())
        }
        (Object::File(h), _) => {
            sealvol_core::objects::FileObject::decode(key, bytes, h).map(|_| ())
        }
        (
            Object::Namespaced {
                kind: "manifests", ..
            },
            ["manifests", ns, vol, digest],
        ) => {
            let m: sealvol_core::manifest::Manifest = serde_json::from_slice(bytes)
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
        (
            Object::Namespaced {
                kind: "profiles", ..
            },
            ["profiles", _, _, digest, name],
        ) => {
            if Hash::of(bytes).hex() != *name {
                return Err(Error::invalid(format!(
                    "{key}: its bytes do not hash to its name"
                )));
            }
            let p: sealvol_core::profile::Profile = serde_json::from_slice(bytes)
                .map_err(|e| Error::invalid(format!("{key} is not a read profile: {e}")))?;
            if p.digest != format!("b3:{digest}") {
                return Err(Error::invalid(format!(
                    "{key}: a profile of another version"
                )));
            }
            Ok(())
        }
        (
            Object::Namespaced {
                kind: "profiles", ..
            },
            _,
        ) => Err(Error::invalid(format!(
            "{key}: profiles/NS/VOL/DIGEST/HASH"
        ))),
        // A signature is whatever a key holder signed: named by its bytes here, and
        // verified by every reader against keys of its own (sealvol-sign).
        (
            Object::Namespaced {
                kind: "signatures", ..
            },
            ["signatures", _, _, _, name],
        ) => match Hash::of(bytes).hex() == *name {
            true => Ok(()),
            false => Err(Error::invalid(format!(
                "{key}: its bytes do not hash to its name"
            ))),
        },
        _ => Ok(()),
    }
}

/// A pack, streamed to a staging file as it arrives (memory: a few frames), checked
/// there chunk by chunk against its name, then published and indexed (by the server:
/// its index is its own); what fails leaves nothing. The file is the writer's: it
/// publishes only once told the body is whole, and removes it otherwise, so a request
/// dropped part way (the client gone), one whose body stops coming, and one whose key
/// is revoked meanwhile all leave no staging file behind.
async fn put_pack(w: Writes, grant: Arc<Grant>, id: Hash, key: String, body: Body) -> Response {
    use futures::StreamExt;
    let s = Arc::clone(&w.steward);
    // `None`: the body is whole.
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Option<Bytes>>(16);
    let uploader = grant.name.clone();
    let writer = tokio::task::spawn_blocking(move || -> sealvol_core::Result<bool> {
        use std::io::Write;
        let repo = &s.repo;
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
            Ok(entries) => {
                let created = repo.publish_pack(&id, &path, &entries)?;
                s.known.add_pack(&id, &entries);
                // Its bytes came from this key (checked above, whether or not the
                // pack was there before): the key may name its chunks.
                s.naming.possession.uploaded(&uploader, &id);
                Ok(created)
            }
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                Err(e)
            }
        }
    });
    let mut stream = body.into_data_stream();
    let mut total = 0usize;
    let mut cut = None;
    let mut checked = std::time::Instant::now();
    loop {
        let frame = match tokio::time::timeout(BODY_IDLE, stream.next()).await {
            Err(_) => {
                cut = Some(idle());
                break;
            }
            Ok(None) => break,
            Ok(Some(frame)) => frame,
        };
        // A key revoked while it uploads ends its upload.
        if checked.elapsed() > std::time::Duration::from_millis(200) {
            checked = std::time::Instant::now();
            if !w.keys.is_live(&grant.name) {
                cut = Some(denied(format!(
                    "key {} was revoked during the upload",
                    grant.name
                )));
                break;
            }
        }
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
    if cut.is_none() && !w.keys.is_live(&grant.name) {
        cut = Some(denied(format!(
            "key {} was revoked during the upload",
            grant.name
        )));
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
        Err(_) => failed(Error::new(ErrorKind::Io, "the upload failed on the server")),
    }
}
