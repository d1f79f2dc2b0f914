//! A store in memory: the stand-in for an object store in the engine's own tests.
//!
//! It keeps the promises every backend keeps (create-if-absent, compare-and-swap on
//! an ETag of the bytes, ranged reads that fail when the object is shorter, listings in
//! key order with sizes and times, paged like a service's) and none of their costs, so
//! a test of push, gc, trash or tags runs in milliseconds and sees every request
//! (`requests`). Its clock is its own and moves only when a test says so (`advance`):
//! garbage collection's grace periods are tested without sleeping. Put it under
//! `Faulty` (`faults.rs`) to make it fail on cue.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use super::object_store::{ETag, ObjectInfo, ObjectStore, Page, Requests};
use super::staging::unique_temp_name;
use super::traffic::Traffic;
use crate::error::{Error, ErrorKind, IoContext, Result};

/// Keys a listing page holds at most, as S3 pages: a listing of more is paged, so the
/// paging of every caller is exercised.
const PAGE: usize = 1000;

struct Stored {
    bytes: Vec<u8>,
    modified: SystemTime,
}

pub struct MemoryStore {
    objects: Mutex<BTreeMap<String, Stored>>,
    /// How far the store's clock is ahead of this machine's (`advance`).
    ahead: Mutex<Duration>,
    staging: PathBuf,
    traffic: Traffic,
}

impl MemoryStore {
    /// An empty store. Packs are built in a private folder under the system's
    /// temporary directory, removed when the store is dropped.
    pub fn new() -> Result<MemoryStore> {
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let staging =
            std::env::temp_dir().join(format!("sealvol-memory-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&staging).ctx("cannot create a staging folder", &staging)?;
        Ok(MemoryStore {
            objects: Mutex::new(BTreeMap::new()),
            ahead: Mutex::new(Duration::ZERO),
            staging,
            traffic: Traffic::default(),
        })
    }

    /// Moves the store's clock forward: objects written before look `by` older.
    pub fn advance(&self, by: Duration) {
        *crate::locks::lock(&self.ahead) += by;
    }

    /// Every key, in order (for a test's own checks; not counted as a request).
    pub fn keys(&self) -> Vec<String> {
        crate::locks::lock(&self.objects).keys().cloned().collect()
    }

    /// Replaces an object's bytes behind the repository's back (damage, a crafted
    /// object); not counted as a request.
    pub fn overwrite(&self, key: &str, bytes: &[u8]) {
        let stored = self.stored(bytes);
        crate::locks::lock(&self.objects).insert(key.to_string(), stored);
    }

    fn clock(&self) -> SystemTime {
        SystemTime::now() + *crate::locks::lock(&self.ahead)
    }

    fn check(key: &str) -> Result<()> {
        if crate::paths::is_clean_relative(key) {
            Ok(())
        } else {
            Err(Error::invalid(format!("invalid object key {key:?}")))
        }
    }

    /// An object as written now, by the store's clock.
    fn stored(&self, bytes: &[u8]) -> Stored {
        Stored {
            bytes: bytes.to_vec(),
            modified: self.clock(),
        }
    }
}

impl Drop for MemoryStore {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.staging);
    }
}

fn etag_of(data: &[u8]) -> ETag {
    ETag(blake3::hash(data).to_hex()[..32].to_string())
}

