//! Chunk copies for repair: re-reading a recorded one, relinking a chunk list to
//! healthy copies, and salvaging healthy chunks out of damaged packs into new ones.

use std::collections::{BTreeSet, HashMap};
use std::io::Write;

use crate::digest::Hash;
use crate::error::{ErrorKind, IoContext, Result};
use crate::objects::{self, ChunkRef, FileObject, PackEntry, PackId};
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
    (
        FileObject {
            size: obj.size,
            packs,
            chunks,
        },
        fixed,
        missing,
    )
}

/// Copies chunks out of damaged packs into new ones, each checked against its hash;
/// adds them to `good`. Returns (new packs, chunks copied, chunks that failed).
pub(super) fn salvage(
    repo: &Repository,
    salvage: &[(PackId, PackEntry)],
    good: &mut HashMap<Hash, (PackId, PackEntry)>,
) -> Result<(Vec<PackId>, usize, usize)> {
    let target = repo.config().pack_target;
    let (mut packs, mut saved, mut lost) = (Vec::new(), 0, 0);
    let mut batch: Vec<(PackEntry, Vec<u8>)> = Vec::new();
    let mut bytes = 0u64;
    let mut flush = |batch: &mut Vec<(PackEntry, Vec<u8>)>,
                     good: &mut HashMap<Hash, (PackId, PackEntry)>|
     -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let (id, entries) = write_pack(repo, batch)?;
        for e in entries {
            good.insert(e.hash, (id, e));
        }
        packs.push(id);
        batch.clear();
        Ok(())
    };
    for (pack, e) in salvage {
        let b = match repo.pack_range(pack, e.offset, e.stored_len as u64) {
            Ok(b) if Hash::of(&b) == e.hash => b,
            Ok(_) => {
                repo.record_damage(pack, e, "repair");
                lost += 1;
                continue;
            }
            Err(err) if matches!(err.kind(), ErrorKind::Corrupt | ErrorKind::Io) => {
                lost += 1;
                continue;
            }
            Err(err) => return Err(err),
        };
        bytes += b.len() as u64;
        batch.push((*e, b));
        saved += 1;
        if bytes >= target {
            flush(&mut batch, good)?;
            bytes = 0;
        }
    }
    flush(&mut batch, good)?;
    Ok((packs, saved, lost))
}

/// Writes chunks (already checked) as one new pack and its index.
fn write_pack(
    repo: &Repository,
    chunks: &[(PackEntry, Vec<u8>)],
) -> Result<(PackId, Vec<PackEntry>)> {
    let path = repo.staging_path()?;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .ctx("cannot create", &path)?;
    let mut entries = Vec::with_capacity(chunks.len());
    let mut offset = objects::PACK_MAGIC.len() as u64;
    f.write_all(objects::PACK_MAGIC)
        .ctx("cannot write", &path)?;
    for (e, b) in chunks {
        f.write_all(b).ctx("cannot write", &path)?;
        entries.push(PackEntry { offset, ..*e });
        offset += b.len() as u64;
    }
    f.write_all(&objects::encode_trailer(&entries))
        .ctx("cannot write", &path)?;
    drop(f);
    let id = objects::pack_id(&entries);
    repo.publish_pack(&id, &path, &entries)?;
    Ok((id, entries))
}
