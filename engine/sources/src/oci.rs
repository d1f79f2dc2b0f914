//! OCI registries (`oci://HOST/REPO:TAG` or `@sha256:…`): a CNCF ModelPack artifact's
//! raw layers as files. The manifest is read once and pinned by its digest (a tag that
//! moves during the sync changes nothing: every blob is asked for by digest); each
//! layer is a file at its `org.cncf.model.filepath`, checked against its SHA-256 as it
//! streams. What is refused, by name: a manifest list (an index), a manifest of another
//! kind, a layer of any media type but the spec's raw ones (tar layers, KitOps
//! ModelKits and plain images are not imported), a layer without a path, one whose
//! path climbs out or repeats (the listing's checks), a manifest over 4 MiB.
//! Credentials: the job's secret (`USER:PASSWORD`), else (a machine's own job) the
//! container tools' auth file; basic, or the bearer-token dance the registry's
//! challenge asks for.

use std::ops::Range;

use crate::body::Body;
use crate::http::{Hints, ranged_get};
use sealvol_core::error::{Error, ErrorKind, Result};
use sealvol_oci::auth;
use sealvol_source::Access;
use sealvol_source::checks::Expected;
use sealvol_source::endpoints::Resolved;
use sealvol_source::listing::{Object, RawObject};
use sealvol_source::url::SourceUrl;

/// The largest manifest read.
pub const MAX_MANIFEST: usize = 4 << 20;

const HINTS: Hints = Hints {
    denied: "log in to the registry (docker login / skopeo login), or store USER:PASSWORD with `sealvol secret set NAME` and pass --secret NAME",
    missing: "check the repository and the tag or digest",
    endpoint: "check the registry's address; one without TLS is listed in SEALVOL_OCI_PLAIN_HTTP or [endpoints] oci_plain_http",
};

pub struct Oci {
    http: reqwest::Client,
    base: String,
    repo: String,
    reference: String,
    credentials: Option<String>,
    /// The `Authorization` the registry's challenge asked for, once answered.
    auth: Option<String>,
    shown: String,
}

impl Oci {
    pub fn connect(url: &SourceUrl, at: &Resolved, access: Access<'_>) -> Result<Oci> {
        let SourceUrl::Oci {
            host,
            repo,
            reference,
        } = url
        else {
            return Err(Error::invalid(format!("{url} is not an OCI source")));
        };
        let credentials = match access {
            Access::Secret(s) => Some(s.text()?),
            Access::Ambient => auth::credentials_from_auth_file(host)?,
            Access::Anonymous => None,
        };
        if let Some(c) = &credentials
            && !c.contains(':')
        {
            return Err(Error::invalid(format!(
                "{url}: the registry's credentials must be USER:PASSWORD"
            )));
        }
        Ok(Oci {
            http: crate::http::client()?,
            base: at.url.clone().unwrap_or_else(|| format!("https://{host}")),
            repo: repo.clone(),
            reference: reference.clone(),
            credentials,
            auth: None,
            shown: url.to_string(),
        })
    }

    /// The manifest's digest, and its layers as files.
    pub async fn list(&mut self) -> Result<(String, Vec<RawObject>)> {
        self.login().await?;
        let url = format!(
            "{}/v2/{}/manifests/{}",
            self.base, self.repo, self.reference
        );
        let shown = self.shown.clone();
        let body = sealvol_source::retry::retrying(&shown, || async {
            let resp = self
                .request(self.http.get(&url))
                .header(
                    "accept",
                    format!(
                        "{}, {}, application/vnd.docker.distribution.manifest.v2+json, application/vnd.docker.distribution.manifest.list.v2+json",
                        sealvol_oci::media::OCI_MANIFEST,
                        sealvol_oci::media::OCI_INDEX
                    ),
                )
                .send()
                .await
                .map_err(|e| crate::http::transport(&shown, &e, &HINTS))?;
            let status = resp.status().as_u16();
            if status != 200 {
                return Err(crate::http::status_error(&shown, status, "", &HINTS));
            }
            read_bounded(resp, MAX_MANIFEST, &shown).await
        })
        .await?;
        let digest = sealvol_oci::artifact::sha256_digest(&body);
        if self.reference.starts_with("sha256:") && self.reference != digest {
            return Err(Error::new(
                ErrorKind::Corrupt,
                format!(
                    "{}: the registry sent a manifest whose digest is {digest}",
                    self.shown
                ),
            ));
        }
        let objects = layers(&self.shown, &body)?;
        // From here on, every read is of this manifest.
        self.reference = digest.clone();
        Ok((digest, objects))
    }

    pub async fn open(&self, obj: &Object, range: Range<u64>) -> Result<Body> {
        let what = format!("{} {}", self.shown, obj.key);
        let url = format!("{}/v2/{}/blobs/{}", self.base, self.repo, obj.version);
        sealvol_source::retry::retrying(&what, || async {
            let req = self.request(self.http.get(&url));
            ranged_get(req, &what, &range, obj.size, &HINTS, "").await
        })
        .await
    }

