//! An OCI image layout on disk (`oci-layout`, `index.json`, `blobs/sha256/…`), as
//! `skopeo copy … oci:DIR[:NAME]` reads and writes one: an artifact's blobs written
//! once each (a blob already there is kept only if its bytes hash to its name), each
//! under a temporary name until its SHA-256 is the one its descriptor says, and the
//! index rewritten whole, other images in it kept; and read back: the manifest an
//! index names, checked against its digest, and where each blob lies.

use std::fs::{self, File};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use aws_lc_rs::digest;
use sealvol_core::{Error, Result};

use crate::artifact::{Artifact, Layer};
use crate::media;

/// The annotation an image layout names its images by.
pub const REF_NAME: &str = "org.opencontainers.image.ref.name";

/// The largest `index.json` read.
const MAX_INDEX: u64 = 16 << 20;

/// What a write did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Written {
    pub blobs: u64,
    pub bytes: u64,
    /// Blobs already in the layout with the right bytes.
    pub kept: u64,
}

/// Where a layer's bytes come from: calls its sink with them, in order.
pub type Sink<'a> = dyn FnMut(&[u8]) -> Result<()> + 'a;
pub type ReadLayer<'a> = dyn FnMut(&Layer, &mut Sink<'_>) -> Result<()> + 'a;

/// Writes `art` into the layout at `dir` (made if missing), named `name` in its index
/// (replacing an image of that name), its layers' bytes from `read`, which calls its
/// sink with a layer's bytes in order.
pub fn write(
    dir: &Path,
    art: &Artifact,
    name: Option<&str>,
    read: &mut ReadLayer<'_>,
) -> Result<Written> {
    let blobs = dir.join("blobs").join("sha256");
    fs::create_dir_all(&blobs).map_err(|e| io(dir, "make", e))?;
    let marker = dir.join("oci-layout");
    match fs::read(&marker) {
        Ok(b) => {
            let v: serde_json::Value = serde_json::from_slice(&b).unwrap_or_default();
            if v["imageLayoutVersion"] != "1.0.0" {
                return Err(Error::invalid(format!(
                    "{} is not an OCI image layout of version 1.0.0",
                    dir.display()
                ))
                .hint("export into an empty folder, or one skopeo made"));
            }
        }
        Err(_) => put(&marker, br#"{"imageLayoutVersion":"1.0.0"}"#)?,
    }
    let mut w = Written::default();
    for layer in art.distinct_layers() {
        let path = blob_path(&blobs, &layer.digest)?;
        if holds(&path, &layer.digest, layer.size)? {
            w.kept += 1;
            continue;
        }
        let tmp = path.with_extension(format!("partial-{}", std::process::id()));
        let mut out = File::create(&tmp).map_err(|e| io(&tmp, "create", e))?;
        let mut sha = digest::Context::new(&digest::SHA256);
        let mut n = 0u64;
        let wrote = read(layer, &mut |bytes: &[u8]| {
            sha.update(bytes);
            n += bytes.len() as u64;
            out.write_all(bytes).map_err(|e| io(&tmp, "write", e))
        });
        let got = format!("sha256:{}", hex::encode(sha.finish().as_ref()));
        let checked = wrote.and_then(|()| match (n == layer.size, got == layer.digest) {
            (true, true) => Ok(()),
            _ => Err(Error::invalid(format!(
                "{} read back as {n} bytes with {got}; the version's record says {} bytes with {}",
                layer.path, layer.size, layer.digest
            ))
            .hint("run `sealvol verify` on the version")),
        });
        if let Err(e) = checked.and_then(|()| out.sync_all().map_err(|e| io(&tmp, "sync", e))) {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
        fs::rename(&tmp, &path).map_err(|e| io(&path, "rename", e))?;
        w.blobs += 1;
        w.bytes += n;
    }
    for (bytes, d) in [
        (&art.config, &art.config_digest),
        (&art.manifest, &art.manifest_digest),
    ] {
        let path = blob_path(&blobs, d)?;
        if !holds(&path, d, bytes.len() as u64)? {
            put(&path, bytes)?;
            w.blobs += 1;
            w.bytes += bytes.len() as u64;
        }
    }
    write_index(dir, art, name)?;
    Ok(w)
}

/// `blobs/sha256/HEX` of `digest`, which must be `sha256:` and 64 hex digits.
fn blob_path(blobs: &Path, digest: &str) -> Result<PathBuf> {
    let hex = digest
        .strip_prefix("sha256:")
        .filter(|h| h.len() == 64 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
        .ok_or_else(|| Error::invalid(format!("{digest:.80} is not a sha256 digest")))?;
    Ok(blobs.join(hex))
}

/// Whether `path` holds exactly the blob `digest` of `size` bytes (read and hashed:
/// a file of the right name is not believed).
fn holds(path: &Path, digest_name: &str, size: u64) -> Result<bool> {
    let mut f = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(io(path, "open", e)),
    };
    if f.metadata().map(|m| m.len()).unwrap_or(u64::MAX) != size {
        return Ok(false);
    }
    let mut sha = digest::Context::new(&digest::SHA256);
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).map_err(|e| io(path, "read", e))?;
        if n == 0 {
            break;
        }
        sha.update(&buf[..n]);
    }
    Ok(format!("sha256:{}", hex::encode(sha.finish().as_ref())) == digest_name)
}

