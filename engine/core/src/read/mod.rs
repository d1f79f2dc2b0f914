//! The read layer: the one place a chunk is fetched, in tier order (the node-disk
//! cache, then the origin repository), and checked against its BLAKE3 hash on the way
//! in: a bad cached chunk is dropped and fetched again; a bad origin copy is written
//! down as damage (`health.rs`) and another copy is tried before the read fails. A
//! chunk that fails its check is never returned.
//!
//! Misses are fetched in runs: chunks that lie next to each other in one pack are read
//! with one range request, which is what makes a cold sequential read fast on a remote
//! origin and cheap on a local one.
//!
//! Every reader goes through `Chunks`: a mount and a pull read `Tiers` (cache, then
//! peers, then origin, then mirrors); verify and diff read `Origin`, the repository
//! alone, because they judge what the repository holds and not what a cache remembers.
//! Whether bytes are the file's is decided in one place, `Chunks::fetch_proving`, for
//! a pull, a mount's read (over its memory tier) and the Python package's.
//!
//! Peers (`sealvol serve` on another machine, the in-cluster cache) are not trusted:
//! what one returns is checked chunk by chunk like the origin's bytes, and a peer that
//! fails, does not answer within its latency bound or returns bytes that fail their
//! hash is passed over (until it answers a probe: `liveness.rs`) in favour of the next
//! tier. The protocol lives with the server;
//! this layer knows only the `Peer` trait. Mirrors are repositories holding the same
//! versions, read when the origin cannot give a run (`upstream.rs`); what the tiers
//! count is in `stats.rs`.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crossbeam_channel::Sender;

pub mod bytes;
pub mod liveness;
pub mod ring;
mod stats;
mod upstream;

pub use bytes::ChunkBytes;
use ring::{Member, Ring};
pub use stats::{Counters, Histogram, LATENCY_BOUNDS_US, Latency, TierStats, add, now_ms};
use upstream::{Backoff, MirrorTier, from_mirrors, from_peers};
pub use upstream::{PEER_BACKOFF, Peer, slowest_of_others};

use crate::cache::ChunkCache;
use crate::digest::Hash;
use crate::error::{Error, ErrorKind, Result};
use crate::objects::{FileObject, PackEntry, PackId};
use crate::proof::{Outboard, TreeHasher, unproven};
use crate::recycled::{self, Buffer};
use crate::repo::Repository;

/// The largest single range read from a local origin.
pub const MAX_RUN: u64 = 8 << 20;
/// The largest from a remote one (an object store, `Repository::concurrency` > 1):
/// there each request costs a round trip and the service's own work per request
/// (moto reads the whole object for every range), so fewer, larger ones.
pub const REMOTE_MAX_RUN: u64 = 64 << 20;

/// The largest single range read from `repo`.
pub fn max_run(repo: &Repository) -> u64 {
    match repo.concurrency() {
        0 | 1 => MAX_RUN,
        _ => REMOTE_MAX_RUN,
    }
}

/// Where verified chunks come from.
pub trait Chunks {
    /// Chunks `range` of a file, in order, each checked against the hash its chunk list
    /// names for it; not yet proven to be the file's (`fetch` is).
    fn fetch_unproven(&self, obj: &FileObject, range: Range<usize>) -> Result<Vec<ChunkBytes>>;

    /// Chunks `range` of a file, in order, every byte proven to be the file's: checked
    /// against its chunk's hash or taken on its blocks (`fetch_for_proof`), and its
    /// blocks against the file's proof (`proof/`). A list that names other bytes than
    /// the file's fails with `Corrupt`.
    fn fetch(&self, obj: &FileObject, range: Range<usize>) -> Result<Vec<ChunkBytes>> {
        let bytes = obj.start_of(range.start)..obj.start_of(range.end);
        self.fetch_proving(obj, range, bytes)
    }

    /// Chunks `range` of a file (those holding bytes `[start, end)`,
    /// `FileObject::chunks_of`), with every byte of `[start, end)` proven to be the
    /// file's; bytes outside it are the caller's to cut off. What a reader of a few bytes
    /// asks for (a mount's read, an open file of the Python package): the blocks at the
    /// chunks' ends that the range does not touch are not proven, so no neighbouring
    /// bytes are fetched for them.
    fn fetch_covering(&self, obj: &FileObject, start: u64, end: u64) -> Result<Vec<ChunkBytes>> {
        let end = end.min(obj.size);
        if start >= end {
            return Ok(Vec::new());
        }
        self.fetch_proving(obj, obj.chunks_of(start, end), start..end)
    }

    /// The one place a read decides that bytes are the file's: chunks `range` of a
    /// file, with `bytes` (inside them) proven against the file's proof. The chunks come
    /// from `fetch_for_proof` (checked against their names, or taken on the blocks
    /// wholly inside them, proven from these very bytes), every block `bytes` touches is
    /// hashed against the outboard, and what a block reaches into beyond the chunks
    /// comes from `edge_bytes`. A list that names other bytes than the file's fails
    /// with `Corrupt` (`proof::is_unproven`) and is written down (`note_unproven`).
    fn fetch_proving(
        &self,
        obj: &FileObject,
        range: Range<usize>,
        bytes: Range<u64>,
    ) -> Result<Vec<ChunkBytes>> {
        let proven = (|| {
            // A list written before proofs: the file is proven whole, once.
            self.prove_whole(obj)?;
            let got = self.fetch_for_proof(obj, range.clone())?;
            crate::proof::prove(
                obj,
                bytes.start,
                bytes.end,
                range.start,
                &got,
                &mut |x, y, edge| self.edge_bytes(obj, x, y, edge),
            )?;
            Ok(got)
        })();
        proven.inspect_err(|e| {
            if crate::proof::is_unproven(e) {
                self.note_unproven(obj, e);
            }
        })
    }

