//! Push: files become a sealed version, uploading only the chunks the repository
//! lacks.
//!
//! - `local`: a local directory, with the stat cache that skips unchanged files;
//! - `stream`: files streamed from a source (a sync), with no local copy;
//! - `pipeline`: both read through it. Three stages run at once so that both cores
//!   work: one thread reads files in large blocks and cuts chunks; a pool hashes
//!   chunks; the calling thread, in file order, feeds each file's whole-content hash
//!   and hands new chunks to the pack writer;
//! - `packs`: the pack writer and publisher threads (fsync, publish, index) off the
//!   critical path; `buffers`: the recycled block buffers that bound memory.
//!
//! Write order is the repository's safety rule: packs → index → chunk lists →
//! (barrier) → manifest → tags (`Repository::seal`). A push killed at any point leaves
//! no manifest pointing at missing data, and its finished packs are re-indexed and
//! reused by the next push.

mod buffers;
pub(crate) mod lists;
mod local;
mod packs;
mod pipeline;
mod stream;

use std::io::Read;
use std::time::Duration;

use crate::chunk_index::ChunkIndex;
use crate::digest::Hash;
use crate::error::Result;
use crate::outcomes::VersionStats;
use crate::refs::{Digest, VolumeName};
use crate::repo::Repository;

pub use local::{PushOptions, SealGuard, StatCache, push, store_files};

/// The most hashes one question to a server names (`Remote::have_chunks`,
/// `Remote::stored_files`): 2 MiB of hashes.
pub const ASK_AT_ONCE: usize = 65536;
pub use stream::{
    Ingested, StoredFiles, StreamFile, check_stream_listing, ingest, seal_listing, seal_streams,
};

#[derive(Debug, Clone)]
pub struct PushReport {
    pub volume: VolumeName,
    pub digest: Digest,
    /// False when an identical version was already sealed.
    pub sealed_new: bool,
    pub stats: VersionStats,
    pub bytes_read: u64,
    pub chunks_reused: u64,
    /// Stored files whose chunk lists named damaged copies, healed by this push.
    pub files_healed: u64,
    /// Files the stat cache let us skip without reading.
    pub files_unchanged: u64,
    pub elapsed: Duration,
    /// What happened to each tag the push moved.
    pub tags: Vec<crate::outcomes::TagChange>,
}

impl PushReport {
    pub fn pinned_ref(&self) -> String {
        format!("vol:{}@{}", self.volume, self.digest)
    }
}

/// Where the pipeline gets a file's bytes: a local file, or a stream from a source.
pub trait Inputs: Sync {
    /// Opens file `i` of the listing.
    fn open(&self, i: usize) -> Result<Box<dyn Read + Send + '_>>;
    /// Names file `i` in errors.
    fn name(&self, i: usize) -> String;
    /// Called after the last byte of file `i` (`total` bytes) and before it can be
    /// sealed: an error means the file changed, or ended short, while it was read.
    fn finished(&self, i: usize, total: u64) -> Result<()>;
}

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
