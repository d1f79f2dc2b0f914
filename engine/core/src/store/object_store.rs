//! What every store of objects does (`ObjectStore`) and what it answers.

use std::path::Path;

use crate::digest::Hash;
use crate::error::Result;

impl Requests {
    pub fn total(&self) -> u64 {
        self.gets + self.puts + self.lists + self.heads + self.deletes
    }

    /// `total` per GiB of `bytes` (what was pushed or read).
    pub fn per_gib(&self, bytes: u64) -> f64 {
        self.total() as f64 / (bytes.max(1) as f64 / (1u64 << 30) as f64)
    }
}

/// Holds `ObjectStore::writers_lock` until dropped.
pub struct WriterGuard(#[allow(dead_code)] pub(crate) Box<dyn std::any::Any + Send + Sync>);

/// Requests a store made to its service since it was opened, and the bytes they
/// carried: object stores bill and throttle by request, so pushes and pulls report
/// them (`ObjectStore::requests`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Requests {
    pub gets: u64,
    pub puts: u64,
    pub lists: u64,
    pub heads: u64,
    pub deletes: u64,
    pub bytes_received: u64,
    pub bytes_sent: u64,
}

/// An opaque version of an object, for compare-and-swap (an S3 ETag, a content hash).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ETag(pub String);

/// One object, as a listing shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectInfo {
    pub key: String,
    pub size: u64,
    /// When it was last written, by the store's clock (S3: `LastModified`).
    pub modified: Option<std::time::SystemTime>,
}

/// One page of a listing, in key order; `next` is where the following page starts
/// (after that key), `None` on the last page.
#[derive(Debug, Clone, Default)]
pub struct Page {
    pub objects: Vec<ObjectInfo>,
    pub next: Option<String>,
}

/// Which file, as it was, a folder store read bytes from: its inode, size and the
/// times it was last changed. A file written since (damaged, repaired, replaced) has
/// another stamp; the same stamp means no one wrote to the file in between, as far as
/// the filesystem's clock can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Stamp {
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime_ns: i128,
    pub ctime_ns: i128,
}

pub trait ObjectStore: Send + Sync {
    /// The whole object, or `None` if it does not exist.
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>>;

    /// `len` bytes from `offset`; an error if the object is shorter. A missing object
    /// is `NotFound` (a bucket, the memory store) or an `Io` error of kind `NotFound` (a
    /// folder); callers take both alike.
    fn get_range(&self, key: &str, offset: u64, len: u64) -> Result<Vec<u8>>;

    /// `get_range` of `buf.len()` bytes into `buf`, for callers that recycle buffers;
    /// a store that cannot read into one hands back its own.
    fn get_range_into(&self, key: &str, offset: u64, buf: &mut Vec<u8>) -> Result<()> {
        *buf = self.get_range(key, offset, buf.len() as u64)?;
        Ok(())
    }

    /// `get_range_into` of bytes a reader needs for the file `file` (chunks its list
    /// names): a server checks that the caller's key may read that file and that the
    /// range holds its chunks; every other store reads the range.
    fn get_file_range_into(
        &self,
        key: &str,
        offset: u64,
        buf: &mut Vec<u8>,
        file: &Hash,
    ) -> Result<()> {
        let _ = file;
        self.get_range_into(key, offset, buf)
    }

    /// `get_range_into`, and what the object was when the bytes were read, where the
    /// store can say (`Stamp`): a reader that checked these bytes may take the same
    /// range under the same stamp as checked. `None` where it cannot (every store but
    /// a folder): then every read is checked.
    fn get_range_stamped_into(
        &self,
        key: &str,
        offset: u64,
        buf: &mut Vec<u8>,
    ) -> Result<Option<Stamp>> {
        self.get_range_into(key, offset, buf)?;
        Ok(None)
    }

    /// The object's size, or `None` if it does not exist.
    fn size(&self, key: &str) -> Result<Option<u64>>;

    /// Creates the object unless it exists. Returns false if it already existed, in which
    /// case nothing was written (content-addressed objects are then identical).
    fn put_if_absent(&self, key: &str, data: &[u8]) -> Result<bool>;

    /// Like `put_if_absent`, for a finished local file (a pack); the file is consumed.
    fn put_file_if_absent(&self, key: &str, file: &Path) -> Result<bool>;

    /// A fresh path for building a large object before `put_file_if_absent`, on the same
    /// file system as the store when it is local so that publishing is a rename.
    fn staging_path(&self) -> Result<std::path::PathBuf>;

    /// How many requests a caller may usefully keep in flight at once: one for a
    /// local directory, several for a remote service, whose latency then overlaps
    /// (packs a push publishes together, summaries a listing reads).
    fn concurrency(&self) -> usize {
        1
    }

