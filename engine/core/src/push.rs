//! Push: a local directory becomes a sealed version.
//!
//! Three stages run at once so that both cores work: one thread reads files in large
//! blocks and cuts chunks; a pool hashes chunks; the calling thread, in file order,
//! feeds each file's whole-content hash and appends new chunks to packs. A fourth
//! thread publishes finished packs (fsync, link, index) off the critical path.
//!
//! Write order is the repository's safety rule: packs → index → files → (barrier) →
//! manifest → tags. A push killed at any point leaves no manifest pointing at missing
//! data, and its finished packs are re-indexed and reused by the next push.

use std::collections::{BTreeMap, HashMap};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use std::io::Read;

use crossbeam_channel::{Receiver, Sender, bounded};

use crate::chunk::{Block, BlockReader, ChunkParams};
use crate::digest::{Hash, version_digest};
use crate::error::{Error, ErrorKind, IoContext, Result};
use crate::objects::{self, ChunkRef, FLAG_RAW, FileObject, PackEntry, PackId};
use crate::progress::Progress;
use crate::refs::{Digest, Name, VolumeName};
use crate::registry::{MANIFEST_FORMAT, Manifest, Provenance, VersionStats, now_rfc3339, whoami};
use crate::repo::{
    ChunkIndex, ChunkLoc, Repository, file_key, index_key, json_error, manifest_key, pack_key,
};
use crate::walk::{Stamp, WalkKind, walk};

/// A file modified this close to the start of a push is not put in the stat cache: a
/// second write within the file system's timestamp granularity could leave its stamp
/// unchanged (git's "racily clean" problem).
const RACY_WINDOW_NS: i128 = 1_000_000_000;

pub struct PushOptions<'a> {
    /// Provenance source; `file://<absolute dir>` when `None`.
    pub source: Option<String>,
    /// Hashes of files earlier pushes read; none when `None`.
    pub stat_cache: Option<&'a dyn StatCache>,
    pub progress: &'a dyn Progress,
}

/// The stat cache: (path, stamp) → content hash of the files earlier pushes read, so a
/// re-push skips reading unchanged files. It only accelerates: a cache that knows
/// nothing, or is busy, makes a push read more, never seal anything else.
pub trait StatCache: Sync {
    /// The cached hash of each file whose stamp still matches exactly.
    fn lookup(&self, files: &[(PathBuf, Stamp)]) -> Result<Vec<Option<Hash>>>;
    /// Remembers these hashes; a failure is logged, never an error of the push.
    fn remember(&self, files: &[(PathBuf, Stamp, Hash)]);
}

#[derive(Debug, Clone)]
pub struct PushReport {
    pub volume: VolumeName,
    pub digest: Digest,
    /// False when an identical version was already sealed.
    pub sealed_new: bool,
    pub stats: VersionStats,
    pub bytes_read: u64,
    pub chunks_reused: u64,
    /// Files the stat cache let us skip without reading.
    pub files_unchanged: u64,
    pub elapsed: Duration,
}

impl PushReport {
    pub fn pinned_ref(&self) -> String {
        format!("vol:{}@{}", self.volume, self.digest)
    }
}

/// What the pipeline learns about one file it read.
struct HashedFile {
    hash: Hash,
    size: u64,
    chunks: Vec<ChunkLoc>,
}

