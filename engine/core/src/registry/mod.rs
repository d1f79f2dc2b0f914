//! The registry: namespaces, volumes, sealed versions and tags. Reading it
//! (`reads.rs`: manifests, listings of volumes and versions, tags, refs resolved) is
//! the same everywhere; its operations (seal, signatures, tags, labels, the trash,
//! damage, garbage collection) are asked here, in one place, of whoever owns the
//! repository's writes (`ops::Registry`): the repository itself (`here.rs`, which
//! makes them with `seal.rs`, `tags.rs` and the trash, labels, signatures and gc
//! modules) or the server it was opened through.

pub mod here;
mod reads;
mod seal;
pub mod server;
mod tags;

use crate::digest::{Entry, Hash};
use crate::error::{Error, Result};
use crate::gc::Collector;
use crate::labels::LabelRequest;
use crate::objects::{PackEntry, PackId};
use crate::ops::{GcOptions, Registry, SealRequest, TagRequest};
use crate::outcomes::{Deleted, GcReport, LabelsChanged, Restored};
use crate::owner::Owner;
use crate::refs::{Digest, Name, Ref, VolumeName};
use crate::repo::Repository;
use crate::signatures::Stored;

pub use crate::outcomes::{
    Provenance, Sealed, TagChange, TagFile, TagMove, TagMoved, VersionStats,
};
pub use crate::stamp::{now_rfc3339, whoami};
pub use reads::{VersionInfo, VolumeInfo, salvage_history};

