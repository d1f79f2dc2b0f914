//! The node-disk cache tier: verified chunks as content-addressed files
//! (`<dir>/chunks/<aa>/<hash>`), shared by every mount and pull on the node, kept across
//! restarts, bounded in size with least-recently-used eviction. Large files that were
//! read whole are also kept whole (`<dir>/files/<aa>/<file hash>`), so that a mount can
//! hand them to the kernel (FUSE passthrough) and serve them at local-disk speed.
//!
//! Safe with many processes at once, without a shared index: a chunk file is published
//! by an atomic rename and never changes after; a reader verifies every chunk against
//! its hash and drops a bad one (a torn disk, a stray write) instead of serving it; a
//! file's mtime is its last use, so every process sees the same LRU order; eviction
//! takes an exclusive lock so two processes do not evict the same chunks twice, and
//! deleting a chunk a reader has open is harmless (Unix keeps the bytes until closed).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::SystemTime;

use crate::digest::Hash;
use crate::error::{IoContext, Result};

/// Whole files this process has checked: (inode, ctime seconds, ctime nanoseconds).
pub type Verified = std::sync::Mutex<std::collections::HashSet<(u64, i64, i64)>>;

pub struct ChunkCache {
    dir: PathBuf,
    max_bytes: u64,
    /// Bytes this process believes the cache holds; re-measured on each eviction.
    used: Arc<AtomicU64>,
    /// Set once the background measurement of the existing cache is done.
    measured: Arc<(Mutex<bool>, Condvar)>,
}

/// What eviction keeps: this fraction of `max_bytes`, so that it runs now and then, not
/// on every insert.
const LOW_WATER: f64 = 0.9;