pub fn push(
    repo: &Repository,
    dir: &Path,
    volume: &VolumeName,
    tags: &[Name],
    opts: &PushOptions,
) -> Result<PushReport> {
    let started = Instant::now();
    let start_ns = unix_ns(SystemTime::now());
    let dir = dir.canonicalize().ctx("cannot open", dir)?;
    let listing = walk(&dir)?;

    let mut index = index_after_recovery(repo)?;

    // Files whose stat-cache entry still matches and whose chunk list is stored.
    let files: Vec<(usize, PathBuf, Stamp)> = listing
        .iter()
        .enumerate()
        .filter_map(|(i, e)| match e.kind {
            WalkKind::File { stamp, .. } => Some((i, e.abs.clone(), stamp)),
            _ => None,
        })
        .collect();
    let mut known: HashMap<usize, Hash> = HashMap::new();
    if let Some(cache) = opts.stat_cache {
        let keys: Vec<(PathBuf, Stamp)> = files.iter().map(|(_, p, s)| (p.clone(), *s)).collect();
        for ((i, _, _), hit) in files.iter().zip(cache.lookup(&keys)?) {
            if let Some(h) = hit
                && repo.store().size(&file_key(&h))?.is_some()
            {
                known.insert(*i, h);
            }
        }
    }
    let to_read: Vec<(usize, u64)> = files
        .iter()
        .filter(|(i, _, _)| !known.contains_key(i))
        .map(|(i, _, s)| (*i, s.size))
        .collect();
    let inputs = LocalFiles {
        files: files
            .iter()
            .map(|(i, p, s)| (*i, (p.as_path(), *s)))
            .collect(),
    };
    let read_bytes: u64 = to_read.iter().map(|(_, size)| size).sum();
    opts.progress
        .begin("push", read_bytes, to_read.len() as u64);

    let params = repo.config().chunker.params;
    let pack_target = repo.config().pack_target;
    let outcome = run_pipeline(
        repo,
        &mut index,
        &to_read,
        &inputs,
        params,
        pack_target,
        opts.progress,
    )?;
    opts.progress.finish();
    store_chunk_lists(repo, &index, &outcome)?;

    let mut entries = Vec::with_capacity(listing.len());
    let mut stats = VersionStats {
        new_bytes: outcome.new_bytes,
        new_chunks: outcome.new_chunks,
        ..VersionStats::default()
    };
    for (i, e) in listing.iter().enumerate() {
        let mut hash = Hash([0; 32]);
        if let WalkKind::File { stamp, .. } = &e.kind {
            let chunks;
            (hash, chunks) = match outcome.files.get(&i) {
                Some(hf) => (hf.hash, hf.chunks.len() as u64),
                None => {
                    let h = known[&i];
                    (h, stored_chunk_count(repo, &h)?)
                }
            };
            stats.bytes += stamp.size;
            stats.files += 1;
            stats.chunks += chunks;
        }
        entries.push(e.to_entry(hash));
    }
    let provenance = Provenance {
        source: opts
            .source
            .clone()
            .unwrap_or_else(|| format!("file://{}", dir.display())),
        revision: None,
        pushed_by: whoami(),
        listed: None,
        objects: Default::default(),
    };
    let (digest, sealed_new) = seal(repo, volume, tags, entries, stats, provenance)?;

    if let Some(cache) = opts.stat_cache {
        remember_hashes(cache, &files, &outcome.files, start_ns);
    }

    Ok(PushReport {
        volume: volume.clone(),
        digest,
        sealed_new,
        stats,
        bytes_read: outcome.bytes_read,
        chunks_reused: outcome.chunks_reused,
        files_unchanged: known.len() as u64,
        elapsed: started.elapsed(),
    })
}

/// The chunk index, after indexing any packs an interrupted push left without one.
pub fn index_after_recovery(repo: &Repository) -> Result<ChunkIndex> {
    let recovered = repo.recover_orphan_packs()?;
    if recovered > 0 {
        tracing::info!("re-indexed {recovered} pack(s) left by an interrupted push");
    }
    repo.load_index()
}

/// Chunk lists of the files a pipeline read: after their packs and indexes are published.
fn store_chunk_lists(repo: &Repository, index: &ChunkIndex, outcome: &Outcome) -> Result<()> {
    for hf in outcome.files.values() {
        let obj = file_object(index, hf);
        repo.store()
            .put_if_absent(&file_key(&hf.hash), &obj.encode())?;
    }
    Ok(())
}

/// Writes the manifest (after a barrier: everything it refers to is durable first),
/// then moves the tags. Returns the digest, and whether this version is new.
fn seal(
    repo: &Repository,
    volume: &VolumeName,
    tags: &[Name],
    entries: Vec<crate::digest::Entry>,
    stats: VersionStats,
    provenance: Provenance,
) -> Result<(Digest, bool)> {
    let digest = version_digest(&entries);
    let manifest = Manifest {
        format: MANIFEST_FORMAT,
        volume: volume.to_string(),
        digest: digest.to_string(),
        created: now_rfc3339(),
        provenance,
        stats,
        entries,
    };
    let bytes = serde_json::to_vec(&manifest).map_err(json_error)?;
    repo.store().sync()?;
    let sealed_new = repo
        .store()
        .put_if_absent(&manifest_key(volume, &digest), &bytes)?;
    repo.store().sync()?;
    for tag in tags {
        repo.move_tag(volume, tag, &digest, None)?;
    }
    Ok((digest, sealed_new))
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

/// One file of a streamed listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamFile {
    /// A clean relative path (see `paths`).
    pub path: String,
    pub size: u64,
    pub exec: bool,
}