    /// A chunk list found failing its proof: a reader that can writes it down, so that
    /// garbage collection deletes nothing on its word and verify names it
    /// (`Repository::record_list_damage`). Verify and diff, which judge and report
    /// themselves, do not.
    fn note_unproven(&self, _obj: &FileObject, _e: &Error) {}

    /// What `fetch` proves: chunks `range`, each checked against its hash, or (a reader
    /// that can) taken on the blocks wholly inside the range, already proven from these
    /// very bytes, so that `fetch` hashes only the blocks at the ends again.
    fn fetch_for_proof(&self, obj: &FileObject, range: Range<usize>) -> Result<Vec<ChunkBytes>> {
        self.fetch_unproven(obj, range)
    }

    /// Bytes `[x, y)` of a file that a block being proven reaches into beyond the chunks
    /// at hand: by default always whole chunks, each checked against its hash.
    fn edge_bytes(
        &self,
        obj: &FileObject,
        x: u64,
        y: u64,
        _edge: crate::proof::Edge,
    ) -> Result<Vec<ChunkBytes>> {
        checked_bytes(self, obj, x, y)
    }

    /// Proves a list against its file by reading every chunk it names, in order, and
    /// hashing them into the file's hash, whatever its own proof says (verify with
    /// data, repair).
    fn prove_by_reading(&self, obj: &FileObject) -> Result<Outboard> {
        let mut hasher = TreeHasher::default();
        self.for_each_unproven(obj, 0..obj.chunks.len(), &mut |c| {
            hasher.update(c);
            Ok(())
        })?;
        let (hash, ob) = hasher.finalize();
        if hash != obj.hash {
            return Err(unproven(
                &obj.list_name(),
                "its chunks hash to another file",
            ));
        }
        Ok(ob)
    }

    /// Proves a whole file whose list carries no outboard (written before proofs): its
    /// chunks, read in order, must hash to the file's hash. Builds the outboard as it
    /// goes, so later reads prove block by block.
    fn prove_whole(&self, obj: &FileObject) -> Result<()> {
        let proven = &obj.proof;
        if proven.outboard().is_some() || proven.all() {
            return Ok(());
        }
        let ob = self.prove_by_reading(obj)?;
        proven.set_outboard(ob);
        proven.mark_all();
        Ok(())
    }

    /// Calls `f` with chunks `range` of a file, proven, in order, fetching a window of
    /// up to `MAX_RUN` bytes at a time (so memory stays bounded whatever the file).
    fn for_each(
        &self,
        obj: &FileObject,
        range: Range<usize>,
        f: &mut dyn FnMut(&ChunkBytes) -> Result<()>,
    ) -> Result<()> {
        for w in windows(obj, range) {
            for c in self.fetch(obj, w)? {
                f(&c)?;
            }
        }
        Ok(())
    }

    /// `for_each` with each chunk checked against its hash only: for a caller that
    /// proves the whole file itself before anything it read is used (`prove_by_reading`
    /// hashes it into the file's tree).
    fn for_each_unproven(
        &self,
        obj: &FileObject,
        range: Range<usize>,
        f: &mut dyn FnMut(&ChunkBytes) -> Result<()>,
    ) -> Result<()> {
        for w in windows(obj, range) {
            for c in self.fetch_unproven(obj, w)? {
                f(&c)?;
            }
        }
        Ok(())
    }

    /// Calls `f` with the proven bytes `[start, end)` of a file, in order.
    fn for_bytes(
        &self,
        obj: &FileObject,
        start: u64,
        end: u64,
        f: &mut dyn FnMut(&[u8]),
    ) -> Result<()> {
        let end = end.min(obj.size);
        if start >= end {
            return Ok(());
        }
        let (first, last) = (obj.chunk_at(start), obj.chunk_at(end - 1) + 1);
        let mut at = obj.start_of(first);
        self.for_each(obj, first..last, &mut |c| {
            let c_end = at + c.len() as u64;
            let from = start.saturating_sub(at) as usize;
            let to = (end.min(c_end) - at) as usize;
            f(&c[from..to]);
            at = c_end;
            Ok(())
        })
    }
}

/// Bytes `[x, y)` of a file out of its whole chunks, each checked against its hash.
fn checked_bytes<C: Chunks + ?Sized>(
    chunks: &C,
    obj: &FileObject,
    x: u64,
    y: u64,
) -> Result<Vec<ChunkBytes>> {
    let (c0, c1) = (obj.chunk_at(x), obj.chunk_at(y - 1) + 1);
    Ok(slice_bytes(
        obj,
        c0,
        &chunks.fetch_unproven(obj, c0..c1)?,
        x,
        y,
    ))
}

/// Bytes `[x, y)` of a file out of its chunks from `first` (`chunks`), as slices.
pub fn slice_bytes(
    obj: &FileObject,
    first: usize,
    chunks: &[ChunkBytes],
    x: u64,
    y: u64,
) -> Vec<ChunkBytes> {
    let mut at = obj.start_of(first);
    let mut out = Vec::new();
    for c in chunks {
        let end = at + c.len() as u64;
        if end > x && at < y {
            out.push(c.sub(x.saturating_sub(at) as usize..(y.min(end) - at) as usize));
        }
        at = end;
    }
    out
}

