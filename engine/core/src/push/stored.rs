//! What a push builds on: the chunk index after recovery, and the files already
//! stored whole, which it skips.

use crate::chunk_index::ChunkIndex;
use crate::digest::Hash;
use crate::error::Result;
use crate::repo::Repository;

/// The most hashes one question to a server names (`Remote::have_chunks`,
/// `Remote::stored_files`): 2 MiB of hashes.
pub const ASK_AT_ONCE: usize = 65536;

/// How many times a push or sync runs when a garbage collection keeps removing what it
/// reused (each run avoids what the collections condemned, so a second one succeeds
/// unless yet another collection swept meanwhile).
pub const COLLECTED_RETRIES: u32 = 3;

/// The chunk index, after cleaning up what interrupted writers left: their staging
/// files, and packs they published without an index.
pub fn index_after_recovery(repo: &Repository) -> Result<ChunkIndex> {
    repo.owner().chunk_index()
}

/// `index_after_recovery` of the repository's own index (`Owner::chunk_index`).
pub(crate) fn index_here(repo: &Repository) -> Result<ChunkIndex> {
    repo.check_writable()?;
    // Before the index is read: a repair running now finishes first.
    let writing = repo.writers_lock(false)?;
    let (files, bytes) = repo.clean_staging()?;
    if files > 0 {
        tracing::warn!(
            "removed {files} staging file(s) ({bytes} bytes) left in the repository by killed processes"
        );
    }
    // Nothing new is built on what a garbage collection condemned (docs/GC.md).
    let mut index = repo.load_index(true, &crate::gc::condemned_packs(repo)?)?;
    index.writing = writing;
    Ok(index)
}

/// The chunk count of a file already stored (one the stat cache or an earlier sync
/// knows), if its chunk list is intact and names only usable copies; `None` means the
/// file must be read again, which heals it.
pub fn stored_file(repo: &Repository, index: &ChunkIndex, h: &Hash) -> Result<Option<u64>> {
    Ok(stored_files(repo, index, std::slice::from_ref(h))?
        .pop()
        .flatten())
}

/// `stored_file` of many files: one request to a server for all of them.
pub fn stored_files(
    repo: &Repository,
    index: &ChunkIndex,
    hashes: &[Hash],
) -> Result<Vec<Option<u64>>> {
    repo.owner().stored_files(index, hashes)
}

/// `stored_files` in the repository's own store (`Owner::stored_files`).
pub(crate) fn stored_files_here(
    repo: &Repository,
    index: &ChunkIndex,
    hashes: &[Hash],
) -> Result<Vec<Option<u64>>> {
    hashes
        .iter()
        .map(|h| {
            // A usable chunk whose hash is the file's is the file (a small one, which
            // needs no chunk list: `small.rs`).
            if index.chunks.contains_key(h) {
                return Ok(Some(1));
            }
            Ok(repo
                .healthy_file_object(h, &index.health)?
                .map(|obj| obj.chunks.len() as u64))
        })
        .collect()
}