/// Whoever makes a repository's writes, for one operation.
enum Maker<'a> {
    Here(here::Here<'a>),
    Server(&'a dyn crate::remote::Remote),
}

impl<'a> std::ops::Deref for Maker<'a> {
    type Target = dyn Registry + 'a;

    fn deref(&self) -> &Self::Target {
        match self {
            Maker::Here(h) => h,
            Maker::Server(s) => *s,
        }
    }
}

/// Whoever owns a repository's writes, for what its writers need (`owner::Owner`).
pub(crate) enum Owners<'a> {
    Here(here::Here<'a>),
    Server(server::Through<'a>),
}

impl<'a> std::ops::Deref for Owners<'a> {
    type Target = dyn Owner + 'a;

    fn deref(&self) -> &Self::Target {
        match self {
            Owners::Here(h) => h,
            Owners::Server(s) => s,
        }
    }
}

impl Repository {
    /// Whoever makes this repository's writes: the server it was opened through, or
    /// the repository itself. The one place that tells them apart, with `owner`.
    fn registry(&self) -> Maker<'_> {
        match self.remote() {
            Some(server) => Maker::Server(server),
            None => Maker::Here(here::Here(self)),
        }
    }

    /// Whoever owns this repository's writes, as its writers (push, sync, mirror) see
    /// it.
    pub(crate) fn owner(&self) -> Owners<'_> {
        match self.remote() {
            Some(server) => Owners::Server(server::Through { repo: self, server }),
            None => Owners::Here(here::Here(self)),
        }
    }

    /// Seals a version: writes its manifest (after a barrier: everything the manifest
    /// names is durable first, and every file it names must already be stored), then
    /// moves `tags` to it. `since` is when the writer loaded its chunk index
    /// (`ChunkIndex::since`): what it built on was in the repository then.
    pub fn seal(
        &self,
        volume: &VolumeName,
        tags: &[Name],
        entries: Vec<Entry>,
        stats: VersionStats,
        provenance: Provenance,
        since: Option<std::time::SystemTime>,
    ) -> Result<Sealed> {
        self.seal_created(volume, tags, entries, stats, provenance, since, None, &[])
    }

    /// `seal` of a version whose small files have no chunk lists: their chunks are in
    /// `small_packs` (`small.rs`).
    #[allow(clippy::too_many_arguments)]
    pub fn seal_small(
        &self,
        volume: &VolumeName,
        tags: &[Name],
        entries: Vec<Entry>,
        stats: VersionStats,
        provenance: Provenance,
        since: Option<std::time::SystemTime>,
        small_packs: &[crate::objects::PackId],
    ) -> Result<Sealed> {
        self.seal_created(
            volume,
            tags,
            entries,
            stats,
            provenance,
            since,
            None,
            small_packs,
        )
    }

    /// `seal`, the manifest saying it was created at `created` (RFC 3339) rather than
    /// now: a mirror keeps the version's own time. Through a server, the server's clock
    /// says (a key holder does not date what it seals).
    #[allow(clippy::too_many_arguments)]
    pub fn seal_created(
        &self,
        volume: &VolumeName,
        tags: &[Name],
        entries: Vec<Entry>,
        stats: VersionStats,
        provenance: Provenance,
        since: Option<std::time::SystemTime>,
        created: Option<std::time::SystemTime>,
        small_packs: &[crate::objects::PackId],
    ) -> Result<Sealed> {
        crate::labels::check(&provenance.labels)?;
        self.registry().seal(SealRequest {
            volume: volume.clone(),
            tags: tags.to_vec(),
            entries,
            stats,
            provenance,
            since,
            created,
            small_packs: small_packs.to_vec(),
        })
    }

    /// Points `tag` at `to`. With `expected`, only if the tag currently points there
    /// (`Some(None)`: only if it does not exist yet, or was removed), so a confirmation
    /// shown to a person cannot apply to a tag that moved meanwhile. Without it, retries
    /// lost races.
    pub fn move_tag(
        &self,
        vol: &VolumeName,
        tag: &Name,
        to: &Digest,
        expected: Option<Option<Digest>>,
    ) -> Result<TagMoved> {
        self.move_tag_until(vol, tag, to, expected, None)
    }

    /// `move_tag`, the tag to stop resolving at `expires` (RFC 3339, in the future);
    /// `None` makes it permanent.
    pub fn move_tag_until(
        &self,
        vol: &VolumeName,
        tag: &Name,
        to: &Digest,
        expected: Option<Option<Digest>>,
        expires: Option<String>,
    ) -> Result<TagMoved> {
        if let Some(at) = &expires {
            let at = humantime::parse_rfc3339(at).map_err(|_| {
                Error::invalid(format!("{at} is not an RFC 3339 time"))
                    .hint("write 30d (from now) or 2027-01-31T00:00:00Z")
            })?;
            if at <= crate::stamp::now() {
                return Err(Error::invalid(format!(
                    "tag {tag} would expire at {}, which has passed",
                    humantime::format_rfc3339_seconds(at)
                ))
                .hint("give a time in the future: --expires 30d"));
            }
        }
        self.registry().change_tag(&TagRequest {
            volume: vol.clone(),
            tag: tag.clone(),
            to: Some(*to),
            expected,
            expires,
        })
    }

    /// Removes a tag: a move to nothing, kept in its history so that it can be undone
    /// (point the tag again). With `expected`, only if it points there now.
    pub fn remove_tag(
        &self,
        vol: &VolumeName,
        tag: &Name,
        expected: Option<Digest>,
    ) -> Result<TagMoved> {
        self.registry().change_tag(&TagRequest {
            volume: vol.clone(),
            tag: tag.clone(),
            to: None,
            expected: expected.map(Some),
            expires: None,
        })
    }

    /// Changes a version's labels: `set` added or replaced, `remove` taken away, by
    /// compare-and-swap with its history kept (`labels.rs`). A key to remove that the
    /// version does not carry is an error naming the ones it does; the result is
    /// checked as a push's labels are.
    pub fn change_labels(&self, req: &LabelRequest) -> Result<LabelsChanged> {
        crate::labels::check_request(req)?;
        self.registry().change_labels(req)
    }

    /// Stores a signature of `vol@digest` (a live version, or one in the trash);
    /// `false` when the same bytes were stored already (`signatures.rs`).
    pub fn put_signature(
        &self,
        vol: &VolumeName,
        digest: &Digest,
        bytes: &[u8],
    ) -> Result<(Stored, bool)> {
        let (key, new) = self.registry().put_signature(vol, digest, bytes)?;
        let stored = Stored {
            hash: Hash::of(bytes),
            key,
            bytes: bytes.to_vec(),
        };
        Ok((stored, new))
    }

    /// Moves a version to the trash (`trash.rs`). A version a tag points at is refused
    /// unless `untag`, which removes each such tag first (a move to nothing in its
    /// history).
    pub fn delete_version(&self, r: &Ref, untag: bool) -> Result<Deleted> {
        self.registry().delete_version(r, untag)
    }

    /// Brings a version back from the trash, exactly as it was sealed. Fails once its
    /// window has passed, and when a purge has begun.
    pub fn restore_version(&self, r: &Ref) -> Result<Restored> {
        self.registry().restore_version(r)
    }

    /// Writes down that the copy of `entry` in `pack` fails its hash. Idempotent; a
    /// failure to write is logged, never made the reader's error (which already says
    /// what is wrong).
    pub fn record_damage(&self, pack: &PackId, entry: &PackEntry, found_by: &str) {
        if let Err(e) = self.registry().report_damage(pack, entry, found_by) {
            tracing::warn!(
                "cannot record damage to chunk {} in pack {}: {e}",
                entry.hash.hex(),
                pack.hex()
            );
        }
    }

    /// Writes down that the chunk list of file `hash` failed its proof: it names other
    /// bytes than the file's (`proof/`). Garbage collection deletes nothing while such
    /// a record stands (what the file really needs is unknown), verify names the list,
    /// and repair rebuilds or quarantines it. Idempotent; a failure to write is logged.
    pub fn record_list_damage(&self, hash: &Hash, problem: &str, found_by: &str) {
        if let Err(e) = self.registry().report_list_damage(hash, problem, found_by) {
            tracing::warn!(
                "cannot record that the chunk list of {} fails its proof: {e}",
                hash.hex()
            );
        }
    }

    /// Runs one garbage collection: `here`, the collector (`sealvol_gc::Here`), on the
    /// repository's own store, or through the server that owns its writes, which runs
    /// its own (admin keys only). `sealvol_gc::collect` passes the collector.
    pub fn collect(&self, opts: &GcOptions, here: &dyn Collector) -> Result<GcReport> {
        match self.registry() {
            Maker::Here(h) => here.collect_here(h.0, opts),
            Maker::Server(server) => server.collect(opts),
        }
    }
}
