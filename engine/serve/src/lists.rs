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
    /// A turn to read each list being read now: requests for a list nobody holds yet
    /// wait for the one reading it (a gang of nodes asks for one list at once, and
    /// each read of a large file's list is hundreds of KiB from the origin).
    reading: HashMap<Hash, Arc<Mutex<()>>>,
}

impl Kept {
    /// The list of `hash` if it is held, marked as used now.
    fn held(&mut self, hash: &Hash) -> Option<Arc<Listed>> {
        self.tick += 1;
        let tick = self.tick;
        let (t, l) = self.lists.get_mut(hash)?;
        *t = tick;
        Some(Arc::clone(l))
    }
}

pub struct Lists {
    repo: Arc<Repository>,
    /// Where the server's chunks are, uploads of a moment ago included: a small file
    /// is its one chunk (`sealvol_core::small`).
    known: Arc<crate::known::Known>,
    kept: Mutex<Kept>,
}

impl Lists {
    pub fn new(repo: Arc<Repository>, known: Arc<crate::known::Known>) -> Lists {
        Lists {
            repo,
            known,
            kept: Mutex::default(),
        }
    }

    /// File `hash`'s chunk list (its proof checked against the hash), read once and
    /// kept. Blocking: call it off the async threads.
    pub fn get(&self, hash: &Hash) -> Result<Arc<Listed>> {
        let turn = {
            let mut k = sealvol_core::lock(&self.kept);
            if let Some(l) = k.held(hash) {
                return Ok(l);
            }
            Arc::clone(k.reading.entry(*hash).or_default())
        };
        let _turn = sealvol_core::lock(&turn);
        // Read while this request waited for its turn?
        if let Some(l) = sealvol_core::lock(&self.kept).held(hash) {
            return Ok(l);
        }
        let read = self.read(hash);
        let mut k = sealvol_core::lock(&self.kept);
        if k.reading.get(hash).is_some_and(|t| Arc::ptr_eq(t, &turn)) {
            k.reading.remove(hash);
        }
        let listed = read?;
        // One list object per file for everyone, so the blocks one request proves are
        // proven for all (`Listed::proving`).
        if let Some(l) = k.held(hash) {
            return Ok(l);
        }
        k.tick += 1;
        let tick = k.tick;
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

    fn read(&self, hash: &Hash) -> Result<Arc<Listed>> {
        // A small file has no list of its own (`sealvol_core::small`): its one chunk,
        // wherever the index has it, is the file.
        let obj = match self.repo.file_object_if_stored(hash)? {
            Some(obj) => obj,
            None => self
                .known
                .locate(hash)?
                .and_then(|(pack, entry)| sealvol_core::small::list_of_chunk(hash, pack, entry))
                .ok_or_else(|| {
                    Error::not_found(format!("no chunk list of file {} is stored", hash.hex()))
                })?,
        };
        let at = obj
            .chunks
            .iter()
            .enumerate()
            .map(|(i, c)| ((obj.packs[c.pack as usize], c.entry.offset), i))
            .collect();
        Ok(Arc::new(Listed {
            obj,
            at,
            proving: Default::default(),
        }))
    }

    /// Forgets a list (one just written anew).
    pub fn forget(&self, hash: &Hash) {
        let mut k = sealvol_core::lock(&self.kept);
        if let Some((_, l)) = k.lists.remove(hash) {
            k.chunks -= l.obj.chunks.len();
        }
    }
}
