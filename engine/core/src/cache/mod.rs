//! The node-disk cache tier: verified chunks packed into segment files (`packs.rs`:
//! `<dir>/packs/<id>.seg` with its index beside it), shared by every mount, pull and
//! `serve` on the node, kept across restarts, bounded in size with least-recently-used
//! eviction a segment at a time. Large files that were read whole are also kept whole
//! (`<dir>/files/<aa>/<file hash>`), so that a mount can hand them to the kernel (FUSE
//! passthrough) and serve them at local-disk speed.
//!
//! A whole file is checked against its hash once per fill, not once per process: the
//! check leaves a stamp beside it (`<file hash>.ok`: the inode, size, mtime and change
//! time it had when checked), and an open whose file still matches its stamp trusts it.
//! Any write, truncation, `chmod` or `touch` of the file moves its change time, which no
//! one can set back, so a file changed after its check is hashed again at its next open
//! (and dropped if it fails). For the same reason the LRU clock of a whole file is its
//! stamp's mtime, never the file's own. What this trusts is in docs/SEMANTICS.md.
//!
//! Safe with many processes at once, without a shared index: segments are appended to
//! by one process each and read by all (`packs.rs` says how); a whole file is published
//! by an atomic rename and never changes after; a reader verifies every chunk against
//! its hash and drops a bad one (a torn disk, a stray write) instead of serving it; a
//! segment's or whole file's mtime is its last use, so every process sees the same LRU
//! order; eviction takes an exclusive lock so two processes do not evict the same
//! objects twice, and deleting what a reader has open is harmless (Unix keeps the bytes
//! until it is closed).
//!
//! A cache of the layout before segments (`<dir>/chunks/<aa>/<hash>`, one file per
//! chunk) is read once in the background, each chunk checked and moved into segments.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::SystemTime;

mod packs;
mod stamp;
mod usage;

use crate::digest::Hash;
use crate::error::{IoContext, Result};
use crate::recycled::{self, Buffer};
use packs::Packs;
use stamp::{Stamp, is_stamp, stamp_path};
use usage::Usage;

pub struct ChunkCache {
    dir: PathBuf,
    max_bytes: u64,
    /// The chunks, packed into segments.
    packs: Arc<Packs>,
    /// Set while chunks of the old layout (`chunks/`) wait to be moved into segments:
    /// until then a miss looks there too.
    old_layout: Arc<AtomicBool>,
    /// Bytes this process believes the cache holds; re-measured on each eviction.
    used: Arc<Usage>,
    /// Set once the background measurement of the existing cache is done.
    measured: Arc<(Mutex<bool>, Condvar)>,
    /// Whole files this process hashed at open (no stamp, or one that did not match).
    files_hashed: AtomicU64,
    /// Objects (segments, whole files) and bytes this process evicted.
    evicted: Arc<(AtomicU64, AtomicU64)>,
}

/// A chunk file of the old layout, into a recycled buffer (`recycled`).
fn read_recycled(p: &Path) -> Option<Buffer> {
    use std::io::Read;
    let mut f = File::open(p).ok()?;
    let len = f.metadata().ok()?.len() as usize;
    let mut buf = recycled::take(len);
    f.read_exact(buf.as_mut_vec()).ok()?;
    Some(buf)
}

/// What eviction keeps: this fraction of `max_bytes`, so that it runs now and then, not
/// on every insert.
const LOW_WATER: f64 = 0.9;

/// What eviction can take.
enum Victim {
    Segment(String),
    File(PathBuf),
}

