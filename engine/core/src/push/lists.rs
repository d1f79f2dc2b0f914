//! A push's chunk lists, written to the repository's own store (`Owner::store_lists`
//! for `registry::here::Here`): new lists, and the healing of stored ones that name
//! unusable copies, other chunks, or no proof. Through a server, the server writes
//! them (`registry::server`).

use std::collections::HashMap;

use crate::chunk_index::{ChunkIndex, HashedFile};
use crate::error::{ErrorKind, Result};
use crate::objects::{ChunkRef, FileObject, PackId};
use crate::repo::{Kind, Repository};

/// The chunk list of a file a push read, naming the packs the index places its chunks
/// in.
fn file_object(index: &ChunkIndex, hf: &HashedFile) -> FileObject {
    let mut packs: Vec<PackId> = Vec::new();
    let mut slot_of: HashMap<u32, u32> = HashMap::new();
    let chunks = hf
        .chunks
        .iter()
        .map(|c| {
            let pack = *slot_of.entry(c.slot).or_insert_with(|| {
                packs.push(index.packs[c.slot as usize]);
                packs.len() as u32 - 1
            });
            ChunkRef {
                pack,
                entry: c.entry,
            }
        })
        .collect();
    FileObject::new(hf.hash, hf.size, packs, chunks, Some(hf.outboard.clone()))
}

/// `Owner::store_lists` in the repository's own store: one small write per file, side
/// by side on a remote store (`concurrency`).
pub(crate) fn store_lists_here(
    repo: &Repository,
    index: &ChunkIndex,
    files: Vec<&HashedFile>,
) -> Result<u64> {
    let healed = crate::store::in_parallel(&files, repo.concurrency(), |hf| {
        store_chunk_list(repo, index, hf)
    })?;
    Ok(healed.into_iter().filter(|h| *h).count() as u64)
}

/// Whether two lists of one file name the same chunks, in the same order.
fn same_chunks(a: &FileObject, b: &FileObject) -> bool {
    a.chunks.len() == b.chunks.len()
        && a.chunks
            .iter()
            .zip(&b.chunks)
            .all(|(x, y)| x.entry.hash == y.entry.hash && x.entry.raw_len == y.entry.raw_len)
}

/// Stores one file's chunk list; true if it replaced a damaged one.
fn store_chunk_list(repo: &Repository, index: &ChunkIndex, hf: &HashedFile) -> Result<bool> {
    // A small file's chunk is found by its hash: the version names its pack.
    if crate::small::is_small(repo, hf.size, hf.chunks.len()) {
        return Ok(false);
    }
    let obj = file_object(index, hf);
    if repo.put_file_object_here(&hf.hash, &obj)? {
        return Ok(false);
    }
    match repo.file_object(&hf.hash) {
        // A list is a hint, and this push knows the truth: a stored list that names
        // other chunks than the ones just read (planted, or damaged in a way its proof
        // alone cannot show), or that carries no proof (written before proofs), is
        // replaced by this one, which was proven in the same pass that hashed the file.
        Ok(old) if !same_chunks(&old, &obj) || old.proof.outboard().is_none() => {
            crate::gc::replace_chunk_list(repo, &hf.hash, &obj)?;
            repo.clear_list_damage(&hf.hash)?;
            if old.proof.outboard().is_some() {
                tracing::warn!(
                    "the stored chunk list of file {} named other chunks than the file's; replaced",
                    hf.hash.hex()
                );
                return Ok(true);
            }
            return Ok(false);
        }
        Ok(old) => match index.health.first_unusable(&old) {
            None => return Ok(false),
            // Not damage: the list named a pack a garbage collection condemned, and
            // now names this push's copies.
            Some((_, _, crate::health::Unusable::Condemned)) => {
                crate::gc::replace_chunk_list(repo, &hf.hash, &obj)?;
                return Ok(false);
            }
            Some(_) => crate::gc::replace_chunk_list(repo, &hf.hash, &obj)?,
        },
        // Unreadable: kept in quarantine, then written anew.
        Err(e) if e.kind() == ErrorKind::Corrupt => {
            repo.quarantine(&Kind::File.name(&hf.hash))?;
            repo.put_file_object_here(&hf.hash, &obj)?;
            repo.clear_list_damage(&hf.hash)?;
        }
        Err(e) => return Err(e),
    }
    tracing::info!("replaced the damaged chunk list of file {}", hf.hash.hex());
    Ok(true)
}
