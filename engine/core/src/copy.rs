//! Chunks copied into new packs, each checked against its hash on the way: how repair
//! salvages the healthy chunks of a damaged pack, and how garbage collection rewrites
//! a pack that is mostly dead. A copy is published (pack, then index) before anything
//! is pointed at it.

use std::collections::HashMap;
use std::io::Write;

use crate::digest::Hash;
use crate::error::{ErrorKind, IoContext, Result};
use crate::objects::{self, PackEntry, PackId};
use crate::repo::Repository;

/// Copies chunks into new packs, each checked against its hash first (one that fails
/// is recorded as damaged and not copied); adds the new copies to `good`. Returns (new
/// packs, chunks copied, chunks that failed). `found_by` names the caller in records.
pub fn copy_chunks(
    repo: &Repository,
    salvage: &[(PackId, PackEntry)],
    found_by: &str,
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
                repo.record_damage(pack, e, found_by);
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
pub(crate) fn write_pack(
    repo: &Repository,
    chunks: &[(PackEntry, Vec<u8>)],
) -> Result<(PackId, Vec<PackEntry>)> {
    let path = repo.staging_path()?;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .ctx("cannot create", &path)?;
    // Removed on the way out, whether published or not.
    let staged = crate::store::Staged::new(path);
    let path = staged.path();
    let mut entries = Vec::with_capacity(chunks.len());
    let mut offset = objects::PACK_MAGIC.len() as u64;
    f.write_all(objects::PACK_MAGIC).ctx("cannot write", path)?;
    for (e, b) in chunks {
        f.write_all(b).ctx("cannot write", path)?;
        entries.push(PackEntry { offset, ..*e });
        offset += b.len() as u64;
    }
    f.write_all(&objects::encode_trailer(&entries))
        .ctx("cannot write", path)?;
    drop(f);
    let id = objects::pack_id(&entries);
    repo.publish_pack(&id, path, &entries)?;
    Ok((id, entries))
}
