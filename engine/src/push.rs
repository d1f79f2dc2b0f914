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
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crossbeam_channel::{Receiver, Sender, bounded};

use crate::chunk::{Block, BlockReader, ChunkParams};
use crate::digest::{Entry, Hash, version_digest};
use crate::error::{Error, ErrorKind, IoContext, Result};
use crate::objects::{self, ChunkRef, FLAG_RAW, FileObject, PackEntry, PackId};
use crate::progress::Progress;
use crate::refs::{Digest, Name, VolumeName};
use crate::registry::{MANIFEST_FORMAT, Manifest, Provenance, VersionStats, now_rfc3339, whoami};
use crate::repo::{
    ChunkIndex, ChunkLoc, Repository, file_key, index_key, json_error, manifest_key, pack_key,
};
use crate::state::StateDb;
use crate::walk::{Stamp, WalkKind, walk};

/// A file modified this close to the start of a push is not put in the stat cache: a
/// second write within the file system's timestamp granularity could leave its stamp
/// unchanged (git's "racily clean" problem).
const RACY_WINDOW_NS: i128 = 1_000_000_000;

pub struct PushOptions<'a> {
    /// Provenance source; `file://<absolute dir>` when `None`.
    pub source: Option<String>,
    /// State directory for the stat cache; no cache when `None`.
    pub state_dir: Option<&'a Path>,
    pub progress: &'a dyn Progress,
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

    let recovered = repo.recover_orphan_packs()?;
    if recovered > 0 {
        tracing::info!("re-indexed {recovered} pack(s) left by an interrupted push");
    }
    let mut index = repo.load_index()?;

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
    if let Some(state) = opts.state_dir
        && let Some(db) = StateDb::open(state, Duration::from_millis(200))?
    {
        let keys: Vec<(PathBuf, Stamp)> = files.iter().map(|(_, p, s)| (p.clone(), *s)).collect();
        for ((i, _, _), hit) in files.iter().zip(db.lookup(&keys)?) {
            if let Some(h) = hit
                && repo.store().size(&file_key(&h))?.is_some()
            {
                known.insert(*i, h);
            }
        }
    }
    let to_read: Vec<(usize, PathBuf, Stamp)> = files
        .iter()
        .filter(|(i, _, _)| !known.contains_key(i))
        .cloned()
        .collect();
    let read_bytes: u64 = to_read.iter().map(|(_, _, s)| s.size).sum();
    opts.progress
        .begin("push", read_bytes, to_read.len() as u64);

    let params = repo.config().chunker.params;
    let pack_target = repo.config().pack_target;
    let outcome = run_pipeline(
        repo,
        &mut index,
        &to_read,
        params,
        pack_target,
        opts.progress,
    )?;
    opts.progress.finish();

    // Chunk lists of the files we read: after their packs and indexes are published.
    for hf in outcome.files.values() {
        let obj = file_object(&index, hf);
        repo.store()
            .put_if_absent(&file_key(&hf.hash), &obj.encode())?;
    }

    let mut entries = Vec::with_capacity(listing.len());
    let mut stats = VersionStats {
        new_bytes: outcome.new_bytes,
        new_chunks: outcome.new_chunks,
        ..VersionStats::default()
    };
    for (i, e) in listing.iter().enumerate() {
        entries.push(match &e.kind {
            WalkKind::File { stamp, exec } => {
                let (hash, chunks) = match outcome.files.get(&i) {
                    Some(hf) => (hf.hash, hf.chunks.len() as u64),
                    None => {
                        let h = known[&i];
                        (h, stored_chunk_count(repo, &h)?)
                    }
                };
                stats.bytes += stamp.size;
                stats.files += 1;
                stats.chunks += chunks;
                Entry::File {
                    path: e.path.clone(),
                    size: stamp.size,
                    hash,
                    exec: *exec,
                }
            }
            WalkKind::Symlink { target } => Entry::Symlink {
                path: e.path.clone(),
                target: target.clone(),
            },
            WalkKind::EmptyDir => Entry::Dir {
                path: e.path.clone(),
            },
        });
    }
    let digest = version_digest(&entries);
    let manifest = Manifest {
        format: MANIFEST_FORMAT,
        volume: volume.to_string(),
        digest: digest.to_string(),
        created: now_rfc3339(),
        provenance: Provenance {
            source: opts
                .source
                .clone()
                .unwrap_or_else(|| format!("file://{}", dir.display())),
            revision: None,
            pushed_by: whoami(),
        },
        stats,
        entries,
    };
    let bytes = serde_json::to_vec(&manifest).map_err(json_error)?;
    // Barrier: everything the manifest refers to is durable before the manifest is.
    repo.store().sync()?;
    let sealed_new = repo
        .store()
        .put_if_absent(&manifest_key(volume, &digest), &bytes)?;
    repo.store().sync()?;
    for tag in tags {
        repo.move_tag(volume, tag, &digest, None)?;
    }

    if let Some(state) = opts.state_dir {
        remember_hashes(state, &files, &outcome.files, start_ns);
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

fn stored_chunk_count(repo: &Repository, h: &Hash) -> Result<u64> {
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
    state: &Path,
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
    if items.is_empty() {
        return;
    }
    // The cache only speeds up the next push; failing to update it is not an error.
    match StateDb::open(state, Duration::from_millis(200)) {
        Ok(Some(db)) => {
            if let Err(e) = db.remember(&items) {
                tracing::warn!("stat cache not updated: {e}");
            }
        }
        Ok(None) => tracing::debug!("state database busy; stat cache not updated"),
        Err(e) => tracing::warn!("stat cache not updated: {e}"),
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

fn run_pipeline(
    repo: &Repository,
    index: &mut ChunkIndex,
    files: &[(usize, PathBuf, Stamp)],
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
    let (pub_tx, pub_rx) = bounded::<FinishedPack>(1);

    // Blocks in flight: one being read, queued ones, one per hasher, the writer's
    // reorder window. The pool holds at most this many buffers, which bounds memory.
    let pool = BufferPool::new(workers + 6);
    std::thread::scope(|s| {
        let pool = &pool;
        s.spawn(move || read_files(files, params, pool, work_tx));
        for _ in 0..workers {
            let rx = work_rx.clone();
            let tx = done_tx.clone();
            s.spawn(move || hash_blocks(rx, tx));
        }
        drop(work_rx);
        drop(done_tx);
        let publisher = s.spawn(move || publish_packs(repo, pub_rx));

        let result = write_in_order(repo, index, done_rx, pack_target, pub_tx, pool, progress);
        pool.close();
        // The publisher ends when `pub_tx` is dropped (inside write_in_order).
        let published = publisher
            .join()
            .unwrap_or_else(|_| Err(Error::new(ErrorKind::Io, "pack publisher panicked")));
        let outcome = result?;
        published?;
        Ok(outcome)
    })
}

fn read_files(
    files: &[(usize, PathBuf, Stamp)],
    params: ChunkParams,
    pool: &BufferPool,
    tx: Sender<Work>,
) {
    let mut seq = 0u64;
    for (file, path, stamp) in files {
        let mut send = |block: Result<Block>| {
            let failed = block.is_err();
            let ok = tx
                .send(Work {
                    seq,
                    file: *file,
                    block,
                })
                .is_ok();
            seq += 1;
            ok && !failed
        };
        let f = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                send(Err(changed(path)));
                return;
            }
            Err(e) => {
                send(Err(Error::io("cannot read", path, e)));
                return;
            }
        };
        if let Err(e) = same_stamp(&f, path, stamp) {
            send(Err(e));
            return;
        }
        let mut reader = BlockReader::new(&f, params);
        let mut total = 0u64;
        loop {
            let block = match reader.next_block(pool.take(reader.buffer_capacity())) {
                Ok(Some(b)) => b,
                Ok(None) => break,
                Err(e) => {
                    send(Err(Error::io("cannot read", path, e)));
                    return;
                }
            };
            total += block.data.len() as u64;
            let last = block.last;
            // Before the last block leaves, check the file did not change under us:
            // a version must never seal bytes that differ from what its digest says.
            let block = if last && (total != stamp.size || same_stamp(&f, path, stamp).is_err()) {
                Err(changed(path))
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

fn write_in_order(
    repo: &Repository,
    index: &mut ChunkIndex,
    rx: Receiver<Hashed>,
    pack_target: u64,
    publish: Sender<FinishedPack>,
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
        publish,
    };
    for msg in rx {
        waiting.insert(msg.seq, msg);
        while let Some(m) = waiting.remove(&next) {
            next += 1;
            let block = m.block?;
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
            of.hasher.update(&block.data);
            of.size += block.data.len() as u64;
            let mut off = 0usize;
            for (&len, hash) in block.lens.iter().zip(&m.hashes) {
                let bytes = &block.data[off..off + len as usize];
                off += len as usize;
                let loc = match index.chunks.get(hash) {
                    Some(loc) => {
                        out.chunks_reused += 1;
                        *loc
                    }
                    None => {
                        let loc = packer.append(repo, index, *hash, bytes)?;
                        index.chunks.insert(*hash, loc);
                        out.new_chunks += 1;
                        out.new_bytes += len as u64;
                        loc
                    }
                };
                of.chunks.push(loc);
            }
            out.bytes_read += block.data.len() as u64;
            progress.advance(block.data.len() as u64);
            let last = block.last;
            pool.give_back(block.data);
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
    packer.finish(index)?;
    Ok(out)
}

/// A pack being filled: a staging file plus the entries written so far.
struct PackBuilder {
    path: PathBuf,
    file: File,
    slot: u32,
    offset: u64,
    entries: Vec<PackEntry>,
}

struct FinishedPack {
    path: PathBuf,
    id: PackId,
    entries: Vec<PackEntry>,
}

struct Packer {
    current: Option<PackBuilder>,
    target: u64,
    publish: Sender<FinishedPack>,
}

impl Packer {
    fn append(
        &mut self,
        repo: &Repository,
        index: &mut ChunkIndex,
        hash: Hash,
        bytes: &[u8],
    ) -> Result<ChunkLoc> {
        if self.current.is_none() {
            let path = repo.store().staging_path()?;
            let f = OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
                .ctx("cannot create", &path)?;
            // Unbuffered: chunks are large, and a buffer would only add a copy.
            let mut file = f;
            file.write_all(objects::PACK_MAGIC)
                .ctx("cannot write", &path)?;
            // The slot's id is filled in when the pack is finished.
            index.packs.push(Hash([0; 32]));
            self.current = Some(PackBuilder {
                path,
                file,
                slot: index.packs.len() as u32 - 1,
                offset: objects::PACK_MAGIC.len() as u64,
                entries: Vec::new(),
            });
        }
        let Some(b) = self.current.as_mut() else {
            unreachable!("a pack was just opened");
        };
        b.file.write_all(bytes).ctx("cannot write", &b.path)?;
        let entry = PackEntry {
            hash,
            offset: b.offset,
            stored_len: bytes.len() as u32,
            raw_len: bytes.len() as u32,
            flags: FLAG_RAW,
        };
        b.offset += bytes.len() as u64;
        b.entries.push(entry);
        let loc = ChunkLoc {
            slot: b.slot,
            entry,
        };
        if b.offset >= self.target {
            self.close(index)?;
        }
        Ok(loc)
    }

    fn close(&mut self, index: &mut ChunkIndex) -> Result<()> {
        let Some(mut b) = self.current.take() else {
            return Ok(());
        };
        b.file
            .write_all(&objects::encode_trailer(&b.entries))
            .ctx("cannot write", &b.path)?;
        let id = objects::pack_id(&b.entries);
        index.packs[b.slot as usize] = id;
        self.publish
            .send(FinishedPack {
                path: b.path,
                id,
                entries: b.entries,
            })
            .map_err(|_| Error::new(ErrorKind::Io, "pack publisher stopped"))
    }

    fn finish(mut self, index: &mut ChunkIndex) -> Result<()> {
        self.close(index)
    }
}

/// Publishes packs in the order they were finished: the pack, then its index.
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

/// Recycled block buffers. `take` blocks when every buffer is in flight, which is what
/// bounds a push's memory whatever the size of the input.
struct BufferPool {
    tx: Sender<Vec<u8>>,
    rx: Receiver<Vec<u8>>,
    made: std::sync::atomic::AtomicUsize,
    limit: usize,
    /// Set when the writer stops, so a reader waiting for a buffer gives up.
    closed: std::sync::atomic::AtomicBool,
}

impl BufferPool {
    fn new(limit: usize) -> BufferPool {
        let (tx, rx) = bounded(limit);
        BufferPool {
            tx,
            rx,
            made: std::sync::atomic::AtomicUsize::new(0),
            limit,
            closed: std::sync::atomic::AtomicBool::new(false),
        }
    }

    fn take(&self, capacity: usize) -> Vec<u8> {
        use std::sync::atomic::Ordering;
        if let Ok(b) = self.rx.try_recv() {
            return b;
        }
        if self.made.fetch_add(1, Ordering::Relaxed) < self.limit {
            return Vec::with_capacity(capacity);
        }
        // Every buffer is in flight; the writer returns one as it finishes a block.
        while !self.closed.load(Ordering::Relaxed) {
            if let Ok(b) = self.rx.recv_timeout(Duration::from_millis(50)) {
                return b;
            }
        }
        // The writer has stopped: the reader's next send fails and it ends.
        Vec::new()
    }

    fn close(&self) {
        self.closed
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    fn give_back(&self, mut b: Vec<u8>) {
        b.clear();
        let _ = self.tx.try_send(b);
    }
}