/// Seals a version from streams: the files of `listing`, read through `inputs` (file
/// `i` is `listing[i]`) straight into the chunker, with no local copy. Same bytes at the
/// same paths give the same digest as a push of a directory holding them.
pub fn seal_streams(
    repo: &Repository,
    volume: &VolumeName,
    tags: &[Name],
    listing: &[StreamFile],
    inputs: &dyn Inputs,
    provenance: Provenance,
    progress: &dyn Progress,
) -> Result<PushReport> {
    let started = Instant::now();
    check_stream_listing(listing)?;
    let mut index = index_after_recovery(repo)?;
    let total: u64 = listing.iter().map(|f| f.size).sum();
    progress.begin("sync", total, listing.len() as u64);
    let got = ingest(repo, &mut index, listing, inputs, progress)?;
    progress.finish();
    let (digest, sealed_new, stats) = seal_listing(
        repo,
        volume,
        tags,
        listing,
        &got.files,
        (got.new_bytes, got.new_chunks),
        provenance,
    )?;
    Ok(PushReport {
        volume: volume.clone(),
        digest,
        sealed_new,
        stats,
        bytes_read: got.bytes_read,
        chunks_reused: got.chunks_reused,
        files_unchanged: 0,
        elapsed: started.elapsed(),
    })
}

/// Refuses a streamed listing with unclean, repeated or clashing paths.
pub fn check_stream_listing(listing: &[StreamFile]) -> Result<()> {
    crate::paths::check_listing(listing.iter().map(|f| f.path.as_str()))?;
    for f in listing {
        if !crate::paths::is_clean_relative(&f.path) {
            return Err(Error::usage(format!(
                "{:?} is not a clean relative path",
                f.path
            )));
        }
    }
    Ok(())
}

/// What one pass of the pipeline over streamed files stored.
pub struct Ingested {
    /// By listing index: the file's content hash and chunk count.
    pub files: HashMap<usize, (Hash, u64)>,
    pub bytes_read: u64,
    pub new_bytes: u64,
    pub new_chunks: u64,
    pub chunks_reused: u64,
}

/// Reads every file of `listing` through `inputs` into packs, and stores their chunk
/// lists: when it returns, each file can be named by its hash in a manifest.
pub fn ingest(
    repo: &Repository,
    index: &mut ChunkIndex,
    listing: &[StreamFile],
    inputs: &dyn Inputs,
    progress: &dyn Progress,
) -> Result<Ingested> {
    let to_read: Vec<(usize, u64)> = listing
        .iter()
        .enumerate()
        .map(|(i, f)| (i, f.size))
        .collect();
    let params = repo.config().chunker.params;
    let outcome = run_pipeline(
        repo,
        index,
        &to_read,
        inputs,
        params,
        repo.config().pack_target,
        progress,
    )?;
    store_chunk_lists(repo, index, &outcome)?;
    Ok(Ingested {
        files: outcome
            .files
            .iter()
            .map(|(i, hf)| (*i, (hf.hash, hf.chunks.len() as u64)))
            .collect(),
        bytes_read: outcome.bytes_read,
        new_bytes: outcome.new_bytes,
        new_chunks: outcome.new_chunks,
        chunks_reused: outcome.chunks_reused,
    })
}

/// Seals `listing` whose files are all stored: `files` gives each one's hash and chunk
/// count by listing index; `(new_bytes, new_chunks)` is what this version added.
pub fn seal_listing(
    repo: &Repository,
    volume: &VolumeName,
    tags: &[Name],
    listing: &[StreamFile],
    files: &HashMap<usize, (Hash, u64)>,
    (new_bytes, new_chunks): (u64, u64),
    provenance: Provenance,
) -> Result<(Digest, bool, VersionStats)> {
    let mut order: Vec<usize> = (0..listing.len()).collect();
    order.sort_unstable_by(|&a, &b| listing[a].path.cmp(&listing[b].path));
    let mut stats = VersionStats {
        new_bytes,
        new_chunks,
        ..VersionStats::default()
    };
    let mut entries = Vec::with_capacity(listing.len());
    for i in order {
        let f = &listing[i];
        let (hash, chunks) = files
            .get(&i)
            .ok_or_else(|| Error::new(ErrorKind::Io, format!("{} was not read", f.path)))?;
        stats.bytes += f.size;
        stats.files += 1;
        stats.chunks += chunks;
        entries.push(crate::digest::Entry::File {
            path: f.path.clone(),
            size: f.size,
            hash: *hash,
            exec: f.exec,
        });
    }
    let (digest, sealed_new) = seal(repo, volume, tags, entries, stats, provenance)?;
    Ok((digest, sealed_new, stats))
}

/// Local files of a push, checked against the stamps they had when listed.
struct LocalFiles<'a> {
    files: HashMap<usize, (&'a Path, Stamp)>,
}

