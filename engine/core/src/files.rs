//! The files of a version, as the console's files screen shows them: sizes, chunk
//! counts, and how many of each file's bytes the previous version already had (so a
//! reader sees at a glance what a new checkpoint actually changed).

use std::collections::HashSet;

use serde::Serialize;

use crate::digest::{Entry, Hash};
use crate::error::Result;

use crate::refs::{Digest, VolumeName};
use crate::repo::Repository;

#[derive(Debug, Clone, Serialize)]
pub struct FileInfo {
    pub path: String,
    /// "file", "symlink" or "dir" (an empty directory).
    pub kind: &'static str,
    pub size: u64,
    pub exec: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    pub chunks: u64,
    /// Bytes of this file's chunks that the previous version also holds.
    pub shared_bytes: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct VersionFiles {
    /// The version created just before this one, if any.
    pub previous: Option<String>,
    pub files: Vec<FileInfo>,
}

pub fn version_files(repo: &Repository, vol: &VolumeName, digest: &Digest) -> Result<VersionFiles> {
    let m = repo.manifest(vol, digest)?;
    let versions = repo.versions(vol)?;
    let me = digest.to_string();
    // Newest first: the previous version is the one after this in the list.
    let previous = versions
        .iter()
        .position(|v| v.digest == me)
        .and_then(|i| versions.get(i + 1))
        .map(|v| v.digest.clone());
    let mut old_chunks: HashSet<Hash> = HashSet::new();
    if let Some(p) = previous.as_deref().and_then(|p| Digest::parse(p).ok()) {
        let pm = repo.manifest(vol, &p)?;
        let small = pm.small_files();
        let mut seen = HashSet::new();
        for e in &pm.entries {
            if let Entry::File { hash, size, .. } = e
                && seen.insert(*hash)
            {
                let obj = repo.file_list(hash, *size, &small)?;
                old_chunks.extend(obj.chunks.iter().map(|c| c.entry.hash));
            }
        }
    }
    let small = m.small_files();
    let mut files = Vec::with_capacity(m.entries.len());
    for e in &m.entries {
        files.push(match e {
            Entry::File {
                path,
                size,
                hash,
                exec,
            } => {
                let obj = repo.file_list(hash, *size, &small)?;
                let shared = obj
                    .chunks
                    .iter()
                    .filter(|c| old_chunks.contains(&c.entry.hash))
                    .map(|c| c.entry.raw_len as u64)
                    .sum();
                FileInfo {
                    path: path.clone(),
                    kind: "file",
                    size: *size,
                    exec: *exec,
                    target: None,
                    chunks: obj.chunks.len() as u64,
                    shared_bytes: shared,
                }
            }
            Entry::Symlink { path, target } => FileInfo {
                path: path.clone(),
                kind: "symlink",
                size: 0,
                exec: false,
                target: Some(target.clone()),
                chunks: 0,
                shared_bytes: 0,
            },
            Entry::Dir { path } => FileInfo {
                path: path.clone(),
                kind: "dir",
                size: 0,
                exec: false,
                target: None,
                chunks: 0,
                shared_bytes: 0,
            },
        });
    }
    Ok(VersionFiles { previous, files })
}
