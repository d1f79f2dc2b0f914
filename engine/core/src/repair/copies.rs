//! Chunk copies for repair: re-reading a recorded one, and relinking a chunk list to
//! healthy copies (salvaging healthy chunks into new packs is `crate::copy`).

use std::collections::{BTreeSet, HashMap};

use crate::digest::Hash;
use crate::error::{ErrorKind, Result};
use crate::objects::{FileObject, PackEntry, PackId};
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
    let relinked = obj.with_copies(|pack, e| {
        let usable = !damaged_packs.contains(&pack) && s.copy_ok(&pack, e);
        match (usable, good.get(&e.hash)) {
            (true, _) => (pack, *e),
            (false, Some(&(p, other))) => {
                fixed += 1;
                (p, other)
            }
            (false, None) => {
                missing += 1;
                (pack, *e)
            }
        }
    });
    (relinked, fixed, missing)
}