impl ChunkCache {
    pub fn open(dir: &Path, max_bytes: u64) -> Result<ChunkCache> {
        fs::create_dir_all(dir.join("tmp")).ctx("cannot create cache directory", dir)?;
        fs::create_dir_all(dir.join("files")).ctx("cannot create cache directory", dir)?;
        let (packs, held) = Packs::open(&dir.join("packs"), &dir.join("tmp"), max_bytes)
            .ctx("cannot open cache segments", &dir.join("packs"))?;
        let cache = ChunkCache {
            dir: dir.to_path_buf(),
            max_bytes,
            packs: Arc::new(packs),
            old_layout: Arc::new(AtomicBool::new(dir.join("chunks").is_dir())),
            used: Arc::default(),
            measured: Arc::new((Mutex::new(false), Condvar::new())),
            files_hashed: AtomicU64::new(0),
            evicted: Arc::default(),
        };
        cache.used.add(held);
        cache.remove_stale_temporaries();
        // Measuring the whole files costs a stat each, and moving an old cache into
        // segments reads it all, and a mount must be ready at once: both in the
        // background. Until then `used` counts the segments and what this process adds,
        // so eviction starts late, never early.
        // The thread holds the segments only while it uses them, so that dropping the
        // cache closes (and seals) this process's segment at once.
        let packs = Arc::downgrade(&cache.packs);
        let (dir_, old_layout, used, measured, evicted) = (
            cache.dir.clone(),
            Arc::clone(&cache.old_layout),
            Arc::clone(&cache.used),
            Arc::clone(&cache.measured),
            Arc::clone(&cache.evicted),
        );
        let done = Arc::clone(&cache.measured);
        let bg = move |packs: Arc<Packs>| ChunkCache {
            dir: dir_,
            max_bytes,
            packs,
            old_layout,
            used,
            measured,
            files_hashed: AtomicU64::new(0),
            evicted,
        };
        let spawned = std::thread::Builder::new()
            .name("sealvol-cache-measure".into())
            .spawn(move || {
                if let Some(bg) = packs.upgrade().map(bg) {
                    if let Ok((total, _)) = bg.scan_files() {
                        bg.used.add(total);
                    }
                    if bg.old_layout.load(Ordering::Relaxed) {
                        bg.move_old_layout();
                    }
                    if bg.used.get() > bg.max_bytes
                        && let Err(e) = bg.evict()
                    {
                        tracing::warn!("cache: {e}");
                    }
                }
                let (done, cv) = &*done;
                *crate::locks::lock(done) = true;
                cv.notify_all();
            });
        if let Err(e) = spawned {
            return Err(crate::error::Error::io("cannot start a thread", dir, e));
        }
        Ok(cache)
    }

    /// Moves the chunks of the layout before segments (one file per chunk) into
    /// segments, each checked against its name; a bad one is dropped. One process does
    /// it (under the eviction lock); the others find each chunk in one place or the
    /// other meanwhile.
    fn move_old_layout(&self) {
        let root = self.dir.join("chunks");
        let Ok(lock) = self.evict_lock() else { return };
        let (mut moved, mut bytes, mut bad) = (0u64, 0u64, 0u64);
        for sub in fs::read_dir(&root).into_iter().flatten().flatten() {
            for f in fs::read_dir(sub.path()).into_iter().flatten().flatten() {
                let path = f.path();
                let name = f.file_name();
                let hash = name.to_str().and_then(Hash::parse_hex);
                match (hash, read_recycled(&path)) {
                    (Some(h), Some(b)) if Hash::of(&b) == h => {
                        // Not `put`: it may evict, which takes the lock held here.
                        match self.packs.put(&h, &b) {
                            Ok(n) => self.used.add(n),
                            Err(e) => {
                                // Not moved this time; the next open tries again.
                                tracing::warn!("cache: cannot move the old layout's chunks: {e}");
                                return;
                            }
                        };
                        moved += 1;
                        bytes += b.len() as u64;
                    }
                    _ => bad += 1,
                }
                let _ = fs::remove_file(&path);
            }
            let _ = fs::remove_dir(sub.path());
        }
        let _ = fs::remove_dir(&root);
        self.old_layout.store(false, Ordering::Relaxed);
        drop(lock);
        tracing::info!(
            "cache: moved {moved} chunks ({bytes} bytes) of the old one-file-per-chunk layout into segments{}",
            if bad > 0 {
                format!(", dropped {bad} that were not what their names say")
            } else {
                String::new()
            }
        );
    }

    fn evict_lock(&self) -> Result<File> {
        let lock_path = self.dir.join("tmp").join("evict.lock");
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .ctx("cannot open", &lock_path)?;
        lock.lock().ctx("cannot lock", &lock_path)?;
        Ok(lock)
    }

