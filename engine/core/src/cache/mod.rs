//! The node-disk cache tier: verified chunks as content-addressed files
//! (`<dir>/chunks/<aa>/<hash>`), shared by every mount and pull on the node, kept across
//! restarts, bounded in size with least-recently-used eviction. Large files that were
//! read whole are also kept whole (`<dir>/files/<aa>/<file hash>`), so that a mount can
//! hand them to the kernel (FUSE passthrough) and serve them at local-disk speed.
//!
//! A whole file is checked against its hash once per fill, not once per process: the
//! check leaves a stamp beside it (`<file hash>.ok`: the inode, size, mtime and change
//! time it had when checked), and an open whose file still matches its stamp trusts it.
//! Any write, truncation, `chmod` or `touch` of the file moves its change time, which no
//! one can set back, so a file changed after its check is hashed again at its next open
//! (and dropped if it fails). For the same reason the LRU clock of a whole file is its
//! stamp's mtime, never the file's own. What this trusts is in docs/SEMANTICS.md.
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

mod stamp;
mod usage;

use crate::digest::Hash;
use crate::error::{IoContext, Result};
use crate::recycled::{self, Buffer};
use stamp::{Stamp, is_stamp, stamp_path};
use usage::Usage;

pub struct ChunkCache {
    dir: PathBuf,
    max_bytes: u64,
    /// Bytes this process believes the cache holds; re-measured on each eviction.
    used: Arc<Usage>,
    /// Set once the background measurement of the existing cache is done.
    measured: Arc<(Mutex<bool>, Condvar)>,
    /// Whole files this process hashed at open (no stamp, or one that did not match).
    files_hashed: AtomicU64,
    /// Objects (chunks, whole files) and bytes this process evicted.
    evicted: Arc<(AtomicU64, AtomicU64)>,
}

/// The stamp beside a whole file.
/// A whole chunk file, into a recycled buffer (`recycled`).
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

