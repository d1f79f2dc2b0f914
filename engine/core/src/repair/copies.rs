//! Chunk copies for repair: re-reading a recorded one, and relinking a chunk list to
//! healthy copies (salvaging healthy chunks into new packs is `crate::copy`).

use std::collections::{BTreeSet, HashMap};

use crate::digest::Hash;
use crate::error::{ErrorKind, Result};
use crate::objects::{ChunkRef, FileObject, PackEntry, PackId};
use crate::repo::Repository;
use crate::verify::Survey;

/// Whether a recorded copy reads fine now.
pub(super) fn reads_fine(
    repo: &Repository,
    s: &Survey,
    pack: &PackId,
    chunk: &Hash,
) -> Result<bool> {
    let Some(e) = s
        .entries(pack)
        .and_then(|es| es.iter().find(|e| e.hash == *chunk))
    else {
        return Ok(false);
    };
    match repo.pack_range(pack, e.offset, e.stored_len as u64) {
        Ok(b) => Ok(Hash::of(&b) == *chunk),
        Err(e) if matches!(e.kind(), ErrorKind::Corrupt | ErrorKind::Io) => Ok(false),
        Err(e) => Err(e),
    }
}

/// A chunk list with every unusable copy replaced by a healthy one where there is one:
/// (the list, copies replaced, copies with no healthy copy anywhere).
pub(super) fn relink(
    obj: &FileObject,
    s: &Survey,
    damaged_packs: &BTreeSet<PackId>,
    good: &HashMap<Hash, (PackId, PackEntry)>,
) -> (FileObject, usize, usize) {
    let (mut fixed, mut missing) = (0, 0);
    let mut packs: Vec<PackId> = Vec::new();
    let mut chunks = Vec::with_capacity(obj.chunks.len());
    for c in &obj.chunks {
        let pack = obj.packs[c.pack as usize];
        let usable = !damaged_packs.contains(&pack) && s.copy_ok(&pack, &c.entry);
        let (pack, entry) = match (usable, good.get(&c.entry.hash)) {
            (true, _) => (pack, c.entry),
            (false, Some(&(p, e))) => {
                fixed += 1;
                (p, e)
            }
            (false, None) => {
                missing += 1;
                (pack, c.entry)
            }
        };
        let slot = match packs.iter().position(|p| *p == pack) {
            Some(i) => i,
            None => {
                packs.push(pack);
                packs.len() - 1
            }
        };
        chunks.push(ChunkRef {
            pack: slot as u32,
            entry,
        });
    }
    (obj.relocated(packs, chunks), fixed, missing)
}