    /// Temporary files of writers that died (a mount killed while keeping a file
    /// whole). Live writers finish within seconds, so an hour old means abandoned.
    fn remove_stale_temporaries(&self) {
        let Ok(rd) = fs::read_dir(self.dir.join("tmp")) else {
            return;
        };
        let hour_ago = SystemTime::now() - std::time::Duration::from_secs(3600);
        for e in rd.flatten() {
            let old = e
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t < hour_ago);
            if old && e.file_name() != "evict.lock" {
                let _ = fs::remove_file(e.path());
            }
        }
    }

    /// Where the old layout kept chunk `h`.
    fn old_path(&self, h: &Hash) -> PathBuf {
        let hex = h.hex();
        self.dir.join("chunks").join(&hex[..2]).join(hex)
    }

    fn file_path(&self, h: &Hash) -> PathBuf {
        let hex = h.hex();
        self.dir.join("files").join(&hex[..2]).join(hex)
    }

    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// A whole cached file, opened, if its bytes are `h`'s: at once when it still
    /// matches the stamp its last check left, else after hashing it (with every core)
    /// and stamping it. A file that fails is deleted.
    pub fn open_file(&self, h: &Hash) -> Option<File> {
        let p = self.file_path(h);
        let f = File::open(&p).ok()?;
        let before = Stamp::of(&f.metadata().ok()?);
        let stamp = stamp_path(&p);
        let stamped = fs::read_to_string(&stamp)
            .ok()
            .and_then(|t| Stamp::decode(&t));
        if stamped != Some(before) {
            self.files_hashed.fetch_add(1, Ordering::Relaxed);
            let mut hasher = blake3::Hasher::new();
            let ok =
                hasher.update_mmap_rayon(&p).is_ok() && Hash(*hasher.finalize().as_bytes()) == *h;
            if !ok {
                tracing::warn!("cache: file {} is damaged; dropping it", h.hex());
                let _ = fs::remove_file(&stamp);
                if fs::remove_file(&p).is_ok() {
                    self.used.sub(before.size);
                }
                return None;
            }
            // Changed while it was hashed: what was checked may not be what is there.
            if Stamp::of(&f.metadata().ok()?) != before {
                return None;
            }
            self.write_stamp(&p, before);
        }
        // The LRU clock of a whole file is its stamp's mtime (the file's own would
        // move its change time and void the stamp).
        if let Ok(s) = File::options().write(true).open(&stamp) {
            let _ = s.set_modified(SystemTime::now());
        }
        Some(f)
    }

    /// Whole files this process had to hash when opening them.
    /// Objects and bytes this process evicted (for metrics).
    pub fn evicted(&self) -> (u64, u64) {
        (
            self.evicted.0.load(Ordering::Relaxed),
            self.evicted.1.load(Ordering::Relaxed),
        )
    }

    pub fn files_hashed(&self) -> u64 {
        self.files_hashed.load(Ordering::Relaxed)
    }

    /// Records that `file` was checked as it is now. A stamp that cannot be written
    /// costs a hash at the next open, nothing else.
    fn write_stamp(&self, file: &Path, stamp: Stamp) {
        let tmp = self.dir.join("tmp").join(crate::store::unique_temp_name());
        let written =
            fs::write(&tmp, stamp.encode()).and_then(|()| fs::rename(&tmp, stamp_path(file)));
        if let Err(e) = written {
            let _ = fs::remove_file(&tmp);
            tracing::debug!("cache: cannot stamp {}: {e}", file.display());
        }
    }

    pub fn has_file(&self, h: &Hash) -> bool {
        self.file_path(h).exists()
    }

    /// Stores a whole file from its verified chunks, in order; the result is checked
    /// against the file hash `h` before it gets its name.
    pub fn put_file<B: AsRef<[u8]>>(
        &self,
        h: &Hash,
        chunks: impl Iterator<Item = Result<B>>,
    ) -> Result<()> {
        let dest = self.file_path(h);
        if dest.exists() {
            return Ok(());
        }
        let tmp = self.dir.join("tmp").join(crate::store::unique_temp_name());
        let result = (|| -> Result<u64> {
            let mut f = std::io::BufWriter::with_capacity(
                1 << 20,
                OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&tmp)
                    .ctx("cannot write cache file", &tmp)?,
            );
            // The bytes are checked as they are written: the stamp says so, and the
            // first open in any process hands the file over without hashing it again.
            let mut whole = blake3::Hasher::new();
            let mut n = 0u64;
            for c in chunks {
                let c = c?;
                let c = c.as_ref();
                whole.update(c);
                f.write_all(c).ctx("cannot write cache file", &tmp)?;
                n += c.len() as u64;
            }
            let f = f.into_inner().map_err(|e| {
                crate::error::Error::io("cannot write cache file", &tmp, e.into_error())
            })?;
            if Hash(*whole.finalize().as_bytes()) != *h {
                return Err(crate::error::Error::corrupt(format!(
                    "cache: chunks of file {} do not add up to its hash",
                    h.hex()
                )));
            }
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(&tmp, fs::Permissions::from_mode(0o444))
                .ctx("cannot write cache file", &tmp)?;
            if let Some(parent) = dest.parent() {
                fs::create_dir_all(parent).ctx("cannot create cache directory", parent)?;
            }
            fs::rename(&tmp, &dest).ctx("cannot publish cache file", &dest)?;
            // After the rename, which moves the change time on some filesystems.
            if let Ok(m) = f.metadata() {
                self.write_stamp(&dest, Stamp::of(&m));
            }
            Ok(n)
        })();
        match result {
            Ok(n) => {
                let used = self.used.add(n);
                if used > self.max_bytes {
                    self.evict()?;
                }
                Ok(())
            }
            Err(e) => {
                let _ = fs::remove_file(&tmp);
                Err(e)
            }
        }
    }

    /// Waits until the existing cache has been measured (tests, and callers that want an
    /// exact `used_bytes`).
    pub fn wait_measured(&self) {
        let (done, cv) = &*self.measured;
        let mut d = crate::locks::lock(done);
        while !*d {
            d = cv.wait(d).unwrap_or_else(|p| p.into_inner());
        }
    }

    pub fn used_bytes(&self) -> u64 {
        self.used.get()
    }

    /// Whether a chunk of that name is cached (not read, not checked: `get` does that).
    pub fn contains(&self, h: &Hash) -> bool {
        self.packs.contains(h)
            || (self.old_layout.load(Ordering::Relaxed) && self.old_path(h).exists())
    }

    /// The chunk, if cached and intact. A chunk that fails its hash is forgotten (and
    /// its segment marked for eviction first), so it is fetched and stored again.
    pub fn get(&self, h: &Hash) -> Option<Buffer> {
        let bytes = self.get_unchecked(h)?;
        if Hash::of(&bytes) != *h {
            self.packs.damaged(h);
            if self.old_layout.load(Ordering::Relaxed) {
                let _ = fs::remove_file(self.old_path(h));
            }
            return None;
        }
        Some(bytes)
    }

    /// A chunk as stored, not hashed: for a caller that proves these bytes itself
    /// (the blocks of its file, `Chunks::fetch_for_proof` over `Tiers`), and when they
    /// fail asks `get` again, which drops a damaged copy.
    pub fn get_unchecked(&self, h: &Hash) -> Option<Buffer> {
        self.packs.read(h).or_else(|| {
            self.old_layout
                .load(Ordering::Relaxed)
                .then(|| read_recycled(&self.old_path(h)))
                .flatten()
        })
    }

    /// Stores a chunk: the caller has checked it against `h`, or proven it to be bytes
    /// of a file whose list names `h` there (`Chunks::fetch_for_proof` over `Tiers`).
    /// Either way `get` checks what it gives back, so a copy stored under a name a lying
    /// list gave it costs a miss, never wrong bytes. Concurrent puts of the same chunk
    /// by two processes store it twice, harmlessly (one copy is found first).
    pub fn put(&self, h: &Hash, bytes: &[u8]) -> Result<()> {
        let n = self.packs.put(h, bytes)?;
        if n > 0 && self.used.add(n) > self.max_bytes {
            self.evict()?;
        }
        Ok(())
    }

    /// Chunks this process found damaged in the cache (and fetched again).
    pub fn damaged_chunks(&self) -> u64 {
        self.packs.damaged_count()
    }

    /// Every chunk the cache holds (for tests and `info`: it reads every index).
    pub fn chunks(&self) -> Vec<Hash> {
        self.packs.hashes()
    }

    /// Where chunk `h` lies: its segment file, offset and length (for tests that damage
    /// it, and for looking at a cache by hand).
    pub fn locate(&self, h: &Hash) -> Option<(PathBuf, u64, u32)> {
        self.packs.locate(h)
    }

    /// Every whole file: total bytes and (last use, size, path), for eviction. A whole
    /// file's last use is its stamp's mtime, and its size counts the stamp's; a stamp
    /// whose file is gone is removed.
    #[allow(clippy::type_complexity)]
    fn scan_files(&self) -> Result<(u64, Vec<(SystemTime, u64, PathBuf)>)> {
        let mut entries = Vec::new();
        let mut stamps = std::collections::HashMap::new();
        let root = self.dir.join("files");
        if let Ok(rd) = fs::read_dir(&root) {
            for sub in rd {
                let sub = sub.ctx("cannot list", &root)?.path();
                let Ok(rd) = fs::read_dir(&sub) else { continue };
                for f in rd.flatten() {
                    let Ok(m) = f.metadata() else { continue };
                    let used = m.modified().unwrap_or(SystemTime::UNIX_EPOCH);
                    let path = f.path();
                    if is_stamp(&path) {
                        stamps.insert(path.with_extension(""), (used, m.len(), path));
                    } else {
                        entries.push((used, m.len(), path));
                    }
                }
            }
        }
        for (used, size, path) in &mut entries {
            if let Some((stamp_used, stamp_size, _)) = stamps.remove(path) {
                *used = stamp_used;
                *size += stamp_size;
            }
        }
        for (_, _, orphan) in stamps.into_values() {
            let _ = fs::remove_file(orphan);
        }
        let total = entries.iter().map(|(_, size, _)| size).sum();
        Ok((total, entries))
    }

    /// Every segment and whole file: total bytes, and what eviction may take, oldest
    /// first (segments a reader found damaged before anything else; segments another
    /// process is appending to never).
    fn victims(&self) -> Result<(u64, Vec<(u64, Victim)>)> {
        let (mut total, files) = self.scan_files()?;
        let mut victims: Vec<(bool, SystemTime, u64, Victim)> = files
            .into_iter()
            .map(|(used, size, path)| (false, used, size, Victim::File(path)))
            .collect();
        for seg in self.packs.candidates() {
            total += seg.size;
            if !self.packs.being_written(&seg.id) {
                victims.push((!seg.damaged, seg.used, seg.size, Victim::Segment(seg.id)));
            }
        }
        victims.sort_by_key(|(healthy, used, _, _)| (*healthy, *used));
        let victims = victims
            .into_iter()
            .map(|(_, _, size, v)| (size, v))
            .collect();
        Ok((total, victims))
    }

    /// Evicts least recently used segments and whole files until the cache is under its
    /// low-water mark.
    pub fn evict(&self) -> Result<()> {
        let _lock = self.evict_lock()?;
        let (mut total, victims) = self.victims()?;
        let target = (self.max_bytes as f64 * LOW_WATER) as u64;
        for (size, victim) in victims {
            if total <= target {
                break;
            }
            let removed = match &victim {
                Victim::Segment(id) => self.packs.remove(id).map_err(|e| {
                    crate::error::Error::io("cannot evict", &self.dir.join("packs"), e)
                }),
                Victim::File(path) => {
                    let r = match fs::remove_file(path) {
                        Ok(()) => Ok(()),
                        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
                        Err(e) => Err(crate::error::Error::io("cannot evict", path, e)),
                    };
                    let _ = fs::remove_file(stamp_path(path));
                    r
                }
            };
            removed?;
            total -= size;
            self.evicted.0.fetch_add(1, Ordering::Relaxed);
            self.evicted.1.fetch_add(size, Ordering::Relaxed);
        }
        self.used.set(total);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
