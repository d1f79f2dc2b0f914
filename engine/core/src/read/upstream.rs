//! The tiers beside the origin: peers (`sealvol serve` on other machines, not trusted,
//! asked by who owns a segment: `ring.rs`, waited for within a bound and passed over
//! until they answer again: `liveness.rs`) and mirrored origins (repositories holding
//! the same versions, passed over for a while after they fail), every chunk they give
//! checked against its hash.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::ring::{Member, Ring};

use super::shared::{ByBlocks, check_chunk, max_run};
use super::stats::{Counters, add, now_ms};
use crate::chunk_bytes::ChunkBytes;
use crate::digest::Hash;
use crate::error::{Error, ErrorKind, Result};
use crate::objects::{FileObject, PackId};
use crate::recycled::{self, Buffer};
use crate::repo::Repository;

/// How long a mirror or the origin that failed is passed over before it is asked
/// again: long enough that a dead one costs one timeout, not one per read.
pub const PEER_BACKOFF: Duration = Duration::from_secs(5);

/// A source that failed, passed over until `PEER_BACKOFF` has gone by.
#[derive(Default)]
pub(super) struct Backoff {
    /// Asked again from this time (milliseconds since the epoch); 0 when up.
    down_until_ms: AtomicU64,
}

impl Backoff {
    pub(super) fn is_up(&self) -> bool {
        self.down_until_ms.load(Ordering::Relaxed) <= now_ms()
    }

    pub(super) fn pass_over(&self, what: &str, why: &str) {
        let until = now_ms() + PEER_BACKOFF.as_millis() as u64;
        // Logged once per outage, not once per read.
        if self.down_until_ms.swap(until, Ordering::Relaxed) <= now_ms() {
            tracing::warn!(
                "{what}: {why}; reading from the next tier for {}s",
                PEER_BACKOFF.as_secs()
            );
        }
    }
}

/// Another repository that holds the same versions (`volume mirror`), read when the
/// origin cannot give a run; trusted like the origin, every chunk still checked.
pub(super) struct MirrorTier {
    pub(super) repo: Arc<Repository>,
    pub(super) backoff: Backoff,
}

/// How long a run is still waited for once every server up has been asked and the
/// last has passed its bound (at least; twice that bound when longer): a frozen owner
/// that a fellow still waits on (its proof of membership, its forward) must not hold a
/// read for a request timeout, while a ring that is only slow still answers first.
const RING_GRACE: Duration = Duration::from_secs(2);

/// What one server answered a run: its place in the segment's order, the answer, the
/// bytes and how long it took.
type RunAnswer = (usize, Result<()>, Buffer, Duration);