impl LocalFiles<'_> {
    fn get(&self, i: usize) -> Result<(&Path, &Stamp)> {
        self.files
            .get(&i)
            .map(|(p, s)| (*p, s))
            .ok_or_else(|| Error::new(ErrorKind::Io, format!("no file {i} in this push")))
    }
}

impl Inputs for LocalFiles<'_> {
    fn open(&self, i: usize) -> Result<Box<dyn Read + Send + '_>> {
        let (path, stamp) = self.get(i)?;
        let f = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(changed(path)),
            Err(e) => return Err(Error::io("cannot read", path, e)),
        };
        same_stamp(&f, path, stamp)?;
        Ok(Box::new(f))
    }

    fn name(&self, i: usize) -> String {
        self.get(i)
            .map(|(p, _)| p.display().to_string())
            .unwrap_or_default()
    }

    fn finished(&self, i: usize, total: u64) -> Result<()> {
        let (path, stamp) = self.get(i)?;
        // A version must never seal bytes that differ from what its digest says.
        let now = std::fs::symlink_metadata(path).map(|m| Stamp::of(&m));
        if total != stamp.size || now.ok().as_ref() != Some(stamp) {
            return Err(changed(path));
        }
        Ok(())
    }
}

pub fn stored_chunk_count(repo: &Repository, h: &Hash) -> Result<u64> {
    let key = file_key(h);
    let bytes = repo
        .store()
        .get(&key)?
        .ok_or_else(|| Error::corrupt(format!("{key} vanished during the push")))?;
    Ok(FileObject::decode(&key, &bytes)?.chunks.len() as u64)
}

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
    FileObject {
        size: hf.size,
        packs,
        chunks,
    }
}

fn remember_hashes(
    cache: &dyn StatCache,
    files: &[(usize, PathBuf, Stamp)],
    hashed: &HashMap<usize, HashedFile>,
    start_ns: i128,
) {
    let items: Vec<(PathBuf, Stamp, Hash)> = files
        .iter()
        .filter(|(_, _, s)| {
            s.mtime_ns < start_ns - RACY_WINDOW_NS && s.ctime_ns < start_ns - RACY_WINDOW_NS
        })
        .filter_map(|(i, p, s)| hashed.get(i).map(|hf| (p.clone(), *s, hf.hash)))
        .collect();
    if !items.is_empty() {
        cache.remember(&items);
    }
}

fn unix_ns(t: SystemTime) -> i128 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as i128)
        .unwrap_or(0)
}

/// A block on its way through the pipeline, tagged with its place in the sequence.
struct Work {
    seq: u64,
    file: usize,
    block: Result<Block>,
}

struct Hashed {
    seq: u64,
    file: usize,
    block: Result<Block>,
    hashes: Vec<Hash>,
}

struct Outcome {
    files: HashMap<usize, HashedFile>,
    bytes_read: u64,
    new_bytes: u64,
    new_chunks: u64,
    chunks_reused: u64,
}

#[allow(clippy::too_many_arguments)]
fn run_pipeline(
    repo: &Repository,
    index: &mut ChunkIndex,
    files: &[(usize, u64)],
    inputs: &dyn Inputs,
    params: ChunkParams,
    pack_target: u64,
    progress: &dyn Progress,
) -> Result<Outcome> {
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .clamp(1, 8);
    // Small queues bound memory: each item holds up to one BLOCK of file data.
    let (work_tx, work_rx) = bounded::<Work>(1);
    let (done_tx, done_rx) = bounded::<Hashed>(2);
    let (ops_tx, ops_rx) = bounded::<PackOp>(4);
    let (pub_tx, pub_rx) = bounded::<FinishedPack>(1);
    // Blocks in flight: one being read, queued ones, one per hasher, the writer's
    // reorder window, the pack writer's queue. The pool holds at most this many
    // buffers, which bounds memory whatever the input.
    let pool = BufferPool::new(workers + 10);

    std::thread::scope(|s| {
        let pool = &pool;
        s.spawn(move || read_files(files, inputs, params, pool, work_tx));
        for _ in 0..workers {
            let rx = work_rx.clone();
            let tx = done_tx.clone();
            s.spawn(move || hash_blocks(rx, tx));
        }
        drop(work_rx);
        drop(done_tx);
        let pack_writer = s.spawn(move || write_packs(ops_rx, pub_tx, pool));
        let publisher = s.spawn(move || publish_packs(repo, pub_rx));

        let result = write_in_order(repo, index, done_rx, pack_target, ops_tx, pool, progress);
        pool.close();
        // Both threads end once their input channel's sender is dropped (inside
        // write_in_order), after finishing what they were given.
        let written = pack_writer
            .join()
            .unwrap_or_else(|_| Err(Error::new(ErrorKind::Io, "pack writer panicked")));
        let published = publisher
            .join()
            .unwrap_or_else(|_| Err(Error::new(ErrorKind::Io, "pack publisher panicked")));
        let outcome = result?;
        written?;
        published?;
        Ok(outcome)
    })
}

