//! Chunks by hash, pulled through from the origin repository into this server's own
//! node-disk cache (the same `ChunkCache` a node uses), with one origin fetch per chunk
//! however many clients ask for it at once (single flight).
//!
//! A server may run without a cache (`ChunkService::new` with `None`): over a
//! repository on its own disks, a second copy of each chunk costs a file created and
//! written per chunk (a third of the server's time under four cold mounts, BENCHMARKS.md
//! "Speed (issue 39)") to save a read that costs what the cache read would. Requests
//! for a chunk at the same moment still share one origin read.
//!
//! A client may say where the chunk lies (pack, offset, length: its file's chunk list
//! names them), which spares the server the repository's index; the hint is only a
//! hint: the bytes must hash to the name asked for, else the index is asked instead.
//! Bytes that fail their hash are never served; bytes read again at a place of an
//! unchanged pack file where they were found good lately are not hashed again
//! (`checked.rs`).
//!
//! A run (adjacent chunks of one pack, as a node's read path asks for them) is read
//! from the origin in one range request per stretch the cache misses, so a cold node
//! reading through the server costs the origin what reading it directly would.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use sealvol_core::cache::ChunkCache;
use sealvol_core::digest::Hash;
use sealvol_core::error::ErrorKind;
use sealvol_core::objects::{FileObject, PackId};
use sealvol_core::read::{ChunkBytes, add};
use sealvol_core::recycled::{self, Buffer};
use sealvol_core::repo::Repository;
use sealvol_core::store::Stamp;

use crate::checked::{self, Checked, Place};

/// The largest chunk a repository holds (`chunk::ChunkParams::is_valid`): a longer
/// hint is a bad request, not an allocation.
pub const MAX_CHUNK: u32 = (sealvol_core::chunk::BLOCK / 2) as u32;

/// The most bytes and chunks one run request may ask for: a node's largest range read
/// (`read::REMOTE_MAX_RUN`), and as many chunks as fit it at the smallest chunk size.
pub const MAX_RUN_BYTES: u64 = sealvol_core::read::REMOTE_MAX_RUN;
pub const MAX_RUN_CHUNKS: usize = 8192;

/// Where a client says a chunk lies.
#[derive(Debug, Clone, Copy)]
pub struct Hint {
    pub pack: PackId,
    pub offset: u64,
    pub len: u32,
}

/// Why a chunk cannot be served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Miss {
    /// The request itself is wrong (says what is wrong).
    Invalid(String),
    /// The repository holds no chunk of that hash.
    NotFound(Hash),
    /// The repository's copies fail their hash (the reason names pack and offset).
    Corrupt(String),
    /// The origin could not be read just now; asking again may work.
    Unavailable(String),
    /// The caller's key may not read what it asked for.
    Denied(String),
}

/// What the server has done, for `/metrics`.
#[derive(Default)]
pub struct Counters {
    pub requests: AtomicU64,
    /// Run requests (adjacent chunks of one pack), also counted in `requests`.
    pub runs: AtomicU64,
    /// Chunks asked for: one per chunk request, and one per chunk of a run.
    pub chunks: AtomicU64,
    pub bytes_served: AtomicU64,
    pub cache_hits: AtomicU64,
    pub origin_fetches: AtomicU64,
    pub origin_bytes: AtomicU64,
    /// Chunks that waited for another request's fetch of the same chunk.
    pub flight_waits: AtomicU64,
    /// Origin reads whose bytes failed their hash.
    pub bad_bytes: AtomicU64,
    /// Chunks read from the origin and not hashed again: found good lately at the same
    /// place of the same unchanged pack file (`checked.rs`).
    pub hashes_spared: AtomicU64,
    /// Bytes read from the origin for the edges of proof blocks (`edge_bytes`), also
    /// counted in `origin_bytes`.
    pub edge_bytes: AtomicU64,
    pub not_found: AtomicU64,
    pub errors: AtomicU64,
    /// The Hub mirror (`hub/mirror.rs`): bytes its jobs read from the upstream, and
    /// file bytes sent to clients while they came in (the spool) or once sealed.
    pub hub_upstream_bytes: Arc<AtomicU64>,
    pub hub_spool_bytes: AtomicU64,
    pub hub_sealed_bytes: AtomicU64,
    /// How long requests took to answer, and each origin range read.
    pub request_latency: sealvol_core::read::Histogram,
    pub origin_latency: sealvol_core::read::Histogram,
}

