//! A sealed version's manifest (`manifests/<ns>/<vol>/<digest>`): what it names and
//! how it is written; no I/O (reading one is the registry's, `registry/reads.rs`).

use serde::{Deserialize, Serialize};

use crate::digest::Entry;
use crate::error::Result;
use crate::outcomes::{Provenance, VersionStats};
use crate::refs::Digest;
use crate::summary::{SUMMARY_FORMAT, Summary};

/// Newest manifest format this build writes.
pub const MANIFEST_FORMAT: u32 = 2;

/// The format a manifest is written in: 2 only where it names small packs, which a
/// reader that knows only 1 would take for missing chunk lists.
pub fn manifest_format(small_packs: &[String]) -> u32 {
    if small_packs.is_empty() { 1 } else { 2 }
}

/// One sealed version: `manifests/<ns>/<vol>/<digest>`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Manifest {
    pub format: u32,
    pub volume: String,
    pub digest: String,
    /// RFC 3339, UTC.
    pub created: String,
    pub provenance: Provenance,
    pub stats: VersionStats,
    pub entries: Vec<Entry>,
    /// The packs holding the chunks of its small files, which have no chunk lists
    /// (`small.rs`): hex pack ids, sorted. Outside the digest, like provenance.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub small_packs: Vec<String>,
}

impl Manifest {
    /// Where its small files are.
    pub fn small_files(&self) -> crate::small::SmallFiles {
        crate::small::SmallFiles::parse(&self.small_packs)
    }

    pub fn digest(&self) -> Result<Digest> {
        Digest::parse(&self.digest)
    }

    /// What listings show of this version, whose manifest is `manifest_bytes` long
    /// (`summary.rs`).
    pub fn summary(&self, manifest_bytes: u64) -> Summary {
        Summary {
            format: SUMMARY_FORMAT,
            digest: self.digest.clone(),
            created: self.created.clone(),
            stats: self.stats,
            source: self.provenance.source.clone(),
            revision: self.provenance.revision.clone(),
            pushed_by: self.provenance.pushed_by.clone(),
            labels: self.provenance.labels.clone(),
            manifest_bytes,
            small_packs: self.small_packs.clone(),
        }
    }
}
