//! Which chunks the repository holds, as this server knows it: the repository's index
//! (loaded on first use, and again when a chunk is not in it and it is older than
//! `INDEX_FRESH`), leaving out copies known unusable and packs a garbage collection
//! condemned, plus the packs uploaded through this server since it was loaded. The
//! chunk service finds chunks by it, and the remote engine's operations answer pushes
//! (which chunks are there) and resolve the chunk lists they ask for.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sealvol_core::chunk_index::ChunkIndex;
use sealvol_core::digest::Hash;
use sealvol_core::error::Result;
use sealvol_core::objects::{PackEntry, PackId};
use sealvol_core::repo::Repository;

/// An index older than this is loaded again when a chunk is not in it (a push since).
const INDEX_FRESH: Duration = Duration::from_secs(10);

pub struct Known {
    repo: Arc<Repository>,
    loaded: Mutex<Option<(Instant, Arc<ChunkIndex>)>>,
    /// Chunks of packs uploaded here since the index was loaded.
    recent: Mutex<HashMap<Hash, (PackId, PackEntry)>>,
}

impl Known {
    pub fn new(repo: Arc<Repository>) -> Known {
        Known {
            repo,
            loaded: Mutex::default(),
            recent: Mutex::default(),
        }
    }

    /// The index as loaded last, loading it when there is none or when `stale_ok` is
    /// false and it is older than `INDEX_FRESH`.
    pub fn index(&self, stale_ok: bool) -> Result<Arc<ChunkIndex>> {
        let mut loaded = sealvol_core::lock(&self.loaded);
        if let Some((at, index)) = loaded.as_ref()
            && (stale_ok || at.elapsed() < INDEX_FRESH)
        {
            return Ok(Arc::clone(index));
        }
        // Nothing new is built on what a garbage collection condemned (docs/GC.md).
        let avoid = sealvol_core::gc::condemned_packs(&self.repo)?;
        let index = Arc::new(self.repo.load_index(false, &avoid)?);
        *loaded = Some((Instant::now(), Arc::clone(&index)));
        // What was uploaded before this load is in it now.
        sealvol_core::lock(&self.recent).clear();
        Ok(index)
    }

    /// Where a usable copy of chunk `hash` is, if the repository holds one.
    pub fn locate(&self, hash: &Hash) -> Result<Option<(PackId, PackEntry)>> {
        let find = |index: &ChunkIndex| {
            index
                .chunks
                .get(hash)
                .map(|loc| (index.packs[loc.slot as usize], loc.entry))
        };
        if let Some(found) = find(self.index(true)?.as_ref()) {
            return Ok(Some(found));
        }
        if let Some(found) = self.recent_copy(hash) {
            return Ok(Some(found));
        }
        // Perhaps written since by another process: look again, at most every
        // `INDEX_FRESH`.
        Ok(find(self.index(false)?.as_ref()).or_else(|| self.recent_copy(hash)))
    }

    fn recent_copy(&self, hash: &Hash) -> Option<(PackId, PackEntry)> {
        sealvol_core::lock(&self.recent).get(hash).copied()
    }

    /// Which of `hashes` the repository holds a usable copy of. Answered from what is
    /// loaded: a chunk written since by another process is uploaded again, which is
    /// wasteful, never wrong.
    pub fn have(&self, hashes: &[Hash]) -> Result<Vec<bool>> {
        let index = self.index(true)?;
        let recent = sealvol_core::lock(&self.recent);
        Ok(hashes
            .iter()
            .map(|h| index.chunks.contains_key(h) || recent.contains_key(h))
            .collect())
    }

    /// Whether every chunk copy `obj` names is usable: its pack is there (in the index's
    /// listing, or uploaded here since), no damage record names it, and no garbage
    /// collection condemned it.
    pub fn usable(&self, obj: &sealvol_core::objects::FileObject) -> Result<bool> {
        let index = self.index(true)?;
        let recent = sealvol_core::lock(&self.recent);
        Ok(obj.chunks.iter().all(|c| {
            let pack = obj.packs[c.pack as usize];
            index.health.check(&pack, &c.entry).is_ok()
                || recent
                    .get(&c.entry.hash)
                    .is_some_and(|(p, e)| *p == pack && *e == c.entry)
        }))
    }

    /// A pack uploaded here (checked, published, indexed).
    pub fn add_pack(&self, id: &PackId, entries: &[PackEntry]) {
        let mut recent = sealvol_core::lock(&self.recent);
        for e in entries {
            recent.entry(e.hash).or_insert((*id, *e));
        }
    }
}