type Outcome = Result<ChunkBytes, Miss>;

#[derive(Default)]
struct Flight {
    outcome: Mutex<Option<Outcome>>,
    done: Condvar,
}

impl Flight {
    fn wait(&self) -> Outcome {
        let mut outcome = sealvol_core::lock(&self.outcome);
        loop {
            if let Some(o) = outcome.as_ref() {
                return o.clone();
            }
            outcome = sealvol_core::locks::wait(&self.done, outcome);
        }
    }
}

/// Who fetches a chunk that is not in the cache: this request (it leads the flight),
/// or another one already under way (this one waits for it).
enum Claim {
    Ready(ChunkBytes),
    Wait(Arc<Flight>),
    Lead(Arc<Flight>),
}

/// Flights under way or ended and not yet in the cache, by chunk.
type Flights = Arc<Mutex<HashMap<Hash, Arc<Flight>>>>;

/// Fetched chunks waiting for the cache writer. Bounded: when it is full, the request
/// that fetched a chunk writes it itself, so memory stays bounded and nothing is lost.
const FILL_QUEUE: usize = 64;

pub struct ChunkService {
    repo: Arc<Repository>,
    cache: Option<Arc<ChunkCache>>,
    flights: Flights,
    /// The cache writer: one thread, so that requests never wait on file creation and
    /// writers do not contend for the cache directory's lock.
    filler: Option<std::sync::mpsc::SyncSender<(Hash, ChunkBytes, Arc<Flight>)>>,
    /// Which chunks the repository holds, shared with the remote engine's operations.
    known: Arc<crate::known::Known>,
    pub counters: Counters,
    /// The scheduled collections (`maintenance.rs`), for `/metrics`.
    pub gc: Arc<crate::maintenance::GcStats>,
    /// Namespaces' quotas and what they store (`quota.rs`), for pushes and `/metrics`.
    pub quotas: Arc<crate::quota::Quotas>,
    /// This server's instance id (`/v1/ring/id`).
    id: String,
    /// The ring's keys, with which this server proves it is one of the ring's.
    credential: std::sync::OnceLock<Arc<crate::credential::Credential>>,
    /// The other servers of its ring (`serve --peer`), asked before the origin.
    fellows: Option<crate::fellows::Fellows>,
    /// Where chunks read from the origin were found good lately.
    checked: Checked,
}

/// Why a run request cannot be answered as asked, if it cannot.
pub fn check_run(offset: u64, chunks: &[(Hash, u32)]) -> Result<(), String> {
    if chunks.is_empty() || chunks.len() > MAX_RUN_CHUNKS {
        return Err(format!(
            "a run names 1 to {MAX_RUN_CHUNKS} chunks, not {}",
            chunks.len()
        ));
    }
    let mut seen = HashSet::with_capacity(chunks.len());
    let mut total = 0u64;
    for (h, len) in chunks {
        if *len == 0 || *len > MAX_CHUNK {
            return Err(format!(
                "len {len} of chunk {} is not a chunk's length (1 to {MAX_CHUNK} bytes)",
                h.hex()
            ));
        }
        // A pack holds each chunk once, so a run cannot name one twice.
        if !seen.insert(*h) {
            return Err(format!("chunk {} appears twice in one run", h.hex()));
        }
        total += *len as u64;
    }
    if total > MAX_RUN_BYTES || offset.checked_add(total).is_none() {
        return Err(format!(
            "a run of {total} bytes at offset {offset} is more than one request may ask \
             for ({MAX_RUN_BYTES} bytes)"
        ));
    }
    Ok(())
}

/// Writes a fetched chunk to the cache: a full or broken cache disk makes later
/// requests slower, never wrong.
fn store(cache: &ChunkCache, hash: &Hash, bytes: &[u8]) {
    if let Err(e) = cache.put(hash, bytes) {
        tracing::warn!("cannot cache chunk {}: {e}", hash.hex());
    }
}

/// Removes a flight that ended (and whose chunk is cached, if it was fetched).
fn retire(flights: &Flights, hash: &Hash, flight: &Arc<Flight>) {
    let mut f = sealvol_core::lock(flights);
    if f.get(hash).is_some_and(|g| Arc::ptr_eq(g, flight)) {
        f.remove(hash);
    }
}

