//! The node cache's chunks, packed: appended to segment files (`packs/<id>.seg`), each
//! with an index beside it (`packs/<id>.idx`, one 48-byte entry per chunk: hash, offset,
//! length and a check of the entry itself). A cold pull of 2 GiB wrote 16,000 chunk
//! files before, and ext4's inode locks were 43% of its profile; now it appends to 32
//! files, and a read is one `pread` on a segment this process keeps open.
//!
//! Shared by every process of the node without a shared database (redb lets one process
//! open a file, and every mount, pull and `serve` shares this cache):
//! - each process appends only to a segment of its own, which it holds an exclusive
//!   `flock` on (the index's) while it writes; it writes the chunk, then its entry, so an
//!   entry never names bytes that were not written first; a full segment gets a seal
//!   entry and is never written again;
//! - other processes learn of new segments and entries by listing `packs/` and reading
//!   the indexes that grew, on a miss and at most every `REFRESH`;
//! - a segment is evicted whole (its index first, so no one finds it again); a process
//!   that still has it open reads on from its open file (Unix keeps the bytes) until
//!   its next refresh drops it.
//!
//! Crash-safe because nothing here is trusted: an entry that fails its own check, or
//! names bytes past the segment's end, is skipped; a segment whose writer died is
//! repaired by the next process that opens the cache (torn entries and the bytes no
//! entry names are cut, then it is sealed); and every chunk is checked against its hash
//! on its way out (`ChunkCache::get`), so bytes a power loss left as zeros are never
//! served, only fetched again (and their segment marked damaged, `<id>.damaged`, which
//! eviction takes first).

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime};

use crate::digest::Hash;
use crate::recycled::{self, Buffer};

/// Bytes of one index entry: hash (32), offset (8), length (4), check (4).
pub(super) const ENTRY: usize = 48;
/// The hash of the entry that seals a segment (no chunk has it).
const SEAL: [u8; 32] = [0xff; 32];
/// No chunk is longer (fastcdc's largest maximum is 16 MiB, a small file's chunk less):
/// an entry naming more is not believed, so a crafted index cannot make a read allocate.
const MAX_CHUNK: u32 = 64 << 20;
/// How often, at most, a process looks for segments and entries other processes added.
const REFRESH: Duration = Duration::from_millis(50);
/// How often, at most, a process moves a segment's last use (its mtime) when it reads
/// from it: the LRU clock is per segment, so seconds are fine and a syscall per chunk
/// is not.
const BUMP_EVERY_SECS: u64 = 2;
/// After a write fails for lack of space, how long puts are skipped before trying again.
const FULL_PAUSE: Duration = Duration::from_secs(30);

/// The segment size for a cache of `max_bytes`: large enough that a node's cache is tens
/// of files, small enough that evicting one is a small part of the bound.
pub(super) fn segment_bytes(max_bytes: u64) -> u64 {
    (max_bytes / 16).clamp(4 << 10, 64 << 20)
}

pub(super) fn entry(h: &[u8; 32], offset: u64, len: u32) -> [u8; ENTRY] {
    let mut e = [0u8; ENTRY];
    e[..32].copy_from_slice(h);
    e[32..40].copy_from_slice(&offset.to_le_bytes());
    e[40..44].copy_from_slice(&len.to_le_bytes());
    let check = blake3::hash(&e[..44]);
    e[44..].copy_from_slice(&check.as_bytes()[..4]);
    e
}

/// What an index entry says, if its check holds.
enum Entry {
    Chunk { hash: Hash, offset: u64, len: u32 },
    Seal,
}

fn decode(e: &[u8]) -> Option<Entry> {
    if e.len() != ENTRY || blake3::hash(&e[..44]).as_bytes()[..4] != e[44..] {
        return None;
    }
    let hash: [u8; 32] = e[..32].try_into().ok()?;
    if hash == SEAL {
        return Some(Entry::Seal);
    }
    Some(Entry::Chunk {
        hash: Hash(hash),
        offset: u64::from_le_bytes(e[32..40].try_into().ok()?),
        len: u32::from_le_bytes(e[40..44].try_into().ok()?),
    })
}

