//! What the repository's changes answer, and the records those answers carry, as
//! plain data: a seal (`Sealed`, with its `Provenance` and `VersionStats`), a tag
//! move (`TagMoved`, the `TagFile` it wrote), a delete and a restore, a collection
//! (`GcReport`). The engine modules that make them (`registry`, `trash`, `gc`,
//! `summary`) and the server protocol that carries them (`remote`) both use them, so
//! they sit below both: the repository handle can hold a remote without the engine's
//! operations depending on each other in a circle. Their stored forms are in
//! docs/FORMAT.md.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::refs::Digest;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Provenance {
    /// Where the bytes came from: `file:///abs/path`, later `hf://…`, `s3://…`.
    pub source: String,
    /// The source's own revision (an HF commit, ETags), when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// `user@host` of the process that sealed the version.
    pub pushed_by: String,
    /// When a sync listed its source (RFC 3339); absent for a push.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listed: Option<String>,
    /// Each synced file's version at the source (ETag, version id), by path.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub objects: BTreeMap<String, String>,
    /// What the pusher said about the version (`push --label K=V`; `labels.rs`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// The source's own hashes each synced file's bytes were checked against, by path
    /// (`sha256`, `git-blob-sha1`, `md5`, `crc32c`, comma-separated; empty when the
    /// source gave none). Written by a sync; absent for a push.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub checked: BTreeMap<String, String>,
}

impl Provenance {
    /// How many files passed each set of checks (`unchecked`: none), for a summary.
    pub fn checks_summary(&self) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        for c in self.checked.values() {
            let k = if c.is_empty() {
                "unchecked"
            } else {
                c.as_str()
            };
            *out.entry(k.to_string()).or_insert(0) += 1;
        }
        out
    }
}

/// One move of a tag; the first has no `from`. A removal (`volume untag`) is a move to
/// nothing: `to` is empty here and `null` in the file.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct TagMove {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    #[serde(with = "empty_as_null")]
    pub to: String,
    pub at: String,
    pub by: String,
    /// When the tag stops resolving (RFC 3339), if the move set a time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<String>,
}

/// `tags/<ns>/<vol>/<tag>`: where the tag points now and how it got there. A removed
/// tag keeps its file, with no digest (empty here, `null` in the file), so that its
/// history stays and the removal can be undone like any move.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TagFile {
    pub tag: String,
    #[serde(with = "empty_as_null")]
    pub digest: String,
    pub history: Vec<TagMove>,
    /// When the tag stops resolving (RFC 3339): set by `volume tag --expires`, cleared
    /// by a move without it. An expired tag resolves to nothing and keeps its history.
    /// Measured by the records' clock (`stamp::now`), as the trash's window is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<String>,
    /// Set by listings (never stored): why this tag cannot be used, for a tag file that
    /// is damaged (`digest` is then empty and `history` what could be read of it) or
    /// that points at a version that does not exist.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub damaged: Option<String>,
}

impl TagFile {
    /// Removed by `volume untag` (and not damaged, which also leaves no digest).
    pub fn removed(&self) -> bool {
        self.digest.is_empty() && self.damaged.is_none()
    }

    /// Whether it has expired at `now` (RFC 3339 times compare as text: both are UTC
    /// with the same precision; an unreadable time counts as expired, the safe side).
    pub fn expired_at(&self, now: std::time::SystemTime) -> bool {
        match &self.expires {
            None => false,
            Some(at) => {
                humantime::parse_rfc3339(at).is_ok_and(|at| at <= now)
                    || humantime::parse_rfc3339(at).is_err()
            }
        }
    }
}

/// "Nothing" is an empty string in memory and `null` in a file.
mod empty_as_null {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &str, s: S) -> Result<S::Ok, S::Error> {
        match v.is_empty() {
            true => s.serialize_none(),
            false => s.serialize_str(v),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        Ok(Option::<String>::deserialize(d)?.unwrap_or_default())
    }
}

/// A version just sealed: its digest, whether it is new, and what happened to each tag.
#[derive(Debug, Clone)]
pub struct Sealed {
    pub digest: Digest,
    /// False when an identical version was already sealed (by anyone).
    pub new: bool,
    /// The identical version was in the trash, and this seal restored it.
    pub restored: bool,
    pub tags: Vec<TagChange>,
}