/// Run `run` (chunks of `obj` back to back in `pack` over `[start, end)`, all in one
/// segment: `ring.rs`) from the server that owns its segment, else the next in that
/// segment's order that is up and returns it whole with every chunk passing its hash
/// (but those `by_blocks` leaves to the caller's proof of their blocks); `None` sends
/// the run to the origin.
///
/// Hedged (`liveness.rs`): a server not answering within its latency bound is passed
/// over and the next is asked too; every request stays in the race, and the first good
/// answer wins. Lateness sends a run to the origin only when every server up has been
/// asked and none answered within `RING_GRACE` more, so a ring that is slow (pulling a
/// cold version through) still reads the origin about once, while a frozen server
/// costs a read its bounds and that grace at most.
#[allow(clippy::too_many_arguments)]
pub(super) fn from_peers(
    peers: &[Arc<Member>],
    obj: &FileObject,
    run: &[usize],
    pack: &PackId,
    start: u64,
    end: u64,
    counters: &Counters,
    by_blocks: ByBlocks,
) -> Option<Arc<Buffer>> {
    if !peers.iter().any(|p| p.is_up()) {
        return None;
    }
    let chunks: Arc<[(Hash, u32)]> = run
        .iter()
        .map(|&i| (obj.chunks[i].entry.hash, obj.chunks[i].entry.stored_len))
        .collect();
    let len = (end - start) as usize;
    let ordered = Ring::order_for(peers, pack, start);
    let (tx, rx) = crossbeam_channel::unbounded::<RunAnswer>();
    let ask = |rank: usize, p: &Arc<Member>| {
        add(&counters.peer_requests, 1);
        add(&p.counters.requests, 1);
        if rank == 0 {
            add(&p.counters.owned_runs, 1);
        }
        let (member, file, pack, chunks, tx) = (
            Arc::clone(p),
            obj.hash,
            *pack,
            Arc::clone(&chunks),
            tx.clone(),
        );
        let spawned = std::thread::Builder::new()
            .name("peer-ask".into())
            .spawn(move || {
                let mut buf = recycled::take(len);
                let began = Instant::now();
                let answer = member
                    .peer
                    .read_run(&file, &pack, start, &chunks, buf.as_mut_vec());
                let took = began.elapsed();
                // What the server's state learns, whether or not anyone still waits.
                match &answer {
                    Ok(()) if buf.len() == len => {
                        member.liveness.answered(took, member.peer.name())
                    }
                    Ok(()) => {}
                    Err(e) => member.pass_over(&e.to_string()),
                }
                let _ = tx.send((rank, answer, buf, took));
            });
        spawned.is_ok()
    };
    let mut candidates = ordered.iter().enumerate();
    // The server asked last, and when: the one whose bound decides the next hedge.
    let mut latest: Option<(usize, Instant)> = None;
    let mut outstanding = 0usize;
    let mut need_next = true;
    // Once every server has been asked: when the run goes to the origin after all.
    let mut give_up: Option<Instant> = None;
    let mut last_bound = Duration::ZERO;
    loop {
        if need_next {
            need_next = false;
            latest = None;
            // The next server up, looked at when its turn comes.
            for (rank, p) in candidates.by_ref() {
                if p.is_up() && ask(rank, p) {
                    outstanding += 1;
                    latest = Some((rank, Instant::now()));
                    break;
                }
            }
            if outstanding == 0 {
                return None;
            }
            if latest.is_none() && give_up.is_none() {
                give_up = Some(Instant::now() + RING_GRACE.max(last_bound * 2));
            }
        }
        // Its own recent answers, else the ring's: looked at again while it waits.
        let wait = match latest {
            Some((rank, at)) => {
                let p = &ordered[rank];
                let bound = p.liveness.bound_beside(slowest_of_others(peers, p));
                match bound.checked_sub(at.elapsed()) {
                    Some(left) => left.min(Duration::from_millis(25)),
                    None => {
                        add(&counters.peer_late, 1);
                        last_bound = bound;
                        p.pass_over(&p.liveness.late_reason(bound));
                        need_next = true;
                        continue;
                    }
                }
            }
            None => match give_up.and_then(|at| at.checked_duration_since(Instant::now())) {
                Some(left) if !left.is_zero() => left.min(Duration::from_millis(25)),
                _ => return None,
            },
        };
        let Ok((rank, answer, buf, took)) = rx.recv_timeout(wait) else {
            continue;
        };
        outstanding -= 1;
        let p = &ordered[rank];
        counters.peer_latency.observe(took);
        let refused = match answer {
            Err(e) => {
                add(&counters.peer_errors, 1);
                if e.kind() == ErrorKind::Denied {
                    add(&counters.peer_refused, 1);
                }
                true
            }
            Ok(()) if buf.len() != len => {
                add(&counters.peer_errors, 1);
                p.pass_over(&format!("returned {} bytes for a run of {len}", buf.len()));
                true
            }
            Ok(()) => {
                let bad = run
                    .iter()
                    .filter(|&&i| !by_blocks(i))
                    .filter(|&&i| {
                        let e = &obj.chunks[i].entry;
                        let at = (e.offset - start) as usize;
                        Hash::of(&buf[at..at + e.stored_len as usize]) != e.hash
                    })
                    .count();
                if bad > 0 {
                    add(&counters.peer_bad_chunks, bad as u64);
                    p.pass_over(&format!(
                        "{bad} chunk(s) of pack {} at offset {start} failed their hash check",
                        pack.hex()
                    ));
                }
                bad > 0
            }
        };
        if !refused {
            add(&counters.peer_chunks, run.len() as u64);
            add(&counters.peer_bytes, len as u64);
            add(&p.counters.chunks, run.len() as u64);
            add(&p.counters.bytes, len as u64);
            return Some(Arc::new(buf));
        }
        // The one waited on failed: the next is asked at once; else the others asked
        // go on racing.
        if latest.is_some_and(|(r, _)| r == rank) || outstanding == 0 {
            need_next = true;
        }
    }
}