impl ChunkService {
    /// A service pulling chunks from `repo`, through `cache` when it has one.
    pub fn new(repo: Arc<Repository>, cache: Option<Arc<ChunkCache>>) -> ChunkService {
        let flights = Flights::default();
        let filler = cache.as_ref().and_then(|cache| {
            let (tx, rx) =
                std::sync::mpsc::sync_channel::<(Hash, ChunkBytes, Arc<Flight>)>(FILL_QUEUE);
            let (c, f) = (Arc::clone(cache), Arc::clone(&flights));
            std::thread::Builder::new()
                .name("sealvol-serve-fill".into())
                .spawn(move || {
                    for (hash, bytes, flight) in rx {
                        store(&c, &hash, &bytes);
                        retire(&f, &hash, &flight);
                    }
                })
                .ok()
                .map(|_| tx)
        });
        ChunkService {
            gc: Arc::default(),
            quotas: Arc::new(crate::quota::Quotas::new(Arc::clone(&repo))),
            known: Arc::new(crate::known::Known::new(Arc::clone(&repo))),
            repo,
            cache,
            flights,
            filler,
            counters: Counters::default(),
            id: crate::fellows::instance_id(),
            credential: std::sync::OnceLock::new(),
            fellows: None,
            checked: Checked::new(checked::WINDOW, checked::ROOM, Instant::now()),
        }
    }

    /// Asks the servers of `ring` (this one among them) for the runs they own before
    /// reading the origin (`fellows.rs`).
    pub fn with_fellows(mut self, ring: Arc<sealvol_core::read::ring::Ring>) -> ChunkService {
        self.fellows = Some(crate::fellows::Fellows::new(ring, self.id.clone()));
        self
    }

    /// This server's instance id, by which it finds itself in a ring's list.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Takes the ring's credential (once): this server proves itself with it, and asks
    /// its fellows with it.
    pub fn set_credential(&self, c: Arc<crate::credential::Credential>) {
        if let Some(f) = &self.fellows {
            let _ = f.credential.set(Arc::clone(&c));
        }
        let _ = self.credential.set(c);
    }

    pub fn credential(&self) -> Option<&Arc<crate::credential::Credential>> {
        self.credential.get()
    }

    pub fn fellows(&self) -> Option<&crate::fellows::Fellows> {
        self.fellows.as_ref()
    }

    /// What the server knows of the chunks the repository holds.
    pub fn known(&self) -> &Arc<crate::known::Known> {
        &self.known
    }

    /// The origin the chunks are pulled from (also the store the remote engine offers).
    pub fn repository(&self) -> &Arc<Repository> {
        &self.repo
    }

    /// The server's chunk cache, if it keeps one.
    pub fn cache(&self) -> Option<&ChunkCache> {
        self.cache.as_deref()
    }

    /// The verified bytes of chunk `hash`: from the cache, else from the origin, fetched
    /// once for everyone who asks meanwhile. Blocking: call it off the async threads.
    pub fn get(&self, hash: &Hash, hint: Option<Hint>) -> Outcome {
        let started = Instant::now();
        add(&self.counters.requests, 1);
        add(&self.counters.chunks, 1);
        let outcome = self.get_claimed(hash, hint);
        self.counters.request_latency.observe(started.elapsed());
        outcome
    }

    fn get_claimed(&self, hash: &Hash, hint: Option<Hint>) -> Outcome {
        match self.claim(hash) {
            Claim::Ready(b) => Ok(b),
            Claim::Wait(f) => f.wait(),
            Claim::Lead(f) => {
                let outcome = self.fetch(hash, hint);
                self.finish(hash, &f, &outcome);
                outcome
            }
        }
    }

    /// The verified bytes of `chunks` (hash, stored length), which a client's chunk list
    /// says lie back to back in `pack` from `offset`: what the cache misses comes in one
    /// origin range read per stretch of misses, each chunk fetched once for everyone who
    /// asks meanwhile. A chunk not where the client says is looked up in the index.
    pub fn get_run(
        &self,
        pack: &PackId,
        offset: u64,
        chunks: &[(Hash, u32)],
        asker: Option<&crate::fellows::Asker>,
    ) -> Result<Vec<ChunkBytes>, Miss> {
        check_run(offset, chunks).map_err(Miss::Invalid)?;
        let started = Instant::now();
        add(&self.counters.requests, 1);
        add(&self.counters.runs, 1);
        add(&self.counters.chunks, chunks.len() as u64);
        if let (Some(f), Some(a)) = (&self.fellows, asker)
            && a.forwarded
        {
            add(&f.counters.forwarded_in, 1);
        }
        let pieces = self.run_claimed(pack, offset, chunks, asker);
        self.counters.request_latency.observe(started.elapsed());
        pieces
    }

