//! A mirrored repo on its way in (`mirror::Routed::Coming`): its metadata is the
//! upstream's (info as the upstream answered it, with its commit id, so clients'
//! caches line up; a listing asked upstream, its next page named at this server), and a
//! file's bytes come from the mirror's job as it fetches them (the spool: every client
//! of a file shares that one read; a range waits for its part), or from the sealed
//! version once the job is done. A file's last bytes are held back until its hash held
//! upstream's (`spool.rs`); a file that fails its hash, or that does not come within
//! the server's patience, cuts every client's download short (the client's resume then
//! asks again), never ends it with unproven bytes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderValue, Uri, header};
use axum::response::{IntoResponse, Response};
use sealvol_node::jobs::JobState;

use super::asked::{Asked, At, Mirrored};
use super::file::{WINDOW, asked_range, file_headers, ranged};
use super::lookup::blocking;
use super::mirror::{Coming, Mirror, sealed_tag, spool_key};
use super::missing::Missing;
use super::shared::Hub;
use super::spool::{Incoming, Unread};
use super::upstream::{is_commit, kind, path_parts};
use crate::keys::Grant;

/// How often a client waiting for its file to start looks again.
const LOOK_EVERY: Duration = Duration::from_millis(50);

#[allow(clippy::too_many_arguments)]
pub async fn answer(
    hub: Arc<Hub>,
    mirror: Arc<Mirror>,
    grant: Arc<Grant>,
    coming: Coming,
    asked: Asked,
    query: String,
    uri: &Uri,
    headers: &HeaderMap,
    body: Option<Vec<u8>>,
    head: bool,
) -> Response {
    let at = asked.at().clone();
    match asked {
        Asked::Info(_) => {
            let m = Arc::clone(&mirror);
            match blocking(move || m.info(&coming)).await {
                Ok(json) => json_response(json.to_string(), None),
                Err(m) => m.response(),
            }
        }
        Asked::Tree(_, path) => {
            let base = super::tree::absolute(&hub, uri, headers);
            let m = Arc::clone(&mirror);
            let q = query.clone();
            let asked = blocking(move || {
                let shown = format!("{}@{} {path:.200}", coming.repo, coming.commit);
                let p = format!(
                    "/api/{}/{}/tree/{}{}{}{}",
                    kind(coming.datasets),
                    coming.repo,
                    coming.commit,
                    if path.is_empty() { "" } else { "/" },
                    path_parts(&path),
                    listing_query(&q),
                );
                m.upstream.ask(&p, None, &shown)
            })
            .await;
            match asked {
                Ok(a) => {
                    let link = a
                        .next_query()
                        .map(|q| format!("<{base}?{q}>; rel=\"next\""));
                    json_response(a.body, link)
                }
                Err(m) => m.response(),
            }
        }
        Asked::PathsInfo(_) => {
            let m = Arc::clone(&mirror);
            let form = body.unwrap_or_default();
            let asked = blocking(move || {
                let shown = format!("{}@{} paths-info", coming.repo, coming.commit);
                let p = format!(
                    "/api/{}/{}/paths-info/{}",
                    kind(coming.datasets),
                    coming.repo,
                    coming.commit
                );
                m.upstream.ask(&p, Some(form), &shown)
            })
            .await;
            match asked {
                Ok(a) => json_response(a.body, None),
                Err(m) => m.response(),
            }
        }
        Asked::File(_, path) => file(hub, mirror, grant, coming, at, path, head, headers).await,
    }
}

/// The listing flags a client sent, passed on (nothing else of its query is).
fn listing_query(query: &str) -> String {
    let mut out = form_urlencoded::Serializer::new(String::new());
    let mut any = false;
    for (k, v) in form_urlencoded::parse(query.as_bytes()) {
        if matches!(&*k, "recursive" | "expand" | "cursor" | "limit") && v.len() <= 200 {
            out.append_pair(&k, &v);
            any = true;
        }
    }
    match any {
        true => format!("?{}", out.finish()),
        false => String::new(),
    }
}

fn json_response(body: impl Into<Body>, link: Option<String>) -> Response {
    let mut h = HeaderMap::new();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if let Some(v) = link.and_then(|l| HeaderValue::from_str(&l).ok()) {
        h.insert(header::LINK, v);
    }
    (h, body.into()).into_response()
}

