//! Small files without chunk lists (docs/FORMAT.md, "Small files").
//!
//! A file of at most `SMALL_MAX` bytes is stored as one chunk, and a chunk's hash is
//! the BLAKE3 of its bytes: the file's own hash. So a push stores no chunk list for it
//! (50,000 tiny files would be 50,000 objects, each a disk block or a request), and the
//! version's manifest names instead the packs that hold its small files' chunks
//! (`small_packs`). A reader finds such a file in those packs' indexes: the entry whose
//! hash is the file's and whose length is the file's size. Nothing there is trusted: a
//! wrong or missing entry makes the bytes fail their hash, or the file fall back to a
//! stored chunk list, which, where one exists (written by repair or garbage collection
//! when they move the chunk, or by a push before small files), names it too.

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::chunk_index::ChunkIndex;
use crate::digest::{Entry, Hash};
use crate::error::{ErrorKind, Result};
use crate::objects::{ChunkRef, FileObject, PackEntry, PackId};
use crate::ops::Stored;
use crate::proof::{BLOCK_LOG, Outboard};
use crate::repo::Repository;

/// The largest file a reader looks for in a version's small packs: one proof block, so
/// the chunk's hash alone proves it.
pub const SMALL_MAX: u64 = 1 << BLOCK_LOG;

/// The largest file a push stores without a chunk list in a repository whose chunks
/// are at least `min_chunk` bytes: one that is never cut, and is at most one proof
/// block.
pub fn small_limit(min_chunk: u32) -> u64 {
    SMALL_MAX.min(min_chunk as u64)
}

/// Where one version's small files are: the packs its manifest names, their indexes
/// read on first use.
#[derive(Default)]
pub struct SmallFiles {
    packs: Vec<PackId>,
    found: OnceLock<Found>,
}

#[derive(Default)]
struct Found {
    chunks: HashMap<Hash, (PackId, PackEntry)>,
    /// Why an index could not be read: the answer for a file found nowhere else.
    unread: Option<crate::error::Error>,
}

impl SmallFiles {
    /// A version that names no small packs: every file has a chunk list.
    pub fn none() -> SmallFiles {
        SmallFiles::default()
    }

    pub fn of(packs: Vec<PackId>) -> SmallFiles {
        SmallFiles {
            packs,
            found: OnceLock::new(),
        }
    }

    /// The packs named, hex, as a manifest and a summary write them.
    pub fn parse(hex: &[String]) -> SmallFiles {
        // A name that is not a pack id cannot hold anything; it is left out.
        SmallFiles::of(hex.iter().filter_map(|h| Hash::parse_hex(h)).collect())
    }

    pub fn packs(&self) -> &[PackId] {
        &self.packs
    }

    pub fn is_empty(&self) -> bool {
        self.packs.is_empty()
    }

    fn found(&self, repo: &Repository) -> &Found {
        self.found.get_or_init(|| {
            let mut f = Found::default();
            for id in &self.packs {
                let entries = match repo.index(id) {
                    Ok(Some(entries)) => entries,
                    // No index, or a damaged one: the pack's trailer says the same. No
                    // pack either (collected after its chunks moved): their files'
                    // chunk lists name the new copies.
                    Ok(None) => match repo.read_pack_entries(id) {
                        Ok(entries) if crate::objects::pack_id(&entries) == *id => entries,
                        _ => continue,
                    },
                    Err(e) if e.kind() == ErrorKind::Corrupt => match repo.read_pack_entries(id) {
                        Ok(entries) if crate::objects::pack_id(&entries) == *id => entries,
                        _ => continue,
                    },
                    Err(e) => {
                        f.unread.get_or_insert(e);
                        continue;
                    }
                };
                for e in entries {
                    if e.raw_len as u64 <= SMALL_MAX {
                        f.chunks.entry(e.hash).or_insert((*id, e));
                    }
                }
            }
            f
        })
    }

