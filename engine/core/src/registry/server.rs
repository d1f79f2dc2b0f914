//! What a repository's writers need, asked of the server that owns its writes
//! (`owner::Owner` through `remote::Remote`): the server holds the index, proves and
//! writes every chunk list and pack index, finds other copies, keeps the quotas, and
//! finds a version's small packs itself. The client names each chunk with what lets
//! its key name it (`possession.rs`).

use std::collections::HashSet;

use crate::chunk_index::{ChunkIndex, HashedFile};
use crate::digest::Hash;
use crate::error::Result;
use crate::objects::{FileObject, PackEntry, PackId};
use crate::ops::Stored;
use crate::outcomes::Sealed;
use crate::owner::Owner;
use crate::possession::{Evidence, Named};
use crate::refs::Name;
use crate::remote::{Held, HeldAnswer, Remote};
use crate::repo::Repository;
use crate::usage::Allowance;

/// A repository whose writes a server owns: the repository (read through the store)
/// and the server.
pub struct Through<'a> {
    pub repo: &'a Repository,
    pub server: &'a dyn Remote,
}

/// A list naming each chunk as stored, with no evidence: for chunks this key uploaded
/// or reaches.
fn plain(obj: &FileObject) -> Vec<Named> {
    obj.chunks
        .iter()
        .map(|c| Named::plain(c.entry.hash, c.entry.raw_len))
        .collect()
}

impl Owner for Through<'_> {
    fn chunk_index(&self) -> Result<ChunkIndex> {
        self.repo.clean_staging()?;
        Ok(ChunkIndex::for_remote())
    }

    fn asks_held(&self) -> bool {
        true
    }

    fn held(&self, hashes: &[Hash]) -> Result<HeldAnswer> {
        self.server.have_chunks(hashes)
    }

    fn stored_files(&self, _index: &ChunkIndex, hashes: &[Hash]) -> Result<Vec<Option<u64>>> {
        self.server.stored_files(hashes)
    }

    /// Small files in one request for many, not one each; every other list by itself,
    /// side by side. The server replaces what it finds damaged; this counts none.
    fn store_lists(&self, index: &ChunkIndex, mut files: Vec<&HashedFile>) -> Result<u64> {
        let limit = crate::small::small_limit(self.repo.config().chunker.params.min);
        let small: Vec<(Hash, u64, Evidence)> = files
            .iter()
            .filter(|hf| {
                hf.size > 0
                    && hf.size <= limit
                    && hf.chunks.len() == 1
                    && hf.chunks[0].entry.hash == hf.hash
            })
            .map(|hf| (hf.hash, hf.size, index.named(&hf.chunks[0]).evidence))
            .collect();
        let held: HashSet<Hash> = small
            .iter()
            .zip(self.server.put_small_files(&small)?)
            .filter(|(_, held)| *held)
            .map(|((h, _, _), _)| *h)
            .collect();
        files.retain(|hf| !held.contains(&hf.hash));
        crate::store::in_parallel(&files, self.repo.concurrency(), |hf| {
            let chunks: Vec<Named> = hf.chunks.iter().map(|c| index.named(c)).collect();
            self.server.put_list(&hf.hash, hf.size, &chunks)
        })?;
        Ok(0)
    }

    /// Each chunk is named with the copy this mirror sent, if it sent one.
    fn store_copied_list(
        &self,
        _src: &Repository,
        index: &ChunkIndex,
        hash: &Hash,
        obj: &FileObject,
    ) -> Result<()> {
        let named: Vec<Named> = obj
            .chunks
            .iter()
            .map(|c| match index.chunks.get(&c.entry.hash) {
                Some(loc) => index.named(loc),
                None => Named::plain(c.entry.hash, c.entry.raw_len),
            })
            .collect();
        self.server.put_list(hash, obj.size, &named).map(drop)
    }

    fn needs_no_list(&self, _size: u64, _chunks: usize) -> bool {
        false
    }

    /// A chunk held where this key does not reach it is copied like a missing one:
    /// the copy is the mirror's evidence that it holds the bytes.
    fn learn_held(&self, index: &mut ChunkIndex, chunks: &[(Hash, u32)]) -> Result<()> {
        for part in chunks.chunks(crate::push::ASK_AT_ONCE) {
            let ask: Vec<Hash> = part.iter().map(|(h, _)| *h).collect();
            let answer = self.server.have_chunks(&ask)?;
            for ((h, len), held) in part.iter().zip(answer.held) {
                if held == Held::Yours {
                    index.add_on_server(*h, *len, None);
                }
            }
        }
        Ok(())
    }

    /// The server finds the small files' packs itself and heals what it must.
    fn seal_stored(&self, index: &ChunkIndex, version: Stored) -> Result<(Sealed, u64)> {
        let sealed = self.repo.seal_created(
            version.volume,
            version.tags,
            version.entries,
            version.stats,
            version.provenance,
            index.since,
            version.created,
            &[],
        )?;
        Ok((sealed, 0))
    }

    fn allowance(&self, _ns: &Name) -> Result<Option<Allowance>> {
        Ok(None)
    }

    fn publish_index(&self, _id: &PackId, _entries: &[PackEntry]) -> Result<()> {
        Ok(())
    }

    fn put_list(&self, hash: &Hash, obj: &FileObject) -> Result<bool> {
        self.server.put_list(hash, obj.size, &plain(obj))
    }

    fn replace_list(&self, hash: &Hash, obj: &FileObject) -> Result<()> {
        self.put_list(hash, obj).map(drop)
    }

    fn other_copy(
        &self,
        _pack: &PackId,
        _entry: &PackEntry,
    ) -> Result<Option<(PackId, PackEntry)>> {
        Ok(None)
    }

    fn locate(&self, _hash: &Hash) -> Result<Option<(PackId, PackEntry)>> {
        Ok(None)
    }
}