impl ChunkCache {
    pub fn open(dir: &Path, max_bytes: u64) -> Result<ChunkCache> {
        fs::create_dir_all(dir.join("chunks")).ctx("cannot create cache directory", dir)?;
        fs::create_dir_all(dir.join("tmp")).ctx("cannot create cache directory", dir)?;
        fs::create_dir_all(dir.join("files")).ctx("cannot create cache directory", dir)?;
        let cache = ChunkCache {
            dir: dir.to_path_buf(),
            max_bytes,
            used: Arc::default(),
            measured: Arc::new((Mutex::new(false), Condvar::new())),
            files_hashed: AtomicU64::new(0),
            evicted: Arc::default(),
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
            files_hashed: AtomicU64::new(0),
            evicted: Arc::clone(&cache.evicted),
        };
        let spawned = std::thread::Builder::new()
            .name("sealvol-cache-measure".into())
            .spawn(move || {
                if let Ok((total, _)) = bg.scan() {
                    let used = bg.used.add(total);
                    if used > bg.max_bytes
                        && let Err(e) = bg.evict()
                    {
                        tracing::warn!("cache: {e}");
                    }
                }
                let (done, cv) = &*bg.measured;
                *crate::locks::lock(done) = true;
                cv.notify_all();
            });
        if let Err(e) = spawned {
            return Err(crate::error::Error::io("cannot start a thread", dir, e));
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
        self.path(h).exists()
    }

    /// The chunk, if cached and intact. A chunk that fails its hash is deleted.
    pub fn get(&self, h: &Hash) -> Option<Buffer> {
        let bytes = self.get_unchecked(h)?;
        if Hash::of(&bytes) != *h {
            tracing::warn!("cache: chunk {} is damaged; dropping it", h.hex());
            if fs::remove_file(self.path(h)).is_ok() {
                self.used.sub(bytes.len() as u64);
            }
            return None;
        }
        Some(bytes)
    }

    /// A chunk as stored, not hashed: for a caller that proves these bytes itself
    /// (the blocks of its file, `Chunks::fetch_for_proof` over `Tiers`), and when they fail asks
    /// `get` again, which drops a damaged copy.
    pub fn get_unchecked(&self, h: &Hash) -> Option<Buffer> {
        let p = self.path(h);
        let bytes = read_recycled(&p)?;
        // The mtime is the LRU clock every process shares; failing to bump it only
        // makes this chunk a little likelier to be evicted.
        if let Ok(f) = File::options().write(true).open(&p) {
            let _ = f.set_modified(SystemTime::now());
        }
        Some(bytes)
    }

    /// Stores a chunk: the caller has checked it against `h`, or proven it to be bytes
    /// of a file whose list names `h` there (`Chunks::fetch_for_proof` over `Tiers`). Either way
    /// `get` checks what it gives back, so a copy stored under a name a lying list gave
    /// it costs a miss, never wrong bytes. Concurrent puts of the
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
                let used = self.used.add(bytes.len() as u64);
                if used > self.max_bytes {
                    self.evict()?;
                }
                Ok(())
            }
            Err(e) => {
                let _ = fs::remove_file(&tmp);
                Err(crate::error::Error::io(
                    "cannot publish cache file",
                    &dest,
                    e,
                ))
            }
        }
    }

    /// Every cached chunk and whole file: total bytes and (last use, size, path), for
    /// eviction. A whole file's last use is its stamp's mtime, and its size counts the
    /// stamp's; a stamp whose file is gone is removed.
    #[allow(clippy::type_complexity)]
    fn scan(&self) -> Result<(u64, Vec<(SystemTime, u64, PathBuf)>)> {
        let mut entries = Vec::new();
        let mut stamps = std::collections::HashMap::new();
        for kind in ["chunks", "files"] {
            let root = self.dir.join(kind);
            let Ok(rd) = fs::read_dir(&root) else {
                continue;
            };
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
                Ok(()) => {
                    total -= size;
                    self.evicted.0.fetch_add(1, Ordering::Relaxed);
                    self.evicted.1.fetch_add(size, Ordering::Relaxed);
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => total -= size,
                Err(e) => return Err(crate::error::Error::io("cannot evict", &path, e)),
            }
            if path.starts_with(self.dir.join("files")) {
                let _ = fs::remove_file(stamp_path(&path));
            }
        }
        self.used.set(total);
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
        assert_eq!(&*other.get(&h).unwrap(), &b[..]);
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
        assert_eq!(&*c.get(&h).unwrap(), &b[..]);
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

    fn whole(c: &ChunkCache, seed: u32, len: usize) -> (Hash, Vec<u8>) {
        let (_, bytes) = chunk(seed, len);
        let h = Hash::of(&bytes);
        let pieces = bytes.chunks(4096).map(Ok::<_, crate::error::Error>);
        c.put_file(&h, pieces).unwrap();
        (h, bytes)
    }

    #[test]
    fn a_whole_file_is_checked_once_per_fill_not_once_per_process() {
        let dir = tempfile::tempdir().unwrap();
        let (h, bytes) = whole(&ChunkCache::open(dir.path(), 1 << 30).unwrap(), 3, 100_000);
        // Other processes (here: other instances) trust the check of the fill.
        for _ in 0..3 {
            let other = ChunkCache::open(dir.path(), 1 << 30).unwrap();
            let mut f = other.open_file(&h).unwrap();
            let mut got = Vec::new();
            std::io::Read::read_to_end(&mut f, &mut got).unwrap();
            assert_eq!(got, bytes);
            assert_eq!(other.files_hashed(), 0);
        }
        // A stamp that is not one (torn, edited) only costs a hash, then is rewritten.
        let stamp = stamp_path(&ChunkCache::open(dir.path(), 1 << 30).unwrap().file_path(&h));
        fs::write(&stamp, "garbage").unwrap();
        let c = ChunkCache::open(dir.path(), 1 << 30).unwrap();
        assert!(c.open_file(&h).is_some());
        assert_eq!(c.files_hashed(), 1);
        let c = ChunkCache::open(dir.path(), 1 << 30).unwrap();
        assert!(c.open_file(&h).is_some());
        assert_eq!(c.files_hashed(), 0, "the stamp was written again");
    }

    #[test]
    fn a_whole_file_changed_after_its_check_is_checked_again_and_dropped_if_bad() {
        let dir = tempfile::tempdir().unwrap();
        let c = ChunkCache::open(dir.path(), 1 << 30).unwrap();
        let (h, bytes) = whole(&c, 4, 100_000);
        let p = c.file_path(&h);
        let m = fs::metadata(&p).unwrap();
        // A tamperer who puts the mtime back still moves the change time.
        let mut bad = bytes.clone();
        bad[777] ^= 1;
        let mut perms = m.permissions();
        #[allow(clippy::permissions_set_readonly_false)]
        perms.set_readonly(false);
        fs::set_permissions(&p, perms).unwrap();
        fs::write(&p, &bad).unwrap();
        File::options()
            .write(true)
            .open(&p)
            .unwrap()
            .set_modified(m.modified().unwrap())
            .unwrap();
        let other = ChunkCache::open(dir.path(), 1 << 30).unwrap();
        assert!(
            other.open_file(&h).is_none(),
            "a changed file is not served"
        );
        assert_eq!(other.files_hashed(), 1);
        assert!(
            !p.exists() && !stamp_path(&p).exists(),
            "file and stamp dropped"
        );
        // Filled again, it is trusted again.
        let (h2, _) = whole(&other, 4, 100_000);
        assert_eq!(h2, h);
        let third = ChunkCache::open(dir.path(), 1 << 30).unwrap();
        assert!(third.open_file(&h).is_some());
        assert_eq!(third.files_hashed(), 0);
    }

    #[test]
    fn a_whole_files_last_use_is_its_stamp_and_eviction_takes_both() {
        let dir = tempfile::tempdir().unwrap();
        let c = ChunkCache::open(dir.path(), 1 << 30).unwrap();
        c.wait_measured();
        let (a, _) = whole(&c, 5, 50_000);
        let (b, _) = whole(&c, 6, 50_000);
        let old = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
        for h in [a, b] {
            let stamp = stamp_path(&c.file_path(&h));
            File::options()
                .write(true)
                .open(&stamp)
                .unwrap()
                .set_modified(old)
                .unwrap();
        }
        // Opening `a` makes it the most recent, without touching the file itself.
        let before = fs::metadata(c.file_path(&a)).unwrap().modified().unwrap();
        assert!(c.open_file(&a).is_some());
        assert_eq!(
            fs::metadata(c.file_path(&a)).unwrap().modified().unwrap(),
            before
        );
        let (total, _) = c.scan().unwrap();
        let small = ChunkCache::open(dir.path(), total - 1).unwrap();
        small.evict().unwrap();
        assert!(c.file_path(&a).exists(), "recently opened survives");
        assert!(!c.file_path(&b).exists() && !stamp_path(&c.file_path(&b)).exists());
        // A stamp left without its file goes at the next scan.
        let orphan = stamp_path(&c.file_path(&b));
        fs::write(&orphan, "x").unwrap();
        c.scan().unwrap();
        assert!(!orphan.exists());
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
                            assert_eq!(&got[..], &b[..]);
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
