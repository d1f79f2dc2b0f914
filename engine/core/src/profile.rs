//! Read profiles, `profiles/<ns>/<vol>/<digest>/<hash>`: the order in which a mount's
//! readers first asked for a version's chunks, saved by `sealvol volume profile save
//! REF` so that later mounts of the version, on any node, read ahead in that order and
//! a model's start-up finds what it needs first already in memory.
//!
//! Advisory, and beside the version, not in it: a profile never changes the digest,
//! a mount without one (or with a damaged one) only reads ahead less, and a profile
//! that names chunks the version does not hold is refused when saved and ignored when
//! read. Each profile is named by the BLAKE3 of its bytes; the newest one saved is the
//! one mounts replay. A purge removes a version's profiles with it; gc removes those
//! whose version is gone.

use serde::{Deserialize, Serialize};

use crate::digest::Hash;
use crate::error::{Error, Result};
use crate::refs::{Digest, VolumeName};
use crate::repo::{Repository, json_error};

pub const PROFILE_FORMAT: u32 = 1;

/// A run of chunks of one file, read one after the other.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct Step {
    pub file: Hash,
    pub size: u64,
    pub first: u32,
    pub count: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Profile {
    pub format: u32,
    pub digest: String,
    pub steps: Vec<Step>,
}

fn prefix(vol: &VolumeName, digest: &Digest) -> String {
    format!(
        "{}{}/",
        crate::keys::volume_folder("profiles", vol),
        digest.hex()
    )
}

impl Repository {
    /// Saves a profile of `vol@digest` after checking that every step names a file of
    /// the version and chunks that file has. Returns its key.
    pub fn put_profile(
        &self,
        vol: &VolumeName,
        digest: &Digest,
        steps: Vec<Step>,
    ) -> Result<String> {
        let manifest = self.manifest(vol, digest)?;
        let files: std::collections::HashMap<Hash, u64> = manifest
            .entries
            .iter()
            .filter_map(|e| match e {
                crate::digest::Entry::File { hash, size, .. } => Some((*hash, *size)),
                _ => None,
            })
            .collect();
        let small = manifest.small_files();
        let mut chunks = std::collections::HashMap::new();
        for s in &steps {
            if files.get(&s.file) != Some(&s.size) {
                return Err(Error::invalid(format!(
                    "the recorded profile names file {} that vol:{vol}@{} does not hold",
                    s.file.hex(),
                    digest.short(16)
                ))
                .hint("record it again by mounting this version and reading it"));
            }
            let n = match chunks.get(&s.file) {
                Some(&n) => n,
                None => {
                    let n = self.file_list(&s.file, s.size, &small)?.chunks.len() as u64;
                    chunks.insert(s.file, n);
                    n
                }
            };
            if s.count == 0 || s.first as u64 + s.count as u64 > n {
                return Err(Error::invalid(format!(
                    "the recorded profile names chunks past the end of file {}",
                    s.file.hex()
                ))
                .hint("record it again by mounting this version and reading it"));
            }
        }
        let p = Profile {
            format: PROFILE_FORMAT,
            digest: digest.to_string(),
            steps,
        };
        let bytes = serde_json::to_vec(&p).map_err(json_error)?;
        let key = format!("{}{}", prefix(vol, digest), Hash::of(&bytes).hex());
        self.store().put_if_absent(&key, &bytes)?;
        Ok(key)
    }

    /// The newest profile saved for `vol@digest` that reads as one; `None` if there is
    /// none (a damaged one is logged and passed over).
    pub fn profile(&self, vol: &VolumeName, digest: &Digest) -> Result<Option<Profile>> {
        let mut saved = self.store().list(&prefix(vol, digest))?;
        saved.sort_by_key(|o| std::cmp::Reverse(o.modified));
        for o in saved {
            let Some(bytes) = self.store().get(&o.key)? else {
                continue;
            };
            let named = o.key.rsplit('/').next() == Some(Hash::of(&bytes).hex().as_str());
            match serde_json::from_slice::<Profile>(&bytes) {
                Ok(p) if named && p.format <= PROFILE_FORMAT && p.digest == digest.to_string() => {
                    return Ok(Some(p));
                }
                _ => tracing::warn!("{}: not a profile of this version; passed over", o.key),
            }
        }
        Ok(None)
    }

    /// Removes a version's profiles (at purge, before its manifest).
    pub(crate) fn delete_profiles(&self, vol: &VolumeName, digest: &Digest) -> Result<()> {
        for o in self.store().list(&prefix(vol, digest))? {
            self.store().delete(&o.key)?;
        }
        Ok(())
    }
}
