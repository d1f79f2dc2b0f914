//! Version summaries, `summaries/<ns>/<vol>/<digest>`: what listings show of a sealed
//! version (created, size, file count, provenance), a few hundred bytes written just
//! after its manifest. A manifest of 100,000 files is a 12 MB JSON object: listing
//! versions must not read one, least of all from an object store.
//!
//! A summary is derived from its manifest and never changes the digest; it is
//! advisory. The manifest stays the source of truth: the set of versions is the
//! listing of `manifests/`, a summary without its manifest is ignored (and removed by
//! gc), and a missing, unreadable or disagreeing summary makes the listing read the
//! manifest instead. The manifest's size, recorded in the summary, is checked against
//! the listing's for free, so a cut manifest is still listed as damaged. `repair`
//! writes missing and disagreeing summaries anew (docs/FORMAT.md).

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::refs::{Digest, VolumeName};
use crate::repo::{Repository, json_error};

pub use crate::outcomes::VersionStats;

pub const SUMMARY_FORMAT: u32 = 1;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Summary {
    pub format: u32,
    pub digest: String,
    pub created: String,
    pub stats: VersionStats,
    pub source: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    pub pushed_by: String,
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub labels: crate::labels::Labels,
    /// The manifest's size in bytes, as a listing shows it.
    pub manifest_bytes: u64,
    /// The manifest's `small_packs`, for a mount that reads no manifest.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub small_packs: Vec<String>,
}

pub(crate) fn summary_key(vol: &VolumeName, digest: &Digest) -> String {
    crate::keys::Key::Summary(vol.clone(), *digest).to_string()
}

impl Repository {
    /// The summary of a version, if one is stored and readable and is about `digest`;
    /// `None` otherwise (the caller reads the manifest instead).
    pub fn summary(&self, vol: &VolumeName, digest: &Digest) -> Result<Option<Summary>> {
        let Some(bytes) = self.store().get(&summary_key(vol, digest))? else {
            return Ok(None);
        };
        Ok(serde_json::from_slice::<Summary>(&bytes)
            .ok()
            .filter(|s| s.format <= SUMMARY_FORMAT && s.digest == digest.to_string()))
    }

    /// Writes the summary of a sealed version (`Manifest::summary`); `replace` writes
    /// over a stored one (repair, when it disagrees with its manifest). Returns
    /// whether it wrote.
    pub(crate) fn put_summary(&self, vol: &VolumeName, s: &Summary, replace: bool) -> Result<bool> {
        let digest = Digest::parse(&s.digest)?;
        let bytes = serde_json::to_vec(s).map_err(json_error)?;
        let key = summary_key(vol, &digest);
        if replace {
            self.store().put(&key, &bytes)?;
            return Ok(true);
        }
        self.store().put_if_absent(&key, &bytes)
    }

    /// Removes a version's summary (before its manifest, when a version is purged:
    /// a manifest without a summary still lists; a summary alone never does).
    pub(crate) fn delete_summary(&self, vol: &VolumeName, digest: &Digest) -> Result<()> {
        self.store().delete(&summary_key(vol, digest))
    }

    /// Writes the summary of every version that lacks one or whose summary disagrees
    /// with its manifest (`repair`). Returns the keys written (or, in a dry run, that
    /// would be).
    pub fn rebuild_summaries(&self, dry_run: bool) -> Result<Vec<String>> {
        let mut written = Vec::new();
        for vol in self.volumes(None)? {
            let prefix = crate::repo::manifest_prefix(&vol);
            for o in self.store().list(&prefix)? {
                let Some(Ok(digest)) = o.key.strip_prefix(&prefix).map(Digest::parse) else {
                    continue;
                };
                let Ok(m) = self.manifest(&vol, &digest) else {
                    continue; // damaged: repair's own steps deal with it
                };
                let want = m.summary(o.size);
                if self.summary(&vol, &digest)?.as_ref() == Some(&want) {
                    continue;
                }
                if !dry_run {
                    self.put_summary(&vol, &want, true)?;
                }
                written.push(summary_key(&vol, &digest));
            }
        }
        Ok(written)
    }
}

/// Summaries, listings, profiles, signatures, SHA-256 lists and label objects whose version is gone (its manifest purged or quarantined),
/// older than `grace` by the store's clock: a seal writes its manifest before them, so
/// a young one may belong to a seal still under way.
pub fn orphans(repo: &Repository, grace: std::time::Duration) -> Result<Vec<String>> {
    let manifests: std::collections::HashSet<String> = repo
        .store()
        .list("manifests/")?
        .into_iter()
        .filter_map(|o| o.key.strip_prefix("manifests/").map(str::to_string))
        .collect();
    let now = repo.store().now()?;
    let mut out = Vec::new();
    for prefix in [
        "summaries/",
        "listings/",
        "profiles/",
        "signatures/",
        "sha256/",
        "labels/",
    ] {
        out.extend(
            repo.store()
                .list(prefix)?
                .into_iter()
                .filter(|o| {
                    let old = o
                        .modified
                        .is_some_and(|m| now.duration_since(m).is_ok_and(|age| age >= grace));
                    // Profiles and signatures are one more level down:
                    // <ns>/<vol>/<digest>/<hash>.
                    let version = o.key.strip_prefix(prefix).map(|rest| match prefix {
                        "profiles/" | "signatures/" => {
                            rest.rsplit_once('/').map_or(rest, |(v, _)| v)
                        }
                        _ => rest,
                    });
                    old && version.is_some_and(|v| !manifests.contains(v))
                })
                .map(|o| o.key),
        );
    }
    Ok(out)
}