/// The largest manifest read from a layout.
pub const MAX_MANIFEST: u64 = 4 << 20;

/// A manifest found in a layout: its bytes (hashing to `digest`) and its digest.
#[derive(Debug)]
pub struct Found {
    pub manifest: Vec<u8>,
    pub digest: String,
}

/// The manifest of the image `name` names in the layout at `dir`'s index (or of its
/// only image), read and checked against its descriptor's digest and size.
pub fn find(dir: &Path, name: Option<&str>) -> Result<Found> {
    let shown = dir.display();
    let not_layout = || {
        Error::invalid(format!(
            "{shown} is not an OCI image layout of version 1.0.0"
        ))
        .hint("give the folder skopeo copy … oci:DIR or sealvol volume export wrote")
    };
    let marker = read_bounded(&dir.join("oci-layout"), 4096).map_err(|_| not_layout())?;
    let v: serde_json::Value = serde_json::from_slice(&marker).map_err(|_| not_layout())?;
    if v["imageLayoutVersion"] != "1.0.0" {
        return Err(not_layout());
    }
    let path = dir.join("index.json");
    let bytes = read_bounded(&path, MAX_INDEX)?;
    let index: serde_json::Value = serde_json::from_slice(&bytes)
        .map_err(|e| Error::invalid(format!("{} is not JSON: {e:.100}", path.display())))?;
    let manifests = index["manifests"]
        .as_array()
        .ok_or_else(|| Error::invalid(format!("{} lists no manifests", path.display())))?;
    let named = |m: &&serde_json::Value| match name {
        Some(n) => m["annotations"][REF_NAME] == n,
        None => true,
    };
    let found: Vec<&serde_json::Value> = manifests.iter().filter(named).collect();
    let entry = match (found.as_slice(), name) {
        ([one], _) => *one,
        ([], Some(n)) => {
            return Err(
                Error::not_found(format!("{shown} holds no image named {n:.128}"))
                    .hint(format!("the names it holds: {}", names(manifests))),
            );
        }
        ([], None) => return Err(Error::not_found(format!("{shown} holds no image"))),
        (_, Some(n)) => {
            return Err(Error::invalid(format!(
                "{shown} names {} images {n:.128}",
                found.len()
            )));
        }
        (_, None) => {
            return Err(
                Error::invalid(format!("{shown} holds {} images: name one", found.len())).hint(
                    format!("give oci:DIR:NAME, NAME one of {}", names(manifests)),
                ),
            );
        }
    };
    let digest = entry["digest"].as_str().unwrap_or_default().to_string();
    let size = entry["size"].as_u64();
    let blob = blob_path(&dir.join("blobs").join("sha256"), &digest)?;
    let manifest = read_bounded(&blob, MAX_MANIFEST)?;
    let got = crate::artifact::sha256_digest(&manifest);
    if got != digest || size.is_some_and(|s| s != manifest.len() as u64) {
        return Err(Error::corrupt(format!(
            "{}: the manifest's bytes hash to {got}, not {digest:.80} as the index says",
            blob.display()
        ))
        .hint("the layout is damaged: copy it again"));
    }
    Ok(Found { manifest, digest })
}

