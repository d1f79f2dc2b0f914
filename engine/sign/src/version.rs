//! A sealed version as model-signing sees a folder: each file by its path with its
//! digest. In BLAKE3 the manifest already holds them (a file's hash is the plain
//! BLAKE3 of its bytes), so nothing is read; in SHA-256 every file is read once, each
//! proven whole against its BLAKE3 hash before its SHA-256 is used.
//!
//! A link to a file of the version stands for that file (model-signing hashes what a
//! link points at, and records `allow_symlinks`); a link to a folder or out of the
//! version cannot be described to model-signing the same way, and is refused.

use std::collections::{BTreeMap, HashMap};

use aws_lc_rs::digest;
use sealvol_core::digest::{Entry, Hash};
use sealvol_core::manifest::Manifest;
use sealvol_core::read::{Chunks, Tiers};
use sealvol_core::{Error, Result};

use crate::statement::{Algorithm, Resource, Statement};

/// A file of the version as signed: its path, BLAKE3 hash and size.
pub struct File {
    pub path: String,
    pub hash: Hash,
    pub size: u64,
}

/// Every file of the version (links to files included), and whether there were links.
pub fn files(m: &Manifest) -> Result<(Vec<File>, bool)> {
    let by_path: HashMap<&str, &Entry> = m.entries.iter().map(|e| (e.path(), e)).collect();
    let mut out = Vec::new();
    let mut links = false;
    for e in &m.entries {
        match e {
            Entry::File {
                path, hash, size, ..
            } => out.push(File {
                path: path.clone(),
                hash: *hash,
                size: *size,
            }),
            Entry::Symlink { path, .. } => {
                links = true;
                let (hash, size) = follow(&by_path, path).ok_or_else(|| {
                    Error::invalid(format!(
                        "{path} in vol:{} is a link to a folder, or to nothing in the version",
                        m.volume
                    ))
                    .hint("model-signing describes links to files only: such a version cannot be signed in its format")
                })?;
                out.push(File {
                    path: path.clone(),
                    hash,
                    size,
                });
            }
            Entry::Dir { .. } => {}
        }
    }
    Ok((out, links))
}

/// The file a link leads to, through at most 40 links (as the kernel allows).
fn follow(by_path: &HashMap<&str, &Entry>, start: &str) -> Option<(Hash, u64)> {
    let mut path = start.to_string();
    for _ in 0..40 {
        match by_path.get(path.as_str())? {
            Entry::File { hash, size, .. } => return Some((*hash, *size)),
            Entry::Symlink { target, .. } => {
                let dir = path.rsplit_once('/').map_or("", |(d, _)| d);
                path = resolve(dir, target)?;
            }
            Entry::Dir { .. } => return None,
        }
    }
    None
}

/// `target` relative to `dir`, as a clean path inside the version.
fn resolve(dir: &str, target: &str) -> Option<String> {
    if target.starts_with('/') {
        return None;
    }
    let mut parts: Vec<&str> = dir.split('/').filter(|p| !p.is_empty()).collect();
    for c in target.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            c => parts.push(c),
        }
    }
    Some(parts.join("/"))
}

/// The statement a version gives in `algorithm`: BLAKE3 from the manifest, SHA-256
/// from `sha256` (path → digest), which must cover every file.
pub fn statement(
    m: &Manifest,
    algorithm: Algorithm,
    sha256: Option<&BTreeMap<String, [u8; 32]>>,
) -> Result<Statement> {
    let (files, links) = files(m)?;
    let name = m
        .volume
        .rsplit_once('/')
        .map_or(m.volume.as_str(), |(_, n)| n);
    let mut resources = Vec::with_capacity(files.len());
    for File { path, hash, .. } in files {
        let digest = match (algorithm, sha256) {
            (Algorithm::Blake3, _) => hash.0,
            (Algorithm::Sha256, Some(s)) => *s
                .get(&path)
                .ok_or_else(|| Error::invalid(format!("no SHA-256 of {path} was computed")))?,
            (Algorithm::Sha256, None) => {
                return Err(Error::invalid(
                    "SHA-256 digests are needed and were not computed",
                ));
            }
        };
        resources.push(Resource { name: path, digest });
    }
    Ok(Statement::new(name, algorithm, links, resources))
}