fn read_files(
    files: &[(usize, u64)],
    inputs: &dyn Inputs,
    params: ChunkParams,
    pool: &BufferPool,
    tx: Sender<Work>,
) {
    let mut seq = 0u64;
    for &(file, _size) in files {
        let mut send = |block: Result<Block>| {
            let failed = block.is_err();
            let ok = tx.send(Work { seq, file, block }).is_ok();
            seq += 1;
            ok && !failed
        };
        let r = match inputs.open(file) {
            Ok(r) => r,
            Err(e) => {
                send(Err(e));
                return;
            }
        };
        let mut reader = BlockReader::new(r, params);
        let mut total = 0u64;
        loop {
            let block = match reader.next_block(pool.take(reader.buffer_capacity())) {
                Ok(Some(b)) => b,
                Ok(None) => break,
                Err(e) => {
                    send(Err(Error::new(
                        ErrorKind::Io,
                        format!("cannot read {}: {e}", inputs.name(file)),
                    )));
                    return;
                }
            };
            total += block.data.len() as u64;
            let last = block.last;
            // Before the last block leaves, the input confirms it is complete and
            // unchanged.
            let block = if last {
                inputs.finished(file, total).map(|()| block)
            } else {
                Ok(block)
            };
            if !send(block) || last {
                break;
            }
        }
    }
}

fn same_stamp(f: &File, path: &Path, stamp: &Stamp) -> Result<()> {
    let meta = f.metadata().ctx("cannot read", path)?;
    if Stamp::of(&meta) != *stamp {
        return Err(changed(path));
    }
    Ok(())
}

fn changed(path: &Path) -> Error {
    Error::new(
        ErrorKind::Changed,
        format!("{} changed while it was being pushed", path.display()),
    )
    .hint("push again once writing has finished; nothing was sealed")
}

fn hash_blocks(rx: Receiver<Work>, tx: Sender<Hashed>) {
    for w in rx {
        let hashes = match &w.block {
            Ok(b) => {
                let mut off = 0usize;
                b.lens
                    .iter()
                    .map(|&l| {
                        let h = Hash::of(&b.data[off..off + l as usize]);
                        off += l as usize;
                        h
                    })
                    .collect()
            }
            Err(_) => Vec::new(),
        };
        let msg = Hashed {
            seq: w.seq,
            file: w.file,
            block: w.block,
            hashes,
        };
        if tx.send(msg).is_err() {
            return;
        }
    }
}

/// Per file, while its blocks stream by.
struct OpenFile {
    hasher: blake3::Hasher,
    size: u64,
    chunks: Vec<ChunkLoc>,
}

