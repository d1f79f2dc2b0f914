//! The filesystem core of a mount: lookup, getattr, readdir, readlink, open, read,
//! release and statfs over one sealed version, with errors as errno values. Plain Rust
//! over the engine; tests call it without a kernel, and `fuse.rs` only translates.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime};

use sealvol_core::digest::Hash;
use sealvol_core::error::{ErrorKind, Result};

use super::layout::{Layout, Layouts};
use super::memo::Memo;
use super::profile::Recorder;
use super::readahead::{FileRef, Order, Prefetcher, Stream};
use super::reading::Reading;
use super::tree::{Child, ChildKind, Dir, NodeKind, ROOT, Tree};
use sealvol_core::profile::Step;
use sealvol_core::read::{ChunkBytes, Chunks, Tiers, add};
use sealvol_core::recycled::{self, Buffer};

/// An errno with the reason, for the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Errno(pub i32);

/// Why a read failed: an errno of the filesystem's own (a handle not open), or the
/// engine's error once retries are done (logged; the kernel is answered `EIO`, the
/// Python package raises it with its words).
#[derive(Debug)]
pub enum ReadError {
    Errno(Errno),
    Engine(sealvol_core::Error),
}

impl From<ReadError> for Errno {
    fn from(e: ReadError) -> Errno {
        match e {
            ReadError::Errno(e) => e,
            ReadError::Engine(_) => Errno::IO,
        }
    }
}

impl Errno {
    pub const NOENT: Errno = Errno(libc::ENOENT);
    pub const NOTDIR: Errno = Errno(libc::ENOTDIR);
    pub const ISDIR: Errno = Errno(libc::EISDIR);
    pub const IO: Errno = Errno(libc::EIO);
    pub const ROFS: Errno = Errno(libc::EROFS);
    pub const INVAL: Errno = Errno(libc::EINVAL);
    pub const BADF: Errno = Errno(libc::EBADF);
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Dir,
    File,
    Symlink,
}

#[derive(Debug, Clone, Copy)]
pub struct Attr {
    pub ino: u64,
    pub kind: Kind,
    pub size: u64,
    /// Permission bits: read-only for everyone, execute where the version says so.
    pub perm: u16,
    pub nlink: u32,
    pub mtime: SystemTime,
}

#[derive(Debug, Clone)]
pub struct DirEntry {
    pub ino: u64,
    pub kind: Kind,
    pub name: String,
    /// The offset to pass to `readdir` to continue after this entry.
    pub next: u64,
}

#[derive(Debug, Clone, Copy)]
pub struct Statfs {
    pub blocks: u64,
    pub files: u64,
    pub block_size: u32,
    pub name_max: u32,
}

/// Bytes a read returns: a slice of one chunk when it fits in one, else a copy.
pub enum ReadData {
    Slice(ChunkBytes, usize, usize),
    Owned(Buffer),
}

impl AsRef<[u8]> for ReadData {
    fn as_ref(&self) -> &[u8] {
        match self {
            ReadData::Slice(b, s, e) => &b[*s..*e],
            ReadData::Owned(v) => v,
        }
    }
}

struct Handle {
    ino: u64,
    hash: Hash,
    layout: Arc<Layout>,
    stream: Mutex<Stream>,
    /// Bytes this handle has read: a file read whole is worth keeping whole.
    read: AtomicU64,
}

/// What `open` gives the adapter: a handle for reads through the tiers, and, when the
/// whole file sits verified in the node cache, that file for the kernel to read
/// directly (FUSE passthrough).
#[derive(Debug)]
pub struct Opened {
    pub fh: u64,
    pub backing: Option<std::fs::File>,
}

#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Bytes of memory the memory tier may hold: chunks read ahead or recently, and
    /// read-ahead fetches under way (`--prefetch-memory`).
    pub memory: usize,
    /// The largest read-ahead window of one open file.
    pub max_window: u64,
    pub prefetch_threads: usize,
    /// Bytes one prefetch job asks for: the size of the range reads a sequential
    /// reader turns into.
    pub prefetch_piece: u64,
    /// The read-ahead window of a file read from its start.
    pub first_window: u64,
    /// Files at least this large, once read whole, are kept whole in the node cache
    /// and served by passthrough afterwards. Smaller files gain little from it.
    pub passthrough_min: u64,
    /// How long a read waits for its bytes (retrying a failing origin) before it fails
    /// with `EIO` (`--read-timeout`).
    pub read_timeout: Duration,
}

