//! `serve` as a pull-only OCI registry (`/v2/`, the distribution API's read side): a
//! sealed version is the CNCF ModelPack artifact `sealvol_oci` builds of it, the same
//! bytes every time, so `skopeo copy docker://HOST/NS/VOL:TAG …`, a container
//! runtime's image volume or a pull secret's credentials read versions as images.
//!
//! - `GET/HEAD /v2/`: the API's version check;
//! - `GET/HEAD /v2/NS/VOL/manifests/{TAG | sha256:…}`: a tag of the volume, or the
//!   digest of a manifest served before (or of a version whose SHA-256s are kept);
//! - `GET/HEAD /v2/NS/VOL/blobs/sha256:…`, one `Range`: the config, the manifest, or a
//!   file of a version of that volume, every byte proven as it is sent (`file_body`);
//! - `GET /v2/NS/VOL/tags/list`.
//!
//! Anything else under `/v2/` (a push) is answered 405 with a body that says so. A
//! file's SHA-256 is computed once, from proven bytes, and kept beside its version
//! (`sealvol_sign::version`), never taken from a client. Keys are as everywhere (a
//! bearer token, or the password of basic credentials); a volume the key may not see
//! is one that does not exist.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Extension;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use sealvol_core::refs::{Digest, Name, VolumeName};
use sealvol_oci::{Artifact, media};

use crate::chunks::ChunkService;
use crate::keys::Grant;

/// The routes: the version check, and everything under it (read by `answer`).
pub const ROUTES: [(&str, &[&str]); 2] = [
    ("/v2/", &["GET", "HEAD"]),
    ("/v2/{*rest}", &["GET", "HEAD"]),
];

/// How many versions' artifacts are kept in memory, and manifest digests remembered.
const ARTIFACTS: usize = 32;
const KNOWN_MANIFESTS: usize = 100_000;

/// A version: its volume and digest.
type Version = (VolumeName, Digest);

/// The registry's state: the artifacts built lately.
pub struct Registry {
    pub chunks: Arc<ChunkService>,
    artifacts: Mutex<Vec<(Version, Arc<Artifact>)>>,
    /// Manifest digest → the version it is of.
    manifests: Mutex<HashMap<String, (VolumeName, Digest)>>,
}

/// An answer the distribution API's clients read: a status and `{"errors": [{code,
/// message}]}`.
#[derive(Debug)]
pub struct Refusal(StatusCode, &'static str, String);

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let body = serde_json::json!({"errors": [{"code": self.1, "message": self.2}]});
        let mut r = (self.0, body.to_string()).into_response();
        let h = r.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        h.insert(API_VERSION, HeaderValue::from_static("registry/2.0"));
        r
    }
}

pub const API_VERSION: &str = "docker-distribution-api-version";

impl Refusal {
    /// A request without a key the server takes.
    pub fn unauthorized(why: String) -> Response {
        Refusal(StatusCode::UNAUTHORIZED, "UNAUTHORIZED", why).into_response()
    }
}

fn unknown_name(name: &str) -> Refusal {
    Refusal(
        StatusCode::NOT_FOUND,
        "NAME_UNKNOWN",
        format!(
            "repository {name:.200} is not known: a repository is NS/VOL, a volume this key may read"
        ),
    )
}

fn failed(e: impl std::fmt::Display) -> Refusal {
    Refusal(
        StatusCode::SERVICE_UNAVAILABLE,
        "UNAVAILABLE",
        e.to_string(),
    )
}

impl Registry {
    pub fn new(chunks: Arc<ChunkService>) -> Registry {
        Registry {
            chunks,
            artifacts: Mutex::default(),
            manifests: Mutex::default(),
        }
    }

    /// The artifact of `volume@digest`, built once (its SHA-256s computed once and
    /// kept) and remembered. Blocking.
    fn artifact(&self, volume: &VolumeName, digest: &Digest) -> Result<Arc<Artifact>, Refusal> {
        let key = (volume.clone(), *digest);
        if let Some((_, a)) = sealvol_core::lock(&self.artifacts)
            .iter()
            .find(|(k, _)| *k == key)
        {
            return Ok(Arc::clone(a));
        }
        let repo = self.chunks.repository();
        let m = repo.manifest(volume, digest).map_err(failed)?;
        let art = Arc::new(
            sealvol_oci::export::artifact_of(repo, volume, digest, &m)
                .map_err(|e| Refusal(StatusCode::NOT_FOUND, "MANIFEST_UNKNOWN", e.to_string()))?,
        );
        self.remember(key, &art);
        Ok(art)
    }