/// Takes hashed blocks in file order: feeds each file's whole-content hash, decides
/// for every chunk whether the repository has it, and places new ones in packs. The
/// bytes themselves are written by the pack writer thread, which on small machines
/// spends more time in the kernel's page cache than this thread spends hashing.
fn write_in_order(
    repo: &Repository,
    index: &mut ChunkIndex,
    rx: Receiver<Hashed>,
    pack_target: u64,
    ops: Sender<PackOp>,
    pool: &BufferPool,
    progress: &dyn Progress,
) -> Result<Outcome> {
    let mut out = Outcome {
        files: HashMap::new(),
        bytes_read: 0,
        new_bytes: 0,
        new_chunks: 0,
        chunks_reused: 0,
    };
    let mut waiting: BTreeMap<u64, Hashed> = BTreeMap::new();
    let mut next = 0u64;
    let mut open: Option<(usize, OpenFile)> = None;
    let mut packer = Packer {
        current: None,
        target: pack_target,
        ops,
        ranges: Vec::new(),
    };
    for msg in rx {
        waiting.insert(msg.seq, msg);
        while let Some(m) = waiting.remove(&next) {
            next += 1;
            let block = m.block?;
            let last = block.last;
            let data = Arc::new(block.data);
            let (file_no, of) = open.get_or_insert_with(|| {
                (
                    m.file,
                    OpenFile {
                        hasher: blake3::Hasher::new(),
                        size: 0,
                        chunks: Vec::new(),
                    },
                )
            });
            debug_assert_eq!(*file_no, m.file);
            let mut off = 0u32;
            let (new_before, reused_before) = (out.new_chunks, out.chunks_reused);
            for (&len, hash) in block.lens.iter().zip(&m.hashes) {
                let loc = match index.chunks.get(hash) {
                    Some(loc) => {
                        out.chunks_reused += 1;
                        *loc
                    }
                    None => {
                        let loc = packer.place(repo, index, *hash, &data, off, len)?;
                        index.chunks.insert(*hash, loc);
                        out.new_chunks += 1;
                        out.new_bytes += len as u64;
                        loc
                    }
                };
                of.chunks.push(loc);
                off += len;
            }
            packer.flush(&data)?;
            // Hashing the whole file overlaps with the pack writer copying this block.
            of.hasher.update(&data);
            of.size += data.len() as u64;
            out.bytes_read += data.len() as u64;
            progress.chunks(
                out.new_chunks - new_before,
                out.chunks_reused - reused_before,
            );
            progress.advance(data.len() as u64);
            pool.give_back_shared(data);
            if last && let Some((file_no, of)) = open.take() {
                progress.file_done();
                out.files.insert(
                    file_no,
                    HashedFile {
                        hash: Hash(*of.hasher.finalize().as_bytes()),
                        size: of.size,
                        chunks: of.chunks,
                    },
                );
            }
        }
    }
    if !waiting.is_empty() || open.is_some() {
        return Err(Error::new(
            ErrorKind::Io,
            "push pipeline stopped early (a reader thread failed)",
        ));
    }
    packer.close(index)?;
    Ok(out)
}

/// What the pack writer thread is asked to do, in order.
enum PackOp {
    /// Start a new staging file.
    Open(PathBuf),
    /// Append these byte ranges of a block to the open pack.
    Write(Arc<Vec<u8>>, Vec<(u32, u32)>),
    /// Append the trailer and hand the pack to the publisher.
    Close(PackId, Vec<PackEntry>),
}

/// Bookkeeping for the pack being filled: which slot and offset each new chunk gets.
struct OpenPack {
    slot: u32,
    offset: u64,
    entries: Vec<PackEntry>,
}

struct Packer {
    current: Option<OpenPack>,
    target: u64,
    ops: Sender<PackOp>,
    /// Ranges of the current block waiting to be written to the current pack.
    ranges: Vec<(u32, u32)>,
}

impl Packer {
    fn send(&self, op: PackOp) -> Result<()> {
        self.ops
            .send(op)
            .map_err(|_| Error::new(ErrorKind::Io, "pack writer stopped"))
    }

    /// Gives a new chunk its place in the current pack (opening one if needed).
    fn place(
        &mut self,
        repo: &Repository,
        index: &mut ChunkIndex,
        hash: Hash,
        data: &Arc<Vec<u8>>,
        off: u32,
        len: u32,
    ) -> Result<ChunkLoc> {
        if self.current.is_none() {
            self.send(PackOp::Open(repo.store().staging_path()?))?;
            // The slot's id is filled in when the pack is closed.
            index.packs.push(Hash([0; 32]));
            self.current = Some(OpenPack {
                slot: index.packs.len() as u32 - 1,
                offset: objects::PACK_MAGIC.len() as u64,
                entries: Vec::new(),
            });
        }
        let Some(p) = self.current.as_mut() else {
            unreachable!("a pack was just opened");
        };
        let entry = PackEntry {
            hash,
            offset: p.offset,
            stored_len: len,
            raw_len: len,
            flags: FLAG_RAW,
        };
        p.offset += len as u64;
        p.entries.push(entry);
        let loc = ChunkLoc {
            slot: p.slot,
            entry,
        };
        self.ranges.push((off, len));
        if p.offset >= self.target {
            self.flush(data)?;
            self.close(index)?;
        }
        Ok(loc)
    }

    /// Sends the current block's pending ranges to the pack writer.
    fn flush(&mut self, data: &Arc<Vec<u8>>) -> Result<()> {
        if self.ranges.is_empty() {
            return Ok(());
        }
        let ranges = std::mem::take(&mut self.ranges);
        self.send(PackOp::Write(Arc::clone(data), ranges))
    }

    fn close(&mut self, index: &mut ChunkIndex) -> Result<()> {
        let Some(p) = self.current.take() else {
            return Ok(());
        };
        let id = objects::pack_id(&p.entries);
        index.packs[p.slot as usize] = id;
        self.send(PackOp::Close(id, p.entries))
    }
}