impl ChunkCache {
    pub fn open(dir: &Path, max_bytes: u64) -> Result<ChunkCache> {
        fs::create_dir_all(dir.join("chunks")).ctx("cannot create cache directory", dir)?;
        fs::create_dir_all(dir.join("tmp")).ctx("cannot create cache directory", dir)?;
        fs::create_dir_all(dir.join("files")).ctx("cannot create cache directory", dir)?;
        let cache = ChunkCache {
            dir: dir.to_path_buf(),
            max_bytes,
            used: Arc::new(AtomicU64::new(0)),
            measured: Arc::new((Mutex::new(false), Condvar::new())),
        };
        cache.remove_stale_temporaries();
        // Measuring a large cache costs a stat per chunk (seconds for millions of
        // them), and a mount must be ready at once: measure in the background. Until
        // then `used` counts only what this process adds, so eviction starts late, never
        // early.
        let bg = ChunkCache {
            dir: cache.dir.clone(),
            max_bytes,
            used: Arc::clone(&cache.used),
            measured: Arc::clone(&cache.measured),
        };
        let spawned = std::thread::Builder::new()
            .name("sealvol-cache-measure".into())
            .spawn(move || {
                if let Ok((total, _)) = bg.scan() {
                    let used = bg.used.fetch_add(total, Ordering::Relaxed) + total;
                    if used > bg.max_bytes
                        && let Err(e) = bg.evict()
                    {
                        tracing::warn!("cache: {e}");
                    }
                }
                let (done, cv) = &*bg.measured;
                *done.lock().unwrap_or_else(|p| p.into_inner()) = true;
                cv.notify_all();
            });
        if let Err(e) = spawned {
            return Err(crate::Error::io("cannot start a thread", dir, e));
        }
        Ok(cache)
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

    fn path(&self, h: &Hash) -> PathBuf {
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

    /// A whole cached file, opened, after checking its bytes against `h` (with every
    /// core). A file that fails is deleted. `verified` remembers files this process has
    /// already checked, by inode and change time, so reopening one costs nothing.
    pub fn open_file(&self, h: &Hash, verified: &Verified) -> Option<File> {
        use std::os::unix::fs::MetadataExt;
        let p = self.file_path(h);
        let f = File::open(&p).ok()?;
        let m = f.metadata().ok()?;
        let key = (m.ino(), m.ctime(), m.ctime_nsec());
        let known = verified.lock().map(|v| v.contains(&key)).unwrap_or(false);
        if !known {
            let mut hasher = blake3::Hasher::new();
            let ok =
                hasher.update_mmap_rayon(&p).is_ok() && Hash(*hasher.finalize().as_bytes()) == *h;
            if !ok {
                tracing::warn!("cache: file {} is damaged; dropping it", h.hex());
                if fs::remove_file(&p).is_ok() {
                    self.used.fetch_sub(m.len(), Ordering::Relaxed);
                }
                return None;
            }
        }
        // Bumping the LRU clock changes the inode's ctime: remember the new one.
        let _ = f.set_modified(SystemTime::now());
        if let (Ok(m), Ok(mut v)) = (f.metadata(), verified.lock()) {
            v.remove(&key);
            v.insert((m.ino(), m.ctime(), m.ctime_nsec()));
        }
        Some(f)
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
            let mut whole = blake3::Hasher::new();
            let mut n = 0u64;
            for c in chunks {
                let c = c?;
                let c = c.as_ref();
                whole.update(c);
                f.write_all(c).ctx("cannot write cache file", &tmp)?;
                n += c.len() as u64;
            }
            f.flush().ctx("cannot write cache file", &tmp)?;
            if Hash(*whole.finalize().as_bytes()) != *h {
                return Err(crate::Error::corrupt(format!(
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
            Ok(n)
        })();
        match result {
            Ok(n) => {
                let used = self.used.fetch_add(n, Ordering::Relaxed) + n;
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
        let mut d = done.lock().unwrap_or_else(|p| p.into_inner());
        while !*d {
            d = cv.wait(d).unwrap_or_else(|p| p.into_inner());
        }
    }

    pub fn used_bytes(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// The chunk, if cached and intact. A chunk that fails its hash is deleted.
    pub fn get(&self, h: &Hash) -> Option<Vec<u8>> {
        let p = self.path(h);
        let bytes = fs::read(&p).ok()?;
        if Hash::of(&bytes) != *h {
            tracing::warn!("cache: chunk {} is damaged; dropping it", h.hex());
            if fs::remove_file(&p).is_ok() {
                self.used.fetch_sub(bytes.len() as u64, Ordering::Relaxed);
            }
            return None;
        }
        // The mtime is the LRU clock every process shares; failing to bump it only
        // makes this chunk a little likelier to be evicted.
        if let Ok(f) = File::options().write(true).open(&p) {
            let _ = f.set_modified(SystemTime::now());
        }
        Some(bytes)
    }

    /// Stores a chunk (the caller has verified it against `h`). Concurrent puts of the
    /// same chunk are fine: the first rename wins and the bytes are the same.
    pub fn put(&self, h: &Hash, bytes: &[u8]) -> Result<()> {
        let dest = self.path(h);
        if dest.exists() {
            return Ok(());
        }
        let tmp = self.dir.join("tmp").join(crate::store::unique_temp_name());
        {
            let mut f = OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&tmp)
                .ctx("cannot write cache file", &tmp)?;
            f.write_all(bytes).ctx("cannot write cache file", &tmp)?;
        }
        if let Some(parent) = dest.parent() {
            fs::create_dir_all(parent).ctx("cannot create cache directory", parent)?;
        }
        match fs::rename(&tmp, &dest) {
            Ok(()) => {
                let used =
                    self.used.fetch_add(bytes.len() as u64, Ordering::Relaxed) + bytes.len() as u64;
                if used > self.max_bytes {
                    self.evict()?;
                }
                Ok(())
            }
            Err(e) => {
                let _ = fs::remove_file(&tmp);
                Err(crate::Error::io("cannot publish cache file", &dest, e))
            }
        }
    }

    /// Every cached chunk: total bytes and (mtime, size, path), for eviction.
    #[allow(clippy::type_complexity)]
    fn scan(&self) -> Result<(u64, Vec<(SystemTime, u64, PathBuf)>)> {
        let mut files = Vec::new();
        let mut total = 0;
        for kind in ["chunks", "files"] {
            let root = self.dir.join(kind);
            let Ok(rd) = fs::read_dir(&root) else {
                continue;
            };
            self.scan_into(rd, &root, &mut total, &mut files)?;
        }
        Ok((total, files))
    }

    #[allow(clippy::type_complexity)]
    fn scan_into(
        &self,
        rd: fs::ReadDir,
        root: &Path,
        total: &mut u64,
        files: &mut Vec<(SystemTime, u64, PathBuf)>,
    ) -> Result<()> {
        for sub in rd {
            let sub = sub.ctx("cannot list", root)?.path();
            let Ok(rd) = fs::read_dir(&sub) else { continue };
            for f in rd.flatten() {
                let Ok(m) = f.metadata() else { continue };
                *total += m.len();
                files.push((
                    m.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                    m.len(),
                    f.path(),
                ));
            }
        }
        Ok(())
    }

    /// Deletes least recently used chunks until the cache is under its low-water mark.
    pub fn evict(&self) -> Result<()> {
        let lock_path = self.dir.join("tmp").join("evict.lock");
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .ctx("cannot open", &lock_path)?;
        lock.lock().ctx("cannot lock", &lock_path)?;
        let (mut total, mut files) = self.scan()?;
        let target = (self.max_bytes as f64 * LOW_WATER) as u64;
        files.sort_by_key(|(t, _, _)| *t);
        for (_, size, path) in files {
            if total <= target {
                break;
            }
            match fs::remove_file(&path) {
                Ok(()) => total -= size,
                Err(e) if e.kind() == io::ErrorKind::NotFound => total -= size,
                Err(e) => return Err(crate::Error::io("cannot evict", &path, e)),
            }
        }
        self.used.store(total, Ordering::Relaxed);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(i: u32, len: usize) -> (Hash, Vec<u8>) {
        let bytes: Vec<u8> = (0..len).map(|j| (i as usize * 31 + j * 7) as u8).collect();
        (Hash::of(&bytes), bytes)
    }

    #[test]
    fn round_trip_across_instances_and_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let a = ChunkCache::open(dir.path(), 1 << 20).unwrap();
        let (h, b) = chunk(1, 1000);
        assert!(a.get(&h).is_none());
        a.put(&h, &b).unwrap();
        a.put(&h, &b).unwrap();
        // Another process (here: another instance) sees it, and so does a restart.
        let other = ChunkCache::open(dir.path(), 1 << 20).unwrap();
        other.wait_measured();
        assert_eq!(other.get(&h).unwrap(), b);
        assert_eq!(other.used_bytes(), 1000);
    }

    #[test]
    fn a_damaged_chunk_is_dropped_not_served() {
        let dir = tempfile::tempdir().unwrap();
        let c = ChunkCache::open(dir.path(), 1 << 20).unwrap();
        let (h, b) = chunk(2, 4096);
        c.put(&h, &b).unwrap();
        let p = c.path(&h);
        let mut bad = b.clone();
        bad[100] ^= 1;
        fs::write(&p, &bad).unwrap();
        assert!(c.get(&h).is_none());
        assert!(
            !p.exists(),
            "the bad chunk is deleted so it can be refetched"
        );
        c.put(&h, &b).unwrap();
        assert_eq!(c.get(&h).unwrap(), b);
    }

    #[test]
    fn eviction_keeps_the_bound_and_the_recently_used() {
        let dir = tempfile::tempdir().unwrap();
        let c = ChunkCache::open(dir.path(), 10 * 1000).unwrap();
        c.wait_measured();
        let chunks: Vec<_> = (0..8).map(|i| chunk(i, 1000)).collect();
        for (i, (h, b)) in chunks.iter().enumerate() {
            c.put(h, b).unwrap();
            // Distinct mtimes, oldest first.
            let t = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000 + i as u64);
            File::options()
                .write(true)
                .open(c.path(h))
                .unwrap()
                .set_modified(t)
                .unwrap();
        }
        // Using chunk 0 makes it the most recent.
        assert!(c.get(&chunks[0].0).is_some());
        for i in 8..14 {
            let (h, b) = chunk(i, 1000);
            c.put(&h, &b).unwrap();
        }
        let (total, _) = c.scan().unwrap();
        assert!(total <= 10 * 1000, "{total}");
        assert!(c.get(&chunks[0].0).is_some(), "recently used survives");
        assert!(
            c.get(&chunks[1].0).is_none(),
            "least recently used goes first"
        );
        assert_eq!(c.used_bytes(), c.scan().unwrap().0);
    }

    #[test]
    fn many_users_at_once_never_see_wrong_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let chunks: Vec<_> = (0..64).map(|i| chunk(i, 2000 + i as usize)).collect();
        std::thread::scope(|s| {
            for t in 0..4u32 {
                let (dir, chunks) = (dir.path(), &chunks);
                s.spawn(move || {
                    // One instance per "process", all on one small cache.
                    let c = ChunkCache::open(dir, 40_000).unwrap();
                    for round in 0..200u32 {
                        let (h, b) = &chunks[((round * 7 + t * 13) % 64) as usize];
                        if let Some(got) = c.get(h) {
                            assert_eq!(&got, b);
                        } else {
                            c.put(h, b).unwrap();
                        }
                    }
                });
            }
        });
        let c = ChunkCache::open(dir.path(), 40_000).unwrap();
        c.wait_measured();
        assert!(c.used_bytes() <= 40_000 + 4 * 3000, "{}", c.used_bytes());
    }
}
