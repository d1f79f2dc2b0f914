//! The registry's operations as requests: sealing a version, storing a signature,
//! moving a tag, changing labels, the trash and damage reports (garbage collection is
//! `Repository::collect`'s, with the collector of `sealvol-gc`).
//! One trait, `Registry`, made by the repository itself (`registry::here::Here`, on
//! its own store) or by the server that owns its writes (`sealvol_client::remote`),
//! so that the code asking for them is the same against a folder, a bucket or a
//! server (`Repository`'s methods in `registry/` ask whichever it has).

use crate::digest::{Entry, Hash};
use crate::error::Result;
use crate::objects::{PackEntry, PackId};
use crate::outcomes::{
    Deleted, LabelsChanged, Provenance, Restored, Sealed, TagMoved, VersionStats,
};
use crate::progress::Progress;
use crate::refs::{Digest, Name, Ref, VolumeName};

/// What a seal asks for: a version of files whose chunk lists are stored.
#[derive(Debug, Clone)]
pub struct SealRequest {
    pub volume: VolumeName,
    pub tags: Vec<Name>,
    pub entries: Vec<Entry>,
    pub stats: VersionStats,
    pub provenance: Provenance,
    /// When the writer loaded its chunk index (`ChunkIndex::since`): what it built on
    /// was in the repository then. A server knows this of its own.
    pub since: Option<std::time::SystemTime>,
    /// The time the manifest says it was created, rather than now (a mirror keeps the
    /// version's own). A server's clock says instead: a key holder does not date what
    /// it seals.
    pub created: Option<std::time::SystemTime>,
    /// The packs holding its small files' chunks, which have no chunk lists
    /// (`small.rs`). A server finds them itself (`Remote::put_small_files`).
    pub small_packs: Vec<PackId>,
}

/// A version whose files a writer stored, to seal (`owner::Owner::seal_stored`).
pub struct Stored<'a> {
    pub volume: &'a VolumeName,
    pub tags: &'a [Name],
    pub entries: Vec<Entry>,
    pub stats: VersionStats,
    pub provenance: Provenance,
    /// The time its manifest says it was created, rather than now (a mirror keeps the
    /// version's own).
    pub created: Option<std::time::SystemTime>,
}

/// A tag change a client asks for: a move (`to`) or a removal (`None`), with the
/// compare-and-swap's expectation as `Repository::move_tag` takes it.
#[derive(Debug, Clone)]
pub struct TagRequest {
    pub volume: VolumeName,
    pub tag: Name,
    pub to: Option<Digest>,
    pub expected: Option<Option<Digest>>,
    /// When the tag stops resolving (RFC 3339).
    pub expires: Option<String>,
}

/// A label change a client asks for (`Repository::change_labels`).
#[derive(Debug, Clone)]
pub struct LabelRequest {
    pub volume: VolumeName,
    pub digest: Digest,
    pub set: std::collections::BTreeMap<String, String>,
    pub remove: Vec<String>,
}

/// What a garbage collection is asked to do.
pub struct GcOptions<'a> {
    /// Say what would be done; change nothing.
    pub dry_run: bool,
    /// Wait out the grace period and sweep what this run condemned (false: leave the
    /// sweep to the next run, which does it without waiting once the period is over).
    /// A server collects without waiting.
    pub wait: bool,
    pub progress: &'a dyn Progress,
}

/// The registry's operations, each checked and made by whoever owns the repository's
/// writes.
pub trait Registry: Send + Sync {
    fn seal(&self, req: SealRequest) -> Result<Sealed>;

    /// Asks the server to store a signature of `vol@digest`, which it checks as
    /// `Repository::put_signature` does. Returns its object key, and whether it is new.
    fn put_signature(
        &self,
        vol: &VolumeName,
        digest: &Digest,
        bytes: &[u8],
    ) -> Result<(String, bool)>;

    fn change_tag(&self, req: &TagRequest) -> Result<TagMoved>;

    /// Asks the server to change a version's labels (`Repository::change_labels`).
    fn change_labels(&self, req: &LabelRequest) -> Result<LabelsChanged>;

    fn delete_version(&self, r: &Ref, untag: bool) -> Result<Deleted>;

    fn restore_version(&self, r: &Ref) -> Result<Restored>;

    /// Says that the copy of `entry` in `pack` failed its hash (found by `found_by`: a
    /// read, verify, a mirror); a server reads it itself and records it only if it
    /// fails there too.
    fn report_damage(&self, pack: &PackId, entry: &PackEntry, found_by: &str) -> Result<()>;

    /// Says that the chunk list of file `hash` failed its proof; a server proves what
    /// it sends and records what fails there itself.
    fn report_list_damage(&self, hash: &Hash, problem: &str, found_by: &str) -> Result<()>;
}
