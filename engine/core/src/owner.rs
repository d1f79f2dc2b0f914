//! What a writer of a repository's data (a push, a sync, a mirror) asks of whoever
//! owns the repository's writes, beyond the registry's operations (`ops::Registry`):
//! the index to build on, which chunks and files are held, the chunk lists and pack
//! indexes that make uploaded packs usable, the small files' packs a seal names, and
//! the namespace's quota. One trait, made by the repository itself
//! (`registry::here::Here`, which writes them to its own store) or through the server
//! that owns its writes (`registry::server::Through`, which asks it: a key holder never
//! writes what other writers build on). `Repository::owner` says which.

use crate::chunk_index::{ChunkIndex, HashedFile};
use crate::digest::Hash;
use crate::error::Result;
use crate::objects::{FileObject, PackEntry, PackId};
use crate::ops::Stored;
use crate::outcomes::Sealed;
use crate::refs::Name;
use crate::remote::HeldAnswer;
use crate::repo::Repository;
use crate::usage::Allowance;

/// Whoever owns a repository's writes, as its writers see it.
pub trait Owner: Send + Sync {
    /// The chunk index a writer builds on, after cleaning up what interrupted writers
    /// left (their staging files, packs published without an index). Through a server,
    /// an empty one: the server holds the index, and a push asks it as it goes.
    fn chunk_index(&self) -> Result<ChunkIndex>;

    /// Whether a push asks, as it hashes, which chunks are held (a server), rather than
    /// knowing from its own index (the repository itself).
    fn asks_held(&self) -> bool;

    /// Which of `hashes` are held, and how this key may name them (`Remote::have_chunks`).
    fn held(&self, hashes: &[Hash]) -> Result<HeldAnswer>;

    /// For each file, its chunk count if it is stored whole (its chunk list intact and
    /// naming only usable copies, or a small file's one chunk), else `None`: a writer
    /// skips such a file, and reads the others again, which heals them.
    fn stored_files(&self, index: &ChunkIndex, hashes: &[Hash]) -> Result<Vec<Option<u64>>>;

    /// Stores the chunk lists of the files a push read, after their packs and indexes
    /// are published. A stored list that names an unusable copy (or cannot be read) is
    /// replaced by the new one. Returns how many were replaced.
    fn store_lists(&self, index: &ChunkIndex, files: Vec<&HashedFile>) -> Result<u64>;

    /// Stores the chunk list of file `hash` that a mirror copied from `src` (`obj`
    /// names `src`'s packs; `index` knows where the chunks landed here).
    fn store_copied_list(
        &self,
        src: &Repository,
        index: &ChunkIndex,
        hash: &Hash,
        obj: &FileObject,
    ) -> Result<()>;

    /// Whether a file of `size` bytes read as `chunks` chunks is stored without a
    /// chunk list: a small file, whose one chunk a seal names by its pack (`small.rs`).
    /// Not through a server, which writes the lists it is asked to.
    fn needs_no_list(&self, size: u64, chunks: usize) -> bool;

    /// Marks in `index` the chunks of `chunks` (hash, length) that are held where this
    /// key reaches them, so that a mirror copies only the others.
    fn learn_held(&self, index: &mut ChunkIndex, chunks: &[(Hash, u32)]) -> Result<()>;

    /// Seals a version whose files this writer stored with `index`; returns the seal
    /// and how many chunk lists of small files it wrote to heal a version sealed before
    /// (`small::heal`).
    fn seal_stored(&self, index: &ChunkIndex, version: Stored) -> Result<(Sealed, u64)>;

    /// The account of a writer of namespace `ns`, if it has a quota; none through a
    /// server, which keeps the quota itself.
    fn allowance(&self, ns: &Name) -> Result<Option<Allowance>>;

    /// Writes the index of pack `id`, just published. A server checks a pack and
    /// writes its index itself.
    fn publish_index(&self, id: &PackId, entries: &[PackEntry]) -> Result<()>;

    /// Stores a file's chunk list (after the packs it names). Returns whether it is
    /// new. A server finds the chunks, proves them and writes the list itself.
    fn put_list(&self, hash: &Hash, obj: &FileObject) -> Result<bool>;

    /// Replaces a chunk list with one naming other copies of the same chunks.
    fn replace_list(&self, hash: &Hash, obj: &FileObject) -> Result<()>;

    /// Another usable copy of chunk `entry` than the one in `pack`; none through a
    /// server, whose copies are the server's to find.
    fn other_copy(&self, pack: &PackId, entry: &PackEntry) -> Result<Option<(PackId, PackEntry)>>;

    /// Where a usable copy of chunk `hash` lies; none through a server.
    fn locate(&self, hash: &Hash) -> Result<Option<(PackId, PackEntry)>>;
}