/// Chunks `range` of a file in windows of up to `MAX_RUN` stored bytes (at least one
/// chunk each).
fn windows(obj: &FileObject, range: Range<usize>) -> impl Iterator<Item = Range<usize>> + '_ {
    let mut start = range.start;
    std::iter::from_fn(move || {
        if start >= range.end {
            return None;
        }
        let mut end = start;
        let mut bytes = 0u64;
        while end < range.end && (end == start || bytes < MAX_RUN) {
            bytes += obj.chunks[end].entry.stored_len as u64;
            end += 1;
        }
        let w = start..end;
        start = end;
        Some(w)
    })
}

/// The origin repository alone, with no cache: what verify and diff read.
pub struct Origin<'a>(pub &'a Repository);

impl Chunks for Origin<'_> {
    fn fetch_unproven(&self, obj: &FileObject, range: Range<usize>) -> Result<Vec<ChunkBytes>> {
        let mut out = vec![None; range.len()];
        let misses: Vec<usize> = range.clone().collect();
        let up = Upstream {
            origin: self.0,
            origin_backoff: None,
            peers: &[],
            mirrors: &[],
            by_blocks: &|_| false,
        };
        read_runs(
            &up,
            obj,
            &misses,
            range.start,
            &mut out,
            &Counters::default(),
            &mut |_| {},
        )?;
        Ok(out.into_iter().flatten().collect())
    }
}

impl Origin<'_> {
    /// `prove_by_reading`, hashing each byte once: the runs the list names are read
    /// and hashed into the file's tree without each chunk being hashed on its own first.
    /// The file's hash decides. When it disagrees, or a run cannot be read whole, the
    /// list is read again with every chunk checked (`prove_by_reading`), so that a
    /// damaged copy is recorded and told apart from a list that names other bytes.
    ///
    /// For a server writing the list a client sent: the chunks' own names were checked
    /// when their packs came in, and what the list promises (these bytes, at these
    /// places, are the file) is what the file's hash proves. A chunk stored otherwise
    /// than as its bytes is read the checked way.
    pub fn prove_by_reading_once(&self, obj: &FileObject) -> Result<Outboard> {
        if obj
            .chunks
            .iter()
            .any(|c| c.entry.flags != crate::objects::FLAG_RAW)
        {
            return self.prove_by_reading(obj);
        }
        let all: Vec<usize> = (0..obj.chunks.len()).collect();
        let mut hasher = TreeHasher::default();
        let mut read = || -> Result<()> {
            for (k, _, start, end) in plan_runs(obj, &all, max_run(self.0), false) {
                let pack = obj.packs[obj.chunks[k].pack as usize];
                let mut buf = recycled::take((end - start) as usize);
                self.0
                    .file_range_into(&obj.hash, &pack, start, buf.as_mut_vec())?;
                hasher.update(&buf);
            }
            Ok(())
        };
        match read() {
            Ok(()) => {
                let (hash, ob) = hasher.finalize();
                if hash == obj.hash {
                    return Ok(ob);
                }
            }
            // A pack gone or cut short: the checked read says which chunk, and tries
            // other copies.
            Err(e) if e.kind() == ErrorKind::Corrupt || e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        self.prove_by_reading(obj)
    }
}

/// How `Tiers` stores what it fetched from the origin in the node-disk cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fill {
    /// On a thread of its own, so a cold read never waits on a disk write; when that
    /// thread falls behind, fills are skipped (the next read fetches from the origin
    /// again, which is correct, only slower). For mounts.
    Background,
    /// On the reader's thread, every chunk: when the read returns, the cache holds it.
    /// For pulls, which fill the cache for the mounts that follow.
    Inline,
}

/// The tiers in order: the node-disk cache, then the origin, with counters.
pub struct Tiers {
    repo: Arc<Repository>,
    cache: Option<Arc<ChunkCache>>,
    fill: Fill,
    filler: Option<Sender<FillJob>>,
    /// Bytes of range buffers waiting for the filler: each pins its whole buffer.
    queued_fill: Arc<AtomicU64>,
    /// Files this large are kept whole in the node cache once read whole, not as
    /// chunks as well (`keeping_whole_files_from`).
    whole_from: u64,
    /// Asked after the node cache and before the origin, each run by who owns it.
    peers: Arc<Ring>,
    /// Asked in order when the origin fails.
    mirrors: Vec<MirrorTier>,
    origin_backoff: Backoff,
    pub counters: Counters,
}

/// The most bytes of range buffers waiting to be written to the node cache; fills
/// beyond it are skipped, so a slow cache disk cannot make a mount's memory grow.
pub const MAX_QUEUED_FILL: u64 = 128 << 20;

impl Tiers {
    /// The tiers for a mount: background cache fills.
    pub fn new(repo: Arc<Repository>, cache: Option<Arc<ChunkCache>>) -> Tiers {
        Tiers::with_fill(repo, cache, Fill::Background)
    }

    pub fn with_fill(repo: Arc<Repository>, cache: Option<Arc<ChunkCache>>, fill: Fill) -> Tiers {
        let queued_fill = Arc::new(AtomicU64::new(0));
        let filler = match (&cache, fill) {
            (Some(c), Fill::Background) => {
                // A fill holds one whole range buffer, so the queue is bounded by the
                // bytes of its buffers, not by chunks that each pin a buffer.
                let (tx, rx) = crossbeam_channel::bounded::<FillJob>(64);
                let c = Arc::clone(c);
                let queued = Arc::clone(&queued_fill);
                std::thread::Builder::new()
                    .name("sealvol-cache-fill".into())
                    .spawn(move || {
                        for job in rx {
                            job.store(&c);
                            queued.fetch_sub(job.buf.len() as u64, Ordering::Relaxed);
                        }
                    })
                    .ok()
                    .map(|_| tx)
            }
            _ => None,
        };
        Tiers {
            repo,
            cache,
            fill,
            filler,
            queued_fill,
            whole_from: u64::MAX,
            peers: Arc::default(),
            mirrors: Vec::new(),
            origin_backoff: Backoff::default(),
            counters: Counters::default(),
        }
    }