    /// The object and its version, for a later `put_if_match`.
    fn get_versioned(&self, key: &str) -> Result<Option<(Vec<u8>, ETag)>>;

    /// Writes the object only if its current version is `expected` (`None`: only if it
    /// does not exist). Fails with `ErrorKind::Race` otherwise.
    fn put_if_match(&self, key: &str, data: &[u8], expected: Option<&ETag>) -> Result<()>;

    /// One page of the objects under `prefix` (which ends in `/`), recursively, in key
    /// order, starting after the key `after`. A backend pages as its service does (S3:
    /// 1,000 keys); a local directory answers in one page.
    fn list_page(&self, prefix: &str, after: Option<&str>) -> Result<Page>;

    /// Every object under `prefix`, in key order, page by page.
    fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>> {
        let mut out = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let page = self.list_page(prefix, after.as_deref())?;
            out.extend(page.objects);
            match page.next {
                Some(next) if after.as_deref() != Some(next.as_str()) => after = Some(next),
                _ => return Ok(out),
            }
        }
    }

    fn delete(&self, key: &str) -> Result<()>;

    /// Held while a process writes chunks and chunk lists (shared: any number of
    /// pushes and syncs at once) or rearranges them (exclusive: repair, which must not
    /// move a pack a push is about to name). Shared waits for an exclusive holder;
    /// exclusive fails at once if anyone holds it. Released when the guard drops or its
    /// process dies. A backend without locks returns no guard: repair on it must then
    /// run while nothing writes, and garbage collection's rounds (docs/GC.md) are what
    /// make it safe beside writers there.
    fn writers_lock(&self, _exclusive: bool) -> Result<Option<WriterGuard>> {
        Ok(None)
    }

    /// Removes staging files whose owner is gone (`owner_may_live`), never one a live
    /// process may still be writing; returns how many and their bytes. A backend with
    /// no staging area of its own has nothing to do.
    fn clean_staging(&self) -> Result<(u64, u64)> {
        Ok((0, 0))
    }

    /// The requests made so far, for a store that talks to a service; `None` for a
    /// local directory.
    fn requests(&self) -> Option<Requests> {
        None
    }

    /// Removes what killed writers left in the store itself, if it keeps anything a
    /// listing does not show (an object store's unfinished multipart uploads).
    /// Garbage collection calls it.
    fn clean_abandoned(&self) -> Result<()> {
        Ok(())
    }

    /// Writes the object whether or not it exists, atomically: a reader sees the old
    /// bytes or the new, never a mix. Only for objects whose every version says the
    /// same thing (a chunk list replaced by one naming healthy copies of its chunks).
    fn put(&self, key: &str, data: &[u8]) -> Result<()>;

    /// Moves an object to a new key that must not exist (quarantine). Not atomic on
    /// every backend: the copy is complete before the original goes, so a crash leaves
    /// both, never neither.
    fn move_object(&self, from: &str, to: &str) -> Result<()> {
        let bytes = self
            .get(from)?
            .ok_or_else(|| crate::error::Error::not_found(format!("no object {from}")))?;
        self.put_if_absent(to, &bytes)?;
        self.sync()?;
        self.delete(from)
    }

    /// The store's own clock, which `ObjectInfo::modified` is measured by: garbage
    /// collection compares object ages with it, never with a machine's clock (an
    /// object store service gives its time; a local directory is this machine's).
    fn now(&self) -> Result<std::time::SystemTime> {
        Ok(std::time::SystemTime::now())
    }

    /// A write barrier: every object written before it is durable when it returns.
    /// Pushes call it before publishing a manifest, so a power cut cannot leave a
    /// version whose files were never written to disk.
    fn sync(&self) -> Result<()>;
}

/// Runs `f` over `items` with up to `width` calls at once, results in order: a
/// remote store answers many small reads far sooner side by side.
pub(crate) fn in_parallel<T: Sync, R: Send>(
    items: &[T],
    width: usize,
    f: impl Fn(&T) -> Result<R> + Sync,
) -> Result<Vec<R>> {
    if width <= 1 || items.len() <= 1 {
        return items.iter().map(&f).collect();
    }
    let per = items.len().div_ceil(width);
    std::thread::scope(|s| {
        let handles: Vec<_> = items
            .chunks(per)
            .map(|part| {
                let f = &f;
                s.spawn(move || part.iter().map(f).collect::<Result<Vec<R>>>())
            })
            .collect();
        let mut out = Vec::with_capacity(items.len());
        for h in handles {
            let part = h.join().map_err(|_| {
                crate::error::Error::new(crate::error::ErrorKind::Io, "a reader panicked")
            })??;
            out.extend(part);
        }
        Ok(out)
    })
}