    /// The list of small file `hash` of `size` bytes, made from its chunk in the
    /// version's small packs; `None` if they do not hold it.
    pub fn list(&self, repo: &Repository, hash: &Hash, size: u64) -> Option<FileObject> {
        if self.packs.is_empty() || size > SMALL_MAX || size == 0 {
            return None;
        }
        let (pack, entry) = *self.found(repo).chunks.get(hash)?;
        if entry.raw_len as u64 != size {
            return None;
        }
        list_of_chunk(hash, pack, entry)
    }

    /// Why the small packs could not all be read, if one could not.
    fn unread(&self, repo: &Repository) -> Option<&crate::error::Error> {
        self.found(repo).unread.as_ref()
    }
}

/// Whether a writer stores file `size` bytes read as `chunks` chunks without a chunk
/// list in `repo`: a small file, one chunk, not through a server (which writes the
/// lists it is asked to).
pub fn needs_no_list(repo: &Repository, size: u64, chunks: usize) -> bool {
    repo.owner().needs_no_list(size, chunks)
}

/// Whether a file of `size` bytes read as `chunks` chunks is small in `repo`: one
/// chunk, no larger than the chunker's smallest (`needs_no_list` where the repository
/// writes its own lists).
pub(crate) fn is_small(repo: &Repository, size: u64, chunks: usize) -> bool {
    chunks == 1 && size > 0 && size <= small_limit(repo.config().chunker.params.min)
}

/// The packs that hold the small files of `entries`, as the writer's `index` knows
/// them: what its seal names (`Manifest::small_packs`).
fn packs_of(repo: &Repository, index: &ChunkIndex, entries: &[Entry]) -> Vec<PackId> {
    let mut packs: Vec<PackId> = entries
        .iter()
        .filter_map(|e| match e {
            Entry::File { hash, size, .. } if is_small(repo, *size, 1) => index.chunks.get(hash),
            _ => None,
        })
        .filter_map(|loc| index.packs.get(loc.slot as usize).copied())
        .collect();
    packs.sort_unstable();
    packs.dedup();
    packs
}

/// The list of a small file that is the chunk `entry` in `pack` (whose hash must be
/// the file's, and whose length at most `SMALL_MAX`).
pub fn list_of_chunk(hash: &Hash, pack: PackId, entry: PackEntry) -> Option<FileObject> {
    let size = entry.raw_len as u64;
    if entry.hash != *hash || size == 0 || size > SMALL_MAX {
        return None;
    }
    let outboard = Outboard::new(BLOCK_LOG, size, Vec::new()).ok()?;
    Some(FileObject::new(
        *hash,
        size,
        vec![pack],
        vec![ChunkRef { pack: 0, entry }],
        Some(outboard),
    ))
}

/// Seals `entries`, whose files this writer stored with `index` (`Owner::seal_stored`).
/// Returns the seal and how many chunk lists of small files it wrote.
pub fn seal_stored(
    repo: &Repository,
    index: &ChunkIndex,
    volume: &crate::refs::VolumeName,
    tags: &[crate::refs::Name],
    entries: Vec<Entry>,
    stats: crate::outcomes::VersionStats,
    provenance: crate::outcomes::Provenance,
) -> Result<(crate::outcomes::Sealed, u64)> {
    let version = Stored {
        volume,
        tags,
        entries,
        stats,
        provenance,
        created: None,
    };
    repo.owner().seal_stored(index, version)
}

/// `seal_stored` where the repository writes its own lists: the manifest names the
/// packs of the small files (`packs_of`), and a version sealed before gets lists for the
/// small files its small packs lost (`heal`).
pub(crate) fn seal_stored_here(
    repo: &Repository,
    index: &ChunkIndex,
    version: Stored,
) -> Result<(crate::outcomes::Sealed, u64)> {
    let small = packs_of(repo, index, &version.entries);
    let sealed = repo.seal_created(
        version.volume,
        version.tags,
        version.entries.clone(),
        version.stats,
        version.provenance,
        index.since,
        version.created,
        &small,
    )?;
    let healed = heal(repo, index, version.volume, &sealed, &version.entries)?;
    Ok((sealed, healed))
}