/// One segment this process has open.
pub(super) struct Segment {
    id: String,
    file: File,
    /// When this process last moved the segment's mtime (seconds since the epoch).
    bumped: AtomicU64,
}

impl Segment {
    fn bump(&self) {
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        if now.saturating_sub(self.bumped.load(Ordering::Relaxed)) >= BUMP_EVERY_SECS {
            self.bumped.store(now, Ordering::Relaxed);
            // Failing only makes the segment a little likelier to be evicted.
            let _ = self.file.set_modified(SystemTime::now());
        }
    }
}

/// Where a chunk lies.
#[derive(Clone)]
struct Loc {
    seg: Arc<Segment>,
    offset: u64,
    len: u32,
}

/// A segment as this process has read its index.
struct Known {
    seg: Arc<Segment>,
    /// Bytes of the index read so far (whole entries).
    idx_len: u64,
    sealed: bool,
    hashes: Vec<Hash>,
}

#[derive(Default)]
struct Index {
    map: HashMap<Hash, Loc>,
    known: HashMap<String, Known>,
}

/// The segment this process appends to.
struct Writer {
    seg: Arc<Segment>,
    /// The index, open for appending, holding the exclusive lock that says "being
    /// written" to every other process.
    idx: File,
    end: u64,
    idx_len: u64,
}

impl Writer {
    /// Appends the seal entry; the lock goes with the file when the writer is dropped.
    fn seal(&mut self) {
        let _ = self.idx.write_all(&entry(&SEAL, self.end, 0));
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.seal();
    }
}

/// A segment as eviction sees it.
pub(super) struct Candidate {
    pub(super) id: String,
    pub(super) used: SystemTime,
    pub(super) size: u64,
    pub(super) damaged: bool,
}

pub(super) struct Packs {
    dir: PathBuf,
    tmp: PathBuf,
    segment_bytes: u64,
    index: RwLock<Index>,
    writer: Mutex<Option<Writer>>,
    last_refresh: Mutex<Instant>,
    /// Set when a write found the disk full: puts are skipped until then.
    full_until: Mutex<Option<Instant>>,
    /// Chunks this process found damaged on disk.
    damaged: AtomicU64,
}

impl Packs {
    /// Opens (creating) `dir`, repairs segments whose writer died, and reads every index.
    /// Returns the packs and the bytes they hold.
    pub(super) fn open(dir: &Path, tmp: &Path, max_bytes: u64) -> io::Result<(Packs, u64)> {
        fs::create_dir_all(dir)?;
        let packs = Packs {
            dir: dir.to_path_buf(),
            tmp: tmp.to_path_buf(),
            segment_bytes: segment_bytes(max_bytes),
            index: RwLock::default(),
            writer: Mutex::new(None),
            last_refresh: Mutex::new(Instant::now()),
            full_until: Mutex::new(None),
            damaged: AtomicU64::new(0),
        };
        packs.repair_abandoned();
        packs.refresh_now()?;
        let held = packs.candidates().iter().map(|c| c.size).sum();
        Ok((packs, held))
    }