/// The version's files as `check::compare` takes them, in `algorithm`.
pub fn digests(
    m: &Manifest,
    algorithm: Algorithm,
    sha256: Option<&BTreeMap<String, [u8; 32]>>,
) -> Result<Vec<(String, [u8; 32])>> {
    Ok(statement(m, algorithm, sha256)?
        .resources
        .into_iter()
        .map(|r| (r.name, r.digest))
        .collect())
}

/// The SHA-256 of every file of the version (one read of each distinct file, every
/// byte proven against its BLAKE3 proof), by path.
pub fn sha256s(tiers: &Tiers, m: &Manifest) -> Result<BTreeMap<String, [u8; 32]>> {
    let (files, _) = files(m)?;
    let mut by_hash: HashMap<Hash, [u8; 32]> = HashMap::new();
    let mut out = BTreeMap::new();
    let small = m.small_files();
    for File { path, hash, size } in files {
        if let Some(d) = by_hash.get(&hash) {
            out.insert(path, *d);
            continue;
        }
        let d = if size == 0 {
            sha256(&[])
        } else {
            let obj = tiers.repo().file_list(&hash, size, &small)?;
            let mut sha = digest::Context::new(&digest::SHA256);
            // Every byte proven to be the file's before it is hashed (`Tiers::fetch`).
            tiers.for_each(&obj, 0..obj.chunks.len(), &mut |c| {
                sha.update(c);
                Ok(())
            })?;
            let mut d = [0u8; 32];
            d.copy_from_slice(sha.finish().as_ref());
            d
        };
        by_hash.insert(hash, d);
        out.insert(path, d);
    }
    Ok(out)
}

/// SHA-256s as kept in the repository (hex by path); none if any is not 32 bytes.
pub fn from_hex(kept: &BTreeMap<String, String>) -> Option<BTreeMap<String, [u8; 32]>> {
    kept.iter()
        .map(|(p, h)| Some((p.clone(), hex::decode(h).ok()?.try_into().ok()?)))
        .collect()
}

/// SHA-256s as the repository keeps them.
pub fn to_hex(digests: &BTreeMap<String, [u8; 32]>) -> BTreeMap<String, String> {
    digests
        .iter()
        .map(|(p, d)| (p.clone(), hex::encode(d)))
        .collect()
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    let mut d = [0u8; 32];
    d.copy_from_slice(digest::digest(&digest::SHA256, bytes).as_ref());
    d
}

/// The SHA-256 of each file of `volume@digest`: those kept beside the version, else
/// read once now through `repo` and kept for the next signature (through a server they
/// are not: it writes what it trusts itself, and each signature reads the bytes again).
pub fn sha256s_kept_or_read(
    repo: &std::sync::Arc<sealvol_core::Repository>,
    volume: &sealvol_core::VolumeName,
    digest: &sealvol_core::Digest,
    m: &Manifest,
) -> Result<BTreeMap<String, [u8; 32]>> {
    let kept = repo.sha256s(volume, digest)?;
    if let Some(p) = kept.and_then(|k| from_hex(&k.files)) {
        return Ok(p);
    }
    let tiers = Tiers::new(std::sync::Arc::clone(repo), None);
    let computed = sha256s(&tiers, m)?;
    if let Err(e) = repo.put_sha256s(volume, digest, to_hex(&computed)) {
        tracing::info!("the SHA-256s were not kept: {e}");
    }
    Ok(computed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_is_followed_inside_the_version_only() {
        assert_eq!(resolve("a/b", "../c"), Some("a/c".into()));
        assert_eq!(resolve("a", "./x/y"), Some("a/x/y".into()));
        assert_eq!(resolve("", "../x"), None);
        assert_eq!(resolve("a", "/etc/passwd"), None);
    }
}
