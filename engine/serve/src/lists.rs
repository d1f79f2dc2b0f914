//! Chunk lists the server has read, kept while they are used: a run request names its
//! file, and the server checks that the chunks asked for are that file's (where its
//! list says they lie) and proves them before it sends a byte. A list's proof state
//! (which blocks were proven) lives with it, so each block is hashed once while the
//! list is kept.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use sealvol_core::digest::Hash;
use sealvol_core::error::{Error, Result};
use sealvol_core::objects::{FileObject, PackId};
use sealvol_core::repo::Repository;

/// The most chunks of lists kept (about 100 bytes each): lists beyond are read again.
const MAX_CHUNKS: usize = 4 << 20;

/// A file's list, with where each copy it names is in the file.
pub struct Listed {
    pub obj: FileObject,
    /// (pack, offset in the pack) → the chunk's place in the list.
    at: HashMap<(PackId, u64), usize>,
    /// Held while a stretch of the file is proven, one per 4 MiB of the file modulo
    /// their number: requests that prove the same blocks at once take turns, so the
    /// second finds them proven and reads no edge bytes from the origin again.
    proving: [Mutex<()>; PROVING_LOCKS],
}

const PROVING_LOCKS: usize = 16;

impl Listed {
    /// The turn to prove bytes from `start` of this file.
    pub fn proving(&self, start: u64) -> std::sync::MutexGuard<'_, ()> {
        let i = (start / sealvol_core::read::ring::SEGMENT) as usize % PROVING_LOCKS;
        sealvol_core::lock(&self.proving[i])
    }

    /// The chunk of this file stored at `offset` in `pack`, if there is one.
    pub fn position(&self, pack: &PackId, offset: u64) -> Option<usize> {
        self.at.get(&(*pack, offset)).copied()
    }
}

#[derive(Default)]
struct Kept {
    lists: HashMap<Hash, (u64, Arc<Listed>)>,
    chunks: usize,
    tick: u64,
}

pub struct Lists {
    repo: Arc<Repository>,
    kept: Mutex<Kept>,
}

impl Lists {
    pub fn new(repo: Arc<Repository>) -> Lists {
        Lists {
            repo,
            kept: Mutex::default(),
        }
    }

    /// File `hash`'s chunk list (its proof checked against the hash), read once and
    /// kept. Blocking: call it off the async threads.
    pub fn get(&self, hash: &Hash) -> Result<Arc<Listed>> {
        {
            let mut k = sealvol_core::lock(&self.kept);
            k.tick += 1;
            let tick = k.tick;
            if let Some((t, l)) = k.lists.get_mut(hash) {
                *t = tick;
                return Ok(Arc::clone(l));
            }
        }
        let obj = self.repo.file_object_if_stored(hash)?.ok_or_else(|| {
            Error::not_found(format!("no chunk list of file {} is stored", hash.hex()))
        })?;
        let at = obj
            .chunks
            .iter()
            .enumerate()
            .map(|(i, c)| ((obj.packs[c.pack as usize], c.entry.offset), i))
            .collect();
        let listed = Arc::new(Listed {
            obj,
            at,
            proving: Default::default(),
        });
        let mut k = sealvol_core::lock(&self.kept);
        k.tick += 1;
        let tick = k.tick;
        // Another request read it meanwhile: the first one kept is everyone's, so the
        // blocks one request proves are proven for all (`Listed::proving`).
        if let Some((t, l)) = k.lists.get_mut(hash) {
            *t = tick;
            return Ok(Arc::clone(l));
        }
        k.chunks += listed.obj.chunks.len();
        k.lists.insert(*hash, (tick, Arc::clone(&listed)));
        while k.chunks > MAX_CHUNKS && k.lists.len() > 1 {
            let Some(oldest) = k
                .lists
                .iter()
                .filter(|(h, _)| *h != hash)
                .min_by_key(|(_, (t, _))| *t)
                .map(|(h, _)| *h)
            else {
                break;
            };
            if let Some((_, l)) = k.lists.remove(&oldest) {
                k.chunks -= l.obj.chunks.len();
            }
        }
        Ok(listed)
    }

    /// Forgets a list (one just written anew).
    pub fn forget(&self, hash: &Hash) {
        let mut k = sealvol_core::lock(&self.kept);
        if let Some((_, l)) = k.lists.remove(hash) {
            k.chunks -= l.obj.chunks.len();
        }
    }
}
