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
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_channel::Sender;

mod chunks;
pub mod liveness;
mod origin;
mod peer;
pub mod ring;
mod runs;
mod shared;
mod stats;
mod upstream;

pub use crate::chunk_bytes::ChunkBytes;
use chunks::checked_bytes;
pub use chunks::{Chunks, slice_bytes};
pub use origin::Origin;
pub use peer::Peer;
use ring::Ring;
use runs::{FillJob, Upstream, read_runs};
use shared::ByBlocks;
pub use shared::{MAX_RUN, REMOTE_MAX_RUN, max_run};
pub use stats::{Counters, Histogram, LATENCY_BOUNDS_US, Latency, TierStats, add, now_ms};
use upstream::{Backoff, MirrorTier};
pub use upstream::{PEER_BACKOFF, slowest_of_others};

use crate::cache::ChunkCache;
use crate::digest::Hash;
use crate::error::{Error, Result};
use crate::objects::FileObject;
use crate::repo::Repository;

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
    /// Whether what the origin gave is filled into the node cache
    /// (`keeping_only_what_the_origin_cannot_give_again`).
    keep_origin_reads: bool,
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
            keep_origin_reads: true,
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

    /// What the origin gives is not filled into the node cache when the origin is a
    /// local repository (a pull over a folder of this machine): every chunk can be read
    /// again from its packs, and a second copy on the same kind of disk, a file per
    /// chunk, saves nothing. What peers and mirrors send is still kept. From a remote
    /// origin everything is kept, as before.
    pub fn keeping_only_what_the_origin_cannot_give_again(mut self) -> Tiers {
        if self.origin_is_local() {
            self.keep_origin_reads = false;
        }
        self
    }

    /// Files of at least `min` bytes (that fit a quarter of the cache) are not filled
    /// chunk by chunk when the origin is a local repository: a mount keeps such a file
    /// whole once it was read whole, copied from the origin's packs, so chunk fills
    /// would write every byte to the cache disk twice. From a remote origin the chunks
    /// are still filled, so that the whole file is built without a second download.
    pub fn keeping_whole_files_from(mut self, min: u64) -> Tiers {
        if self.origin_is_local() {
            self.whole_from = min;
        }
        self
    }

    /// Whether the origin is a repository on this machine's disks: the one store that
    /// takes a single request at a time (buckets and servers take several).
    fn origin_is_local(&self) -> bool {
        self.repo.concurrency() <= 1
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
            _ if !fills || (job.from_origin && !self.keep_origin_reads) => {}
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
    fn fetch_proven_within(
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