/// The pack writer thread: performs `PackOp`s in order. After a failure it keeps
/// draining (returning buffers to the pool) and reports the first error at the end.
fn write_packs(
    rx: Receiver<PackOp>,
    publish: Sender<FinishedPack>,
    pool: &BufferPool,
) -> Result<()> {
    let mut current: Option<(PathBuf, File)> = None;
    let mut first_error: Option<Error> = None;
    for op in rx {
        if first_error.is_some() {
            if let PackOp::Write(data, _) = op {
                pool.give_back_shared(data);
            }
            continue;
        }
        if let Err(e) = apply_pack_op(op, &mut current, &publish, pool) {
            first_error = Some(e);
        }
    }
    first_error.map_or(Ok(()), Err)
}

fn apply_pack_op(
    op: PackOp,
    current: &mut Option<(PathBuf, File)>,
    publish: &Sender<FinishedPack>,
    pool: &BufferPool,
) -> Result<()> {
    match op {
        PackOp::Open(path) => {
            let mut f = OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
                .ctx("cannot create", &path)?;
            f.write_all(objects::PACK_MAGIC)
                .ctx("cannot write", &path)?;
            *current = Some((path, f));
        }
        PackOp::Write(data, ranges) => {
            let result = match current.as_mut() {
                Some((path, f)) => ranges.iter().try_for_each(|&(off, len)| {
                    f.write_all(&data[off as usize..(off + len) as usize])
                        .ctx("cannot write", path)
                }),
                None => Err(Error::new(ErrorKind::Io, "pack write before open")),
            };
            pool.give_back_shared(data);
            result?;
        }
        PackOp::Close(id, entries) => {
            let Some((path, mut f)) = current.take() else {
                return Err(Error::new(ErrorKind::Io, "pack close before open"));
            };
            f.write_all(&objects::encode_trailer(&entries))
                .ctx("cannot write", &path)?;
            drop(f);
            publish
                .send(FinishedPack { path, id, entries })
                .map_err(|_| Error::new(ErrorKind::Io, "pack publisher stopped"))?;
        }
    }
    Ok(())
}

struct FinishedPack {
    path: PathBuf,
    id: PackId,
    entries: Vec<PackEntry>,
}