    fn request(&self, req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.auth {
            Some(a) => req.header("authorization", a),
            None => req,
        }
    }

    /// `GET /v2/`, and the registry's challenge answered.
    async fn login(&mut self) -> Result<()> {
        let url = format!("{}/v2/", self.base);
        let resp = self
            .http
            .get(&url)
            .send()
            .await
            .map_err(|e| crate::http::transport(&self.shown, &e, &HINTS))?;
        match resp.status().as_u16() {
            200 => return Ok(()),
            401 => {}
            s => return Err(crate::http::status_error(&self.shown, s, "", &HINTS)),
        }
        let challenge = auth::challenge_of(resp.headers());
        let basic = self.credentials.as_deref().map(auth::basic);
        let shown = &self.shown;
        let at = |e: Error| Error::new(e.kind(), format!("{shown}: {}", e.message()));
        let token_url = match auth::read_challenge(&challenge, &[(&self.repo, "pull")])
            .map_err(at)?
        {
            auth::Challenge::Basic => {
                let b = basic.ok_or_else(|| crate::http::status_error(shown, 401, "", &HINTS))?;
                self.auth = Some(b);
                return Ok(());
            }
            auth::Challenge::Bearer { token_url } => token_url,
        };
        let mut req = self.http.get(token_url);
        if let Some(b) = &basic {
            req = req.header("authorization", b);
        }
        let resp = req
            .send()
            .await
            .map_err(|e| crate::http::transport(shown, &e, &HINTS))?;
        let status = resp.status().as_u16();
        if status != 200 {
            return Err(crate::http::status_error(shown, status, "", &HINTS));
        }
        let body = read_bounded(resp, 64 << 10, shown).await?;
        self.auth = Some(auth::bearer(&body).map_err(at)?);
        Ok(())
    }
}

/// A body of at most `max` bytes.
async fn read_bounded(mut resp: reqwest::Response, max: usize, shown: &str) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    while let Some(piece) = resp.chunk().await.map_err(|e| {
        Error::new(
            ErrorKind::Unavailable,
            format!("{shown}: the answer was cut: {e}"),
        )
    })? {
        if out.len() + piece.len() > max {
            return Err(Error::new(
                ErrorKind::Invalid,
                format!("{shown}: the registry's answer is over {max} bytes"),
            ));
        }
        out.extend_from_slice(&piece);
    }
    Ok(out)
}

/// Whether a layer's file metadata (`org.cncf.model.file.metadata+json`, a JSON
/// document in a string, as tar headers say it) gives its file an owner's execute bit;
/// no metadata is a plain file. Its other fields (owner, times) are not kept.
fn executable(meta: &serde_json::Value) -> std::result::Result<bool, String> {
    let Some(text) = meta.as_str() else {
        return match meta.is_null() {
            true => Ok(false),
            false => Err("its file metadata is not a string".into()),
        };
    };
    let v: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| format!("its file metadata is not JSON: {e:.100}"))?;
    match &v["mode"] {
        serde_json::Value::Null => Ok(false),
        m => m
            .as_u64()
            .filter(|m| *m <= 0o7777)
            .map(|m| m & 0o100 != 0)
            .ok_or_else(|| format!("its file metadata's mode {m:.20} is not a file mode")),
    }
}

