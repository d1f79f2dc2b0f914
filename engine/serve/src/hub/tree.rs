//! `GET /hf/api/{models,datasets}/NS/VOL/tree/REV[/PATH]` (`list_repo_tree`,
//! `HfFileSystem`, `snapshot_download`) and `POST …/paths-info/REV`: a version's files
//! and folders as the Hub lists them, `oid` the git blob id (a large file's LFS
//! pointer's, with `lfs: {oid: SHA-256, size, pointerSize}`), a folder's `oid` its git
//! tree id. A listing is paged as the Hub pages it (1,000 entries, 50 with `expand`),
//! the next page named by an absolute URL in `Link: <…>; rel="next"`. Its cursor is the
//! last path listed (base64url): a page starts right after it in the version's sorted
//! ids, so a version of 100,000 files is listed in bounded memory and time per page,
//! whichever page is asked (an index would make the last page walk all before it). A version's symlinks are not listed:
//! the Hub has none.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::http::{HeaderMap, HeaderValue, Uri, header};
use axum::response::{IntoResponse, Response};

use super::asked::At;
use super::ids;
use super::kept::{FileIds, VersionIds};
use super::lookup::{blocking, flag};
use super::missing::Missing;
use super::shared::{Hub, Version};
use crate::keys::Grant;

/// Entries per page, as the Hub pages them.
pub const PAGE: usize = 1000;
pub const PAGE_EXPANDED: usize = 50;

/// The most paths one `paths-info` request may name, and the largest body it may send.
pub const MAX_PATHS: usize = 1000;
pub const MAX_FORM: usize = 1 << 20;

pub async fn tree(
    hub: Arc<Hub>,
    grant: Arc<Grant>,
    at: At,
    path: String,
    query: &str,
    uri: &Uri,
    headers: &HeaderMap,
) -> Response {
    let recursive = flag(query, "recursive");
    let expand = flag(query, "expand");
    let after: Option<String> =
        match form_urlencoded::parse(query.as_bytes()).find(|(k, _)| k == "cursor") {
            None => None,
            Some((_, v)) => match decode_cursor(&v) {
                Some(p) => Some(p),
                None => {
                    return Missing::Bad(format!(
                    "cursor {v:.40} is not one this server gave: follow the Link header's next page"
                ))
                .response();
                }
            },
        };
    let page = if expand { PAGE_EXPANDED } else { PAGE };
    let base = absolute(&hub, uri, headers);
    let answered = blocking(move || {
        let v = hub.version_at(&grant, &at)?;
        let ids = hub.ids(&v)?;
        let rev = &at.rev;
        if !path.is_empty() && !ids.folders.contains_key(&path) {
            return Err(Missing::Entry(match ids.files.contains_key(&path) {
                true => format!("{path:.200} is a file, not a folder: list its folder"),
                false => format!("{}@{rev:.80} has no folder {path:.200}", v.volume),
            }));
        }
        let mut out = Vec::with_capacity(page.min(1024));
        let mut last = None;
        let mut more = false;
        for e in listing_after(&ids, &path, recursive, after.as_deref()) {
            if out.len() == page {
                more = true;
                break;
            }
            last = Some(e.path().to_string());
            out.push(entry_json(&v, e, expand));
        }
        Ok((out, last.filter(|_| more)))
    })
    .await;
    match answered {
        Ok((entries, next)) => {
            let mut h = HeaderMap::new();
            h.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            if let Some(next) = next {
                let q = form_urlencoded::Serializer::new(String::new())
                    .append_pair("recursive", if recursive { "true" } else { "false" })
                    .append_pair("expand", if expand { "true" } else { "false" })
                    .append_pair("cursor", &encode_cursor(&next))
                    .finish();
                if let Ok(v) = HeaderValue::from_str(&format!("<{base}?{q}>; rel=\"next\"")) {
                    h.insert(header::LINK, v);
                }
            }
            (h, serde_json::Value::Array(entries).to_string()).into_response()
        }
        Err(m) => m.response(),
    }
}

/// `POST …/paths-info/REV` with a form body of `paths=…` (repeated) and `expand`: the
/// entries of those paths that exist, in the order asked.
pub async fn paths_info(hub: Arc<Hub>, grant: Arc<Grant>, at: At, body: Vec<u8>) -> Response {
    let mut paths = Vec::new();
    let mut expand = false;
    for (k, v) in form_urlencoded::parse(&body) {
        match &*k {
            "paths" => paths.push(v.into_owned()),
            "expand" => expand = matches!(&*v, "true" | "True" | "1"),
            _ => {}
        }
    }
    if paths.len() > MAX_PATHS {
        return Missing::Bad(format!(
            "{} paths asked for at once; at most {MAX_PATHS}",
            paths.len()
        ))
        .response();
    }
    let answered = blocking(move || {
        let v = hub.version_at(&grant, &at)?;
        let ids = hub.ids(&v)?;
        let mut out = Vec::new();
        for p in &paths {
            let p = super::asked::repo_path(p.trim_matches('/'), false)?;
            if let Some((path, f)) = ids.files.get_key_value(&p) {
                out.push(entry_json(&v, Listed::File(path, f), expand));
            } else if let Some((path, t)) = ids.folders.get_key_value(&p) {
                out.push(entry_json(&v, Listed::Folder(path, t), expand));
            }
        }
        Ok(out)
    })
    .await;
    match answered {
        Ok(entries) => (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            serde_json::Value::Array(entries).to_string(),
        )
            .into_response(),
        Err(m) => m.response(),
    }
}