/// Where the blob `digest` lies in the layout at `dir`.
pub fn blob(dir: &Path, digest: &str) -> Result<PathBuf> {
    blob_path(&dir.join("blobs").join("sha256"), digest)
}

/// The names an index gives its images, for a hint.
fn names(manifests: &[serde_json::Value]) -> String {
    let n: Vec<&str> = manifests
        .iter()
        .filter_map(|m| m["annotations"][REF_NAME].as_str())
        .take(10)
        .collect();
    match n.is_empty() {
        true => "(none named)".into(),
        false => n.join(", "),
    }
}

/// A file of at most `max` bytes.
fn read_bounded(path: &Path, max: u64) -> Result<Vec<u8>> {
    let f = File::open(path).map_err(|e| io(path, "open", e))?;
    let mut b = Vec::new();
    f.take(max + 1)
        .read_to_end(&mut b)
        .map_err(|e| io(path, "read", e))?;
    if b.len() as u64 > max {
        return Err(Error::invalid(format!(
            "{} is over {max} bytes",
            path.display()
        )));
    }
    Ok(b)
}

/// Writes `bytes` to `path` through a temporary file.
fn put(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension(format!("partial-{}", std::process::id()));
    fs::write(&tmp, bytes).map_err(|e| io(&tmp, "write", e))?;
    fs::rename(&tmp, path).map_err(|e| io(path, "rename", e))
}

/// `index.json` with the artifact under `name`: images of other names kept, one of
/// the same name (or, unnamed, of the same digest) replaced.
fn write_index(dir: &Path, art: &Artifact, name: Option<&str>) -> Result<()> {
    let path = dir.join("index.json");
    let mut index = match path.exists() {
        true => {
            let b = read_bounded(&path, MAX_INDEX)?;
            let v: serde_json::Value = serde_json::from_slice(&b)
                .map_err(|e| Error::invalid(format!("{} is not JSON: {e:.100}", path.display())))?;
            if v["schemaVersion"] != 2 || !v["manifests"].is_array() {
                return Err(Error::invalid(format!(
                    "{} is not an OCI image index",
                    path.display()
                )));
            }
            v
        }
        false => serde_json::json!({
            "schemaVersion": 2,
            "mediaType": media::OCI_INDEX,
            "manifests": [],
        }),
    };
    let manifests = index["manifests"].as_array_mut().expect("checked above");
    manifests.retain(|m| match name {
        Some(n) => m["annotations"][REF_NAME] != n,
        None => m["digest"] != art.manifest_digest.as_str(),
    });
    let mut entry = serde_json::json!({
        "mediaType": media::OCI_MANIFEST,
        "artifactType": media::MODEL_MANIFEST,
        "digest": art.manifest_digest,
        "size": art.manifest.len(),
    });
    if let Some(n) = name {
        entry["annotations"] = serde_json::json!({ REF_NAME: n });
    }
    manifests.push(entry);
    let bytes = serde_json::to_vec(&index).map_err(|e| Error::invalid(e.to_string()))?;
    put(&path, &bytes)
}

fn io(path: &Path, what: &str, e: std::io::Error) -> Error {
    Error::io(&format!("cannot {what}"), path, e)
}