    fn run_claimed(
        &self,
        pack: &PackId,
        offset: u64,
        chunks: &[(Hash, u32)],
        asker: Option<&crate::fellows::Asker>,
    ) -> Result<Vec<ChunkBytes>, Miss> {
        let hashes: Vec<Hash> = chunks.iter().map(|(h, _)| *h).collect();
        let claims = self.claim_all(&hashes);
        let mut at = Vec::with_capacity(chunks.len());
        let mut o = offset;
        for (_, len) in chunks {
            at.push(o);
            o += *len as u64;
        }
        let leads = |i: usize| matches!(claims.get(i), Some(Claim::Lead(_)));
        let mut led: Vec<Option<Outcome>> = vec![None; chunks.len()];
        // Every flight this request leads is finished before anything can fail, so
        // that no one waits on it forever.
        let mut i = 0;
        while i < chunks.len() {
            if !leads(i) {
                i += 1;
                continue;
            }
            // With fellows, a stretch stays within one segment: each has its owner.
            let segment = sealvol_core::read::ring::segment_of(at[i]);
            let mut j = i;
            while leads(j)
                && (self.fellows.is_none()
                    || sealvol_core::read::ring::segment_of(at[j]) == segment)
            {
                j += 1;
            }
            let read = self.read_stretch(pack, &at[i..j], &chunks[i..j], asker);
            for x in i..j {
                let (hash, clen) = chunks[x];
                let outcome = match &read {
                    Ok((buf, stamp)) => {
                        let from = (at[x] - at[i]) as usize;
                        let piece = ChunkBytes::slice(buf, from..from + clen as usize);
                        if self.is_chunk(&piece, &hash, pack, at[x], *stamp) {
                            Ok(piece)
                        } else {
                            add(&self.counters.bad_bytes, 1);
                            self.fetch(&hash, None)
                        }
                    }
                    Err(Miss::Unavailable(why)) => Err(Miss::Unavailable(why.clone())),
                    // A pack cut short or gone: the chunk may have another copy.
                    Err(_) => self.fetch(&hash, None),
                };
                if let Claim::Lead(f) = &claims[x] {
                    self.finish(&hash, f, &outcome);
                }
                led[x] = Some(outcome);
            }
            i = j;
        }
        claims
            .into_iter()
            .zip(led)
            .map(|(claim, led)| match (claim, led) {
                (Claim::Ready(b), _) => Ok(b),
                (Claim::Wait(f), _) => f.wait(),
                (Claim::Lead(_), Some(outcome)) => outcome,
                (Claim::Lead(_), None) => Err(Miss::Unavailable("a fetch was lost".into())),
            })
            .collect()
    }

    /// `claim` of a run's chunks, all under one hold of the flights: of two requests
    /// for the same run at once, one leads every chunk the cache lacks and the other
    /// waits for them all, rather than each leading some and reading the pack twice.
    fn claim_all(&self, hashes: &[Hash]) -> Vec<Claim> {
        let mut claims: Vec<Option<Claim>> = hashes
            .iter()
            .map(|h| self.cached(h).map(Claim::Ready))
            .collect();
        {
            let mut flights = sealvol_core::lock(&self.flights);
            for (h, c) in hashes.iter().zip(claims.iter_mut()) {
                if c.is_some() {
                    continue;
                }
                *c = Some(match flights.get(h) {
                    Some(f) => {
                        add(&self.counters.flight_waits, 1);
                        Claim::Wait(Arc::clone(f))
                    }
                    None => {
                        let f = Arc::new(Flight::default());
                        flights.insert(*h, Arc::clone(&f));
                        Claim::Lead(f)
                    }
                });
            }
        }
        hashes
            .iter()
            .zip(claims)
            .map(|(h, c)| match c {
                // A fetch that ended just before this one began has filled the cache.
                Some(Claim::Lead(f)) => match self.cached(h) {
                    Some(b) => {
                        self.publish(h, &f, Ok(b.clone()));
                        Claim::Ready(b)
                    }
                    None => Claim::Lead(f),
                },
                Some(c) => c,
                None => Claim::Wait(Arc::new(Flight::default())),
            })
            .collect()
    }