/// The read timeout when none is given: long enough to ride out an origin's bad
/// minute, since a failed read under a memory map kills the loader with SIGBUS.
pub const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(60);

impl Default for Limits {
    fn default() -> Self {
        Limits {
            memory: 96 << 20,
            max_window: 32 << 20,
            prefetch_threads: 2,
            prefetch_piece: 4 << 20,
            first_window: crate::readahead::MIN_WINDOW,
            passthrough_min: 16 << 20,
            read_timeout: DEFAULT_READ_TIMEOUT,
        }
    }
}

/// The smallest memory bound a mount takes: below it, read-ahead could not hold one
/// range read of a remote origin beside the chunks readers are in.
pub const MIN_MEMORY: u64 = 16 << 20;

impl Limits {
    /// The memory bound when none is given: 1/32 of the node's RAM, between 64 MiB and
    /// 512 MiB, so read-ahead never makes a node swap or kills it for memory.
    pub fn default_memory() -> u64 {
        (physical_memory() / 32).clamp(64 << 20, 512 << 20)
    }

    /// Checks a memory bound the user gave (`--prefetch-memory`).
    pub fn check_memory(bytes: u64) -> Result<usize> {
        let ram = physical_memory();
        if bytes < MIN_MEMORY {
            return Err(sealvol_core::Error::invalid(format!(
                "--prefetch-memory of {} KiB is below the smallest bound, 16 MiB",
                bytes >> 10
            ))
            .hint("give at least 16M; the default is 1/32 of RAM (64M to 512M)"));
        }
        if bytes > ram / 2 {
            return Err(sealvol_core::Error::invalid(format!(
                "--prefetch-memory of {} MiB is more than half of this node's {} MiB of RAM",
                bytes >> 20,
                ram >> 20
            ))
            .hint("read-ahead would compete with the model for memory; give less, like 1G"));
        }
        Ok(bytes as usize)
    }

    /// For an origin that answers `concurrency` requests at once: a remote one (an
    /// object store) is read with more, larger range requests in flight, since each
    /// costs a round trip and the service's own per-request work.
    pub fn for_origin(concurrency: usize) -> Limits {
        match concurrency {
            0 | 1 => Limits::default(),
            n => Limits {
                // A window of two range reads ahead (a quarter of the memory).
                memory: 512 << 20,
                max_window: 2 * sealvol_core::read::REMOTE_MAX_RUN,
                prefetch_threads: n.max(2),
                prefetch_piece: sealvol_core::read::REMOTE_MAX_RUN,
                first_window: sealvol_core::read::REMOTE_MAX_RUN,
                ..Limits::default()
            },
        }
    }
}

pub struct VolumeFs {
    tree: Tree,
    mtime: SystemTime,
    tiers: Arc<Tiers>,
    memo: Arc<Memo>,
    max_window: u64,
    first_window: u64,
    prefetcher: Prefetcher,
    /// The order in which readers first asked for chunks (a read profile to save).
    recorder: Recorder,
    /// Chunk lists are loaded on first open and shared while anything holds them.
    layouts: Arc<Layouts>,
    handles: RwLock<HashMap<u64, Arc<Handle>>>,
    next_fh: AtomicU64,
    passthrough_min: u64,
    read_timeout: Duration,
    /// Whole files being written to the node cache now.
    keeping: Arc<Mutex<std::collections::HashSet<Hash>>>,
}

impl VolumeFs {
    /// The filesystem of a version whose entries are `tree`, sealed at `created`, its
    /// small files in `small`'s packs.
    pub fn new(
        tree: Tree,
        created: SystemTime,
        small: sealvol_core::small::SmallFiles,
        tiers: Arc<Tiers>,
        limits: Limits,
    ) -> Result<VolumeFs> {
        let mtime = created;
        let memo = Arc::new(Memo::new(limits.memory));
        tiers
            .counters
            .memory_bound
            .store(limits.memory as u64, Ordering::Relaxed);
        let layouts = Arc::new(Layouts::new(small));
        let prefetcher = Prefetcher::start(
            limits.prefetch_threads,
            limits.prefetch_piece,
            Arc::clone(&memo),
            Arc::clone(&tiers),
            Arc::clone(&layouts),
        );
        Ok(VolumeFs {
            tree,
            mtime,
            tiers,
            memo,
            // A window larger than a quarter of memory would evict itself before use.
            max_window: limits.max_window.min(limits.memory as u64 / 4),
            first_window: limits.first_window,
            prefetcher,
            recorder: Recorder::default(),
            layouts,
            handles: RwLock::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
            passthrough_min: limits.passthrough_min,
            read_timeout: limits.read_timeout,
            keeping: Default::default(),
        })
    }

