//! A repository offered by a server that owns its writes (`sealvol serve`, reached
//! with `--remote`): a key holder asks for operations, never writes the objects that
//! other writers and readers build on. The client still reads through the store (what
//! its key may see) and uploads packs, which the server checks against their names and
//! indexes itself; everything derived or shared (chunk lists and their proofs, indexes,
//! manifests, listings, summaries, tags, trash and damage records, garbage-collection
//! rounds) the server writes, after checking what it was asked.
//!
//! `Repository` routes each such write here when it has a remote (`Repository::
//! remote`), so the push, tag, trash and gc code is the same against a folder, a
//! bucket or a server.

use crate::digest::{Entry, Hash};
use crate::error::Result;
use crate::objects::{PackEntry, PackId};
use crate::outcomes::{Deleted, GcReport, Provenance, Restored, Sealed, TagMoved, VersionStats};
use crate::possession::{Challenge, Evidence, Named};
use crate::refs::{Digest, Name, Ref, VolumeName};

/// Whether the server holds a chunk a push asks about, as far as the push may know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// Not held, or held where the caller may not be told (a private namespace):
    /// upload it.
    No,
    /// Held, and the caller's key reaches it: its namespaces hold it, or it uploaded
    /// the copy. Name it as it is.
    Yours,
    /// Held in a namespace the key does not reach: name it with a proof of possession
    /// under the answer's challenge (`possession.rs`), or upload it.
    Prove,
}

/// The server's answer to which chunks it holds.
#[derive(Debug, Clone)]
pub struct HeldAnswer {
    pub held: Vec<Held>,
    /// Set when any chunk is `Prove`.
    pub challenge: Option<Challenge>,
}

/// What a seal asks the server for: a version of files whose chunk lists it holds.
#[derive(Debug, Clone)]
pub struct SealRequest {
    pub volume: VolumeName,
    pub tags: Vec<Name>,
    pub entries: Vec<Entry>,
    pub stats: VersionStats,
    pub provenance: Provenance,
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

pub trait Remote: Send + Sync {
    /// Which of `hashes` the repository holds a usable copy of (a chunk is stored once
    /// for all namespaces), and which of those the key may name without proving that
    /// it holds the bytes: a push uploads only the others.
    fn have_chunks(&self, hashes: &[Hash]) -> Result<HeldAnswer>;

    /// For each file, its chunk count if its chunk list is stored, proven and names
    /// only usable copies (a push skips such a file), else `None`.
    fn stored_files(&self, hashes: &[Hash]) -> Result<Vec<Option<u64>>>;

    /// Asks the server to store the chunk list of file `hash`: its chunks by hash and
    /// length, in order, all already stored, each with what lets this key name it
    /// (`Evidence`). The server finds them, checks the evidence, proves them by hashing
    /// them into `hash`, and writes the list with its proof. Returns whether a list was
    /// written (false: an equal one was there).
    fn put_list(&self, hash: &Hash, size: u64, chunks: &[Named]) -> Result<bool>;

    /// Small files (`small.rs`), by hash and size, whose one chunk is stored, with what
    /// lets this key name it: for each, whether the server holds it and takes the
    /// evidence (then it needs no list, and counts as sent); the others' lists are sent
    /// with `put_list`. One request for many files, where `put_list` would be one each.
    fn put_small_files(&self, files: &[(Hash, u64, Evidence)]) -> Result<Vec<bool>>;

    fn seal(&self, req: &SealRequest) -> Result<Sealed>;

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
    fn change_labels(&self, req: &LabelRequest) -> Result<crate::outcomes::LabelsChanged>;

    fn delete_version(&self, r: &Ref, untag: bool) -> Result<Deleted>;

    fn restore_version(&self, r: &Ref) -> Result<Restored>;

    /// Says that the copy of `entry` in `pack` failed its hash here; the server reads
    /// it itself and records it only if it fails there too.
    fn report_damage(&self, pack: &PackId, entry: &PackEntry) -> Result<()>;

    /// A garbage collection, run by the server (admin keys only); it condemns and
    /// sweeps what is due without waiting out the grace period in the request.
    fn collect(&self, dry_run: bool) -> Result<GcReport>;
}