/// Publishes packs in the order they were finished: the pack (fsynced), then its
/// index. Runs apart so that fsync latency overlaps with the rest of the push.
fn publish_packs(repo: &Repository, rx: Receiver<FinishedPack>) -> Result<()> {
    let mut first_error = None;
    for p in rx {
        if first_error.is_some() {
            let _ = std::fs::remove_file(&p.path);
            continue;
        }
        let r = repo
            .store()
            .put_file_if_absent(&pack_key(&p.id), &p.path)
            .and_then(|_| {
                repo.store()
                    .put_if_absent(&index_key(&p.id), &objects::encode_index(&p.entries))
            });
        if let Err(e) = r {
            first_error = Some(e);
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// Recycled block buffers. `take` waits when every buffer is in flight, which is what
/// bounds a push's memory whatever the size of the input.
struct BufferPool {
    tx: Sender<Vec<u8>>,
    rx: Receiver<Vec<u8>>,
    made: AtomicUsize,
    limit: usize,
    /// Set when the writer stops, so a reader waiting for a buffer gives up.
    closed: AtomicBool,
}

impl BufferPool {
    fn new(limit: usize) -> BufferPool {
        let (tx, rx) = bounded(limit);
        BufferPool {
            tx,
            rx,
            made: AtomicUsize::new(0),
            limit,
            closed: AtomicBool::new(false),
        }
    }

    fn take(&self, capacity: usize) -> Vec<u8> {
        if let Ok(b) = self.rx.try_recv() {
            return b;
        }
        if self.made.fetch_add(1, Ordering::Relaxed) < self.limit {
            return Vec::with_capacity(capacity);
        }
        // Every buffer is in flight; the writers return them as they finish blocks.
        while !self.closed.load(Ordering::Relaxed) {
            if let Ok(b) = self.rx.recv_timeout(Duration::from_millis(50)) {
                return b;
            }
        }
        // The writer has stopped: the reader's next send fails and it ends.
        Vec::new()
    }

    /// Returns a buffer shared between the ordered writer and the pack writer: exactly
    /// one of the two holders gets it back (`Arc::into_inner` guarantees that).
    fn give_back_shared(&self, b: Arc<Vec<u8>>) {
        // Not cleared: its bytes stay initialised, so the next block reads into them
        // without zeroing 16 MiB first (BlockReader::next_block).
        if let Some(b) = Arc::into_inner(b) {
            let _ = self.tx.try_send(b);
        }
    }

    fn close(&self) {
        self.closed.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod stream_tests {
    use super::*;
    use crate::progress::Quiet;
    use crate::registry::Provenance;
    use crate::testutil::noise;

    /// In-memory sources; `short` makes one file end early, like a dropped connection.
    struct Mem {
        files: Vec<(StreamFile, Vec<u8>)>,
        short: Option<usize>,
    }

    impl Inputs for Mem {
        fn open(&self, i: usize) -> Result<Box<dyn Read + Send + '_>> {
            let b = &self.files[i].1;
            let end = if self.short == Some(i) {
                b.len() / 2
            } else {
                b.len()
            };
            Ok(Box::new(&b[..end]))
        }
        fn name(&self, i: usize) -> String {
            self.files[i].0.path.clone()
        }
        fn finished(&self, i: usize, total: u64) -> Result<()> {
            if total != self.files[i].0.size {
                return Err(Error::new(
                    ErrorKind::Changed,
                    format!("{} ended after {total} bytes", self.files[i].0.path),
                ));
            }
            Ok(())
        }
    }

    fn provenance() -> Provenance {
        Provenance {
            source: "test://mem".into(),
            revision: Some("r1".into()),
            pushed_by: "test".into(),
            listed: None,
            objects: Default::default(),
        }
    }

    #[test]
    fn streams_seal_the_digest_of_the_same_files_on_disk() {
        let dir = tempfile::tempdir().unwrap();
        let files: Vec<(StreamFile, Vec<u8>)> = [
            ("model.safetensors", noise(3 << 20, 1)),
            ("1_Pooling/config.json", b"{\"x\": 1}".to_vec()),
            ("empty", Vec::new()),
            ("a/b/c.bin", noise(100_000, 2)),
        ]
        .into_iter()
        .map(|(p, b)| {
            (
                StreamFile {
                    path: p.into(),
                    size: b.len() as u64,
                    exec: false,
                },
                b,
            )
        })
        .collect();
        let disk = dir.path().join("disk");
        for (f, b) in &files {
            let p = disk.join(&f.path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, b).unwrap();
        }
        let repo = Repository::open_local(&dir.path().join("repo"), true, false).unwrap();
        let vol = VolumeName::parse("t/stream").unwrap();
        let listing: Vec<StreamFile> = files.iter().map(|(f, _)| f.clone()).collect();
        let mem = Mem {
            files: files.clone(),
            short: None,
        };
        let r = seal_streams(&repo, &vol, &[], &listing, &mem, provenance(), &Quiet).unwrap();
        assert_eq!(r.digest, crate::walk::digest_dir(&disk).unwrap());
        assert_eq!(
            repo.manifest(&vol, &r.digest).unwrap().provenance.revision,
            Some("r1".into())
        );
        // Again: the same digest, and not one new chunk.
        let again = seal_streams(&repo, &vol, &[], &listing, &mem, provenance(), &Quiet).unwrap();
        assert_eq!(again.digest, r.digest);
        assert!(!again.sealed_new);
        assert_eq!(again.stats.new_chunks, 0);
    }

    #[test]
    fn a_stream_that_ends_early_seals_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::open_local(&dir.path().join("repo"), true, false).unwrap();
        let vol = VolumeName::parse("t/short").unwrap();
        let b = noise(1 << 20, 3);
        let f = StreamFile {
            path: "w.bin".into(),
            size: b.len() as u64,
            exec: false,
        };
        let mem = Mem {
            files: vec![(f.clone(), b)],
            short: Some(0),
        };
        let e = seal_streams(&repo, &vol, &[], &[f], &mem, provenance(), &Quiet).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Changed, "{e}");
        assert!(repo.versions(&vol).unwrap_or_default().is_empty());
    }

    #[test]
    fn unsafe_listings_are_refused_before_reading() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::open_local(&dir.path().join("repo"), true, false).unwrap();
        let vol = VolumeName::parse("t/bad").unwrap();
        for paths in [vec!["../x"], vec!["a", "a/b"], vec!["d", "d"], vec!["/abs"]] {
            let files: Vec<(StreamFile, Vec<u8>)> = paths
                .iter()
                .map(|p| {
                    (
                        StreamFile {
                            path: p.to_string(),
                            size: 1,
                            exec: false,
                        },
                        vec![1],
                    )
                })
                .collect();
            let listing: Vec<StreamFile> = files.iter().map(|(f, _)| f.clone()).collect();
            let mem = Mem { files, short: None };
            assert!(
                seal_streams(&repo, &vol, &[], &listing, &mem, provenance(), &Quiet).is_err(),
                "{paths:?}"
            );
        }
    }
}