    pub fn tiers(&self) -> &Tiers {
        &self.tiers
    }

    #[cfg(test)]
    pub(crate) fn memo(&self) -> &Memo {
        &self.memo
    }

    pub fn tree(&self) -> &Tree {
        &self.tree
    }

    pub fn getattr(&self, ino: u64) -> Result<Attr, Errno> {
        let node = self.tree.get(ino).ok_or(Errno::NOENT)?;
        Ok(match &node.kind {
            NodeKind::Dir(dir) => Attr {
                ino,
                kind: Kind::Dir,
                size: 0,
                perm: 0o555,
                nlink: 2 + self
                    .children(ino, dir)?
                    .iter()
                    .filter(|c| c.kind == ChildKind::Dir)
                    .count() as u32,
                mtime: self.mtime,
            },
            NodeKind::File { size, exec, .. } => Attr {
                ino,
                kind: Kind::File,
                size: *size,
                perm: if *exec { 0o555 } else { 0o444 },
                nlink: 1,
                mtime: self.mtime,
            },
            NodeKind::Symlink { entry } => Attr {
                ino,
                kind: Kind::Symlink,
                size: self.tree.target(*entry).len() as u64,
                perm: 0o777,
                nlink: 1,
                mtime: self.mtime,
            },
        })
    }

    /// A directory's children, worked out on first use; a version that contradicts
    /// itself there (a path both a file and a directory) fails with `EIO`, logged.
    fn children(&self, ino: u64, dir: &Dir) -> Result<Arc<Vec<Child>>, Errno> {
        self.tree.children(ino, dir).map_err(|e| {
            add(&self.tiers.counters.errors, 1);
            tracing::error!("{e}");
            Errno::IO
        })
    }

    pub fn lookup(&self, parent: u64, name: &[u8]) -> Result<Attr, Errno> {
        let node = self.tree.get(parent).ok_or(Errno::NOENT)?;
        let NodeKind::Dir(dir) = &node.kind else {
            return Err(Errno::NOTDIR);
        };
        let children = self.children(parent, dir)?;
        let i = children
            .binary_search_by(|c| c.name.as_bytes().cmp(name))
            .map_err(|_| Errno::NOENT)?;
        self.getattr(children[i].ino)
    }

    /// Entries from `offset` on, `.` and `..` first. Offsets are positions, stable for
    /// the life of the mount because the version never changes. Lazy: the kernel asks
    /// for a page at a time, and a large directory must not be rebuilt for each page.
    pub fn readdir(&self, ino: u64, offset: u64) -> Result<impl Iterator<Item = DirEntry>, Errno> {
        let node = self.tree.get(ino).ok_or(Errno::NOENT)?;
        let NodeKind::Dir(dir) = &node.kind else {
            return Err(Errno::NOTDIR);
        };
        let children = self.children(ino, dir)?;
        let parent = if ino == ROOT { ROOT } else { node.parent };
        let end = 2 + children.len() as u64;
        Ok((offset.min(end)..end).map(move |k| {
            let (name, ino, kind) = match k {
                0 => (".".to_string(), ino, Kind::Dir),
                1 => ("..".to_string(), parent, Kind::Dir),
                _ => {
                    let c = &children[k as usize - 2];
                    let kind = match c.kind {
                        ChildKind::Dir => Kind::Dir,
                        ChildKind::File => Kind::File,
                        ChildKind::Symlink => Kind::Symlink,
                    };
                    (c.name.clone(), c.ino, kind)
                }
            };
            DirEntry {
                ino,
                kind,
                name,
                next: k + 1,
            }
        }))
    }

    pub fn readlink(&self, ino: u64) -> Result<&[u8], Errno> {
        match self.tree.get(ino).ok_or(Errno::NOENT)?.kind {
            NodeKind::Symlink { entry } => Ok(self.tree.target(entry).as_bytes()),
            _ => Err(Errno::INVAL),
        }
    }

    /// Opens a file for reading; asking for write access gets `EROFS`. The chunk list
    /// is loaded here, on first open, not at mount time.
    pub fn open(&self, ino: u64, flags: i32) -> Result<Opened, Errno> {
        self.open_explained(ino, flags).map_err(Errno::from)
    }