    /// The chunk from the cache, or the flight that fetches it: this request's own when
    /// no other is under way.
    fn claim(&self, hash: &Hash) -> Claim {
        if let Some(b) = self.cached(hash) {
            return Claim::Ready(b);
        }
        let flight = {
            let mut flights = sealvol_core::lock(&self.flights);
            if let Some(f) = flights.get(hash) {
                add(&self.counters.flight_waits, 1);
                return Claim::Wait(Arc::clone(f));
            }
            let f = Arc::new(Flight::default());
            flights.insert(*hash, Arc::clone(&f));
            f
        };
        // A fetch that ended just before this one began has filled the cache.
        match self.cached(hash) {
            Some(b) => {
                self.publish(hash, &flight, Ok(b.clone()));
                Claim::Ready(b)
            }
            None => Claim::Lead(flight),
        }
    }

    fn cached(&self, hash: &Hash) -> Option<ChunkBytes> {
        let b = self.cache.as_ref()?.get(hash)?;
        add(&self.counters.cache_hits, 1);
        Some(ChunkBytes::whole(b))
    }

    /// Ends a flight this request led: waiters get the bytes at once, and the flight
    /// stays where later requests find it (already answered) until the cache holds the
    /// chunk, so a chunk is fetched from the origin once however the requests fall.
    fn finish(&self, hash: &Hash, flight: &Arc<Flight>, outcome: &Outcome) {
        match outcome {
            Err(Miss::NotFound(_)) => add(&self.counters.not_found, 1),
            Err(_) => add(&self.counters.errors, 1),
            Ok(_) => {}
        }
        *sealvol_core::lock(&flight.outcome) = Some(outcome.clone());
        flight.done.notify_all();
        let (Ok(bytes), Some(cache)) = (outcome, &self.cache) else {
            return retire(&self.flights, hash, flight);
        };
        let job = (*hash, bytes.clone(), Arc::clone(flight));
        let queued = self
            .filler
            .as_ref()
            .is_some_and(|tx| tx.try_send(job).is_ok());
        if !queued {
            // The writer is behind (or gone): this request writes the chunk itself.
            store(cache, hash, bytes);
            retire(&self.flights, hash, flight);
        }
    }

    fn publish(&self, hash: &Hash, flight: &Arc<Flight>, outcome: Outcome) {
        *sealvol_core::lock(&flight.outcome) = Some(outcome);
        flight.done.notify_all();
        retire(&self.flights, hash, flight);
    }

    fn fetch(&self, hash: &Hash, hint: Option<Hint>) -> Outcome {
        if let Some(h) = hint {
            match self.read_at(hash, &h) {
                Ok(b) => return Ok(b),
                Err(e) => tracing::debug!("chunk {} not where the hint says: {e:?}", hash.hex()),
            }
        }
        let at = self.locate(hash)?;
        self.read_at(hash, &at)
    }

    /// Where the repository holds a usable copy of the chunk (`known.rs`).
    fn locate(&self, hash: &Hash) -> Result<Hint, Miss> {
        match self.known.locate(hash) {
            Ok(Some((pack, e))) => Ok(Hint {
                pack,
                offset: e.offset,
                len: e.stored_len,
            }),
            Ok(None) => Err(Miss::NotFound(*hash)),
            Err(e) => Err(origin_miss(&e)),
        }
    }

    /// Chunks `chunks` of `pack` at offsets `at` (back to back), from the fellow that
    /// owns their segment, else the origin (with the pack's stamp where the store says
    /// it). Unchecked: the caller checks each chunk.
    fn read_stretch(
        &self,
        pack: &PackId,
        at: &[u64],
        chunks: &[(Hash, u32)],
        asker: Option<&crate::fellows::Asker>,
    ) -> Result<(Arc<Buffer>, Option<Stamp>), Miss> {
        let len = at[at.len() - 1] + chunks[chunks.len() - 1].1 as u64 - at[0];
        if let (Some(f), Some(a)) = (&self.fellows, asker) {
            let mut buf = recycled::take(len as usize);
            if f.run(a, pack, at[0], chunks, buf.as_mut_vec()) && buf.len() as u64 == len {
                return Ok((Arc::new(buf), None));
            }
        }
        self.read_range(pack, at[0], len)
    }

