//! The ModelPack artifact a sealed version gives: a config naming the version, one raw
//! layer per file (its bytes as they are, its path in `org.cncf.model.filepath`, its
//! mode in the file metadata annotation), and the OCI image manifest over them. Built
//! only from what the version's digest covers (paths, sizes, modes, contents) and its
//! pinned ref, never from what may change after sealing (labels, tags, provenance, the
//! seal's time), so one version always gives the same manifest digest.
//!
//! A link to a file of the version is exported as that file (a raw layer cannot be a
//! link); a link to a folder or out of the version is refused; empty folders are not
//! exported (an artifact holds files only).

use std::collections::BTreeMap;

use aws_lc_rs::digest;
use serde::Serialize;

use sealvol_core::digest::{Entry, Hash};
use sealvol_core::manifest::Manifest;
use sealvol_core::{Error, Result};

use crate::media;

/// One layer: a file of the version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layer {
    pub path: String,
    pub media_type: &'static str,
    /// `sha256:HEX` of the file's bytes.
    pub digest: String,
    pub size: u64,
    /// The file's BLAKE3 hash, by which its bytes are read from the repository.
    pub hash: Hash,
}

/// A version as an OCI artifact: its layers, and the config and manifest documents
/// (the bytes registries store, and their digests).
#[derive(Debug, Clone)]
pub struct Artifact {
    pub layers: Vec<Layer>,
    pub config: Vec<u8>,
    pub config_digest: String,
    pub manifest: Vec<u8>,
    pub manifest_digest: String,
}

impl Artifact {
    /// Each distinct blob once: (digest, size, the layer holding it), the config not
    /// included.
    pub fn distinct_layers(&self) -> Vec<&Layer> {
        let mut seen = std::collections::HashSet::new();
        self.layers
            .iter()
            .filter(|l| seen.insert(l.digest.as_str()))
            .collect()
    }
}

/// `sha256:HEX` of `bytes`.
pub fn sha256_digest(bytes: &[u8]) -> String {
    format!(
        "sha256:{}",
        hex::encode(digest::digest(&digest::SHA256, bytes).as_ref())
    )
}

/// The annotation the pinned ref is written in, on the manifest.
pub const REF_ANNOTATION: &str = "io.sealvol.ref";
pub const TITLE: &str = "org.opencontainers.image.title";

#[derive(Serialize)]
struct Descriptor<'a> {
    #[serde(rename = "mediaType")]
    media_type: &'a str,
    digest: &'a str,
    size: u64,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    annotations: BTreeMap<&'static str, String>,
}

#[derive(Serialize)]
struct ImageManifest<'a> {
    #[serde(rename = "schemaVersion")]
    schema_version: u32,
    #[serde(rename = "mediaType")]
    media_type: &'a str,
    #[serde(rename = "artifactType")]
    artifact_type: &'a str,
    config: Descriptor<'a>,
    layers: Vec<Descriptor<'a>>,
    annotations: BTreeMap<&'static str, String>,
}

#[derive(Serialize)]
struct Config<'a> {
    descriptor: ConfigDescriptor<'a>,
    modelfs: ModelFs<'a>,
    config: ModelConfig<'a>,
}

#[derive(Serialize)]
struct ConfigDescriptor<'a> {
    name: &'a str,
    revision: &'a str,
}

#[derive(Serialize)]
struct ModelFs<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    #[serde(rename = "diffIds")]
    diff_ids: Vec<&'a str>,
}

#[derive(Serialize)]
struct ModelConfig<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    format: Option<&'a str>,
}

/// The file metadata annotation's value (`FileMetadata` in the spec's Go types).
#[derive(Serialize)]
struct FileMetadata<'a> {
    name: &'a str,
    mode: u32,
    uid: u32,
    gid: u32,
    size: u64,
    mtime: &'a str,
    typeflag: u8,
}

/// A file as exported: the layer, and whether it is executable.
struct Exported {
    layer: Layer,
    exec: bool,
    untested: bool,
}