    /// Reads what the node cache misses from `peers` before the origin, each run from
    /// the server that owns its segment (`ring.rs`).
    pub fn with_peers(self, peers: Vec<Arc<dyn Peer>>) -> Tiers {
        self.with_ring(Arc::new(Ring::fixed(peers)))
    }

    /// `with_peers` over a ring that may change as the node runs.
    pub fn with_ring(mut self, ring: Arc<Ring>) -> Tiers {
        self.peers = ring;
        self
    }

    /// The servers this node reads through.
    pub fn ring(&self) -> &Arc<Ring> {
        &self.peers
    }

    /// Reads what the origin cannot give (unreachable, a pack gone, a chunk damaged)
    /// from `mirrors`, in order: repositories holding the same versions. While the
    /// origin is passed over after a failure, runs go to the mirrors first.
    pub fn with_mirrors(mut self, mirrors: Vec<Arc<Repository>>) -> Tiers {
        self.mirrors = mirrors
            .into_iter()
            .map(|repo| MirrorTier {
                repo,
                backoff: Backoff::default(),
            })
            .collect();
        self
    }

    /// Files of at least `min` bytes (that fit a quarter of the cache) are not filled
    /// chunk by chunk when the origin is a local repository: a mount keeps such a file
    /// whole once it was read whole, copied from the origin's packs, so chunk fills
    /// would write every byte to the cache disk twice. From a remote origin the chunks
    /// are still filled, so that the whole file is built without a second download.
    pub fn keeping_whole_files_from(mut self, min: u64) -> Tiers {
        if self.repo.concurrency() <= 1 {
            self.whole_from = min;
        }
        self
    }

    fn fills(&self, obj: &FileObject) -> bool {
        match &self.cache {
            Some(c) => obj.size < self.whole_from || obj.size > c.max_bytes() / 4,
            None => false,
        }
    }

    pub fn repo(&self) -> &Repository {
        &self.repo
    }

    pub fn cache(&self) -> Option<&Arc<ChunkCache>> {
        self.cache.as_ref()
    }

    /// `fetch`, counting into `counters` (background work keeps its own, so the
    /// published hit rates describe what readers saw).
    pub fn fetch_counted(
        &self,
        obj: &FileObject,
        range: Range<usize>,
        counters: &Counters,
    ) -> Result<Vec<ChunkBytes>> {
        self.fetch_with(obj, range, counters, true)
    }

    /// Chunks of a file a mount keeps whole in the node cache. When the origin is
    /// local, such a file's chunks were not filled into the cache as it was read
    /// (`keeping_whole_files_from`): the copy is built from the origin's packs, not
    /// asked of the peers again (a second download of what the node just read).
    pub fn fetch_for_keeping(
        &self,
        obj: &FileObject,
        range: Range<usize>,
        counters: &Counters,
    ) -> Result<Vec<ChunkBytes>> {
        let peers = self.fills(obj);
        self.fetch_with(obj, range, counters, peers)
    }

    fn fetch_with(
        &self,
        obj: &FileObject,
        range: Range<usize>,
        counters: &Counters,
        ask_peers: bool,
    ) -> Result<Vec<ChunkBytes>> {
        let fills = self.fills(obj);
        let (got, _) =
            self.fetch_checking(obj, range, counters, ask_peers, &|_| false, &mut |job| {
                self.offer_fill(fills, job)
            })?;
        Ok(got)
    }

    /// Chunks `range` of a file from the tiers, each checked against its name except
    /// those `by_blocks` says the caller proves by their blocks; what was read upstream is
    /// offered to `fill`. Also the slots of the chunks taken from the node cache
    /// unchecked: not counted as hits, since the caller's proof decides whether they
    /// were.
    fn fetch_checking(
        &self,
        obj: &FileObject,
        range: Range<usize>,
        counters: &Counters,
        ask_peers: bool,
        by_blocks: ByBlocks,
        fill: &mut dyn FnMut(FillJob),
    ) -> Result<(Vec<ChunkBytes>, Vec<usize>)> {
        let mut out: Vec<Option<ChunkBytes>> = vec![None; range.len()];
        let (mut misses, mut unchecked) = (Vec::new(), Vec::new());
        for (slot, i) in range.clone().enumerate() {
            let h = obj.chunks[i].entry.hash;
            let Some(cache) = self.cache.as_ref() else {
                misses.push(i);
                continue;
            };
            let bytes = match by_blocks(i) {
                true => cache.get_unchecked(&h).inspect(|_| unchecked.push(slot)),
                false => cache.get(&h).inspect(|b| {
                    add(&counters.cache_hits, 1);
                    add(&counters.cache_bytes, b.len() as u64);
                }),
            };
            match bytes {
                Some(bytes) => out[slot] = Some(ChunkBytes::whole(bytes)),
                None => misses.push(i),
            }
        }
        let members = match ask_peers {
            true => self.peers.members(),
            false => Arc::default(),
        };
        let up = Upstream {
            origin: &self.repo,
            origin_backoff: Some(&self.origin_backoff),
            peers: &members,
            mirrors: &self.mirrors,
            by_blocks,
        };
        read_runs(&up, obj, &misses, range.start, &mut out, counters, fill)?;
        Ok((out.into_iter().flatten().collect(), unchecked))
    }