/// A file as the upstream's info names it.
struct Listed {
    size: u64,
    /// Its git blob id, and its SHA-256 when it is an LFS file.
    blob: String,
    sha256: Option<String>,
}

fn listed(info: &serde_json::Value, path: &str, shown: &str) -> Result<Listed, Missing> {
    let sib = info["siblings"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["rfilename"].as_str() == Some(path)))
        .ok_or_else(|| Missing::Entry(format!("{shown} has no file {path:.200}")))?;
    let hex = |v: &serde_json::Value, n: usize| {
        v.as_str()
            .filter(|s| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit()))
            .map(str::to_ascii_lowercase)
    };
    let size = sib["size"].as_u64();
    let blob = hex(&sib["blobId"], 40);
    let (Some(size), Some(blob)) = (size, blob) else {
        return Err(Missing::Failed(format!(
            "the upstream gave no size and blob id for {shown} {path:.200}: it is not answering as the Hub does"
        )));
    };
    let sha256 = match &sib["lfs"] {
        serde_json::Value::Null => None,
        lfs => Some(hex(&lfs["sha256"], 64).ok_or_else(|| {
            Missing::Failed(format!(
                "the upstream's LFS entry for {shown} {path:.200} has no SHA-256"
            ))
        })?),
    };
    Ok(Listed { size, blob, sha256 })
}

#[allow(clippy::too_many_arguments)]
async fn file(
    hub: Arc<Hub>,
    mirror: Arc<Mirror>,
    grant: Arc<Grant>,
    coming: Coming,
    at: At,
    path: String,
    head: bool,
    headers: &HeaderMap,
) -> Response {
    let range = match asked_range(headers) {
        Ok(r) => r,
        Err(m) => return m.response(),
    };
    let shown = format!("{}@{}", coming.repo, coming.commit);
    let (m, c, p, s) = (
        Arc::clone(&mirror),
        coming.clone(),
        path.clone(),
        shown.clone(),
    );
    let f = match blocking(move || listed(m.info(&c)?.as_ref(), &p, &s)).await {
        Ok(f) => f,
        Err(m) => return m.response(),
    };
    let etag = f.sha256.as_deref().unwrap_or(&f.blob);
    let pinned = is_commit(&at.rev);
    let mut h = file_headers(&coming.commit, etag, f.sha256.as_deref(), f.size, pinned);
    let (status, start, len) = match ranged(&mut h, range.as_deref(), f.size) {
        Ok(r) => r,
        Err(m) => return m.response(),
    };
    if head || len == 0 {
        return (status, h, Body::empty()).into_response();
    }
    match wait_for(&hub, &mirror, &coming, &path).await {
        Ok(Some(incoming)) if incoming.size != f.size => Missing::Failed(format!(
            "the upstream sends {shown} {path:.200} as {} bytes, and listed it as {}",
            incoming.size, f.size
        ))
        .response(),
        Ok(Some(incoming)) => (
            status,
            h,
            stream(&hub, incoming, start, start + len, mirror.patience),
        )
            .into_response(),
        Ok(None) => {
            // Sealed meanwhile: the version answers, as it will from now on.
            let sealed = At {
                ns: coming.volume.namespace.to_string(),
                vol: coming.volume.name.to_string(),
                rev: sealed_tag(&coming.commit),
                datasets: coming.datasets,
                mirrored: Some(Mirrored {
                    repo: coming.repo.clone(),
                    commit: coming.commit.clone(),
                    pinned: is_commit(&at.rev),
                }),
            };
            super::file::file(hub, grant, sealed, path, false, headers).await
        }
        Err(m) => m.response(),
    }
}