/// The artifact of version `m`, whose files' SHA-256s are `sha256` (by path, links
/// included: `sealvol_sign::version::sha256s`).
pub fn of_version(m: &Manifest, sha256: &BTreeMap<String, [u8; 32]>) -> Result<Artifact> {
    let (files, _) = sealvol_sign::version::files(m)?;
    let exec: BTreeMap<&str, bool> = m
        .entries
        .iter()
        .filter_map(|e| match e {
            Entry::File { path, exec, .. } => Some((path.as_str(), *exec)),
            _ => None,
        })
        .collect();
    let mut out = Vec::with_capacity(files.len());
    for f in files {
        let sha = sha256.get(&f.path).ok_or_else(|| {
            Error::invalid(format!(
                "the SHA-256 of {} in vol:{} is missing",
                f.path, m.volume
            ))
        })?;
        let (media_type, untested) = media::of_path(&f.path);
        out.push(Exported {
            exec: exec.get(f.path.as_str()).copied().unwrap_or(false),
            untested,
            layer: Layer {
                media_type,
                digest: format!("sha256:{}", hex::encode(sha)),
                size: f.size,
                hash: f.hash,
                path: f.path,
            },
        });
    }
    if out.is_empty() {
        return Err(Error::invalid(format!(
            "vol:{}@{} holds no files: a ModelPack artifact needs at least one layer",
            m.volume, m.digest
        )));
    }
    let pinned = format!("vol:{}@{}", m.volume, m.digest);
    // One weight format across the weights names the model's format.
    let mut formats: Vec<&str> = out
        .iter()
        .filter(|e| e.layer.media_type == media::WEIGHT)
        .filter_map(|e| e.layer.path.rsplit_once('.').map(|(_, x)| x))
        .collect();
    formats.sort_unstable();
    formats.dedup();
    let format = match formats.as_slice() {
        [one] => Some(*one),
        _ => None,
    };
    let config = serde_json::to_vec(&Config {
        descriptor: ConfigDescriptor {
            name: &m.volume,
            revision: &m.digest,
        },
        modelfs: ModelFs {
            kind: "layers",
            diff_ids: out.iter().map(|e| e.layer.digest.as_str()).collect(),
        },
        config: ModelConfig { format },
    })
    .map_err(|e| Error::invalid(format!("the artifact's config: {e}")))?;
    let config_digest = sha256_digest(&config);
    let metadata: Vec<String> = out
        .iter()
        .map(|e| {
            serde_json::to_string(&FileMetadata {
                name: &e.layer.path,
                mode: if e.exec { 0o755 } else { 0o644 },
                uid: 0,
                gid: 0,
                size: e.layer.size,
                // Not covered by the digest: the same for every file and every export.
                mtime: "1970-01-01T00:00:00Z",
                typeflag: b'0',
            })
            .unwrap_or_default()
        })
        .collect();
    let layers = out
        .iter()
        .zip(&metadata)
        .map(|(e, meta)| {
            let mut a = BTreeMap::new();
            a.insert(media::FILEPATH, e.layer.path.clone());
            a.insert(media::FILE_METADATA, meta.clone());
            if e.untested {
                a.insert(media::UNTESTED, "true".to_string());
            }
            Descriptor {
                media_type: e.layer.media_type,
                digest: &e.layer.digest,
                size: e.layer.size,
                annotations: a,
            }
        })
        .collect();
    let mut annotations = BTreeMap::new();
    annotations.insert(REF_ANNOTATION, pinned);
    annotations.insert(TITLE, m.volume.clone());
    let manifest = serde_json::to_vec(&ImageManifest {
        schema_version: 2,
        media_type: media::OCI_MANIFEST,
        artifact_type: media::MODEL_MANIFEST,
        config: Descriptor {
            media_type: media::MODEL_CONFIG,
            digest: &config_digest,
            size: config.len() as u64,
            annotations: BTreeMap::new(),
        },
        layers,
        annotations,
    })
    .map_err(|e| Error::invalid(format!("the artifact's manifest: {e}")))?;
    let manifest_digest = sha256_digest(&manifest);
    Ok(Artifact {
        layers: out.into_iter().map(|e| e.layer).collect(),
        config,
        config_digest,
        manifest,
        manifest_digest,
    })
}