impl ObjectStore for MemoryStore {
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        Self::check(key)?;
        self.traffic.get();
        let got = crate::locks::lock(&self.objects)
            .get(key)
            .map(|s| s.bytes.clone());
        if let Some(b) = &got {
            self.traffic.received(b.len() as u64);
        }
        Ok(got)
    }

    fn get_range(&self, key: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
        Self::check(key)?;
        self.traffic.get();
        let objects = crate::locks::lock(&self.objects);
        let s = objects
            .get(key)
            .ok_or_else(|| Error::not_found(format!("no object {key}")))?;
        let end = offset
            .checked_add(len)
            .filter(|&e| e <= s.bytes.len() as u64);
        let Some(end) = end else {
            return Err(Error::corrupt(format!(
                "{key} is shorter than expected (wanted {len} bytes at {offset})"
            )));
        };
        self.traffic.received(len);
        Ok(s.bytes[offset as usize..end as usize].to_vec())
    }

    fn size(&self, key: &str) -> Result<Option<u64>> {
        Self::check(key)?;
        self.traffic.head();
        Ok(crate::locks::lock(&self.objects)
            .get(key)
            .map(|s| s.bytes.len() as u64))
    }

    fn put_if_absent(&self, key: &str, data: &[u8]) -> Result<bool> {
        Self::check(key)?;
        let mut objects = crate::locks::lock(&self.objects);
        self.traffic.put(data.len() as u64);
        if objects.contains_key(key) {
            return Ok(false);
        }
        objects.insert(key.to_string(), self.stored(data));
        Ok(true)
    }

    fn put_file_if_absent(&self, key: &str, file: &Path) -> Result<bool> {
        let bytes = std::fs::read(file).ctx("cannot read", file)?;
        let created = self.put_if_absent(key, &bytes)?;
        let _ = std::fs::remove_file(file);
        Ok(created)
    }

    fn staging_path(&self) -> Result<PathBuf> {
        Ok(self.staging.join(unique_temp_name()))
    }

    fn concurrency(&self) -> usize {
        // Several requests at once, as a service takes them: the paths that overlap
        // requests are exercised too.
        4
    }

    fn get_versioned(&self, key: &str) -> Result<Option<(Vec<u8>, ETag)>> {
        Ok(self.get(key)?.map(|b| {
            let e = etag_of(&b);
            (b, e)
        }))
    }

    fn put_if_match(&self, key: &str, data: &[u8], expected: Option<&ETag>) -> Result<()> {
        Self::check(key)?;
        let mut objects = crate::locks::lock(&self.objects);
        self.traffic.put(data.len() as u64);
        let current = objects.get(key).map(|s| etag_of(&s.bytes));
        if current.as_ref() != expected {
            return Err(Error::new(
                ErrorKind::Race,
                format!("{key} was changed by someone else at the same time"),
            )
            .hint("look at the current state and try again"));
        }
        objects.insert(key.to_string(), self.stored(data));
        Ok(())
    }

    fn list_page(&self, prefix: &str, after: Option<&str>) -> Result<Page> {
        self.traffic.list();
        let objects = crate::locks::lock(&self.objects);
        let start = match after {
            Some(a) if a >= prefix => std::ops::Bound::Excluded(a.to_string()),
            _ => std::ops::Bound::Included(prefix.to_string()),
        };
        let mut page: Vec<ObjectInfo> = objects
            .range((start, std::ops::Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(prefix))
            .take(PAGE + 1)
            .map(|(k, s)| ObjectInfo {
                key: k.clone(),
                size: s.bytes.len() as u64,
                modified: Some(s.modified),
            })
            .collect();
        let next = match page.len() > PAGE {
            true => {
                page.truncate(PAGE);
                page.last().map(|o| o.key.clone())
            }
            false => None,
        };
        Ok(Page {
            objects: page,
            next,
        })
    }

    fn delete(&self, key: &str) -> Result<()> {
        Self::check(key)?;
        self.traffic.delete();
        crate::locks::lock(&self.objects).remove(key);
        Ok(())
    }

    fn requests(&self) -> Option<Requests> {
        Some(self.traffic.counts())
    }

    fn put(&self, key: &str, data: &[u8]) -> Result<()> {
        Self::check(key)?;
        self.traffic.put(data.len() as u64);
        let stored = self.stored(data);
        crate::locks::lock(&self.objects).insert(key.to_string(), stored);
        Ok(())
    }

    fn now(&self) -> Result<SystemTime> {
        Ok(self.clock())
    }

    fn sync(&self) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_promises_of_a_store() {
        let s = MemoryStore::new().unwrap();
        assert!(s.put_if_absent("a/1", b"one").unwrap());
        assert!(!s.put_if_absent("a/1", b"other").unwrap());
        assert_eq!(s.get("a/1").unwrap().unwrap(), b"one");
        assert_eq!(s.get_range("a/1", 1, 2).unwrap(), b"ne");
        assert_eq!(
            s.get_range("a/1", 2, 2).unwrap_err().kind(),
            ErrorKind::Corrupt
        );
        assert_eq!(s.size("a/2").unwrap(), None);
        let (_, tag) = s.get_versioned("a/1").unwrap().unwrap();
        s.put_if_match("a/1", b"two", Some(&tag)).unwrap();
        assert_eq!(
            s.put_if_match("a/1", b"three", Some(&tag))
                .unwrap_err()
                .kind(),
            ErrorKind::Race
        );
        assert_eq!(
            s.put_if_match("a/new", b"x", Some(&tag))
                .unwrap_err()
                .kind(),
            ErrorKind::Race
        );
        s.put_if_match("a/new", b"x", None).unwrap();
        assert!(s.get("../x").is_err(), "an unclean key is refused");
    }

    #[test]
    fn listings_come_in_pages_in_key_order() {
        let s = MemoryStore::new().unwrap();
        for i in (0..2500).rev() {
            s.put(&format!("p/{i:05}"), b"x").unwrap();
        }
        s.put("q/0", b"x").unwrap();
        let first = s.list_page("p/", None).unwrap();
        assert_eq!(first.objects.len(), 1000);
        assert_eq!(first.next.as_deref(), Some("p/00999"));
        let all = s.list("p/").unwrap();
        assert_eq!(all.len(), 2500);
        assert!(all.windows(2).all(|w| w[0].key < w[1].key));
        assert_eq!(s.list("").unwrap().len(), 2501);
    }

    #[test]
    fn its_clock_moves_when_told() {
        let s = MemoryStore::new().unwrap();
        s.put("k", b"x").unwrap();
        let written = s.list("").unwrap()[0].modified.unwrap();
        s.advance(Duration::from_secs(3600));
        let age = s.now().unwrap().duration_since(written).unwrap();
        assert!(age >= Duration::from_secs(3600), "{age:?}");
    }
}