    /// `open`, failing with the engine's own error rather than `EIO`.
    pub fn open_explained(&self, ino: u64, flags: i32) -> Result<Opened, ReadError> {
        if flags & libc::O_ACCMODE != libc::O_RDONLY || flags & libc::O_TRUNC != 0 {
            return Err(ReadError::Errno(Errno::ROFS));
        }
        let node = self.tree.get(ino).ok_or(ReadError::Errno(Errno::NOENT))?;
        let layout = self.file_layout(ino)?;
        let (hash, size) = (layout.hash, layout.obj.size);
        let tensors = matches!(node.kind, NodeKind::File { tensors: true, .. });
        if tensors {
            self.prefetcher.plan_tensors(
                FileRef { hash, size },
                &self.sibling_tensors(node.parent, &hash),
            );
        }
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        self.handles
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(
                fh,
                Arc::new(Handle {
                    ino,
                    hash,
                    layout,
                    stream: Mutex::new(Stream::starting_at(self.first_window)),
                    read: AtomicU64::new(0),
                }),
            );
        let backing = match self.tiers.cache() {
            Some(cache) if size >= self.passthrough_min && size > 0 => cache.open_file(&hash),
            _ => None,
        };
        Ok(Opened { fh, backing })
    }

    /// The chunk list of file `ino`, loaded (and shared) as `open` loads it, on first
    /// use; no handle is opened, so nothing is read ahead: for a reader of a few ranges
    /// of its own choosing (the Python package's `tensors()`).
    pub fn file_layout(&self, ino: u64) -> Result<Arc<Layout>, ReadError> {
        let node = self.tree.get(ino).ok_or(ReadError::Errno(Errno::NOENT))?;
        let (size, hash) = match &node.kind {
            NodeKind::File { size, hash, .. } => (*size, *hash),
            NodeKind::Dir(_) => return Err(ReadError::Errno(Errno::ISDIR)),
            NodeKind::Symlink { .. } => return Err(ReadError::Errno(Errno::INVAL)),
        };
        self.patiently(
            || format!("open of {}", self.tree.path_of(ino)),
            || self.layout(&hash, size),
        )
        .map_err(ReadError::Engine)
    }

    /// The chunk list of an open handle's file.
    pub fn layout_of(&self, fh: u64) -> Option<Arc<Layout>> {
        let handles = self.handles.read().unwrap_or_else(|p| p.into_inner());
        handles.get(&fh).map(|h| Arc::clone(&h.layout))
    }

    /// The adapter handed this open to the kernel.
    pub fn note_passthrough(&self) {
        add(&self.tiers.counters.passthrough_opens, 1);
    }

    fn layout(&self, hash: &Hash, size: u64) -> Result<Arc<Layout>> {
        self.layouts.get(self.tiers.repo(), hash, size)
    }

    /// The other `.safetensors` files of directory `dir`, those after `hash` in name
    /// order first (the order loaders open shards in), at most 64.
    fn sibling_tensors(&self, dir: u64, hash: &Hash) -> Vec<FileRef> {
        let Some(node) = self.tree.get(dir) else {
            return Vec::new();
        };
        let NodeKind::Dir(d) = &node.kind else {
            return Vec::new();
        };
        let Ok(children) = self.tree.children(dir, d) else {
            return Vec::new();
        };
        let files: Vec<FileRef> = children
            .iter()
            .filter(|c| c.kind == ChildKind::File && c.name.ends_with(".safetensors"))
            .filter_map(|c| match self.tree.get(c.ino)?.kind {
                NodeKind::File { size, hash, .. } => Some(FileRef { hash, size }),
                _ => None,
            })
            .collect();
        let at = files
            .iter()
            .position(|f| f.hash == *hash)
            .map_or(0, |i| i + 1);
        files[at..]
            .iter()
            .chain(&files[..at])
            .filter(|f| f.hash != *hash)
            .take(64)
            .copied()
            .collect()
    }