/// After a seal that found its version sealed before: the stored manifest names the
/// small packs of the push that sealed it first, which may no longer hold a small
/// file's chunk (the pack was lost or quarantined, and this push wrote the chunk
/// anew). Such a file gets a chunk list naming this writer's copy, so the version
/// reads whole again, as a push heals any file. Returns how many.
fn heal(
    repo: &Repository,
    index: &ChunkIndex,
    volume: &crate::refs::VolumeName,
    sealed: &crate::outcomes::Sealed,
    entries: &[Entry],
) -> Result<u64> {
    let any_small = entries
        .iter()
        .any(|e| matches!(e, Entry::File { size, .. } if is_small(repo, *size, 1)));
    if sealed.new || !any_small {
        return Ok(0);
    }
    let stored = repo.manifest(volume, &sealed.digest)?.small_files();
    let mut healed = 0;
    for e in entries {
        let Entry::File { hash, size, .. } = e else {
            continue;
        };
        if !is_small(repo, *size, 1) || stored.list(repo, hash, *size).is_some() {
            continue;
        }
        let Some(loc) = index.chunks.get(hash) else {
            continue;
        };
        let Some(obj) = index
            .packs
            .get(loc.slot as usize)
            .and_then(|pack| list_of_chunk(hash, *pack, loc.entry))
        else {
            continue;
        };
        if repo.file_object_if_stored(hash)?.is_none() {
            repo.put_file_object_here(hash, &obj)?;
            healed += 1;
        }
    }
    if healed > 0 {
        repo.barrier()?;
        tracing::info!(
            "wrote chunk lists for {healed} small file(s) the version's small packs no longer hold"
        );
    }
    Ok(healed)
}

impl Repository {
    /// The list of small file `hash` made from any copy of its chunk the repository's
    /// index knows, for a reader that does not know which version it reads (a server
    /// answering for a chunk list that is not stored); `None` through a server.
    pub fn small_file_anywhere(&self, hash: &Hash) -> Result<Option<FileObject>> {
        Ok(self
            .locate(hash)?
            .and_then(|(pack, entry)| list_of_chunk(hash, pack, entry)))
    }

    /// The chunk list of file `hash` (`size` bytes) of a version whose small files are
    /// `small`: made from its chunk in the version's small packs, else the stored list.
    pub fn file_list(&self, hash: &Hash, size: u64, small: &SmallFiles) -> Result<FileObject> {
        if let Some(obj) = small.list(self, hash, size) {
            return Ok(obj);
        }
        match self.file_object_if_stored(hash)? {
            Some(obj) => Ok(obj),
            None => match small.unread(self).filter(|_| size <= SMALL_MAX) {
                // An index that could not be read may hold it: say why it was not.
                Some(e) => Err(crate::error::Error::new(e.kind(), e.message().to_string())),
                // The small packs lost it: any copy the index knows is the file.
                None if !small.is_empty() && size <= SMALL_MAX => {
                    match self.small_file_anywhere(hash)? {
                        Some(obj) if obj.size == size => Ok(obj),
                        _ => self.file_object(hash),
                    }
                }
                None => self.file_object(hash),
            },
        }
    }

    /// Whether file `hash` of `size` bytes has its bytes where a reader of `small`
    /// finds them, or a stored chunk list.
    pub fn file_list_if_stored(
        &self,
        hash: &Hash,
        size: u64,
        small: &SmallFiles,
    ) -> Result<Option<FileObject>> {
        if let Some(obj) = small.list(self, hash, size) {
            return Ok(Some(obj));
        }
        self.file_object_if_stored(hash)
    }
}