/// One tag moved by a push or sync, as the compare-and-swap did it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TagChange {
    pub tag: String,
    /// The digest the tag pointed at before; `None` for a new tag.
    pub from: Option<String>,
    pub to: String,
    /// False when the tag already pointed at `to`.
    pub moved: bool,
    /// The tag's file was damaged: where its bytes were kept before the move.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kept_damaged: Option<String>,
}

/// What a tag move did, from the compare-and-swap itself (not from a read before it,
/// which a concurrent mover can make stale).
#[derive(Debug, Clone)]
pub struct TagMoved {
    pub file: TagFile,
    /// The digest the move replaced; `None` for a new tag.
    pub from: Option<String>,
    /// False when the tag already pointed there and nothing was written.
    pub moved: bool,
    /// Where the damaged tag file this move replaced was kept (`quarantine/…`).
    pub kept_damaged: Option<String>,
}

/// A version's size and what it added to the repository, in its manifest and summary.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct VersionStats {
    pub bytes: u64,
    pub files: u64,
    pub chunks: u64,
    /// Bytes of chunks this version added to the repository when it was sealed.
    pub new_bytes: u64,
    pub new_chunks: u64,
}

/// What `delete_version` did.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Deleted {
    pub volume: String,
    pub digest: String,
    /// Tags removed on the way (`--untag`), each a move to nothing in its history.
    pub untagged: Vec<String>,
    pub expires: String,
}

/// What `restore_version` did.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Restored {
    pub volume: String,
    pub digest: String,
    /// The tags it had when deleted.
    pub tags: Vec<String>,
    /// Those of them pointed back at it (they pointed nowhere, and had not expired).
    #[serde(default)]
    pub retagged: Vec<String>,
    /// The others, each with why.
    #[serde(default)]
    pub not_retagged: Vec<TagLeft>,
}

/// A tag a restore did not point back, and why (it points elsewhere, it expired).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TagLeft {
    pub tag: String,
    pub why: String,
}

/// A version purged from the trash.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PurgedVersion {
    pub volume: String,
    pub digest: String,
}

/// What a garbage collection did (`gc::collect`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct GcReport {
    pub dry_run: bool,
    /// The grace period in effect (seconds).
    pub grace_secs: u64,
    pub purged: Vec<PurgedVersion>,
    /// Past their window, but a tag points at them again: kept in the trash.
    pub kept_tagged: Vec<PurgedVersion>,
    /// Still in the trash, within their window.
    pub in_trash: usize,
    /// Versions marked (live and in the trash).
    pub versions: usize,
    /// Objects before the run: packs and their bytes, chunk lists.
    pub packs_before: usize,
    pub pack_bytes_before: u64,
    pub files_before: usize,
    /// Unreferenced, but younger than the grace period: left for a later run.
    pub young_packs: usize,
    pub young_files: usize,
    /// Condemned by this run.
    pub condemned_packs: usize,
    pub condemned_files: usize,
    pub condemned_bytes: u64,
    /// Mostly-dead packs rewritten: how many, their bytes, the new packs and bytes.
    pub repacked: usize,
    pub repacked_bytes: u64,
    pub repack_new_packs: usize,
    pub repack_new_bytes: u64,
    /// Chunk lists pointed at the new copies.
    pub relinked_files: usize,
    /// Rounds swept by this run (its own and earlier ones that were due).
    pub rounds_swept: usize,
    pub deleted_packs: u64,
    pub deleted_files: u64,
    /// Rescued by writers from the rounds swept.
    pub rescued: u64,
    pub bytes_freed: u64,
    /// Condemned, but the sweep was left to a later run (`--no-wait`).
    pub sweep_pending: bool,
    pub notes: Vec<String>,
    pub seconds: f64,
}

/// One `volume label`: the keys it set (to their values) and the keys it removed.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct LabelChange {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub set: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removed: Vec<String>,
    pub at: String,
    pub by: String,
}

/// What a label change did.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LabelsChanged {
    #[serde(rename = "ref")]
    pub reference: String,
    pub before: BTreeMap<String, String>,
    pub labels: BTreeMap<String, String>,
    /// False when the version already had exactly these labels (nothing was written).
    pub changed: bool,
    pub history: Vec<LabelChange>,
}
