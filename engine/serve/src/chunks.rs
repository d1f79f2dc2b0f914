//! Chunks by hash, pulled through from the origin repository into this server's own
//! node-disk cache (the same `ChunkCache` a node uses), with one origin fetch per chunk
//! however many clients ask for it at once (single flight).
//!
//! A client may say where the chunk lies (pack, offset, length: its file's chunk list
//! names them), which spares the server the repository's index; the hint is only a
//! hint: the bytes must hash to the name asked for, else the index is asked instead.
//! Bytes that fail their hash are never served.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use sealvol_core::cache::ChunkCache;
use sealvol_core::digest::Hash;
use sealvol_core::error::ErrorKind;
use sealvol_core::objects::PackId;
use sealvol_core::read::add;
use sealvol_core::recycled::{self, Buffer};
use sealvol_core::repo::{ChunkIndex, Repository};

/// The largest chunk a repository holds (`chunk::ChunkParams::is_valid`): a longer
/// hint is a bad request, not an allocation.
pub const MAX_CHUNK: u32 = (sealvol_core::chunk::BLOCK / 2) as u32;

/// An index older than this is loaded again when a chunk is not in it (a push since).
const INDEX_FRESH: Duration = Duration::from_secs(10);

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
    /// The repository holds no chunk of that hash.
    NotFound,
    /// The repository's copies fail their hash (the reason names pack and offset).
    Corrupt(String),
    /// The origin could not be read just now; asking again may work.
    Unavailable(String),
}

/// What the server has done, for `/metrics`.
#[derive(Default)]
pub struct Counters {
    pub requests: AtomicU64,
    pub bytes_served: AtomicU64,
    pub cache_hits: AtomicU64,
    pub origin_fetches: AtomicU64,
    pub origin_bytes: AtomicU64,
    /// Requests that waited for another's fetch of the same chunk.
    pub flight_waits: AtomicU64,
    /// Origin reads whose bytes failed their hash.
    pub bad_bytes: AtomicU64,
    pub not_found: AtomicU64,
    pub errors: AtomicU64,
}

type Outcome = Result<Arc<Buffer>, Miss>;

#[derive(Default)]
struct Flight {
    outcome: Mutex<Option<Outcome>>,
    done: Condvar,
}

pub struct ChunkService {
    repo: Arc<Repository>,
    cache: Arc<ChunkCache>,
    flights: Mutex<HashMap<Hash, Arc<Flight>>>,
    index: Mutex<Option<(Instant, Arc<ChunkIndex>)>>,
    pub counters: Counters,
}

impl ChunkService {
    pub fn new(repo: Arc<Repository>, cache: Arc<ChunkCache>) -> ChunkService {
        ChunkService {
            repo,
            cache,
            flights: Mutex::default(),
            index: Mutex::default(),
            counters: Counters::default(),
        }
    }

    pub fn cache(&self) -> &ChunkCache {
        &self.cache
    }

    /// The verified bytes of chunk `hash`: from the cache, else from the origin, fetched
    /// once for everyone who asks meanwhile. Blocking: call it off the async threads.
    pub fn get(&self, hash: &Hash, hint: Option<Hint>) -> Outcome {
        add(&self.counters.requests, 1);
        if let Some(b) = self.cache.get(hash) {
            add(&self.counters.cache_hits, 1);
            return Ok(Arc::new(b));
        }
        let (flight, leader) = {
            let mut flights = self.flights.lock().unwrap_or_else(|p| p.into_inner());
            match flights.get(hash) {
                Some(f) => (Arc::clone(f), false),
                None => {
                    let f = Arc::new(Flight::default());
                    flights.insert(*hash, Arc::clone(&f));
                    (f, true)
                }
            }
        };
        if !leader {
            add(&self.counters.flight_waits, 1);
            let mut outcome = flight.outcome.lock().unwrap_or_else(|p| p.into_inner());
            loop {
                if let Some(o) = outcome.as_ref() {
                    return o.clone();
                }
                outcome = flight.done.wait(outcome).unwrap_or_else(|p| p.into_inner());
            }
        }
        // A fetch that ended just before this one began has filled the cache.
        let outcome = match self.cache.get(hash) {
            Some(b) => {
                add(&self.counters.cache_hits, 1);
                Ok(Arc::new(b))
            }
            None => self.fetch(hash, hint),
        };
        if let Ok(b) = &outcome
            && let Err(e) = self.cache.put(hash, b)
        {
            // A full or broken cache disk makes later requests slower, never wrong.
            tracing::warn!("cannot cache chunk {}: {e}", hash.hex());
        }
        match &outcome {
            Err(Miss::NotFound) => add(&self.counters.not_found, 1),
            Err(_) => add(&self.counters.errors, 1),
            Ok(_) => {}
        }
        *flight.outcome.lock().unwrap_or_else(|p| p.into_inner()) = Some(outcome.clone());
        flight.done.notify_all();
        self.flights
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(hash);
        outcome
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

    /// Where the repository's index has the chunk, loading the index again when the
    /// chunk is not in it and it is not fresh.
    fn locate(&self, hash: &Hash) -> Result<Hint, Miss> {
        let find = |index: &ChunkIndex| {
            index.chunks.get(hash).map(|loc| Hint {
                pack: index.packs[loc.slot as usize],
                offset: loc.entry.offset,
                len: loc.entry.stored_len,
            })
        };
        let mut cached = self.index.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((at, index)) = cached.as_ref() {
            match find(index) {
                Some(h) => return Ok(h),
                None if at.elapsed() < INDEX_FRESH => return Err(Miss::NotFound),
                None => {}
            }
        }
        let index = self
            .repo
            .load_index(false, &[])
            .map_err(|e| origin_miss(&e))?;
        let found = find(&index);
        *cached = Some((Instant::now(), Arc::new(index)));
        found.ok_or(Miss::NotFound)
    }

    fn read_at(&self, hash: &Hash, at: &Hint) -> Outcome {
        let mut buf = recycled::take(at.len as usize);
        add(&self.counters.origin_fetches, 1);
        self.repo
            .pack_range_into(&at.pack, at.offset, buf.as_mut_vec())
            .map_err(|e| origin_miss(&e))?;
        add(&self.counters.origin_bytes, buf.len() as u64);
        if Hash::of(&buf) != *hash {
            add(&self.counters.bad_bytes, 1);
            return Err(Miss::Corrupt(format!(
                "chunk {} in pack {} at offset {} fails its hash check",
                hash.hex(),
                at.pack.hex(),
                at.offset
            )));
        }
        Ok(Arc::new(buf))
    }
}

fn origin_miss(e: &sealvol_core::Error) -> Miss {
    match e.kind() {
        ErrorKind::Corrupt => Miss::Corrupt(e.to_string()),
        _ => Miss::Unavailable(e.to_string()),
    }
}