    fn remember(&self, key: (VolumeName, Digest), art: &Arc<Artifact>) {
        let mut arts = sealvol_core::lock(&self.artifacts);
        arts.retain(|(k, _)| *k != key);
        if arts.len() >= ARTIFACTS {
            arts.remove(0);
        }
        arts.push((key.clone(), Arc::clone(art)));
        drop(arts);
        let mut known = sealvol_core::lock(&self.manifests);
        if known.len() >= KNOWN_MANIFESTS {
            known.clear();
        }
        known.insert(art.manifest_digest.clone(), key);
    }

    /// The artifacts of `volume`'s versions that can be built without reading bytes
    /// (their SHA-256s are kept), and those in memory. Blocking.
    fn known_artifacts(
        &self,
        volume: &VolumeName,
    ) -> Result<Vec<(Digest, Arc<Artifact>)>, Refusal> {
        let mut out: Vec<(Digest, Arc<Artifact>)> = sealvol_core::lock(&self.artifacts)
            .iter()
            .filter(|((v, _), _)| v == volume)
            .map(|((_, d), a)| (*d, Arc::clone(a)))
            .collect();
        if !out.is_empty() {
            return Ok(out);
        }
        let repo = self.chunks.repository();
        for v in repo.versions(volume).map_err(failed)? {
            let Ok(digest) = Digest::parse(&v.digest) else {
                continue;
            };
            if repo.sha256s(volume, &digest).ok().flatten().is_some() {
                out.push((digest, self.artifact(volume, &digest)?));
            }
        }
        Ok(out)
    }
}

/// What a path under `/v2/` asks.
#[derive(Debug, PartialEq, Eq)]
enum Asked {
    Manifest(String),
    Blob(String),
    Tags,
}

/// `NS/VOL/{manifests/REF | blobs/DIGEST | tags/list}`.
fn parse(rest: &str) -> Result<(String, Asked), Refusal> {
    let segs: Vec<&str> = rest.split('/').collect();
    let asked = match segs.as_slice() {
        [ns, vol, "manifests", r] => ((*ns, *vol), Asked::Manifest(r.to_string())),
        [ns, vol, "blobs", d] => ((*ns, *vol), Asked::Blob(d.to_string())),
        [ns, vol, "tags", "list"] => ((*ns, *vol), Asked::Tags),
        _ => {
            return Err(Refusal(
                StatusCode::NOT_FOUND,
                "NAME_UNKNOWN",
                format!(
                    "{rest:.200} is not a route of this registry: /v2/NS/VOL/{{manifests/REF, blobs/DIGEST, tags/list}}"
                ),
            ));
        }
    };
    let ((ns, vol), a) = asked;
    Ok((format!("{ns}/{vol}"), a))
}

/// A `sha256:` digest as OCI writes one; another algorithm is named as such.
fn sha256_digest(d: &str) -> Result<String, Refusal> {
    match d.split_once(':') {
        Some(("sha256", hex))
            if hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) =>
        {
            Ok(d.to_string())
        }
        Some((alg, _)) if alg != "sha256" => Err(Refusal(
            StatusCode::BAD_REQUEST,
            "DIGEST_INVALID",
            format!("{alg:.40} digests are not served here: blobs are named by sha256"),
        )),
        _ => Err(Refusal(
            StatusCode::BAD_REQUEST,
            "DIGEST_INVALID",
            format!("{d:.100} is not a digest: sha256:<64 lowercase hex>"),
        )),
    }
}

/// `/v2/`: the API version check (the key was checked on the way in).
pub async fn version_check() -> Response {
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            ),
            (
                header::HeaderName::from_static(API_VERSION),
                HeaderValue::from_static("registry/2.0"),
            ),
        ],
        "{}",
    )
        .into_response()
}