    /// Bytes `[offset, offset + len)` of `pack` from the origin, and the pack file's
    /// stamp as the read found it where the store can say (a folder).
    fn read_range(
        &self,
        pack: &PackId,
        offset: u64,
        len: u64,
    ) -> Result<(Arc<Buffer>, Option<Stamp>), Miss> {
        let mut buf = recycled::take(len as usize);
        add(&self.counters.origin_fetches, 1);
        let asked = Instant::now();
        let read = self
            .repo
            .pack_range_stamped_into(pack, offset, buf.as_mut_vec());
        self.counters.origin_latency.observe(asked.elapsed());
        let stamp = read.map_err(|e| origin_miss(&e))?;
        add(&self.counters.origin_bytes, buf.len() as u64);
        Ok((Arc::new(buf), stamp))
    }

    /// Whether `piece`, read at `offset` of `pack` as `stamp` found the file, is chunk
    /// `hash`: hashed, unless that place of that unchanged file was found good lately.
    fn is_chunk(
        &self,
        piece: &[u8],
        hash: &Hash,
        pack: &PackId,
        offset: u64,
        stamp: Option<Stamp>,
    ) -> bool {
        let Some(stamp) = stamp else {
            return Hash::of(piece) == *hash;
        };
        let place = Place {
            pack: *pack,
            stamp,
            offset,
            len: piece.len() as u32,
            hash: *hash,
        };
        let now = Instant::now();
        if self.checked.holds(&place, now) {
            add(&self.counters.hashes_spared, 1);
            return true;
        }
        let good = Hash::of(piece) == *hash;
        if good {
            self.checked.note(place, now);
        }
        good
    }

    fn read_at(&self, hash: &Hash, at: &Hint) -> Outcome {
        let (buf, stamp) = self.read_range(&at.pack, at.offset, at.len as u64)?;
        let piece = ChunkBytes::slice(&buf, 0..buf.len());
        if !self.is_chunk(&piece, hash, &at.pack, at.offset, stamp) {
            add(&self.counters.bad_bytes, 1);
            return Err(Miss::Corrupt(format!(
                "chunk {} in pack {} at offset {} fails its hash check",
                hash.hex(),
                at.pack.hex(),
                at.offset
            )));
        }
        Ok(piece)
    }
}

impl ChunkService {
    /// Bytes `[x, y)` of file `obj` that a block being proven reaches into beyond the
    /// chunks asked for (`proof::Edge::Cheap`): a chunk the cache holds comes from it,
    /// the rest as the part of each chunk the block needs, read from the origin and not
    /// checked: the block's hash checks them, and a block that fails asks again for
    /// whole, checked chunks. So proving a run costs the origin a few KiB at each end,
    /// not the neighbouring chunks (which another server of a ring owns and reads).
    pub fn edge_bytes(&self, obj: &FileObject, x: u64, y: u64) -> Result<Vec<ChunkBytes>, Miss> {
        let mut out = Vec::new();
        if x >= y {
            return Ok(out);
        }
        for i in obj.chunk_at(x)..=obj.chunk_at(y - 1) {
            let c = &obj.chunks[i];
            let cs = obj.start_of(i);
            let (a, b) = (x.max(cs), y.min(cs + c.entry.raw_len as u64));
            if let Some(bytes) = self.cached(&c.entry.hash) {
                out.push(bytes.sub((a - cs) as usize..(b - cs) as usize));
                continue;
            }
            if c.entry.flags != sealvol_core::objects::FLAG_RAW {
                // Stored otherwise than as its bytes: only the whole chunk says them.
                let pack = obj.packs[c.pack as usize];
                let hint = Hint {
                    pack,
                    offset: c.entry.offset,
                    len: c.entry.stored_len,
                };
                let whole = self.get(&c.entry.hash, Some(hint))?;
                out.push(whole.sub((a - cs) as usize..(b - cs) as usize));
                continue;
            }
            let pack = obj.packs[c.pack as usize];
            let (buf, _) = self.read_range(&pack, c.entry.offset + (a - cs), b - a)?;
            add(&self.counters.edge_bytes, buf.len() as u64);
            out.push(ChunkBytes::slice(&buf, 0..buf.len()));
        }
        Ok(out)
    }
}

fn origin_miss(e: &sealvol_core::Error) -> Miss {
    match e.kind() {
        ErrorKind::Corrupt => Miss::Corrupt(e.to_string()),
        _ => Miss::Unavailable(e.to_string()),
    }
}