    pub fn release(&self, fh: u64) {
        let h = self
            .handles
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&fh);
        if let Some(h) = h {
            self.maybe_keep_whole(&h);
        }
    }

    /// A large file read whole through the tiers is written whole into the node cache,
    /// in the background, so later opens can be passed through to the kernel.
    fn maybe_keep_whole(&self, h: &Handle) {
        let size = h.layout.obj.size;
        let Some(cache) = self.tiers.cache() else {
            return;
        };
        if size < self.passthrough_min
            || h.read.load(Ordering::Relaxed) < size
            || size > cache.max_bytes() / 4
            || cache.has_file(&h.hash)
            || !sealvol_core::lock(&self.keeping).insert(h.hash)
        {
            return;
        }
        let (tiers, layout, hash, keeping) = (
            Arc::clone(&self.tiers),
            Arc::clone(&h.layout),
            h.hash,
            Arc::clone(&self.keeping),
        );
        let _ = std::thread::Builder::new()
            .name("sealvol-keep-file".into())
            .spawn(move || {
                let quiet = sealvol_core::read::Counters::default();
                let n = layout.len();
                let runs = (0..n).step_by(32).map(|s| s..(s + 32).min(n));
                let chunks = runs.flat_map(|r| {
                    // Only while readers are idle: on a busy node this copy would halve
                    // the speed of the reads it is meant to speed up later.
                    wait_until_idle(&tiers.counters);
                    match tiers.fetch_for_keeping(&layout.obj, r, &quiet) {
                        Ok(v) => v.into_iter().map(Ok).collect::<Vec<_>>(),
                        Err(e) => vec![Err(e)],
                    }
                });
                if let Some(cache) = tiers.cache() {
                    match cache.put_file(&hash, chunks) {
                        Ok(()) => add(&tiers.counters.files_cached, 1),
                        Err(e) => tracing::warn!("cannot keep file {} whole: {e}", hash.hex()),
                    }
                }
                sealvol_core::lock(&keeping).remove(&hash);
            });
    }

    pub fn open_handles(&self) -> usize {
        self.handles.read().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// The counters a mount publishes.
    pub fn stats(&self) -> sealvol_core::read::TierStats {
        sealvol_core::read::TierStats {
            prefetch_pending: self.prefetch_pending() as u64,
            process_peak: resident_peak(),
            ..self.tiers().counters.snapshot()
        }
    }

    /// Up to `size` bytes at `offset`; fewer only at the end of the file. A chunk that
    /// cannot be fetched intact fails the read with `EIO`, never with wrong bytes.
    pub fn read(&self, fh: u64, offset: u64, size: u32) -> Result<ReadData, Errno> {
        self.read_explained(fh, offset, size).map_err(Errno::from)
    }

    /// `read`, failing with the engine's own error rather than `EIO`.
    pub fn read_explained(&self, fh: u64, offset: u64, size: u32) -> Result<ReadData, ReadError> {
        let started = Instant::now();
        let result = self.read_at(fh, offset, size);
        self.tiers.counters.read_latency.observe(started.elapsed());
        result
    }

    fn read_at(&self, fh: u64, offset: u64, size: u32) -> Result<ReadData, ReadError> {
        let handle = self
            .handles
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&fh)
            .cloned()
            .ok_or(ReadError::Errno(Errno::BADF))?;
        let layout = &handle.layout;
        let file_size = layout.obj.size;
        let end = offset.saturating_add(size as u64).min(file_size);
        let counters = &self.tiers.counters;
        add(&counters.reads, 1);
        counters
            .last_read_ms
            .store(sealvol_core::read::now_ms(), Ordering::Relaxed);
        if offset >= end {
            return Ok(ReadData::Owned(Vec::new().into()));
        }
        let first = layout.chunk_at(offset);
        let last = layout.chunk_at(end - 1) + 1;
        let (prefetch, onward) = {
            let mut stream = sealvol_core::lock(&handle.stream);
            let onward = stream.continues(offset);
            (
                stream.on_read(layout, offset, end - offset, self.max_window),
                onward,
            )
        };
        self.recorder.note(layout, first..last);
        // A file a plan reads ahead needs no stream read-ahead on top.
        let planned = self.prefetcher.note_read(&layout.hash, first..last);
        if planned.is_none() && !prefetch.is_empty() {
            self.prefetcher.ahead(layout, prefetch);
        }
        // Whether the chunk after this read is the next one asked for: a reader that
        // streams on, unless a plan has seen it follow another order (by name).
        let onward = onward && planned.is_none_or(|o| o == Order::Offset);
        let what = || {
            format!(
                "read of {} at offset {offset} ({} bytes)",
                self.tree.path_of(handle.ino),
                end - offset
            )
        };
        let reading = Reading {
            tiers: &self.tiers,
            memo: &self.memo,
            layout,
            end,
            onward,
        };
        let chunks = &self
            .patiently(what, || {
                reading.fetch_proving(&layout.obj, first..last, offset..end)
            })
            .map_err(ReadError::Engine)?;
        add(&counters.bytes_served, end - offset);
        handle.read.fetch_add(end - offset, Ordering::Relaxed);
        let base = layout.start_of(first);
        if chunks.len() == 1 {
            let s = (offset - base) as usize;
            let e = (end - base) as usize;
            return Ok(ReadData::Slice(chunks[0].clone(), s, e));
        }
        // A reply across chunks is copied into a recycled buffer: a fresh one per read
        // faulted its pages in first.
        let mut out = recycled::take((end - offset) as usize);
        let (mut at, mut put) = (base, 0);
        for c in chunks {
            let c_end = at + c.len() as u64;
            let s = (offset.max(at) - at) as usize;
            let e = (end.min(c_end) - at) as usize;
            out.as_mut_vec()[put..put + e - s].copy_from_slice(&c[s..e]);
            put += e - s;
            at = c_end;
        }
        Ok(ReadData::Owned(out))
    }

    /// Runs `op`, which needs the origin, for a reader: a failure that may pass (a
    /// timeout, a reset, a 5xx) is tried again until the read timeout; then, or at once
    /// for anything else (bytes that fail their hash on every copy), it fails (the
    /// kernel is answered `EIO`), logged with `what` (the file, the offset) and the
    /// reason, and counted.
    fn patiently<T>(
        &self,
        what: impl Fn() -> String,
        mut op: impl FnMut() -> Result<T>,
    ) -> Result<T> {
        let started = Instant::now();
        let deadline = started + self.read_timeout;
        let mut pause = Duration::from_millis(100);
        let result = sealvol_core::deadline::within(deadline, || {
            loop {
                match op() {
                    Err(e)
                        if e.kind() == ErrorKind::Unavailable
                            && Instant::now() + pause < deadline =>
                    {
                        tracing::warn!("{}: {e}; trying again", what());
                        add(&self.tiers.counters.retries, 1);
                        std::thread::sleep(pause);
                        pause = (pause * 2).min(Duration::from_secs(5));
                    }
                    other => return other,
                }
            }
        });
        result.map_err(|e| {
            add(&self.tiers.counters.errors, 1);
            tracing::error!(
                "{} failed with EIO after {:.1} s: {e}",
                what(),
                started.elapsed().as_secs_f64()
            );
            e
        })
    }

    /// The order in which readers first asked for chunks, if it changed since the last
    /// call: what `volume profile save` stores.
    pub fn recording(&self) -> Option<Vec<Step>> {
        self.recorder.take_changed()
    }

    /// Reads ahead in the order of a saved read profile, except the `.safetensors`
    /// files: their own plans read them by their headers, in large pieces, following
    /// the reader, where a recorded order of runs of a few MiB each would be one range
    /// read per run (on a bucket that slowed a load 4×: BENCHMARKS.md).
    pub fn replay(&self, steps: Vec<Step>) {
        let planned = self.tree.tensor_files();
        let steps = steps.into_iter().filter(|s| !planned.contains(&s.file));
        self.prefetcher.replay(steps.collect());
    }

    /// Read-ahead plans with pieces left to fetch.
    pub fn plans(&self) -> usize {
        self.prefetcher.plans()
    }

    /// Read-ahead queued, under way or planned (`Prefetcher::pending`).
    pub fn prefetch_pending(&self) -> usize {
        self.prefetcher.pending()
    }

    /// Whether read-ahead waits for a reader (`Prefetcher::at_rest`).
    pub fn prefetch_at_rest(&self) -> bool {
        self.prefetcher.at_rest()
    }

    /// Whether whole files are still being written to the node cache.
    pub fn is_keeping(&self) -> bool {
        !sealvol_core::lock(&self.keeping).is_empty()
    }

    pub fn statfs(&self) -> Statfs {
        Statfs {
            blocks: self.tree.bytes().div_ceil(4096),
            files: self.tree.inodes(),
            block_size: 4096,
            name_max: 255,
        }
    }
}

/// Bytes of RAM this node has.
fn physical_memory() -> u64 {
    // SAFETY: sysconf only reads system configuration.
    let (pages, size) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    (pages.max(0) as u64).saturating_mul(size.max(0) as u64)
}

/// Returns once no read has arrived for a quarter of a second.
fn wait_until_idle(counters: &sealvol_core::read::Counters) {
    while sealvol_core::read::now_ms().saturating_sub(counters.last_read_ms.load(Ordering::Relaxed))
        < 250
    {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// This process's peak resident memory (`VmHWM` in /proc/self/status), in bytes; 0
/// where the kernel does not say.
fn resident_peak() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
            let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kb.saturating_mul(1024))
        })
        .unwrap_or(0)
}