/// The layers of a ModelPack manifest as files, or why it is not one taken here.
pub fn layers(shown: &str, manifest: &[u8]) -> Result<Vec<RawObject>> {
    let refuse = |why: String| Error::invalid(format!("{shown}: {why}"));
    let v: serde_json::Value = serde_json::from_slice(manifest)
        .map_err(|e| refuse(format!("the manifest is not JSON: {e:.100}")))?;
    let media_type = v["mediaType"].as_str().unwrap_or_default();
    if media_type == sealvol_oci::media::OCI_INDEX
        || media_type == "application/vnd.docker.distribution.manifest.list.v2+json"
        || v["manifests"].is_array()
    {
        return Err(refuse(
            "a manifest list (an index of several images) names no one artifact: name one of its manifests by digest".into(),
        ));
    }
    if media_type != sealvol_oci::media::OCI_MANIFEST {
        return Err(refuse(format!(
            "the manifest's media type is {media_type:.100}: only OCI image manifests ({}) are imported",
            sealvol_oci::media::OCI_MANIFEST
        )));
    }
    let layers = v["layers"]
        .as_array()
        .ok_or_else(|| refuse("the manifest lists no layers".into()))?;
    let mut out = Vec::with_capacity(layers.len());
    for l in layers {
        let mt = l["mediaType"].as_str().unwrap_or_default();
        if !sealvol_oci::media::RAW_LAYERS.contains(&mt) {
            return Err(refuse(format!(
                "a layer has media type {mt:.100}: only the ModelPack spec's raw layers (…v1.raw) are imported, not tar layers, KitOps ModelKits or image layers"
            )));
        }
        let path = l["annotations"][sealvol_oci::media::FILEPATH]
            .as_str()
            .ok_or_else(|| refuse(format!("a layer has no {}", sealvol_oci::media::FILEPATH)))?;
        let digest = l["digest"].as_str().unwrap_or_default();
        let expect = digest
            .strip_prefix("sha256:")
            .and_then(|h| Expected::parse_hex("sha256", h))
            .ok_or_else(|| {
                refuse(format!(
                    "layer {path:.200} has digest {digest:.100}, not sha256"
                ))
            })?;
        let size = l["size"]
            .as_u64()
            .ok_or_else(|| refuse(format!("layer {path:.200} has no size")))?;
        out.push(RawObject {
            key: path.to_string(),
            size,
            version: digest.to_string(),
            expect: vec![expect],
            exec: executable(&l["annotations"][sealvol_oci::media::FILE_METADATA])
                .map_err(|why| refuse(format!("layer {path:.200}: {why}")))?,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(layers: serde_json::Value) -> Vec<u8> {
        serde_json::json!({
            "schemaVersion": 2,
            "mediaType": sealvol_oci::media::OCI_MANIFEST,
            "layers": layers,
        })
        .to_string()
        .into_bytes()
    }

    fn layer(path: &str, mt: &str) -> serde_json::Value {
        serde_json::json!({
            "mediaType": mt, "digest": format!("sha256:{}", "ab".repeat(32)), "size": 3,
            "annotations": {"org.cncf.model.filepath": path},
        })
    }

    #[test]
    fn only_raw_modelpack_layers_with_paths_are_taken() {
        let ok = layers(
            "s",
            &manifest(serde_json::json!([layer(
                "a/b.json",
                sealvol_oci::media::WEIGHT_CONFIG
            )])),
        )
        .unwrap();
        assert_eq!((ok[0].key.as_str(), ok[0].size), ("a/b.json", 3));
        let index = serde_json::json!({"schemaVersion": 2, "mediaType": sealvol_oci::media::OCI_INDEX, "manifests": []});
        let e = layers("s", index.to_string().as_bytes()).unwrap_err();
        assert!(e.to_string().contains("manifest list"), "{e}");
        let tar = manifest(serde_json::json!([layer(
            "w",
            "application/vnd.cncf.model.weight.v1.tar"
        )]));
        assert!(
            layers("s", &tar)
                .unwrap_err()
                .to_string()
                .contains("raw layers")
        );
        let docker = serde_json::json!({"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json", "layers": []});
        assert!(
            layers("s", docker.to_string().as_bytes())
                .unwrap_err()
                .to_string()
                .contains("media type")
        );
        let mut nopath = layer("x", sealvol_oci::media::WEIGHT);
        nopath["annotations"] = serde_json::json!({});
        assert!(layers("s", &manifest(serde_json::json!([nopath]))).is_err());
        let mut sha512 = layer("x", sealvol_oci::media::WEIGHT);
        sha512["digest"] = format!("sha512:{}", "ab".repeat(64)).into();
        assert!(layers("s", &manifest(serde_json::json!([sha512]))).is_err());
        assert!(layers("s", b"not json").is_err());
    }

    #[test]
    fn a_layers_file_metadata_gives_its_execute_bit_or_is_refused() {
        let with = |meta: serde_json::Value| {
            let mut l = layer("run.sh", sealvol_oci::media::CODE);
            l["annotations"][sealvol_oci::media::FILE_METADATA] = meta;
            layers("s", &manifest(serde_json::json!([l])))
        };
        let exec = |meta| with(meta).map(|o| o[0].exec);
        assert!(exec(serde_json::json!(r#"{"name":"run.sh","mode":493}"#)).unwrap());
        assert!(!exec(serde_json::json!(r#"{"name":"run.sh","mode":420}"#)).unwrap());
        assert!(!exec(serde_json::json!(r#"{"name":"run.sh"}"#)).unwrap());
        assert!(!exec(serde_json::Value::Null).unwrap());
        for bad in [
            serde_json::json!("not json"),
            serde_json::json!(r#"{"mode":99999999}"#),
            serde_json::json!(r#"{"mode":"0755"}"#),
            serde_json::json!({"mode": 493}),
        ] {
            let e = with(bad.clone()).unwrap_err();
            assert!(e.to_string().contains("run.sh"), "{bad}: {e}");
        }
    }

    #[test]
    fn climbing_and_repeated_paths_are_refused_by_the_listing() {
        let filter = sealvol_source::Filter::new(&[], &[]).unwrap();
        for paths in [vec!["../etc/passwd"], vec!["a", "a"], vec!["/abs"]] {
            let ls: Vec<_> = paths
                .iter()
                .map(|p| layer(p, sealvol_oci::media::WEIGHT))
                .collect();
            let raw = layers("s", &manifest(serde_json::Value::Array(ls))).unwrap();
            assert!(
                sealvol_source::Listing::build(raw, &filter, None).is_err(),
                "{paths:?}"
            );
        }
    }
}