    /// Hands what was read upstream to the node cache, as `fill` says (skipped when the
    /// file is not filled chunk by chunk, or the background filler is behind).
    fn offer_fill(&self, fills: bool, job: FillJob) {
        match (self.fill, &self.cache, &self.filler) {
            _ if !fills => {}
            (Fill::Inline, Some(cache), _) => job.store(cache),
            (Fill::Background, _, Some(tx)) => {
                // Full: skipped; disconnected: the filler is gone. Either way the read
                // goes on, and a later one fetches from the origin again.
                let len = job.buf.len() as u64;
                if self.queued_fill.fetch_add(len, Ordering::Relaxed) + len > MAX_QUEUED_FILL
                    || tx.try_send(job).is_err()
                {
                    self.queued_fill.fetch_sub(len, Ordering::Relaxed);
                }
            }
            _ => {}
        }
    }

    /// Chunks `range` of a file, with the blocks that lie wholly inside them proven
    /// (`proof::prove_within`), hashing each byte once: a chunk inside those blocks is
    /// not checked against its name, since the blocks, hashed from these very bytes,
    /// prove it is the file's; the chunks at the ends, whose blocks reach beyond the
    /// range, are checked as always. A cold read hashed every byte twice (once as its
    /// chunk, once as its block).
    ///
    /// When a block fails, nothing read is kept or cached: each chunk taken on the blocks
    /// is hashed, and one that fails is read again checked, so that a damaged copy is
    /// recorded as damage and another copy tried, and a list that names other bytes is
    /// told apart (`Corrupt`, `proof::is_unproven`). Chunks read here reach the node cache only once proven;
    /// the cache checks every chunk it gives back against its name.
    pub fn fetch_proven_within(
        &self,
        obj: &FileObject,
        range: Range<usize>,
    ) -> Result<Vec<ChunkBytes>> {
        let Some((s, e)) = crate::proof::inner_span(obj, range.start, range.len()) else {
            return self.fetch_unproven(obj, range);
        };
        let by_blocks = |i: usize| {
            obj.chunks[i].entry.flags == crate::objects::FLAG_RAW
                && obj.start_of(i) >= s
                && obj.start_of(i + 1) <= e
        };
        let (fills, mut held) = (self.fills(obj), Vec::new());
        let (mut got, from_cache) = self.fetch_checking(
            obj,
            range.clone(),
            &self.counters,
            true,
            &by_blocks,
            &mut |job| held.push(job),
        )?;
        let hit = |c: &ChunkBytes| {
            add(&self.counters.cache_hits, 1);
            add(&self.counters.cache_bytes, c.len() as u64);
        };
        if crate::proof::prove_again(obj, s, e, range.start, &got) {
            let spared = range.clone().filter(|&i| by_blocks(i)).count();
            add(&self.counters.chunks_proven_by_blocks, spared as u64);
            from_cache.iter().for_each(|&slot| hit(&got[slot]));
            for job in held {
                self.offer_fill(fills, job);
            }
            return Ok(got);
        }
        // A block failed: each chunk taken on the blocks is hashed now, and one that
        // fails is read again the checked way (which drops a damaged cached copy,
        // records a damaged origin copy and tries the others, and passes over a peer
        // that sent it). Then every chunk is checked, and a block that still fails is a
        // list that lies. What was read here reaches the cache only through those reads.
        drop(held);
        for (slot, i) in range.clone().enumerate().filter(|&(_, i)| by_blocks(i)) {
            if Hash::of(&got[slot]) == obj.chunks[i].entry.hash {
                if from_cache.contains(&slot) {
                    hit(&got[slot]);
                }
                continue;
            }
            let again = self.fetch_unproven(obj, i..i + 1)?;
            got[slot] = again.into_iter().next().ok_or_else(|| {
                Error::corrupt(format!(
                    "chunk {} came back empty",
                    obj.chunks[i].entry.hash.hex()
                ))
            })?;
        }
        crate::proof::prove_within(obj, range.start, &got)?;
        Ok(got)
    }
}

impl Tiers {
    /// Bytes `[offset, offset + len)` of a file (cut at its end), every one proven to be
    /// the file's before it is handed out (`fetch_covering`), as one buffer: what the
    /// Python package reads a safetensors header and one tensor with.
    pub fn read_proven(&self, obj: &FileObject, offset: u64, len: usize) -> Result<Vec<u8>> {
        let end = offset.saturating_add(len as u64).min(obj.size);
        if offset >= end {
            return Ok(Vec::new());
        }
        let chunks = self.fetch_covering(obj, offset, end)?;
        let mut out = Vec::with_capacity((end - offset) as usize);
        for part in slice_bytes(obj, obj.chunk_at(offset), &chunks, offset, end) {
            out.extend_from_slice(&part);
        }
        Ok(out)
    }
}

impl Tiers {
    /// Whether `fetch_edge` would read whole chunks anyway (through the ring): a
    /// caller with a memory of its own had better fetch them there, kept for the reader
    /// who is likely to ask for them next, than read them twice.
    pub fn edges_are_whole_chunks(&self) -> bool {
        self.peers.members().iter().any(|m| m.is_up())
    }