/// One entry of a listing.
pub enum Listed<'a> {
    File(&'a String, &'a FileIds),
    Folder(&'a String, &'a String),
}

impl Listed<'_> {
    fn path(&self) -> &str {
        match self {
            Listed::File(p, _) | Listed::Folder(p, _) => p,
        }
    }
}

/// A next page's cursor: the last path of this one.
fn encode_cursor(last: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(last)
}

/// The path a cursor names; `None` if it is not one `encode_cursor` makes.
fn decode_cursor(cursor: &str) -> Option<String> {
    use base64::Engine;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(cursor)
        .ok()?;
    String::from_utf8(bytes).ok()
}

/// The entries under `folder` (`""`: the root), its children or (`recursive`) all its
/// descendants, folders and files merged in path order: the same order on every page;
/// with `after`, those whose path sorts after it (a page's cursor: any string will do).
pub fn listing_after<'a>(
    ids: &'a VersionIds,
    folder: &str,
    recursive: bool,
    after: Option<&str>,
) -> impl Iterator<Item = Listed<'a>> + 'a {
    let prefix = match folder {
        "" => String::new(),
        f => format!("{f}/"),
    };
    let under = move |p: &str| {
        p.strip_prefix(prefix.as_str())
            .is_some_and(|rest| !rest.is_empty() && (recursive || !rest.contains('/')))
    };
    let files = from(&ids.files, folder, after)
        .filter({
            let under = under.clone();
            move |(p, _)| under(p)
        })
        .map(|(p, f)| Listed::File(p, f));
    let folders = from(&ids.folders, folder, after)
        .filter(move |(p, _)| under(p))
        .map(|(p, t)| Listed::Folder(p, t));
    merge(files, folders)
}

/// The keys of `m` that start with `folder`, in order (they are together), from the
/// first after `after` when it sorts past `folder`.
fn from<'a, T>(
    m: &'a BTreeMap<String, T>,
    folder: &str,
    after: Option<&str>,
) -> impl Iterator<Item = (&'a String, &'a T)> + 'a {
    use std::ops::Bound;
    let f = folder.to_string();
    let start = match after {
        Some(a) if a >= folder => Bound::Excluded(a),
        _ => Bound::Included(folder),
    };
    m.range::<str, _>((start, Bound::Unbounded))
        .take_while(move |(p, _)| p.starts_with(f.as_str()))
}

/// Two listings in path order, merged.
fn merge<'a>(
    a: impl Iterator<Item = Listed<'a>> + 'a,
    b: impl Iterator<Item = Listed<'a>> + 'a,
) -> impl Iterator<Item = Listed<'a>> + 'a {
    let (mut a, mut b) = (a.peekable(), b.peekable());
    std::iter::from_fn(move || match (a.peek(), b.peek()) {
        (Some(x), Some(y)) if y.path() < x.path() => b.next(),
        (Some(_), _) => a.next(),
        (None, _) => b.next(),
    })
}

fn entry_json(v: &Version, e: Listed<'_>, expand: bool) -> serde_json::Value {
    let mut j = match e {
        Listed::File(path, f) => {
            let mut j = serde_json::json!({
                "type": "file",
                "oid": f.blob,
                "size": f.size,
                "path": path,
            });
            if let Some(sha) = &f.sha256 {
                j["lfs"] = serde_json::json!({
                    "oid": sha,
                    "size": f.size,
                    "pointerSize": ids::lfs_pointer(sha, f.size).len(),
                });
            }
            j
        }
        Listed::Folder(path, tree) => serde_json::json!({
            "type": "directory",
            "oid": tree,
            "size": 0,
            "path": path,
        }),
    };
    if expand {
        // One commit made every version: the one that sealed it.
        j["lastCommit"] = serde_json::json!({
            "id": v.commit,
            "title": format!("sealed {}@{}", v.volume, v.digest),
            "date": v.manifest.created,
        });
    }
    j
}

/// This request's URL without its query, absolute, for a `Link` header (the Hub's
/// clients follow it as given).
pub(super) fn absolute(hub: &Hub, uri: &Uri, headers: &HeaderMap) -> String {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| h.bytes().all(|b| b.is_ascii_graphic()) && h.len() <= 255)
        .unwrap_or("localhost");
    let proto = headers
        .get("x-forwarded-proto")
        .and_then(|h| h.to_str().ok())
        .filter(|p| matches!(*p, "http" | "https"))
        .unwrap_or(if hub.https { "https" } else { "http" });
    format!("{proto}://{host}{}", uri.path())
}