/// Every request under `/v2/…`.
pub async fn answer(
    State(reg): State<Arc<Registry>>,
    Extension(grant): Extension<Arc<Grant>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    if method != Method::GET && method != Method::HEAD {
        return Refusal(
            StatusCode::METHOD_NOT_ALLOWED,
            "UNSUPPORTED",
            format!(
                "this registry is pull-only ({method} refused): seal versions with `sealvol volume push`; they are served here as ModelPack artifacts"
            ),
        )
        .into_response();
    }
    let head = method == Method::HEAD;
    let rest = uri
        .path()
        .strip_prefix("/v2/")
        .unwrap_or_default()
        .to_string();
    let range = headers
        .get(header::RANGE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let r = Arc::clone(&reg);
    let found = tokio::task::spawn_blocking(move || find(&r, &grant, &rest))
        .await
        .unwrap_or_else(|_| Err(failed("the server failed to answer")));
    let found = match found {
        Ok(f) => f,
        Err(refusal) => return refusal.into_response(),
    };
    let mut h = HeaderMap::new();
    h.insert(API_VERSION, HeaderValue::from_static("registry/2.0"));
    let (content_type, digest, bytes) = match found {
        Found::Json(ct, digest, body) => (ct, digest, Sent::Bytes(body)),
        Found::File(digest, obj, size) => {
            ("application/octet-stream", digest, Sent::File(obj, size))
        }
    };
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    if let Ok(v) = HeaderValue::from_str(&digest) {
        h.insert("docker-content-digest", v.clone());
        h.insert(
            header::ETAG,
            HeaderValue::from_str(&format!("\"{digest}\"")).unwrap_or(v),
        );
    }
    h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    let size = match &bytes {
        Sent::Bytes(b) => b.len() as u64,
        Sent::File(_, s) => *s,
    };
    let (status, start, len) = match range.as_deref().map(|v| crate::range::parse_range(v, size)) {
        None => (StatusCode::OK, 0, size),
        Some(Ok((start, len))) => {
            if let Ok(v) =
                HeaderValue::from_str(&format!("bytes {start}-{}/{size}", start + len - 1))
            {
                h.insert(header::CONTENT_RANGE, v);
            }
            (StatusCode::PARTIAL_CONTENT, start, len)
        }
        Some(Err(status)) => {
            let mut r = Refusal(
                status,
                "RANGE_INVALID",
                format!(
                    "the range {:.80} is not one range within the blob's {size} bytes",
                    range.unwrap_or_default()
                ),
            )
            .into_response();
            if let Ok(v) = HeaderValue::from_str(&format!("bytes */{size}")) {
                r.headers_mut().insert(header::CONTENT_RANGE, v);
            }
            return r;
        }
    };
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    if head || len == 0 {
        return (status, h, Body::empty()).into_response();
    }
    match bytes {
        Sent::Bytes(b) => (
            status,
            h,
            b[start as usize..(start + len) as usize].to_vec(),
        )
            .into_response(),
        Sent::File(obj, _) => {
            let Some(share) = crate::budget::for_run(3 * crate::file_body::WINDOW).await else {
                return crate::reply::busy();
            };
            let body = crate::file_body::proven(
                Arc::clone(&reg.chunks),
                obj,
                start..start + len,
                share,
                Box::new(|_| {}),
            );
            (status, h, body).into_response()
        }
    }
}

enum Found {
    /// A document: its media type, digest and bytes.
    Json(&'static str, String, Arc<Vec<u8>>),
    /// A file of a version: its layer digest, chunk list and size.
    File(String, sealvol_core::objects::FileObject, u64),
}

enum Sent {
    Bytes(Arc<Vec<u8>>),
    File(sealvol_core::objects::FileObject, u64),
}

/// What `rest` names, as `grant` may see it. Blocking.
fn find(reg: &Registry, grant: &Grant, rest: &str) -> Result<Found, Refusal> {
    let (name, asked) = parse(rest)?;
    let volume = VolumeName::parse(&name).map_err(|_| unknown_name(&name))?;
    if !grant.sees(volume.namespace.as_str()) {
        return Err(unknown_name(&name));
    }
    let repo = reg.chunks.repository();
    match repo.require_volume(&volume) {
        Ok(()) => {}
        Err(e) if e.kind() == sealvol_core::error::ErrorKind::NotFound => {
            return Err(unknown_name(&name));
        }
        Err(e) => return Err(failed(e)),
    }
    match asked {
        Asked::Tags => {
            let mut tags: Vec<String> = repo
                .tags(&volume)
                .map_err(failed)?
                .into_iter()
                .filter(|t| !t.digest.is_empty())
                .map(|t| t.tag)
                .collect();
            tags.sort();
            let body = serde_json::json!({"name": name, "tags": tags}).to_string();
            let digest = sealvol_oci::artifact::sha256_digest(body.as_bytes());
            Ok(Found::Json(
                "application/json",
                digest,
                Arc::new(body.into_bytes()),
            ))
        }
        Asked::Manifest(reference) => {
            let art = if reference.contains(':') {
                let d = sha256_digest(&reference)?;
                let known = sealvol_core::lock(&reg.manifests).get(&d).cloned();
                match known {
                    Some((v, digest)) if v == volume => reg.artifact(&v, &digest)?,
                    _ => reg
                        .known_artifacts(&volume)?
                        .into_iter()
                        .map(|(_, a)| a)
                        .find(|a| a.manifest_digest == d)
                        .ok_or_else(|| manifest_unknown(&name, &reference))?,
                }
            } else {
                let tag = Name::parse("tag", &reference)
                    .map_err(|_| manifest_unknown(&name, &reference))?;
                let r = sealvol_core::refs::Ref {
                    volume: volume.clone(),
                    target: sealvol_core::refs::Target::Tag(tag),
                };
                let digest = match repo.resolve(&r) {
                    Ok(d) => d,
                    Err(e) if matches!(e.kind(), sealvol_core::error::ErrorKind::NotFound) => {
                        return Err(manifest_unknown(&name, &reference));
                    }
                    Err(e) => return Err(failed(e)),
                };
                reg.artifact(&volume, &digest)?
            };
            Ok(Found::Json(
                media::OCI_MANIFEST,
                art.manifest_digest.clone(),
                Arc::new(art.manifest.clone()),
            ))
        }
        Asked::Blob(d) => {
            let d = sha256_digest(&d)?;
            for (digest, art) in reg.known_artifacts(&volume)? {
                if art.config_digest == d {
                    return Ok(Found::Json(
                        media::MODEL_CONFIG,
                        d,
                        Arc::new(art.config.clone()),
                    ));
                }
                if art.manifest_digest == d {
                    return Ok(Found::Json(
                        media::OCI_MANIFEST,
                        d,
                        Arc::new(art.manifest.clone()),
                    ));
                }
                if let Some(l) = art.layers.iter().find(|l| l.digest == d) {
                    let m = repo.manifest(&volume, &digest).map_err(failed)?;
                    let obj = repo
                        .file_list(&l.hash, l.size, &m.small_files())
                        .map_err(failed)?;
                    return Ok(Found::File(d, obj, l.size));
                }
            }
            Err(Refusal(
                StatusCode::NOT_FOUND,
                "BLOB_UNKNOWN",
                format!("{name} has no blob {d}: ask for its manifest first"),
            ))
        }
    }
}

fn manifest_unknown(name: &str, reference: &str) -> Refusal {
    Refusal(
        StatusCode::NOT_FOUND,
        "MANIFEST_UNKNOWN",
        format!("{name:.200} has no tag or manifest {reference:.100}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_digests_are_read_strictly() {
        assert_eq!(
            parse("w/m/manifests/prod").unwrap(),
            ("w/m".into(), Asked::Manifest("prod".into()))
        );
        assert_eq!(parse("w/m/tags/list").unwrap(), ("w/m".into(), Asked::Tags));
        for bad in [
            "w/manifests/x",
            "a/b/c/manifests/x",
            "w/m/blobs",
            "w/m/uploads/",
            "",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        let ok = format!("sha256:{}", "a".repeat(64));
        assert_eq!(sha256_digest(&ok).unwrap(), ok);
        let Err(Refusal(s, code, msg)) = sha256_digest(&format!("sha512:{}", "a".repeat(128)))
        else {
            panic!()
        };
        assert_eq!((s, code), (StatusCode::BAD_REQUEST, "DIGEST_INVALID"));
        assert!(msg.contains("sha512"), "{msg}");
        for bad in [
            "sha256:ABC",
            "sha256:",
            "nothing",
            &format!("sha256:{}", "A".repeat(64)),
        ] {
            assert!(sha256_digest(bad).is_err(), "{bad}");
        }
    }
}
