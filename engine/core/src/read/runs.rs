//! Runs: the chunks the node cache misses read from the peers, else the origin, else
//! a mirror, in runs of chunks that lie back to back in one pack, each checked (or
//! left to the caller's proof of its blocks) before it is placed.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::ring::Member;
use super::upstream::{Backoff, MirrorTier, from_mirrors, from_peers};

use super::ring;
use super::shared::{ByBlocks, check_chunk, max_run};
use super::stats::{Counters, add};
use crate::cache::ChunkCache;
use crate::chunk_bytes::ChunkBytes;
use crate::digest::Hash;
use crate::error::{Error, ErrorKind, Result};
use crate::objects::{FileObject, PackEntry, PackId};
use crate::recycled::{self, Buffer};
use crate::repo::Repository;

/// Where the chunks the node cache misses come from, in order: peers, the origin, and
/// mirrors when the origin fails (first while the origin is passed over).
pub(super) struct Upstream<'a> {
    pub(super) origin: &'a Repository,
    /// `None`: never passed over (there is nowhere else to go).
    pub(super) origin_backoff: Option<&'a Backoff>,
    pub(super) peers: &'a [Arc<Member>],
    pub(super) mirrors: &'a [MirrorTier],
    /// The chunks the caller proves by their blocks: not checked as they are read.
    pub(super) by_blocks: ByBlocks<'a>,
}

/// Reads chunks `misses` (indexes into the file's chunks, ascending) from the peers,
/// else the origin, else a mirror, into `out` (slot `i - base`), in runs: consecutive
/// chunks of the file that sit back to back in one pack, up to `max_run` bytes (and,
/// with peers, within one segment: each segment has its owner), come in one request.
/// Every chunk is checked against its hash before it is placed, except the origin's and
/// the peers' chunks that `by_blocks` leaves to the caller's proof of their blocks (a
/// mirror's are always checked); each run is then offered to `fill`.
pub(super) fn read_runs(
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
            fill(FillJob {
                buf,
                pieces,
                from_origin: false,
            });
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
                            from_origin: true,
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
                            from_origin: true,
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
            fill(FillJob {
                buf,
                pieces,
                from_origin: true,
            });
        }
    }
    Ok(())
}

/// How many segments of one read are asked of the ring at once.
const PEER_RUNS_AT_ONCE: usize = 8;

/// The runs `misses` come in, as (first index into `misses`, count, start and end in
/// the pack): consecutive chunks of the file that sit back to back in one pack, up to
/// `max` bytes, and with `by_segment` within one segment (each has its owner).
pub(super) fn plan_runs(
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
                    *crate::locks::lock(&results[r]) = Some(got);
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
                    from_origin: false,
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

impl FillJob {
    pub(super) fn store(&self, cache: &ChunkCache) {
        for &(h, s, e) in &self.pieces {
            // A full or broken cache makes later reads slower, never wrong.
            if let Err(err) = cache.put(&h, &self.buf[s..e]) {
                tracing::warn!("cache: cannot store chunk {}: {err}", h.hex());
            }
        }
    }
}

/// Chunks of one range read for the cache to store: (hash, start, end) in `buf`.
pub(super) struct FillJob {
    pub(super) buf: Arc<Buffer>,
    pieces: Vec<(Hash, usize, usize)>,
    /// Read from the origin repository (not a peer or a mirror): not kept when the
    /// origin is a folder on this machine (`Tiers::keeping_only_what_the_origin_cannot_give_again`).
    pub(super) from_origin: bool,
}