    /// Bytes `[x, y)` of a file for the edge of a block being proven (`proof::Edge::
    /// Cheap`). Through peers: their whole chunks, from the ring. Else a chunk the node
    /// cache holds comes from it (checked, as every cache
    /// read), the rest as parts of chunks read from the origin, one range read per
    /// stretch of one pack, unchecked: the block's hash checks them, and a block that
    /// fails asks again for checked chunks. So a reader that jumps around reads only
    /// the few KiB a block reaches into its neighbours, not their whole chunks.
    pub fn fetch_edge(
        &self,
        obj: &FileObject,
        x: u64,
        y: u64,
        counters: &Counters,
    ) -> Result<Vec<ChunkBytes>> {
        let mut out = Vec::new();
        if x >= y {
            return Ok(out);
        }
        let (c0, c1) = (obj.chunk_at(x), obj.chunk_at(y - 1) + 1);
        if self.edges_are_whole_chunks() {
            // Through the ring, as whole chunks from their owners (and into the node
            // cache like any read): the origin is read by the servers, once for the
            // cluster, never by each node for its edges.
            let whole = self.fetch_counted(obj, c0..c1, counters)?;
            return Ok(slice_bytes(obj, c0, &whole, x, y));
        }
        let mut i = c0;
        while i < c1 {
            let c = &obj.chunks[i];
            let cs = obj.start_of(i);
            let (a, b) = (x.max(cs), y.min(cs + c.entry.raw_len as u64));
            if let Some(bytes) = self
                .cache
                .as_ref()
                .and_then(|cache| cache.get(&c.entry.hash))
            {
                add(&counters.cache_hits, 1);
                add(&counters.cache_bytes, bytes.len() as u64);
                let whole = ChunkBytes::whole(bytes);
                out.push(whole.sub((a - cs) as usize..(b - cs) as usize));
                i += 1;
                continue;
            }
            if c.entry.flags != crate::objects::FLAG_RAW {
                let whole = self.fetch_counted(obj, i..i + 1, counters)?;
                out.extend(slice_bytes(obj, i, &whole, a, b));
                i += 1;
                continue;
            }
            // This chunk's part, and the parts of those after it that lie next to it
            // in the same pack.
            let pack = c.pack;
            let from = c.entry.offset + (a - cs);
            let mut to = c.entry.offset + (b - cs);
            let mut j = i + 1;
            while j < c1 {
                let n = &obj.chunks[j];
                let ns = obj.start_of(j);
                if n.pack != pack
                    || n.entry.offset != to
                    || n.entry.flags != crate::objects::FLAG_RAW
                    || self
                        .cache
                        .as_ref()
                        .is_some_and(|cache| cache.contains(&n.entry.hash))
                {
                    break;
                }
                to = n.entry.offset + (y.min(ns + n.entry.raw_len as u64) - ns);
                j += 1;
            }
            add(&counters.origin_requests, 1);
            add(&counters.origin_bytes, to - from);
            match self
                .repo
                .file_range(&obj.hash, &obj.packs[pack as usize], from, to - from)
            {
                Ok(bytes) => out.push(ChunkBytes::whole(bytes)),
                // The origin cannot give the part (a pack lost, a request that failed):
                // the whole chunks, through every tier a read has (mirrors, retries).
                Err(e) => {
                    tracing::debug!("edge of {} from the origin: {e}", obj.list_name());
                    let whole = self.fetch_counted(obj, i..j, counters)?;
                    out.extend(slice_bytes(obj, i, &whole, a, y.min(obj.start_of(j))));
                }
            }
            i = j;
        }
        Ok(out)
    }
}

impl Chunks for Tiers {
    fn fetch_unproven(&self, obj: &FileObject, range: Range<usize>) -> Result<Vec<ChunkBytes>> {
        self.fetch_counted(obj, range, &self.counters)
    }

    fn note_unproven(&self, obj: &FileObject, e: &Error) {
        self.repo.record_list_damage(&obj.hash, e.message(), "read");
    }

    /// Hashing each byte about once (a pull, a signature's SHA-256s): the blocks wholly
    /// inside the range are proven on the chunks taken on them, and only the blocks at
    /// the two ends, which reach into the neighbouring chunks, are hashed again. Checked
    /// chunks and blocks both, as the default has it, hashed every byte twice.
    fn fetch_for_proof(&self, obj: &FileObject, range: Range<usize>) -> Result<Vec<ChunkBytes>> {
        self.fetch_proven_within(obj, range)
    }

    /// The few KiB a block reaches into its neighbours (`fetch_edge`), unchecked: the
    /// block's hash checks them, and a block that fails asks for checked whole chunks.
    fn edge_bytes(
        &self,
        obj: &FileObject,
        x: u64,
        y: u64,
        edge: crate::proof::Edge,
    ) -> Result<Vec<ChunkBytes>> {
        match edge {
            crate::proof::Edge::Cheap => self.fetch_edge(obj, x, y, &self.counters),
            crate::proof::Edge::Checked => checked_bytes(self, obj, x, y),
        }
    }
}

/// Which chunks of a file (by index) a caller proves by their blocks instead of having
/// them checked against their names as they are read.
type ByBlocks<'a> = &'a (dyn Fn(usize) -> bool + Sync);

/// Chunks of one range read for the cache to store: (hash, start, end) in `buf`.
struct FillJob {
    buf: Arc<Buffer>,
    pieces: Vec<(Hash, usize, usize)>,
}

impl FillJob {
    fn store(&self, cache: &ChunkCache) {
        for &(h, s, e) in &self.pieces {
            // A full or broken cache makes later reads slower, never wrong.
            if let Err(err) = cache.put(&h, &self.buf[s..e]) {
                tracing::warn!("cache: cannot store chunk {}: {err}", h.hex());
            }
        }
    }
}

/// Where the chunks the node cache misses come from, in order: peers, the origin, and
/// mirrors when the origin fails (first while the origin is passed over).
struct Upstream<'a> {
    origin: &'a Repository,
    /// `None`: never passed over (there is nowhere else to go).
    origin_backoff: Option<&'a Backoff>,
    peers: &'a [Arc<Member>],
    mirrors: &'a [MirrorTier],
    /// The chunks the caller proves by their blocks: not checked as they are read.
    by_blocks: ByBlocks<'a>,
}