/// The file on its way in, or `None` once its version is sealed: waits while the job
/// makes progress (its bytes done move), at most the mirror's patience without any.
async fn wait_for(
    hub: &Arc<Hub>,
    mirror: &Arc<Mirror>,
    coming: &Coming,
    path: &str,
) -> Result<Option<Arc<Incoming>>, Missing> {
    let key = spool_key(&coming.repo, &coming.commit, path);
    let mut done = None;
    let mut since = Instant::now();
    loop {
        if let Some(f) = mirror.spool.get(&key) {
            return Ok(Some(f));
        }
        let (h, m, c) = (Arc::clone(hub), Arc::clone(mirror), coming.clone());
        let (sealed, job) = blocking(move || {
            let sealed = m.sealed(&h.chunks, &c.volume, &c.commit)?;
            Ok((sealed, m.job(c.job)?))
        })
        .await?;
        if sealed {
            return Ok(None);
        }
        match job.state {
            JobState::Failed | JobState::Cancelled => {
                return Err(Missing::Failed(format!(
                    "the mirror's sync of {}@{} (job {}) failed: {:.500}",
                    coming.repo,
                    coming.commit,
                    job.id,
                    job.reason.unwrap_or_default()
                )));
            }
            JobState::Ready => {
                return Err(Missing::Failed(format!(
                    "the mirror's job {} ended, and {}@{} is not sealed: ask again",
                    job.id, coming.repo, coming.commit
                )));
            }
            _ => {}
        }
        // A job queued behind others, or fetching other files, is waited for while
        // it moves; one that does not move for the server's patience is not.
        let now_done = (job.state, job.progress.bytes_done, job.progress.files_done);
        if done != Some(now_done) {
            done = Some(now_done);
            since = Instant::now();
        } else if job.state != JobState::Queued && since.elapsed() >= mirror.patience {
            return Err(Missing::Failed(format!(
                "the mirror's sync of {}@{} made no progress in {}s: the upstream is not answering",
                coming.repo,
                coming.commit,
                mirror.patience.as_secs()
            )));
        }
        tokio::time::sleep(LOOK_EVERY).await;
    }
}

/// Bytes `[start, end)` of a file on its way in, a window at a time as they come;
/// bytes that do not come end the body early (the client's length check fails).
fn stream(hub: &Hub, f: Arc<Incoming>, start: u64, end: u64, patience: Duration) -> Body {
    let (tx, rx) = tokio::sync::mpsc::channel::<std::io::Result<Bytes>>(2);
    let counters = Arc::clone(&hub.chunks);
    tokio::task::spawn_blocking(move || {
        let mut pos = start;
        while pos < end {
            let got = f.read_at(pos, (end - pos).min(WINDOW), patience);
            let piece = match got {
                Ok(b) => {
                    pos += b.len() as u64;
                    sealvol_core::read::add(&counters.counters.hub_spool_bytes, b.len() as u64);
                    Ok(Bytes::from(b))
                }
                Err(why) => {
                    let why = match why {
                        Unread::Failed(w) => w,
                        Unread::Stalled(p) => {
                            format!("no bytes came from the upstream in {}s", p.as_secs())
                        }
                        Unread::Outside { size } => format!("past the file's {size} bytes"),
                    };
                    tracing::warn!("a mirrored download stopped at byte {pos}: {why}");
                    Err(std::io::Error::other(why))
                }
            };
            let failed = piece.is_err();
            if tx.blocking_send(piece).is_err() || failed {
                return;
            }
        }
    });
    Body::from_stream(tokio_stream::wrappers::ReceiverStream::new(rx))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listing_passes_on_its_flags_and_nothing_else() {
        assert_eq!(listing_query(""), "");
        assert_eq!(
            listing_query("recursive=true&expand=false&evil=..%2F&cursor=5"),
            "?recursive=true&expand=false&cursor=5"
        );
        assert_eq!(super::super::upstream::part("refs/pr/1"), "refs%2Fpr%2F1");
    }

    #[test]
    fn a_file_is_what_the_upstream_listed_with_its_ids_or_an_error() {
        let info = serde_json::json!({"siblings": [
            {"rfilename": "a.json", "size": 3, "blobId": "ab".repeat(20)},
            {"rfilename": "w.bin", "size": 9, "blobId": "cd".repeat(20),
             "lfs": {"sha256": "ef".repeat(32), "size": 9}},
            {"rfilename": "nosize", "blobId": "cd".repeat(20)},
            {"rfilename": "badlfs", "size": 1, "blobId": "cd".repeat(20), "lfs": {"sha256": "x"}},
        ]});
        let a = listed(&info, "a.json", "r").unwrap();
        assert_eq!((a.size, a.sha256), (3, None));
        let w = listed(&info, "w.bin", "r").unwrap();
        assert_eq!(w.sha256.as_deref(), Some("ef".repeat(32).as_str()));
        assert!(matches!(listed(&info, "gone", "r"), Err(Missing::Entry(_))));
        assert!(matches!(
            listed(&info, "nosize", "r"),
            Err(Missing::Failed(_))
        ));
        assert!(matches!(
            listed(&info, "badlfs", "r"),
            Err(Missing::Failed(_))
        ));
    }
}