/// The slowest recent answer of the ring's servers other than `p`.
pub fn slowest_of_others(peers: &[Arc<Member>], p: &Arc<Member>) -> Option<Duration> {
    peers
        .iter()
        .filter(|m| !Arc::ptr_eq(m, p))
        .filter_map(|m| m.liveness.slowest())
        .max()
}

/// Chunks `run` of `obj` from the first mirror that is up and holds every one of them
/// with its hash; `None` if none does.
pub(super) fn from_mirrors(
    mirrors: &[MirrorTier],
    obj: &FileObject,
    run: &[usize],
    counters: &Counters,
) -> Option<Vec<ChunkBytes>> {
    for m in mirrors.iter().filter(|m| m.backoff.is_up()) {
        match mirror_run(&m.repo, obj, run, counters) {
            Ok(pieces) => {
                add(&counters.mirror_chunks, pieces.len() as u64);
                add(
                    &counters.mirror_bytes,
                    pieces.iter().map(|p| p.len() as u64).sum(),
                );
                return Some(pieces);
            }
            Err(e) => {
                add(&counters.mirror_errors, 1);
                let what = format!("mirror {}", m.repo.location());
                // A mirror lacking a chunk is not down: only this run goes elsewhere.
                if e.kind() == ErrorKind::NotFound {
                    tracing::warn!("{what}: {}", e.message());
                } else {
                    m.backoff.pass_over(&what, &e.to_string());
                }
            }
        }
    }
    None
}

/// Chunks `run` of `obj` from `mirror`, found by hash in its own packs, read in runs of
/// chunks that lie back to back there, each checked.
fn mirror_run(
    mirror: &Repository,
    obj: &FileObject,
    run: &[usize],
    counters: &Counters,
) -> Result<Vec<ChunkBytes>> {
    let mut locs = Vec::with_capacity(run.len());
    for &i in run {
        let h = obj.chunks[i].entry.hash;
        let loc = mirror.locate(&h)?.ok_or_else(|| {
            Error::not_found(format!("lacks chunk {}", h.hex()))
                .hint("copy the version there with `sealvol volume mirror REF --to REPO`")
        })?;
        locs.push(loc);
    }
    let max = max_run(mirror);
    let mut out = Vec::with_capacity(run.len());
    let mut a = 0;
    while a < locs.len() {
        let (pack, first) = locs[a];
        let mut end = first.offset + first.stored_len as u64;
        let mut b = a + 1;
        while b < locs.len()
            && locs[b].0 == pack
            && locs[b].1.offset == end
            && end + locs[b].1.stored_len as u64 - first.offset <= max
        {
            end += locs[b].1.stored_len as u64;
            b += 1;
        }
        add(&counters.mirror_requests, 1);
        let mut buf = recycled::take((end - first.offset) as usize);
        mirror.pack_range_into(&pack, first.offset, buf.as_mut_vec())?;
        let buf = Arc::new(buf);
        for (p, e) in &locs[a..b] {
            let at = (e.offset - first.offset) as usize;
            let piece = ChunkBytes::slice(&buf, at..at + e.stored_len as usize);
            if let Err(err) = check_chunk(&piece, e, p) {
                mirror.record_damage(p, e, "read");
                return Err(err);
            }
            out.push(piece);
        }
        a = b;
    }
    Ok(out)
}