/// Reads chunks `misses` (indexes into the file's chunks, ascending) from the peers,
/// else the origin, else a mirror, into `out` (slot `i - base`), in runs: consecutive
/// chunks of the file that sit back to back in one pack, up to `max_run` bytes (and,
/// with peers, within one segment: each segment has its owner), come in one request.
/// Every chunk is checked against its hash before it is placed, except the origin's and
/// the peers' chunks that `by_blocks` leaves to the caller's proof of their blocks (a
/// mirror's are always checked); each run is then offered to `fill`.
fn read_runs(
    up: &Upstream,
    obj: &FileObject,
    misses: &[usize],
    base: usize,
    out: &mut [Option<ChunkBytes>],
    counters: &Counters,
    fill: &mut dyn FnMut(FillJob),
) -> Result<()> {
    let (repo, by_blocks) = (up.origin, up.by_blocks);
    let max = max_run(repo);
    let origin_up = up.origin_backoff.is_none_or(Backoff::is_up);
    // A ring of one owns every segment: its runs need not be cut at their edges (each
    // cut costs the server a request and the edges of a proof).
    let by_segment = up.peers.len() > 1 && up.peers.iter().any(|p| p.is_up());
    let runs = plan_runs(obj, misses, max, by_segment);
    // Through a ring each run is one segment, owned by a server that may have to read
    // it from a far origin: asked one after another, a long read would wait a round
    // trip per segment. They are asked at once instead, a few at a time.
    let mut answered: Vec<Option<Option<Arc<Buffer>>>> = match by_segment && runs.len() > 1 {
        true => peers_at_once(up.peers, obj, misses, &runs, counters, by_blocks),
        false => vec![None; runs.len()],
    };
    for (r, &(k, n, start, end)) in runs.iter().enumerate() {
        let first = &obj.chunks[misses[k]];
        let pack = obj.packs[first.pack as usize];
        let run = &misses[k..k + n];
        let got = match answered[r].take() {
            Some(got) => got,
            None => from_peers(up.peers, obj, run, &pack, start, end, counters, by_blocks),
        };
        if let Some(buf) = got {
            let mut pieces = Vec::with_capacity(n);
            for &i in run {
                let e = &obj.chunks[i].entry;
                let at = (e.offset - start) as usize;
                let piece = ChunkBytes::slice(&buf, at..at + e.stored_len as usize);
                pieces.push((e.hash, piece.start, piece.end));
                out[i - base] = Some(piece);
            }
            fill(FillJob { buf, pieces });
            continue;
        }
        if !origin_up && failover(up, obj, run, base, out, counters, fill) {
            continue;
        }
        add(&counters.origin_requests, 1);
        let mut buf = recycled::take((end - start) as usize);
        let asked = std::time::Instant::now();
        let read = repo.file_range_into(&obj.hash, &pack, start, buf.as_mut_vec());
        counters.origin_latency.observe(asked.elapsed());
        let bytes = match read {
            Ok(()) => Ok(Arc::new(buf)),
            Err(e) => {
                if let (Some(b), false) = (up.origin_backoff, up.mirrors.is_empty()) {
                    b.pass_over(&format!("origin {}", repo.location()), &e.to_string());
                    if failover(up, obj, run, base, out, counters, fill) {
                        continue;
                    }
                }
                match e.kind() {
                    // The pack is gone or cut short: each chunk may have a copy elsewhere.
                    ErrorKind::Corrupt => Err(e),
                    _ => return Err(e),
                }
            }
        };
        let mut pieces = Vec::with_capacity(n);
        for &i in run {
            let c = &obj.chunks[i];
            let piece = match &bytes {
                Ok(buf) => {
                    let at = (c.entry.offset - start) as usize;
                    let piece = ChunkBytes {
                        buf: Arc::clone(buf),
                        start: at,
                        end: at + c.entry.stored_len as usize,
                    };
                    let checked = match by_blocks(i) {
                        true => Ok(()),
                        false => check_chunk(&piece, &c.entry, &pack),
                    };
                    match checked {
                        Ok(()) => {
                            pieces.push((c.entry.hash, piece.start, piece.end));
                            Ok(piece)
                        }
                        Err(e) => {
                            // Written down, so that no push builds on this copy again.
                            repo.record_damage(&pack, &c.entry, "read");
                            Err(e)
                        }
                    }
                }
                // The run failed as a whole (a pack cut short): this chunk alone may
                // still be there.
                Err(e) => match repo.file_range(
                    &obj.hash,
                    &pack,
                    c.entry.offset,
                    c.entry.stored_len as u64,
                ) {
                    Ok(b) if check_chunk(&b, &c.entry, &pack).is_ok() => {
                        add(&counters.origin_requests, 1);
                        let whole = ChunkBytes::whole(b);
                        fill(FillJob {
                            buf: Arc::clone(&whole.buf),
                            pieces: vec![(c.entry.hash, whole.start, whole.end)],
                        });
                        Ok(whole)
                    }
                    _ => Err(Error::corrupt(e.message().to_string())),
                },
            };
            let piece = match piece {
                Ok(p) => p,
                Err(e) => match elsewhere(repo, &pack, &c.entry, counters) {
                    Ok(Some(other)) => {
                        fill(FillJob {
                            buf: Arc::clone(&other.buf),
                            pieces: vec![(c.entry.hash, other.start, other.end)],
                        });
                        other
                    }
                    // Not in the origin, or the origin cannot say: a mirror may have it.
                    found => {
                        if failover(up, obj, &[i], base, out, counters, fill) {
                            continue;
                        }
                        found?;
                        return Err(e);
                    }
                },
            };
            add(&counters.origin_chunks, 1);
            add(&counters.origin_bytes, piece.len() as u64);
            out[i - base] = Some(piece);
        }
        if let Ok(buf) = bytes {
            fill(FillJob { buf, pieces });
        }
    }
    Ok(())
}