    fn seg_path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.seg"))
    }

    fn idx_path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.idx"))
    }

    fn damaged_path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.damaged"))
    }

    /// The ids of the segments on disk (those with an index).
    fn listed(&self) -> io::Result<Vec<String>> {
        let mut ids = Vec::new();
        for e in fs::read_dir(&self.dir)? {
            let name = e?.file_name();
            if let Some(id) = name.to_str().and_then(|n| n.strip_suffix(".idx")) {
                ids.push(id.to_string());
            }
        }
        Ok(ids)
    }

    /// Segments no writer holds and no seal closes: their writer died. Torn entries and
    /// the bytes past the last good one are cut, then the segment is sealed. Segment
    /// files left without an index (a writer killed between its two renames) go too.
    fn repair_abandoned(&self) {
        let Ok(ids) = self.listed() else { return };
        for id in &ids {
            let Ok(idx) = OpenOptions::new()
                .read(true)
                .append(true)
                .open(self.idx_path(id))
            else {
                continue;
            };
            if idx.try_lock().is_err() {
                continue; // being written
            }
            let Ok(seg) = OpenOptions::new()
                .read(true)
                .write(true)
                .open(self.seg_path(id))
            else {
                // An index without its segment names nothing.
                let _ = fs::remove_file(self.idx_path(id));
                continue;
            };
            let mut bytes = Vec::new();
            if (&idx).read_to_end(&mut bytes).is_err() {
                continue;
            }
            let seg_len = seg.metadata().map_or(0, |m| m.len());
            let mut end = 0u64;
            let mut good = 0usize;
            let mut sealed = false;
            for (i, e) in bytes.chunks(ENTRY).enumerate() {
                match decode(e) {
                    Some(Entry::Seal) => {
                        sealed = true;
                        break;
                    }
                    Some(Entry::Chunk { offset, len, .. })
                        if offset.checked_add(len as u64).is_some_and(|e| e <= seg_len) =>
                    {
                        end = end.max(offset + len as u64);
                        good = i + 1;
                    }
                    // A torn or wrong entry: what follows it cannot be trusted to be
                    // whole either (the writer appends in order).
                    _ => break,
                }
            }
            if sealed {
                continue;
            }
            let cut = idx.set_len((good * ENTRY) as u64).is_ok() && seg.set_len(end).is_ok();
            if cut {
                let _ = (&idx).write_all(&entry(&SEAL, end, 0));
                tracing::info!(
                    "cache: segment {id} was left open by a process that stopped; kept its {good} whole chunks and sealed it"
                );
            }
        }
        // Segment files without an index, an hour old (a live writer renames within
        // microseconds).
        let hour_ago = SystemTime::now() - Duration::from_secs(3600);
        let Ok(rd) = fs::read_dir(&self.dir) else {
            return;
        };
        for e in rd.flatten() {
            let name = e.file_name();
            let Some(id) = name.to_str().and_then(|n| n.strip_suffix(".seg")) else {
                continue;
            };
            let old = e
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t < hour_ago);
            if old && !ids.iter().any(|i| i == id) {
                let _ = fs::remove_file(e.path());
            }
        }
    }

    /// Reads what other processes added (new segments, new entries) and forgets the
    /// segments they evicted, at most every `REFRESH`.
    fn refresh(&self) {
        {
            let mut last = crate::locks::lock(&self.last_refresh);
            if last.elapsed() < REFRESH {
                return;
            }
            *last = Instant::now();
        }
        if let Err(e) = self.refresh_now() {
            tracing::debug!("cache: cannot read {}: {e}", self.dir.display());
        }
    }

    fn refresh_now(&self) -> io::Result<()> {
        let listed = self.listed()?;
        // What to read, decided under the read lock; read without any lock.
        let (gone, todo): (Vec<String>, Vec<ToRead>) = {
            let index = self.index.read().unwrap_or_else(|p| p.into_inner());
            let gone = index
                .known
                .keys()
                .filter(|k| !listed.contains(k))
                .cloned()
                .collect();
            let todo = listed
                .iter()
                .filter_map(|id| match index.known.get(id) {
                    None => Some((id.clone(), 0, None)),
                    Some(k) if !k.sealed => Some((id.clone(), k.idx_len, Some(Arc::clone(&k.seg)))),
                    Some(_) => None,
                })
                .collect();
            (gone, todo)
        };
        let mut read = Vec::new();
        for (id, from, seg) in todo {
            if let Some(r) = self.read_index(&id, from, seg) {
                read.push((id, r));
            }
        }
        let mut index = self.index.write().unwrap_or_else(|p| p.into_inner());
        for id in gone {
            if let Some(k) = index.known.remove(&id) {
                for h in k.hashes {
                    if index.map.get(&h).is_some_and(|l| l.seg.id == id) {
                        index.map.remove(&h);
                    }
                }
            }
        }
        for (id, r) in read {
            // Another refresh may have read further meanwhile.
            if index.known.get(&id).is_some_and(|k| k.idx_len > r.from) {
                continue;
            }
            let known = index.known.entry(id).or_insert_with(|| Known {
                seg: Arc::clone(&r.seg),
                idx_len: 0,
                sealed: false,
                hashes: Vec::new(),
            });
            known.idx_len = r.to;
            known.sealed |= r.sealed;
            known.hashes.extend(r.chunks.iter().map(|(h, _, _)| *h));
            for (h, offset, len) in r.chunks {
                // A copy in another segment is as good: keep the one found first.
                index.map.entry(h).or_insert_with(|| Loc {
                    seg: Arc::clone(&r.seg),
                    offset,
                    len,
                });
            }
        }
        Ok(())
    }

    /// The entries of segment `id`'s index from byte `from`, those naming bytes the
    /// segment holds.
    fn read_index(&self, id: &str, from: u64, seg: Option<Arc<Segment>>) -> Option<IndexRead> {
        let mut idx = File::open(self.idx_path(id)).ok()?;
        let seg = match seg {
            Some(s) => s,
            None => Arc::new(Segment {
                id: id.to_string(),
                file: File::open(self.seg_path(id)).ok()?,
                bumped: AtomicU64::new(0),
            }),
        };
        let mut bytes = Vec::new();
        idx.seek_read_to_end(from, &mut bytes).ok()?;
        // Measured after the index: a writer writes the bytes before their entry.
        let seg_len = seg.file.metadata().ok()?.len();
        let whole = bytes.len() / ENTRY * ENTRY;
        let mut r = IndexRead {
            seg,
            from,
            to: from + whole as u64,
            sealed: false,
            chunks: Vec::new(),
        };
        for e in bytes[..whole].chunks(ENTRY) {
            match decode(e) {
                Some(Entry::Seal) => r.sealed = true,
                Some(Entry::Chunk { hash, offset, len })
                    if len <= MAX_CHUNK
                        && offset.checked_add(len as u64).is_some_and(|e| e <= seg_len) =>
                {
                    r.chunks.push((hash, offset, len));
                }
                // Torn or not an entry: skipped; `get` would refuse its bytes anyway.
                _ => {}
            }
        }
        Some(r)
    }

    fn lookup(&self, h: &Hash) -> Option<Loc> {
        let found = |p: &Packs| {
            let index = p.index.read().unwrap_or_else(|p| p.into_inner());
            index.map.get(h).cloned()
        };
        found(self).or_else(|| {
            self.refresh();
            found(self)
        })
    }

    pub(super) fn contains(&self, h: &Hash) -> bool {
        self.lookup(h).is_some()
    }

    /// A chunk's bytes as stored (not checked: the caller does), by one `pread`.
    pub(super) fn read(&self, h: &Hash) -> Option<Buffer> {
        let loc = self.lookup(h)?;
        let mut buf = recycled::take(loc.len as usize);
        loc.seg
            .file
            .read_exact_at(buf.as_mut_vec(), loc.offset)
            .ok()?;
        loc.seg.bump();
        Some(buf)
    }

    /// `h`'s bytes here were not `h`'s: forgotten (so the next read fetches it again
    /// and stores a good copy) and its segment marked for eviction first.
    pub(super) fn damaged(&self, h: &Hash) {
        let Some(loc) = self
            .index
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .map
            .remove(h)
        else {
            return;
        };
        self.damaged.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(
            "cache: chunk {} in segment {} is damaged; fetching it again (the segment goes first at the next eviction)",
            h.hex(),
            loc.seg.id
        );
        let _ = File::create(self.damaged_path(&loc.seg.id));
        // Not written to again, so that eviction may take it.
        let mut w = crate::locks::lock(&self.writer);
        if w.as_ref().is_some_and(|w| w.seg.id == loc.seg.id) {
            self.seal(&mut w);
        }
    }

    /// Seals this process's segment (it is dropped, and the seal written as it is).
    fn seal(&self, w: &mut Option<Writer>) {
        if let Some(old) = w.take() {
            let id = old.seg.id.clone();
            drop(old);
            let mut index = self.index.write().unwrap_or_else(|p| p.into_inner());
            if let Some(k) = index.known.get_mut(&id) {
                k.sealed = true;
                k.idx_len += ENTRY as u64;
            }
        }
    }

    pub(super) fn damaged_count(&self) -> u64 {
        self.damaged.load(Ordering::Relaxed)
    }

    /// Appends a chunk; returns the bytes it added (0 when it was here already, or the
    /// disk is full and puts are paused).
    pub(super) fn put(&self, h: &Hash, bytes: &[u8]) -> crate::error::Result<u64> {
        use crate::error::Error;
        if bytes.len() as u64 > MAX_CHUNK as u64 {
            return Err(Error::invalid(format!(
                "cache: chunk {} is {} bytes, more than a chunk can be",
                h.hex(),
                bytes.len()
            )));
        }
        if self
            .index
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .map
            .contains_key(h)
        {
            return Ok(0);
        }
        if crate::locks::lock(&self.full_until).is_some_and(|t| Instant::now() < t) {
            return Ok(0);
        }
        let mut w = crate::locks::lock(&self.writer);
        if w.as_ref()
            .is_some_and(|w| w.end > 0 && w.end + bytes.len() as u64 > self.segment_bytes)
        {
            self.seal(&mut w);
        }
        if w.is_none() {
            let new = self.new_writer().map_err(|e| self.failed(e))?;
            let mut index = self.index.write().unwrap_or_else(|p| p.into_inner());
            index.known.insert(
                new.seg.id.clone(),
                Known {
                    seg: Arc::clone(&new.seg),
                    idx_len: 0,
                    sealed: false,
                    hashes: Vec::new(),
                },
            );
            *w = Some(new);
        }
        let Some(wr) = w.as_mut() else {
            return Ok(0);
        };
        let offset = wr.end;
        let e = entry(&h.0, offset, bytes.len() as u32);
        let written = wr
            .seg
            .file
            .write_all_at(bytes, offset)
            .and_then(|()| wr.idx.write_all(&e));
        if let Err(err) = written {
            // Cut what was half written, so the segment stays as it was.
            let _ = wr.idx.set_len(wr.idx_len);
            let _ = wr.seg.file.set_len(offset);
            return Err(self.failed(err));
        }
        wr.end += bytes.len() as u64;
        wr.idx_len += ENTRY as u64;
        let seg = Arc::clone(&wr.seg);
        let idx_len = wr.idx_len;
        drop(w);
        let mut index = self.index.write().unwrap_or_else(|p| p.into_inner());
        if let Some(k) = index.known.get_mut(&seg.id) {
            k.idx_len = idx_len;
            k.hashes.push(*h);
        }
        index.map.entry(*h).or_insert(Loc {
            seg,
            offset,
            len: bytes.len() as u32,
        });
        Ok(bytes.len() as u64 + ENTRY as u64)
    }

    /// The error of a failed write; a full disk pauses puts for `FULL_PAUSE`, with a line.
    fn failed(&self, e: io::Error) -> crate::error::Error {
        if e.raw_os_error() == Some(libc::ENOSPC) || e.raw_os_error() == Some(libc::EDQUOT) {
            let mut full = crate::locks::lock(&self.full_until);
            if full.is_none_or(|t| Instant::now() >= t) {
                tracing::warn!(
                    "cache: the disk of {} is full; reads go on from peers and the origin without caching (free space or lower --cache-size)",
                    self.dir.display()
                );
            }
            *full = Some(Instant::now() + FULL_PAUSE);
        }
        crate::error::Error::io("cannot write cache segment", &self.dir, e)
    }

    /// A new segment of this process: made in `tmp/` and locked there, then renamed in
    /// (segment first, then index), so no other process sees it unlocked and unsealed.
    fn new_writer(&self) -> io::Result<Writer> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let mut seed = blake3::Hasher::new();
        seed.update(crate::store::unique_temp_name().as_bytes());
        seed.update(&COUNTER.fetch_add(1, Ordering::Relaxed).to_le_bytes());
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        seed.update(&nanos.to_le_bytes());
        let id = hex::encode(&seed.finalize().as_bytes()[..8]);
        let (tmp_seg, tmp_idx) = (
            self.tmp.join(format!("{id}.seg")),
            self.tmp.join(format!("{id}.idx")),
        );
        let open = |p: &Path| {
            OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(p)
        };
        let seg = open(&tmp_seg)?;
        let idx = match OpenOptions::new()
            .append(true)
            .create_new(true)
            .open(&tmp_idx)
        {
            Ok(i) => i,
            Err(e) => {
                let _ = fs::remove_file(&tmp_seg);
                return Err(e);
            }
        };
        let published = idx
            .try_lock()
            .map_err(|e| io::Error::other(e.to_string()))
            .and_then(|()| fs::rename(&tmp_seg, self.seg_path(&id)))
            .and_then(|()| fs::rename(&tmp_idx, self.idx_path(&id)));
        if let Err(e) = published {
            for p in [tmp_seg, tmp_idx, self.seg_path(&id)] {
                let _ = fs::remove_file(p);
            }
            return Err(e);
        }
        Ok(Writer {
            seg: Arc::new(Segment {
                id,
                file: seg,
                bumped: AtomicU64::new(0),
            }),
            idx,
            end: 0,
            idx_len: 0,
        })
    }

    /// Every segment on disk that no process is writing: its last use (the segment's
    /// mtime), its size (segment and index) and whether a reader found it damaged.
    pub(super) fn candidates(&self) -> Vec<Candidate> {
        let Ok(ids) = self.listed() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for id in ids {
            let Ok(idx) = File::open(self.idx_path(&id)) else {
                continue;
            };
            let Ok(seg) = fs::metadata(self.seg_path(&id)) else {
                continue;
            };
            let idx_size = idx.metadata().map_or(0, |m| m.len());
            out.push(Candidate {
                used: seg.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                size: seg.len() + idx_size,
                damaged: self.damaged_path(&id).exists(),
                id,
            });
        }
        out
    }

    /// Whether a process is appending to segment `id` (it holds the index's lock).
    pub(super) fn being_written(&self, id: &str) -> bool {
        match File::open(self.idx_path(id)) {
            Ok(f) => match f.try_lock() {
                Ok(()) => false,
                Err(_) => true,
            },
            Err(_) => false,
        }
    }

    /// Removes segment `id`: its index first, so no process finds it again.
    pub(super) fn remove(&self, id: &str) -> io::Result<()> {
        match fs::remove_file(self.idx_path(id)) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let _ = fs::remove_file(self.seg_path(id));
        let _ = fs::remove_file(self.damaged_path(id));
        let mut index = self.index.write().unwrap_or_else(|p| p.into_inner());
        if let Some(k) = index.known.remove(id) {
            for h in k.hashes {
                if index.map.get(&h).is_some_and(|l| l.seg.id == id) {
                    index.map.remove(&h);
                }
            }
        }
        Ok(())
    }

    /// Every chunk this process knows of, after a refresh.
    pub(super) fn hashes(&self) -> Vec<Hash> {
        let _ = self.refresh_now();
        let index = self.index.read().unwrap_or_else(|p| p.into_inner());
        index.map.keys().copied().collect()
    }

    /// Where a chunk lies: its segment file, offset and length.
    pub(super) fn locate(&self, h: &Hash) -> Option<(PathBuf, u64, u32)> {
        let loc = self.lookup(h)?;
        Some((self.seg_path(&loc.seg.id), loc.offset, loc.len))
    }
}

/// A segment's index to read: its id, from which byte, and the segment if open already.
type ToRead = (String, u64, Option<Arc<Segment>>);

struct IndexRead {
    seg: Arc<Segment>,
    from: u64,
    to: u64,
    sealed: bool,
    chunks: Vec<(Hash, u64, u32)>,
}

trait ReadFrom {
    fn seek_read_to_end(&mut self, from: u64, out: &mut Vec<u8>) -> io::Result<()>;
}

impl ReadFrom for File {
    fn seek_read_to_end(&mut self, from: u64, out: &mut Vec<u8>) -> io::Result<()> {
        use std::io::{Seek, SeekFrom};
        self.seek(SeekFrom::Start(from))?;
        self.read_to_end(out).map(|_| ())
    }
}
