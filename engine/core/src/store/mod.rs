//! Where repository objects live. Every backend (the local directory now, S3-compatible
//! buckets later) offers the same small set of operations, and the two that make the
//! repository safe for many writers: create-if-absent for immutable objects and
//! compare-and-swap for tags.
//!
//! The trait is shaped by what an object store can do, so that an S3 backend maps each
//! call to one request: ranged reads; listings that come a page at a time, in key order,
//! with sizes; conditional writes as the only coordination (`If-None-Match: *` for
//! `put_if_absent`, `If-Match` on the ETag for `put_if_match`). Calls take `&self` and
//! may run from many threads at once: a remote backend keeps many requests in flight.
//! Only the repository (`repo.rs`, `registry.rs`) calls a store; everything else asks
//! the repository for typed objects.

mod local;

use std::path::Path;

pub use local::LocalStore;

/// A file name no other writer in any process will pick: the pid and a counter shared
/// by everything in this process (several stores or caches may share a directory).
pub fn unique_temp_name() -> String {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{}-{n}.tmp", std::process::id())
}

use crate::error::Result;

/// An opaque version of an object, for compare-and-swap (an S3 ETag, a content hash).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ETag(pub String);

/// One object, as a listing shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectInfo {
    pub key: String,
    pub size: u64,
}

/// One page of a listing, in key order; `next` is where the following page starts
/// (after that key), `None` on the last page.
#[derive(Debug, Clone, Default)]
pub struct Page {
    pub objects: Vec<ObjectInfo>,
    pub next: Option<String>,
}

pub trait ObjectStore: Send + Sync {
    /// The whole object, or `None` if it does not exist.
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>>;

    /// `len` bytes from `offset`; an error if the object is shorter.
    fn get_range(&self, key: &str, offset: u64, len: u64) -> Result<Vec<u8>>;

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

    /// A write barrier: every object written before it is durable when it returns.
    /// Pushes call it before publishing a manifest, so a power cut cannot leave a
    /// version whose files were never written to disk.
    fn sync(&self) -> Result<()>;
}