/// How many segments of one read are asked of the ring at once.
const PEER_RUNS_AT_ONCE: usize = 8;

/// The runs `misses` come in, as (first index into `misses`, count, start and end in
/// the pack): consecutive chunks of the file that sit back to back in one pack, up to
/// `max` bytes, and with `by_segment` within one segment (each has its owner).
fn plan_runs(
    obj: &FileObject,
    misses: &[usize],
    max: u64,
    by_segment: bool,
) -> Vec<(usize, usize, u64, u64)> {
    let mut runs = Vec::new();
    let mut k = 0;
    while k < misses.len() {
        let first = &obj.chunks[misses[k]];
        let start = first.entry.offset;
        let mut end = start + first.entry.stored_len as u64;
        let mut n = 1;
        while k + n < misses.len() {
            let c = &obj.chunks[misses[k + n]];
            if c.pack != first.pack
                || c.entry.offset != end
                || end - start + c.entry.stored_len as u64 > max
                || (by_segment && ring::segment_of(c.entry.offset) != ring::segment_of(start))
            {
                break;
            }
            end += c.entry.stored_len as u64;
            n += 1;
        }
        runs.push((k, n, start, end));
        k += n;
    }
    runs
}

/// Asks the ring for every run at once, `PEER_RUNS_AT_ONCE` at a time: for each run,
/// `Some(what the peers answered)`, `None` meaning none of them had it checked.
fn peers_at_once(
    peers: &[Arc<Member>],
    obj: &FileObject,
    misses: &[usize],
    runs: &[(usize, usize, u64, u64)],
    counters: &Counters,
    by_blocks: ByBlocks,
) -> Vec<Option<Option<Arc<Buffer>>>> {
    let results: Vec<Mutex<Option<Option<Arc<Buffer>>>>> =
        runs.iter().map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..PEER_RUNS_AT_ONCE.min(runs.len()) {
            s.spawn(|| {
                loop {
                    let r = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&(k, n, start, end)) = runs.get(r) else {
                        break;
                    };
                    let pack = obj.packs[obj.chunks[misses[k]].pack as usize];
                    let run = &misses[k..k + n];
                    let got = from_peers(peers, obj, run, &pack, start, end, counters, by_blocks);
                    *crate::lock(&results[r]) = Some(got);
                }
            });
        }
    });
    results
        .into_iter()
        .map(|m| m.into_inner().unwrap_or_else(|e| e.into_inner()))
        .collect()
}

/// Chunks `run` of `obj` from a mirror into `out` (slot `i - base`), offered to
/// `fill`; false if no mirror has them.
fn failover(
    up: &Upstream,
    obj: &FileObject,
    run: &[usize],
    base: usize,
    out: &mut [Option<ChunkBytes>],
    counters: &Counters,
    fill: &mut dyn FnMut(FillJob),
) -> bool {
    let Some(got) = from_mirrors(up.mirrors, obj, run, counters) else {
        return false;
    };
    add(&counters.failovers, 1);
    fill_each(obj, run, &got, fill);
    for (&i, piece) in run.iter().zip(got) {
        out[i - base] = Some(piece);
    }
    true
}

/// Offers `pieces` (chunks `run` of `obj`, in order) to `fill`, one job per buffer
/// they share, so that the fill queue counts each buffer once.
fn fill_each(
    obj: &FileObject,
    run: &[usize],
    pieces: &[ChunkBytes],
    fill: &mut dyn FnMut(FillJob),
) {
    let mut job: Option<FillJob> = None;
    for (&i, p) in run.iter().zip(pieces) {
        let h = obj.chunks[i].entry.hash;
        match &mut job {
            Some(j) if Arc::ptr_eq(&j.buf, &p.buf) => j.pieces.push((h, p.start, p.end)),
            _ => {
                if let Some(j) = job.take() {
                    fill(j);
                }
                job = Some(FillJob {
                    buf: Arc::clone(&p.buf),
                    pieces: vec![(h, p.start, p.end)],
                });
            }
        }
    }
    if let Some(j) = job {
        fill(j);
    }
}

/// A chunk whose copy in `pack` cannot be used, read from another copy the repository
/// holds (a chunk list written before a repair relinked it still reads), checked.
fn elsewhere(
    repo: &Repository,
    pack: &PackId,
    entry: &PackEntry,
    counters: &Counters,
) -> Result<Option<ChunkBytes>> {
    let Some((other, e)) = repo.other_copy(pack, entry)? else {
        return Ok(None);
    };
    add(&counters.origin_requests, 1);
    let bytes = match repo.pack_range(&other, e.offset, e.stored_len as u64) {
        Ok(b) => b,
        Err(_) => return Ok(None),
    };
    if check_chunk(&bytes, &e, &other).is_err() {
        repo.record_damage(&other, &e, "read");
        return Ok(None);
    }
    tracing::info!(
        "chunk {} read from pack {} instead of {}",
        entry.hash.hex(),
        other.hex(),
        pack.hex()
    );
    Ok(Some(ChunkBytes::whole(bytes)))
}

/// A chunk's bytes must hash to its name; the error names the chunk, pack and offset.
pub(super) fn check_chunk(bytes: &[u8], entry: &PackEntry, pack: &PackId) -> Result<()> {
    if Hash::of(bytes) != entry.hash {
        return Err(Error::corrupt(format!(
            "chunk {} in pack {} at offset {} fails its hash check",
            entry.hash.hex(),
            pack.hex(),
            entry.offset
        )));
    }
    Ok(())
}
